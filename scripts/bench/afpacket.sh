#!/usr/bin/env bash
# Forwarding rate of headroom (AF_PACKET driver) between veths, beside the Linux bridge on the
# same topology, with the same independent traffic source (dpdk-testpmd, txonly, net_af_packet).
#
#   gen ns                 dut ns                          sink ns
#   <tag>g  ==== veth ==== <tag>a  [DUT]  <tag>b ==== veth ==== <tag>s
#   testpmd txonly         headroom run (2 ports)          counts rx_packets/rx_bytes
#   pinned to GEN_CPU      or br0 (Linux bridge)
#                          headroom's lcore on DUT_CPU
#
# The generator sends UDP/IPv4 frames (testpmd txonly) to LEARN_MAC. Before each measurement the
# sink sends one broadcast frame from LEARN_MAC, so both DUTs have learned it on the sink's port
# and forward the generator's frames as known unicast to one port. LEARN_MAC is not the sink
# interface's own MAC, so the sink's kernel drops the frames at once (PACKET_OTHERHOST) and the
# sink costs as little as possible.
#
# For each frame size and repetition ("run"), every DUT is measured back to back:
#   gen-only          no forwarding: generator -> DUT port A only (the source's ceiling)
#   bridge            Linux bridge br0 over both DUT ports
#   headroom-adaptive headroom run, runtime.polling = "adaptive"
#   headroom-busy     headroom run, runtime.polling = "busy"
# Rates are counter deltas over DURATION seconds after WARMUP seconds of traffic. The results
# (one line per measurement), the logs and the summary are kept in OUT.
#
# Needs root, iproute2, dpdk-testpmd (Debian 12: package dpdk-dev), python3, a release build of headroom
# (cargo build --release -p headroom-cli). Everything it creates (namespaces, veths, processes,
# DPDK runtime dir) is removed on exit, also on Ctrl-C or an error. Progress goes to stderr; the
# summary to stdout and OUT/summary.txt. Exit status 0 when every measurement ran. Results and
# their analysis: docs/perf.md (section "Forwarding rate on AF_PACKET").
#
# Settings (environment):
#   HEADROOM=path   headroom binary            (default: target/release/headroom of this repo)
#   DURATION=s      measurement interval       (default 10)
#   WARMUP=s        traffic before measuring   (default 2)
#   REPS=n          runs per frame size        (default 3)
#   SIZES="64 1500" frame sizes, bytes without FCS (testpmd --txpkts)
#   DUTS="gen-only bridge headroom-adaptive headroom-busy"
#   GEN_CPU=0 DUT_CPU=1
#   RPS=0|1         1: steer the DUT ingress veth's kernel receive work to DUT_CPU (RPS)
#   BRIDGE_NF=0|1   br_netfilter's bridge-nf-call-{ip,ip6,arp}tables in the DUT namespace
#                   (default 0: the bridge's best case; 1 is the usual kernel default)
#   NICE=n          nice value of testpmd and headroom (default 0). Only competes with processes
#                   of the same cgroup; the bridge works in softirq, which no nice value affects
#   OUT=dir         results directory          (default: a new /tmp/headroom-bench-afpacket.*)
#   SUMMARY_OF=dir  only print the summary of the results in dir (no root needed)
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
HEADROOM=${HEADROOM:-$repo/target/release/headroom}
DURATION=${DURATION:-10}
WARMUP=${WARMUP:-2}
REPS=${REPS:-3}
SIZES=${SIZES:-"64 1500"}
DUTS=${DUTS:-"gen-only bridge headroom-adaptive headroom-busy"}
GEN_CPU=${GEN_CPU:-0}
DUT_CPU=${DUT_CPU:-1}
RPS=${RPS:-0}
BRIDGE_NF=${BRIDGE_NF:-0}
NICE=${NICE:-0}
OUT=${OUT:-}
TESTPMD=${TESTPMD:-dpdk-testpmd}

tag=hb$(($$ % 100000))
ns_gen=$tag-gen ns_dut=$tag-dut ns_sink=$tag-sink
if_gen=${tag}g if_a=${tag}a if_b=${tag}b if_sink=${tag}s
mac_gen=02:00:00:00:b0:01 mac_sink=02:00:00:00:b0:02
LEARN_MAC=02:00:00:00:b0:99
prefix=$tag-testpmd
gen_pid="" dut_pid=""

die() { echo "afpacket.sh: $*" >&2; exit 1; }
log() { echo "[$(date +%T)] $*" >&2; }

# --- cleanup ------------------------------------------------------------------------------------
# Stops a process we started (by its pid): SIGTERM, then SIGKILL after `grace` seconds.
stop_pid() {
    local pid=$1 signal=${2:-TERM} grace=${3:-10}
    [[ -n $pid ]] && kill -0 "$pid" 2>/dev/null || return 0
    kill -"$signal" "$pid" 2>/dev/null || true
    local deadline=$((SECONDS + grace))
    while kill -0 "$pid" 2>/dev/null && ((SECONDS < deadline)); do sleep 0.1; done
    if kill -0 "$pid" 2>/dev/null; then
        log "pid $pid did not stop in ${grace}s: SIGKILL"
        kill -KILL "$pid" 2>/dev/null || true
    fi
    wait "$pid" 2>/dev/null || true
}

cleanup() {
    local rc=$?
    trap - EXIT INT TERM
    stop_pid "$gen_pid" INT 5
    stop_pid "$dut_pid" TERM 10
    for ns in "$ns_gen" "$ns_dut" "$ns_sink"; do
        ip netns del "$ns" 2>/dev/null || true
    done
    rm -rf "/var/run/dpdk/$prefix"
    log "results and logs in $OUT"
    exit "$rc"
}

# --- topology -----------------------------------------------------------------------------------
setup_topology() {
    for ns in "$ns_gen" "$ns_dut" "$ns_sink"; do
        ip netns add "$ns"
        # Silence: no IPv6 (no DAD, router solicitations, MLD), so every frame is ours.
        ip netns exec "$ns" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1
        ip -n "$ns" link set lo up
    done
    ip link add "$if_gen" netns "$ns_gen" address "$mac_gen" type veth peer name "$if_a" netns "$ns_dut"
    ip link add "$if_b" netns "$ns_dut" type veth peer name "$if_sink" netns "$ns_sink" address "$mac_sink"
    ip -n "$ns_gen" link set "$if_gen" up
    ip -n "$ns_dut" link set "$if_a" up
    ip -n "$ns_dut" link set "$if_b" up
    ip -n "$ns_sink" link set "$if_sink" up
    if [[ -e /proc/sys/net/bridge/bridge-nf-call-iptables ]]; then
        for t in iptables ip6tables arptables; do
            ip netns exec "$ns_dut" sysctl -qw "net.bridge.bridge-nf-call-$t=$BRIDGE_NF" || true
        done
    fi
    if [[ $RPS == 1 ]]; then
        printf '%x' $((1 << DUT_CPU)) | ip netns exec "$ns_dut" tee "/sys/class/net/$if_a/queues/rx-0/rps_cpus" >/dev/null
    fi
}

# Sends one broadcast frame (local experimental EtherType 0x88B5) from LEARN_MAC out of the sink.
learn_frame() {
    ip netns exec "$ns_sink" timeout 5 python3 - "$if_sink" "$LEARN_MAC" <<'EOF'
import socket, sys
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
s.bind((sys.argv[1], 0))
src = bytes.fromhex(sys.argv[2].replace(":", ""))
s.send(b"\xff" * 6 + src + b"\x88\xb5" + b"headroom-bench-learn".ljust(46, b"\0"))
EOF
}

# --- counters -----------------------------------------------------------------------------------
# One line: time, then the interface counters we use, then /proc/stat of both CPUs, then the
# CPU ticks of the generator and the DUT process (0 when there is none).
sysfs() { ip netns exec "$1" cat "/sys/class/net/$2/statistics/$3"; }
proc_ticks() {
    local pid=$1
    if [[ -n $pid && -r /proc/$pid/stat ]]; then
        # utime and stime: fields 14 and 15 (the parenthesised comm has no spaces here).
        awk '{print $14, $15}' "/proc/$pid/stat"
    else
        echo 0 0
    fi
}
cpu_line() { awk -v c="cpu$1" '$1 == c {print $2+$3, $4, $7+$8, $9, $5+$6}' /proc/stat; }
snapshot() {
    echo "$(date +%s.%N)" \
        "$(sysfs "$ns_gen" "$if_gen" tx_packets)" "$(sysfs "$ns_gen" "$if_gen" tx_dropped)" \
        "$(sysfs "$ns_dut" "$if_a" rx_packets)" "$(sysfs "$ns_dut" "$if_a" rx_dropped)" \
        "$(sysfs "$ns_dut" "$if_b" tx_packets)" "$(sysfs "$ns_dut" "$if_b" tx_dropped)" \
        "$(sysfs "$ns_sink" "$if_sink" rx_packets)" "$(sysfs "$ns_sink" "$if_sink" rx_bytes)" \
        "$(cpu_line "$GEN_CPU")" "$(cpu_line "$DUT_CPU")" \
        "$(proc_ticks "$gen_pid")" "$(proc_ticks "$dut_pid")"
}

# --- DUTs ---------------------------------------------------------------------------------------
write_config() {
    local polling=$1 file=$2
    cat >"$file" <<EOF
# Generated by scripts/bench/afpacket.sh: 2 ports, speed high enough that the shaper never limits.
[switch]
name = "$tag"
driver = "afpacket"
log_format = "text"

[port_defaults]
speed = "100G"
cable_length = 0

[port.Ethernet0]
device = "$if_a"

[port.Ethernet1]
device = "$if_b"

[runtime]
polling = "$polling"
burst_size = 32
control_socket = "$OUT/$tag.sock"
prometheus_enable = false

[[runtime.lcore]]
cpu = $DUT_CPU
rx_ports = ["Ethernet0", "Ethernet1"]
tx_ports = ["Ethernet0", "Ethernet1"]
EOF
}

# Starts a DUT; `name` is the measurement's log prefix.
start_dut() {
    local dut=$1 name=$2
    case $dut in
    gen-only) ;;
    bridge)
        ip -n "$ns_dut" link add br0 type bridge stp_state 0
        ip -n "$ns_dut" link set "$if_a" master br0
        ip -n "$ns_dut" link set "$if_b" master br0
        ip -n "$ns_dut" link set br0 up
        learn_frame
        local deadline=$((SECONDS + 5))
        until ip netns exec "$ns_dut" bridge fdb show br br0 | grep -q "^$LEARN_MAC dev $if_b"; do
            ((SECONDS < deadline)) || die "the bridge did not learn $LEARN_MAC"
            sleep 0.1
        done
        ;;
    headroom-*)
        local polling=${dut#headroom-}
        write_config "$polling" "$OUT/$name.toml"
        nice -n "$NICE" ip netns exec "$ns_dut" "$HEADROOM" run -c "$OUT/$name.toml" --log-format text \
            >"$OUT/$name.report" 2>"$OUT/$name.log" &
        dut_pid=$!
        local deadline=$((SECONDS + 15))
        until grep -qs "headroom running" "$OUT/$name.log"; do
            kill -0 "$dut_pid" 2>/dev/null || die "headroom exited at start: $(cat "$OUT/$name.log")"
            ((SECONDS < deadline)) || die "headroom did not start in 15 s"
            sleep 0.1
        done
        learn_frame
        deadline=$((SECONDS + 5))
        until timeout 10 "$HEADROOM" show fdb -s "$OUT/$tag.sock" 2>/dev/null | grep -qi "$LEARN_MAC"; do
            ((SECONDS < deadline)) || die "headroom did not learn $LEARN_MAC"
            sleep 0.1
        done
        ;;
    *) die "unknown DUT $dut" ;;
    esac
}

stop_dut() {
    local dut=$1 name=$2
    case $dut in
    bridge)
        ip -n "$ns_dut" link del br0
        ;;
    headroom-*)
        timeout 10 "$HEADROOM" show ports -s "$OUT/$tag.sock" >"$OUT/$name.ports" 2>&1 || true
        timeout 10 "$HEADROOM" show ports -s "$OUT/$tag.sock" --json >"$OUT/$name.ports.json" 2>&1 || true
        stop_pid "$dut_pid" TERM 15
        dut_pid=""
        ;;
    esac
}

# --- generator ----------------------------------------------------------------------------------
start_generator() {
    local size=$1 name=$2
    # Main lcore and forwarding lcore both on GEN_CPU; the whole process (EAL threads too) is
    # pinned there by taskset.
    nice -n "$NICE" taskset -c "$GEN_CPU" ip netns exec "$ns_gen" "$TESTPMD" \
        --no-huge -m 1024 --no-pci --file-prefix "$prefix" --lcores "0@$GEN_CPU,1@$GEN_CPU" \
        --vdev="net_af_packet0,iface=$if_gen" -- \
        --total-num-mbufs=16384 --forward-mode=txonly --port-topology=loop \
        --txpkts="$size" --burst=32 --eth-peer="0,$LEARN_MAC" --stats-period 1 -a \
        </dev/null >"$OUT/$name.testpmd.log" 2>&1 &
    gen_pid=$!
    # Wait for frames to flow (EAL init takes a fraction of a second).
    local first deadline=$((SECONDS + 20))
    first=$(sysfs "$ns_gen" "$if_gen" tx_packets)
    until (($(sysfs "$ns_gen" "$if_gen" tx_packets) > first + 1000)); do
        kill -0 "$gen_pid" 2>/dev/null || die "testpmd exited: $(tail -5 "$OUT/$name.testpmd.log")"
        ((SECONDS < deadline)) || die "testpmd sent nothing in 20 s"
        sleep 0.1
    done
}

# --- one measurement ----------------------------------------------------------------------------
# Appends a line to results.tsv.
measure() {
    local run=$1 size=$2 dut=$3
    local name=run$run-$size-$dut
    local load
    load=$(awk '{print $1}' /proc/loadavg)
    log "run $run, ${size} B, $dut (load $load)"
    start_dut "$dut" "$name"
    local total_start
    total_start=$(snapshot)
    start_generator "$size" "$name"
    sleep "$WARMUP"
    local before after
    before=$(snapshot)
    sleep "$DURATION"
    after=$(snapshot)
    stop_pid "$gen_pid" INT 5
    gen_pid=""
    # Let the DUT forward what is still queued before its final counters.
    sleep 0.5
    stop_dut "$dut" "$name"
    local total_end
    total_end=$(snapshot)

    # Headroom's own counters (final report on SIGTERM) against the kernel's over the whole
    # DUT lifetime: frames it received on port A and sent on port B; and the frames the kernel
    # dropped because port A's receive ring was full (`show ports`, just before the stop).
    local hr_rx=- hr_tx=- hr_drops=- hr_missed=-
    if [[ $dut == headroom-* ]]; then
        read -r hr_rx hr_tx hr_drops < <(awk '
            $1 == "Ethernet0" && NF == 6 && !a { rx = $2; d += $6; a = 1 }
            $1 == "Ethernet1" && NF == 6 && !b { tx = $3; d += $6; b = 1 }
            END { print (a ? rx : "-"), (b ? tx : "-"), (a && b ? d : "-") }' "$OUT/$name.report")
        hr_missed=$(python3 -c '
import json, sys
def walk(v):
    if isinstance(v, dict):
        if v.get("port") == "Ethernet0" and "backend_rx_missed" in v:
            print(v["backend_rx_missed"]); sys.exit()
        for x in v.values(): walk(x)
    elif isinstance(v, list):
        for x in v: walk(x)
try: walk(json.load(open(sys.argv[1])))
except Exception: pass
print("-")' "$OUT/$name.ports.json")
    fi
    awk -v run="$run" -v size="$size" -v dut="$dut" -v load="$load" -v hz="$(getconf CLK_TCK)" \
        -v hr_rx="$hr_rx" -v hr_tx="$hr_tx" -v hr_drops="$hr_drops" -v hr_missed="$hr_missed" \
        -v b="$before" -v a="$after" -v ts="$total_start" -v te="$total_end" '
    BEGIN {
        split(b, B, " "); split(a, A, " "); split(ts, S, " "); split(te, E, " ")
        dt = A[1] - B[1]
        gen_pps = (A[2] - B[2]) / dt
        gen_drop_pps = (A[3] - B[3]) / dt
        a_rx_pps = (A[4] - B[4]) / dt
        sink_pps = (A[8] - B[8]) / dt
        sink_gbps = (A[9] - B[9]) * 8 / dt / 1e9
        # /proc/stat per CPU: [10..14] generator CPU, [15..19] DUT CPU, each
        # user+nice, system, irq+softirq, steal, idle+iowait.
        g_tot = 0; d_tot = 0
        for (i = 10; i <= 14; i++) g_tot += A[i] - B[i]
        for (i = 15; i <= 19; i++) d_tot += A[i] - B[i]
        g_busy = g_tot ? 100 * (A[10] - B[10] + A[11] - B[11] + A[12] - B[12]) / g_tot : 0
        g_si   = g_tot ? 100 * (A[12] - B[12]) / g_tot : 0
        d_busy = d_tot ? 100 * (A[15] - B[15] + A[16] - B[16] + A[17] - B[17]) / d_tot : 0
        d_si   = d_tot ? 100 * (A[17] - B[17]) / d_tot : 0
        steal  = (g_tot + d_tot) ? 100 * (A[13] - B[13] + A[18] - B[18]) / (g_tot + d_tot) : 0
        # Per process: [20,21] testpmd utime, stime; [22,23] DUT utime, stime (clock ticks).
        gen_usr = 100 * (A[20] - B[20]) / hz / dt; gen_sys = 100 * (A[21] - B[21]) / hz / dt
        dut_usr = 100 * (A[22] - B[22]) / hz / dt; dut_sys = 100 * (A[23] - B[23]) / hz / dt
        fwd = dut != "gen-only"
        loss = (!fwd || gen_pps == 0) ? "-" : sprintf("%.2f", 100 * (1 - sink_pps / gen_pps))
        delivered = fwd ? sprintf("%.4f", sink_pps / 1e6) : "-"
        gbps = fwd ? sprintf("%.3f", sink_gbps) : "-"
        # CPU time of the DUT process per delivered frame (headroom only).
        ns_frame = (dut ~ /^headroom/ && sink_pps > 0) ? sprintf("%.0f", (dut_usr + dut_sys) / 100 / sink_pps * 1e9) : "-"
        # Whole DUT lifetime: sent by the generator, received by the sink, dropped by veth B.
        tot_gen = E[2] - S[2]; tot_sink = E[8] - S[8]; tot_bdrop = E[7] - S[7]
        printf "%s\t%s\t%s\t%s\t%.4f\t%.4f\t%.4f\t%s\t%s\t%s\t%.0f\t%.0f\t%.0f\t%.0f\t%.1f\t%.0f\t%.0f\t%.0f\t%.0f\t%s\t%d\t%d\t%d\t%s\t%s\t%s\t%s\n",
            run, size, dut, load, gen_pps / 1e6, gen_drop_pps / 1e6, a_rx_pps / 1e6, delivered, gbps, loss,
            g_busy, g_si, d_busy, d_si, steal, gen_usr, gen_sys, dut_usr, dut_sys, ns_frame,
            tot_gen, tot_sink, tot_bdrop, hr_rx, hr_missed, hr_tx, hr_drops
    }' >>"$results"
    tail -1 "$results" >&2
}

# --- summary ------------------------------------------------------------------------------------
summary() {
    echo
    sed -n 's/^settings: /Settings: /p' "$OUT/setup.txt"
    echo "Delivered = frames counted by the sink; Gb/s of L2 bytes (no FCS, preamble or gap)."
    echo "med = median over runs, then (min..max). CPU: % of one CPU, user+system"
    echo "time of the testpmd and headroom processes (softirq work done in a process's context is in its"
    echo "system time, so the bridge's forwarding shows up in testpmd's)."
    echo
    awk -F'\t' '
    NR == 1 { next }
    {
        k = $2 "\t" $3
        if (!(k in seen)) { order[++keys] = k; seen[k] = 1 }
        add(k, "gen", $5); add(k, "del", $8); add(k, "gbps", $9); add(k, "loss", $10)
        add(k, "tp", $16 + $17); add(k, "load", $4)
        # Microseconds of CPU per frame: testpmd process time per generated frame (generation,
        # veth, and whatever softirq work the frame causes on the generator CPU: for the bridge,
        # all of the forwarding), and the DUT process time per delivered frame.
        if ($5 > 0) add(k, "tpus", ($16 + $17) / 100 / $5)
        if ($3 ~ /^headroom/) { add(k, "dut", $18 + $19); if ($8 > 0) add(k, "dutus", ($18 + $19) / 100 / $8) }
        if ($3 == "bridge") bridge[$1 "\t" $2] = $8
        if ($3 ~ /^headroom/) { hr[$1 "\t" $2 "\t" $3] = $8; hrk[$2 "\t" $3] = 1 }
        if ($3 ~ /^headroom/ && $26 != "-") {
            txcheck[k] = txcheck[k] sprintf(" %s/%d", $26, $22 + $23)
            rxcheck[k] = rxcheck[k] sprintf(" %s+%s/%d", $24, $25, $21)
        }
    }
    function add(k, f, v) { if (v == "-" || v == "") return; V[k, f, ++N[k, f]] = v + 0 }
    function sorted(k, f,    i, j, t) {
        for (i = 1; i <= N[k, f]; i++) S[i] = V[k, f, i]
        for (i = 2; i <= N[k, f]; i++) { t = S[i]; for (j = i - 1; j > 0 && S[j] > t; j--) S[j + 1] = S[j]; S[j + 1] = t }
        return N[k, f]
    }
    function med(k, f,    n) { n = sorted(k, f); if (!n) return ""; return n % 2 ? S[(n + 1) / 2] : (S[n / 2] + S[n / 2 + 1]) / 2 }
    function stat(k, f, fmt,    n, m) {
        n = sorted(k, f); if (!n) return "-"
        m = n % 2 ? S[(n + 1) / 2] : (S[n / 2] + S[n / 2 + 1]) / 2
        return sprintf(fmt " (" fmt ".." fmt ")", m, S[1], S[n])
    }
    END {
        fmt = "%-5s %-18s %-22s %-22s %-20s %-18s %-14s %-14s %-14s\n"
        printf fmt, "size", "DUT", "gen Mpps med (range)", "deliv. Mpps med", "deliv. Gb/s med", "loss %", "testpmd CPU %", "DUT CPU %", "load"
        for (i = 1; i <= keys; i++) {
            k = order[i]; split(k, p, "\t")
            printf fmt, p[1], p[2], stat(k, "gen", "%.3f"), stat(k, "del", "%.3f"), stat(k, "gbps", "%.2f"),
                stat(k, "loss", "%.1f"), stat(k, "tp", "%.0f"), stat(k, "dut", "%.0f"), stat(k, "load", "%.1f")
        }
        print ""
        print "Ratio headroom / bridge of delivered Mpps, per run (run 1, 2, ...) and median:"
        for (i = 1; i <= keys; i++) {
            k = order[i]; if (!(k in hrk)) continue
            split(k, p, "\t"); line = ""; delete R; nr = 0
            for (run = 1; run <= 1000; run++) {
                hkey = run "\t" k; bkey = run "\t" p[1]
                if (!(hkey in hr)) { if (run > 1 && !(bkey in bridge)) break; continue }
                if (bkey in bridge && bridge[bkey] > 0) { r = hr[hkey] / bridge[bkey]; line = line sprintf(" %.2f", r); V["ratio" k, "r", ++nr] = r; N["ratio" k, "r"] = nr }
                else line = line " -"
            }
            printf "  %5s B %-18s%s   median %s\n", p[1], p[2], line, nr ? sprintf("%.2f", med("ratio" k, "r")) : "-"
        }
        print ""
        print "CPU cost per frame (medians over runs; robust to how much CPU the shared machine gave us):"
        print "  testpmd us/frame: testpmd CPU time per generated frame (for the bridge this includes all of its"
        print "  forwarding, done in softirq in testpmd'"'"'s context); DUT us/frame: headroom CPU time per delivered"
        print "  frame; est. Mpps: the rate if each process had a whole CPU = min(1/testpmd us, 1/DUT us)."
        fmt = "  %-5s %-18s %-18s %-14s %-12s\n"
        printf fmt, "size", "DUT", "testpmd us/frame", "DUT us/frame", "est. Mpps"
        for (i = 1; i <= keys; i++) {
            k = order[i]; split(k, p, "\t")
            t = med(k, "tpus"); d = med(k, "dutus")
            est = "-"
            if (t != "" && t > 0) { e = 1 / t; if (d != "" && d > 0 && 1 / d < e) e = 1 / d; est = sprintf("%.3f", e) }
            printf fmt, p[1], p[2], t == "" ? "-" : sprintf("%.2f", t), d == "" ? "-" : sprintf("%.2f", d), est
        }
        print ""
        print "Counter checks over each DUT lifetime, per run:"
        print "  TX: headroom Ethernet1 TX frames / (sink rx_packets + veth B tx_dropped)"
        print "  RX: headroom Ethernet0 RX frames + AF_PACKET ring drops / generator veth tx_packets"
        for (i = 1; i <= keys; i++) {
            k = order[i]
            if (k in txcheck) {
                split(k, p, "\t")
                printf "  %5s B %-18s TX:%s\n", p[1], p[2], txcheck[k]
                printf "  %5s B %-18s RX:%s\n", p[1], p[2], rxcheck[k]
            }
        }
    }' "$results"
}

# --- checks -------------------------------------------------------------------------------------
preflight() {
    [[ $(id -u) == 0 ]] || die "needs root (network namespaces, AF_PACKET)"
    for tool in ip "$TESTPMD" python3 taskset timeout awk nice; do
        command -v "$tool" >/dev/null || die "missing tool: $tool"
    done
    [[ -x $HEADROOM ]] || die "no headroom binary at $HEADROOM (cargo build --release -p headroom-cli)"
    local cpus
    cpus=$(nproc --all)
    ((GEN_CPU < cpus && DUT_CPU < cpus && GEN_CPU != DUT_CPU)) ||
        die "GEN_CPU and DUT_CPU must be two different CPUs of $cpus"
}

# --- main ---------------------------------------------------------------------------------------
if [[ -n ${SUMMARY_OF:-} ]]; then
    # Only print the summary of an earlier run's results.
    OUT=$SUMMARY_OF results=$SUMMARY_OF/results.tsv
    [[ -r $results ]] || die "no $results"
    summary
    exit 0
fi
preflight
[[ -n $OUT ]] || OUT=$(mktemp -d /tmp/headroom-bench-afpacket.XXXXXX)
mkdir -p "$OUT"
results=$OUT/results.tsv
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
{
    echo "date: $(date -Is)"
    echo "host: $(uname -nr), $(nproc --all) CPUs: $(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo)"
    echo "uptime: $(uptime)"
    echo "headroom: $("$HEADROOM" --version) ($HEADROOM)"
    echo "testpmd: $(dpkg-query -S "$(readlink -f "$(command -v "$TESTPMD")")" 2>/dev/null | cut -d: -f1) $(dpkg-query -W -f '${Version}' dpdk-dev 2>/dev/null)"
    echo "settings: DURATION=$DURATION WARMUP=$WARMUP REPS=$REPS SIZES='$SIZES' DUTS='$DUTS' GEN_CPU=$GEN_CPU DUT_CPU=$DUT_CPU RPS=$RPS BRIDGE_NF=$BRIDGE_NF NICE=$NICE"
} | tee "$OUT/setup.txt" >&2
printf '%s\t' run size dut load1 gen_mpps gen_drop_mpps dutA_rx_mpps delivered_mpps delivered_gbps \
    loss_pct gen_cpu_busy_pct gen_cpu_softirq_pct dut_cpu_busy_pct dut_cpu_softirq_pct steal_pct \
    testpmd_usr_pct testpmd_sys_pct dut_usr_pct dut_sys_pct dut_ns_per_frame \
    total_gen_tx total_sink_rx total_b_tx_dropped hr_rx_A hr_missed_A hr_tx_B >"$results"
printf 'hr_drops\n' >>"$results"

setup_topology
for run in $(seq 1 "$REPS"); do
    for size in $SIZES; do
        for dut in $DUTS; do
            measure "$run" "$size" "$dut"
        done
    done
done
summary | tee "$OUT/summary.txt"
