//! The flow label and UDP source port of a RoCEv2 queue pair: the per-QP entropy ECMP hashes on.

/// The RoCEv2 flow label of a QP pair, as Linux computes it (`rdma_calc_flow_label` in
/// `include/rdma/ib_verbs.h`, `dcqcn-roce.md` §4.1): the product of the two QPNs folded to
/// 20 bits. Symmetric in its arguments, so both directions of a connection hash alike.
#[must_use]
pub const fn flow_label(local_qpn: u32, remote_qpn: u32) -> u32 {
    let mut v = local_qpn as u64 * remote_qpn as u64;
    v ^= v >> 20;
    v ^= v >> 40;
    (v & 0xF_FFFF) as u32
}

/// The UDP source port for a flow label (`rdma_flow_label_to_udp_sport`): the 20-bit label folded
/// to 14 bits, in the range 0xC000..=0xFFFF (IANA dynamic ports).
#[must_use]
pub const fn flow_label_to_udp_sport(flow_label: u32) -> u16 {
    let folded = (flow_label & 0x3FFF) ^ ((flow_label & 0xF_C000) >> 14);
    (folded as u16) | 0xC000
}

/// The UDP source port of the QP pair (`local_qpn`, `remote_qpn`): per-QP ECMP entropy.
#[must_use]
pub const fn udp_sport(local_qpn: u32, remote_qpn: u32) -> u16 {
    flow_label_to_udp_sport(flow_label(local_qpn, remote_qpn))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Reference values computed from the kernel formula by hand (Python):
    /// `v = l*r; v ^= v >> 20; v ^= v >> 40; fl = v & 0xFFFFF`,
    /// `sport = ((fl & 0x3FFF) ^ ((fl & 0xFC000) >> 14)) | 0xC000`.
    #[test]
    fn udp_sport_matches_the_kernel_formula() {
        // 0x11 * 0x22 = 0x242: no folding.
        assert_eq!(flow_label(0x11, 0x22), 0x242);
        assert_eq!(udp_sport(0x11, 0x22), 0xC242);
        // 0x123456 * 0x654321 = 0x7336_2B0E_5316: folds across 20 and 40 bits.
        let v: u64 = 0x12_3456 * 0x65_4321;
        let folded = (v ^ (v >> 20)) ^ ((v ^ (v >> 20)) >> 40);
        assert_eq!(flow_label(0x12_3456, 0x65_4321), (folded & 0xF_FFFF) as u32);
        // Symmetric, and always in the dynamic range.
        for (a, b) in [(1, 2), (0x100, 0xFFFFFF), (0xABCDEF, 0x123), (0, 77)] {
            assert_eq!(udp_sport(a, b), udp_sport(b, a));
            assert!(udp_sport(a, b) >= 0xC000);
        }
        assert_eq!(flow_label_to_udp_sport(0), 0xC000);
        assert_eq!(flow_label_to_udp_sport(0xF_FFFF), 0xC000 | (0x3FFF ^ 0x3F));
    }
}
