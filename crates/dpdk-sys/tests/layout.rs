//! ABI sanity of the generated bindings, without starting EAL.
//!
//! bindgen already emits compile-time size/offset asserts computed by
//! libclang; these tests pin the values headroom's fast path relies on to
//! the DPDK 22.11 ABI as documented in rte_mbuf_core.h / rte_ethdev.h, so a
//! different DPDK or a wrong flag (e.g. RTE_IOVA_AS_PA off) is caught here.
#![cfg(feature = "dpdk")]

use std::mem::{align_of, offset_of, size_of};

use dpdk_sys as sys;

#[test]
fn mbuf_is_two_cache_lines_cache_aligned() {
    assert_eq!(size_of::<sys::rte_mbuf>(), 128);
    assert_eq!(align_of::<sys::rte_mbuf>(), 64);
}

#[test]
fn mbuf_fast_path_fields_sit_where_dpdk_22_11_puts_them() {
    // First cache line: buf_addr, buf_iova, then the 8-byte rearm_data
    // block (data_off, refcnt, nb_segs, port) that PMDs rewrite in one store.
    assert_eq!(offset_of!(sys::rte_mbuf, buf_addr), 0);
    assert_eq!(offset_of!(sys::rte_mbuf, data_off), 16);
    assert_eq!(offset_of!(sys::rte_mbuf, nb_segs), 20);
    assert_eq!(offset_of!(sys::rte_mbuf, port), 22);
    assert_eq!(offset_of!(sys::rte_mbuf, ol_flags), 24);
    // rx_descriptor_fields1: packet_type, pkt_len, data_len, vlan_tci.
    assert_eq!(offset_of!(sys::rte_mbuf, pkt_len), 36);
    assert_eq!(offset_of!(sys::rte_mbuf, data_len), 40);
    assert_eq!(offset_of!(sys::rte_mbuf, vlan_tci), 42);
    assert_eq!(offset_of!(sys::rte_mbuf, buf_len), 54);
    assert_eq!(offset_of!(sys::rte_mbuf, pool), 56);
    // Second cache line starts with `next`.
    assert_eq!(offset_of!(sys::rte_mbuf, next), 64);
}

#[test]
fn ethernet_and_link_structs_match_the_c_abi() {
    assert_eq!(size_of::<sys::rte_ether_addr>(), 6);
    assert_eq!(align_of::<sys::rte_ether_addr>(), 2);
    assert_eq!(size_of::<sys::rte_ether_hdr>(), 14);
    // rte_eth_link is 8 bytes, 8-aligned so it can be read atomically.
    assert_eq!(size_of::<sys::rte_eth_link>(), 8);
    assert_eq!(align_of::<sys::rte_eth_link>(), 8);
    assert_eq!(size_of::<sys::rte_eth_xstat>(), 16);
    assert_eq!(
        size_of::<sys::rte_eth_xstat_name>(),
        sys::RTE_ETH_XSTATS_NAME_SIZE as usize
    );
}

#[test]
fn macro_constants_have_their_header_values_and_types() {
    // RTE_BIT64(n) flags, evaluated by bindgen's clang macro fallback; the
    // numbers are the bit positions written in rte_ethdev.h.
    let scatter: u64 = sys::RTE_ETH_RX_OFFLOAD_SCATTER;
    assert_eq!(scatter, 1 << 13);
    assert_eq!(sys::RTE_ETH_RX_OFFLOAD_VLAN_STRIP, 1 << 0);
    assert_eq!(sys::RTE_ETH_RX_OFFLOAD_KEEP_CRC, 1 << 16);
    assert_eq!(sys::RTE_ETH_TX_OFFLOAD_MULTI_SEGS, 1 << 15);
    assert_eq!(sys::RTE_ETH_TX_OFFLOAD_MBUF_FAST_FREE, 1 << 16);
    // Plain defines.
    let buf_size: u16 = sys::RTE_MBUF_DEFAULT_BUF_SIZE;
    assert_eq!(buf_size, 2048 + 128);
    assert_eq!(sys::RTE_PKTMBUF_HEADROOM, 128);
    assert_eq!(sys::RTE_ETHER_ADDR_LEN, 6);
    assert_eq!(sys::RTE_ETH_NAME_MAX_LEN, 64);
    assert_eq!(sys::RTE_ETH_LINK_UP, 1);
    assert_eq!(sys::rte_eth_fc_mode::RTE_ETH_FC_NONE.0, 0);
    assert_eq!(sys::rte_eth_fc_mode::RTE_ETH_FC_FULL.0, 3);
}

#[test]
fn safe_helpers_work_without_eal() {
    // Before EAL init (and on any non-EAL thread) the lcore id is "any".
    assert_eq!(sys::lcore_id(), sys::LCORE_ID_ANY);
    let before = sys::tsc_cycles();
    let after = sys::tsc_cycles();
    assert!(after >= before, "TSC went backwards: {before} -> {after}");
    assert!(
        sys::strerror(-22).contains("Invalid argument"),
        "{}",
        sys::strerror(-22)
    );
    assert_eq!(sys::strerror(22), sys::strerror(-22));
}
