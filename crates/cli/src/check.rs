//! `headroom check`: validate and explain a configuration.

use std::fmt::Write as _;
use std::path::Path;
use std::process::ExitCode;

use headroom_config::Config;
use headroom_lldp::verdict::{priority_list, roce_priority};
use headroom_lldp::{evaluate, local_view, DcbxStatus, LocalDcbx, PeerDcbx};
use headroom_wire::lldp::dcbx::{AppEntry, AppSelector, PfcConfiguration, Tsa};

use crate::table::Table;

/// Exit code for a refused configuration or bad arguments.
pub(crate) const EXIT_BAD_INPUT: u8 = 2;

/// A host's DCBX configuration to judge against the switch's (`headroom check --host-…`).
#[derive(Debug, Clone, Default, clap::Args)]
pub(crate) struct HostArgs {
    /// Priorities the host enables PFC on, e.g. `3,4` (lldptool's `-V PFC enabled=`), or
    /// `none`.
    #[arg(long, value_name = "PRIORITIES")]
    host_pfc: Option<String>,
    /// The host is willing (adopts the switch's PFC; lldpad's default).
    #[arg(long, requires = "host_pfc")]
    host_willing: bool,
    /// An Application Priority entry of the host, `SELECTOR:PROTOCOL=PRIORITY` with SELECTOR one
    /// of `udp`, `tcp`, `any`, `dscp`, `ethertype`: `udp:4791=3` (RoCEv2), `dscp:26=3`,
    /// `ethertype:0x8915=3` (RoCEv1). Repeat for several.
    #[arg(long, value_name = "ENTRY", requires = "host_pfc")]
    host_app: Vec<String>,
}

impl HostArgs {
    /// The host as the mismatch rules see a peer; `Ok(None)` without `--host-pfc`.
    fn peer(&self) -> Result<Option<PeerDcbx>, String> {
        let Some(pfc) = &self.host_pfc else {
            return Ok(None);
        };
        let enable = parse_priorities(pfc)?;
        let app = self
            .host_app
            .iter()
            .map(|entry| parse_app(entry))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Some(PeerDcbx {
            pfc: Some(PfcConfiguration {
                willing: self.host_willing,
                mbc: false,
                pfc_cap: 8,
                enable,
            }),
            app: (!app.is_empty()).then_some(app),
            ..PeerDcbx::default()
        }))
    }
}

fn parse_priorities(text: &str) -> Result<u8, String> {
    if text.trim() == "none" {
        return Ok(0);
    }
    let mut bits = 0u8;
    for part in text.split(',') {
        let p: u8 = part
            .trim()
            .parse()
            .ok()
            .filter(|p| *p <= 7)
            .ok_or_else(|| {
                format!("--host-pfc {text:?}: {part:?} is not a priority 0..=7 (e.g. 3,4 or none)")
            })?;
        bits |= 1 << p;
    }
    Ok(bits)
}

fn parse_app(text: &str) -> Result<AppEntry, String> {
    let bad = |why: &str| {
        format!(
            "--host-app {text:?}: {why} (SELECTOR:PROTOCOL=PRIORITY, e.g. udp:4791=3 or dscp:26=3)"
        )
    };
    let (selector, rest) = text.split_once(':').ok_or_else(|| bad("no ':'"))?;
    let (protocol, priority) = rest.split_once('=').ok_or_else(|| bad("no '='"))?;
    let selector = match selector.trim() {
        "ethertype" => AppSelector::Ethertype,
        "tcp" => AppSelector::TcpSctpPort,
        "udp" => AppSelector::UdpDccpPort,
        "any" => AppSelector::AnyPort,
        "dscp" => AppSelector::Dscp,
        _ => return Err(bad("the selector is not udp, tcp, any, dscp or ethertype")),
    };
    let protocol = protocol.trim();
    let protocol = match protocol.strip_prefix("0x") {
        Some(hex) => u16::from_str_radix(hex, 16).ok(),
        None => protocol.parse().ok(),
    }
    .ok_or_else(|| bad("the protocol is not a number 0..=65535"))?;
    if selector == AppSelector::Dscp && protocol > 63 {
        return Err(bad("a DSCP is 0..=63"));
    }
    let priority: u8 = priority
        .trim()
        .parse()
        .ok()
        .filter(|p| *p <= 7)
        .ok_or_else(|| bad("the priority is not 0..=7"))?;
    Ok(AppEntry {
        priority,
        selector,
        protocol,
    })
}

/// Loads `path`; on error prints every diagnostic and returns `Err(exit code 2)`.
pub(crate) fn load(path: &Path) -> Result<Config, ExitCode> {
    match headroom_config::load(path) {
        Ok((config, warnings)) => {
            for w in &warnings {
                eprintln!("warning: {w}");
            }
            Ok(config)
        }
        Err(errors) => {
            eprintln!("{errors}");
            Err(ExitCode::from(EXIT_BAD_INPUT))
        }
    }
}

pub(crate) fn check(path: &Path, host: &HostArgs) -> ExitCode {
    let peer = match host.peer() {
        Ok(peer) => peer,
        Err(message) => {
            eprintln!("error: {message}");
            return ExitCode::from(EXIT_BAD_INPUT);
        }
    };
    let config = match load(path) {
        Ok(c) => c,
        Err(code) => return code,
    };
    crate::client::emit(format_args!(
        "{}: valid configuration of switch {:?}, {} ports, driver {:?}\n\n{}\n{}",
        path.display(),
        config.switch.name,
        config.ports.len(),
        config.switch.driver,
        headroom_config::derived(&config),
        dcbx_report(&config, peer.as_ref()),
    ));
    ExitCode::SUCCESS
}

fn app_text(entry: &AppEntry) -> String {
    let selector = match entry.selector {
        AppSelector::Ethertype => {
            return format!("ethertype:0x{:04x}={}", entry.protocol, entry.priority)
        }
        AppSelector::TcpSctpPort => "tcp",
        AppSelector::UdpDccpPort => "udp",
        AppSelector::AnyPort => "any",
        AppSelector::Dscp => "dscp",
        AppSelector::Unknown(_) => "sel?",
    };
    format!("{selector}:{}={}", entry.protocol, entry.priority)
}

fn ets_text(dcbx: &LocalDcbx) -> String {
    let t = &dcbx.ets.tables;
    (0..8)
        .map(|tc| match t.tsa[tc] {
            Tsa::Strict => format!("{tc}:strict"),
            Tsa::Ets => format!("{tc}:{}%", t.tc_bandwidth_percent[tc]),
            other => format!("{tc}:tsa{}", u8::from(other)),
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// What every port advertises, and (with a host) the verdict per port.
fn dcbx_report(config: &Config, host: Option<&PeerDcbx>) -> String {
    let (system, ports) = local_view(config);
    let mut out = String::new();
    let _ = writeln!(
        out,
        "LLDP/DCBX (IEEE 802.1AB, 802.1Qaz): system name {:?}, an LLDPDU every {} s, TTL {} s; \
         headroom is never willing",
        system.system_name, system.tx_interval_s, system.ttl_s
    );
    let mut table = Table::new([
        "Port",
        "LLDP",
        "PFC",
        "RoCE APP",
        "DSCP APP",
        "ETS (TC:bandwidth or strict)",
    ])
    .left_all();
    for port in &ports {
        let dscp: Vec<String> = port
            .dcbx
            .app
            .iter()
            .filter(|e| e.selector == AppSelector::Dscp)
            .map(|e| format!("{}={}", e.protocol, e.priority))
            .collect();
        table.row([
            port.name.clone(),
            port.admin_status.as_str().to_owned(),
            none_if_empty(priority_list(port.dcbx.pfc.enable)),
            roce_priority(&port.dcbx.app).map_or("-".to_owned(), |p| format!("udp:4791={p}")),
            none_if_empty(dscp.join(",")),
            ets_text(&port.dcbx),
        ]);
    }
    let _ = write!(out, "{table}");
    let Some(host) = host else {
        return out;
    };
    let pfc = host.pfc.as_ref().map_or(0, |p| p.enable);
    let willing = host.pfc.as_ref().is_some_and(|p| p.willing);
    let app: Vec<String> = host.app.iter().flatten().map(app_text).collect();
    let _ = writeln!(
        out,
        "\nDCBX against the host: PFC {} (willing {}), APP {}",
        none_if_empty(priority_list(pfc)),
        if willing { "yes" } else { "no" },
        none_if_empty(app.join(" "))
    );
    let mut table = Table::new(["Port", "Verdict", "Findings"]).left_all();
    for port in &ports {
        let verdict = evaluate(&port.dcbx, Some(host));
        let mut findings = verdict.findings.iter().map(ToString::to_string);
        table.row([
            port.name.clone(),
            verdict.status.to_string(),
            findings.next().unwrap_or_else(|| "-".to_owned()),
        ]);
        for finding in findings {
            table.row([String::new(), String::new(), finding]);
        }
    }
    let _ = write!(out, "{table}");
    let mismatched = ports
        .iter()
        .filter(|p| evaluate(&p.dcbx, Some(host)).status == DcbxStatus::Mismatch)
        .count();
    if mismatched > 0 {
        let _ = writeln!(
            out,
            "{mismatched} of {} ports mismatch: docs/operations.md (\"DCBX verdicts\") says what to \
             change on the host",
            ports.len()
        );
    }
    out
}

fn none_if_empty(text: String) -> String {
    if text.is_empty() {
        "-".to_owned()
    } else {
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> Config {
        let text = "[port.Ethernet0]\ndevice = \"eth1\"\nspeed = \"10G\"\n\
                    [port.Ethernet4]\ndevice = \"eth2\"\nspeed = \"10G\"\npfc_enable = [3]\n";
        headroom_config::parse(text, "t.toml").unwrap().0
    }

    #[test]
    fn advertised_table() {
        let report = dcbx_report(&config(), None);
        assert!(report.contains("TTL 120 s"), "{report}");
        let row = report.lines().find(|l| l.starts_with("Ethernet0")).unwrap();
        assert!(row.contains("rx_and_tx"), "{row}");
        assert!(row.contains("3,4"), "{row}");
        assert!(row.contains("udp:4791=3"), "{row}");
        assert!(row.contains("3=3,4=4"), "{row}");
        assert!(row.contains("0:13% 1:13% 2:12% 3:13%"), "{row}");
        let row = report.lines().find(|l| l.starts_with("Ethernet4")).unwrap();
        assert!(row.contains("3=3") && !row.contains("4=4"), "{row}");
        assert!(!report.contains("Verdict"));
    }

    #[test]
    fn host_verdicts() {
        let host = HostArgs {
            host_pfc: Some("3".into()),
            host_willing: false,
            host_app: vec!["udp:4791=3".into(), "dscp:4=3".into()],
        };
        let peer = host.peer().unwrap().unwrap();
        let report = dcbx_report(&config(), Some(&peer));
        assert!(
            report.contains("DCBX against the host: PFC 3 (willing no), APP udp:4791=3 dscp:4=3"),
            "{report}"
        );
        let row = report
            .lines()
            .filter(|l| l.starts_with("Ethernet0"))
            .nth(1)
            .unwrap();
        assert!(row.contains("mismatch"), "{row}");
        assert!(
            row.contains("priority 4 is lossless here but the peer does not enable PFC on it"),
            "{row}"
        );
        assert!(
            report.contains("peer is not willing: it keeps its own PFC"),
            "{report}"
        );
        // Ethernet4 is lossless on 3 only: the host agrees.
        let row = report
            .lines()
            .filter(|l| l.starts_with("Ethernet4"))
            .nth(1)
            .unwrap();
        assert!(row.contains("consistent"), "{row}");
        assert!(report.contains("1 of 2 ports mismatch"), "{report}");
    }

    #[test]
    fn bad_host_arguments() {
        assert_eq!(parse_priorities("3,4"), Ok(0x18));
        assert_eq!(parse_priorities("none"), Ok(0));
        assert!(parse_priorities("8")
            .unwrap_err()
            .contains("not a priority"));
        assert_eq!(
            parse_app("ethertype:0x8915=3"),
            Ok(AppEntry {
                priority: 3,
                selector: AppSelector::Ethertype,
                protocol: 0x8915
            })
        );
        for bad in [
            "udp4791=3",
            "udp:4791",
            "sctp:1=1",
            "udp:70000=1",
            "dscp:64=1",
            "udp:1=8",
        ] {
            assert!(parse_app(bad).is_err(), "{bad}");
        }
    }
}
