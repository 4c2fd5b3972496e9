//! The MAC table through the control socket: `clear fdb all|port`, and a port whose link goes
//! down losing its stations (so that frames to them are flooded, not sent to a dead port).

mod control_harness;

use control_harness::{config_text, udp_frame, Switch, A, C};
use headroom_runtime::protocol::{Clear, FdbRow, Request, Show};
use std::sync::atomic::Ordering;

/// `(mac, port)` of every row of `show fdb`, sorted.
fn fdb(sw: &mut Switch) -> Vec<(String, String)> {
    let rows: Vec<FdbRow> = sw.show(Show::Fdb);
    let mut rows: Vec<(String, String)> = rows.into_iter().map(|r| (r.mac, r.port)).collect();
    rows.sort();
    rows
}

fn mac(m: [u8; 6]) -> String {
    m.iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":")
}

/// A says hello on Ethernet0 and C on Ethernet4: both are learned.
fn learn_both(sw: &mut Switch) {
    sw.learn_c();
    sw.inject(0, &udp_frame(A, C, 0, 0, 64));
    assert_eq!(sw.collect(1, 1).len(), 1);
    assert_eq!(
        fdb(sw),
        [
            (mac(A), "Ethernet0".to_owned()),
            (mac(C), "Ethernet4".to_owned())
        ]
    );
}

fn clear(sw: &mut Switch, what: Clear) -> headroom_runtime::protocol::Response {
    sw.request(&Request::Clear { what })
}

#[test]
fn clear_fdb_port_forgets_that_port_only_and_clear_fdb_all_forgets_everything() {
    let mut sw = Switch::start(&config_text(""));
    learn_both(&mut sw);

    let r = clear(
        &mut sw,
        Clear::Fdb {
            port: Some("Ethernet4".into()),
        },
    );
    assert!(r.ok, "{:?}", r.error);
    assert_eq!(fdb(&mut sw), [(mac(A), "Ethernet0".to_owned())]);

    // An unknown port is refused and changes nothing.
    let r = clear(
        &mut sw,
        Clear::Fdb {
            port: Some("Ethernet9".into()),
        },
    );
    assert!(!r.ok);
    assert!(
        r.error.as_deref().unwrap_or("").contains("Ethernet9"),
        "{:?}",
        r.error
    );
    assert_eq!(fdb(&mut sw), [(mac(A), "Ethernet0".to_owned())]);

    // C is learned again by its next frame.
    sw.learn_c();
    assert_eq!(fdb(&mut sw).len(), 2);

    let r = clear(&mut sw, Clear::Fdb { port: None });
    assert!(r.ok, "{:?}", r.error);
    assert!(fdb(&mut sw).is_empty());
    sw.stop();
}

#[test]
fn a_port_whose_link_goes_down_loses_its_stations() {
    let mut sw = Switch::start(&config_text(""));
    // The control plane read the links (up) at its first poll, while serving these requests.
    learn_both(&mut sw);
    assert_eq!(
        fdb(&mut sw).len(),
        2,
        "nothing flushed while the links are up"
    );

    sw.taps[1].link_up.store(false, Ordering::Relaxed);
    sw.wait_for("Ethernet4's stations to be flushed", |sw| {
        fdb(sw) == [(mac(A), "Ethernet0".to_owned())]
    });
    assert_eq!(
        sw.show::<Vec<headroom_runtime::protocol::PortSummary>>(Show::Ports)[1].link,
        "down"
    );

    // Back up: C is learned again by its next frame; nothing else is flushed.
    sw.taps[1].link_up.store(true, Ordering::Relaxed);
    sw.learn_c();
    assert_eq!(fdb(&mut sw).len(), 2);
    sw.stop();
}
