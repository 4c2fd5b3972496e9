//! End to end on `net_af_xdp`: the same scenarios as `dpdk_af_packet.rs` (see
//! `dpdk_common/e2e.rs`) with AF_XDP sockets (native XDP on the veths) under the switch ports.
//! DPDK 22.11's af_xdp PMD keeps its fill rings' mbufs after close, so the final pool check
//! allows exactly that. Needs root and iproute2; fails (never skips) without them. One EAL for
//! this file (one process).
#![cfg(feature = "dpdk")]

mod dpdk_common;

use headroom_dpdk::lab::LabVdev;

#[test]
fn pfc_out_pfc_in_ecn_and_bad_input_on_af_xdp_vdevs() {
    dpdk_common::e2e::run(LabVdev::AfXdp, "axd");
}
