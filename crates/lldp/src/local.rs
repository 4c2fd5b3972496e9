//! The local view: what this switch advertises on each port, derived from its configuration.

use headroom_config::{Config, LldpAdminStatus, Port, SchedulerKind, Trust, DSCP_COUNT};
use headroom_wire::lldp::dcbx::{
    AppEntry, EtsConfiguration, EtsRecommendation, EtsTables, PfcConfiguration, Tsa, PRIORITY_COUNT,
};
use headroom_wire::lldp::{capability, TlvRepr};

/// PFC capability advertised: PFC may be enabled on all 8 priorities at once.
pub const PFC_CAPABILITY: u8 = 8;

/// What the switch says about itself on every port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalSystem {
    /// Chassis ID (subtype MAC address): the switch's base MAC.
    pub chassis_mac: [u8; 6],
    /// System Name TLV.
    pub system_name: String,
    /// System Description TLV.
    pub system_description: String,
    /// System Capabilities: capabilities the system has ([`capability`] bits).
    pub capabilities: u16,
    /// System Capabilities: the enabled ones.
    pub enabled_capabilities: u16,
    /// Seconds between LLDPDUs (msgTxInterval).
    pub tx_interval_s: u16,
    /// TTL advertised, seconds (msgTxInterval × msgTxHold, at most 65535).
    pub ttl_s: u16,
    /// Fast LLDPDUs at start and on a new neighbour (txFastInit).
    pub tx_fast_init: u8,
    /// Seconds between fast LLDPDUs (msgFastTx).
    pub tx_fast_interval_s: u16,
}

impl LocalSystem {
    /// The `[switch]` and `[lldp]` settings of `config`.
    #[must_use]
    pub fn from_config(config: &Config) -> LocalSystem {
        LocalSystem {
            chassis_mac: config.switch.mac,
            system_name: config.lldp.system_name.clone(),
            system_description: config.lldp.system_description.clone(),
            capabilities: capability::BRIDGE,
            enabled_capabilities: capability::BRIDGE,
            tx_interval_s: config.lldp.tx_interval_s,
            ttl_s: config.lldp.ttl_s(),
            tx_fast_init: config.lldp.tx_fast_init,
            tx_fast_interval_s: config.lldp.tx_fast_interval_s,
        }
    }
}

/// What the switch says on one port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalPort {
    /// Port ID (subtype interface name): the port name.
    pub name: String,
    /// Port Description TLV (the Linux interface or DPDK device).
    pub description: String,
    /// Source MAC of the LLDPDUs (the port's MAC, 802.1AB-2016 7.1).
    pub mac: [u8; 6],
    /// Whether LLDPDUs are sent and received here.
    pub admin_status: LldpAdminStatus,
    /// The DCBX TLVs.
    pub dcbx: LocalDcbx,
}

impl LocalPort {
    /// Port `port` of `config`.
    #[must_use]
    pub fn from_config(config: &Config, port: &Port) -> LocalPort {
        LocalPort {
            name: port.name.clone(),
            description: port.device.clone(),
            mac: port.mac,
            admin_status: port.lldp_admin_status,
            dcbx: LocalDcbx::from_port(port, config.lldp.roce_priority),
        }
    }
}

/// The system and every port of `config`, in port order (index = port id).
#[must_use]
pub fn local_view(config: &Config) -> (LocalSystem, Vec<LocalPort>) {
    let system = LocalSystem::from_config(config);
    let ports = config
        .ports
        .iter()
        .map(|port| LocalPort::from_config(config, port))
        .collect();
    (system, ports)
}

/// The IEEE 802.1Qaz configuration of one port, as advertised.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalDcbx {
    /// ETS Configuration (willing 0).
    pub ets: EtsConfiguration,
    /// ETS Recommendation: the same tables (a willing host should run what the switch runs).
    pub ets_recommendation: EtsRecommendation,
    /// PFC Configuration (willing 0, MBC 0, capability 8, enable = `pfc_enable`).
    pub pfc: PfcConfiguration,
    /// Application Priority entries: RoCEv2 first, then the lossless DSCPs under DSCP trust.
    pub app: Vec<AppEntry>,
}

impl LocalDcbx {
    /// Derives the TLVs from a resolved port (docs/config.md, `[lldp]`):
    ///
    /// * priority → TC: [`Port::tc_of_priority`] (the dot1p map under dot1p trust, identity under
    ///   DSCP trust, SONiC's convention that lossless TC n is paused with PFC priority n);
    /// * TSA of TC t: the scheduler of queue `tc_to_queue[t]`: strict → strict, DWRR/WRR → ETS;
    /// * TC bandwidth: the ETS classes' weights as percentages of their sum, rounded so that they
    ///   add up to exactly 100 (largest remainder; ties to the lower TC); strict classes 0 %;
    /// * PFC enable = `pfc_enable`;
    /// * APP: UDP 4791 → `roce_priority`, or the port's lowest PFC priority when `None` (no entry
    ///   without PFC); under DSCP trust one entry per DSCP whose TC is lossless → that TC's
    ///   priority.
    #[must_use]
    pub fn from_port(port: &Port, roce_priority: Option<u8>) -> LocalDcbx {
        let mut priority_tc = [0u8; PRIORITY_COUNT];
        for (priority, tc) in (0u8..).zip(priority_tc.iter_mut()) {
            *tc = port.tc_of_priority(priority) & 7;
        }
        let mut tsa = [Tsa::Strict; PRIORITY_COUNT];
        let mut weights = [0u32; PRIORITY_COUNT];
        for tc in 0..PRIORITY_COUNT {
            let queue = usize::from(port.maps.tc_to_queue[tc] & 7);
            let scheduler = &port.queues[queue].scheduler;
            match scheduler.kind {
                SchedulerKind::Strict => tsa[tc] = Tsa::Strict,
                SchedulerKind::Dwrr | SchedulerKind::Wrr => {
                    tsa[tc] = Tsa::Ets;
                    weights[tc] = u32::from(scheduler.weight.max(1));
                }
            }
        }
        let tables = EtsTables {
            priority_tc,
            tc_bandwidth_percent: bandwidth_percent(&weights),
            tsa,
        };
        let mut app = Vec::new();
        let roce = roce_priority.or_else(|| port.pfc_enable.iter().next());
        if let Some(priority) = roce {
            app.push(AppEntry::rocev2(priority));
        }
        if port.trust == Trust::Dscp {
            for dscp in 0..DSCP_COUNT {
                // Under DSCP trust the PFC priority of TC t is t (Port::tc_of_priority). Only the
                // lossless DSCPs are advertised: they are the ones a host must put on the paused
                // priority. (All 64 would also tell hosts where the lossy ones go, but lldptool
                // 1.1 garbles APP tables of more than about 40 entries, and switches that do
                // DCBX advertise configured entries, not whole maps.)
                let priority = port.maps.dscp_to_tc[dscp] & 7;
                if port.pfc_enable.contains(priority) {
                    app.push(AppEntry::dscp(dscp as u8, priority));
                }
            }
        }
        LocalDcbx {
            ets: EtsConfiguration {
                willing: false,
                cbs: false,
                max_tcs: PRIORITY_COUNT as u8,
                tables,
            },
            ets_recommendation: EtsRecommendation { tables },
            pfc: PfcConfiguration {
                willing: false,
                mbc: false,
                pfc_cap: PFC_CAPABILITY,
                enable: port.pfc_enable.0,
            },
            app,
        }
    }

    /// Priorities this port treats as lossless (PFC enabled), bit n = priority n.
    #[must_use]
    pub fn lossless(&self) -> u8 {
        self.pfc.enable
    }

    /// The DSCP → priority mapping this port advertises, if it advertises one for `dscp`.
    #[must_use]
    pub fn dscp_priority(&self, dscp: u8) -> Option<u8> {
        self.app
            .iter()
            .find(|e| {
                e.selector == headroom_wire::lldp::dcbx::AppSelector::Dscp
                    && e.protocol == u16::from(dscp)
            })
            .map(|e| e.priority)
    }

    /// The four TLVs, in the order they are sent.
    pub fn tlvs(&self) -> [TlvRepr<'_>; 4] {
        use headroom_wire::lldp::dcbx::{AppEntries, ApplicationPriority};
        use headroom_wire::lldp::DcbxTlv;
        [
            TlvRepr::Dcbx(DcbxTlv::EtsConfiguration(self.ets)),
            TlvRepr::Dcbx(DcbxTlv::EtsRecommendation(self.ets_recommendation)),
            TlvRepr::Dcbx(DcbxTlv::PfcConfiguration(self.pfc)),
            TlvRepr::Dcbx(DcbxTlv::ApplicationPriority(ApplicationPriority {
                entries: AppEntries::Decoded(&self.app),
            })),
        ]
    }
}

/// Percentages of `weights` (0 = not an ETS class) that add up to exactly 100, by largest
/// remainder (ties to the lower index); all zero when no weight is set.
fn bandwidth_percent(weights: &[u32; PRIORITY_COUNT]) -> [u8; PRIORITY_COUNT] {
    let total: u32 = weights.iter().sum();
    let mut percent = [0u8; PRIORITY_COUNT];
    if total == 0 {
        return percent;
    }
    let mut remainders = [(0u32, 0usize); PRIORITY_COUNT];
    let mut given = 0u32;
    for (tc, &w) in weights.iter().enumerate() {
        let share = w * 100;
        percent[tc] = (share / total) as u8;
        given += share / total;
        remainders[tc] = (share % total, tc);
    }
    // Largest remainder first; among equal remainders the lower TC first. The remainders add up
    // to (100 - given) × total and each is below total, so at least (100 - given) of them are
    // positive: a class without weight never gets a point.
    remainders.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    for &(_, tc) in remainders.iter().take((100 - given) as usize) {
        percent[tc] += 1;
    }
    percent
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bandwidth_adds_up_to_100() {
        assert_eq!(bandwidth_percent(&[0; 8]), [0; 8]);
        assert_eq!(
            bandwidth_percent(&[1, 0, 0, 0, 0, 0, 0, 0]),
            [100, 0, 0, 0, 0, 0, 0, 0]
        );
        assert_eq!(
            bandwidth_percent(&[1, 1, 1, 0, 0, 0, 0, 0]),
            [34, 33, 33, 0, 0, 0, 0, 0]
        );
        // SONiC's AZURE schedulers: 14 on the lossy queues, 15 on 3 and 4.
        let azure = [14, 14, 14, 15, 15, 14, 14, 14];
        let p = bandwidth_percent(&azure);
        assert_eq!(p.iter().map(|&x| u32::from(x)).sum::<u32>(), 100);
        assert_eq!(p, [13, 13, 12, 13, 13, 12, 12, 12]);
    }

    proptest::proptest! {
        #[test]
        fn bandwidth_sums_to_100_and_follows_weights(weights in proptest::array::uniform8(0u32..=100)) {
            let p = bandwidth_percent(&weights);
            let total: u32 = p.iter().map(|&x| u32::from(x)).sum();
            if weights.iter().all(|&w| w == 0) {
                proptest::prop_assert_eq!(total, 0);
            } else {
                proptest::prop_assert_eq!(total, 100);
            }
            for tc in 0..8 {
                if weights[tc] == 0 {
                    proptest::prop_assert_eq!(p[tc], 0);
                }
                // Within one point of the exact share.
                let sum: u32 = weights.iter().sum();
                if sum > 0 {
                    let exact = f64::from(weights[tc]) * 100.0 / f64::from(sum);
                    proptest::prop_assert!((f64::from(p[tc]) - exact).abs() < 1.0);
                }
            }
        }
    }
}
