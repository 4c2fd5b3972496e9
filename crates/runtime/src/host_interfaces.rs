//! Host interfaces and the FIB mirror: Linux as the control plane of the routed ports (VPP
//! linux-cp's model; docs/operations.md "Routing").
//!
//! For every routed port the control thread owns a TAP named as the port with the port's
//! (router) MAC and MTU, up, in its own network namespace ([`headroom_linux_cp::tap`]), and one
//! for every VLAN interface (SVI, `Vlan1000`: its MAC, the smallest MTU of the VLAN's members).
//! Bridged ports get none: the kernel would inject its own IPv6 link-local chatter (router
//! solicitations, MLD, DAD) into the L2 domain through each, and a bridged port has no address
//! for the kernel to answer on (the VLAN interface has); their punted frames stay counted
//! *unconsumed*.
//!
//! Per turn of the control loop (`ControlPlane::pump_control_frames`, then
//! [`HostInterfaces::pump`]):
//! 1. Punted frames of a port with a TAP, or for a VLAN interface, are written to its TAP
//!    ([`HostInterfaces::deliver_punt`], non-blocking: a full TAP queue is a counted drop,
//!    `punt_tap_full`); frames of other ports stay *unconsumed*. LLDP frames of a port whose
//!    LLDP agent runs are the agent's ([`crate::lldp`]), not the TAP's.
//! 2. Frames the kernel wrote to a TAP are read (at most [`INJECT_PER_TAP_PER_TURN`] per TAP)
//!    and sent out of the port with [`Running::inject`] (the normal egress path: classified,
//!    rate-limited, scheduled), a VLAN interface's into its VLAN with [`Running::inject_vlan`];
//!    a refusal is counted (`inject_refused`).
//! 3. The netlink mirror ([`LinuxCp`]) applies what the kernel announced, the FIB is published
//!    when it changed and sent to every routing lcore ([`Running::send_fib`]); a publication
//!    that must wait (an lcore still holds the spare copy) or a send an lcore's ring refused is
//!    counted and retried on the next turn, never waited for.
//!
//! The TAPs and the mirror outlive a dataplane restart (a reconfiguration): closing a TAP would
//! take its addresses and routes with it. They are rebuilt only when the routed ports change.
//!
//! [`HostInterfaces::wait`] is the loop's sleep: one `poll(2)` on every TAP and the netlink
//! socket, so a frame from the kernel or a route change wakes it at once; punted frames arrive
//! through rings without a wakeup, so the wait is short ([`ROUTED_TURN`]).

use crate::protocol::{
    HostInterfaceRow, IpNeighborRow, IpRouteNextHop, IpRouteRow, IpRouteTable, RouteMirrorSummary,
};
use crate::Running;
use headroom_config::Config;
use headroom_core::punt::PuntReason;
use headroom_core::route::{Fib, PublishError};
use headroom_core::types::PortId;
use headroom_linux_cp::mirror::MirrorStats;
use headroom_linux_cp::tap::TapInterface;
use headroom_linux_cp::{LinuxCp, LinuxCpConfig};
use headroom_wire::ethernet::MacAddress;
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use std::time::Duration;

/// Frames read from one TAP per turn at most (bounded work per turn; the inject ring holds
/// 256).
pub const INJECT_PER_TAP_PER_TURN: usize = 64;

/// Longest wait of the control loop when host interfaces exist: the latency a punted frame
/// (ARP, ping of the switch, BGP) may add before it reaches the kernel.
pub const ROUTED_TURN: Duration = Duration::from_millis(2);

/// Netlink polls per turn at most (each reads up to `headroom_linux_cp::POLL_DATAGRAMS`).
const NETLINK_POLLS_PER_TURN: usize = 4;

/// Counters of one host interface since it was created.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostInterfaceCounters {
    /// Punted frames written to the TAP (the kernel received them).
    pub punt_frames: u64,
    /// Punted frames dropped because the TAP's queue towards the kernel was full.
    pub punt_tap_full: u64,
    /// Punted frames the TAP refused (e.g. a runt; logged once per kind).
    pub punt_errors: u64,
    /// Frames the kernel sent on the TAP, handed to the dataplane to send out of the port.
    pub inject_frames: u64,
    /// Frames the kernel sent that the dataplane could not take (inject ring full, too long).
    pub inject_refused: u64,
    /// Failed reads of the TAP.
    pub read_errors: u64,
}

/// One host interface: a routed port's, or a VLAN interface's (`vlan`; then `port` is only
/// the placeholder port of its next hops).
#[derive(Debug)]
struct HostPort {
    port: PortId,
    vlan: Option<u16>,
    tap: TapInterface,
    mac: [u8; 6],
    mtu: u32,
    counters: HostInterfaceCounters,
}

/// Counters of the FIB's hand-over to the lcores.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FibPublishCounters {
    /// Snapshots published (and sent to every routing lcore).
    pub published: u64,
    /// Turns a publication waited because an lcore still held the spare copy.
    pub publish_waits: u64,
    /// Sends an lcore's ring refused (retried on the next turn).
    pub send_refused: u64,
    /// Failed netlink polls or resyncs (retried on the next turn).
    pub netlink_errors: u64,
}

/// The routed ports' host interfaces and the netlink mirror (module docs).
pub struct HostInterfaces {
    ports: Vec<HostPort>,
    /// Port index → index into `ports`.
    by_port: Vec<Option<usize>>,
    linux_cp: LinuxCp,
    /// A snapshot published but not yet taken by every routing lcore.
    pending: Option<Arc<Fib>>,
    fib: FibPublishCounters,
    buffer: Vec<u8>,
}

impl std::fmt::Debug for HostInterfaces {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostInterfaces")
            .field("ports", &self.ports.len())
            .field("fib", &self.fib)
            .finish_non_exhaustive()
    }
}

/// What a configuration's host interfaces are: (port, name, MAC, MTU) of every routed port.
fn wanted(config: &Config) -> Vec<(PortId, String, [u8; 6], u32)> {
    config
        .ports
        .iter()
        .enumerate()
        .filter(|(_, p)| p.vlan.is_routed())
        .map(|(i, p)| {
            (
                PortId(u16::try_from(i).unwrap_or(u16::MAX)),
                p.name.clone(),
                p.mac,
                p.mtu_bytes,
            )
        })
        .collect()
}

/// What a configuration's VLAN interfaces' host interfaces are: (VLAN, name, MAC, MTU, the
/// placeholder port of their next hops). The MTU is the smallest of the VLAN's member ports
/// (what a routed packet flooded to all of them must fit), the placeholder its first member.
fn wanted_vlans(config: &Config) -> Vec<(u16, String, [u8; 6], u32, PortId)> {
    config
        .vlan_interfaces
        .iter()
        .map(|v| {
            let members = || {
                config
                    .ports
                    .iter()
                    .enumerate()
                    .filter(|(_, p)| p.vlan.contains(v.vlan_id))
            };
            let mtu = members().map(|(_, p)| p.mtu_bytes).min().unwrap_or(1500);
            let first = members().map(|(i, _)| i).next().unwrap_or(0);
            (
                v.vlan_id,
                v.name.clone(),
                v.mac,
                mtu,
                PortId(u16::try_from(first).unwrap_or(u16::MAX)),
            )
        })
        .collect()
}

impl HostInterfaces {
    /// Creates the TAPs of `config`'s routed ports in the calling thread's namespace, then
    /// opens the netlink mirror with them (after, so that their links are in its first dump).
    /// `None` when no port is routed.
    ///
    /// # Errors
    /// A TAP could not be created (no `/dev/net/tun`, no `CAP_NET_ADMIN`, the name taken), or
    /// netlink failed; the message names the port.
    pub fn open(config: &Config) -> Result<Option<Self>, String> {
        let wanted = wanted(config);
        let vlans = wanted_vlans(config);
        if wanted.is_empty() && vlans.is_empty() {
            return Ok(None);
        }
        for (port, _, _, _) in &wanted {
            if let Some(device) = linux_device_of(config, *port) {
                quiet_port_device(&device);
            }
        }
        let mut ports = Vec::with_capacity(wanted.len());
        let mut by_port = vec![None; config.ports.len()];
        for (port, name, mac, mtu) in &wanted {
            let tap = TapInterface::create(name, MacAddress(*mac), Some(*mtu))
                .map_err(|e| format!("host interface {name}: cannot create its TAP: {e}"))?;
            tracing::info!(interface = %name, ifindex = tap.ifindex(), "host interface created");
            by_port[port.index()] = Some(ports.len());
            ports.push(HostPort {
                port: *port,
                vlan: None,
                tap,
                mac: *mac,
                mtu: *mtu,
                counters: HostInterfaceCounters::default(),
            });
        }
        for (vid, name, mac, mtu, placeholder) in &vlans {
            let tap = TapInterface::create(name, MacAddress(*mac), Some(*mtu))
                .map_err(|e| format!("VLAN interface {name}: cannot create its TAP: {e}"))?;
            tracing::info!(interface = %name, ifindex = tap.ifindex(), vlan = vid, "VLAN interface created");
            ports.push(HostPort {
                port: *placeholder,
                vlan: Some(*vid),
                tap,
                mac: *mac,
                mtu: *mtu,
                counters: HostInterfaceCounters::default(),
            });
        }
        let cp_config = LinuxCpConfig {
            netlink_receive_buffer_bytes: usize::try_from(
                config.routing.netlink_receive_buffer_bytes,
            )
            .unwrap_or(usize::MAX),
            fib: config.fib_config(),
            vlan_interfaces: vlans
                .iter()
                .map(|(vid, name, _, _, port)| (name.clone(), *vid, *port))
                .collect(),
        };
        let linux_cp = LinuxCp::open(
            wanted
                .iter()
                .map(|(port, name, _, _)| (name.clone(), *port)),
            cp_config,
        )
        .map_err(|e| format!("netlink mirror: {e}"))?;
        tracing::info!(
            receive_buffer_bytes = linux_cp.receive_buffer_bytes(),
            routes = linux_cp.stats().routes_v4 + linux_cp.stats().routes_v6,
            "netlink mirror started"
        );
        Ok(Some(Self {
            ports,
            by_port,
            linux_cp,
            pending: None,
            fib: FibPublishCounters::default(),
            buffer: vec![0; crate::control_frames::INJECT_MAX_BYTES],
        }))
    }

    /// Whether `config` has the same host interfaces (so a restart keeps these).
    #[must_use]
    pub fn fits(&self, config: &Config) -> bool {
        let wanted = wanted(config);
        let vlans = wanted_vlans(config);
        let (routed, svis): (Vec<&HostPort>, Vec<&HostPort>) =
            self.ports.iter().partition(|h| h.vlan.is_none());
        wanted.len() == routed.len()
            && wanted
                .iter()
                .zip(&routed)
                .all(|((port, name, mac, mtu), h)| {
                    *port == h.port && name == h.tap.name() && *mac == h.mac && *mtu == h.mtu
                })
            && vlans.len() == svis.len()
            && vlans
                .iter()
                .zip(&svis)
                .all(|((vid, name, mac, mtu, port), h)| {
                    h.vlan == Some(*vid)
                        && name == h.tap.name()
                        && *mac == h.mac
                        && *mtu == h.mtu
                        && *port == h.port
                })
            && self.by_port.len() == config.ports.len()
    }

    /// The FIB a new dataplane starts with (the last published).
    #[must_use]
    pub fn fib(&mut self) -> Arc<Fib> {
        Arc::clone(self.linux_cp.fib_mut().published())
    }

    /// The mirror (model, routes, neighbours).
    #[must_use]
    pub fn linux_cp(&self) -> &LinuxCp {
        &self.linux_cp
    }

    /// The mirror's counters.
    #[must_use]
    pub fn mirror_stats(&self) -> MirrorStats {
        self.linux_cp.stats()
    }

    /// The FIB hand-over counters.
    #[must_use]
    pub fn fib_counters(&self) -> FibPublishCounters {
        self.fib
    }

    /// Every host interface: port (a VLAN interface: `None`), name, counters.
    pub fn interfaces(
        &self,
    ) -> impl Iterator<Item = (Option<PortId>, &str, HostInterfaceCounters)> {
        self.ports
            .iter()
            .map(|h| (h.vlan.is_none().then_some(h.port), h.tap.name(), h.counters))
    }

    /// Sets the carrier of `port`'s host interface to the port's link state (`TUNSETCARRIER`):
    /// without it the kernel keeps its connected routes, and FRR its sessions and routes, over
    /// a dead port. A port without a host interface is ignored.
    pub fn set_carrier(&self, port: PortId, up: bool) {
        let Some(&Some(i)) = self.by_port.get(port.index()) else {
            return;
        };
        let h = &self.ports[i];
        match h.tap.set_carrier(up) {
            Ok(()) => {
                tracing::info!(interface = %h.tap.name(), up, "host interface carrier follows the port's link")
            }
            Err(e) => {
                tracing::warn!(interface = %h.tap.name(), error = %e, "cannot set the host interface's carrier")
            }
        }
    }

    /// Waits until a TAP or the netlink socket is readable, or `timeout` passes.
    pub fn wait(&self, timeout: Duration) {
        use rustix::event::{poll, PollFd, PollFlags, Timespec};
        let mut pollfds: Vec<PollFd<'_>> = self
            .ports
            .iter()
            .map(|h| PollFd::from_borrowed_fd(h.tap.as_fd(), PollFlags::IN))
            .chain(std::iter::once(PollFd::from_borrowed_fd(
                self.linux_cp.as_fd(),
                PollFlags::IN,
            )))
            .collect();
        let ts = Timespec {
            tv_sec: i64::try_from(timeout.as_secs()).unwrap_or(i64::MAX),
            tv_nsec: i64::from(timeout.subsec_nanos()),
        };
        // An interrupted or failed poll only shortens the wait.
        let _ = poll(&mut pollfds, Some(&ts));
    }

    /// One turn (module docs) after the punted frames were delivered
    /// ([`HostInterfaces::deliver_punt`]): the kernel's frames to the dataplane, the mirror to
    /// the lcores.
    pub fn pump(&mut self, running: &mut Running) {
        self.inject_from_taps(running);
        self.mirror_fib(running);
    }

    /// Writes a punted frame of `port` (for the VLAN interface of `vlan`, when it carries one)
    /// to its TAP; `false` when there is none (the frame stays unconsumed).
    pub fn deliver_punt(&mut self, port: PortId, vlan: Option<u16>, frame: &[u8]) -> bool {
        let target = match vlan {
            Some(v) => self.ports.iter().position(|h| h.vlan == Some(v)),
            None => self.by_port.get(port.index()).copied().flatten(),
        };
        let Some(i) = target else {
            return false;
        };
        let h = &mut self.ports[i];
        match h.tap.write_frame(frame) {
            Ok(true) => h.counters.punt_frames += 1,
            Ok(false) => h.counters.punt_tap_full += 1,
            Err(e) => {
                if h.counters.punt_errors == 0 {
                    tracing::warn!(interface = %h.tap.name(), error = %e, len = frame.len(), "the host interface refused a punted frame");
                }
                h.counters.punt_errors += 1;
            }
        }
        true
    }

    fn inject_from_taps(&mut self, running: &mut Running) {
        for h in &mut self.ports {
            for _ in 0..INJECT_PER_TAP_PER_TURN {
                match h.tap.read_frame(&mut self.buffer) {
                    Ok(None) => break,
                    Ok(Some(len)) => match match h.vlan {
                        Some(vid) => running.inject_vlan(vid, &self.buffer[..len]),
                        None => running.inject(h.port, &self.buffer[..len]),
                    } {
                        Ok(()) => h.counters.inject_frames += 1,
                        Err(_) => h.counters.inject_refused += 1,
                    },
                    Err(e) => {
                        if h.counters.read_errors == 0 {
                            tracing::warn!(interface = %h.tap.name(), error = %e, "cannot read the host interface");
                        }
                        h.counters.read_errors += 1;
                        break;
                    }
                }
            }
        }
    }

    fn mirror_fib(&mut self, running: &mut Running) {
        for _ in 0..NETLINK_POLLS_PER_TURN {
            match self.linux_cp.poll() {
                Ok(outcome) if outcome.more => {}
                Ok(_) => break,
                Err(e) => {
                    if self.fib.netlink_errors == 0 {
                        tracing::warn!(error = %e, "netlink mirror: poll failed; retrying");
                    }
                    self.fib.netlink_errors += 1;
                    break;
                }
            }
        }
        // What the lcores returned makes the spare copy unique again.
        running.reclaim_fib();
        if self.pending.is_none() {
            match self.linux_cp.fib_mut().publish() {
                Ok(fib) => self.pending = Some(fib),
                Err(PublishError::Unchanged) => {}
                Err(PublishError::SpareInUse) => self.fib.publish_waits += 1,
            }
        }
        if let Some(fib) = &self.pending {
            let refused = running.send_fib(fib);
            if refused == 0 {
                self.pending = None;
                self.fib.published += 1;
            } else {
                self.fib.send_refused += refused;
            }
        }
    }
}

/// The Linux interface under `port`, in the switch's namespace: the port's device on AF_PACKET,
/// the `iface=` of its `net_af_packet`/`net_af_xdp` vdev on DPDK (EAL opens those in the
/// namespace headroom runs in, so the kernel sees the same veth). `None` for a port with no
/// Linux interface (a PCI device bound to a DPDK driver, the memory backend).
fn linux_device_of(config: &Config, port: PortId) -> Option<String> {
    let device = &config.ports.get(port.index())?.device;
    match config.switch.driver {
        headroom_config::Driver::AfPacket => Some(device.clone()),
        headroom_config::Driver::Dpdk => headroom_dpdk::vdev_interfaces(&config.dpdk.eal_args)
            .into_iter()
            .find(|(vdev, _)| vdev == device)
            .map(|(_, iface)| iface),
        headroom_config::Driver::Memory => None,
    }
}

/// Keeps the kernel's own stack off a routed port's Linux device (AF_PACKET, or the veth under
/// a DPDK `net_af_packet`/`net_af_xdp` vdev), which sits in the same
/// namespace as the host interfaces: with Linux's defaults it would answer ARP for the TAPs'
/// addresses with the device's MAC (`arp_ignore = 0` replies for any local address on any
/// interface), the neighbour would then send to that MAC, and the kernel, not headroom, would
/// route its packets. `arp_ignore = 8` (never reply), `forwarding = 0` (nothing received on it is
/// forwarded) and IPv6 off leave the device to the dataplane. Failures are logged, not fatal (a
/// device the kernel does not know is refused when the port opens).
fn quiet_port_device(device: &str) {
    for (key, value) in [
        (format!("/proc/sys/net/ipv4/conf/{device}/arp_ignore"), "8"),
        (format!("/proc/sys/net/ipv4/conf/{device}/forwarding"), "0"),
        (
            format!("/proc/sys/net/ipv6/conf/{device}/disable_ipv6"),
            "1",
        ),
    ] {
        // The IPv6 key is absent when the namespace has IPv6 off or the kernel has none.
        if let Err(e) = std::fs::write(&key, value) {
            if !(key.contains("ipv6") && e.kind() == std::io::ErrorKind::NotFound) {
                tracing::warn!(device, key, error = %e, "cannot keep the kernel's stack off a routed port's device");
            }
        }
    }
}

/// Creates the host interfaces of `config` again if they changed (a reconfiguration).
///
/// # Errors
/// See [`HostInterfaces::open`].
pub fn reconcile(current: &mut Option<HostInterfaces>, config: &Config) -> Result<(), String> {
    let fits = match current {
        Some(h) => h.fits(config),
        None => !config.has_routed_ports() && config.vlan_interfaces.is_empty(),
    };
    if !fits {
        // Close the old TAPs first: the new ones may take their names.
        *current = None;
        *current = HostInterfaces::open(config)?;
    }
    Ok(())
}

/// FRR's name and code letter of a route's `rtm_protocol` (linux `rtnetlink.h`, FRR's
/// `zebra/rt_netlink.h`); `connected` is a kernel route without a gateway.
fn protocol_name(protocol: u8, connected: bool) -> (String, &'static str) {
    match protocol {
        2 if connected => ("connected".into(), "C"),
        2 => ("kernel".into(), "K"),
        3 => ("boot".into(), "K"),
        4 => ("static".into(), "S"),
        11 => ("zebra".into(), "K"),
        186 => ("bgp".into(), "B"),
        187 => ("isis".into(), "I"),
        188 => ("ospf".into(), "O"),
        189 => ("rip".into(), "R"),
        196 => ("static".into(), "S"),
        n => (n.to_string(), "K"),
    }
}

fn mac_text(mac: [u8; 6]) -> String {
    mac.iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":")
}

impl HostInterfaces {
    /// `show ip route`: the mirror's counters and every installed prefix. `names`: the ports'
    /// names, by port index.
    #[must_use]
    pub fn route_table(&self, names: &[String]) -> IpRouteTable {
        use headroom_core::route::{NextHop, NextHopId, RouteTarget};
        let mirror = self.linux_cp.mirror();
        let fib = mirror.fib();
        let port_name = |p: PortId| {
            names
                .get(p.index())
                .cloned()
                .unwrap_or_else(|| p.to_string())
        };
        let hop = |id: NextHopId, weight: Option<u32>| -> Option<IpRouteNextHop> {
            let next_hop = fib.next_hop(id)?;
            let port = next_hop.port()?;
            let vlan = match *next_hop {
                NextHop::Resolved { vlan, .. } | NextHop::Unresolved { vlan, .. } => vlan,
                _ => None,
            };
            let mac = match next_hop {
                NextHop::Resolved { mac, .. } => Some(mac_text(mac.0)),
                _ => None,
            };
            Some(IpRouteNextHop {
                via: mirror
                    .hop_key(id)
                    .and_then(|k| k.gateway)
                    .map(|g| g.to_string()),
                interface: vlan.map_or_else(|| port_name(port), |v| format!("Vlan{v}")),
                mac,
                weight,
            })
        };
        let routes = mirror
            .routes()
            .map(|(prefix, target, reason)| {
                let (action, next_hops) = match target {
                    RouteTarget::NextHop(NextHopId::LOCAL) => ("local", Vec::new()),
                    RouteTarget::NextHop(NextHopId::BLACKHOLE) => ("blackhole", Vec::new()),
                    RouteTarget::NextHop(NextHopId::KERNEL) => ("kernel", Vec::new()),
                    RouteTarget::NextHop(id) => ("forward", hop(id, None).into_iter().collect()),
                    RouteTarget::Ecmp(group) => (
                        "ecmp",
                        mirror
                            .group_members(group)
                            .unwrap_or_default()
                            .iter()
                            .filter_map(|m| hop(m.next_hop, Some(u32::from(m.weight))))
                            .collect(),
                    ),
                };
                let kernel_route = mirror.model().route(prefix);
                let connected =
                    kernel_route.is_some_and(|r| r.paths.iter().all(|p| p.gateway.is_none()));
                let (protocol, code) = match (kernel_route, action) {
                    (_, "local") => ("local".to_owned(), "L"),
                    (Some(r), _) => protocol_name(r.protocol, connected),
                    // Host routes the mirror makes for resolved neighbours (no kernel route).
                    (None, _) => ("neighbor".to_owned(), "N"),
                };
                IpRouteRow {
                    prefix: format!("{}/{}", prefix.addr(), prefix.prefix_len()),
                    protocol,
                    code: code.to_owned(),
                    action: action.to_owned(),
                    reason: reason.map(|r| format!("{r:?}").to_lowercase()),
                    next_hops,
                }
            })
            .collect();
        IpRouteTable {
            mirror: self.mirror_summary(),
            routes,
        }
    }

    /// The mirror's and the FIB hand-over's counters.
    #[must_use]
    pub fn mirror_summary(&self) -> RouteMirrorSummary {
        let fib = self.linux_cp.mirror().fib();
        let s = self.linux_cp.stats();
        let c = self.fib;
        let count = |v: usize| u64::try_from(v).unwrap_or(u64::MAX);
        RouteMirrorSummary {
            enabled: true,
            messages: s.messages,
            resyncs: s.resyncs,
            overruns: s.overruns,
            decode_errors: s.decode_errors,
            fib_refused: s.fib_refused,
            routes_v4: count(s.routes_v4),
            routes_v6: count(s.routes_v6),
            routes_via_foreign_interface: count(s.routes_via_foreign_interface),
            routes_missing_nexthop: count(s.routes_missing_nexthop),
            routes_fib_full: count(s.routes_fib_full),
            next_hops: count(fib.next_hop_count()),
            ecmp_groups: count(fib.ecmp_group_count()),
            published: c.published,
            publish_waits: c.publish_waits,
            send_refused: c.send_refused,
            netlink_errors: c.netlink_errors,
        }
    }

    /// `show ip neighbors`: the kernel's neighbours on the routed ports.
    #[must_use]
    pub fn neighbors(&self, names: &[String]) -> Vec<IpNeighborRow> {
        let mirror = self.linux_cp.mirror();
        mirror
            .model()
            .neighbours
            .values()
            .filter_map(|n| {
                let port = mirror.port_of(n.index)?;
                Some(IpNeighborRow {
                    address: n.addr.to_string(),
                    family: if n.addr.is_ipv4() { "ipv4" } else { "ipv6" }.to_owned(),
                    mac: n.mac.map(mac_text),
                    interface: match mirror.vlan_of(n.index) {
                        Some(v) => format!("Vlan{v}"),
                        None => names
                            .get(port.index())
                            .cloned()
                            .unwrap_or_else(|| port.to_string()),
                    },
                    state: n.state_name().to_owned(),
                    resolved: n.usable_mac().is_some(),
                })
            })
            .collect()
    }

    /// The host interface rows (`show host-interfaces`), with the dataplane's inject, punt and
    /// routed counters of each port from `stats` (its counters since start, carried over
    /// reconfigurations: a new dataplane's own start at zero).
    #[must_use]
    pub fn rows(
        &self,
        stats: &dyn Fn(PortId) -> headroom_core::stats::PortStats,
    ) -> Vec<HostInterfaceRow> {
        self.interfaces()
            .map(|(port, name, c)| {
                // A VLAN interface's routed traffic is counted on its member ports.
                let s = port.map(stats).unwrap_or_default();
                HostInterfaceRow {
                    interface: name.to_owned(),
                    punt_frames: c.punt_frames,
                    punt_tap_full: c.punt_tap_full,
                    punt_errors: c.punt_errors,
                    inject_frames: c.inject_frames,
                    inject_refused: c.inject_refused,
                    read_errors: c.read_errors,
                    dataplane_inject_frames: s.inject_frames,
                    dataplane_inject_drops: s.inject_drops,
                    rif_in_packets: s.rif_in_packets,
                    rif_in_octets: s.rif_in_octets,
                    rif_out_packets: s.rif_out_packets,
                    rif_out_octets: s.rif_out_octets,
                    punted: PuntReason::ALL
                        .iter()
                        .map(|r| (r.name().to_owned(), s.punt_frames[r.index()]))
                        .filter(|(_, n)| *n > 0)
                        .collect(),
                }
            })
            .collect()
    }
}
