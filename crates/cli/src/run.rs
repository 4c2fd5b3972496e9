//! `headroom run`: start the switch, log events, reload on SIGHUP, drain and report on stop.

use crate::check::{load, EXIT_BAD_INPUT};
use crate::logging;
use headroom_afpacket::AfPacketBackend;
use headroom_afpacket::AfPacketConfig;
use headroom_config::{Config, Driver, LogFormat};
use headroom_core::types::PRIORITY_COUNT;
use headroom_io::pool::FramePool;
use headroom_io::{pool_is_full, Backend, MemoryBackend};
use headroom_runtime::backends::frame_pool_config;
use headroom_runtime::control::{ControlAction, ControlPlane, Retired};
use headroom_runtime::fault::{log_fault_stats, FaultBackend, PortFaultStats};
use headroom_runtime::{start, Running, RuntimeSpec};
use std::path::Path;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Exit code when the switch could not start (a port, the layout, a thread).
const EXIT_START_FAILED: u8 = 1;

/// How often the fault injectors' counts are logged while `[testing.fault_injection]` is on.
const FAULT_LOG_INTERVAL: Duration = Duration::from_secs(10);

enum AnyBackend {
    AfPacket(AfPacketBackend),
    Memory(MemoryBackend),
    #[cfg(feature = "dpdk")]
    Dpdk(Box<headroom_dpdk::DpdkBackend>),
}

fn backend_for(config: &Config) -> Result<AnyBackend, String> {
    let pool = || FramePool::new(frame_pool_config(config)).map_err(|e| e.to_string());
    match config.switch.driver {
        Driver::AfPacket => Ok(AnyBackend::AfPacket(AfPacketBackend::new(
            pool()?,
            AfPacketConfig::default(),
            true,
        ))),
        Driver::Memory => Ok(AnyBackend::Memory(MemoryBackend::new(pool()?, 1024))),
        #[cfg(feature = "dpdk")]
        Driver::Dpdk => headroom_runtime::backends::dpdk_settings(config)
            .and_then(headroom_dpdk::DpdkBackend::new)
            .map(|b| AnyBackend::Dpdk(Box::new(b)))
            .map_err(|e| e.to_string()),
        #[cfg(not(feature = "dpdk"))]
        Driver::Dpdk => {
            Err("this headroom was built without DPDK support (cargo feature `dpdk`)".into())
        }
    }
}

/// A running dataplane and what its fault injectors count (`[testing.fault_injection]`).
type Started = (Running, Vec<PortFaultStats>);

/// Starts a dataplane of `config`; `capture_flags`: the captures it must mirror from its first
/// frame (`ControlPlane::capture_flags_for`; empty at the first start).
fn start_any(
    config: &Config,
    backend: &mut AnyBackend,
    capture_flags: Vec<u8>,
    fib: Option<Arc<headroom_core::route::Fib>>,
) -> Result<Started, String> {
    let mut spec = RuntimeSpec::for_config(config).map_err(|e| e.to_string())?;
    spec.capture_flags = capture_flags;
    spec.fib = fib;
    match backend {
        AnyBackend::AfPacket(b) => start_with_faults(spec, b, config),
        AnyBackend::Memory(b) => start_with_faults(spec, b, config),
        #[cfg(feature = "dpdk")]
        AnyBackend::Dpdk(b) => start_with_faults(spec, b.as_mut(), config),
    }
}

/// Starts on `backend`, through fault injectors when the configuration asks for them.
fn start_with_faults<B: Backend>(
    spec: RuntimeSpec,
    backend: &mut B,
    config: &Config,
) -> Result<Started, String> {
    let Some(faults) = &config.testing.fault_injection else {
        return start(spec, backend)
            .map(|r| (r, Vec::new()))
            .map_err(|e| e.to_string());
    };
    let names: Vec<&str> = faults
        .ports
        .iter()
        .map(|&p| config.ports[p].name.as_str())
        .collect();
    tracing::warn!(
        ports = ?names,
        seed = faults.seed,
        "FAULT INJECTION IS ON ([testing.fault_injection]): frames are dropped, corrupted and \
         delayed on purpose"
    );
    let mut faulty = FaultBackend::new(backend, config);
    let running = start(spec, &mut faulty).map_err(|e| e.to_string())?;
    Ok((running, faulty.stats().to_vec()))
}

fn pool_full(backend: &mut AnyBackend) -> bool {
    match backend {
        AnyBackend::AfPacket(b) => pool_is_full(b.pool_stats()),
        AnyBackend::Memory(b) => {
            // Nothing takes what memory ports send (the LLDPDUs, in a `headroom run`).
            b.discard_untaken_transmits();
            pool_is_full(b.pool_stats())
        }
        // Closing the ports gives back the mbufs in their RX rings; the check logs itself.
        #[cfg(feature = "dpdk")]
        AnyBackend::Dpdk(b) => b.close_ports().is_full_but_af_xdp(),
    }
}

pub(crate) fn run(path: &Path, log_format: Option<logging::Format>) -> ExitCode {
    run_with(path, log_format, None)
}

/// [`run`] with the Prometheus exporter already listening (`headroom lab` opens it in the
/// namespace it was started from, before it enters the switch's): `runtime.prometheus_listen`
/// is then not bound again.
pub(crate) fn run_with(
    path: &Path,
    log_format: Option<logging::Format>,
    exporter: Option<crate::metrics::Exporter>,
) -> ExitCode {
    let config = match load(path) {
        Ok(c) => c,
        Err(code) => return code,
    };
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("error: {}: {e}", path.display());
            return ExitCode::from(EXIT_BAD_INPUT);
        }
    };
    let format = log_format.unwrap_or(match config.switch.log_format {
        LogFormat::Text => logging::Format::Text,
        LogFormat::Json => logging::Format::Json,
    });
    logging::init(
        format,
        &format!("{:?}", config.switch.log_level).to_lowercase(),
    );

    let stop = Arc::new(AtomicBool::new(false));
    let reload = Arc::new(AtomicBool::new(false));
    for (signal, flag) in [
        (signal_hook::consts::SIGINT, &stop),
        (signal_hook::consts::SIGTERM, &stop),
        (signal_hook::consts::SIGHUP, &reload),
    ] {
        if let Err(e) = signal_hook::flag::register(signal, Arc::clone(flag)) {
            tracing::error!(signal, error = %e, "cannot install a signal handler");
            return ExitCode::from(EXIT_START_FAILED);
        }
    }

    let mut backend = match backend_for(&config) {
        Ok(b) => b,
        Err(e) => {
            tracing::error!("{e}");
            return ExitCode::from(EXIT_BAD_INPUT);
        }
    };
    let mut control = match ControlPlane::bind(path, text, config) {
        Ok(c) => c,
        Err(e) => {
            tracing::error!(error = %e, "cannot open the control socket");
            return ExitCode::from(EXIT_START_FAILED);
        }
    };
    // The routed ports' host interfaces exist before the dataplane starts: the mirror's first
    // dump needs their links, and the lcores start with its FIB.
    let first = control.config().clone();
    if let Err(e) = control.open_host_interfaces(&first) {
        tracing::error!("cannot start: {e}");
        return ExitCode::from(EXIT_START_FAILED);
    }
    let fib = control.fib();
    let (mut running, mut faults) = match start_any(control.config(), &mut backend, Vec::new(), fib)
    {
        Ok(r) => r,
        Err(e) => {
            tracing::error!("cannot start: {e}");
            return ExitCode::from(EXIT_START_FAILED);
        }
    };
    if let Some(addr) = exporter
        .as_ref()
        .and_then(crate::metrics::Exporter::local_addr)
    {
        tracing::info!(%addr, "Prometheus metrics at http://{addr}/metrics");
    }
    let mut metrics = match (exporter, control.config().runtime.prometheus_listen) {
        (Some(exporter), _) => Some(exporter),
        (None, Some(addr)) => match crate::metrics::Exporter::bind(addr) {
            Ok(m) => Some(m),
            Err(e) => {
                tracing::error!(%addr, error = %e, "cannot listen for Prometheus");
                return ExitCode::from(EXIT_START_FAILED);
            }
        },
        (None, None) => None,
    };
    tracing::info!(
        config = %path.display(),
        ports = control.config().ports.len(),
        lcores = control.config().runtime.lcores.len(),
        socket = %control.socket_path().display(),
        "headroom running"
    );

    let mut last_fault_log = std::time::Instant::now();
    while !stop.load(Ordering::Relaxed) {
        // 20 ms, or a short poll(2) on the host interfaces and netlink when a port is routed.
        control.wait(Duration::from_millis(20));
        if !faults.is_empty() && last_fault_log.elapsed() >= FAULT_LOG_INTERVAL {
            log_fault_stats(&faults);
            last_fault_log = std::time::Instant::now();
        }
        for event in running.drain_events() {
            headroom_runtime::log_event(running.shared(), &running.clock(), &event);
            control.note_event(&event);
        }
        control.pump_control_frames(&mut running);
        if !running.is_healthy() {
            tracing::error!("an lcore stopped unexpectedly; shutting down");
            break;
        }
        if let Some(m) = &mut metrics {
            m.serve(&control, &running);
        }
        let mut apply = match control.poll(&mut running) {
            ControlAction::None => None,
            ControlAction::Apply {
                text,
                config,
                reason,
            } => Some((text, *config, reason, true)),
        };
        if reload.swap(false, Ordering::Relaxed) {
            match (headroom_config::load(path), std::fs::read_to_string(path)) {
                (Err(errors), _) => {
                    tracing::error!("reload refused, the running configuration stays:\n{errors}")
                }
                (_, Err(e)) => tracing::error!("reload refused: {}: {e}", path.display()),
                (Ok((new, warnings)), Ok(text)) => {
                    for w in &warnings {
                        tracing::warn!("{w}");
                    }
                    apply = Some((
                        text,
                        new,
                        format!("SIGHUP reload of {}", path.display()),
                        false,
                    ));
                }
            }
        }
        if let Some((text, new, reason, from_socket)) = apply {
            tracing::info!(%reason, "config change: draining queues, then switching to the new configuration");
            let old = Retired::stop(running);
            log_fault_stats(&faults);
            let flags = control.capture_flags_for(&new);
            let started = control
                .open_host_interfaces(&new)
                .and_then(|()| restart(&new, &mut backend, flags, control.fib()));
            match started {
                Ok((r, f)) => {
                    running = r;
                    faults = f;
                    tracing::info!(%reason, "config change applied");
                    if from_socket {
                        control.applied(Ok((text, new, Some(old))));
                    } else {
                        control.carry_over(&old, text, new);
                    }
                }
                Err(e) => {
                    tracing::error!(%reason, error = %e, "the new configuration could not start; restarting the previous one");
                    let flags = control.capture_flags_for(control.config());
                    let previous = control.config().clone();
                    let started = control
                        .open_host_interfaces(&previous)
                        .and_then(|()| restart(&previous, &mut backend, flags, control.fib()));
                    match started {
                        Ok((r, f)) => {
                            let previous = control.config().clone();
                            let previous_text = control.config_text().to_owned();
                            control.carry_over(&old, previous_text, previous);
                            running = r;
                            faults = f;
                        }
                        Err(e) => {
                            tracing::error!(error = %e, "cannot restart the previous configuration");
                            return ExitCode::from(EXIT_START_FAILED);
                        }
                    }
                    if from_socket {
                        control.applied(Err(e));
                    }
                }
            }
        }
    }
    tracing::info!("stopping: draining queues");
    // Neighbours forget us at once (TTL-0 LLDPDUs, drained out by the stop).
    control.shutdown_lldp(&mut running);
    let old = Retired::stop(running);
    log_fault_stats(&faults);
    print_counters(&old, &control);
    drop(old);
    if !pool_full(&mut backend) {
        tracing::error!("frame buffers were not all returned to the pool");
    }
    ExitCode::SUCCESS
}

/// Starts a configuration on a fresh backend (ports reopened). A DPDK backend is kept instead
/// (EAL and its ports exist once per process): its ports are lent to the new lcores.
fn restart(
    config: &Config,
    backend: &mut AnyBackend,
    capture_flags: Vec<u8>,
    fib: Option<Arc<headroom_core::route::Fib>>,
) -> Result<Started, String> {
    match backend {
        #[cfg(feature = "dpdk")]
        AnyBackend::Dpdk(b) if config.switch.driver == Driver::Dpdk => {
            headroom_runtime::backends::dpdk_settings(config)
                .and_then(|settings| b.reconfigure(settings))
                .map_err(|e| e.to_string())?;
        }
        _ => *backend = backend_for(config)?,
    }
    start_any(config, backend, capture_flags, fib)
}

/// Prints the final counters since start (previous dataplanes of reconfigurations included):
/// one line per port, PFC per priority (SONiC pfcstat layout), ECN marks per queue, drops by
/// reason.
fn print_counters(old: &Retired, control: &ControlPlane) {
    use std::fmt::Write as _;
    let config = control.config();
    let stats: Vec<_> = (0..config.ports.len())
        .map(|i| control.final_totals(old, i).stats)
        .collect();
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<12} {:>12} {:>12} {:>12} {:>12} {:>10}",
        "Port", "RX frames", "TX frames", "RX bytes", "TX bytes", "Drops"
    );
    for (port, s) in config.ports.iter().zip(&stats) {
        let _ = writeln!(
            out,
            "{:<12} {:>12} {:>12} {:>12} {:>12} {:>10}",
            port.name,
            s.rx_frames,
            s.tx_frames(),
            s.rx_bytes,
            s.tx_bytes(),
            s.drops_total()
        );
    }
    for (title, rx) in [("Port Rx", true), ("Port Tx", false)] {
        let _ = write!(out, "\n{title:<12}");
        for p in 0..PRIORITY_COUNT {
            let _ = write!(out, " {:>8}", format!("PFC{p}"));
        }
        let _ = writeln!(out);
        for (port, s) in config.ports.iter().zip(&stats) {
            let _ = write!(out, "{:<12}", port.name);
            for p in 0..PRIORITY_COUNT {
                let _ = write!(out, " {:>8}", if rx { s.pfc_rx[p] } else { s.pfc_tx[p] });
            }
            let _ = writeln!(out);
        }
    }
    // Per queue: frames marked CE (RFC 3168), then every non-zero drop reason by stable name.
    let _ = write!(out, "\n{:<12}", "ECN marked");
    for q in 0..PRIORITY_COUNT {
        let _ = write!(out, " {:>8}", format!("UC{q}"));
    }
    let _ = writeln!(out);
    for (port, s) in config.ports.iter().zip(&stats) {
        let _ = write!(out, "{:<12}", port.name);
        for q in &s.queues {
            let _ = write!(out, " {:>8}", q.ecn_marked);
        }
        let _ = writeln!(out);
    }
    let _ = writeln!(out, "\n{:<12} {:<28} {:>12}", "Drops", "Reason", "Frames");
    for (port, s) in config.ports.iter().zip(&stats) {
        for reason in headroom_core::counters::DropReason::ALL {
            let n = s.drops[reason.index()];
            if n > 0 {
                let _ = writeln!(out, "{:<12} {:<28} {:>12}", port.name, reason.name(), n);
            }
        }
    }
    crate::client::emit(format_args!("{out}"));
}
