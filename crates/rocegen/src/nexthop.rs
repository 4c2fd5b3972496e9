//! The MAC address RoCE frames to a peer must carry: the peer's own when it is on the link, and
//! the next hop's when a router is in between (a routed fabric: `headroom lab fabric`). The
//! out-of-band exchange gives the peer's MAC, which only helps on one L2 segment; across routers
//! the kernel's own choice is read back: its IPv4 route to the peer on our device
//! (`/proc/net/route`, longest prefix) and, for a route via a gateway, the gateway's entry in
//! its neighbour table (`/proc/net/arp`), which the out-of-band TCP connection to the peer just
//! resolved through that same gateway.

use std::net::Ipv4Addr;

/// `RTF_UP` and `RTF_GATEWAY` of `/proc/net/route`'s flags (linux/route.h).
const RTF_UP: u32 = 0x1;
const RTF_GATEWAY: u32 = 0x2;
/// `ATF_COM` of `/proc/net/arp`'s flags: the entry is resolved (linux/if_arp.h).
const ATF_COM: u32 = 0x2;

/// Where frames to a peer go.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NextHop {
    /// On the link: to the peer's own MAC.
    OnLink,
    /// Through a router: to this gateway's MAC.
    Gateway(Ipv4Addr),
}

/// The kernel's next hop to `peer` on `device`, from the text of `/proc/net/route`; `OnLink`
/// when no route on `device` covers it (another device's route, or none: the exchange's MAC
/// is all there is).
#[must_use]
pub fn next_hop(routes: &str, device: &str, peer: Ipv4Addr) -> NextHop {
    let mut best: Option<(u32, NextHop)> = None;
    for line in routes.lines().skip(1) {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() < 8 || f[0] != device {
            continue;
        }
        let hex = |s: &str| u32::from_str_radix(s, 16).ok();
        let (Some(dest), Some(gateway), Some(flags), Some(mask)) =
            (hex(f[1]), hex(f[2]), hex(f[3]), hex(f[7]))
        else {
            continue;
        };
        // The kernel prints each address as the native-endian u32 of its network-order bytes.
        let (dest, gateway, mask) = (
            u32::from_be_bytes(dest.to_ne_bytes()),
            Ipv4Addr::from(gateway.to_ne_bytes()),
            u32::from_be_bytes(mask.to_ne_bytes()),
        );
        if flags & RTF_UP == 0 || u32::from(peer) & mask != dest & mask {
            continue;
        }
        let length = mask.count_ones();
        let hop = if flags & RTF_GATEWAY != 0 {
            NextHop::Gateway(gateway)
        } else {
            NextHop::OnLink
        };
        if best.is_none_or(|(l, _)| length > l) {
            best = Some((length, hop));
        }
    }
    best.map_or(NextHop::OnLink, |(_, hop)| hop)
}

/// The resolved MAC of `address` on `device`, from the text of `/proc/net/arp`.
#[must_use]
pub fn neighbour_mac(arp: &str, device: &str, address: Ipv4Addr) -> Option<[u8; 6]> {
    for line in arp.lines().skip(1) {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() < 6 || f[5] != device || f[0].parse::<Ipv4Addr>().ok() != Some(address) {
            continue;
        }
        let flags = u32::from_str_radix(f[2].trim_start_matches("0x"), 16).ok()?;
        if flags & ATF_COM == 0 {
            return None;
        }
        let mut mac = [0u8; 6];
        let mut parts = f[3].split(':');
        for byte in &mut mac {
            *byte = u8::from_str_radix(parts.next()?, 16).ok()?;
        }
        return Some(mac);
    }
    None
}

/// The MAC frames to `peer` (whose own MAC is `peer_mac`) must carry on `device`, reading the
/// kernel's tables.
///
/// # Errors
/// The route goes through a gateway the kernel has no resolved neighbour entry for.
pub fn destination_mac(device: &str, peer: Ipv4Addr, peer_mac: [u8; 6]) -> Result<[u8; 6], String> {
    let routes = std::fs::read_to_string("/proc/net/route").unwrap_or_default();
    match next_hop(&routes, device, peer) {
        NextHop::OnLink => Ok(peer_mac),
        NextHop::Gateway(gateway) => {
            let arp = std::fs::read_to_string("/proc/net/arp").unwrap_or_default();
            neighbour_mac(&arp, device, gateway).ok_or_else(|| {
                format!(
                    "the route to {peer} on {device} goes through {gateway}, which the kernel has \
                     not resolved (no complete entry in /proc/net/arp)"
                )
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Captured from a fabric host (10.2.1.1/31 on eth0, default via 10.2.1.0) on x86-64.
    const ROUTES: &str = "\
Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT
eth0\t00000000\t0001020A\t0003\t0\t0\t0\t00000000\t0\t0\t0
eth0\t0001020A\t00000000\t0001\t0\t0\t0\tFEFFFFFF\t0\t0\t0
";
    const ARP: &str = "\
IP address       HW type     Flags       HW address            Mask     Device
10.2.1.0         0x1         0x2         02:66:73:02:00:01     *        eth0
10.9.9.9         0x1         0x0         00:00:00:00:00:00     *        eth0
";

    #[test]
    fn a_peer_behind_the_gateway_gets_the_gateways_mac_and_an_on_link_one_its_own() {
        if cfg!(target_endian = "little") {
            let gw = Ipv4Addr::new(10, 2, 1, 0);
            assert_eq!(
                next_hop(ROUTES, "eth0", Ipv4Addr::new(10, 2, 2, 3)),
                NextHop::Gateway(gw)
            );
            // The /31 is longer than the default route: the leaf's end is on the link.
            assert_eq!(next_hop(ROUTES, "eth0", gw), NextHop::OnLink);
            // Another device's routes do not count.
            assert_eq!(
                next_hop(ROUTES, "eth1", Ipv4Addr::new(10, 2, 2, 3)),
                NextHop::OnLink
            );
        }
        assert_eq!(
            neighbour_mac(ARP, "eth0", Ipv4Addr::new(10, 2, 1, 0)),
            Some([0x02, 0x66, 0x73, 0x02, 0x00, 0x01])
        );
        // Incomplete, unknown, or on another device: none.
        assert_eq!(neighbour_mac(ARP, "eth0", Ipv4Addr::new(10, 9, 9, 9)), None);
        assert_eq!(neighbour_mac(ARP, "eth0", Ipv4Addr::new(10, 2, 2, 1)), None);
        assert_eq!(neighbour_mac(ARP, "eth1", Ipv4Addr::new(10, 2, 1, 0)), None);
        assert_eq!(
            next_hop("garbage\nmore garbage here", "eth0", Ipv4Addr::LOCALHOST),
            NextHop::OnLink
        );
    }
}
