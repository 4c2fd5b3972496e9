//! Turning off the offloads that make AF_PACKET see frames that are not on any wire.
//!
//! A packet socket sees the kernel's `sk_buff`s, not wire frames. With offloads on:
//! - segmentation offloads (TSO, GSO, and their tunnel/SCTP/UDP/AccECN variants) on the
//!   *sending* side (a host's end of a veth pair, or the switch host's own stack) hand veth a
//!   64 KiB "super-frame", which the switch's port receives as one frame: it is longer than the
//!   frame pool's data room and is dropped as oversize;
//! - receive coalescing (GRO, LRO, GRO lists) on the *receiving* side merges frames before the
//!   packet socket sees them;
//! - TX checksum offload on the sending side leaves the TCP/UDP checksum unfilled
//!   (`TP_STATUS_CSUMNOTREADY`, counted in `rx_checksum_incomplete`), so the frame the switch
//!   forwards carries a wrong checksum.
//!
//! [`disable_offloads`] does what `ethtool -K IF <feature> off` does for each such feature, with
//! the `SIOCETHTOOL` feature-string interface (`ETHTOOL_GSSET_INFO`, `ETHTOOL_GSTRINGS` for the
//! kernel's feature names, `ETHTOOL_GFEATURES`/`ETHTOOL_SFEATURES` for the bits), so features a
//! newer kernel adds under a matching name (6.18 added `tx-tcp-accecn-segmentation`, which the
//! legacy `ETHTOOL_STSO` command leaves on) are caught too. [`is_offload_feature`] says which
//! names are turned off.
//!
//! Call it for every interface the switch uses **and** for the far ends of veth pairs whose
//! hosts send traffic. It needs `CAP_NET_ADMIN` and acts in the calling thread's network
//! namespace. The runtime could equally run `ethtool -K`; this saves the dependency.

use std::io;
use std::os::fd::AsFd;

use crate::port::{os_error, AfPacketError};
use crate::sys::{self, InterfaceRequest};

// linux/ethtool.h
const ETHTOOL_GSTRINGS: u32 = 0x1b;
const ETHTOOL_GSSET_INFO: u32 = 0x37;
const ETHTOOL_GFEATURES: u32 = 0x3a;
const ETHTOOL_SFEATURES: u32 = 0x3b;
const ETH_SS_FEATURES: u32 = 4;
const ETH_GSTRING_LEN: usize = 32;
/// More feature strings than the kernel said it has, as a margin: `ETHTOOL_GSTRINGS` writes as
/// many strings as the kernel has, whatever length the caller asked for.
const SPARE_FEATURE_STRINGS: usize = 64;
/// A kernel with more feature words than this is not believed (2048 features).
const MAX_FEATURE_WORDS: usize = 64;

/// Whether `disable_offloads` turns off the kernel feature of this name (a name as in
/// `ethtool -k`'s indented lines): TX checksumming, every segmentation offload, GSO variants,
/// UDP fragmentation offload, and every receive-side coalescing.
#[must_use]
pub fn is_offload_feature(name: &str) -> bool {
    name.starts_with("tx-checksum-")
        || name.starts_with("tx-gso-")
        || (name.starts_with("tx-") && name.ends_with("-segmentation"))
        || name == "tx-udp-fragmentation"
        || name.starts_with("rx-gro")
        || name == "rx-lro"
        || name == "rx-udp-gro-forwarding"
}

/// What [`disable_offloads`] did, by kernel feature name.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OffloadReport {
    /// Offload features that were on and are now off.
    pub turned_off: Vec<String>,
    /// Offload features that were already off.
    pub already_off: Vec<String>,
    /// Offload features still on afterwards: fixed on by the driver, or held on by another
    /// feature. Frames may still be coalesced or left unchecksummed.
    pub still_on: Vec<String>,
}

impl OffloadReport {
    /// Whether every offload feature is off now.
    #[must_use]
    pub fn all_disabled(&self) -> bool {
        self.still_on.is_empty()
    }
}

struct FeatureBits {
    /// Per 32-bit word: (available = changeable, active).
    words: Vec<(u32, u32)>,
}

impl FeatureBits {
    fn is_active(&self, bit: usize) -> bool {
        self.words
            .get(bit / 32)
            .is_some_and(|(_, active)| active & (1 << (bit % 32)) != 0)
    }
}

struct Ethtool<'fd> {
    request: InterfaceRequest,
    fd: std::os::fd::BorrowedFd<'fd>,
}

impl Ethtool<'_> {
    fn feature_count(&mut self) -> io::Result<usize> {
        // struct ethtool_sset_info { u32 cmd; u32 reserved; u64 sset_mask; u32 data[]; }, with
        // one `data` word per bit set in the mask.
        let mask = (1u64 << ETH_SS_FEATURES).to_ne_bytes();
        let mut command = [ETHTOOL_GSSET_INFO, 0, 0, 0, 0];
        command[2] = u32::from_ne_bytes([mask[0], mask[1], mask[2], mask[3]]);
        command[3] = u32::from_ne_bytes([mask[4], mask[5], mask[6], mask[7]]);
        // SAFETY: one mask bit, so the kernel writes the 4 header words plus one data word.
        unsafe { self.request.ethtool(self.fd, &mut command)? };
        Ok(command[4] as usize)
    }

    fn feature_names(&mut self, count: usize) -> io::Result<Vec<String>> {
        // struct ethtool_gstrings { u32 cmd; u32 string_set; u32 len; u8 data[len * 32]; }
        let capacity = count + SPARE_FEATURE_STRINGS;
        let mut command = vec![0u32; 3 + capacity * ETH_GSTRING_LEN / 4];
        command[..3].copy_from_slice(&[ETHTOOL_GSTRINGS, ETH_SS_FEATURES, count as u32]);
        // SAFETY: the kernel writes 3 words and then as many 32-byte strings as it has features,
        // which is `count` (a constant of the running kernel), with a margin of
        // SPARE_FEATURE_STRINGS.
        unsafe { self.request.ethtool(self.fd, &mut command)? };
        let written = (command[2] as usize).min(capacity);
        let bytes: Vec<u8> = command[3..]
            .iter()
            .flat_map(|word| word.to_ne_bytes())
            .collect();
        Ok(bytes
            .chunks_exact(ETH_GSTRING_LEN)
            .take(written)
            .map(|raw| {
                let end = raw.iter().position(|&b| b == 0).unwrap_or(raw.len());
                String::from_utf8_lossy(&raw[..end]).into_owned()
            })
            .collect())
    }

    fn features(&mut self, words: usize) -> io::Result<FeatureBits> {
        // struct ethtool_gfeatures { u32 cmd; u32 size; struct { u32 available, requested,
        // active, never_changed; } features[size]; }
        let mut command = vec![0u32; 2 + 4 * words];
        command[..2].copy_from_slice(&[ETHTOOL_GFEATURES, words as u32]);
        // SAFETY: the kernel writes the 2 header words and at most `size` feature blocks.
        unsafe { self.request.ethtool(self.fd, &mut command)? };
        Ok(FeatureBits {
            words: command[2..]
                .chunks_exact(4)
                .map(|block| (block[0], block[2]))
                .collect(),
        })
    }

    fn turn_off(&mut self, words: usize, bits: &[usize]) -> io::Result<()> {
        // struct ethtool_sfeatures { u32 cmd; u32 size; struct { u32 valid, requested; }
        // features[size]; }: `valid` marks the bits to change, `requested` their new value (0).
        let mut command = vec![0u32; 2 + 2 * words];
        command[..2].copy_from_slice(&[ETHTOOL_SFEATURES, words as u32]);
        for &bit in bits {
            command[2 + 2 * (bit / 32)] |= 1 << (bit % 32);
        }
        // SAFETY: the kernel reads the 2 header words and `size` blocks and writes nothing back.
        unsafe { self.request.ethtool(self.fd, &mut command)? };
        Ok(())
    }
}

/// Turns off every offload feature ([`is_offload_feature`]) of `interface` that the driver lets
/// change, and reports what is off and what stays on.
///
/// # Errors
/// [`AfPacketError`] when the name is invalid, the interface does not exist, or an ethtool
/// request fails (`EPERM` without `CAP_NET_ADMIN`).
pub fn disable_offloads(interface: &str) -> Result<OffloadReport, AfPacketError> {
    let request = InterfaceRequest::new(interface)
        .ok_or_else(|| AfPacketError::InvalidInterfaceName(interface.to_owned()))?;
    let socket = sys::control_socket().map_err(os_error("creating an ethtool control socket"))?;
    let mut ethtool = Ethtool {
        request,
        fd: socket.as_fd(),
    };
    let map_error = |operation: &'static str| {
        move |error: io::Error| {
            if error.raw_os_error() == Some(libc::ENODEV) {
                AfPacketError::NoSuchInterface(interface.to_owned())
            } else {
                AfPacketError::Os {
                    operation,
                    source: error,
                }
            }
        }
    };
    let count = ethtool
        .feature_count()
        .map_err(map_error("ETHTOOL_GSSET_INFO"))?;
    let words = count.div_ceil(32);
    if words > MAX_FEATURE_WORDS {
        return Err(AfPacketError::Os {
            operation: "ETHTOOL_GSSET_INFO",
            source: io::Error::other(format!("implausible feature count {count}")),
        });
    }
    let names = ethtool
        .feature_names(count)
        .map_err(map_error("ETHTOOL_GSTRINGS"))?;
    let before = ethtool
        .features(words)
        .map_err(map_error("ETHTOOL_GFEATURES"))?;
    let offloads: Vec<(usize, &String)> = names
        .iter()
        .enumerate()
        .filter(|(_, name)| is_offload_feature(name))
        .collect();
    let to_change: Vec<usize> = offloads
        .iter()
        .map(|&(bit, _)| bit)
        .filter(|&bit| {
            before.is_active(bit)
                && before
                    .words
                    .get(bit / 32)
                    .is_some_and(|(available, _)| available & (1 << (bit % 32)) != 0)
        })
        .collect();
    if !to_change.is_empty() {
        ethtool
            .turn_off(words, &to_change)
            .map_err(map_error("ETHTOOL_SFEATURES"))?;
    }
    let after = ethtool
        .features(words)
        .map_err(map_error("ETHTOOL_GFEATURES"))?;
    let mut report = OffloadReport::default();
    for (bit, name) in offloads {
        let list = match (before.is_active(bit), after.is_active(bit)) {
            (_, true) => &mut report.still_on,
            (true, false) => &mut report.turned_off,
            (false, false) => &mut report.already_off,
        };
        list.push(name.clone());
    }
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offload_feature_names() {
        for name in [
            "tx-checksum-ipv4",
            "tx-checksum-ip-generic",
            "tx-tcp-segmentation",
            "tx-tcp-accecn-segmentation",
            "tx-generic-segmentation",
            "tx-udp-segmentation",
            "tx-gre-segmentation",
            "tx-gso-list",
            "tx-gso-partial",
            "tx-udp-fragmentation",
            "rx-gro",
            "rx-gro-hw",
            "rx-gro-list",
            "rx-lro",
            "rx-udp-gro-forwarding",
        ] {
            assert!(is_offload_feature(name), "{name}");
        }
        for name in [
            "tx-scatter-gather",
            "rx-checksum",
            "rx-vlan-hw-parse",
            "tx-vlan-hw-insert",
            "highdma",
            "rx-fcs",
            "loopback",
        ] {
            assert!(!is_offload_feature(name), "{name}");
        }
    }
}
