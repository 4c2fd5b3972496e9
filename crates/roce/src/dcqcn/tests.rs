use super::*;
use proptest::prelude::*;

const GBPS: u64 = 1_000_000_000;
const US: u64 = NANOS_PER_MICRO;
const MS: u64 = 1_000 * US;

fn t(nanos: u64) -> Instant {
    Instant::from_nanos(nanos)
}

fn paper(line_rate_bps: u64) -> Rp {
    Rp::new(RpParams::paper(), line_rate_bps, Instant::ZERO).unwrap()
}

fn nvidia(params: NvidiaParams, line_rate_bps: u64) -> Rp {
    Rp::new(RpParams::Nvidia(params), line_rate_bps, Instant::ZERO).unwrap()
}

/// Calls `handle_timeout` at every deadline up to and including `end`, then at `end`.
fn drive_fine(rp: &mut Rp, end: Instant) {
    while let Some(deadline) = rp.poll_timeout().filter(|&d| d <= end) {
        rp.handle_timeout(deadline);
        assert!(
            rp.poll_timeout().is_none_or(|next| next > deadline),
            "deadline must move on"
        );
    }
    rp.handle_timeout(end);
}

// ---- defaults and validation ---------------------------------------------------------------

#[test]
fn default_parameters_match_the_reference() {
    let p = PaperParams::default();
    assert_eq!(p.g, 1.0 / 256.0);
    assert_eq!((p.alpha_timer_ns, p.increase_timer_ns), (55 * US, 55 * US));
    assert_eq!(p.byte_counter_bytes, 10_000_000);
    assert_eq!(p.fast_recovery_threshold, 5);
    assert_eq!(p.additive_increase_bps, 40_000_000);
    assert_eq!(p.hyper_increase_bps, 200_000_000);

    let n = NvidiaParams::default();
    assert_eq!(
        (n.rpg_time_reset, n.rpg_byte_reset, n.rpg_threshold),
        (300, 32_767, 1)
    );
    assert_eq!((n.rpg_ai_rate, n.rpg_hai_rate, n.rpg_gd), (5, 50, 11));
    assert_eq!((n.rpg_min_dec_fac, n.rpg_min_rate), (50, 1));
    assert_eq!(
        (n.dce_tcp_g, n.dce_tcp_rtt, n.rate_reduce_monitor_period),
        (1019, 1, 4)
    );
    assert_eq!(n.initial_alpha_value, 1023);
    assert!(!n.clamp_tgt_rate && n.clamp_tgt_rate_after_time_inc);
    // g effective 5/1024 from dce_tcp_g = 1019; 1020 is HPCC's 1/256.
    let cfg = Config::new(&RpParams::Nvidia(n), 100 * GBPS).unwrap();
    assert_eq!(cfg.g, 5.0 / 1024.0);
    let hpcc = Config::new(
        &RpParams::Nvidia(NvidiaParams::hpcc_ns3(100 * GBPS)),
        100 * GBPS,
    );
    assert_eq!(hpcc.unwrap().g, 1.0 / 256.0);
    let h = NvidiaParams::hpcc_ns3(100 * GBPS);
    assert_eq!(
        (h.rpg_ai_rate, h.rpg_hai_rate),
        (20, 200),
        "run.py: 5*bw/25, 50*bw/25"
    );
}

#[test]
fn bad_parameters_are_refused() {
    let line = 100 * GBPS;
    let paper_with = |f: fn(&mut PaperParams)| {
        let mut p = PaperParams::default();
        f(&mut p);
        Rp::new(RpParams::Paper(p), line, Instant::ZERO).unwrap_err()
    };
    assert_eq!(paper_with(|p| p.g = 1.5), RpParamError::GainOutOfRange);
    assert_eq!(paper_with(|p| p.g = f64::NAN), RpParamError::GainOutOfRange);
    assert_eq!(
        paper_with(|p| p.initial_alpha = -0.1),
        RpParamError::InitialAlphaOutOfRange
    );
    assert_eq!(
        paper_with(|p| p.alpha_timer_ns = 0),
        RpParamError::ZeroPeriod
    );
    assert_eq!(
        paper_with(|p| p.fast_recovery_threshold = THRESHOLD_MAX + 1),
        RpParamError::ThresholdTooLarge
    );
    assert_eq!(
        paper_with(|p| p.hyper_increase_bps = 0),
        RpParamError::ZeroIncrease
    );
    assert_eq!(
        paper_with(|p| p.min_rate_bps = 100 * GBPS + 1),
        RpParamError::MinRateOutOfRange
    );
    assert_eq!(
        Rp::new(RpParams::paper(), 0, Instant::ZERO).unwrap_err(),
        RpParamError::LineRateOutOfRange
    );

    let nvidia_with = |f: fn(&mut NvidiaParams)| {
        let mut p = NvidiaParams::default();
        f(&mut p);
        Rp::new(RpParams::Nvidia(p), line, Instant::ZERO).unwrap_err()
    };
    assert_eq!(
        nvidia_with(|p| p.dce_tcp_g = 1025),
        RpParamError::GainOutOfRange
    );
    assert_eq!(
        nvidia_with(|p| p.initial_alpha_value = 1025),
        RpParamError::InitialAlphaOutOfRange
    );
    assert_eq!(nvidia_with(|p| p.dce_tcp_rtt = 0), RpParamError::ZeroPeriod);
    assert_eq!(nvidia_with(|p| p.rpg_gd = 0), RpParamError::GdOutOfRange);
    assert_eq!(
        nvidia_with(|p| p.rpg_min_dec_fac = 101),
        RpParamError::MinDecreaseFactorOutOfRange
    );
    assert_eq!(
        nvidia_with(|p| p.rpg_min_rate = 0),
        RpParamError::MinRateOutOfRange
    );
}

#[test]
fn idle_before_the_first_cnp() {
    let mut rp = paper(40 * GBPS);
    rp.handle_tx(t(0), 100_000_000);
    rp.handle_timeout(t(10 * MS));
    assert_eq!(rp.poll_timeout(), None);
    assert_eq!(rp.current_rate_bps(), 40 * GBPS);
    assert_eq!(rp.alpha(), 1.0, "no decay before the rate limiter exists");
    assert_eq!(rp.stats().byte_counter_events_total, 0);
    assert_eq!(rp.stats().tx_bytes_total, 100_000_000);
}

// ---- §1.5 closed-form checks -----------------------------------------------------------------

#[test]
fn alpha_half_life_paper_g_1_256() {
    // n = ln 0.5 / ln(1 - 1/256) = 177.1 updates, one per K = 55 us.
    let n = 0.5f64.ln() / (1.0 - 1.0 / 256.0f64).ln();
    assert!((n - 177.1).abs() < 0.05, "{n}");
    let k = 55 * US;
    let mut rp = paper(40 * GBPS);
    rp.handle_cnp(t(0));
    assert_eq!(rp.alpha(), 1.0, "(1-g)*1 + g");
    rp.handle_timeout(t(177 * k));
    assert!(rp.alpha() > 0.5, "{}", rp.alpha());
    rp.handle_timeout(t(178 * k - 1));
    assert!(rp.alpha() > 0.5);
    rp.handle_timeout(t(178 * k));
    assert!(rp.alpha() < 0.5, "{}", rp.alpha());
    // 9.74 ms.
    assert!((n * 55e-3 - 9.74).abs() < 0.01);
}

#[test]
fn alpha_half_life_nvidia_g_5_1024() {
    // n = ln 0.5 / ln(1019/1024) = 141.6 updates = 142 us at dce_tcp_rtt = 1 us.
    let n = 0.5f64.ln() / (1019.0f64 / 1024.0).ln();
    assert!((n - 141.6).abs() < 0.05, "{n}");
    let params = NvidiaParams {
        initial_alpha_value: 1024,
        ..NvidiaParams::default()
    };
    let mut rp = nvidia(params, 100 * GBPS);
    rp.handle_cnp(t(0));
    assert_eq!(rp.alpha(), 1.0);
    rp.handle_timeout(t(141 * US));
    assert!(rp.alpha() > 0.5);
    rp.handle_timeout(t(142 * US - 1));
    assert!(rp.alpha() > 0.5);
    rp.handle_timeout(t(142 * US));
    assert!(rp.alpha() < 0.5, "{}", rp.alpha());
}

#[test]
fn paper_recovery_after_one_cut() {
    let c = 40 * GBPS;
    let period = 55 * US;
    let mut rp = paper(c);
    rp.handle_cnp(t(0));
    assert_eq!(rp.current_rate_bps(), c / 2, "alpha = 1 halves the rate");
    assert_eq!(rp.target_rate_bps(), c);
    for k in 1..=5u32 {
        rp.handle_timeout(t(u64::from(k) * period));
        // Rc = C (1 - 2^-(k+1)), exact in integers for C = 40e9.
        assert_eq!(rp.current_rate_bps(), c - (c >> (k + 1)), "step {k}");
        assert_eq!(rp.target_rate_bps(), c);
    }
    assert_eq!(rp.current_rate_bps() as f64 / c as f64, 0.984_375);
    rp.handle_timeout(t(6 * period - 1));
    assert!((rp.current_rate_bps() as f64) < 0.99 * c as f64);
    rp.handle_timeout(t(6 * period)); // 330 us
    assert!(rp.current_rate_bps() as f64 >= 0.99 * c as f64);
    // Sixth event: T_cnt = 6 > F, BC_cnt = 0: additive; htsim does not clamp Rt.
    assert_eq!(rp.target_rate_bps(), c + 40_000_000);
    assert_eq!(
        rp.current_rate_bps(),
        (c + 40_000_000 + c - (c >> 6)).div_ceil(2)
    );
    let s = rp.stats();
    assert_eq!((s.fast_recovery_total, s.additive_increase_total), (5, 1));
    assert_eq!(
        (s.cnps_total, s.rate_cuts_total, s.hyper_increase_total),
        (1, 1, 0)
    );

    // The same end state when the driver jumps straight to 330 us.
    let mut jump = paper(c);
    jump.handle_cnp(t(0));
    jump.handle_timeout(t(6 * period));
    assert_eq!(jump, rp);
}

#[test]
fn nvidia_recovery_after_one_cut() {
    // Firmware defaults, 100 Gb/s, timer only (no handle_tx, so the byte counter is idle).
    let c = 100 * GBPS;
    let mut rp = nvidia(NvidiaParams::default(), c);
    rp.handle_cnp(t(0));
    let cut_at = 4 * US + 1;
    rp.handle_timeout(t(cut_at));
    let alpha: f64 = 1023.0 / 1024.0 * (1019.0f64 / 1024.0).powi(4);
    let expected = c as f64 * (1.0 - alpha / 2.0);
    assert!((rp.current_rate_bps() as f64 - expected).abs() <= 1.0);
    assert_eq!(
        rp.target_rate_bps(),
        c,
        "no increase before the first cut: Rt kept"
    );
    let timer = 300 * US;
    for k in 1..=5 {
        rp.handle_timeout(t(cut_at + k * timer));
        assert!(
            (rp.current_rate_bps() as f64) < 0.99 * c as f64,
            "event {k}"
        );
        assert_eq!(rp.target_rate_bps(), c, "Rt capped at C");
    }
    rp.handle_timeout(t(cut_at + 6 * timer)); // 1.8 ms after the cut
    assert!(rp.current_rate_bps() as f64 >= 0.99 * c as f64);
    let s = rp.stats();
    // Stage 0: fast recovery; stage 1 = F: additive; stages 2..: hyper.
    assert_eq!(
        (
            s.fast_recovery_total,
            s.additive_increase_total,
            s.hyper_increase_total
        ),
        (1, 1, 4)
    );
}

#[test]
fn nvidia_first_cut_after_four_alpha_decays() {
    // HPCC-ns3 parameters (g = 1/256 = dce_tcp_g 1020, alpha = 1 on the first CNP):
    // Rc = C (1 - (255/256)^4 / 2) = 0.5078 C at 4 us + 1 ns.
    let c = 100 * GBPS;
    let mut rp = nvidia(NvidiaParams::hpcc_ns3(c), c);
    rp.handle_cnp(t(0));
    assert_eq!(rp.poll_timeout(), Some(t(4 * US + 1)));
    rp.handle_timeout(t(4 * US));
    assert_eq!(rp.current_rate_bps(), c, "not cut yet");
    assert_eq!(rp.alpha(), (255.0f64 / 256.0).powi(4));
    rp.handle_timeout(t(4 * US + 1));
    let factor = 1.0 - 4_228_250_625.0 / 8_589_934_592.0; // 255^4 / 2^33, exact
    assert_eq!(rp.current_rate_bps(), (c as f64 * factor).floor() as u64);
    let ratio = rp.current_rate_bps() as f64 / c as f64;
    assert!((ratio - 0.5078).abs() < 0.0001, "{ratio}");
    assert_eq!(rp.stats().rate_cuts_total, 1);
    assert_eq!(rp.poll_timeout(), Some(t(4 * US + 1 + 300 * US)));
}

// ---- mode details ----------------------------------------------------------------------------

#[test]
fn paper_cut_uses_the_old_alpha() {
    let c = 40 * GBPS;
    let params = PaperParams {
        initial_alpha: 0.5,
        ..PaperParams::default()
    };
    let mut rp = Rp::new(RpParams::Paper(params), c, Instant::ZERO).unwrap();
    rp.handle_cnp(t(0));
    assert_eq!(rp.current_rate_bps(), c / 4 * 3, "Rc * (1 - 0.5/2)");
    assert_eq!(rp.alpha(), 0.5 * (255.0 / 256.0) + 1.0 / 256.0);
    // A second CNP after exactly 2 alpha periods cuts with the decayed alpha.
    let alpha_before = rp.alpha() * (255.0f64 / 256.0) * (255.0 / 256.0);
    let rate_before = rp.current_rate_bps();
    rp.handle_cnp(t(110 * US));
    // Two increase events (fast recovery) ran first.
    let rate_after_increase = {
        let r1 = (c + rate_before).div_ceil(2);
        (c + r1).div_ceil(2)
    };
    assert_eq!(rp.target_rate_bps(), rate_after_increase);
    assert_eq!(
        rp.current_rate_bps(),
        (rate_after_increase as f64 * (1.0 - alpha_before / 2.0)).floor() as u64
    );
}

#[test]
fn paper_byte_counter_and_hyper_increase() {
    let c = 40 * GBPS;
    let params = PaperParams {
        byte_counter_bytes: 1_000,
        increase_timer_ns: MS,
        ..PaperParams::default()
    };
    let mut rp = Rp::new(RpParams::Paper(params), c, Instant::ZERO).unwrap();
    rp.handle_cnp(t(0));
    // Half a counter does nothing; the counter restarts after each event.
    rp.handle_tx(t(1), 500);
    assert_eq!(rp.stats().byte_counter_events_total, 0);
    rp.handle_tx(t(1), 500);
    for _ in 0..6 {
        rp.handle_tx(t(1), 1_000);
    }
    // BC_cnt 1..=5 fast recovery, 6 and 7 additive (T_cnt = 0 <= F).
    let s = *rp.stats();
    assert_eq!(s.byte_counter_events_total, 7);
    assert_eq!((s.fast_recovery_total, s.additive_increase_total), (5, 2));
    // Timer events T_cnt = 1..=5: additive (BC_cnt = 7 > F, T_cnt <= F); T_cnt = 6: hyper, i = 1.
    rp.handle_timeout(t(6 * MS));
    let s = *rp.stats();
    assert_eq!((s.additive_increase_total, s.hyper_increase_total), (7, 1));
    // BC_cnt = 8, T_cnt = 6: hyper with i = min(6, 8) - 5 = 1.
    let rt = rp.target_rate_bps();
    rp.handle_tx(t(6 * MS + 1), 1_000);
    assert_eq!(rp.target_rate_bps(), rt + 200_000_000);
    // T_cnt = 7, BC_cnt = 8: i = 2.
    let rt = rp.target_rate_bps();
    rp.handle_timeout(t(7 * MS));
    assert_eq!(rp.target_rate_bps(), rt + 2 * 200_000_000);
    // T_cnt = 8, 9, 10: i = min(T, 8) - 5 = 3 each time.
    let rt = rp.target_rate_bps();
    rp.handle_timeout(t(10 * MS));
    assert_eq!(rp.target_rate_bps(), rt + 3 * 3 * 200_000_000);
}

/// The closed form at line rate in paper mode, through every hyper-increase shape: additive while
/// T_cnt <= F < BC_cnt, growing i = T_cnt - F while T_cnt <= BC_cnt, then flat i = BC_cnt - F.
#[test]
fn paper_at_line_closed_form_through_growing_hyper_increase() {
    let c = 40 * GBPS;
    let params = PaperParams {
        byte_counter_bytes: 1_000,
        ..PaperParams::default()
    };
    let mut rp = Rp::new(RpParams::Paper(params), c, Instant::ZERO).unwrap();
    rp.handle_cnp(t(0));
    for _ in 0..50 {
        rp.handle_tx(t(1), 1_000);
    }
    assert_eq!(
        rp.current_rate_bps(),
        c,
        "45 additive steps reach line rate"
    );
    let rt = rp.target_rate_bps();
    let mut stepwise = rp.clone();
    stepwise.stepwise = true;
    let end = t(100 * 55 * US);
    rp.handle_timeout(end);
    stepwise.handle_timeout(end);
    // T_cnt 1..=5: R_AI; 6..=50: i = T_cnt - 5 (1..=45); 51..=100: i = 45.
    let hai = 200_000_000;
    let expected = rt + 5 * 40_000_000 + (45 * 46 / 2) * hai + 50 * 45 * hai;
    assert_eq!(rp.target_rate_bps(), expected);
    stepwise.stepwise = false;
    assert_eq!(rp, stepwise);
    for (bc, jump_events) in [(3u64, 2u64), (6, 1), (6, 7), (9, 4), (20, 15), (20, 300)] {
        let mut rp = Rp::new(RpParams::Paper(params), c, Instant::ZERO).unwrap();
        rp.handle_cnp(t(0));
        rp.handle_timeout(t(3 * 55 * US)); // T_cnt = 3
        for _ in 0..bc {
            rp.handle_tx(t(3 * 55 * US), 1_000);
        }
        let mut stepwise = rp.clone();
        stepwise.stepwise = true;
        let end = t((3 + jump_events) * 55 * US);
        rp.handle_timeout(end);
        stepwise.handle_timeout(end);
        stepwise.stepwise = false;
        assert_eq!(rp, stepwise, "bc {bc}, {jump_events} events");
    }
}

#[test]
fn paper_clamped_target_rate_stays_at_line() {
    let c = 10 * GBPS;
    let params = PaperParams {
        clamp_target_rate_to_line: true,
        ..PaperParams::default()
    };
    let mut rp = Rp::new(RpParams::Paper(params), c, Instant::ZERO).unwrap();
    rp.handle_cnp(t(0));
    rp.handle_timeout(t(100 * MS));
    assert_eq!((rp.current_rate_bps(), rp.target_rate_bps()), (c, c));
    assert_eq!(rp.poll_timeout(), None, "settled at line rate");
}

#[test]
fn nvidia_cuts_at_most_once_per_period() {
    let c = 100 * GBPS;
    let mut rp = nvidia(NvidiaParams::hpcc_ns3(c), c);
    for at in [0, US, 2 * US, 3 * US + 500] {
        rp.handle_cnp(t(at));
    }
    rp.handle_timeout(t(8 * US));
    assert_eq!(rp.stats().cnps_total, 4);
    assert_eq!(rp.stats().rate_cuts_total, 1);
    // A CNP exactly on a check instant is handled by the next check.
    rp.handle_cnp(t(8 * US + 1));
    assert_eq!(rp.poll_timeout(), Some(t(12 * US + 1)));
    rp.handle_timeout(t(12 * US));
    assert_eq!(rp.stats().rate_cuts_total, 1);
    rp.handle_timeout(t(12 * US + 1));
    assert_eq!(rp.stats().rate_cuts_total, 2);
    // No CNP, no cut.
    rp.handle_timeout(t(40 * US));
    assert_eq!(rp.stats().rate_cuts_total, 2);
}

#[test]
fn nvidia_later_cnp_adds_g_at_the_next_alpha_tick() {
    let c = 100 * GBPS;
    let mut rp = nvidia(NvidiaParams::hpcc_ns3(c), c);
    let x = 255.0f64 / 256.0;
    let g = 1.0 / 256.0;
    rp.handle_cnp(t(0));
    rp.handle_cnp(t(1_500));
    rp.handle_timeout(t(1_999));
    assert_eq!(
        rp.alpha(),
        x,
        "tick 1: plain decay (the first CNP adds nothing)"
    );
    rp.handle_timeout(t(2 * US));
    let alpha2 = x * x + g;
    assert_eq!(rp.alpha(), alpha2, "tick 2: (1-g) alpha + g");
    rp.handle_timeout(t(3 * US));
    assert_eq!(rp.alpha(), alpha2 * x);
}

#[test]
fn nvidia_min_dec_fac_bounds_a_cut() {
    let c = 100 * GBPS;
    let params = NvidiaParams {
        rpg_gd: 10, // cut = 1 - alpha: would go to ~0
        initial_alpha_value: 1024,
        dce_tcp_g: 1024, // alpha frozen at 1
        ..NvidiaParams::default()
    };
    let mut rp = nvidia(params, c);
    rp.handle_cnp(t(0));
    rp.handle_timeout(t(5 * US));
    assert_eq!(rp.current_rate_bps(), c / 2, "rpg_min_dec_fac = 50 %");
    let unbounded = NvidiaParams {
        rpg_min_dec_fac: 0,
        ..params
    };
    let mut rp = nvidia(unbounded, c);
    rp.handle_cnp(t(0));
    rp.handle_timeout(t(5 * US));
    assert_eq!(rp.current_rate_bps(), BPS_PER_MBPS, "down to rpg_min_rate");
}

#[test]
fn nvidia_target_clamp_rules() {
    let c = 100 * GBPS;
    let base = NvidiaParams {
        rpg_byte_reset: 0,
        ..NvidiaParams::hpcc_ns3(c)
    };
    // Two cuts with no increase between them: Rt is kept (HPCC `m_rpTimeStage == 0`).
    let mut rp = nvidia(base, c);
    rp.handle_cnp(t(0));
    rp.handle_cnp(t(5 * US));
    rp.handle_timeout(t(9 * US));
    assert_eq!(rp.stats().rate_cuts_total, 2);
    assert_eq!(rp.target_rate_bps(), c);
    // With clamp_tgt_rate, every cut sets Rt = Rc.
    let mut rp = nvidia(
        NvidiaParams {
            clamp_tgt_rate: true,
            ..base
        },
        c,
    );
    rp.handle_cnp(t(0));
    rp.handle_timeout(t(5 * US));
    let rc_after_first = rp.current_rate_bps();
    rp.handle_cnp(t(6 * US));
    rp.handle_timeout(t(9 * US));
    assert_eq!(rp.target_rate_bps(), rc_after_first);
    // After a timer increase, the ati rule clamps; without it Rt is kept.
    for ati in [true, false] {
        let mut rp = nvidia(
            NvidiaParams {
                clamp_tgt_rate_after_time_inc: ati,
                ..base
            },
            c,
        );
        rp.handle_cnp(t(0));
        rp.handle_timeout(t(4 * US + 1 + 300 * US));
        assert_eq!(rp.stats().timer_events_total, 1);
        let rc = rp.current_rate_bps();
        rp.handle_cnp(t(305 * US));
        rp.handle_timeout(t(310 * US));
        assert_eq!(rp.stats().rate_cuts_total, 2);
        assert_eq!(
            rp.target_rate_bps(),
            if ati { rc } else { c },
            "ati = {ati}"
        );
    }
}

#[test]
fn nvidia_increase_runs_before_a_check_at_the_same_instant() {
    // Increase expiries are at cut + k * 300 us, which is also on the 4 us check grid.
    let c = 100 * GBPS;
    let mut rp = nvidia(NvidiaParams::hpcc_ns3(c), c);
    rp.handle_cnp(t(0));
    let cut_at = 4 * US + 1;
    rp.handle_cnp(t(cut_at + 298 * US));
    assert_eq!(rp.poll_timeout(), Some(t(cut_at + 300 * US)));
    rp.handle_timeout(t(cut_at + 300 * US));
    let s = rp.stats();
    assert_eq!((s.timer_events_total, s.rate_cuts_total), (1, 2));
    // The increase ran first, so the cut clamped Rt to the increased Rc (stage != 0).
    assert!(rp.target_rate_bps() < c);
}

#[test]
fn nvidia_byte_counter_advances_the_stage() {
    let c = 100 * GBPS;
    let mut rp = nvidia(NvidiaParams::default(), c);
    rp.handle_cnp(t(0));
    rp.handle_tx(t(1), 40_000); // before the first cut: the increase machine is not running
    assert_eq!(rp.stats().byte_counter_events_total, 0);
    rp.handle_timeout(t(5 * US));
    rp.handle_tx(t(5 * US), 32_767); // stage 0: fast recovery
    rp.handle_tx(t(5 * US), 32_767); // stage 1 = F: additive
    rp.handle_tx(t(5 * US), 32_767); // stage 2: hyper
    let s = rp.stats();
    assert_eq!(s.byte_counter_events_total, 3);
    assert_eq!(
        (
            s.fast_recovery_total,
            s.additive_increase_total,
            s.hyper_increase_total
        ),
        (1, 1, 1)
    );
    // A cut after a byte-counter increase always clamps Rt.
    let rc = rp.current_rate_bps();
    rp.handle_cnp(t(6 * US));
    rp.handle_timeout(t(9 * US));
    assert_eq!(rp.target_rate_bps(), rc);
}

#[test]
fn repeated_cnps_stop_at_the_minimum_rate() {
    let c = 40 * GBPS;
    let mut rp = paper(c);
    for k in 0..10_000 {
        rp.handle_cnp(t(k * US));
        assert!(rp.current_rate_bps() >= 100 * BPS_PER_MBPS);
    }
    assert_eq!(rp.current_rate_bps(), 100 * BPS_PER_MBPS);
    assert!(rp.alpha() > 0.99);
}

// ---- bounded catch-up and path independence -------------------------------------------------

#[test]
fn one_hour_jump_is_exact_and_cheap_paper() {
    let c = 40 * GBPS;
    let mut rp = paper(c);
    rp.handle_cnp(t(0));
    let hour = 3_600 * 1_000 * MS;
    rp.handle_timeout(t(hour));
    let events = hour / (55 * US);
    let s = rp.stats();
    assert_eq!(s.timer_events_total, events);
    assert_eq!(s.catch_up_skipped_events_total, 0);
    assert_eq!(rp.current_rate_bps(), c);
    // 5 fast-recovery events, then additive for ever (BC_cnt = 0 <= F): Rt = C + (n - 5) R_AI.
    assert_eq!(rp.target_rate_bps(), c + (events - 5) * 40_000_000);
    assert_eq!(
        (s.fast_recovery_total, s.additive_increase_total),
        (5, events - 5)
    );
    assert_eq!(rp.alpha(), 0.0, "decayed to nothing (underflow)");
    assert_eq!(rp.poll_timeout(), None);
}

#[test]
fn one_hour_jump_is_exact_and_cheap_nvidia() {
    let c = 400 * GBPS;
    let params = NvidiaParams {
        rpg_min_rate: 1,
        ..NvidiaParams::hpcc_ns3(c)
    };
    let mut rp = nvidia(params, c);
    // Drive the rate to the floor first: a CNP every 4 us for 2 ms.
    for k in 0..500 {
        rp.handle_cnp(t(k * 4 * US));
    }
    rp.handle_timeout(t(2 * MS + 2));
    assert_eq!(rp.current_rate_bps(), BPS_PER_MBPS);
    let last_cut = t(1_996 * US + 1);
    let hour = 3_600 * 1_000 * MS;
    let mut coarse = rp.clone();
    coarse.handle_timeout(t(hour));
    assert_eq!(coarse.current_rate_bps(), c);
    assert_eq!(coarse.target_rate_bps(), c);
    let events = (hour - last_cut.as_nanos()) / (300 * US);
    assert_eq!(coarse.stats().timer_events_total, events);
    assert_eq!(coarse.stats().catch_up_skipped_events_total, 0);
    // The same state when every expiry is handled one by one (1 s: ~3300 events).
    let mut fine = rp.clone();
    drive_fine(&mut fine, t(1_000 * MS));
    let mut coarse_1s = rp;
    coarse_1s.handle_timeout(t(1_000 * MS));
    assert_eq!(fine, coarse_1s);
}

#[test]
fn pathological_parameters_hit_the_catch_up_budget() {
    // 1 bit/s steps on a 1 Pb/s link, with the byte counter far ahead of the timer: the paper
    // stage stays in growing hyper increase for ~100000 timer events.
    let params = PaperParams {
        additive_increase_bps: 1,
        hyper_increase_bps: 1,
        min_rate_bps: 1,
        byte_counter_bytes: 1,
        ..PaperParams::default()
    };
    let line = LINE_RATE_MAX_BPS;
    let mut rp = Rp::new(RpParams::Paper(params), line, Instant::ZERO).unwrap();
    for k in 0..60 {
        rp.handle_cnp(t(k)); // down to ~1 bit/s
    }
    for _ in 0..100_000 {
        rp.handle_tx(t(100), 1);
    }
    rp.handle_timeout(t(3_600 * 1_000 * MS));
    let s = rp.stats();
    assert!(s.catch_up_skipped_events_total > 0);
    assert!(u64::from(CATCH_UP_STEPS_MAX) <= s.timer_events_total);
    assert!(rp.current_rate_bps() >= 1 && rp.current_rate_bps() <= line);
}

#[derive(Clone, Copy, Debug)]
enum Op {
    Cnp(u64),
    Tx(u64, u64),
    Timeout(u64),
}

fn op_strategy() -> impl Strategy<Value = Op> {
    let dt = prop_oneof![
        8 => 0u64..20 * US,
        3 => 0u64..2 * MS,
        1 => 0u64..50 * MS,
    ];
    prop_oneof![
        3 => dt.clone().prop_map(Op::Cnp),
        3 => (dt.clone(), 1u64..70_000).prop_map(|(d, b)| Op::Tx(d, b)),
        2 => dt.prop_map(Op::Timeout),
    ]
}

fn params_strategy() -> impl Strategy<Value = (RpParams, u64)> {
    let line = prop::sample::select(vec![
        10 * GBPS,
        25 * GBPS,
        40 * GBPS,
        100 * GBPS,
        400 * GBPS,
    ]);
    let mode = prop_oneof![
        Just(0u8), // paper
        Just(1),   // paper, small byte counter and clamped Rt
        Just(2),   // nvidia firmware defaults
        Just(3),   // hpcc-ns3
        Just(4),   // paper, byte counter far faster than the timer, unclamped Rt
        Just(5),   // nvidia, F = 3 and a fast byte counter
    ];
    (mode, line).prop_map(|(mode, line)| {
        let params = match mode {
            0 => RpParams::paper(),
            1 => RpParams::Paper(PaperParams {
                byte_counter_bytes: 64_000,
                clamp_target_rate_to_line: true,
                ..PaperParams::default()
            }),
            2 => RpParams::nvidia(),
            4 => RpParams::Paper(PaperParams {
                byte_counter_bytes: 4_000,
                increase_timer_ns: 200 * US,
                ..PaperParams::default()
            }),
            5 => RpParams::Nvidia(NvidiaParams {
                rpg_threshold: 3,
                rpg_byte_reset: 4_000,
                rpg_ai_rate: 40,
                rpg_hai_rate: 400,
                ..NvidiaParams::default()
            }),
            _ => RpParams::Nvidia(NvidiaParams::hpcc_ns3(line)),
        };
        (params, line)
    })
}

fn check_bounds(rp: &Rp) {
    let rc = rp.current_rate_bps();
    assert!(
        rc >= rp.min_rate_bps() && rc <= rp.line_rate_bps(),
        "Rc {rc}"
    );
    assert!(rc <= rp.target_rate_bps(), "Rc <= Rt");
    let alpha = rp.alpha();
    assert!((0.0..=1.0).contains(&alpha), "alpha {alpha}");
    if let Some(deadline) = rp.poll_timeout() {
        assert!(deadline > rp.now_last, "no expiry left behind");
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    /// Rates stay in [min_rate, line_rate] with Rc <= Rt, alpha in [0, 1], and the state does not
    /// depend on how often the driver calls: calling only on inputs, or also at every deadline,
    /// gives bit-identical state; and the closed-form catch-up gives exactly the state of applying
    /// every increase event one at a time.
    #[test]
    fn bounds_and_path_independence(
        (params, line) in params_strategy(),
        ops in prop::collection::vec(op_strategy(), 1..60),
    ) {
        let mut coarse = Rp::new(params, line, Instant::ZERO).unwrap();
        let mut fine = coarse.clone();
        let mut stepwise = coarse.clone();
        stepwise.stepwise = true;
        let mut now = 0u64;
        let mut last_rate = coarse.current_rate_bps();
        for op in ops {
            let (Op::Cnp(dt) | Op::Tx(dt, _) | Op::Timeout(dt)) = op;
            let apply = |rp: &mut Rp, at: Instant| match op {
                Op::Cnp(_) => rp.handle_cnp(at),
                Op::Tx(_, bytes) => rp.handle_tx(at, bytes),
                Op::Timeout(_) => rp.handle_timeout(at),
            };
            now += dt;
            let at = t(now);
            // Between inputs the rate only rises, unless a pending NVIDIA cut fires.
            let mut probe = coarse.clone();
            probe.handle_timeout(at);
            let cut_fired = probe.stats().rate_cuts_total > coarse.stats().rate_cuts_total;
            prop_assert!(cut_fired || probe.current_rate_bps() >= last_rate);
            apply(&mut coarse, at);
            apply(&mut stepwise, at);
            // Stop just before `at` so that the input itself arrives at `at` for both.
            if now > 0 {
                drive_fine(&mut fine, t(now - 1));
            }
            apply(&mut fine, at);
            check_bounds(&coarse);
            prop_assert_eq!(&coarse, &fine);
            let mut oracle = stepwise.clone();
            oracle.stepwise = false;
            prop_assert_eq!(&coarse, &oracle, "closed form differs from one event at a time");
            last_rate = coarse.current_rate_bps();
        }
    }
}
