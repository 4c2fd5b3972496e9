#!/usr/bin/env bash
# A recorded fuzz campaign: runs each cargo-fuzz target (one at a time, at nice 19 so that other
# work on the machine is not starved) until it has made FUZZ_RUNS executions, starting from the
# committed corpus (fuzz/corpus/<target>) and seeds (fuzz/seeds/<target>), and prints one line per
# target: executions, libFuzzer's coverage (cov: edges, ft: features), corpus size, wall time,
# exit status. Any crash fails the target (the reproducer is left under fuzz/artifacts/<target>/).
#
# New inputs found are written to a scratch corpus (fuzz/corpus-new/<target>, git-ignored), not to
# the committed one; `scripts/fuzz-campaign.sh --cmin` afterwards merges them into the committed
# corpus, minimised (`cargo fuzz cmin`), so that the smoke run starts from what the campaign
# reached.
#
# Environment:
#   FUZZ_RUNS       executions per target (default 10000000)
#   FUZZ_TARGETS    space-separated subset (default: all of `cargo fuzz list`)
#   FUZZ_MAX_HOURS  give up on a target after this long (default 6); the line then says so
#   FUZZ_SANITIZER  address (default) or none
#   FUZZ_LOG_DIR    where each target's libFuzzer log goes (default fuzz/campaign-logs)
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo_root"

runs="${FUZZ_RUNS:-10000000}"
max_seconds=$(( ${FUZZ_MAX_HOURS:-6} * 3600 ))
sanitizer="${FUZZ_SANITIZER:-address}"
log_dir="${FUZZ_LOG_DIR:-fuzz/campaign-logs}"

toolchain=nightly
rustup toolchain list | grep -q '^nightly' || { toolchain="$(sed -n 's/^channel *= *"\(.*\)"/\1/p' rust-toolchain.toml)"; export RUSTC_BOOTSTRAP=1; }
fuzz=(nice -n 19 cargo +"$toolchain" fuzz)

if [[ -n "${FUZZ_TARGETS:-}" ]]; then
    read -r -a targets <<<"$FUZZ_TARGETS"
else
    mapfile -t targets < <(cargo +"$toolchain" fuzz list)
fi

if [[ "${1:-}" == --cmin ]]; then
    for t in "${targets[@]}"; do
        mkdir -p "fuzz/corpus/$t"
        if [[ -d "fuzz/corpus-new/$t" ]]; then
            cp -n "fuzz/corpus-new/$t"/* "fuzz/corpus/$t/" 2>/dev/null || true
        fi
        [[ -d "fuzz/seeds/$t" ]] && cp -n "fuzz/seeds/$t"/* "fuzz/corpus/$t/" 2>/dev/null || true
        before=$(find "fuzz/corpus/$t" -type f | wc -l)
        "${fuzz[@]}" cmin --sanitizer none "$t" "fuzz/corpus/$t" >"/tmp/cmin-$t.log" 2>&1
        after=$(find "fuzz/corpus/$t" -type f | wc -l)
        printf '%-14s corpus %6d -> %5d files, %s\n' "$t" "$before" "$after" "$(du -sh "fuzz/corpus/$t" | cut -f1)"
    done
    exit 0
fi

mkdir -p "$log_dir"
"${fuzz[@]}" build --sanitizer "$sanitizer" >/dev/null
printf '%-14s %12s %7s %7s %7s %9s  %s\n' target executions cov ft corpus seconds result
status=0
for t in "${targets[@]}"; do
    mkdir -p "fuzz/corpus-new/$t" "fuzz/corpus/$t"
    dirs=("fuzz/corpus-new/$t" "fuzz/corpus/$t")
    [[ -d "fuzz/seeds/$t" ]] && dirs+=("fuzz/seeds/$t")
    log="$log_dir/$t.log"
    start=$(date +%s)
    if "${fuzz[@]}" run --sanitizer "$sanitizer" "$t" "${dirs[@]}" -- \
        -runs="$runs" -max_total_time="$max_seconds" -print_final_stats=1 >"$log" 2>&1; then
        result=ok
    else
        result="FAILED (see $log)"
        status=1
    fi
    seconds=$(( $(date +%s) - start ))
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    last=$(grep -E '^#[0-9]+' "$log" | tail -1)
    cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$last")
    ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$last")
    corp=$(sed -n 's/.* corp: \([0-9]*\)\/.*/\1/p' <<<"$last")
    if [[ "$result" == ok && "${execs:-0}" -lt "$runs" ]]; then
        result="stopped at the time limit before $runs executions"
        status=1
    fi
    printf '%-14s %12s %7s %7s %7s %9s  %s\n' "$t" "${execs:-?}" "${cov:-?}" "${ft:-?}" "${corp:-?}" "$seconds" "$result"
done
exit "$status"
