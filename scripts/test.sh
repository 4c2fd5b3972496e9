#!/usr/bin/env bash
# The one command that runs every check of headroom on a fresh Debian 12 machine.
#
# 1. Installs what the machine lacks (apt packages, cargo tools), non-interactively and idempotently.
# 2. Runs formatting, clippy (with and without DPDK), rustdoc (no broken links), every test
#    (unit, property, conformance, DPDK, root/namespace end-to-end), and a bounded fuzz smoke run.
#
# Tests that need root, network namespaces, tshark or DPDK run here: CI runs as root. A missing tool is
# installed, never skipped. Set HEADROOM_TEST_QUICK=1 to skip the fuzz smoke run during development.
set -euo pipefail
cd "$(dirname "$0")/.."

# Each step says how long the run has taken so far: CI stops at 90 minutes and a clean run should
# stay under 30, so the log shows where the time goes.
started_at=$SECONDS
say() { printf '\n==> [%dm%02ds] %s\n' $(( (SECONDS - started_at) / 60 )) $(( (SECONDS - started_at) % 60 )) "$*"; }

# A one-shot run gains nothing from incremental compilation state, which would add about as much
# to target/ as the build itself (1.7 GiB measured). The disk is shared: CI once failed with
# "No space left on device" in the fuzz build, so say how much room there is before starting.
export CARGO_INCREMENTAL="${CARGO_INCREMENTAL:-0}"
say "disk: $(df -h --output=avail . | tail -1 | tr -d ' ') free here; a clean run writes about 2.9 GiB"

# --- 1. what the machine needs ------------------------------------------------------------------
# One list for scripts/lab.sh and this script (scripts/packages.sh).
source scripts/packages.sh
install_missing_packages "${HEADROOM_LAB_PACKAGES[@]}" "${HEADROOM_BUILD_PACKAGES[@]}" \
    "${HEADROOM_TEST_PACKAGES[@]}" || exit 1

for tool in cargo rustc tshark tcpdump ip pkg-config ping iperf3 ethtool chrt setpriv nstat promtool prometheus lldpad lldptool lldpd lldpcli unshare vtysh; do
    command -v "$tool" >/dev/null || { echo "scripts/test.sh: $tool is still missing after install" >&2; exit 1; }
done
pkg-config --atleast-version=22.11 libdpdk || { echo "scripts/test.sh: DPDK >= 22.11 not found by pkg-config (libdpdk-dev)" >&2; exit 1; }

# --- 2. static checks ----------------------------------------------------------------------------
say "cargo fmt --check"
cargo fmt --all -- --check

say "cargo clippy (default features)"
cargo clippy --workspace --all-targets --locked -- -D warnings

# --- 3. tests ------------------------------------------------------------------------------------
say "cargo doc (workspace, no broken intra-doc links)"
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --locked

say "cargo test (workspace, default features)"
if command -v cargo-nextest >/dev/null; then
    cargo nextest run --workspace --locked --no-fail-fast
    # nextest does not run doctests.
    cargo test --workspace --locked --doc
else
    cargo test --workspace --locked --no-fail-fast
fi

# Swarm testing of the simulator (docs/sim.md, "Swarm testing"): 30 random small scenarios
# (topologies, switch configurations, workloads, faults) through the binary, invariants checked
# (conservation, no lossless drops, XON after XOFF, watchdog detection). A failure prints the
# scenario's seed and `headroom sim --swarm 1 --seed <it>` reproduces it. About 8 s (dev profile).
say "headroom sim --swarm 30 --seed 1"
cargo run -p headroom-cli --locked --quiet -- sim --swarm 30 --seed 1

# --- 3a. memory-ordering model checks (loom) -----------------------------------------------------
# Every cross-thread protocol of the core under loom (crates/core/src/loom_checks.rs, and
# docs/memory-ordering.md for what each check shows when an ordering is weakened). `--cfg loom`
# swaps the core's atomics for loom's, so it builds into its own target dir (the normal build
# above stays valid) with the `loom` profile (optimised, no LTO). Bounded by loom's preemption
# bound: 3 unless LOOM_MAX_PREEMPTIONS says otherwise (measured: about 10 s of checks at 3, on
# top of a build of about 2 minutes).
say "loom model checks (headroom-core, --cfg loom)"
# rustc's warnings are errors here (`-D warnings` reaches only the workspace's crates: cargo caps
# lints of registry dependencies); clippy's lints of the loom-only code are not run, since a
# clippy pass under `--cfg loom` would check every dependency a second time (77 s measured).
RUSTFLAGS="--cfg loom -D warnings" cargo test -p headroom-core --lib --locked --profile loom \
    --target-dir target/loom -- loom_checks

# --- 3b. soak ------------------------------------------------------------------------------------
# Two minutes of the lab soak (scripts/soak.sh: incasts with DCQCN, TCP with ECN, a PFC storm,
# reloads, set/rollback, clears, captures, show pollers; RSS/FD/thread growth, idle occupancy,
# lossless drops and counter monotonicity judged). The binaries are the ones nextest built.
say "soak (2 minutes)"
scripts/soak.sh --minutes 2

# --- 3b. DPDK (cargo feature `dpdk`) --------------------------------------------------------------
# The crates that have a `dpdk` feature, built against the system DPDK (libdpdk-dev, installed
# above): clippy, then their tests. The DPDK tests start EAL without hugepages (--no-huge) and
# put vdevs (net_null, net_ring, net_af_packet, net_af_xdp) on veth pairs in network namespaces:
# they need root, which CI has, and fail rather than skip without it. Each test file is its own
# process with its own EAL and --file-prefix.
dpdk_crates=(headroom-dpdk-sys headroom-dpdk headroom-runtime headroom-cli)
for crate in "${dpdk_crates[@]}"; do
    say "cargo clippy -p $crate --features dpdk"
    cargo clippy -p "$crate" --features dpdk --all-targets --locked -- -D warnings
done
for crate in headroom-dpdk-sys headroom-dpdk; do
    say "cargo test -p $crate --features dpdk"
    cargo test -p "$crate" --features dpdk --locked --no-fail-fast
done
# The runtime's other test files already ran above; they drive the memory and AF_PACKET backends,
# which the feature does not change (it only makes headroom-dpdk's backend real, and the runtime's
# own code has no `cfg(feature)`): its DPDK test files alone, not the whole suite again.
runtime_dpdk_tests=()
for file in crates/runtime/tests/dpdk_*.rs; do
    runtime_dpdk_tests+=(--test "$(basename "$file" .rs)")
done
say "cargo test -p headroom-runtime --features dpdk ${runtime_dpdk_tests[*]}"
cargo test -p headroom-runtime --features dpdk --locked --no-fail-fast "${runtime_dpdk_tests[@]}"
# The binary's end-to-end suite already ran above on AF_PACKET; with DPDK, the lab on vdevs and
# two routers on vdevs (routing_dpdk: about 6 s).
say "cargo test -p headroom-cli --features dpdk --test lab_dpdk --test routing_dpdk"
cargo test -p headroom-cli --features dpdk --locked --no-fail-fast --test lab_dpdk --test routing_dpdk

# --- 4. fuzz smoke -------------------------------------------------------------------------------
if [ "${HEADROOM_TEST_QUICK:-0}" != 1 ] && [ -x scripts/fuzz-smoke.sh ]; then
    say "fuzz smoke run"
    scripts/fuzz-smoke.sh
fi

say "all checks passed"
