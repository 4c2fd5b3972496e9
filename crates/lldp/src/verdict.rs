//! The DCBX mismatch rules: one pure function, [`evaluate`], shared by the agent (per port, on
//! every change) and `headroom check` (against a host configuration the operator expects).
//!
//! PFC only works when both ends of a link agree on which priorities are lossless: the switch
//! pauses the host with PFC for priority p when its priority-group fills, and the host must stop
//! sending priority p; the host pauses the switch for the priorities it protects. RoCE is only
//! lossless when the host puts it on one of those priorities. The rules (docs/operations.md,
//! "DCBX verdicts", says what to change for each):
//!
//! | finding | condition | effect |
//! |---|---|---|
//! | [`Finding::PeerPfcOnLossyPriorities`] | the peer enables PFC on a priority the switch does not | the switch ignores the peer's pauses there: the host's buffer drops, or its pause storms go nowhere |
//! | [`Finding::PeerPfcOffLosslessPriorities`] | the switch is lossless on a priority the peer does not enable | the host ignores the switch's pauses: the switch's headroom overflows and drops on a "lossless" priority |
//! | [`Finding::PeerPfcCapacityTooSmall`] | the peer can enable fewer PFC priorities than the switch uses | a willing peer cannot adopt the switch's bitmap |
//! | [`Finding::RoceOnLossyPriority`] | the peer's APP table puts RoCEv2 (UDP 4791) on a priority that is lossy here | RoCE traffic is dropped under congestion |
//! | [`Finding::LosslessDscpOnOtherPriority`] | a DSCP the switch treats as lossless is mapped by the peer to another priority | the host queues that traffic on a priority the switch's pauses do not stop |
//!
//! These are *mismatches*. The remaining findings are *notes* that explain a mismatch or the lack
//! of data: [`Finding::PeerNotWilling`] (it will keep its configuration),
//! [`Finding::PeerWillingNotAdopted`] (it should adopt ours and has not: still converging, or its
//! NIC cannot apply DCB, as lldpad on a veth), [`Finding::PeerSendsNoPfc`].

use core::fmt;

use headroom_wire::lldp::dcbx::{AppEntry, AppSelector};
use headroom_wire::roce::ROCEV2_UDP_PORT;

use crate::local::LocalDcbx;
use crate::peer::PeerDcbx;

/// What the comparison of one port with its peer concluded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DcbxStatus {
    /// No neighbour on the port.
    NoNeighbour,
    /// The neighbour sends no DCBX PFC TLV (plain LLDP): nothing to compare.
    NoDcbx,
    /// The neighbour's PFC and APP agree with ours.
    Consistent,
    /// At least one mismatch finding.
    Mismatch,
}

impl DcbxStatus {
    /// Every status, in declaration order.
    pub const ALL: [DcbxStatus; 4] = [
        DcbxStatus::NoNeighbour,
        DcbxStatus::NoDcbx,
        DcbxStatus::Consistent,
        DcbxStatus::Mismatch,
    ];

    /// Lower-case name as shown by `show dcbx` and in metrics labels.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            DcbxStatus::NoNeighbour => "no-neighbour",
            DcbxStatus::NoDcbx => "no-dcbx",
            DcbxStatus::Consistent => "consistent",
            DcbxStatus::Mismatch => "mismatch",
        }
    }
}

impl fmt::Display for DcbxStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One reason for a verdict (see the module table).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Finding {
    /// The peer enables PFC on these priorities (bit set), the switch does not.
    PeerPfcOnLossyPriorities {
        /// Bit n = priority n.
        priorities: u8,
    },
    /// The switch enables PFC on these priorities, the peer does not.
    PeerPfcOffLosslessPriorities {
        /// Bit n = priority n.
        priorities: u8,
    },
    /// The peer's PFC capability is below the number of lossless priorities here.
    PeerPfcCapacityTooSmall {
        /// The peer's PFC cap.
        peer_cap: u8,
        /// Priorities the switch has PFC on.
        needed: u8,
    },
    /// The peer maps RoCEv2 (UDP port 4791, selector 3 or 4) to a priority that is lossy here.
    RoceOnLossyPriority {
        /// The peer's priority for RoCEv2.
        priority: u8,
    },
    /// A DSCP whose priority is lossless here is mapped by the peer to another priority.
    LosslessDscpOnOtherPriority {
        /// The DSCP.
        dscp: u8,
        /// Our priority for it (lossless).
        ours: u8,
        /// The peer's.
        peers: u8,
    },
    /// Note: the peer is not willing and its PFC differs: it will not adopt ours.
    PeerNotWilling,
    /// Note: the peer is willing but its PFC differs: it has not adopted ours (yet, or cannot).
    PeerWillingNotAdopted,
    /// Note: the peer sends DCBX TLVs but no PFC Configuration.
    PeerSendsNoPfc,
}

impl Finding {
    /// A mismatch (as opposed to a note).
    #[must_use]
    pub const fn is_mismatch(&self) -> bool {
        !matches!(
            self,
            Finding::PeerNotWilling | Finding::PeerWillingNotAdopted | Finding::PeerSendsNoPfc
        )
    }

    /// A short stable name (for JSON, logs and metrics).
    #[must_use]
    pub const fn code(&self) -> &'static str {
        match self {
            Finding::PeerPfcOnLossyPriorities { .. } => "peer_pfc_on_lossy_priorities",
            Finding::PeerPfcOffLosslessPriorities { .. } => "peer_pfc_off_lossless_priorities",
            Finding::PeerPfcCapacityTooSmall { .. } => "peer_pfc_capacity_too_small",
            Finding::RoceOnLossyPriority { .. } => "roce_on_lossy_priority",
            Finding::LosslessDscpOnOtherPriority { .. } => "lossless_dscp_on_other_priority",
            Finding::PeerNotWilling => "peer_not_willing",
            Finding::PeerWillingNotAdopted => "peer_willing_not_adopted",
            Finding::PeerSendsNoPfc => "peer_sends_no_pfc",
        }
    }
}

/// Priorities of a bit set as SONiC writes them: `3,4`.
#[must_use]
pub fn priority_list(bits: u8) -> String {
    (0..8u8)
        .filter(|p| bits & (1 << p) != 0)
        .map(|p| p.to_string())
        .collect::<Vec<_>>()
        .join(",")
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Finding::PeerPfcOnLossyPriorities { priorities } => write!(
                f,
                "peer enables PFC on priority {} which is lossy here",
                priority_list(priorities)
            ),
            Finding::PeerPfcOffLosslessPriorities { priorities } => write!(
                f,
                "priority {} is lossless here but the peer does not enable PFC on it",
                priority_list(priorities)
            ),
            Finding::PeerPfcCapacityTooSmall { peer_cap, needed } => write!(
                f,
                "peer supports PFC on {peer_cap} priorities, this port uses {needed}"
            ),
            Finding::RoceOnLossyPriority { priority } => write!(
                f,
                "peer maps RoCEv2 (UDP {ROCEV2_UDP_PORT}) to priority {priority}, which is lossy here"
            ),
            Finding::LosslessDscpOnOtherPriority { dscp, ours, peers } => write!(
                f,
                "peer maps DSCP {dscp} to priority {peers}; here it is lossless priority {ours}"
            ),
            Finding::PeerNotWilling => f.write_str("peer is not willing: it keeps its own PFC"),
            Finding::PeerWillingNotAdopted => {
                f.write_str("peer is willing but has not adopted this port's PFC")
            }
            Finding::PeerSendsNoPfc => f.write_str("peer sends no PFC Configuration TLV"),
        }
    }
}

/// The verdict for one port.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Verdict {
    /// The conclusion.
    pub status: DcbxStatus,
    /// Mismatches first, then notes; each kind in a fixed order (so that equal verdicts compare
    /// equal and an event is emitted only on a real change).
    pub findings: Vec<Finding>,
}

impl Verdict {
    /// The verdict of a port without a neighbour.
    #[must_use]
    pub const fn no_neighbour() -> Verdict {
        Verdict {
            status: DcbxStatus::NoNeighbour,
            findings: Vec::new(),
        }
    }

    /// The mismatch findings only.
    pub fn mismatches(&self) -> impl Iterator<Item = &Finding> {
        self.findings.iter().filter(|f| f.is_mismatch())
    }
}

/// The RoCEv2 priority an APP table gives: a UDP/DCCP (3) or any-port (4) entry for 4791; the
/// first such entry wins (lldpad and the kernel's dcbnl keep several; the first is what a host's
/// `rdma_cm` default follows, and duplicates are themselves a misconfiguration).
#[must_use]
pub fn roce_priority(app: &[AppEntry]) -> Option<u8> {
    app.iter()
        .find(|e| {
            matches!(e.selector, AppSelector::UdpDccpPort | AppSelector::AnyPort)
                && e.protocol == ROCEV2_UDP_PORT
        })
        .map(|e| e.priority)
}

/// Compares our DCBX with the peer's (`None`: no neighbour). Pure and deterministic.
#[must_use]
pub fn evaluate(local: &LocalDcbx, peer: Option<&PeerDcbx>) -> Verdict {
    let Some(peer) = peer else {
        return Verdict::no_neighbour();
    };
    if peer.is_empty() {
        return Verdict {
            status: DcbxStatus::NoDcbx,
            findings: Vec::new(),
        };
    }
    let ours = local.lossless();
    let mut findings = Vec::new();
    if let Some(pfc) = &peer.pfc {
        let theirs = pfc.enable;
        if theirs & !ours != 0 {
            findings.push(Finding::PeerPfcOnLossyPriorities {
                priorities: theirs & !ours,
            });
        }
        if ours & !theirs != 0 {
            findings.push(Finding::PeerPfcOffLosslessPriorities {
                priorities: ours & !theirs,
            });
        }
        // PFC cap 0 is how some stations say "not stated"; only a stated, smaller cap counts.
        let needed = ours.count_ones() as u8;
        if pfc.pfc_cap != 0 && pfc.pfc_cap < needed {
            findings.push(Finding::PeerPfcCapacityTooSmall {
                peer_cap: pfc.pfc_cap,
                needed,
            });
        }
    }
    if let Some(app) = &peer.app {
        if let Some(priority) = roce_priority(app) {
            if priority > 7 || ours & (1 << priority) == 0 {
                findings.push(Finding::RoceOnLossyPriority { priority });
            }
        }
        let mut seen = 0u64;
        for entry in app {
            if entry.selector != AppSelector::Dscp || entry.protocol > 63 {
                continue;
            }
            let dscp = entry.protocol as u8;
            if seen & (1 << dscp) != 0 {
                continue; // the first entry for a DSCP is the one that counts
            }
            seen |= 1 << dscp;
            let Some(our_priority) = local.dscp_priority(dscp) else {
                continue;
            };
            if ours & (1 << our_priority) != 0 && entry.priority != our_priority {
                findings.push(Finding::LosslessDscpOnOtherPriority {
                    dscp,
                    ours: our_priority,
                    peers: entry.priority,
                });
            }
        }
    }
    let pfc_differs = peer.pfc.as_ref().is_some_and(|p| p.enable != ours);
    match &peer.pfc {
        Some(pfc) if pfc_differs && !pfc.willing => findings.push(Finding::PeerNotWilling),
        Some(pfc) if pfc_differs && pfc.willing => findings.push(Finding::PeerWillingNotAdopted),
        None => findings.push(Finding::PeerSendsNoPfc),
        _ => {}
    }
    let status = if findings.iter().any(Finding::is_mismatch) {
        DcbxStatus::Mismatch
    } else if peer.pfc.is_none() {
        DcbxStatus::NoDcbx
    } else {
        DcbxStatus::Consistent
    };
    Verdict { status, findings }
}
