#!/usr/bin/env bash
# Fuzz smoke test for headroom's parsers (fuzz/fuzz_targets/*.rs: the wire parsers, the
# configuration loader, the control protocol, rocegen's out-of-band exchange).
#
# Installs cargo-fuzz if it is missing, builds every target, then runs each one for a bounded time,
# starting from the committed corpus (fuzz/corpus/<target>: what the recorded campaigns reached,
# minimised, see docs/reliability.md), the committed seeds (fuzz/seeds/<target>, real frames and
# the ICRC vectors) and the local scratch corpus (fuzz/corpus-new/<target>, git-ignored, where new
# inputs go). Any crash, panic or sanitizer report fails the script; libFuzzer then leaves the
# reproducer under fuzz/artifacts/<target>/.
#
# cargo-fuzz needs nightly-only rustc flags (-Zsanitizer, sancov passes). The script uses a nightly
# toolchain when `rustup toolchain list` shows one; otherwise it uses the pinned stable toolchain
# (rust-toolchain.toml) with RUSTC_BOOTSTRAP=1, which unlocks those flags on stable.
#
# Environment:
#   FUZZ_SECONDS    seconds per target (default 15)
#   FUZZ_JOBS       targets run at once (default: the number of CPUs)
#   FUZZ_TARGETS    space-separated subset of targets (default: all of `cargo fuzz list`)
#   FUZZ_TOOLCHAIN  force "nightly" or "stable" instead of auto-detecting
#   FUZZ_SANITIZER  address (default) or none
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo_root"

seconds="${FUZZ_SECONDS:-15}"
sanitizer="${FUZZ_SANITIZER:-address}"

log() { printf '==> %s\n' "$*"; }
run() { printf '+ %s\n' "$*"; "$@"; }

if ! command -v rustup >/dev/null 2>&1; then
    echo "fuzz-smoke: rustup is required (to select a toolchain)" >&2
    exit 1
fi

pinned="$(sed -n 's/^channel *= *"\(.*\)"/\1/p' rust-toolchain.toml 2>/dev/null | head -n1)"
pinned="${pinned:-stable}"

toolchain_kind="${FUZZ_TOOLCHAIN:-}"
if [[ -z "$toolchain_kind" ]]; then
    if rustup toolchain list | grep -q '^nightly'; then
        toolchain_kind=nightly
    else
        toolchain_kind=stable
    fi
fi

case "$toolchain_kind" in
    nightly)
        toolchain=nightly
        unset RUSTC_BOOTSTRAP
        ;;
    stable)
        toolchain="$pinned"
        export RUSTC_BOOTSTRAP=1
        ;;
    *)
        echo "fuzz-smoke: FUZZ_TOOLCHAIN must be nightly or stable, not '$toolchain_kind'" >&2
        exit 1
        ;;
esac

if ! cargo fuzz --version >/dev/null 2>&1; then
    log "cargo-fuzz not found: installing it"
    run cargo +"$pinned" install cargo-fuzz --locked
fi

log "cargo-fuzz: $(cargo fuzz --version)"
log "toolchain: +$toolchain ($(rustc +"$toolchain" --version))${RUSTC_BOOTSTRAP:+ with RUSTC_BOOTSTRAP=$RUSTC_BOOTSTRAP}"
log "sanitizer: $sanitizer; ${seconds}s per target"

# The explicit +toolchain overrides rust-toolchain.toml, which pins the stable channel.
fuzz=(cargo +"$toolchain" fuzz)

if [[ -n "${FUZZ_TARGETS:-}" ]]; then
    read -r -a targets <<<"$FUZZ_TARGETS"
else
    mapfile -t targets < <("${fuzz[@]}" list)
fi
if [[ ${#targets[@]} -eq 0 ]]; then
    echo "fuzz-smoke: no fuzz targets found" >&2
    exit 1
fi
log "targets: ${targets[*]}"

log "building all targets"
run "${fuzz[@]}" build --sanitizer "$sanitizer"

# Targets run side by side, FUZZ_JOBS at a time (default: one per CPU), each for the full
# `seconds`: the smoke run's wall time drops by that factor while every target keeps its budget.
# Each target's output goes to its own log, printed whole when it ends, so logs never interleave.
jobs="${FUZZ_JOBS:-$(nproc)}"
[[ "$jobs" =~ ^[1-9][0-9]*$ ]] || { echo "fuzz-smoke: FUZZ_JOBS must be a whole number >= 1" >&2; exit 1; }
logs="$(mktemp -d)"
trap 'rm -rf "$logs"' EXIT

run_target() {
    local target="$1" scratch="fuzz/corpus-new/$1" corpus="fuzz/corpus/$1" seeds="fuzz/seeds/$1"
    mkdir -p "$scratch"
    local dirs=("$scratch")
    [[ -d "$corpus" ]] && dirs+=("$corpus")
    [[ -d "$seeds" ]] && dirs+=("$seeds")
    {
        log "running $target for ${seconds}s"
        run "${fuzz[@]}" run --sanitizer "$sanitizer" "$target" "${dirs[@]}" -- \
            -max_total_time="$seconds" -print_final_stats=1
    } >"$logs/$target.log" 2>&1
}

failed=()
declare -A pid_of=()
finish() {
    local target="$1"
    if wait "${pid_of[$target]}"; then
        cat "$logs/$target.log"
        log "$target: OK"
    else
        cat "$logs/$target.log"
        log "$target: FAILED (reproducer in fuzz/artifacts/$target/)"
        failed+=("$target")
    fi
    unset "pid_of[$target]"
}
running=()
for target in "${targets[@]}"; do
    if [[ ${#running[@]} -ge $jobs ]]; then
        finish "${running[0]}"
        running=("${running[@]:1}")
    fi
    run_target "$target" &
    pid_of[$target]=$!
    running+=("$target")
done
for target in "${running[@]}"; do
    finish "$target"
done

if [[ ${#failed[@]} -gt 0 ]]; then
    log "fuzz smoke FAILED: ${failed[*]}"
    exit 1
fi
log "fuzz smoke passed: ${#targets[@]} targets, ${seconds}s each"
