//! What the runtime hands each backend for a configuration: the frame pool of the AF_PACKET
//! and memory backends ([`frame_pool_config`]) and the DPDK backend's settings
//! ([`dpdk_settings`]). The backends themselves, and what they do with it, live in their crates
//! (`headroom_io::MemoryBackend`, `headroom_afpacket::AfPacketBackend`,
//! `headroom_dpdk::DpdkBackend`); they know nothing of the configuration file.

use headroom_config::Config;
use headroom_dpdk::{DpdkSettings, DpdkSetupError, FRAME_OVERHEAD_BYTES, MBUF_HEADROOM_BYTES};
use headroom_io::pool::PoolConfig;
use std::collections::BTreeMap;

/// The frame pool of a configuration's AF_PACKET or memory backend
/// ([`Config::frame_pool_frames`] buffers of the default size, per-lcore caches in front).
#[must_use]
pub fn frame_pool_config(config: &Config) -> PoolConfig {
    PoolConfig::with_frame_count(config.frame_pool_frames())
}

/// The DPDK backend's settings of a configuration (its `[dpdk]` section and port MTUs); the
/// offloads of the Linux interfaces under `net_af_packet`/`net_af_xdp` vdevs are turned off.
///
/// # Errors
/// A port MTU that no mbuf can hold. A parsed configuration never has one (MTUs are checked to
/// be 68..=9216, and 9216 + 18 + 128 fits a 16-bit data room); a hand-built one is refused
/// here rather than clamped.
pub fn dpdk_settings(config: &Config) -> Result<DpdkSettings, DpdkSetupError> {
    let mut mtu_by_device = BTreeMap::new();
    for port in &config.ports {
        let mtu = u16::try_from(port.mtu_bytes)
            .ok()
            .filter(|m| {
                u32::from(*m) + u32::from(FRAME_OVERHEAD_BYTES) + u32::from(MBUF_HEADROOM_BYTES)
                    <= u32::from(u16::MAX)
            })
            .ok_or_else(|| {
                DpdkSetupError::Settings(format!(
                    "port {}: MTU {} does not fit one DPDK mbuf",
                    port.name, port.mtu_bytes
                ))
            })?;
        mtu_by_device.insert(port.device.clone(), mtu);
    }
    Ok(DpdkSettings {
        eal_args: config.dpdk.eal_args.clone(),
        mempool_mbufs: config.dpdk.mempool_mbufs,
        mempool_cache_size: config.dpdk.mempool_cache_size,
        rx_descriptors: config.dpdk.rx_descriptors,
        tx_descriptors: config.dpdk.tx_descriptors,
        mtu_by_device,
        switch_buffer_bytes: config.switch.buffer_size_bytes,
        disable_vdev_offloads: true,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_come_from_the_config_and_restarts_are_refused_for_dpdk_changes() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../config/dpdk-null.toml");
        let (config, _) = headroom_config::load(path).unwrap();
        let settings = dpdk_settings(&config).unwrap();
        assert_eq!(settings.mempool_mbufs, config.dpdk.mempool_mbufs);
        assert_eq!(settings.eal_args, config.dpdk.eal_args);
        let pc = settings.port_config("net_null0");
        assert_eq!((pc.rx_queues, pc.tx_queues), (1, 1));
        assert_eq!(u32::from(pc.mtu), config.ports[0].mtu_bytes);
        assert_eq!(
            settings.data_room_bytes(),
            headroom_dpdk::data_room_for_mtu(settings.max_mtu())
        );
        assert_eq!(settings.restart_needed_for(&settings), None);

        let mut bigger = settings.clone();
        bigger.mempool_mbufs += 1;
        bigger.eal_args.push("--no-shconf".into());
        let why = settings.restart_needed_for(&bigger).unwrap();
        assert!(
            why.contains("eal_args") && why.contains("mempool_mbufs"),
            "{why}"
        );

        let mut smaller_mtu = settings.clone();
        smaller_mtu.mtu_by_device.insert("net_null0".into(), 1500);
        assert_eq!(settings.restart_needed_for(&smaller_mtu), None);
        let mut jumbo = smaller_mtu.clone();
        jumbo.mtu_by_device.insert("net_null1".into(), 9216);
        let why = smaller_mtu.restart_needed_for(&jumbo).unwrap();
        assert!(why.contains("MTU"), "{why}");
    }

    #[test]
    fn the_frame_pool_follows_the_buffer_size() {
        let (config, _) = headroom_config::parse(
            "[switch]\nbuffer_size_bytes = 67108864\n[port.Ethernet0]\ndevice = \"eth0\"\nspeed = \"10G\"\n",
            "t.toml",
        )
        .unwrap();
        assert_eq!(frame_pool_config(&config).frame_count, 131_072);
    }
}
