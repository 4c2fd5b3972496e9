#!/usr/bin/env bash
# Benchmarks of headroom, with a summary. Not part of the test suite (scripts/test.sh).
#
# Usage: scripts/bench.sh [SECTION...]        (default: every section)
#
# Sections:
#   core         criterion: ns/packet of the core's full per-packet path and of a baseline that
#                moves the same frames through the same rings with no QoS work, and the ratio of
#                the two measured in the same run (crates/core/benches/pipeline.rs); the same
#                traffic routed (router interfaces, LPM, rewrite) and its ratio to L2.
#                It also runs the port-count rigs: the same per-packet work at 64 B on 2 ports and
#                on 64 ports x 8 queues, and their ratio (criterion and interleaved).
#   core-instr   callgrind: instructions per packet of the same rigs (headroom, baseline, and the
#                2- and 64-port rigs). Exact and independent of the machine's load (slow: a few
#                minutes).
#   dpdk         headroom on DPDK next to dpdk-testpmd --forward-mode=io on the same vdevs and
#                CPUs, in the same run: net_null (the CPU-bound ceiling) and veth pairs through
#                net_af_packet / net_af_xdp fed by a testpmd txonly generator. Needs root.
#   afpacket     headroom on AF_PACKET between veths beside the Linux bridge on the same
#                topology, fed by the same testpmd txonly generator (scripts/bench/afpacket.sh).
#   route        criterion: the FIB (crates/core/benches/route.rs): IPv4/IPv6 LPM lookups of
#                headroom's DIR-16-8-8 and DIR-24-8 beside the prefix-trie crate, route updates
#                with their publication and swap, a full build, the ECMP hash; one run.
#   sim          the simulator on the shipped 2:1 incast at 40 Gb/s (crates/sim/benches/incast.rs):
#                criterion CPU time per switch frame, switch frames and steps (events) per CPU
#                second, next to the core's own per-packet cost at 1024 B (per_packet/headroom/
#                1024 of the core section) measured in the same run, and the same two in
#                callgrind instructions (BENCH_SIM_MS simulated ms, default 2).
#   pool         headroom-io's frame pool: alloc + free per frame, the previous shared-queue pool
#                (the baseline) against the per-lcore cache and the rest, as ratios of batches
#                interleaved in one run, across two threads, and in callgrind instructions
#                (crates/io/benches/pool.rs).
# Each section is a `section_<name>` function below; each prints its own summary table.
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
#   BENCH_SIM_MS         simulated milliseconds of one run of the sim section (default 2)
set -euo pipefail
cd "$(dirname "$0")/.."

sections=(core core-instr dpdk afpacket route pool sim)
measurement_s=${BENCH_MEASUREMENT_S:-3}
warmup_s=${BENCH_WARMUP_S:-1}
runs=${BENCH_RUNS:-1}
rounds=${BENCH_ROUNDS:-2000}
frames_per_round=128
# The aim of the core benchmark (issue: ≤ 40 ns/packet at 64 B and ≤ 1.5× the baseline), and of
# the port count (2 → 64 ports × 8 queues costs ≤ 1.2× per packet).
aim_ns=40
aim_ratio=1.5
aim_ports_ratio=1.2

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
        printf '%-8s %14s %14s %8s\n' frame "L2 ns/p" "routed ns/p" "routed/L2"
        local routed
        for len in 64 1024; do
            head=$(criterion_ns_per_element "per_packet/headroom/$len")
            routed=$(criterion_ns_per_element "per_packet/routed/$len")
            printf '%-8s %14.1f %14.1f %7.2fx\n' "$len B" "$head" "$routed" "$(jq -n "$routed / $head")"
        done
        echo
        echo "interleaved (batches of 16 rounds rotating between the rigs, ${measurement_s}s, medians):"
        printf '%-8s %14s %14s %8s %14s %10s\n' frame "baseline ns/p" "headroom ns/p" ratio "routed ns/p" "routed/L2"
        local exe line
        exe=$(core_bench_exe)
        for len in 64 1024; do
            # One line: len=64 baseline_ns=44.60 headroom_ns=96.39 ratio=2.160 pairs=7145
            #           routed_ns=120.1 routed_ratio=1.25
            line=$(HEADROOM_BENCH_RATIO="$len/$measurement_s" "$exe" 2>/dev/null | grep '^len=')
            printf '%-8s %14.1f %14.1f %7.2fx %14.1f %9.2fx   (%s rounds)\n' "$len B" \
                "$(field baseline_ns "$line")" "$(field headroom_ns "$line")" \
                "$(field ratio "$line")" "$(field routed_ns "$line")" \
                "$(field routed_ratio "$line")" "$(field pairs "$line")"
        done
        echo
        echo "port count (64 B, same per-packet work; aim: 64 ports <= ${aim_ports_ratio}x 2 ports):"
        local p2 p64
        p2=$(criterion_ns_per_element "ports/2")
        p64=$(criterion_ns_per_element "ports/64")
        printf '%-12s %14s %14s %8s\n' "" "2 ports ns/p" "64 ports ns/p" ratio
        printf '%-12s %14.1f %14.1f %7.2fx\n' criterion "$p2" "$p64" "$(jq -n "$p64 / $p2")"
        line=$(HEADROOM_BENCH_PORTS_RATIO="$measurement_s" "$exe" 2>/dev/null | grep '^ports2_ns=')
        printf '%-12s %14.1f %14.1f %7.2fx   (%s pairs)\n' interleaved \
            "$(field ports2_ns "$line")" "$(field ports64_ns "$line")" \
            "$(field ratio "$line")" "$(field pairs "$line")"
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
    # Instructions per packet of one rig: `$1` as HEADROOM_BENCH_COUNT takes it.
    ir_per_packet() {
        local out ir frames
        out=$(HEADROOM_BENCH_COUNT="$1" valgrind --tool=callgrind \
            --callgrind-out-file=/dev/null --toggle-collect='pipeline::*Rig::round' "$exe" 2>&1)
        ir=$(awk '/Collected :/ {print $NF}' <<<"$out")
        frames=$(sed -n 's/.*frames=\([0-9]*\).*/\1/p' <<<"$out")
        [ -n "$ir" ] && [ -n "$frames" ] || { echo "scripts/bench.sh: callgrind reported nothing for $1" >&2; exit 1; }
        jq -n "$ir / $frames"
    }
    printf '%-8s %14s %14s %8s %14s %10s\n' frame "baseline Ir/p" "headroom Ir/p" ratio "routed Ir/p" "routed/L2"
    local len base head routed
    for len in 64 1024; do
        base=$(ir_per_packet "baseline/$len/$rounds")
        head=$(ir_per_packet "headroom/$len/$rounds")
        routed=$(ir_per_packet "routed/$len/$rounds")
        printf '%-8s %14.1f %14.1f %7.2fx %14.1f %9.2fx\n' "$len B" "$base" "$head" \
            "$(jq -n "$head / $base")" "$routed" "$(jq -n "$routed / $head")"
    done
    # The port-count rigs, over about as many frames as the others.
    local p2 p64
    p2=$(ir_per_packet "ports2/64/$((rounds * frames_per_round / 64))")
    p64=$(ir_per_packet "ports64/64/$((rounds * frames_per_round / 2048 + 1))")
    printf '%-8s %14s %14s %8s\n' "" "2 ports Ir/p" "64 ports Ir/p" ratio
    printf '%-8s %14.1f %14.1f %7.2fx\n' "64 B" "$p2" "$p64" "$(jq -n "$p64 / $p2")"
}

section_route() {
    say "route: FIB lookups, updates, ECMP hash (criterion, ${measurement_s}s per benchmark)"
    machine
    cargo bench -p headroom-core --bench route -- \
        --warm-up-time "$warmup_s" --measurement-time "$measurement_s" 2>&1 >/dev/null |
        grep '^route bench:' || true
    route_summary
}

# The summary of the route section from criterion's files (criterion writes `a/b` parameters
# as `a_b`).
route_summary() {
    local set d16 d24 trie
    echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
    printf '%-22s %10s %10s %12s %10s\n' "IPv4 lookup, ns" dir16 dir24 prefix_trie "dir16/trie"
    for set in 1k_random 1k_roce 100k_random 100k_roce; do
        d16=$(criterion_ns_per_element "lookup_v4/dir16/$set")
        d24=$(criterion_ns_per_element "lookup_v4/dir24/$set")
        trie=$(criterion_ns_per_element "lookup_v4/prefix_trie/$set")
        printf '%-22s %10.2f %10.2f %12.2f %9.2fx\n' "$set" "$d16" "$d24" "$trie" "$(jq -n "$d16 / $trie")"
    done
    printf '%-22s %10s %10s %12s %10s\n' "IPv6 lookup, ns" dir16 "" prefix_trie "dir16/trie"
    for set in 1k_random 1k_roce; do
        d16=$(criterion_ns_per_element "lookup_v6/dir16/$set")
        trie=$(criterion_ns_per_element "lookup_v6/prefix_trie/$set")
        printf '%-22s %10.2f %10s %12.2f %9.2fx\n' "$set" "$d16" "" "$trie" "$(jq -n "$d16 / $trie")"
    done
    printf '%-30s %12s %12s\n' "IPv4 100k routes, per change" "dir16 µs" "dir24 µs"
    for set in add_del_24 add_del_8 batch_1000_24; do
        printf '%-30s %12.2f %12.2f\n' "$set" \
            "$(jq -n "$(criterion_ns_per_element "update_v4/dir16/100k_$set") / 1000")" \
            "$(jq -n "$(criterion_ns_per_element "update_v4/dir24/100k_$set") / 1000")"
    done
    printf '%-30s %12.1f %12.1f\n' "full build, ms per FIB" \
        "$(jq -n "$(criterion_ns_per_element "build_v4/dir16/100k") * 100000 / 1e6")" \
        "$(jq -n "$(criterion_ns_per_element "build_v4/dir24/100k") * 100000 / 1e6")"
    local h
    for h in siphash crc32 resolve_siphash; do
        printf '%-30s %12.2f ns\n' "ecmp $h" "$(criterion_ns_per_element "ecmp/$h")"
    done
}

# ------------------------------------------------------------------------------------------------
# DPDK section (dpdkrt branch) -------------------------------------------------------------------
# ------------------------------------------------------------------------------------------------

dpdk_runs=${BENCH_RUNS:-3}
dpdk_seconds=${BENCH_SECONDS:-5}
dpdk_cpu=${BENCH_DPDK_CPU:-1}
dpdk_gen_cpu=${BENCH_GEN_CPU:-0}
dpdk_parts=${BENCH_DPDK_PARTS:-null veth}
dpdk_pace_kpps=${BENCH_VETH_KPPS:-50}
dpdk_tmp=""
dpdk_namespaces=()

# `key=value` field of a RESULT line.
dpdk_field() { sed -n "s/.*\b$1=\([^ ]*\).*/\1/p" <<<"$2"; }
dpdk_load() { cut -d' ' -f1 /proc/loadavg; }
# Run time (ns) of the thread named $2 of process $1, from the scheduler's statistics.
dpdk_thread_cpu_ns() {
    local t
    for t in /proc/"$1"/task/*; do
        if [ "$(cat "$t/comm" 2>/dev/null)" = "$2" ]; then
            cut -d' ' -f1 "$t/schedstat"
            return
        fi
    done
    echo "scripts/bench.sh: no thread $2 in process $1" >&2
    return 1
}
dpdk_now_ns() { date +%s%N; }

dpdk_cleanup() {
    local ns
    for ns in "${dpdk_namespaces[@]}"; do ip netns del "$ns" 2>/dev/null || true; done
    [ -n "$dpdk_tmp" ] && rm -rf "$dpdk_tmp"
}

# The release test executable of one net_null benchmark: `dpdk_null_exe headroom-runtime
# dpdk_null` (the full switch, crates/runtime/tests/dpdk_null.rs) or `dpdk_null_exe headroom-dpdk
# null_io` (the DPDK backend alone, crates/dpdk/tests/null_io.rs).
dpdk_null_exe() {
    local crate=$1 test=$2
    cargo test --release -p "$crate" --features dpdk --test "$test" --no-run \
        --message-format=json 2>/dev/null |
        jq -r --arg t "$test" 'select(.reason == "compiler-artifact" and .target.name == $t and .executable != null) | .executable' |
        tail -n1
}

# dpdk-testpmd io forwarding between net_null0 and net_null1 on one lcore ($dpdk_cpu), driven
# through its interactive prompt so that packet counters and the worker's CPU time are read
# at the same moments. Prints a RESULT line like the headroom benchmarks.
dpdk_testpmd_null() {
    local fifo="$dpdk_tmp/testpmd.fifo" out="$dpdk_tmp/testpmd.out" pid main_cpu
    main_cpu=$(( dpdk_cpu == 0 ? 1 : 0 ))
    rm -f "$fifo"; mkfifo "$fifo"
    exec 7<>"$fifo"
    dpdk-testpmd --no-huge -m 256 --no-pci --no-shconf --file-prefix="hrbench-tp-$$" \
        -l "$main_cpu,$dpdk_cpu" --main-lcore "$main_cpu" --vdev=net_null0 --vdev=net_null1 \
        --log-level=notice -- -i --forward-mode=io --nb-cores=1 --port-topology=paired \
        --total-num-mbufs=8191 --mbcache=256 --burst=32 --rxd=1024 --txd=1024 <&7 >"$out" 2>&1 &
    pid=$!
    local i
    for ((i = 0; i < 100; i++)); do grep -q 'testpmd>' "$out" 2>/dev/null && break; sleep 0.1; done
    echo start >&7
    sleep 1
    local c1 c2 t1 t2
    c1=$(dpdk_thread_cpu_ns "$pid" "rte-worker-$dpdk_cpu"); t1=$(dpdk_now_ns)
    echo "show port stats all" >&7
    sleep "$dpdk_seconds"
    c2=$(dpdk_thread_cpu_ns "$pid" "rte-worker-$dpdk_cpu"); t2=$(dpdk_now_ns)
    echo "show port stats all" >&7
    sleep 0.5
    echo stop >&7; echo quit >&7
    wait "$pid" || true
    exec 7>&-
    # TX-packets of port 0 and port 1 at the first show, then at the second.
    mapfile -t tx < <(grep -o 'TX-packets: *[0-9]*' "$out" | awk '{print $2}' | tail -n 4)
    [ "${#tx[@]}" -eq 4 ] || { echo "scripts/bench.sh: cannot read testpmd's counters:" >&2; cat "$out" >&2; return 1; }
    local frames=$(( tx[2] + tx[3] - tx[0] - tx[1] ))
    jq -nr --argjson f "$frames" --argjson c "$((c2 - c1))" --argjson t "$((t2 - t1))" \
        '"RESULT testpmd_null per_direction_mpps=\($f / 2 / ($t / 1e9) / 1e6 * 1000 | round / 1000) per_direction_mpps_per_cpu_s=\($f / 2 / ($c / 1e9) / 1e6 * 1000 | round / 1000) cpu_share=\($c / $t * 100 | round / 100)"'
}

dpdk_null() {
    say "dpdk/null: net_null0 <-> net_null1, one forwarding lcore on CPU $dpdk_cpu, 64 B, $dpdk_seconds s per measurement"
    local exe io_exe
    exe=$(dpdk_null_exe headroom-runtime dpdk_null)
    io_exe=$(dpdk_null_exe headroom-dpdk null_io)
    [ -x "$exe" ] && [ -x "$io_exe" ] || { echo "scripts/bench.sh: could not build the net_null benchmarks" >&2; exit 1; }
    echo "headroom: the full switch (SONiC defaults: AZURE maps, PFC 3-4 with headroom, ECN on 3-4,"
    echo "PFC watchdog, buffer accounting), each frame a RoCEv2 DSCP 3 ECT(0) frame flooded to the"
    echo "other port (crates/runtime/tests/dpdk_null.rs); io: the DPDK backend alone, no switch"
    echo "(crates/dpdk/tests/null_io.rs)."
    printf '%-4s %-9s %-13s %10s %12s %7s %7s\n' run what "" "Mpps/dir" "Mpps/dir/CPUs" "CPU" load
    local run line what
    declare -A per_cpu
    for ((run = 1; run <= dpdk_runs; run++)); do
        for what in testpmd headroom io; do
            case $what in
                testpmd) line=$(dpdk_testpmd_null) ;;
                headroom) line=$(BENCH_CPU=$dpdk_cpu BENCH_SECONDS=$dpdk_seconds "$exe" --ignored --exact null_forwarding_rate --nocapture 2>/dev/null | grep '^RESULT') ;;
                io) line=$(BENCH_CPU=$dpdk_cpu BENCH_SECONDS=$dpdk_seconds "$io_exe" --ignored --exact null_io_rate --nocapture 2>/dev/null | grep '^RESULT') ;;
            esac
            [ -n "$line" ] || { echo "scripts/bench.sh: the $what measurement failed" >&2; exit 1; }
            per_cpu[$what]=$(dpdk_field per_direction_mpps_per_cpu_s "$line")
            printf '%-4s %-9s %-13s %10.2f %12.2f %7.2f %7s\n' "$run" "$what" "" \
                "$(dpdk_field per_direction_mpps "$line")" "${per_cpu[$what]}" \
                "$(dpdk_field cpu_share "$line")" "$(dpdk_load)"
        done
        printf '%-4s ratio per CPU-second: headroom/testpmd %.2f (aim >= 0.70), io/testpmd %.2f\n' "$run" \
            "$(jq -n "${per_cpu[headroom]} / ${per_cpu[testpmd]}")" "$(jq -n "${per_cpu[io]} / ${per_cpu[testpmd]}")"
    done
}

# --- veth: generator -> [g0 = s0] DUT [s1 = k0] -> sink ---------------------------------------

dpdk_veth_setup() {
    local p="hrb$$"
    dpdk_ns_gen="$p-gen"; dpdk_ns_dut="$p-dut"; dpdk_ns_sink="$p-sink"
    local ns
    for ns in "$dpdk_ns_gen" "$dpdk_ns_dut" "$dpdk_ns_sink"; do
        ip netns add "$ns"
        dpdk_namespaces+=("$ns")
        ip netns exec "$ns" sh -c 'echo 1 > /proc/sys/net/ipv6/conf/all/disable_ipv6; echo 1 > /proc/sys/net/ipv6/conf/default/disable_ipv6'
    done
    ip -n "$dpdk_ns_gen" link add g0 type veth peer name s0 netns "$dpdk_ns_dut"
    ip -n "$dpdk_ns_dut" link add s1 type veth peer name k0 netns "$dpdk_ns_sink"
    ip -n "$dpdk_ns_gen" link set g0 up
    ip -n "$dpdk_ns_dut" link set s0 up
    ip -n "$dpdk_ns_dut" link set s1 up
    ip -n "$dpdk_ns_sink" link set k0 up
}

dpdk_counter() { ip netns exec "$1" cat "/sys/class/net/$2/statistics/$3"; }

# The switch configuration for the veth runs: two 10G ports on vdevs $1 (net_af_packet or
# net_af_xdp) over s0/s1, one busy-polling lcore on $dpdk_cpu, SONiC defaults otherwise.
dpdk_veth_config() {
    local driver=$1 mbufs=8191
    [ "$driver" = net_af_xdp ] && mbufs=16383
    cat <<EOF
[switch]
name = "hrbench-$$"
driver = "dpdk"
log_level = "info"

[dpdk]
eal_args = ["--no-huge", "-m", "256", "--no-pci", "--no-shconf", "-l", "$dpdk_cpu",
            "--file-prefix=hrbench-dut-$$", "--log-level=notice",
            "$(dpdk_vdev "$driver" 0 s0)", "$(dpdk_vdev "$driver" 1 s1)"]
mempool_mbufs = $mbufs
mempool_cache_size = 256

[port_defaults]
speed = "10G"
mtu = 1500

[port.Ethernet0]
device = "${driver}0"

[port.Ethernet1]
device = "${driver}1"

[runtime]
polling = "busy"
prometheus_enable = false
control_socket = "$dpdk_tmp/hrbench.sock"

[[runtime.lcore]]
cpu = $dpdk_cpu
rx_ports = ["Ethernet0", "Ethernet1"]
tx_ports = ["Ethernet0", "Ethernet1"]
EOF
}

# The vdev arguments of the DUT's port $2 on interface $3 for PMD $1. af_packet gets 4096 ring
# frames (8 MiB of kernel memory per ring): on a shared machine a busy-polling DUT is preempted
# for milliseconds at a time, and the default 512-frame ring then overflows even at 40 kpps.
dpdk_vdev() {
    case $1 in
        net_af_packet) echo "--vdev=net_af_packet$2,iface=$3,framecnt=4096" ;;
        *) echo "--vdev=$1$2,iface=$3" ;;
    esac
}

# One veth measurement: DUT $1 (headroom|testpmd) on PMD $2, generator paced to $3 kpps (0: as
# fast as it goes). Rates are taken over the measuring interval; losses are totals after the
# generator stopped and the DUT drained (sink rx vs generator tx, both kernel veth counters).
# Prints a RESULT line.
dpdk_veth_once() {
    local dut=$1 driver=$2 pace_kpps=$3 dut_pid gen_pid mbufs=8191 out="$dpdk_tmp/dut.out"
    [ "$driver" = net_af_xdp ] && mbufs=16384
    local gen_vdev="--vdev=net_af_packet0,iface=g0"
    ip netns exec "$dpdk_ns_gen" tc qdisc del dev g0 root 2>/dev/null || true
    if [ "$pace_kpps" -gt 0 ]; then
        # 64-byte frames: kpps x 512 kbit/s. The generator must go through the qdisc.
        ip netns exec "$dpdk_ns_gen" tc qdisc add dev g0 root tbf rate "$((pace_kpps * 512))kbit" burst 8kb limit 64kb
        gen_vdev="$gen_vdev,qdisc_bypass=0"
    fi
    local g0 k0
    g0=$(dpdk_counter "$dpdk_ns_gen" g0 tx_packets); k0=$(dpdk_counter "$dpdk_ns_sink" k0 rx_packets)
    if [ "$dut" = headroom ]; then
        dpdk_veth_config "$driver" >"$dpdk_tmp/dut.toml"
        ip netns exec "$dpdk_ns_dut" "$dpdk_headroom" run --config "$dpdk_tmp/dut.toml" >"$out" 2>&1 &
        dut_pid=$!
        local i; for ((i = 0; i < 100; i++)); do grep -q 'headroom running' "$out" 2>/dev/null && break; sleep 0.1; done
    else
        ip netns exec "$dpdk_ns_dut" dpdk-testpmd --no-huge -m 256 --no-pci --no-shconf \
            --file-prefix="hrbench-dut-$$" --lcores "0@$dpdk_cpu,1@$dpdk_cpu" --log-level=notice \
            "$(dpdk_vdev "$driver" 0 s0)" "$(dpdk_vdev "$driver" 1 s1)" -- --forward-mode=io \
            --port-topology=paired --nb-cores=1 --total-num-mbufs=$mbufs --burst=32 \
            --rxd=1024 --txd=1024 --stats-period 1 -a >"$out" 2>&1 &
        dut_pid=$!
        local i; for ((i = 0; i < 100; i++)); do grep -q 'Port statistics' "$out" 2>/dev/null && break; sleep 0.1; done
    fi
    kill -0 "$dut_pid" 2>/dev/null || { echo "scripts/bench.sh: the $dut DUT did not start:" >&2; cat "$out" >&2; return 1; }
    ip netns exec "$dpdk_ns_gen" dpdk-testpmd --no-huge -m 256 --no-pci --no-shconf \
        --file-prefix="hrbench-gen-$$" --lcores "0@$dpdk_gen_cpu,1@$dpdk_gen_cpu" --log-level=notice \
        "$gen_vdev" -- --forward-mode=txonly --port-topology=loop \
        --txpkts=64 --burst=32 --total-num-mbufs=16384 --stats-period 1 -a \
        >"$dpdk_tmp/gen.out" 2>&1 &
    gen_pid=$!
    sleep 2
    # The DUT's forwarding thread, for its share of the CPU (ip netns exec replaced itself with
    # the DUT, so $dut_pid is the DUT's pid).
    local thread=headroom-lcore0
    [ "$dut" = testpmd ] && thread=rte-worker-1
    local g1 k1 t1 c1 g2 k2 t2 c2
    c1=$(dpdk_thread_cpu_ns "$dut_pid" "$thread")
    g1=$(dpdk_counter "$dpdk_ns_gen" g0 tx_packets); k1=$(dpdk_counter "$dpdk_ns_sink" k0 rx_packets); t1=$(dpdk_now_ns)
    sleep "$dpdk_seconds"
    c2=$(dpdk_thread_cpu_ns "$dut_pid" "$thread")
    g2=$(dpdk_counter "$dpdk_ns_gen" g0 tx_packets); k2=$(dpdk_counter "$dpdk_ns_sink" k0 rx_packets); t2=$(dpdk_now_ns)
    kill -INT "$gen_pid"; wait "$gen_pid" 2>/dev/null || true
    sleep 1
    local gen_total=$(( $(dpdk_counter "$dpdk_ns_gen" g0 tx_packets) - g0 ))
    local sink_total=$(( $(dpdk_counter "$dpdk_ns_sink" k0 rx_packets) - k0 ))
    if [ "$dut" = headroom ]; then kill -TERM "$dut_pid"; else kill -INT "$dut_pid"; fi
    wait "$dut_pid" 2>/dev/null || true
    if [ "$dut" = headroom ] && ! grep -q 'every mbuf is back in the pool' "$out"; then
        echo "scripts/bench.sh: headroom did not report every mbuf back:" >&2; tail -20 "$out" >&2; return 1
    fi
    jq -nr --argjson g "$((g2 - g1))" --argjson k "$((k2 - k1))" --argjson t "$((t2 - t1))" \
        --argjson gt "$gen_total" --argjson st "$sink_total" --argjson c "$((c2 - c1))" \
        '"RESULT generated_kpps=\($g / ($t / 1e9) / 1e3 | round) delivered_kpps=\($k / ($t / 1e9) / 1e3 | round) generated=\($gt) lost=\($gt - $st) lost_share=\(if $gt > 0 then ($gt - $st) / $gt * 10000 | round / 10000 else 0 end) cpu_share=\($c / $t * 100 | round / 100)"'
}

dpdk_veth() {
    need ip "apt-get install iproute2"
    need tc "apt-get install iproute2"
    say "dpdk/veth: testpmd txonly (64 B, CPU $dpdk_gen_cpu) -> g0=s0 -> DUT (CPU $dpdk_cpu) -> s1=k0 -> sink, $dpdk_seconds s per measurement"
    echo "max: the generator as fast as it goes (the DUT's capacity); ${dpdk_pace_kpps} kpps: paced with tbf on g0."
    echo "lost: generator tx - sink rx after the generator stopped and the DUT drained."
    cargo build --release -p headroom-cli --features dpdk >&2
    dpdk_headroom="$target_dir/release/headroom"
    dpdk_veth_setup
    printf '%-4s %-9s %-14s %-9s %9s %9s %10s %8s %8s %5s %6s\n' run pace vdev DUT "gen kpps" "sink kpps" generated lost "lost %" CPU load
    local run driver dut line pace
    for ((run = 1; run <= dpdk_runs; run++)); do
        for pace in 0 "$dpdk_pace_kpps"; do
            for driver in net_af_packet net_af_xdp; do
                for dut in testpmd headroom; do
                    line=$(dpdk_veth_once "$dut" "$driver" "$pace") || exit 1
                    printf '%-4s %-9s %-14s %-9s %9s %9s %10s %8s %8.2f %5s %6s\n' "$run" \
                        "$([ "$pace" -gt 0 ] && echo "${pace}k" || echo max)" "$driver" "$dut" \
                        "$(dpdk_field generated_kpps "$line")" "$(dpdk_field delivered_kpps "$line")" \
                        "$(dpdk_field generated "$line")" "$(dpdk_field lost "$line")" \
                        "$(jq -n "$(dpdk_field lost_share "$line") * 100")" \
                        "$(dpdk_field cpu_share "$line")" "$(dpdk_load)"
                done
            done
        done
    done
}

section_dpdk() {
    need dpdk-testpmd "apt-get install dpdk"
    [ "$(id -u)" -eq 0 ] || { echo "scripts/bench.sh: the dpdk section needs root (vdevs on veths, namespaces)" >&2; exit 1; }
    dpdk_tmp=$(mktemp -d)
    trap dpdk_cleanup EXIT
    say "dpdk: headroom on DPDK vs dpdk-testpmd io, same vdevs and CPUs"
    machine
    local part
    for part in $dpdk_parts; do
        case $part in
            null) dpdk_null ;;
            veth) dpdk_veth ;;
            *) echo "scripts/bench.sh: unknown BENCH_DPDK_PARTS entry $part" >&2; exit 1 ;;
        esac
    done
}

# ------------------------------------------------------------------------------------------------
# end of the DPDK section ------------------------------------------------------------------------
# ------------------------------------------------------------------------------------------------


pool_bench_exe() {
    cargo bench -p headroom-io --bench pool --no-run --message-format=json 2>/dev/null |
        jq -r 'select(.reason == "compiler-artifact" and .target.name == "pool" and .executable != null) | .executable' |
        tail -n1
}

section_pool() {
    say "frame pool: CPU ns per frame (alloc + free), ratio to the previous pool, interleaved batches"
    need valgrind "apt-get install valgrind"
    local exe v ir
    exe=$(pool_bench_exe)
    machine
    HEADROOM_POOL_RATIO="$measurement_s" "$exe" --bench
    say "frame pool: alloc on one thread, free on another (an RX lcore feeding a TX lcore)"
    HEADROOM_POOL_CROSS="$((measurement_s * 2))" "$exe" --bench
    say "frame pool: instructions per frame (callgrind, 1000 rounds of 32 frames)"
    # (criterion spawns gnuplot to look for it: that process collects 0, hence the largest.)
    for v in previous_shared_queue_arc previous_shared_queue_only arc_clone_drop_only shared_queue \
        thread_cache local_free_list; do
        ir=$(HEADROOM_POOL_COUNT="$v/1000" valgrind --tool=callgrind --callgrind-out-file=/dev/null \
            --toggle-collect='*pool::measured*' "$exe" --bench 2>&1 |
            awk '/Collected :/ && $NF > ir {ir = $NF} END {print ir}')
        [ -n "$ir" ] || { echo "scripts/bench.sh: callgrind reported nothing for $v" >&2; exit 1; }
        awk -v v="$v" -v ir="$ir" 'BEGIN {printf "%-28s %8.1f Ir/frame\n", v, ir / 32000}'
    done
}

sim_bench_exe() {
    cargo bench -p headroom-sim --bench incast --no-run --message-format=json 2>/dev/null |
        jq -r 'select(.reason == "compiler-artifact" and .target.name == "incast" and .executable != null) | .executable' |
        tail -n1
}

section_sim() {
    local sim_ms=${BENCH_SIM_MS:-2}
    say "sim: the 2:1 incast at 40 Gb/s (config/sim/incast-2to1-40g.toml, ${sim_ms} ms simulated per run) vs the core's per-packet cost"
    machine
    local line frames steps
    line=$(HEADROOM_SIM_BENCH_MS="$sim_ms" cargo bench -p headroom-sim --bench incast -- \
        --warm-up-time "$warmup_s" --measurement-time "$measurement_s" 2>/dev/null | grep '^sim_bench:')
    frames=$(field switch_frames "$line")
    steps=$(field steps "$line")
    cargo bench -p headroom-core --bench pipeline -- --warm-up-time "$warmup_s" \
        --measurement-time "$measurement_s" per_packet/headroom/1024 >/dev/null 2>&1
    echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
    echo "one run: $frames switch frames, $steps steps ($(jq -n "$steps / $frames * 100 | round / 100") steps per frame)"
    local sim_ns core_ns
    sim_ns=$(criterion_ns_per_element sim/incast_2to1_40g)
    core_ns=$(criterion_ns_per_element per_packet/headroom/1024)
    printf '%-34s %12s\n' "criterion (CPU time, medians)" value
    printf '%-34s %12.1f\n' "sim ns per switch frame" "$sim_ns"
    printf '%-34s %12.3f   (aim: >= 1 M per wall second on one core)\n' "M switch frames per CPU second" "$(jq -n "1e3 / $sim_ns")"
    printf '%-34s %12.3f\n' "M steps (events) per CPU second" "$(jq -n "$steps / $frames * 1e3 / $sim_ns")"
    printf '%-34s %12.1f\n' "core ns per packet (1024 B)" "$core_ns"
    printf '%-34s %11.1fx\n' "sim / core per frame" "$(jq -n "$sim_ns / $core_ns")"
    need valgrind "apt-get install valgrind"
    local exe core_exe out ir sim_frames core_ir core_frames
    exe=$(sim_bench_exe)
    out=$(HEADROOM_SIM_BENCH_COUNT=1 HEADROOM_SIM_BENCH_MS="$sim_ms" valgrind --tool=callgrind \
        --callgrind-out-file=/dev/null --toggle-collect='incast::run' "$exe" 2>&1)
    ir=$(awk '/Collected :/ {print $NF}' <<<"$out")
    sim_frames=$(sed -n 's/.*switch_frames=\([0-9]*\).*/\1/p' <<<"$out")
    core_exe=$(core_bench_exe)
    out=$(HEADROOM_BENCH_COUNT="headroom/1024/$rounds" valgrind --tool=callgrind \
        --callgrind-out-file=/dev/null --toggle-collect='pipeline::*Rig::round' "$core_exe" 2>&1)
    core_ir=$(awk '/Collected :/ {print $NF}' <<<"$out")
    core_frames=$(sed -n 's/.*frames=\([0-9]*\).*/\1/p' <<<"$out")
    [ -n "$ir" ] && [ -n "$sim_frames" ] && [ -n "$core_ir" ] && [ -n "$core_frames" ] ||
        { echo "scripts/bench.sh: callgrind reported nothing for the sim section" >&2; exit 1; }
    printf '%-34s %12s\n' "callgrind (instructions)" value
    printf '%-34s %12.0f\n' "sim Ir per switch frame" "$(jq -n "$ir / $sim_frames")"
    printf '%-34s %12.0f\n' "sim Ir per step" "$(jq -n "$ir / $steps")"
    printf '%-34s %12.0f\n' "core Ir per packet (1024 B)" "$(jq -n "$core_ir / $core_frames")"
    printf '%-34s %11.1fx\n' "sim / core per frame" "$(jq -n "$ir / $sim_frames / ($core_ir / $core_frames)")"
}

section_afpacket() {
    say "afpacket: headroom (AF_PACKET) vs the Linux bridge on veths"
    [ -x scripts/bench/afpacket.sh ] || { echo "scripts/bench.sh: scripts/bench/afpacket.sh is missing" >&2; exit 1; }
    scripts/bench/afpacket.sh
}

selected=("$@")
((${#selected[@]})) || selected=("${sections[@]}")
for s in "${selected[@]}"; do
    case " ${sections[*]} " in
    *" $s "*) "section_${s//-/_}" ;;
    *) echo "scripts/bench.sh: unknown section $s (known: ${sections[*]})" >&2; exit 2 ;;
    esac
done
