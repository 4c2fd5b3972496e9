//! `headroom sim --swarm N --seed S` through the binary: every scenario's line names its seed,
//! `--swarm 1 --seed <that seed>` runs that scenario again with the same outcome, and bad
//! arguments exit 2 (docs/sim.md, "Swarm testing").

use std::process::{Command, Output};

fn headroom(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_headroom"))
        .args(args)
        .output()
        .expect("run headroom")
}

/// The scenario lines (`ok` or `FAIL`), without their index in the swarm.
fn outcomes(out: &Output) -> Vec<(String, String)> {
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.starts_with("ok ") || l.starts_with("FAIL "))
        .map(|l| {
            let rest = l.split_once(" seed ").expect("a seed on every line").1;
            let (seed, outcome) = rest.split_once(": ").expect("seed: outcome");
            (seed.to_owned(), outcome.to_owned())
        })
        .collect()
}

#[test]
fn a_swarm_names_each_seed_and_one_seed_reproduces_its_scenario() {
    let out = headroom(&["sim", "--swarm", "3", "--seed", "5"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let all = outcomes(&out);
    assert_eq!(all.len(), 3, "{stdout}");
    assert_eq!(all[0].0, "5", "the first scenario's seed is the swarm's");
    assert!(stdout.contains("3 passed, 0 failed"), "{stdout}");
    let again = headroom(&["sim", "--swarm", "1", "--seed", &all[2].0]);
    assert!(again.status.success());
    assert_eq!(
        outcomes(&again),
        vec![all[2].clone()],
        "the same scenario, the same outcome"
    );
}

#[test]
fn bad_swarm_arguments_exit_2() {
    for args in [
        &["sim", "--swarm", "0"][..],
        &["sim", "--swarm", "many"],
        &["sim", "--swarm", "2", "scenario.toml"],
        &["sim", "--swarm", "2", "--out", "dir"],
        &["sim"],
    ] {
        let out = headroom(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
    }
}
