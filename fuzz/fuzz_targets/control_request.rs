//! The control socket's request parser (`headroom_runtime::protocol::parse_request`, one line as
//! a client sends it) and, for `set` requests, the TOML edit it leads to
//! (`headroom_runtime::control::edit_key`) and the validation of the edited configuration.
//! Whatever the bytes: no panic; a refusal says why; an accepted request serialises back to a
//! line that parses to the same request.
#![no_main]

use headroom_runtime::control::edit_key;
use headroom_runtime::protocol::{parse_request, Change, Request};
use libfuzzer_sys::fuzz_target;

const RUNNING: &str = "# running configuration\n[switch]\nname = \"fuzz\"\ndriver = \"memory\"\n\n\
    [port.Ethernet0]\ndevice = \"m0\"\nspeed = \"10G\"\ncable_length = \"5m\"\n\n\
    [port.Ethernet4]\ndevice = \"m1\"\nspeed = \"10G\"\n\n\
    [buffer_profile.lossless]\npool = \"ingress_lossless_pool\"\nsize = 0\ndynamic_th = -2\n";

fuzz_target!(|data: &[u8]| {
    match parse_request(data) {
        Ok(request) => {
            let line = serde_json::to_vec(&request).expect("a request serialises");
            assert_eq!(parse_request(&line).as_ref(), Ok(&request));
            if let Request::Set {
                change: Change::Key { key, value },
            } = &request
            {
                match edit_key(RUNNING, key, value) {
                    Ok(text) => {
                        let _ = headroom_config::parse(&text, "set.toml");
                    }
                    Err(why) => assert!(!why.is_empty()),
                }
            }
        }
        Err(why) => assert!(
            why.starts_with("bad request") || why.starts_with("request refused"),
            "{why}"
        ),
    }
});
