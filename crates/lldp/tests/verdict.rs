//! The mismatch rules, one by one.

use headroom_lldp::{evaluate, DcbxStatus, Finding, LocalDcbx, PeerDcbx};
use headroom_wire::lldp::dcbx::{
    AppEntry, AppSelector, EtsConfiguration, EtsRecommendation, EtsTables, PfcConfiguration,
};

/// Lossless on 3 and 4; RoCE on 3; DSCP 26 → 3, DSCP 10 → 1 (lossy).
fn local() -> LocalDcbx {
    LocalDcbx {
        ets: EtsConfiguration {
            willing: false,
            cbs: false,
            max_tcs: 8,
            tables: EtsTables::default(),
        },
        ets_recommendation: EtsRecommendation::default(),
        pfc: PfcConfiguration {
            willing: false,
            mbc: false,
            pfc_cap: 8,
            enable: 0x18,
        },
        app: vec![
            AppEntry::rocev2(3),
            AppEntry::dscp(10, 1),
            AppEntry::dscp(26, 3),
        ],
    }
}

fn peer(willing: bool, enable: u8, app: Option<Vec<AppEntry>>) -> PeerDcbx {
    PeerDcbx {
        pfc: Some(PfcConfiguration {
            willing,
            mbc: false,
            pfc_cap: 8,
            enable,
        }),
        app,
        ..PeerDcbx::default()
    }
}

#[test]
fn no_neighbour_and_no_dcbx() {
    assert_eq!(evaluate(&local(), None).status, DcbxStatus::NoNeighbour);
    let v = evaluate(&local(), Some(&PeerDcbx::default()));
    assert_eq!(v.status, DcbxStatus::NoDcbx);
    assert!(v.findings.is_empty());
}

#[test]
fn agreeing_peer_is_consistent() {
    let v = evaluate(
        &local(),
        Some(&peer(true, 0x18, Some(vec![AppEntry::rocev2(3)]))),
    );
    assert_eq!(v.status, DcbxStatus::Consistent);
    assert!(v.findings.is_empty());
}

#[test]
fn pfc_differences_both_ways_with_willing_notes() {
    let v = evaluate(&local(), Some(&peer(false, 0x28, None)));
    assert_eq!(v.status, DcbxStatus::Mismatch);
    assert_eq!(
        v.findings,
        [
            Finding::PeerPfcOnLossyPriorities { priorities: 0x20 },
            Finding::PeerPfcOffLosslessPriorities { priorities: 0x10 },
            Finding::PeerNotWilling,
        ]
    );
    let v = evaluate(&local(), Some(&peer(true, 0x00, None)));
    assert_eq!(
        v.findings,
        [
            Finding::PeerPfcOffLosslessPriorities { priorities: 0x18 },
            Finding::PeerWillingNotAdopted,
        ]
    );
    assert_eq!(
        v.findings[0].to_string(),
        "priority 3,4 is lossless here but the peer does not enable PFC on it"
    );
}

#[test]
fn pfc_capacity() {
    let mut p = peer(true, 0x18, None);
    p.pfc.as_mut().unwrap().pfc_cap = 1;
    let v = evaluate(&local(), Some(&p));
    assert_eq!(
        v.findings,
        [Finding::PeerPfcCapacityTooSmall {
            peer_cap: 1,
            needed: 2
        }]
    );
    p.pfc.as_mut().unwrap().pfc_cap = 0; // "not stated"
    assert_eq!(evaluate(&local(), Some(&p)).status, DcbxStatus::Consistent);
}

#[test]
fn roce_on_a_lossy_priority_any_port_selector_too() {
    let v = evaluate(
        &local(),
        Some(&peer(false, 0x18, Some(vec![AppEntry::rocev2(5)]))),
    );
    assert_eq!(v.status, DcbxStatus::Mismatch);
    assert_eq!(v.findings, [Finding::RoceOnLossyPriority { priority: 5 }]);
    let any_port = AppEntry {
        priority: 0,
        selector: AppSelector::AnyPort,
        protocol: 4791,
    };
    let v = evaluate(&local(), Some(&peer(false, 0x18, Some(vec![any_port]))));
    assert_eq!(v.findings, [Finding::RoceOnLossyPriority { priority: 0 }]);
    // TCP 4791 is not RoCE.
    let tcp = AppEntry {
        priority: 0,
        selector: AppSelector::TcpSctpPort,
        protocol: 4791,
    };
    let v = evaluate(&local(), Some(&peer(false, 0x18, Some(vec![tcp]))));
    assert_eq!(v.status, DcbxStatus::Consistent);
}

#[test]
fn lossless_dscp_on_another_priority() {
    let app = vec![
        AppEntry::dscp(26, 4), // lossless here on 3: mismatch
        AppEntry::dscp(26, 3), // a second entry for 26 does not count
        AppEntry::dscp(10, 5), // lossy here: the host may queue it where it likes
        AppEntry::dscp(63, 2), // we do not advertise 63
    ];
    let v = evaluate(&local(), Some(&peer(false, 0x18, Some(app))));
    assert_eq!(
        v.findings,
        [Finding::LosslessDscpOnOtherPriority {
            dscp: 26,
            ours: 3,
            peers: 4
        }]
    );
}

#[test]
fn app_without_pfc() {
    let p = PeerDcbx {
        app: Some(vec![AppEntry::rocev2(3)]),
        ..PeerDcbx::default()
    };
    let v = evaluate(&local(), Some(&p));
    assert_eq!(v.status, DcbxStatus::NoDcbx);
    assert_eq!(v.findings, [Finding::PeerSendsNoPfc]);
    let p = PeerDcbx {
        app: Some(vec![AppEntry::rocev2(6)]),
        ..PeerDcbx::default()
    };
    let v = evaluate(&local(), Some(&p));
    assert_eq!(v.status, DcbxStatus::Mismatch);
    assert_eq!(
        v.findings,
        [
            Finding::RoceOnLossyPriority { priority: 6 },
            Finding::PeerSendsNoPfc
        ]
    );
}
