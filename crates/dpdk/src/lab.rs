//! EAL arguments and mempool sizes for a lab switch on veths (`headroom lab --driver dpdk`):
//! which PMD, which vdev names, how much memory. Plain data: no DPDK needed.

use crate::settings::{eal_memory_mib_for, AF_XDP_FILL_RING_MBUFS, DEFAULT_DATA_ROOM_BYTES};

/// The PMD a lab port uses on its veth.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LabVdev {
    /// `net_af_packet`: a PACKET_MMAP socket on the interface (CAP_NET_RAW + CAP_NET_ADMIN).
    AfPacket,
    /// `net_af_xdp`: an AF_XDP socket (native XDP on veth; needs root).
    AfXdp,
}

impl LabVdev {
    /// The PMD's name (`net_af_packet`, `net_af_xdp`).
    #[must_use]
    pub fn driver(self) -> &'static str {
        match self {
            Self::AfPacket => "net_af_packet",
            Self::AfXdp => "net_af_xdp",
        }
    }

    /// The device name of lab port `index`: what `port.X.device` must say
    /// (`net_af_packet0`, ...).
    #[must_use]
    pub fn device_name(self, index: usize) -> String {
        format!("{}{index}", self.driver())
    }

    /// The `--vdev` argument for lab port `index` on interface `iface`.
    #[must_use]
    pub fn vdev_arg(self, index: usize, iface: &str) -> String {
        match self {
            // One queue pair; 2048-byte ring frames hold a 1500-byte MTU frame. 4096 frames
            // per ring (8 MiB of kernel memory each) instead of the PMD's 512: on a shared
            // machine a busy-polling switch is preempted for milliseconds at a time, and 512
            // frames overflowed at 40 kpps in the benchmarks (docs/perf.md).
            Self::AfPacket => format!(
                "--vdev={},iface={iface},qpairs=1,framesz=2048,framecnt=4096",
                self.device_name(index)
            ),
            Self::AfXdp => format!(
                "--vdev={},iface={iface},start_queue=0,queue_count=1",
                self.device_name(index)
            ),
        }
    }
}

/// Mbufs a lab switch with `ports` ports on `vdev` needs: 8191 for traffic (several bursts per
/// port and what the lab's 1G queues hold at 1500 bytes), plus the af_xdp fill rings.
#[must_use]
pub fn lab_mempool_mbufs(vdev: LabVdev, ports: usize) -> u32 {
    let traffic = 8191;
    match vdev {
        LabVdev::AfPacket => traffic,
        LabVdev::AfXdp => {
            let ports = u32::try_from(ports).unwrap_or(u32::MAX);
            traffic.saturating_add(ports.saturating_mul(AF_XDP_FILL_RING_MBUFS))
        }
    }
}

/// EAL arguments for a lab switch whose ports are the veths `ifaces` (switch ends, in port
/// order) through `vdev`: no hugepages, `-m` sized for [`lab_mempool_mbufs`] at the default
/// data room (MTU up to 2030) with a 256-mbuf cache, no PCI scan, main lcore on `main_cpu`,
/// the given `--file-prefix`, and one `--vdev` per interface. Port i is then opened as
/// [`LabVdev::device_name`]`(i)`.
///
/// EAL opens the vdevs' interfaces in the network namespace of the process that starts it, so
/// `headroom run` must run inside the switch's namespace (`ip netns exec <ns> headroom run`).
#[must_use]
pub fn lab_eal_args(
    ifaces: &[&str],
    vdev: LabVdev,
    file_prefix: &str,
    main_cpu: usize,
) -> Vec<String> {
    let mbufs = lab_mempool_mbufs(vdev, ifaces.len());
    let memory_mib = eal_memory_mib_for(mbufs, 256, DEFAULT_DATA_ROOM_BYTES);
    let mut args = vec![
        "--no-huge".to_owned(),
        "-m".to_owned(),
        memory_mib.to_string(),
        "--no-pci".to_owned(),
        "-l".to_owned(),
        main_cpu.to_string(),
        format!("--file-prefix={file_prefix}"),
        "--log-level=notice".to_owned(),
    ];
    args.extend(
        ifaces
            .iter()
            .enumerate()
            .map(|(i, iface)| vdev.vdev_arg(i, iface)),
    );
    args
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::args::estimated_pool_bytes;

    #[test]
    fn lab_eal_args_have_one_vdev_per_interface_and_enough_memory() {
        let args = lab_eal_args(&["sw-p0", "sw-p1"], LabVdev::AfPacket, "hr-sw", 1);
        assert_eq!(
            &args[..8],
            &[
                "--no-huge",
                "-m",
                "128",
                "--no-pci",
                "-l",
                "1",
                "--file-prefix=hr-sw",
                "--log-level=notice"
            ]
        );
        assert_eq!(
            &args[8..],
            &[
                "--vdev=net_af_packet0,iface=sw-p0,qpairs=1,framesz=2048,framecnt=4096",
                "--vdev=net_af_packet1,iface=sw-p1,qpairs=1,framesz=2048,framecnt=4096"
            ]
        );
        let memory_mib: u64 = args[2].parse().unwrap();
        let mbufs = lab_mempool_mbufs(LabVdev::AfPacket, 2);
        assert!(
            estimated_pool_bytes(mbufs, 256, DEFAULT_DATA_ROOM_BYTES) + (32 << 20)
                <= memory_mib << 20
        );
        assert_eq!(LabVdev::AfPacket.device_name(1), "net_af_packet1");

        let xdp = lab_eal_args(&["a", "b", "c", "d"], LabVdev::AfXdp, "p", 0);
        let memory_mib: u64 = xdp[2].parse().unwrap();
        let mbufs = lab_mempool_mbufs(LabVdev::AfXdp, 4);
        assert_eq!(mbufs, 8191 + 4 * 4096);
        assert!(
            estimated_pool_bytes(mbufs, 256, DEFAULT_DATA_ROOM_BYTES) + (32 << 20)
                <= memory_mib << 20
        );
        assert_eq!(
            xdp[8],
            "--vdev=net_af_xdp0,iface=a,start_queue=0,queue_count=1"
        );
    }
}
