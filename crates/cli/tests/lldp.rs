//! The running switch's LLDP/DCBX agent against the real host-side agents in `headroom lab`
//! host namespaces (issue 16): lldpd (plain LLDP) and lldpad (Intel's DCBX agent, willing).
//!
//! * lldpd in h0: it lists the switch (chassis = `switch.mac`, port ID = the port name, system
//!   name, TTL 120) in `lldpcli -f json show neighbors`, and `headroom show lldp neighbors` lists
//!   lldpd; then lldpd plays an unwilling host that pauses other priorities (its custom TLVs
//!   carry an 802.1Qaz PFC Configuration and APP): `headroom show dcbx` reports the mismatch
//!   and the switch logs it once, whatever lldpd resends; when the switch stops, its TTL-0
//!   LLDPDU makes lldpd forget it at once.
//! * the lab's own lldpad (`headroom lab --host-dcbx lldpad`: every host, willing), seen from
//!   h1: `lldptool -t -n -i eth0 -V PFC` (the peer view) shows the switch's `pfc_enable`,
//!   `-V APP` the RoCEv2 entry (UDP 4791 → priority 3); lldpad refuses DCB on the veth (its log,
//!   lldptool's "Device not capable" and the lab's one-line note are the oracle for what it
//!   could adopt); the switch lists both hosts' lldpad as neighbours (plain LLDP: `no-dcbx`);
//!   re-running the lab restarts a dead lldpad and keeps a live one; `lab down` stops them all.
//!
//! * a routed port gives its punted LLDP to the agent (a neighbour, nothing on its host
//!   interface); one whose `lldp_admin_status` is `disabled` gives it to its host interface.
//!
//! Needs root, lldpd/lldpcli (Debian `lldpd`), lldpad/lldptool (`lldpad`), tcpdump, tshark and
//! unshare.

mod common;

use common::lab_config::{host_mac, mac_text, HOST_DEVICE, RUN_DIR};
use common::{eventually, require, Capture, Lab, HEADROOM};
use serde_json::Value;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// lldpd and lldpad send their first LLDPDU within a second or two; lldpd's custom TLVs are
/// sent at once.
const WAIT: Duration = Duration::from_secs(15);

/// `headroom <args> -s <the lab's socket>`.
fn headroom(lab: &Lab, args: &[&str]) -> Output {
    let socket = Path::new(RUN_DIR).join(format!("{}.sock", lab.spec.switch_name()));
    Command::new(HEADROOM)
        .args(args)
        .arg("-s")
        .arg(socket)
        .output()
        .unwrap_or_else(|e| panic!("headroom {args:?}: {e}"))
}

fn headroom_json(lab: &Lab, args: &[&str]) -> Value {
    let mut with = args.to_vec();
    with.push("--json");
    let out = headroom(lab, &with);
    assert!(
        out.status.success(),
        "headroom {with:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{with:?}: {e}"))
}

/// stdout and stderr of `program args` in host `i`, whatever its status.
fn host(lab: &Lab, i: usize, program: &str, args: &[&str]) -> String {
    let out = lab.host_cmd(i, program, args).output().unwrap();
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// A daemon in a host namespace, in its own process group (lldpd forks), terminated on drop.
struct Daemon {
    child: Child,
    log: PathBuf,
}

impl Daemon {
    fn spawn(lab: &Lab, i: usize, log: PathBuf, program: &str, args: &[&str]) -> Self {
        use std::os::unix::process::CommandExt;
        let out = File::create(&log).unwrap();
        let child = lab
            .host_cmd(i, program, args)
            .stdin(Stdio::null())
            .stdout(out.try_clone().unwrap())
            .stderr(out)
            .process_group(0)
            .spawn()
            .unwrap_or_else(|e| panic!("starting {program}: {e}"));
        Self { child, log }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let group = -libc::pid_t::try_from(self.child.id()).unwrap();
        // SAFETY: kill(2) on the process group we created for this child; no memory involved.
        unsafe { libc::kill(group, libc::SIGTERM) };
        if !eventually(Duration::from_secs(1), || {
            matches!(self.child.try_wait(), Ok(Some(_)))
        }) {
            // SAFETY: as above.
            unsafe { libc::kill(group, libc::SIGKILL) };
            let _ = self.child.wait();
        }
    }
}

/// Polls `probe` until `accept` holds (or `WAIT` passes); returns the last output.
fn wait_output(mut probe: impl FnMut() -> String, accept: impl Fn(&str) -> bool) -> String {
    let end = Instant::now() + WAIT;
    loop {
        let out = probe();
        if accept(&out) || Instant::now() >= end {
            return out;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn lldpd_sees_the_switch_the_switch_sees_lldpd_and_judges_its_dcbx_once() {
    require(&["lldpd", "lldpcli", "tcpdump", "tshark"]);
    let started = Instant::now();
    let mut lab = Lab::up(2, "1G");
    lab.lldp = true;
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("lldpd.socket");
    let socket = socket.to_str().unwrap().to_owned();
    let conf = dir.path().join("lldpd.conf");
    std::fs::write(&conf, "").unwrap();
    // lldpd chroots its unprivileged half into /run/lldpd.
    std::fs::create_dir_all("/run/lldpd").unwrap();
    let lldpd = Daemon::spawn(
        &lab,
        0,
        dir.path().join("lldpd.log"),
        "lldpd",
        &[
            "-d",
            "-u",
            &socket,
            "-O",
            conf.to_str().unwrap(),
            "-S",
            "host h0",
        ],
    );
    let lldpcli = |args: &[&str]| {
        let mut full = vec!["-u", socket.as_str()];
        full.extend_from_slice(args);
        host(&lab, 0, "lldpcli", &full)
    };
    assert!(
        eventually(WAIT, || lab
            .host_cmd(0, "lldpcli", &["-u", &socket, "show", "chassis"])
            .output()
            .unwrap()
            .status
            .success()),
        "lldpd did not start:\n{}",
        lldpd.log()
    );
    // What the switch sends h0, as tshark decodes it.
    let mut capture = Capture::start(&lab, 0, "ether proto 0x88cc", dir.path().join("lldp.pcap"));
    let switch = lab.start_switch();

    // lldpd lists the switch.
    let out = wait_output(
        || lldpcli(&["-f", "json", "show", "neighbors"]),
        |o| o.contains("Ethernet0"),
    );
    eprintln!("lldpcli -f json show neighbors:\n{out}");
    let json: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    let interface = &json["lldp"]["interface"][HOST_DEVICE];
    let (name, chassis) = interface["chassis"]
        .as_object()
        .and_then(|c| c.iter().next())
        .unwrap_or_else(|| panic!("no chassis in {json:#}"));
    assert_eq!(name, &lab.spec.switch_name(), "{json:#}");
    assert_eq!(chassis["id"]["type"], "mac", "{json:#}");
    assert_eq!(chassis["id"]["value"], "02:68:72:00:00:00", "{json:#}");
    assert_eq!(interface["port"]["id"]["type"], "ifname", "{json:#}");
    assert_eq!(interface["port"]["id"]["value"], "Ethernet0", "{json:#}");
    assert_eq!(interface["port"]["ttl"], "120", "{json:#}");

    // The switch's LLDPDUs leave its port as the agent built them (the inject path does not
    // tag them), and tshark decodes every TLV without expert info: the 802.1Qaz TLVs, PFC on 3
    // and 4.
    let rows = capture.fields(
        "lldp && eth.src == 02:68:72:00:00:01",
        &[
            "lldp.port.id",
            "lldp.time_to_live",
            "lldp.ieee.802_1.subtype",
            "lldp.dcbx.feature.pfc.prio3",
            "lldp.dcbx.feature.pfc.prio4",
            "lldp.dcbx.feature.pfc.prio5",
            "vlan.id",
            "_ws.expert.message",
            "_ws.malformed",
        ],
    );
    eprintln!("tshark, the switch's LLDPDUs to h0: {rows:?}");
    assert!(!rows.is_empty(), "no LLDPDU from Ethernet0 captured");
    for row in &rows {
        assert_eq!(
            row,
            &[
                "Ethernet0",
                "120",
                "0x09,0x0a,0x0b,0x0c",
                "1",
                "1",
                "0",
                "",
                "",
                ""
            ],
            "{rows:?}"
        );
    }

    // The switch lists lldpd. lldpd sent its first LLDPDU before the switch ran and sends the
    // next one in 30 s; `lldpcli update` sends now.
    let _ = lldpcli(&["update"]);
    let h0 = mac_text(host_mac(0));
    let mut view = Value::Null;
    assert!(
        eventually(WAIT, || {
            view = headroom_json(&lab, &["show", "lldp", "neighbors"]);
            view["neighbors"].as_array().is_some_and(|n| !n.is_empty())
        }),
        "no neighbour: {view:#}"
    );
    let n = &view["neighbors"][0];
    assert_eq!(n["local_port"], "Ethernet0", "{view:#}");
    assert_eq!(n["chassis_id"], h0.as_str(), "{view:#}");
    assert_eq!(n["port_id"], h0.as_str(), "lldpd: port ID = MAC {view:#}");
    assert_eq!(n["system_description"], "host h0", "{view:#}");
    assert_eq!(n["ttl_s"], 120, "{view:#}");
    assert_eq!(n["dcbx"], false, "{view:#}");
    assert_eq!(view["ports"][0]["rx_discarded"], 0, "{view:#}");
    assert_eq!(view["ports"][0]["tx_inject_refused"], 0, "{view:#}");
    let table = String::from_utf8(headroom(&lab, &["show", "lldp", "neighbors"]).stdout).unwrap();
    eprintln!("headroom show lldp neighbors:\n{table}");
    assert!(
        table
            .lines()
            .any(|l| l.starts_with("Ethernet0") && l.contains(&h0)),
        "{table}"
    );
    let dcbx = headroom_json(&lab, &["show", "dcbx", "Ethernet0"]);
    assert_eq!(dcbx[0]["status"], "no-dcbx", "lldpd has no DCBX: {dcbx:#}");

    // lldpd plays an unwilling host with PFC on priority 3 only and RoCE on priority 5 (the
    // 802.1Qaz TLVs as custom TLVs: PFC Configuration willing 0, cap 8, enable 0x08; APP
    // priority 5, selector 3, port 4791).
    for tlv in [["11", "08,08"], ["12", "00,a3,12,b7"]] {
        let out = lab
            .host_cmd(
                0,
                "lldpcli",
                &[
                    "-u",
                    &socket,
                    "configure",
                    "lldp",
                    "custom-tlv",
                    "oui",
                    "00,80,c2",
                    "subtype",
                    tlv[0],
                    "oui-info",
                    tlv[1],
                ],
            )
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
    }
    let mut dcbx = Value::Null;
    assert!(
        eventually(WAIT, || {
            dcbx = headroom_json(&lab, &["show", "dcbx", "Ethernet0"]);
            dcbx[0]["findings"].as_array().is_some_and(|f| f.len() == 3)
        }),
        "{dcbx:#}"
    );
    eprintln!("headroom show dcbx Ethernet0 --json:\n{dcbx:#}");
    let row = &dcbx[0];
    assert_eq!(row["status"], "mismatch");
    let codes: Vec<&str> = row["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["code"].as_str().unwrap())
        .collect();
    assert_eq!(
        codes,
        [
            "peer_pfc_off_lossless_priorities",
            "roce_on_lossy_priority",
            "peer_not_willing"
        ]
    );
    assert_eq!(row["peer"]["pfc"]["enable"], "3");
    assert_eq!(row["peer"]["pfc"]["willing"], false);
    assert_eq!(row["local"]["pfc"]["enable"], "3,4");
    let table = String::from_utf8(headroom(&lab, &["show", "dcbx"]).stdout).unwrap();
    eprintln!("headroom show dcbx:\n{table}");
    assert!(
        table
            .lines()
            .any(|l| l.split_whitespace().take(2).eq(["Ethernet0", "mismatch"])),
        "{table}"
    );
    let detail = String::from_utf8(headroom(&lab, &["show", "dcbx", "Ethernet0"]).stdout).unwrap();
    eprintln!("headroom show dcbx Ethernet0:\n{detail}");
    assert!(detail.contains("Verdict: mismatch"), "{detail}");
    assert!(
        detail.contains(
            "mismatch: priority 4 is lossless here but the peer does not enable PFC on it"
        ),
        "{detail}"
    );
    // lldpd sends the same LLDPDU again: refreshed, not logged again.
    let received = |lab: &Lab| {
        headroom_json(lab, &["show", "lldp", "neighbors"])["ports"][0]["rx_frames"]
            .as_u64()
            .unwrap()
    };
    let before = received(&lab);
    let _ = lldpcli(&["update"]);
    assert!(
        eventually(WAIT, || received(&lab) > before),
        "lldpd did not send again"
    );
    // Each custom TLV made lldpd send at once, so the verdict may have changed twice (PFC, then
    // PFC and RoCE): the final verdict is logged once, and nothing after the resend.
    let mismatch_lines = |log: &str| {
        log.lines()
            .filter(|l| {
                l.contains("DCBX mismatch on port Ethernet0")
                    && l.contains("peer maps RoCEv2 (UDP 4791) to priority 5")
            })
            .count()
    };
    assert_eq!(mismatch_lines(&switch.stderr()), 1, "{}", switch.stderr());
    let metrics = headroom_json(&lab, &["show", "lldp", "neighbors"]);
    assert!(metrics["recent_events"]
        .as_array()
        .unwrap()
        .iter()
        .any(|e| e["kind"] == "dcbx_verdict" && e["port"] == "Ethernet0"));

    // The switch stops: its TTL-0 LLDPDU makes lldpd forget it now, not in 120 s.
    let report = switch.stop();
    assert_eq!(mismatch_lines(&report.log), 1, "{}", report.log);
    let out = wait_output(
        || lldpcli(&["-f", "json", "show", "neighbors"]),
        |o| !o.contains("Ethernet0"),
    );
    assert!(
        !out.contains("Ethernet0"),
        "lldpd still lists the switch:\n{out}"
    );
    drop(lldpd);
    eprintln!("took {:?}", started.elapsed());
}

/// The lldpad processes in host `i` of `lab` (zombies excluded).
fn lldpad_pids(lab: &Lab, i: usize) -> Vec<u32> {
    let out = Command::new("ip")
        .args(["netns", "pids", &lab.host_ns(i)])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .filter(|&pid| alive_lldpad(pid))
        .collect()
}

/// Whether `pid` is a live (not zombie) lldpad.
fn alive_lldpad(pid: u32) -> bool {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    stat.split_once('(')
        .and_then(|(_, rest)| rest.rsplit_once(')'))
        .is_some_and(|(comm, rest)| comm == "lldpad" && !rest.trim_start().starts_with('Z'))
}

#[test]
fn a_willing_lldpad_decodes_the_switchs_pfc_and_app_and_the_switch_decodes_lldpad() {
    require(&["lldpad", "lldptool", "unshare", "setsid"]);
    let started = Instant::now();
    // `headroom lab --host-dcbx lldpad`: lldpad in every host, configured as a user does on a
    // host with a DCB-capable NIC (docs/operations.md): LLDP rx/tx, ETS, PFC and APP advertised
    // and willing.
    let lab = Lab::up_with_lldpad(2, "1G");
    let lldptool = |args: &[&str]| host(&lab, 1, "lldptool", args);
    let admin = lldptool(&["-l", "-i", HOST_DEVICE, "adminStatus"]);
    assert!(admin.contains("adminStatus=rxtx"), "{admin}");
    let pids: Vec<Vec<u32>> = (0..2).map(|i| lldpad_pids(&lab, i)).collect();
    assert!(
        pids.iter().all(|p| p.len() == 1),
        "one lldpad per host: {pids:?}"
    );
    // Re-running the lab repairs: h0's lldpad killed, h1's kept (starting the switch below runs
    // `headroom lab` again).
    // SAFETY: kill(2) on the lldpad process listed in our lab's namespace; no memory involved.
    unsafe { libc::kill(libc::pid_t::try_from(pids[0][0]).unwrap(), libc::SIGKILL) };
    assert!(
        eventually(WAIT, || lldpad_pids(&lab, 0).is_empty()),
        "h0's lldpad survived SIGKILL"
    );
    let switch = lab.start_switch();
    let restarted = lldpad_pids(&lab, 0);
    assert_eq!(restarted.len(), 1, "the lab did not restart h0's lldpad");
    assert_ne!(restarted, pids[0]);
    assert_eq!(
        lldpad_pids(&lab, 1),
        pids[1],
        "the lab restarted a running lldpad"
    );

    // lldpad decodes the switch's PFC and APP as its peer's.
    let pfc = wait_output(
        || lldptool(&["-t", "-n", "-i", HOST_DEVICE, "-V", "PFC"]),
        |o| o.contains("PFC enabled"),
    );
    eprintln!("lldptool -t -n -i eth0 -V PFC:\n{pfc}");
    assert!(pfc.contains("Willing: no"), "{pfc}");
    assert!(pfc.contains("PFC capable traffic classes: 8"), "{pfc}");
    assert!(
        pfc.contains("PFC enabled: 3 4"),
        "the switch's pfc_enable: {pfc}"
    );
    let app = lldptool(&["-t", "-n", "-i", HOST_DEVICE, "-V", "APP"]);
    eprintln!("lldptool -t -n -i eth0 -V APP:\n{app}");
    let first = app
        .lines()
        .find(|l| l.contains("App#"))
        .unwrap_or_else(|| panic!("no APP entries: {app}"));
    assert!(
        first.contains("Prio 3") && first.contains("Sel 3") && first.contains("4791"),
        "RoCEv2 → priority 3: {app}"
    );
    let all = lldptool(&["-t", "-n", "-i", HOST_DEVICE]);
    assert!(all.contains("MAC: 02:68:72:00:00:00"), "{all}");
    assert!(all.contains("Ifname: Ethernet1"), "{all}");

    // Adoption: where the interface lets it, a willing lldpad runs the switch's PFC. A veth
    // has no DCB operations; lldpad says so in its log (the lab's, in /run/headroom) and
    // refuses every DCB setting, which the lab reports in one line.
    let log_path = PathBuf::from(format!("{RUN_DIR}/{}-lldpad.log", lab.host_ns(1)));
    let mut log = String::new();
    let _ = eventually(WAIT, || {
        log = std::fs::read_to_string(&log_path).unwrap_or_default();
        log.contains("does not support DCB")
    });
    let dcb_lines: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("DCB") || l.contains("dcb"))
        .collect();
    eprintln!("lldpad's log, DCB lines:\n{}", dcb_lines.join("\n"));
    let local_pfc = lldptool(&["-t", "-i", HOST_DEVICE, "-V", "PFC", "-c", "enabled"]);
    eprintln!(
        "lldptool -t -i eth0 -V PFC -c enabled: {}",
        local_pfc.trim()
    );
    let no_dcb = log.contains("does not support DCB");
    let note = switch
        .stdout()
        .lines()
        .filter(|l| l.contains("cannot apply DCB"))
        .map(str::to_owned)
        .collect::<Vec<_>>();
    if no_dcb {
        assert_eq!(note.len(), 1, "one line about DCB: {}", switch.stdout());
        assert!(note[0].contains(&lab.host_ns(1)), "{note:?}");
        let willing = lldptool(&["-T", "-i", HOST_DEVICE, "-V", "PFC", "willing=yes"]);
        assert!(willing.contains("Device not capable"), "{willing}");
        // Nor can it play an unwilling host with other priorities here (the lldpd test does,
        // with custom TLVs): lldpad sends no 802.1Qaz TLV on an interface without DCB.
        let unwilling = lldptool(&[
            "-T",
            "-i",
            HOST_DEVICE,
            "-V",
            "PFC",
            "enabled=1,2",
            "willing=no",
        ]);
        eprintln!(
            "lldptool -T -i eth0 -V PFC enabled=1,2 willing=no: {}",
            unwilling.trim()
        );
        assert!(unwilling.contains("Device not capable"), "{unwilling}");
    } else {
        assert!(note.is_empty(), "{note:?}");
        assert!(
            local_pfc.contains("enabled=3,4"),
            "eth0 has DCB and lldpad is willing, but it did not adopt PFC 3,4: {local_pfc}"
        );
    }

    // The switch decodes lldpad's LLDPDU (plain LLDP on a veth: no DCBX TLVs), from both hosts.
    let mut view = Value::Null;
    for i in 0..2 {
        let mac = mac_text(host_mac(i));
        assert!(
            eventually(WAIT, || {
                view = headroom_json(&lab, &["show", "lldp", "neighbors"]);
                view["neighbors"]
                    .as_array()
                    .is_some_and(|n| n.iter().any(|n| n["chassis_id"] == mac.as_str()))
            }),
            "no neighbour from h{i}'s lldpad: {view:#}"
        );
    }
    let h1 = mac_text(host_mac(1));
    let n = view["neighbors"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["chassis_id"] == h1.as_str())
        .unwrap();
    assert_eq!(n["local_port"], "Ethernet1", "{view:#}");
    assert_eq!(n["ttl_s"], 120, "{view:#}");
    let errors: u64 = view["ports"][1]["rx_errors"]
        .as_object()
        .unwrap()
        .values()
        .map(|v| v.as_u64().unwrap())
        .sum();
    assert_eq!(errors, 0, "{view:#}");
    let dcbx = headroom_json(&lab, &["show", "dcbx", "Ethernet1"]);
    eprintln!("headroom show dcbx Ethernet1 --json:\n{dcbx:#}");
    assert_eq!(
        dcbx[0]["status"],
        if no_dcb { "no-dcbx" } else { "consistent" },
        "{dcbx:#}"
    );
    drop(switch.stop());

    // `headroom lab down` stops every lldpad of the lab and removes its files.
    let running: Vec<u32> = (0..2).flat_map(|i| lldpad_pids(&lab, i)).collect();
    assert_eq!(running.len(), 2, "{running:?}");
    let down = Command::new(HEADROOM)
        .args(["lab", "down", "--prefix", lab.prefix()])
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&down.stdout);
    let err = String::from_utf8_lossy(&down.stderr);
    assert!(down.status.success(), "{out}{err}");
    assert!(!err.contains("processes still run"), "{err}");
    assert!(
        eventually(WAIT, || !running.iter().any(|&p| alive_lldpad(p))),
        "lldpad outlived `headroom lab down`: {running:?}"
    );
    assert!(!log_path.exists(), "{} left behind", log_path.display());
    eprintln!("took {:?}", started.elapsed());
}

/// A minimal LLDPDU from `mac`: Chassis ID and Port ID (both the MAC), TTL 120, End; padded.
fn host_lldpdu(mac: [u8; 6]) -> Vec<u8> {
    let mut f = vec![0x01, 0x80, 0xc2, 0x00, 0x00, 0x0e];
    f.extend_from_slice(&mac);
    f.extend_from_slice(&[0x88, 0xcc]);
    f.extend_from_slice(&[0x02, 0x07, 0x04]); // Chassis ID, 7 bytes, subtype MAC
    f.extend_from_slice(&mac);
    f.extend_from_slice(&[0x04, 0x07, 0x03]); // Port ID, 7 bytes, subtype MAC
    f.extend_from_slice(&mac);
    f.extend_from_slice(&[0x06, 0x02, 0x00, 0x78, 0x00, 0x00]); // TTL 120, End
    f.resize(60, 0);
    f
}

#[test]
fn a_routed_port_gives_lldp_to_the_agent_unless_its_lldp_is_disabled() {
    require(&["sh"]);
    let started = Instant::now();
    let mut lab = Lab::up(2, "1G");
    lab.lldp = true;
    let (p0, p1) = (
        common::lab_config::port_name(0),
        common::lab_config::port_name(1),
    );
    // Both ports routed; Ethernet1's LLDP disabled (an lldpd on its host interface would own it).
    let mut spec = lab.spec.clone();
    spec.static_fdb = false;
    let generated = spec.config_toml();
    let routed = generated
        .replace(
            "vlan_mode = \"access\"\naccess_vlan = 1\n",
            "vlan_mode = \"routed\"\n",
        )
        .replace(
            &format!("[port.{p1}]\n"),
            &format!("[port.{p1}]\nlldp_admin_status = \"disabled\"\n"),
        );
    assert!(routed.contains("vlan_mode = \"routed\"") && routed.contains("\"disabled\""));
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("routed.toml");
    std::fs::write(&path, routed).unwrap();
    let switch = lab.start_switch_args(&["--config", path.to_str().unwrap()]);
    let punted_to_tap = |port: &str| {
        let view = headroom_json(&lab, &["show", "host-interfaces"]);
        view["interfaces"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["interface"] == port)
            .unwrap_or_else(|| panic!("no host interface {port}: {view:#}"))["punt_frames"]
            .as_u64()
            .unwrap()
    };
    let before = (punted_to_tap(&p0), punted_to_tap(&p1));
    for i in 0..2 {
        common::RawSocket::open(&lab.host_ns(i), HOST_DEVICE, 0)
            .send(&host_lldpdu(host_mac(i)))
            .expect("send an LLDPDU");
    }
    // Ethernet0: the agent's neighbour, not the TAP's frame.
    let h0 = mac_text(host_mac(0));
    let mut view = Value::Null;
    assert!(
        eventually(WAIT, || {
            view = headroom_json(&lab, &["show", "lldp", "neighbors"]);
            view["neighbors"]
                .as_array()
                .is_some_and(|n| n.iter().any(|n| n["chassis_id"] == h0.as_str()))
        }),
        "{view:#}"
    );
    // Ethernet1: its host interface's frame; the agent does not see it.
    assert!(
        eventually(WAIT, || punted_to_tap(&p1) == before.1 + 1),
        "the LLDPDU did not reach {p1}'s host interface"
    );
    let view = headroom_json(&lab, &["show", "lldp", "neighbors"]);
    assert_eq!(view["neighbors"].as_array().unwrap().len(), 1, "{view:#}");
    assert_eq!(view["ports"][1]["rx_frames"], 0, "{view:#}");
    assert_eq!(view["ports"][1]["admin_status"], "disabled", "{view:#}");
    assert_eq!(
        punted_to_tap(&p0),
        before.0,
        "{p0}'s LLDPDU went to its host interface too"
    );
    drop(switch.stop());
    eprintln!("took {:?}", started.elapsed());
}
