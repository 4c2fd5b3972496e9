//! rocegen's out-of-band exchange parser (`headroom_rocegen::oob::MessageReader`): a TCP byte
//! stream cut into pieces at arbitrary places. Whatever the bytes and the cuts: no panic, every
//! byte is consumed, a decoded message re-encodes to a line that decodes to the same message,
//! and the same stream fed in one piece decodes to the same messages.
#![no_main]

use headroom_rocegen::oob::{Message, MessageReader};
use libfuzzer_sys::fuzz_target;

/// Feeds `stream` in pieces of the given sizes (cycled); returns the messages and how many
/// lines were refused.
fn decode(stream: &[u8], cuts: &[u8]) -> (Vec<Message>, usize) {
    let mut reader = MessageReader::default();
    let (mut messages, mut refused) = (Vec::new(), 0);
    let mut rest = stream;
    let mut i = 0;
    while !rest.is_empty() {
        let size = cuts.get(i % cuts.len().max(1)).map_or(rest.len(), |&c| usize::from(c).max(1));
        let piece = &rest[..size.min(rest.len())];
        let mut offered = piece;
        while !offered.is_empty() {
            let (taken, message) = reader.feed(offered);
            assert!(taken > 0 && taken <= offered.len());
            match message {
                Some(Ok(m)) => messages.push(m),
                Some(Err(_)) => refused += 1,
                None => assert_eq!(taken, offered.len()),
            }
            offered = &offered[taken..];
        }
        rest = &rest[piece.len()..];
        i += 1;
    }
    (messages, refused)
}

fuzz_target!(|data: &[u8]| {
    // The first byte says how many of the next bytes are cut sizes.
    let Some((&n, rest)) = data.split_first() else {
        return;
    };
    let (cuts, stream) = rest.split_at(usize::from(n % 16).min(rest.len()));
    let (messages, refused) = decode(stream, cuts);
    assert_eq!(decode(stream, &[]), (messages.clone(), refused));
    for m in messages {
        let mut line = serde_json::to_vec(&m).expect("a message serialises");
        line.push(b'\n');
        assert_eq!(decode(&line, &[]).0, vec![m]);
    }
});
