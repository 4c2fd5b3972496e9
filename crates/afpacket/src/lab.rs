//! Lab helpers: network namespaces and veth pairs, for tests, examples and lab setups.
//!
//! [`VethLab`] shells out to iproute2 (`ip`), creating a fresh network namespace holding one
//! veth pair, and deletes the namespace (and the pair with it) when dropped. [`NetnsGuard`]
//! moves the calling thread into a namespace and back; a packet socket stays in the namespace it
//! was created in, so a port opened under the guard keeps working after the guard is dropped.

use std::fmt;
use std::fs::File;
use std::io;
use std::marker::PhantomData;
use std::os::fd::{AsFd, OwnedFd};
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};

use crate::sys;

/// While alive, the calling thread is in another network namespace; dropping it moves the
/// thread back. Not `Send`: it must be dropped on the thread that made it.
pub struct NetnsGuard {
    original: OwnedFd,
    _not_send: PhantomData<*const ()>,
}

impl fmt::Debug for NetnsGuard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NetnsGuard").finish_non_exhaustive()
    }
}

impl NetnsGuard {
    /// Moves the calling thread into the named namespace (`/run/netns/NAME`, as made by
    /// `ip netns add`). Needs `CAP_SYS_ADMIN`.
    ///
    /// # Errors
    /// The namespace does not exist, or `setns` was refused.
    pub fn enter(name: &str) -> io::Result<Self> {
        if name.is_empty() || name.contains('/') || name == "." || name == ".." {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "invalid namespace name",
            ));
        }
        let original = OwnedFd::from(File::open("/proc/thread-self/ns/net")?);
        let target = File::open(format!("/run/netns/{name}"))?;
        sys::set_network_namespace(target.as_fd())?;
        Ok(Self {
            original,
            _not_send: PhantomData,
        })
    }
}

impl Drop for NetnsGuard {
    fn drop(&mut self) {
        // Failing to go back would leave this thread in the wrong namespace; that cannot be
        // reported from a destructor, and it cannot fail for a namespace we were just in.
        let _ = sys::set_network_namespace(self.original.as_fd());
    }
}

/// Why a lab could not be set up.
#[derive(Debug)]
pub enum LabError {
    /// Not running as root (namespaces and veths need `CAP_SYS_ADMIN`/`CAP_NET_ADMIN`).
    NotRoot,
    /// The `ip` command (iproute2) could not be run.
    IpMissing(io::Error),
    /// A command failed; its arguments and error output are given.
    CommandFailed {
        /// The command line.
        command: String,
        /// What it printed on stderr.
        stderr: String,
    },
    /// Entering the namespace or another system call failed.
    Io(io::Error),
}

impl fmt::Display for LabError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NotRoot => f.write_str(
                "veth labs need root (CAP_SYS_ADMIN and CAP_NET_ADMIN) to create network \
                 namespaces and veth pairs",
            ),
            Self::IpMissing(error) => {
                write!(f, "cannot run `ip` (install iproute2): {error}")
            }
            Self::CommandFailed { command, stderr } => {
                write!(f, "`{command}` failed: {}", stderr.trim())
            }
            Self::Io(error) => write!(f, "{error}"),
        }
    }
}

impl std::error::Error for LabError {}

impl From<io::Error> for LabError {
    fn from(error: io::Error) -> Self {
        Self::Io(error)
    }
}

fn run(program: &str, args: &[&str]) -> Result<String, LabError> {
    let output = Command::new(program).args(args).output().map_err(|error| {
        if program == "ip" {
            LabError::IpMissing(error)
        } else {
            LabError::Io(error)
        }
    })?;
    if !output.status.success() {
        return Err(LabError::CommandFailed {
            command: format!("{program} {}", args.join(" ")),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        });
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

/// A fresh network namespace holding one veth pair, both ends up, IPv6 off (so that the kernel
/// sends no router solicitations or MLD reports onto the link), no IP address. Deleted on drop.
#[derive(Debug)]
pub struct VethLab {
    namespace: String,
    switch_end: String,
    host_end: String,
}

impl VethLab {
    /// The end the switch opens.
    pub const SWITCH_END: &'static str = "swp0";
    /// The far end, where a test injects and captures.
    pub const HOST_END: &'static str = "host0";

    /// Creates the namespace `{prefix}-{pid}-{n}` (unique per process and call) with a veth
    /// pair [`Self::SWITCH_END`]–[`Self::HOST_END`] in it.
    ///
    /// # Errors
    /// [`LabError::NotRoot`] when not root, [`LabError::IpMissing`] without iproute2, or the
    /// failing command. Whatever was created is removed again.
    pub fn create(prefix: &str) -> Result<Self, LabError> {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        // SAFETY: geteuid has no preconditions and cannot fail.
        if unsafe { libc::geteuid() } != 0 {
            return Err(LabError::NotRoot);
        }
        let namespace = format!(
            "{prefix}-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        run("ip", &["netns", "add", &namespace])?;
        // From here on, dropping `lab` deletes the namespace whatever fails next.
        let lab = Self {
            namespace,
            switch_end: Self::SWITCH_END.to_owned(),
            host_end: Self::HOST_END.to_owned(),
        };
        lab.sysctl("net.ipv6.conf.all.disable_ipv6", "1")?;
        lab.sysctl("net.ipv6.conf.default.disable_ipv6", "1")?;
        lab.ip(&[
            "link",
            "add",
            &lab.switch_end,
            "type",
            "veth",
            "peer",
            "name",
            &lab.host_end,
        ])?;
        lab.ip(&["link", "set", &lab.switch_end, "up"])?;
        lab.ip(&["link", "set", &lab.host_end, "up"])?;
        Ok(lab)
    }

    /// The namespace's name.
    #[must_use]
    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    /// The switch's end of the pair.
    #[must_use]
    pub fn switch_end(&self) -> &str {
        &self.switch_end
    }

    /// The far end of the pair.
    #[must_use]
    pub fn host_end(&self) -> &str {
        &self.host_end
    }

    /// Moves the calling thread into the lab's namespace until the guard is dropped.
    ///
    /// # Errors
    /// As [`NetnsGuard::enter`].
    pub fn enter(&self) -> io::Result<NetnsGuard> {
        NetnsGuard::enter(&self.namespace)
    }

    /// Runs `ip -n NAMESPACE ARGS...`; returns its output.
    ///
    /// # Errors
    /// The command could not run or failed.
    pub fn ip(&self, args: &[&str]) -> Result<String, LabError> {
        let mut full = vec!["-n", self.namespace.as_str()];
        full.extend_from_slice(args);
        run("ip", &full)
    }

    /// Runs `PROGRAM ARGS...` inside the namespace (`ip netns exec`); returns its output.
    ///
    /// # Errors
    /// The command could not run or failed.
    pub fn exec(&self, program: &str, args: &[&str]) -> Result<String, LabError> {
        let mut full = vec!["netns", "exec", self.namespace.as_str(), program];
        full.extend_from_slice(args);
        run("ip", &full)
    }

    /// Sets a sysctl inside the namespace (written through `/proc/sys` from a thread moved into
    /// it, so `sysctl` need not be installed).
    ///
    /// # Errors
    /// Entering the namespace or writing the file failed.
    pub fn sysctl(&self, key: &str, value: &str) -> Result<(), LabError> {
        let path = format!("/proc/sys/{}", key.replace('.', "/"));
        let value = value.to_owned();
        let namespace = self.namespace.clone();
        // A scoped thread, so that the caller's thread never changes namespace.
        std::thread::scope(|scope| {
            scope
                .spawn(move || -> io::Result<()> {
                    let _guard = NetnsGuard::enter(&namespace)?;
                    std::fs::write(path, value)
                })
                .join()
                .unwrap_or_else(|_| Err(io::Error::other("sysctl thread panicked")))
        })?;
        Ok(())
    }
}

impl Drop for VethLab {
    fn drop(&mut self) {
        // Deleting the namespace destroys the veth pair in it.
        let _ = run("ip", &["netns", "del", &self.namespace]);
    }
}

/// A send-only packet socket on one interface of a namespace, for lab traffic the switch's own
/// code must not produce (a NIC stuck in a PFC storm: `headroom lab fabric scenario storm`).
/// Made on a thread that entered the namespace; the socket stays there.
#[derive(Debug)]
pub struct RawSender {
    fd: OwnedFd,
}

impl RawSender {
    /// A socket sending on `device` in `namespace` (receiving nothing).
    ///
    /// # Errors
    /// The namespace or device does not exist, or packet sockets are refused (needs
    /// `CAP_NET_RAW`).
    pub fn open(namespace: &str, device: &str) -> io::Result<Self> {
        let namespace = namespace.to_owned();
        let device = device.to_owned();
        std::thread::scope(|scope| {
            scope
                .spawn(|| {
                    let _inside = NetnsGuard::enter(&namespace)?;
                    let fd = sys::packet_socket()?;
                    let mut req = sys::InterfaceRequest::new(&device).ok_or_else(|| {
                        io::Error::new(io::ErrorKind::InvalidInput, "bad interface name")
                    })?;
                    let index = req.index(fd.as_fd())?;
                    sys::bind_packet(fd.as_fd(), index, 0)?;
                    Ok(Self { fd })
                })
                .join()
                .unwrap_or_else(|_| Err(io::Error::other("thread panicked")))
        })
    }

    /// Sends one frame as is (the socket is non-blocking: a full queue is an error).
    ///
    /// # Errors
    /// What `send(2)` says.
    pub fn send(&self, frame: &[u8]) -> io::Result<()> {
        sys::send_frame(self.fd.as_fd(), frame)
    }
}
