//! Host interfaces (TAP) against the real kernel, in a network namespace (needs root and
//! tcpdump; CI has them).

use headroom_afpacket::lab::NetnsGuard;
use headroom_linux_cp::tap::TapInterface;
use headroom_wire::ethernet::MacAddress;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

struct Netns(String);

impl Netns {
    fn new() -> Self {
        // SAFETY: geteuid has no preconditions.
        let euid = unsafe { libc::geteuid() };
        assert_eq!(euid, 0, "these tests need root (namespaces, TAP)");
        let name = format!("hr-tap-{}", std::process::id());
        run("ip", &["netns", "add", &name]);
        Self(name)
    }

    fn ip(&self, args: &str) -> String {
        let mut full = vec!["-n", self.0.as_str()];
        full.extend(args.split_whitespace());
        run("ip", &full)
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).status();
    }
}

fn run(program: &str, args: &[&str]) -> String {
    let out = Command::new(program)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{program} could not run: {e}"));
    assert!(
        out.status.success(),
        "{program} {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").unwrap().count()
}

const MAC: MacAddress = MacAddress([0x02, 0x48, 0x52, 0x00, 0x00, 0x10]);

#[test]
fn a_tap_host_interface_carries_frames_both_ways_and_goes_away_when_dropped() {
    let ns = Netns::new();
    let fds_before = open_fds();
    let tap = {
        let _in_ns = NetnsGuard::enter(&ns.0).unwrap();
        TapInterface::create("Ethernet0", MAC, Some(9100)).expect("create the TAP")
    };
    assert_eq!(tap.name(), "Ethernet0");
    let link = ns.ip("-o link show Ethernet0");
    assert!(link.contains("link/ether 02:48:52:00:00:10"), "{link}");
    assert!(link.contains("mtu 9100"), "{link}");
    assert!(
        link.contains(",UP,") || link.contains("<UP,") || link.contains(",UP>"),
        "{link}"
    );
    assert!(link.contains("LOWER_UP"), "carrier on at creation: {link}");

    // Carrier follows the port.
    tap.set_carrier(false).unwrap();
    let link = ns.ip("-o link show Ethernet0");
    assert!(
        link.contains("NO-CARRIER") && !link.contains("LOWER_UP"),
        "{link}"
    );
    tap.set_carrier(true).unwrap();
    assert!(ns.ip("-o link show Ethernet0").contains("LOWER_UP"));

    // A punted frame written to the TAP is what tcpdump on the interface sees.
    let mut tcpdump = Command::new("timeout")
        .args([
            "10",
            "ip",
            "netns",
            "exec",
            &ns.0,
            "tcpdump",
            "-i",
            "Ethernet0",
            "-nn",
            "-e",
            "-l",
            "-c",
            "1",
            "ether",
            "proto",
            "0x88b5",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("tcpdump (apt install tcpdump)");
    let mut stderr = BufReader::new(tcpdump.stderr.take().unwrap());
    let mut line = String::new();
    while !line.contains("listening on") {
        line.clear();
        assert!(
            stderr.read_line(&mut line).unwrap() > 0,
            "tcpdump did not start"
        );
    }
    let mut frame = vec![0xff; 6];
    frame.extend_from_slice(&[0x02, 0, 0, 0, 0, 0x99]);
    frame.extend_from_slice(&[0x88, 0xb5]);
    frame.extend_from_slice(b"headroom punt test");
    frame.resize(60, 0);
    assert!(tap.write_frame(&frame).unwrap());
    let out = tcpdump.wait_with_output().unwrap();
    drop(stderr);
    let printed = String::from_utf8_lossy(&out.stdout);
    assert!(
        printed.contains("02:00:00:00:00:99 > ff:ff:ff:ff:ff:ff"),
        "tcpdump printed: {printed}"
    );
    assert!(printed.contains("length 60"), "{printed}");

    // What the kernel sends is read back: its ARP request for a neighbour on the subnet.
    ns.ip("addr add 10.0.0.1/24 dev Ethernet0");
    {
        // A datagram to 10.0.0.2 makes the kernel resolve it.
        let _in_ns = NetnsGuard::enter(&ns.0).unwrap();
        let socket = std::net::UdpSocket::bind("0.0.0.0:0").unwrap();
        socket.send_to(b"x", "10.0.0.2:9").unwrap();
    }
    let deadline = Instant::now() + Duration::from_secs(3);
    let mut buffer = [0u8; 2048];
    let arp = loop {
        assert!(
            Instant::now() < deadline,
            "no ARP request read from the TAP"
        );
        match tap.read_frame(&mut buffer).unwrap() {
            Some(n) if n >= 42 && buffer[12..14] == [0x08, 0x06] => break buffer[..n].to_vec(),
            Some(_) => {} // IPv6 router solicitations, MLD, …
            None => std::thread::sleep(Duration::from_millis(10)),
        }
    };
    assert_eq!(&arp[0..6], &[0xff; 6], "broadcast");
    assert_eq!(&arp[6..12], &MAC.0, "from the port's MAC");
    assert_eq!(&arp[20..22], &[0, 1], "ARP request");
    assert_eq!(&arp[28..32], &[10, 0, 0, 1], "sender IP");
    assert_eq!(&arp[38..42], &[10, 0, 0, 2], "target IP");

    // A name that is not a valid interface name is refused, not truncated.
    {
        let _in_ns = NetnsGuard::enter(&ns.0).unwrap();
        assert!(TapInterface::create("Ethernet0-much-too-long", MAC, None).is_err());
        assert!(
            TapInterface::create("Ethernet0", MAC, None).is_err(),
            "the name is taken"
        );
    }

    drop(tap);
    let gone = Command::new("ip")
        .args(["-n", &ns.0, "link", "show", "Ethernet0"])
        .output()
        .unwrap();
    assert!(!gone.status.success(), "the TAP outlived its descriptor");
    assert_eq!(open_fds(), fds_before, "descriptors leaked");
}
