//! DCQCN reaction point (RP): the per-QP rate controller of a RoCEv2 sender.
//!
//! Two modes, selected by [`RpParams`], follow the pseudo-code of `dcqcn-roce.md` §1.4:
//!
//! * [`RpParams::Paper`]: the SIGCOMM'15 algorithm (§3.1) as htsim implements it. A CNP cuts the rate
//!   at once with the alpha from *before* the CNP, then raises alpha; alpha decays every K without a
//!   CNP; the rate rises on an increase timer (every T) and a byte counter (every B bytes), through
//!   fast recovery, additive and hyper increase.
//! * [`RpParams::Nvidia`]: the ConnectX firmware algorithm as HPCC-ns3 models it (`CC_MODE 1`,
//!   `RdmaHw::*Mlx`), with the parameters named and scaled as the mlx5 driver and `mlxconfig` name
//!   them. A CNP only raises flags; alpha is updated on a fixed tick (`dce_tcp_rtt`), and the rate is
//!   cut at most once per `rate_reduce_monitor_period`, on a grid that starts at the first CNP.
//!
//! # NVIDIA-mode timing, as HPCC-ns3 schedules it
//!
//! The first CNP allocates the limiter: alpha = `initial_alpha_value`, `Rt = Rc =
//! rate_to_set_on_first_cnp`, and that CNP adds nothing to alpha. Alpha ticks run at
//! `first_cnp + k * dce_tcp_rtt`; decrease checks at `first_cnp + 1 ns + k * period` (k >= 1), so
//! each check sees the alpha tick that shares its microsecond (the "+1 ns" of
//! `ScheduleDecreaseRateMlx(q, 1)`). A CNP counts for the first alpha tick and the first check
//! strictly after it. The increase timer restarts at each cut; since 300 us is a multiple of the
//! 4 us period, its expiries coincide with checks, and then the increase runs first (ns-3 runs
//! same-time events in scheduling order, and the timer was scheduled earlier). The limiter is
//! never released: a QP back at line rate reacts to a later CNP as to any non-first CNP
//! (HPCC-ns3's `m_first_cnp` is cleared once). `rpg_min_dec_fac` and `rpg_byte_reset` are
//! firmware features HPCC-ns3 lacks; their semantics here follow the mlx5 descriptions (see
//! [`NvidiaParams`]).
//!
//! # Driving it
//!
//! The state machine is sans-IO and deterministic: time only enters through the `now` arguments.
//! Inputs are [`Rp::handle_cnp`] (a CNP for this QP arrived), [`Rp::handle_tx`] (the QP sent bytes,
//! for the byte counter) and [`Rp::handle_timeout`]; [`Rp::poll_timeout`] says when to call
//! `handle_timeout` next. Every `handle_*` first processes all timer expiries that are due at or
//! before `now` (so an expiry at exactly `now` happens *before* the input), then the input.
//! Getters report the state as of the latest `handle_*` call. `now` earlier than a previous `now` is
//! treated as that previous `now`.
//!
//! # Determinism and bounded work
//!
//! Rates are integers in bit/s. Alpha is an `f64`, computed lazily in closed form: between two CNPs
//! it is `anchor * (1-g)^n` for `n` elapsed alpha periods, with `(1-g)^n` evaluated by the same
//! square-and-multiply sequence whatever the call pattern. Increase events are applied one at a time
//! until the state reaches a regime where every further timer event adds the same increment (or
//! nothing); from there many events are applied in closed form. So the result is **independent of
//! how often the driver polls** (the property tests check bit-identical state between a driver that
//! only calls on inputs and one that also calls at every deadline), and a time jump of any length
//! costs a bounded amount of work. As a last guard, a catch-up applies at most
//! [`CATCH_UP_STEPS_MAX`] single events; beyond that (only reachable with extreme parameters, such
//! as increments of a few bit/s on a fast link) the remaining events are skipped without raising
//! the rate and counted in [`RpStats::catch_up_skipped_events_total`].
//!
//! # Before the first CNP
//!
//! A NIC allocates a rate limiter for a QP on its first CNP (`rate_to_set_on_first_cnp`, NVIDIA
//! doc); until then the QP sends at line rate and nothing in here runs: no timers, no alpha decay,
//! and [`Rp::handle_tx`] does not feed the byte counter. This is our choice for the paper mode too
//! (the paper and htsim do not say when the timers start; htsim starts with alpha = 1).

use core::fmt;

use crate::time::{Instant, NANOS_PER_MICRO};

/// Bits per second in one Mb/s (the unit of the mlx5 rate parameters).
pub const BPS_PER_MBPS: u64 = 1_000_000;

/// Largest accepted line rate, 1 Pb/s: keeps every rate below 2^53 so that it converts to and
/// from `f64` exactly.
pub const LINE_RATE_MAX_BPS: u64 = 1_000_000_000_000_000;

/// Largest accepted fast-recovery threshold F (`rpg_threshold`): bounds the single-step work of a
/// catch-up before the increase regime becomes steady.
pub const THRESHOLD_MAX: u32 = 1024;

/// Most increase events a single catch-up applies one at a time (see the module doc).
pub const CATCH_UP_STEPS_MAX: u32 = 65_536;

/// Parameters of the paper-mode RP (SIGCOMM'15 §3.1, htsim semantics).
///
/// Defaults ([`PaperParams::default`]) are the values of `dcqcn-roce.md` §1.1: g = 1/256,
/// K = T = 55 us, B = 10 MB, F = 5, R_AI = 40 Mb/s, R_HAI = 200 Mb/s, alpha starting at 1.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PaperParams {
    /// Alpha gain g, in [0, 1]. Default 1/256 (htsim `_g`, ns3-rdma `DCTCP_GAIN`).
    pub g: f64,
    /// Alpha before the first CNP, in [0, 1]. Default 1 (htsim `_alpha = 1`).
    pub initial_alpha: f64,
    /// Alpha timer K: alpha decays once per K without a CNP. Default 55 us (htsim, ns3-rdma).
    pub alpha_timer_ns: u64,
    /// Rate-increase timer T. Default 55 us (htsim uses one 55 us period for both timers).
    pub increase_timer_ns: u64,
    /// Byte counter B: one increase event per B bytes sent; 0 disables it. Default 10,000,000
    /// (htsim `_B`).
    pub byte_counter_bytes: u64,
    /// F, the number of timer or byte-counter events spent in fast recovery. Default 5.
    pub fast_recovery_threshold: u32,
    /// R_AI, the target-rate step of additive increase. Default 40 Mb/s (ns3-rdma sample config,
    /// fluid-model script). Must be > 0.
    pub additive_increase_bps: u64,
    /// R_HAI, the target-rate step of hyper increase (multiplied by `min(T_cnt, BC_cnt) - F`).
    /// Default 200 Mb/s from the ns3-rdma sample config: the paper's own value is **UNVERIFIED**
    /// (`dcqcn-roce.md` §1.1). Must be > 0.
    pub hyper_increase_bps: u64,
    /// Lowest rate a cut may reach. The paper gives none; the default 100 Mb/s is the HPCC-ns3
    /// `RdmaHw` attribute default and `mix/config.txt` value.
    pub min_rate_bps: u64,
    /// Also clamp the target rate Rt to the line rate. htsim clamps only Rc (the default, `false`);
    /// HPCC-ns3 clamps Rt. Rc never exceeds the line rate either way.
    pub clamp_target_rate_to_line: bool,
}

impl Default for PaperParams {
    fn default() -> Self {
        Self {
            g: 1.0 / 256.0,
            initial_alpha: 1.0,
            alpha_timer_ns: 55 * NANOS_PER_MICRO,
            increase_timer_ns: 55 * NANOS_PER_MICRO,
            byte_counter_bytes: 10_000_000,
            fast_recovery_threshold: 5,
            additive_increase_bps: 40 * BPS_PER_MBPS,
            hyper_increase_bps: 200 * BPS_PER_MBPS,
            min_rate_bps: 100 * BPS_PER_MBPS,
            clamp_target_rate_to_line: false,
        }
    }
}

/// Parameters of the NVIDIA-mode RP, named and scaled exactly as the mlx5 driver / `mlxconfig`
/// name them (so values can be copied from `mlxconfig q` or `/sys/class/net/*/ecn/roce_rp/`).
///
/// Defaults ([`NvidiaParams::default`]) are the firmware defaults of `dcqcn-roce.md` §1.3 (DOCA
/// page and an `mlxconfig` dump; firmware versions may differ). [`NvidiaParams::hpcc_ns3`] gives the
/// HPCC-ns3 `run.py` values instead.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NvidiaParams {
    /// Microseconds between rate increases when no CNP arrives (increase timer T). Default 300.
    pub rpg_time_reset: u32,
    /// Bytes between byte-counter rate increases; 0 disables the byte counter. Default 32767
    /// (`mlxconfig` dump). HPCC-ns3 has no byte counter (use 0 to match it). How firmware
    /// combines its byte and time stages is not documented; we take the stage as
    /// `max(rpByteStage, rpTimeStage)`, which reads the FreeBSD description of `rpg_threshold`
    /// ("number of times rpByteStage or rpTimeStage can count before the RP rate control state
    /// machine advances states") literally. **Inferred, unverified.**
    pub rpg_byte_reset: u32,
    /// F: increase events spent in fast recovery before additive increase (one event), then hyper
    /// increase. Default 1. At most [`THRESHOLD_MAX`].
    pub rpg_threshold: u32,
    /// Target-rate step of additive increase, Mb/s. Default 5.
    pub rpg_ai_rate: u32,
    /// Target-rate step of hyper increase, Mb/s (constant: no `i *` factor, HPCC-ns3
    /// `HyperIncreaseMlx`). Default 50.
    pub rpg_hai_rate: u32,
    /// log2 of Gd in `Rc = (1 - alpha/Gd) * Rc` with alpha in 2^-10 units: with 11 (the default) the
    /// cut is the paper's `1 - alpha/2`; with 10 it is `1 - alpha`. Accepted 1..=31.
    pub rpg_gd: u8,
    /// A single cut leaves at least this percentage of the current rate. Default 50 (which never
    /// binds with `rpg_gd` = 11, since `1 - alpha/2 >= 1/2`). 0..=100.
    pub rpg_min_dec_fac: u8,
    /// Lowest rate, Mb/s. Default 1.
    pub rpg_min_rate: u32,
    /// Rate (Mb/s) set when the rate limiter is allocated on the first CNP; 0 means the full port
    /// speed. Default 0. Values above the line rate are clamped to it.
    pub rate_to_set_on_first_cnp: u32,
    /// Alpha gain in 2^-10 fixed point: with a CNP in the period `alpha = G/1024 * alpha +
    /// (1024 - G)/1024`, without one `alpha = G/1024 * alpha` (community doc DOC-2790 v19), so the
    /// effective g is `(1024 - dce_tcp_g)/1024`. Default 1019 (g = 5/1024 ~ 1/205). HPCC-ns3's
    /// g = 1/256 is 1020. We accept 0..=1024 (1024: alpha never changes).
    pub dce_tcp_g: u16,
    /// Alpha update period, microseconds. Default 1.
    pub dce_tcp_rtt: u32,
    /// Rate-decrease check period (at most one cut per period), microseconds. Default 4.
    pub rate_reduce_monitor_period: u32,
    /// Alpha set on the first CNP, 2^-10 fixed point. Default 1023. The firmware range is
    /// 1..=1023; we also accept 1024, meaning exactly 1 (HPCC-ns3 sets alpha = 1, and the
    /// closed-form checks of `dcqcn-roce.md` §1.5 assume it).
    pub initial_alpha_value: u16,
    /// On a cut, always set the target rate to the current rate. Default false.
    pub clamp_tgt_rate: bool,
    /// On a cut, set the target rate to the current rate also when the last increase since the
    /// previous cut came from the timer (it always does when it came from the byte counter).
    /// Default true. With true and no byte counter this is HPCC-ns3's `m_rpTimeStage != 0` rule.
    pub clamp_tgt_rate_after_time_inc: bool,
}

impl Default for NvidiaParams {
    fn default() -> Self {
        Self {
            rpg_time_reset: 300,
            rpg_byte_reset: 32_767,
            rpg_threshold: 1,
            rpg_ai_rate: 5,
            rpg_hai_rate: 50,
            rpg_gd: 11,
            rpg_min_dec_fac: 50,
            rpg_min_rate: 1,
            rate_to_set_on_first_cnp: 0,
            dce_tcp_g: 1019,
            dce_tcp_rtt: 1,
            rate_reduce_monitor_period: 4,
            initial_alpha_value: 1023,
            clamp_tgt_rate: false,
            clamp_tgt_rate_after_time_inc: true,
        }
    }
}

impl NvidiaParams {
    /// The HPCC-ns3 `run.py --cc dcqcn` values for a NIC of `line_rate_bps` (`dcqcn-roce.md`
    /// §1.3): alpha tick 1 us, decrease check 4 us, T = 300 us, g = 1/256, F = 1,
    /// R_AI = 5 * bw/25 Mb/s, R_HAI = 50 * bw/25 Mb/s (bw in Gb/s), min rate 1000 Mb/s, alpha = 1
    /// on the first CNP, no byte counter, no `min_dec_fac` bound, target clamp only after an
    /// increase.
    #[must_use]
    pub fn hpcc_ns3(line_rate_bps: u64) -> Self {
        // 5 * bw_gbps / 25 Mb/s = line_rate_bps / 5e9 Mb/s.
        let ai_mbps = u32::try_from((line_rate_bps / 5_000_000_000).max(1)).unwrap_or(u32::MAX);
        Self {
            rpg_time_reset: 300,
            rpg_byte_reset: 0,
            rpg_threshold: 1,
            rpg_ai_rate: ai_mbps,
            rpg_hai_rate: ai_mbps.saturating_mul(10),
            rpg_gd: 11,
            rpg_min_dec_fac: 0,
            rpg_min_rate: 1000,
            rate_to_set_on_first_cnp: 0,
            dce_tcp_g: 1020,
            dce_tcp_rtt: 1,
            rate_reduce_monitor_period: 4,
            initial_alpha_value: 1024,
            clamp_tgt_rate: false,
            clamp_tgt_rate_after_time_inc: true,
        }
    }
}

/// Which algorithm an [`Rp`] runs, with its parameters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum RpParams {
    /// SIGCOMM'15 / htsim semantics.
    Paper(PaperParams),
    /// ConnectX firmware / HPCC-ns3 `CC_MODE 1` semantics.
    Nvidia(NvidiaParams),
}

impl RpParams {
    /// Paper mode with its default parameters.
    #[must_use]
    pub fn paper() -> Self {
        Self::Paper(PaperParams::default())
    }

    /// NVIDIA mode with the firmware default parameters.
    #[must_use]
    pub fn nvidia() -> Self {
        Self::Nvidia(NvidiaParams::default())
    }
}

/// Why [`Rp::new`] refused its parameters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RpParamError {
    /// The line rate is 0 or above [`LINE_RATE_MAX_BPS`].
    LineRateOutOfRange,
    /// The minimum rate is 0 or above the line rate.
    MinRateOutOfRange,
    /// g (or `dce_tcp_g`) is outside its range.
    GainOutOfRange,
    /// The initial alpha is outside [0, 1] (`initial_alpha_value` above 1024).
    InitialAlphaOutOfRange,
    /// A timer period is zero.
    ZeroPeriod,
    /// F is above [`THRESHOLD_MAX`].
    ThresholdTooLarge,
    /// An additive or hyper increase step is zero.
    ZeroIncrease,
    /// `rpg_gd` is outside 1..=31.
    GdOutOfRange,
    /// `rpg_min_dec_fac` is above 100.
    MinDecreaseFactorOutOfRange,
}

impl fmt::Display for RpParamError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let text = match self {
            Self::LineRateOutOfRange => "line rate must be in 1 bit/s ..= 1 Pb/s",
            Self::MinRateOutOfRange => "minimum rate must be in 1 bit/s ..= line rate",
            Self::GainOutOfRange => "alpha gain g must be in [0, 1] (dce_tcp_g in 0..=1024)",
            Self::InitialAlphaOutOfRange => {
                "initial alpha must be in [0, 1] (initial_alpha_value in 0..=1024)"
            }
            Self::ZeroPeriod => "timer periods must be non-zero",
            Self::ThresholdTooLarge => "fast-recovery threshold F is above THRESHOLD_MAX",
            Self::ZeroIncrease => "additive and hyper increase steps must be non-zero",
            Self::GdOutOfRange => "rpg_gd must be in 1..=31",
            Self::MinDecreaseFactorOutOfRange => "rpg_min_dec_fac must be in 0..=100",
        };
        f.write_str(text)
    }
}

impl std::error::Error for RpParamError {}

/// The stage an increase event ran in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IncreaseStage {
    /// `Rc = (Rt + Rc) / 2`, Rt unchanged.
    FastRecovery,
    /// `Rt += R_AI`, then `Rc = (Rt + Rc) / 2`.
    Additive,
    /// `Rt += R_HAI` (paper: `i * R_HAI`), then `Rc = (Rt + Rc) / 2`.
    Hyper,
}

/// Counters of one RP. All are monotonic.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct RpStats {
    /// CNPs handled (every call of [`Rp::handle_cnp`]).
    pub cnps_total: u64,
    /// Rate cuts. Paper mode: one per CNP. NVIDIA mode: at most one per decrease period.
    pub rate_cuts_total: u64,
    /// Increase-timer expiries (each is an increase event).
    pub timer_events_total: u64,
    /// Byte-counter expiries (each is an increase event).
    pub byte_counter_events_total: u64,
    /// Increase events that ran in fast recovery.
    pub fast_recovery_total: u64,
    /// Increase events that ran in additive increase.
    pub additive_increase_total: u64,
    /// Increase events that ran in hyper increase.
    pub hyper_increase_total: u64,
    /// Timer events skipped without effect because a catch-up hit [`CATCH_UP_STEPS_MAX`].
    pub catch_up_skipped_events_total: u64,
    /// Bytes reported through [`Rp::handle_tx`], counted or not by the byte counter.
    pub tx_bytes_total: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum IncreaseCause {
    Timer,
    ByteCounter,
}

/// Validated parameters, in the units the state machine works in.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Config {
    line_rate_bps: u64,
    min_rate_bps: u64,
    /// Alpha gain g and `1 - g`.
    g: f64,
    decay: f64,
    initial_alpha: f64,
    increase_timer_ns: u64,
    byte_counter_bytes: u64,
    threshold: u64,
    additive_increase_bps: u64,
    hyper_increase_bps: u64,
    mode: ModeConfig,
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum ModeConfig {
    Paper {
        alpha_timer_ns: u64,
        clamp_target_rate_to_line: bool,
    },
    Nvidia {
        /// The cut is `1 - alpha * cut_scale` (`2^(10 - rpg_gd)`).
        cut_scale: f64,
        min_decrease_percent: u64,
        first_cnp_rate_bps: u64,
        alpha_tick_ns: u64,
        decrease_period_ns: u64,
        clamp_tgt_rate: bool,
        clamp_tgt_rate_after_time_inc: bool,
    },
}

impl Config {
    fn new(params: &RpParams, line_rate_bps: u64) -> Result<Self, RpParamError> {
        if line_rate_bps == 0 || line_rate_bps > LINE_RATE_MAX_BPS {
            return Err(RpParamError::LineRateOutOfRange);
        }
        match *params {
            RpParams::Paper(p) => {
                if !(0.0..=1.0).contains(&p.g) {
                    return Err(RpParamError::GainOutOfRange);
                }
                if !(0.0..=1.0).contains(&p.initial_alpha) {
                    return Err(RpParamError::InitialAlphaOutOfRange);
                }
                if p.alpha_timer_ns == 0 || p.increase_timer_ns == 0 {
                    return Err(RpParamError::ZeroPeriod);
                }
                if p.fast_recovery_threshold > THRESHOLD_MAX {
                    return Err(RpParamError::ThresholdTooLarge);
                }
                if p.additive_increase_bps == 0 || p.hyper_increase_bps == 0 {
                    return Err(RpParamError::ZeroIncrease);
                }
                if p.min_rate_bps == 0 || p.min_rate_bps > line_rate_bps {
                    return Err(RpParamError::MinRateOutOfRange);
                }
                Ok(Self {
                    line_rate_bps,
                    min_rate_bps: p.min_rate_bps,
                    g: p.g,
                    decay: 1.0 - p.g,
                    initial_alpha: p.initial_alpha,
                    increase_timer_ns: p.increase_timer_ns,
                    byte_counter_bytes: p.byte_counter_bytes,
                    threshold: u64::from(p.fast_recovery_threshold),
                    additive_increase_bps: p.additive_increase_bps,
                    hyper_increase_bps: p.hyper_increase_bps,
                    mode: ModeConfig::Paper {
                        alpha_timer_ns: p.alpha_timer_ns,
                        clamp_target_rate_to_line: p.clamp_target_rate_to_line,
                    },
                })
            }
            RpParams::Nvidia(p) => {
                if p.dce_tcp_g > 1024 {
                    return Err(RpParamError::GainOutOfRange);
                }
                if p.initial_alpha_value > 1024 {
                    return Err(RpParamError::InitialAlphaOutOfRange);
                }
                if p.rpg_time_reset == 0 || p.dce_tcp_rtt == 0 || p.rate_reduce_monitor_period == 0
                {
                    return Err(RpParamError::ZeroPeriod);
                }
                if p.rpg_threshold > THRESHOLD_MAX {
                    return Err(RpParamError::ThresholdTooLarge);
                }
                if p.rpg_ai_rate == 0 || p.rpg_hai_rate == 0 {
                    return Err(RpParamError::ZeroIncrease);
                }
                if !(1..=31).contains(&p.rpg_gd) {
                    return Err(RpParamError::GdOutOfRange);
                }
                if p.rpg_min_dec_fac > 100 {
                    return Err(RpParamError::MinDecreaseFactorOutOfRange);
                }
                let min_rate_bps = u64::from(p.rpg_min_rate) * BPS_PER_MBPS;
                if min_rate_bps == 0 || min_rate_bps > line_rate_bps {
                    return Err(RpParamError::MinRateOutOfRange);
                }
                // Exact powers of two: 2^(10 - gd).
                let cut_scale = if p.rpg_gd >= 10 {
                    1.0 / (1u64 << (p.rpg_gd - 10)) as f64
                } else {
                    (1u64 << (10 - p.rpg_gd)) as f64
                };
                let first_cnp_rate_bps = match p.rate_to_set_on_first_cnp {
                    0 => line_rate_bps,
                    mbps => (u64::from(mbps) * BPS_PER_MBPS).clamp(min_rate_bps, line_rate_bps),
                };
                // dce_tcp_g <= 1024, so these are exact dyadic fractions.
                let g = f64::from(1024 - p.dce_tcp_g) / 1024.0;
                Ok(Self {
                    line_rate_bps,
                    min_rate_bps,
                    g,
                    decay: f64::from(p.dce_tcp_g) / 1024.0,
                    initial_alpha: f64::from(p.initial_alpha_value) / 1024.0,
                    increase_timer_ns: u64::from(p.rpg_time_reset) * NANOS_PER_MICRO,
                    byte_counter_bytes: u64::from(p.rpg_byte_reset),
                    threshold: u64::from(p.rpg_threshold),
                    additive_increase_bps: u64::from(p.rpg_ai_rate) * BPS_PER_MBPS,
                    hyper_increase_bps: u64::from(p.rpg_hai_rate) * BPS_PER_MBPS,
                    mode: ModeConfig::Nvidia {
                        cut_scale,
                        min_decrease_percent: u64::from(p.rpg_min_dec_fac),
                        first_cnp_rate_bps,
                        alpha_tick_ns: u64::from(p.dce_tcp_rtt) * NANOS_PER_MICRO,
                        decrease_period_ns: u64::from(p.rate_reduce_monitor_period)
                            * NANOS_PER_MICRO,
                        clamp_tgt_rate: p.clamp_tgt_rate,
                        clamp_tgt_rate_after_time_inc: p.clamp_tgt_rate_after_time_inc,
                    },
                })
            }
        }
    }

    fn is_nvidia(&self) -> bool {
        matches!(self.mode, ModeConfig::Nvidia { .. })
    }

    /// The largest value the target rate may take.
    fn target_rate_cap_bps(&self) -> u64 {
        match self.mode {
            ModeConfig::Paper {
                clamp_target_rate_to_line: false,
                ..
            } => u64::MAX,
            _ => self.line_rate_bps,
        }
    }
}

/// One DCQCN reaction point: the rate controller of one QP.
#[derive(Clone, Debug, PartialEq)]
pub struct Rp {
    cfg: Config,
    /// Rc.
    rate_current_bps: u64,
    /// Rt.
    rate_target_bps: u64,
    /// A CNP has been seen: the rate limiter exists.
    active: bool,
    now_last: Instant,

    /// Alpha is `alpha_anchor * decay^n`, n = alpha periods since the anchor (see `alpha_at`).
    alpha_anchor: f64,
    /// Paper mode: time of the last CNP (the alpha timer restarts there).
    alpha_anchor_at: Instant,
    /// NVIDIA mode: index of the alpha tick at which `alpha_anchor` holds (ticks are numbered
    /// from the first CNP: tick k is at `first_cnp_at + k * dce_tcp_rtt`).
    alpha_anchor_tick: u64,
    /// NVIDIA mode: a CNP arrived; it adds g at this tick.
    alpha_pending_tick: Option<u64>,
    /// NVIDIA mode: origin of the alpha-tick and decrease-check grids.
    first_cnp_at: Instant,
    /// NVIDIA mode: a CNP arrived; the rate is cut at this decrease check.
    decrease_at: Option<Instant>,

    /// The increase timer runs (from the first cut on).
    increase_running: bool,
    /// When the increase timer was last restarted; expiry j is at `anchor + j * T`.
    increase_anchor: Instant,
    /// T_cnt (paper) / rpTimeStage (NVIDIA): timer events since the last cut.
    timer_events: u64,
    /// BC_cnt (paper) / rpByteStage (NVIDIA): byte-counter events since the last cut.
    byte_events: u64,
    bytes_since_byte_event: u64,
    /// NVIDIA mode: cause of the last increase since the last cut.
    last_increase: Option<IncreaseCause>,

    stats: RpStats,

    /// Test oracle: apply every increase event one at a time (no closed form, no budget).
    #[cfg(test)]
    stepwise: bool,
}

impl Rp {
    /// A reaction point for a QP on a link of `line_rate_bps`, sending at line rate until its
    /// first CNP.
    pub fn new(params: RpParams, line_rate_bps: u64, now: Instant) -> Result<Self, RpParamError> {
        let cfg = Config::new(&params, line_rate_bps)?;
        Ok(Self {
            rate_current_bps: line_rate_bps,
            rate_target_bps: line_rate_bps,
            active: false,
            now_last: now,
            alpha_anchor: cfg.initial_alpha,
            alpha_anchor_at: now,
            alpha_anchor_tick: 0,
            alpha_pending_tick: None,
            first_cnp_at: now,
            decrease_at: None,
            increase_running: false,
            increase_anchor: now,
            timer_events: 0,
            byte_events: 0,
            bytes_since_byte_event: 0,
            last_increase: None,
            stats: RpStats::default(),
            #[cfg(test)]
            stepwise: false,
            cfg,
        })
    }

    /// The current rate Rc, bit/s: what the QP's rate limiter should enforce.
    #[must_use]
    pub fn current_rate_bps(&self) -> u64 {
        self.rate_current_bps
    }

    /// The target rate Rt, bit/s. In paper mode without `clamp_target_rate_to_line` it may exceed
    /// the line rate (htsim semantics), saturating at `u64::MAX`.
    #[must_use]
    pub fn target_rate_bps(&self) -> u64 {
        self.rate_target_bps
    }

    /// Alpha, in [0, 1], as of the latest `handle_*` call.
    #[must_use]
    pub fn alpha(&self) -> f64 {
        self.alpha_at(self.now_last)
    }

    /// The line rate given to [`Rp::new`].
    #[must_use]
    pub fn line_rate_bps(&self) -> u64 {
        self.cfg.line_rate_bps
    }

    /// The lowest rate a cut may reach, bit/s.
    #[must_use]
    pub fn min_rate_bps(&self) -> u64 {
        self.cfg.min_rate_bps
    }

    /// Whether a CNP has been received (the rate limiter is allocated).
    #[must_use]
    pub fn is_active(&self) -> bool {
        self.active
    }

    /// The counters.
    #[must_use]
    pub fn stats(&self) -> &RpStats {
        &self.stats
    }

    /// When [`Rp::handle_timeout`] must next be called, if ever.
    ///
    /// `None` before the first CNP, and also once the rate has settled at line rate with no cut
    /// pending: further increase events then cannot change the current rate, and they (with the
    /// target rate and the increase counters they move) are accounted in closed form by the next
    /// `handle_*` call.
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Instant> {
        if !self.active {
            return None;
        }
        let increase =
            (self.increase_running && !self.rate_settled()).then(|| self.increase_deadline());
        match (self.decrease_at, increase) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Processes every timer expiry due at or before `now`.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.advance(now);
    }

    /// A CNP for this QP arrived at `now`.
    pub fn handle_cnp(&mut self, now: Instant) {
        let now = self.advance(now);
        self.stats.cnps_total += 1;
        match self.cfg.mode {
            ModeConfig::Paper { .. } => self.paper_cut(now),
            ModeConfig::Nvidia {
                first_cnp_rate_bps,
                alpha_tick_ns,
                decrease_period_ns,
                ..
            } => {
                if !self.active {
                    // HPCC-ns3 `cnp_received_mlx` on the first CNP: alpha = initial, no +g for
                    // this CNP, Rt = Rc = rate on first CNP; the decrease check runs 1 ns after
                    // each alpha tick that falls on its period (`ScheduleDecreaseRateMlx(q, 1)`).
                    self.active = true;
                    self.first_cnp_at = now;
                    self.alpha_anchor = self.cfg.initial_alpha;
                    self.alpha_anchor_tick = 0;
                    self.alpha_pending_tick = None;
                    self.rate_current_bps = first_cnp_rate_bps;
                    self.rate_target_bps = first_cnp_rate_bps;
                    self.decrease_at = Some(now.saturating_add_nanos(decrease_period_ns + 1));
                } else {
                    if self.alpha_pending_tick.is_none() {
                        let tick = now.saturating_nanos_since(self.first_cnp_at) / alpha_tick_ns;
                        self.alpha_pending_tick = Some(tick + 1);
                    }
                    if self.decrease_at.is_none() {
                        self.decrease_at = Some(self.next_decrease_check_after(now));
                    }
                }
            }
        }
    }

    /// The QP sent `bytes` at `now` (feeds the byte counter; at most one byte-counter event per
    /// call, and the count restarts from zero after it, as in the paper's pseudo-code, so report
    /// bytes per packet or per small burst).
    pub fn handle_tx(&mut self, now: Instant, bytes: u64) {
        self.advance(now);
        self.stats.tx_bytes_total = self.stats.tx_bytes_total.saturating_add(bytes);
        if !self.increase_running || self.cfg.byte_counter_bytes == 0 {
            return;
        }
        self.bytes_since_byte_event = self.bytes_since_byte_event.saturating_add(bytes);
        if self.bytes_since_byte_event >= self.cfg.byte_counter_bytes {
            self.bytes_since_byte_event = 0;
            self.increase(IncreaseCause::ByteCounter);
        }
    }

    // ---- time ----------------------------------------------------------------------------

    /// Processes every expiry due at or before `now`; returns the effective `now`.
    fn advance(&mut self, now: Instant) -> Instant {
        let now = now.max(self.now_last);
        if self.active {
            if let ModeConfig::Nvidia { alpha_tick_ns, .. } = self.cfg.mode {
                if let Some(at) = self.decrease_at.filter(|&at| at <= now) {
                    // Same-instant order: an increase expiry at `at` runs before the check, as in
                    // ns-3, where the increase event was scheduled earlier.
                    self.run_increase_timer_until(at);
                    self.nvidia_cut(at);
                }
                // Fold a passed pending alpha tick into the anchor (same value `alpha_at` gives).
                let tick = now.saturating_nanos_since(self.first_cnp_at) / alpha_tick_ns;
                let (anchor, anchor_tick) = self.nvidia_alpha_anchor_through(tick);
                if Some(anchor_tick) == self.alpha_pending_tick {
                    self.alpha_anchor = anchor;
                    self.alpha_anchor_tick = anchor_tick;
                    self.alpha_pending_tick = None;
                }
            }
            self.run_increase_timer_until(now);
        }
        self.now_last = now;
        now
    }

    fn increase_deadline(&self) -> Instant {
        let due_ns = self
            .timer_events
            .saturating_add(1)
            .saturating_mul(self.cfg.increase_timer_ns);
        self.increase_anchor.saturating_add_nanos(due_ns)
    }

    /// NVIDIA mode: the first decrease check strictly after `t`. Checks are at
    /// `first_cnp_at + 1 ns + k * period`, k >= 1.
    fn next_decrease_check_after(&self, t: Instant) -> Instant {
        let ModeConfig::Nvidia {
            decrease_period_ns, ..
        } = self.cfg.mode
        else {
            return Instant::MAX;
        };
        let base = self.first_cnp_at.saturating_add_nanos(1);
        let k = if t < base {
            1
        } else {
            t.saturating_nanos_since(base) / decrease_period_ns + 1
        };
        base.saturating_add_nanos(k.saturating_mul(decrease_period_ns))
    }

    fn rate_settled(&self) -> bool {
        self.rate_current_bps == self.cfg.line_rate_bps
            && self.rate_target_bps >= self.cfg.line_rate_bps
    }

    // ---- alpha ---------------------------------------------------------------------------

    fn alpha_at(&self, t: Instant) -> f64 {
        if !self.active {
            return self.alpha_anchor;
        }
        match self.cfg.mode {
            ModeConfig::Paper { alpha_timer_ns, .. } => {
                let periods = t.saturating_nanos_since(self.alpha_anchor_at) / alpha_timer_ns;
                self.alpha_anchor * pow_u64(self.cfg.decay, periods)
            }
            ModeConfig::Nvidia { alpha_tick_ns, .. } => {
                let tick = t.saturating_nanos_since(self.first_cnp_at) / alpha_tick_ns;
                let (anchor, anchor_tick) = self.nvidia_alpha_anchor_through(tick);
                anchor * pow_u64(self.cfg.decay, tick.saturating_sub(anchor_tick))
            }
        }
    }

    /// NVIDIA mode: the anchor after applying the pending CNP tick, if it is at or before `tick`:
    /// `alpha_pt = (1-g) * alpha_(pt-1) + g = anchor * (1-g)^(pt - anchor_tick) + g`
    /// (HPCC-ns3 `UpdateAlphaMlx`).
    fn nvidia_alpha_anchor_through(&self, tick: u64) -> (f64, u64) {
        match self.alpha_pending_tick {
            Some(pending) if pending <= tick => {
                let decayed = self.alpha_anchor
                    * pow_u64(
                        self.cfg.decay,
                        pending.saturating_sub(self.alpha_anchor_tick),
                    );
                ((decayed + self.cfg.g).min(1.0), pending)
            }
            _ => (self.alpha_anchor, self.alpha_anchor_tick),
        }
    }

    // ---- decrease ------------------------------------------------------------------------

    /// Paper mode CNP (§1.4): `Rt = Rc; Rc = max(min, Rc * (1 - alpha/2))` with the alpha from
    /// before this CNP, then `alpha = (1-g) alpha + g`, and both timers restart.
    fn paper_cut(&mut self, now: Instant) {
        let alpha_old = self.alpha_at(now);
        self.active = true;
        self.rate_target_bps = self.rate_current_bps;
        let cut = scale_floor(self.rate_current_bps, 1.0 - alpha_old / 2.0);
        self.rate_current_bps = cut.max(self.cfg.min_rate_bps);
        self.alpha_anchor = (self.cfg.decay * alpha_old + self.cfg.g).min(1.0);
        self.alpha_anchor_at = now;
        self.restart_increase(now);
        self.stats.rate_cuts_total += 1;
    }

    /// NVIDIA mode decrease check with a CNP pending (HPCC-ns3 `CheckRateDecreaseMlx`, plus the
    /// firmware's `rpg_min_dec_fac` bound and `clamp_tgt_rate*` rules).
    fn nvidia_cut(&mut self, at: Instant) {
        let ModeConfig::Nvidia {
            cut_scale,
            min_decrease_percent,
            clamp_tgt_rate,
            clamp_tgt_rate_after_time_inc,
            ..
        } = self.cfg.mode
        else {
            return;
        };
        let clamp = clamp_tgt_rate
            || match self.last_increase {
                Some(IncreaseCause::ByteCounter) => true,
                Some(IncreaseCause::Timer) => clamp_tgt_rate_after_time_inc,
                None => false,
            };
        if clamp {
            self.rate_target_bps = self.rate_current_bps;
        }
        let alpha = self.alpha_at(at);
        let factor = (1.0 - alpha * cut_scale).max(0.0);
        let cut = scale_floor(self.rate_current_bps, factor);
        let floor_by_min_dec = mul_div_floor(self.rate_current_bps, min_decrease_percent, 100);
        self.rate_current_bps = cut.max(floor_by_min_dec).max(self.cfg.min_rate_bps);
        self.decrease_at = None;
        self.restart_increase(at);
        self.stats.rate_cuts_total += 1;
    }

    fn restart_increase(&mut self, now: Instant) {
        self.increase_running = true;
        self.increase_anchor = now;
        self.timer_events = 0;
        self.byte_events = 0;
        self.bytes_since_byte_event = 0;
        self.last_increase = None;
    }

    // ---- increase ------------------------------------------------------------------------

    /// The stage and target-rate step of the next increase event, given the counters *after* the
    /// event's own counter was incremented (paper) or before it (NVIDIA), as each source does.
    fn stage_of(&self, timer_events: u64, byte_events: u64) -> (IncreaseStage, u64) {
        let f = self.cfg.threshold;
        if self.cfg.is_nvidia() {
            // HPCC-ns3 `RateIncEventMlx`: stage < F fast recovery, == F additive, > F hyper.
            let stage = timer_events.max(byte_events);
            if stage < f {
                (IncreaseStage::FastRecovery, 0)
            } else if stage == f {
                (IncreaseStage::Additive, self.cfg.additive_increase_bps)
            } else {
                (IncreaseStage::Hyper, self.cfg.hyper_increase_bps)
            }
        } else if timer_events.max(byte_events) <= f {
            (IncreaseStage::FastRecovery, 0)
        } else if timer_events.min(byte_events) > f {
            let i = timer_events.min(byte_events) - f;
            (
                IncreaseStage::Hyper,
                i.saturating_mul(self.cfg.hyper_increase_bps),
            )
        } else {
            (IncreaseStage::Additive, self.cfg.additive_increase_bps)
        }
    }

    /// One increase event (§1.4 `increase()` / `inc_timer`).
    fn increase(&mut self, cause: IncreaseCause) {
        let nvidia = self.cfg.is_nvidia();
        if !nvidia {
            // Paper: the event's counter is incremented before the stage is chosen.
            self.bump_counter(cause);
        }
        let (stage, step) = self.stage_of(self.timer_events, self.byte_events);
        self.rate_target_bps = self
            .rate_target_bps
            .saturating_add(step)
            .min(self.cfg.target_rate_cap_bps());
        self.rate_current_bps =
            average_ceil(self.rate_target_bps, self.rate_current_bps).min(self.cfg.line_rate_bps);
        if nvidia {
            // HPCC-ns3: `RateIncEventMlx(q); m_rpTimeStage++`.
            self.bump_counter(cause);
            self.last_increase = Some(cause);
        }
        self.count_stage(stage, 1);
        match cause {
            IncreaseCause::Timer => self.stats.timer_events_total += 1,
            IncreaseCause::ByteCounter => self.stats.byte_counter_events_total += 1,
        }
    }

    fn bump_counter(&mut self, cause: IncreaseCause) {
        match cause {
            IncreaseCause::Timer => self.timer_events = self.timer_events.saturating_add(1),
            IncreaseCause::ByteCounter => self.byte_events = self.byte_events.saturating_add(1),
        }
    }

    fn count_stage(&mut self, stage: IncreaseStage, n: u64) {
        let counter = match stage {
            IncreaseStage::FastRecovery => &mut self.stats.fast_recovery_total,
            IncreaseStage::Additive => &mut self.stats.additive_increase_total,
            IncreaseStage::Hyper => &mut self.stats.hyper_increase_total,
        };
        *counter = counter.saturating_add(n);
    }

    /// Applies every increase-timer expiry at or before `t`.
    fn run_increase_timer_until(&mut self, t: Instant) {
        if !self.increase_running {
            return;
        }
        let due = t.saturating_nanos_since(self.increase_anchor) / self.cfg.increase_timer_ns;
        let mut remaining = due.saturating_sub(self.timer_events);
        let mut single_steps = 0u32;
        while remaining > 0 {
            #[cfg(test)]
            if self.stepwise {
                self.increase(IncreaseCause::Timer);
                remaining -= 1;
                continue;
            }
            let jumped = self.jump_timer_events(remaining);
            if jumped > 0 {
                remaining -= jumped;
                continue;
            }
            if single_steps == CATCH_UP_STEPS_MAX {
                self.timer_events = self.timer_events.saturating_add(remaining);
                self.stats.catch_up_skipped_events_total = self
                    .stats
                    .catch_up_skipped_events_total
                    .saturating_add(remaining);
                return;
            }
            self.increase(IncreaseCause::Timer);
            single_steps += 1;
            remaining -= 1;
        }
    }

    /// The stage and step every further timer-only event will have, if that no longer changes.
    fn steady_timer_step(&self) -> Option<(IncreaseStage, u64)> {
        let f = self.cfg.threshold;
        let (t, bc) = (self.timer_events, self.byte_events);
        let steady = if self.cfg.is_nvidia() {
            t.max(bc) > f
        } else if bc <= f {
            // Next events have T_cnt > F, BC_cnt <= F: additive for ever.
            t >= f
        } else {
            // Next events have T_cnt >= BC_cnt > F: hyper with i = BC_cnt - F for ever.
            t.saturating_add(1) >= bc
        };
        steady.then(|| {
            let next_t = if self.cfg.is_nvidia() {
                t
            } else {
                t.saturating_add(1)
            };
            self.stage_of(next_t, bc)
        })
    }

    /// Applies up to `n` timer events in closed form when the state allows it; returns how many
    /// it applied (0: take one single step instead).
    fn jump_timer_events(&mut self, n: u64) -> u64 {
        let line = self.cfg.line_rate_bps;
        if !self.cfg.is_nvidia() && self.rate_current_bps == line && self.rate_target_bps >= line {
            // Paper mode at line rate: Rt only grows, so Rc = min((Rt + Rc)/2, line) stays at line
            // whatever the stages; only Rt and the counters move.
            let sums = self.paper_timer_increments(n);
            let rate_target = u128::from(self.rate_target_bps).saturating_add(sums.step_sum_bps);
            self.rate_target_bps = u64::try_from(rate_target)
                .unwrap_or(u64::MAX)
                .min(self.cfg.target_rate_cap_bps());
            self.timer_events = self.timer_events.saturating_add(n);
            self.count_stage(IncreaseStage::FastRecovery, sums.fast_recovery);
            self.count_stage(IncreaseStage::Additive, sums.additive);
            self.count_stage(IncreaseStage::Hyper, sums.hyper);
            self.stats.timer_events_total = self.stats.timer_events_total.saturating_add(n);
            return n;
        }
        let Some((stage, step)) = self.steady_timer_step() else {
            return 0;
        };
        let cap = self.cfg.target_rate_cap_bps();
        let (rate_target, rate_current) = (self.rate_target_bps, self.rate_current_bps);
        debug_assert!(
            rate_current <= rate_target,
            "Rc <= Rt outside the line clamp"
        );
        let step_effective = if rate_target >= cap { 0 } else { step };
        // With a constant step a, one event maps the gap d = Rt - Rc to floor((d + a) / 2)
        // (Rt' = Rt + a, Rc' = ceil((Rt' + Rc) / 2) = Rt' - floor((d + a) / 2)). At the fixed point
        // d = floor((d + a)/2) every event just adds a to both rates, until a clamp binds.
        let gap = rate_target.saturating_sub(rate_current);
        let gap_wide = u128::from(gap);
        if gap_wide != (gap_wide + u128::from(step_effective)) / 2 {
            return 0;
        }
        // Events before a clamp binds: Rt + k a <= cap, and Rc = Rt + k a - d <= line.
        let room_target = (cap - rate_target).checked_div(step_effective);
        let room_current = line
            .saturating_add(gap)
            .saturating_sub(rate_target)
            .checked_div(step_effective);
        let events = match (room_target, room_current) {
            (Some(room_target), Some(room_current)) => n.min(room_target).min(room_current),
            // No step and (from the fixed point) no gap: nothing changes any more.
            _ => n,
        };
        if events == 0 {
            return 0;
        }
        // events * step <= cap - Rt, so no overflow.
        self.rate_target_bps = rate_target + events * step_effective;
        self.rate_current_bps = self.rate_target_bps - gap;
        self.timer_events = self.timer_events.saturating_add(events);
        if self.cfg.is_nvidia() {
            self.last_increase = Some(IncreaseCause::Timer);
        }
        self.count_stage(stage, events);
        self.stats.timer_events_total = self.stats.timer_events_total.saturating_add(events);
        events
    }

    /// Paper mode: stage counts and the sum of target-rate steps of the next `n` timer events,
    /// with T_cnt = `timer_events + 1 ..= timer_events + n` and BC_cnt fixed.
    fn paper_timer_increments(&self, n: u64) -> StepSums {
        let f = u128::from(self.cfg.threshold);
        let t0 = u128::from(self.timer_events);
        let bc = u128::from(self.byte_events);
        let n = u128::from(n);
        let ai = u128::from(self.cfg.additive_increase_bps);
        let hai = u128::from(self.cfg.hyper_increase_bps);
        let last = t0 + n;
        // Events with T_cnt <= F.
        let low = f.saturating_sub(t0).min(n);
        let mut sums = StepSums::default();
        if bc <= f {
            sums.fast_recovery = narrow(low);
            sums.additive = narrow(n - low);
            sums.step_sum_bps = (n - low).saturating_mul(ai);
        } else {
            sums.additive = narrow(low);
            let mut step_sum = low.saturating_mul(ai);
            // F < T_cnt <= BC_cnt: i = T_cnt - F grows by one per event.
            let grow_from = t0.max(f); // exclusive
            let grow_to = last.min(bc); // inclusive
            let growing = grow_to.saturating_sub(grow_from);
            if growing > 0 {
                let first_i = grow_from + 1 - f;
                let last_i = grow_to - f;
                let series = (first_i + last_i).saturating_mul(growing) / 2;
                step_sum = step_sum.saturating_add(series.saturating_mul(hai));
            }
            // T_cnt > BC_cnt: i = BC_cnt - F.
            let flat = last.saturating_sub(t0.max(bc));
            step_sum = step_sum.saturating_add(flat.saturating_mul((bc - f).saturating_mul(hai)));
            sums.hyper = narrow(growing + flat);
            sums.step_sum_bps = step_sum;
        }
        sums
    }
}

#[derive(Clone, Copy, Debug, Default)]
struct StepSums {
    step_sum_bps: u128,
    fast_recovery: u64,
    additive: u64,
    hyper: u64,
}

fn narrow(v: u128) -> u64 {
    u64::try_from(v).unwrap_or(u64::MAX)
}

/// `base^exp` by square-and-multiply: at most 128 multiplications, and always the same sequence
/// of IEEE operations for the same `exp`, so results are reproducible bit for bit.
fn pow_u64(base: f64, mut exp: u64) -> f64 {
    let mut result = 1.0;
    let mut square = base;
    while exp > 0 {
        if exp & 1 == 1 {
            result *= square;
        }
        exp >>= 1;
        if exp > 0 {
            square *= square;
        }
    }
    result
}

/// `floor(rate * factor)` for `factor` in [0, 1]; exact conversions since rates are < 2^53.
fn scale_floor(rate_bps: u64, factor: f64) -> u64 {
    let scaled = (rate_bps as f64 * factor.clamp(0.0, 1.0)).floor();
    // `as` saturates; the clamp above keeps the result in [0, rate].
    (scaled as u64).min(rate_bps)
}

fn mul_div_floor(value: u64, numerator: u64, denominator: u64) -> u64 {
    narrow(u128::from(value) * u128::from(numerator) / u128::from(denominator))
}

/// `ceil((a + b) / 2)`. Rounding up lets Rc reach Rt exactly (rounding down would leave it one
/// bit/s short for ever).
fn average_ceil(a: u64, b: u64) -> u64 {
    narrow((u128::from(a) + u128::from(b)).div_ceil(2))
}

#[cfg(test)]
mod tests;
