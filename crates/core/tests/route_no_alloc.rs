//! What an lcore does with the FIB allocates and frees nothing: switching to a new snapshot
//! (`FibReader::refresh`), IPv4/IPv6 lookups, ECMP member choice. A counting global allocator
//! counts every allocator call the lcore's part makes, frees included; the control plane's part
//! (building, publishing, reclaiming) runs between the measured sections.

use headroom_core::route::{
    fib_channel, EcmpMember, FibBuilder, FibConfig, FlowKey, Ipv4Prefix, Ipv6Prefix, NextHop,
    NextHopId, RouteTarget,
};
use headroom_core::types::PortId;
use headroom_testkit::allocator_calls;
use headroom_wire::ethernet::MacAddress;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::sync::Arc;

#[global_allocator]
static GLOBAL: headroom_testkit::CountingAllocator = headroom_testkit::CountingAllocator;

#[test]
fn swaps_lookups_and_ecmp_choice_make_no_allocator_call() {
    let mut b = FibBuilder::new(FibConfig::default()).unwrap();
    let hops: Vec<NextHopId> = (0..4u8)
        .map(|i| {
            b.add_next_hop(NextHop::Resolved {
                port: PortId(u16::from(i)),
                vlan: None,
                mac: MacAddress([2, 0, 0, 0, 0, i]),
            })
            .unwrap()
        })
        .collect();
    let members: Vec<EcmpMember> = hops.iter().map(|&h| EcmpMember::new(h)).collect();
    let group = b.add_ecmp_group(&members, None).unwrap();
    let (mut sender, mut reader) = fib_channel(Arc::clone(b.published()));
    let mut checksum = 0u64;
    for round in 0..8u32 {
        // Control plane: a change, a publication, the send, the reclaim.
        let p = Ipv4Prefix::new(Ipv4Addr::from(0x0a00_0000 | (round << 16)), 16).unwrap();
        b.set_route_v4(p, RouteTarget::Ecmp(group)).unwrap();
        let p6 = Ipv6Prefix::new(
            Ipv6Addr::from(0x2001_0db8_u128 << 96 | u128::from(round) << 64),
            64,
        )
        .unwrap();
        b.set_route_v6(p6, RouteTarget::NextHop(hops[0])).unwrap();
        sender.reclaim();
        let fib = b.publish().unwrap();
        assert!(sender.send(&fib));
        drop(fib);
        // Lcore: swap at the burst boundary, then a burst of lookups.
        let before = allocator_calls();
        assert!(reader.refresh());
        let fib = reader.fib();
        for i in 0..256u32 {
            let dst = Ipv4Addr::from(0x0a00_0000 | (i % (round + 1)) << 16 | i);
            let flow = FlowKey::ipv4(
                Ipv4Addr::new(10, 200, 0, 1),
                dst,
                17,
                0xc000 | i as u16,
                4791,
            );
            if let Some(target) = fib.lookup_v4(dst) {
                let id = fib.resolve(target, || flow);
                checksum += u64::from(fib.next_hop(id).port().unwrap().0);
            }
            let dst6 =
                Ipv6Addr::from(0x2001_0db8_u128 << 96 | u128::from(i % (round + 1)) << 64 | 5);
            checksum += u64::from(fib.lookup_v6(dst6).is_some());
        }
        assert!(!reader.refresh());
        assert_eq!(allocator_calls() - before, 0, "round {round}");
    }
    assert!(checksum > 0);
}
