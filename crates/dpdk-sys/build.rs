//! Build script for headroom-dpdk-sys.
//!
//! Without the `dpdk` feature it does nothing, so the workspace builds on
//! machines with no DPDK, pkg-config or libclang. With the feature it:
//! 1. finds the system DPDK (>= 22.11) with pkg-config,
//! 2. compiles `csrc/shim.c` with exactly the flags of `pkg-config --cflags libdpdk`,
//! 3. runs bindgen over `csrc/wrapper.h` with the same flags and an allowlist,
//! 4. emits the link flags (shim first, then the DPDK libraries, so that
//!    `-Wl,--as-needed` keeps every DPDK library the shim refers to).

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    #[cfg(feature = "dpdk")]
    with_dpdk::run();
}

#[cfg(feature = "dpdk")]
mod with_dpdk {
    use std::env;
    use std::path::PathBuf;
    use std::process::Command;

    /// The one message a user sees when the feature is on but DPDK is not usable.
    const NEEDS_DPDK: &str =
        "feature `dpdk` needs DPDK >= 22.11 (apt install libdpdk-dev pkg-config libclang-dev)";

    /// Functions headroom calls. Exact names: an allowlist entry that matches
    /// nothing is a silent no-op in bindgen, so `run` checks each one appears.
    const FUNCTIONS: &[&str] = &[
        // EAL, lcores, errors, time
        "rte_eal_init",
        "rte_eal_cleanup",
        "rte_eal_remote_launch",
        "rte_eal_mp_wait_lcore",
        "rte_eal_wait_lcore",
        "rte_eal_get_lcore_state",
        "rte_lcore_count",
        "rte_lcore_is_enabled",
        "rte_get_main_lcore",
        "rte_get_next_lcore",
        "rte_lcore_to_cpu_id",
        "rte_lcore_to_socket_id",
        "rte_socket_id",
        "rte_strerror",
        "rte_get_tsc_hz",
        // mempool / mbuf (real functions; inline ones are in the shim)
        "rte_pktmbuf_pool_create",
        "rte_mempool_free",
        "rte_mempool_avail_count",
        "rte_mempool_in_use_count",
        "rte_pktmbuf_free_bulk",
        "rte_pktmbuf_clone",
        "rte_pktmbuf_copy",
        // rings and in-process ring ports (librte_net_ring)
        "rte_ring_create",
        "rte_ring_free",
        "rte_eth_from_rings",
        // ethdev
        "rte_eth_dev_configure",
        "rte_eth_dev_start",
        "rte_eth_dev_stop",
        "rte_eth_dev_close",
        "rte_eth_dev_count_avail",
        "rte_eth_dev_is_valid_port",
        "rte_eth_dev_info_get",
        "rte_eth_dev_socket_id",
        "rte_eth_dev_get_name_by_port",
        "rte_eth_dev_get_port_by_name",
        "rte_eth_dev_adjust_nb_rx_tx_desc",
        "rte_eth_rx_queue_setup",
        "rte_eth_tx_queue_setup",
        "rte_eth_macaddr_get",
        "rte_eth_stats_get",
        "rte_eth_stats_reset",
        "rte_eth_xstats_get",
        "rte_eth_xstats_get_names",
        "rte_eth_xstats_reset",
        "rte_eth_link_get_nowait",
        "rte_eth_promiscuous_enable",
        "rte_eth_promiscuous_disable",
        "rte_eth_promiscuous_get",
        "rte_eth_allmulticast_enable",
        "rte_eth_dev_flow_ctrl_get",
        "rte_eth_dev_flow_ctrl_set",
        "rte_eth_dev_priority_flow_ctrl_set",
        "rte_eth_find_next_owned_by",
        "rte_eth_dev_get_mtu",
        "rte_eth_dev_set_mtu",
    ];

    /// Types headroom names directly (their dependencies come along).
    const TYPES: &[&str] = &[
        "rte_mbuf",
        "rte_mempool",
        "rte_ring",
        "rte_ether_addr",
        "rte_ether_hdr",
        "rte_eth_conf",
        "rte_eth_dev_info",
        "rte_eth_rxconf",
        "rte_eth_txconf",
        "rte_eth_stats",
        "rte_eth_xstat",
        "rte_eth_xstat_name",
        "rte_eth_link",
        "rte_eth_fc_conf",
        "rte_eth_pfc_conf",
        "rte_eth_fc_mode",
        "lcore_function_t",
        "rte_lcore_state_t",
    ];

    /// Constants (regexes). The RTE_BIT64-based offload flags come through
    /// bindgen's clang macro fallback; `run` checks they are present.
    const VARS: &[&str] = &[
        "RTE_MBUF_DEFAULT_BUF_SIZE",
        "RTE_MBUF_DEFAULT_DATAROOM",
        "RTE_PKTMBUF_HEADROOM",
        "RTE_MEMPOOL_CACHE_MAX_SIZE",
        "RTE_MAX_ETHPORTS",
        "RTE_MAX_LCORE",
        "RTE_DEV_NAME_MAX_LEN",
        "RTE_ETH_NAME_MAX_LEN",
        "RTE_ETH_XSTATS_NAME_SIZE",
        "RTE_ETH_DEV_NO_OWNER",
        "RTE_ETHER_ADDR_LEN",
        "RTE_ETHER_HDR_LEN",
        "RTE_ETHER_CRC_LEN",
        "RTE_ETHER_MTU",
        "SOCKET_ID_ANY",
        "LCORE_ID_ANY",
        "RING_F_SP_ENQ",
        "RING_F_SC_DEQ",
        "RTE_ETH_LINK_(UP|DOWN|FULL_DUPLEX|HALF_DUPLEX|AUTONEG|FIXED)",
        "RTE_ETH_SPEED_NUM_.*",
        "RTE_ETH_RX_OFFLOAD_.*",
        "RTE_ETH_TX_OFFLOAD_.*",
    ];

    pub(super) fn run() {
        let crate_dir =
            PathBuf::from(env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
        let out_dir = PathBuf::from(env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
        let csrc = crate_dir.join("csrc");
        for file in ["shim.c", "shim.h", "wrapper.h"] {
            println!("cargo:rerun-if-changed={}", csrc.join(file).display());
        }
        println!("cargo:rerun-if-env-changed=LIBCLANG_PATH");

        // Probe without emitting link flags yet: the shim archive must come
        // first on the link line (see module doc).
        let dpdk = pkg_config::Config::new()
            .atleast_version("22.11")
            .cargo_metadata(false)
            .env_metadata(true)
            .probe("libdpdk")
            .unwrap_or_else(|err| panic!("{NEEDS_DPDK}\n{err}"));
        let cflags = dpdk_cflags();

        let mut shim = cc::Build::new();
        shim.file(csrc.join("shim.c"))
            .include(&csrc)
            .warnings(true)
            .extra_warnings(true);
        for flag in &cflags {
            shim.flag(flag);
        }
        shim.compile("headroom_dpdk_shim");

        for path in &dpdk.link_paths {
            println!("cargo:rustc-link-search=native={}", path.display());
        }
        for lib in &dpdk.libs {
            println!("cargo:rustc-link-lib={lib}");
        }
        // rte_eth_from_rings lives in the net_ring driver library, which
        // `pkg-config --libs libdpdk` does not list (it is a plugin in a shared
        // build). The file in the default library dir is a symlink to the
        // plugin, so EAL's plugin scan and this link load the same object.
        println!("cargo:rustc-link-lib=rte_net_ring");
        for args in &dpdk.ld_args {
            println!("cargo:rustc-link-arg=-Wl,{}", args.join(","));
        }
        println!("cargo:version={}", dpdk.version);

        let bindings = generate_bindings(&csrc, &cflags);
        let text = bindings.to_string();
        check_allowlist_matched(&text);
        let out_file = out_dir.join("bindings.rs");
        std::fs::write(&out_file, text)
            .unwrap_or_else(|err| panic!("writing {}: {err}", out_file.display()));
    }

    /// Every token of `pkg-config --cflags libdpdk`. The pkg-config crate only
    /// reports -I and -D, but DPDK also needs `-include rte_config.h` and
    /// `-march=corei7` (Debian builds DPDK with an SSE4.2 baseline; without it
    /// gcc refuses to inline the SSE helpers the mbuf/ring code uses).
    fn dpdk_cflags() -> Vec<String> {
        let pkg_config = env::var("PKG_CONFIG").unwrap_or_else(|_| "pkg-config".to_owned());
        let output = Command::new(&pkg_config)
            .args(["--cflags", "libdpdk"])
            .output()
            .unwrap_or_else(|err| panic!("{NEEDS_DPDK}\nrunning {pkg_config}: {err}"));
        if !output.status.success() {
            panic!(
                "{NEEDS_DPDK}\n{pkg_config} --cflags libdpdk failed: {}",
                String::from_utf8_lossy(&output.stderr)
            );
        }
        let mut cflags: Vec<String> = String::from_utf8_lossy(&output.stdout)
            .split_whitespace()
            .map(str::to_owned)
            .collect();
        // Keep the build working if a packager ever drops these from the .pc file.
        if !cflags
            .windows(2)
            .any(|pair| pair[0] == "-include" && pair[1] == "rte_config.h")
        {
            cflags.extend(["-include".to_owned(), "rte_config.h".to_owned()]);
        }
        let x86_64 = env::var("CARGO_CFG_TARGET_ARCH").is_ok_and(|arch| arch == "x86_64");
        if x86_64 && !cflags.iter().any(|flag| flag.starts_with("-march=")) {
            cflags.push("-march=corei7".to_owned());
        }
        cflags
    }

    fn generate_bindings(csrc: &std::path::Path, cflags: &[String]) -> bindgen::Bindings {
        let mut builder = bindgen::Builder::default()
            .header(csrc.join("wrapper.h").display().to_string())
            .clang_args(cflags)
            .clang_arg(format!("-I{}", csrc.display()))
            .parse_callbacks(Box::new(bindgen::CargoCallbacks::new()))
            .parse_callbacks(Box::new(MacroTypes))
            .allowlist_function("headroom_shim_.*")
            // Pointer-only types: their layout is DPDK-internal.
            .opaque_type("rte_mempool")
            .opaque_type("rte_ring")
            // bindgen still emits the inner types of opaque structs; nothing
            // else refers to these.
            .blocklist_type("rte_mempool__bindgen_.*|rte_ring__bindgen_.*")
            .blocklist_type("rte_ring_(rts_|hts_)?headtail.*|__rte_ring_.*|rte_ring_sync_type")
            // packed + aligned(2) headers trip rustc E0588; parse those in Rust.
            .opaque_type("rte_arp_.*")
            .blocklist_type("max_align_t")
            // Enums as newtypes: C may hand back values Rust has no variant for.
            .default_enum_style(bindgen::EnumVariation::NewType {
                is_bitfield: false,
                is_global: false,
            })
            .clang_macro_fallback()
            .generate_comments(false)
            .derive_default(true)
            .layout_tests(true)
            .merge_extern_blocks(true)
            .wrap_unsafe_ops(true);
        for name in FUNCTIONS {
            builder = builder.allowlist_function(name);
        }
        for name in TYPES {
            builder = builder.allowlist_type(name);
        }
        for name in VARS {
            builder = builder.allowlist_var(name);
        }
        // bindgen panics (rather than returning an error) when it cannot load
        // libclang; turn that into the same actionable message.
        // The default hook would print bindgen's panic with a backtrace
        // before ours; keep the output to the one actionable message.
        let default_hook = std::panic::take_hook();
        std::panic::set_hook(Box::new(|_| {}));
        let generated =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| builder.generate()));
        std::panic::set_hook(default_hook);
        match generated {
            Ok(Ok(bindings)) => bindings,
            Ok(Err(err)) => panic!("bindgen failed on csrc/wrapper.h: {err}"),
            Err(panic) => {
                let detail = panic
                    .downcast_ref::<String>()
                    .map(String::as_str)
                    .or_else(|| panic.downcast_ref::<&str>().copied())
                    .unwrap_or("bindgen panicked");
                panic!("{NEEDS_DPDK}\nbindgen: {detail}");
            }
        }
    }

    /// Gives macro constants the C type of the field they are used with
    /// (bindgen otherwise picks `u32` for any small non-negative value).
    #[derive(Debug)]
    struct MacroTypes;

    impl bindgen::callbacks::ParseCallbacks for MacroTypes {
        fn int_macro(&self, name: &str, _value: i64) -> Option<bindgen::callbacks::IntKind> {
            use bindgen::callbacks::IntKind;
            if name.starts_with("RTE_ETH_RX_OFFLOAD_") || name.starts_with("RTE_ETH_TX_OFFLOAD_") {
                // rte_eth_rxmode/txmode/rxconf/txconf .offloads and the
                // *_offload_capa fields are uint64_t (RTE_BIT64 flags).
                Some(IntKind::U64)
            } else if matches!(
                name,
                "RTE_MBUF_DEFAULT_BUF_SIZE" | "RTE_MBUF_DEFAULT_DATAROOM" | "RTE_PKTMBUF_HEADROOM"
            ) {
                // rte_pktmbuf_pool_create's data_room_size and rte_mbuf.data_off are uint16_t.
                Some(IntKind::U16)
            } else {
                None
            }
        }
    }

    /// Fail the build if an allowlisted function, type or required constant
    /// did not make it into the bindings (a typo or a DPDK API change would
    /// otherwise only show up as a compile error in a consumer).
    fn check_allowlist_matched(text: &str) {
        let mut missing: Vec<&str> = Vec::new();
        for name in FUNCTIONS {
            if !text.contains(&format!("pub fn {name}(")) {
                missing.push(name);
            }
        }
        for name in TYPES {
            let declared = [
                format!("pub struct {name} "),
                format!("pub struct {name}("),
                format!("pub type {name} "),
            ];
            if !declared.iter().any(|decl| text.contains(decl.as_str())) {
                missing.push(name);
            }
        }
        for name in [
            "RTE_MBUF_DEFAULT_BUF_SIZE",
            "RTE_PKTMBUF_HEADROOM",
            "RTE_ETH_RX_OFFLOAD_SCATTER",
            "RTE_ETH_TX_OFFLOAD_MULTI_SEGS",
            "RTE_ETH_TX_OFFLOAD_MBUF_FAST_FREE",
        ] {
            if !text.contains(&format!("pub const {name}:")) {
                missing.push(name);
            }
        }
        assert!(
            missing.is_empty(),
            "bindgen produced no binding for: {missing:?}"
        );
    }
}
