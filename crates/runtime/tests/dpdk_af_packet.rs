//! End to end on `net_af_packet`: the switch on DPDK af_packet vdevs attached to veths, hosts in
//! their own namespaces (see `dpdk_common/e2e.rs` for the scenarios: forward and learn, PFC out,
//! PFC in, ECN, bad input, every mbuf back). Needs root and iproute2; fails (never skips)
//! without them. One EAL for this file (one process).
#![cfg(feature = "dpdk")]

mod dpdk_common;

use headroom_dpdk::lab::LabVdev;

#[test]
fn pfc_out_pfc_in_ecn_and_bad_input_on_af_packet_vdevs() {
    dpdk_common::e2e::run(LabVdev::AfPacket, "afp");
}
