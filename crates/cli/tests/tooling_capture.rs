//! `headroom capture --port X --control-only -w f.pcap` (the real binary) against an in-process
//! switch whose control loop runs on the test thread: the pcap holds exactly the MAC Control
//! frames of the port, and tshark decodes them as PFC / PAUSE.

#[path = "../../runtime/tests/control_harness/mod.rs"]
mod control_harness;

use control_harness::{config_text, pause_frame, pfc_frame, udp_frame, Switch, A, C, DEADLINE};
use headroom_runtime::protocol::{Change, Request};
use pcap_file::pcap::PcapReader;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Instant;

fn spawn_capture(sw: &Switch, port: &str, pcap: &Path, count: u32) -> Child {
    Command::new(env!("CARGO_BIN_EXE_headroom"))
        .args(["capture", "--port", port, "--control-only", "--count"])
        .arg(count.to_string())
        .args(["--duration", "60", "-w"])
        .arg(pcap)
        .arg("--socket")
        .arg(&sw.socket)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run headroom capture")
}

/// Serves the control socket until `headroom capture` registered on `port`.
fn wait_capturing(sw: &mut Switch, port: usize) {
    sw.wait_for("headroom capture to connect", |sw| {
        sw.running().capture_control().get(port) != 0
    });
}

/// Serves the control socket until the capture process exits; returns its stderr.
fn wait_exit(sw: &mut Switch, mut child: Child) -> String {
    let end = Instant::now() + DEADLINE;
    loop {
        sw.poll();
        if let Some(status) = child.try_wait().unwrap() {
            let out = child.wait_with_output().unwrap();
            let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
            assert!(status.success(), "headroom capture failed: {stderr}");
            return stderr;
        }
        assert!(Instant::now() < end, "headroom capture did not finish");
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
}

fn read_pcap(path: &Path) -> Vec<Vec<u8>> {
    let mut reader = PcapReader::new(std::fs::File::open(path).unwrap()).unwrap();
    assert_eq!(
        reader.header().datalink,
        pcap_file::DataLink::ETHERNET,
        "Ethernet link type"
    );
    let mut frames = Vec::new();
    while let Some(p) = reader.next_packet() {
        let p = p.unwrap();
        assert_eq!(p.orig_len as usize, p.data.len(), "not truncated");
        frames.push(p.data.into_owned());
    }
    frames
}

/// tshark's reading: (opcode, class-enable vector, enable bit 3, pause time of 3, 802.3x pause
/// time, expert messages) per frame.
fn tshark_fields(path: &Path) -> Vec<Vec<String>> {
    let out = match Command::new("tshark")
        .arg("-r")
        .arg(path)
        .args(["-T", "fields", "-E", "separator=|"])
        .args([
            "-e",
            "macc.opcode",
            "-e",
            "macc.cbfc.enbv",
            "-e",
            "macc.cbfc.enbv.c3",
        ])
        .args(["-e", "macc.cbfc.pause_time.c3", "-e", "macc.pause_time"])
        .args(["-e", "_ws.expert.message"])
        .output()
    {
        Ok(o) => o,
        Err(e) => panic!("tshark is needed to decode the capture ({e}): apt-get install tshark"),
    };
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| l.split('|').map(str::to_owned).collect())
        .collect()
}

#[test]
fn capture_writes_the_received_mac_control_frames_and_tshark_decodes_them() {
    let mut sw = Switch::start(&config_text(""));
    let dir = tempfile::tempdir().unwrap();
    let pcap = dir.path().join("eth4.pcap");
    let child = spawn_capture(&sw, "Ethernet4", &pcap, 3);
    wait_capturing(&mut sw, 1);
    // Data frames are left out (control only); the capture stops after 3 frames.
    let frames = [
        udp_frame(C, A, 3, 0, 300),
        pfc_frame(C, 0b1000, 0xffff),
        pause_frame(C, 100),
        udp_frame(C, A, 4, 0, 300),
        pfc_frame(C, 0b1000, 0),
    ];
    for f in &frames {
        sw.inject(1, f);
    }
    let stderr = wait_exit(&mut sw, child);
    assert!(stderr.contains("3 frames written to"), "{stderr}");
    sw.wait_for("the capture to be released", |sw| {
        sw.running().capture_control().get(1) == 0
    });

    let got = read_pcap(&pcap);
    assert_eq!(
        got,
        [frames[1].clone(), frames[2].clone(), frames[4].clone()]
    );
    let fields = tshark_fields(&pcap);
    assert_eq!(
        fields,
        [
            ["0x0101", "0x0008", "1", "65535", "", ""],
            ["0x0001", "", "", "", "100", ""],
            ["0x0101", "0x0008", "1", "0", "", ""],
        ]
        .map(|r| r.map(str::to_owned).to_vec())
    );
    sw.stop();
}

#[test]
fn capture_refuses_an_unknown_port() {
    let mut sw = Switch::start(&config_text(""));
    let dir = tempfile::tempdir().unwrap();
    let pcap = dir.path().join("x.pcap");
    let child = spawn_capture(&sw, "Ethernet99", &pcap, 1);
    let end = Instant::now() + DEADLINE;
    let mut child = child;
    let status = loop {
        sw.poll();
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(Instant::now() < end);
        std::thread::sleep(std::time::Duration::from_millis(1));
    };
    let out = child.wait_with_output().unwrap();
    assert!(!status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("no port named Ethernet99"));
    assert!(!pcap.exists(), "no file for a refused capture");
    sw.stop();
}

/// The PFC frames the switch itself generates, captured on the congested source's port.
#[test]
fn capture_records_the_pfc_frames_the_switch_generates() {
    let mut sw = Switch::start(&config_text(""));
    let config = sw.control.config().clone();
    let derived = headroom_config::derived(&config);
    let xoff_point = derived.ports[0].priority_groups[3]
        .xoff_point_bytes
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let pcap = dir.path().join("eth0.pcap");
    sw.learn_c();
    // XOFF, then XON: two frames at least.
    let child = spawn_capture(&sw, "Ethernet0", &pcap, 2);
    wait_capturing(&mut sw, 0);
    let set_tx = |sw: &mut Switch, enable: bool| {
        let r = sw.request(&Request::Set {
            change: Change::PortTx {
                port: "Ethernet4".into(),
                enable,
            },
        });
        assert!(r.ok);
    };
    set_tx(&mut sw, false);
    let n = xoff_point.div_ceil(1024) + 4;
    for _ in 0..n {
        sw.inject(0, &udp_frame(A, C, 3, 0, 1000));
    }
    let first = sw.collect(0, 1);
    let _ = wait_exit(&mut sw, child);
    set_tx(&mut sw, true);
    let got = read_pcap(&pcap);
    assert_eq!(got.len(), 2);
    assert_eq!(got[0], first[0], "the frame on the wire");
    for (f, row) in got.iter().zip(tshark_fields(&pcap)) {
        assert_eq!(&f[6..12], &config.ports[0].mac);
        assert_eq!(row[0], "0x0101", "PFC opcode");
        assert_eq!(row[2], "1", "class-enable bit of priority 3");
        assert_eq!(row[5], "", "no expert message");
    }
    sw.stop();
}
