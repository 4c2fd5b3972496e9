//! A real kernel interface through DPDK: `net_af_xdp` (an XDP program redirecting into an
//! AF_XDP socket) on one end of a veth pair, a raw AF_PACKET socket on the other (see
//! `common/veth.rs`). Needs root; fails loudly otherwise.
#![cfg(feature = "dpdk")]

mod common;

#[test]
fn frames_cross_a_veth_between_net_af_xdp_and_a_raw_socket() {
    common::veth::frames_cross_a_veth("net_af_xdp");
}
