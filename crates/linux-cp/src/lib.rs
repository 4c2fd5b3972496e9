//! Linux as headroom's control plane (VPP linux-cp's model): the kernel and ordinary daemons
//! (FRR) decide, headroom forwards.
//!
//! * [`LinuxCp`]: the netlink mirror. It subscribes to rtnetlink in the calling thread's
//!   namespace (links, addresses, IPv4/IPv6 routes, neighbours, nexthop objects), dumps the
//!   initial state, then follows notifications, and keeps a [`headroom_core::route::FibBuilder`]
//!   in line with the kernel for the switch's ports ([`mirror`] says which route each prefix
//!   gets). The runtime publishes snapshots from it and hands them to the lcores
//!   ([`headroom_core::route::swap`]).
//! * [`tap::TapInterface`]: the ports' host interfaces.
//!
//! # Crates
//!
//! `netlink-packet-route` (messages and attributes, typed) with `netlink-packet-core` (framing)
//! and `netlink-sys` (the socket): a synchronous socket fits the control thread's loop, which
//! polls it between its other duties, without bringing in an async runtime (`rtnetlink` is
//! built on tokio or smol), and its route attributes, multipath included, are decoded for us
//! (`neli` leaves `RTA_MULTIPATH` to the caller). Neither decodes nexthop objects; those are
//! decoded in [`message`] with netlink-packet-core's attribute iterator.
//!
//! # Call order
//!
//! [`LinuxCp::open`] (socket joined *before* the dump, so nothing falls between them) → then,
//! from the control thread's loop, [`LinuxCp::poll`] (non-blocking; or [`LinuxCp::wait`] first)
//! → [`headroom_core::route::FibBuilder::publish`] through [`LinuxCp::fib_mut`].
//!
//! # Resynchronisation
//!
//! A netlink overrun (`ENOBUFS`: the kernel dropped notifications because the socket buffer was
//! full) or a link change (after which the kernel drops routes without telling) makes the mirror
//! throw away what is queued, dump everything again into a fresh model, and recompute the FIB
//! from it; notifications that arrive during and after the dump are applied on top, in order.
//! Overruns and resyncs are counted ([`mirror::MirrorStats`]).

pub mod kernel;
pub mod message;
pub mod mirror;
pub mod netlink;
mod sys;
pub mod tap;

use crate::kernel::{KernelModel, Touched};
use crate::mirror::{Mirror, MirrorStats};
use crate::netlink::{DumpKind, Notifications, ReadStatus, Received, RequestSocket};
use headroom_core::route::{FibBuilder, FibConfig, FibError};
use headroom_core::types::PortId;
use std::fmt;
use std::io;
use std::time::Duration;

/// Datagrams one [`LinuxCp::poll`] reads at most (bounded work per call of the control loop).
pub const POLL_DATAGRAMS: usize = 1024;

/// Settings of the mirror.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LinuxCpConfig {
    /// Receive buffer of the notification socket, bytes (forced past `net.core.rmem_max` when
    /// the process may). A burst of notifications beyond it is an overrun, repaired by a resync.
    pub netlink_receive_buffer_bytes: usize,
    /// The FIB's sizes and hash.
    pub fib: FibConfig,
    /// VLAN interfaces (SVIs): (host interface name, VLAN, a member port). Routes and
    /// neighbours on them become next hops in that VLAN (`NextHop::Resolved { vlan: Some(..) }`,
    /// the port only a placeholder: the dataplane goes by its MAC table).
    pub vlan_interfaces: Vec<(String, u16, PortId)>,
}

impl Default for LinuxCpConfig {
    fn default() -> Self {
        Self {
            netlink_receive_buffer_bytes: 8 << 20,
            fib: FibConfig::default(),
            vlan_interfaces: Vec::new(),
        }
    }
}

/// Why the mirror could not start.
#[derive(Debug)]
pub enum LinuxCpError {
    /// A netlink socket call failed.
    Io(io::Error),
    /// The FIB configuration was refused.
    Fib(FibError),
}

impl fmt::Display for LinuxCpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Io(e) => write!(f, "netlink: {e}"),
            Self::Fib(e) => write!(f, "FIB: {e}"),
        }
    }
}

impl std::error::Error for LinuxCpError {}

impl From<io::Error> for LinuxCpError {
    fn from(e: io::Error) -> Self {
        Self::Io(e)
    }
}

/// What one [`LinuxCp::poll`] did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PollOutcome {
    /// Notifications applied.
    pub messages: usize,
    /// Whether it resynchronised.
    pub resynced: bool,
    /// Whether more notifications wait (the read stopped at [`POLL_DATAGRAMS`]).
    pub more: bool,
}

/// The netlink mirror (crate docs).
#[derive(Debug)]
pub struct LinuxCp {
    notifications: Notifications,
    /// The dump socket, opened with the notification socket: a socket stays in the namespace
    /// it was made in, whichever thread later uses it.
    requests: RequestSocket,
    mirror: Mirror,
    received: Vec<Received>,
}

impl LinuxCp {
    /// Starts mirroring the calling thread's namespace for the ports named in `ports` (host
    /// interface name → switch port): joins the notification groups, dumps the kernel's state
    /// and builds the FIB from it.
    ///
    /// # Errors
    /// A netlink failure, or a refused FIB configuration.
    pub fn open(
        ports: impl IntoIterator<Item = (String, PortId)>,
        config: LinuxCpConfig,
    ) -> Result<Self, LinuxCpError> {
        let notifications = Notifications::open(config.netlink_receive_buffer_bytes)?;
        let requests = RequestSocket::open()?;
        let mirror = Mirror::new(ports, config.fib)
            .map_err(LinuxCpError::Fib)?
            .with_vlan_interfaces(config.vlan_interfaces);
        let mut cp = Self {
            notifications,
            requests,
            mirror,
            received: Vec::new(),
        };
        cp.resync()?;
        Ok(cp)
    }

    /// The mirror (model, installed routes, counters).
    #[must_use]
    pub fn mirror(&self) -> &Mirror {
        &self.mirror
    }

    /// The FIB builder, to publish from.
    pub fn fib_mut(&mut self) -> &mut FibBuilder {
        self.mirror.fib_mut()
    }

    /// Counters and gauges.
    #[must_use]
    pub fn stats(&self) -> MirrorStats {
        self.mirror.stats()
    }

    /// The receive buffer the kernel granted the notification socket.
    #[must_use]
    pub fn receive_buffer_bytes(&self) -> usize {
        self.notifications.receive_buffer_bytes()
    }

    /// The notification socket, for a caller that waits on it with other descriptors in one
    /// `poll(2)`.
    #[must_use]
    pub fn as_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        self.notifications.as_fd()
    }

    /// Waits until a notification arrives or `timeout` passes; returns whether one did.
    ///
    /// # Errors
    /// `poll(2)` failed.
    pub fn wait(&self, timeout: Duration) -> io::Result<bool> {
        self.notifications.wait(timeout)
    }

    /// Dumps everything again and rebuilds the model (module docs).
    ///
    /// # Errors
    /// A dump failed; the previous model stays in force.
    pub fn resync(&mut self) -> io::Result<()> {
        self.notifications.discard()?;
        let mut model = KernelModel::default();
        let mut decode_errors = 0;
        for kind in DumpKind::ALL {
            self.received.clear();
            self.requests
                .dump(kind, &mut self.received, &mut decode_errors)?;
            for (message, flags) in &self.received {
                model.apply(message, *flags);
            }
        }
        self.received.clear();
        self.mirror.stats_mut().decode_errors += decode_errors;
        self.mirror.resync(model);
        Ok(())
    }

    /// Applies what the kernel announced since the last call (non-blocking, at most
    /// [`POLL_DATAGRAMS`] datagrams), resynchronising after an overrun or a link change.
    ///
    /// # Errors
    /// A socket error, or a failed resync (the mirror keeps its previous state; call again).
    pub fn poll(&mut self) -> io::Result<PollOutcome> {
        let mut outcome = PollOutcome::default();
        self.received.clear();
        let mut decode_errors = 0;
        let status =
            self.notifications
                .read(&mut self.received, POLL_DATAGRAMS, &mut decode_errors)?;
        self.mirror.stats_mut().decode_errors += decode_errors;
        if status == ReadStatus::Overrun {
            // What was read before the overrun is older than the lost messages: the dump
            // replaces it all.
            self.mirror.stats_mut().overruns += 1;
            tracing::warn!("netlink overrun (ENOBUFS): resynchronising");
            self.resync()?;
            outcome.resynced = true;
            return Ok(outcome);
        }
        let mut needs_resync = false;
        let received = std::mem::take(&mut self.received);
        for (message, flags) in &received {
            let touched: Touched = self.mirror.model_mut().apply(message, *flags);
            needs_resync |= self.mirror.touched(touched);
            outcome.messages += 1;
        }
        self.received = received;
        if needs_resync {
            self.resync()?;
            outcome.resynced = true;
        }
        outcome.more = status == ReadStatus::More;
        Ok(outcome)
    }
}
