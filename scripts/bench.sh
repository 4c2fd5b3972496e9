#!/usr/bin/env bash
# Benchmarks of headroom, with a summary. Not part of the test suite (scripts/test.sh).
#
# Usage: scripts/bench.sh [SECTION...]        (default: every section)
#
# Sections:
#   core         criterion: ns/packet of the core's full per-packet path and of a baseline that
#                moves the same frames through the same rings with no QoS work, and the ratio of
#                the two measured in the same run (crates/core/benches/pipeline.rs).
#   core-instr   callgrind: instructions per packet of the same two rigs. Exact and independent of
#                the machine's load (slow: about a minute).
# A later benchmark (AF_PACKET vs the Linux bridge, DPDK vs testpmd) is a new `section_<name>`
# function below plus its name in `sections`; each section prints its own summary table.
#
# The build machine is shared and noisy: absolute times move with other people's builds, so only
# ratios within one run mean something. BENCH_RUNS=n repeats the core section n times so that the
# spread of the ratio shows.
#
# Environment:
#   BENCH_MEASUREMENT_S  criterion measurement time per benchmark, seconds (default 3)
#   BENCH_WARMUP_S       criterion warm-up time per benchmark, seconds (default 1)
#   BENCH_RUNS           how many times the core section runs (default 1)
#   BENCH_ROUNDS         rounds of 128 frames per rig under callgrind (default 2000)
set -euo pipefail
cd "$(dirname "$0")/.."

sections=(core core-instr)
measurement_s=${BENCH_MEASUREMENT_S:-3}
warmup_s=${BENCH_WARMUP_S:-1}
runs=${BENCH_RUNS:-1}
rounds=${BENCH_ROUNDS:-2000}
frames_per_round=128
# The aim of the core benchmark (issue: ≤ 40 ns/packet at 64 B and ≤ 1.5× the baseline).
aim_ns=40
aim_ratio=1.5

say() { printf '\n==> %s\n' "$*"; }
need() { command -v "$1" >/dev/null || { echo "scripts/bench.sh: $1 is needed ($2)" >&2; exit 1; }; }

need cargo "the Rust toolchain"
need jq "apt-get install jq"
target_dir=$(cargo metadata --format-version 1 --no-deps | jq -r .target_directory)

machine() {
    local cpu
    cpu=$(awk -F': ' '/^model name/ {print $2; exit}' /proc/cpuinfo)
    echo "machine: $(nproc) CPU ($cpu), $(uname -r)"
    echo "toolchain: $(rustc -V)"
    echo "load average (1/5/15 min): $(cut -d' ' -f1-3 /proc/loadavg)"
}

# The pipeline bench executable, built with the bench profile.
core_bench_exe() {
    cargo bench -p headroom-core --bench pipeline --no-run --message-format=json 2>/dev/null |
        jq -r 'select(.reason == "compiler-artifact" and .target.name == "pipeline" and .executable != null) | .executable' |
        tail -n1
}

# The value of `key=value` named $1 in the line $2.
field() { sed -n "s/.*\b$1=\([^ ]*\).*/\1/p" <<<"$2"; }

# Median ns per element of a criterion benchmark `$1` (e.g. per_packet/headroom/64).
criterion_ns_per_element() {
    local dir="$target_dir/criterion/$1/new"
    jq -n --slurpfile e "$dir/estimates.json" --slurpfile b "$dir/benchmark.json" \
        '$e[0].median.point_estimate / $b[0].throughput.Elements'
}

section_core() {
    say "core: per-packet path vs baseline (criterion, ${measurement_s}s per benchmark)"
    machine
    local run
    for ((run = 1; run <= runs; run++)); do
        cargo bench -p headroom-core --bench pipeline -- \
            --warm-up-time "$warmup_s" --measurement-time "$measurement_s" >&2
        echo
        echo "run $run/$runs, load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
        printf '%-8s %14s %14s %8s   %s\n' frame "baseline ns/p" "headroom ns/p" ratio "aim: <= ${aim_ns} ns/p at 64 B, <= ${aim_ratio}x"
        local len base head ratio verdict
        for len in 64 1024; do
            base=$(criterion_ns_per_element "per_packet/baseline/$len")
            head=$(criterion_ns_per_element "per_packet/headroom/$len")
            ratio=$(jq -n "$head / $base")
            verdict=$(jq -nr --argjson h "$head" --argjson r "$ratio" --argjson len "$len" \
                "if (\$len != 64 or \$h <= $aim_ns) and \$r <= $aim_ratio then \"met\" else \"NOT met\" end")
            printf '%-8s %14.1f %14.1f %7.2fx   %s\n' "$len B" "$base" "$head" "$ratio" "$verdict"
        done
        echo
        echo "interleaved (batches of 16 rounds alternating between the rigs, ${measurement_s}s, medians):"
        local exe line
        exe=$(core_bench_exe)
        for len in 64 1024; do
            # One line: len=64 baseline_ns=44.60 headroom_ns=96.39 ratio=2.160 pairs=7145
            line=$(HEADROOM_BENCH_RATIO="$len/$measurement_s" "$exe" 2>/dev/null | grep '^len=')
            printf '%-8s %14.1f %14.1f %7.2fx   (%s pairs)\n' "$len B" \
                "$(field baseline_ns "$line")" "$(field headroom_ns "$line")" \
                "$(field ratio "$line")" "$(field pairs "$line")"
        done
        echo
        printf '%-34s %10s\n' "stage (64 B, one burst of 32)" "ns/frame"
        local part
        for part in parse_l2 fdb_learn_lookup ingress_admit_update_release egress_admit_release \
            wred_decide dwrr_pick pool_receive_drop local_free_list_receive_drop rtrb_push_pop_56B; do
            printf '%-34s %10.1f\n' "$part" "$(criterion_ns_per_element "parts/$part")"
        done
    done
}

section_core_instr() {
    say "core: instructions per packet (callgrind, $rounds rounds of $frames_per_round frames per rig)"
    need valgrind "apt-get install valgrind"
    local exe
    exe=$(core_bench_exe)
    echo "toolchain: $(rustc -V); bench profile; $exe"
    printf '%-8s %14s %14s %8s\n' frame "baseline Ir/p" "headroom Ir/p" ratio
    local len rig ir base head
    for len in 64 1024; do
        for rig in baseline headroom; do
            ir=$(HEADROOM_BENCH_COUNT="$rig/$len/$rounds" valgrind --tool=callgrind \
                --callgrind-out-file=/dev/null --toggle-collect='pipeline::*Rig::round' "$exe" 2>&1 |
                awk '/Collected :/ {print $NF}')
            [ -n "$ir" ] || { echo "scripts/bench.sh: callgrind reported nothing for $rig/$len" >&2; exit 1; }
            if [ "$rig" = baseline ]; then base=$ir; else head=$ir; fi
        done
        jq -nr --argjson b "$base" --argjson h "$head" --argjson n "$((rounds * frames_per_round))" --arg len "$len B" \
            '[$len, ($b / $n), ($h / $n), ($h / $b)] | "\(.[0])\t\(.[1])\t\(.[2])\t\(.[3])"' |
            awk -F'\t' '{printf "%-8s %14.1f %14.1f %7.2fx\n", $1, $2, $3, $4}'
    done
}

selected=("$@")
((${#selected[@]})) || selected=("${sections[@]}")
for s in "${selected[@]}"; do
    case " ${sections[*]} " in
    *" $s "*) "section_${s//-/_}" ;;
    *) echo "scripts/bench.sh: unknown section $s (known: ${sections[*]})" >&2; exit 2 ;;
    esac
done
