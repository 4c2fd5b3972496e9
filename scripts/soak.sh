#!/usr/bin/env bash
# A soak of the switch on the lab: one `headroom run` for N minutes under everything an operator
# and a fabric throw at it, sampled every 10 s, judged at the end.
#
#   scripts/soak.sh [--minutes N] [--prefix P] [--speed S] [--out DIR]
#   scripts/soak.sh --judge DIR/samples.jsonl [--storms N] [--minutes N]   (judge a recorded run)
#
# The lab has four hosts on a switch at --speed (25M by default: a debug lcore keeps up, see
# crates/cli/tests/incast.rs). Every 30-second cycle:
#   t=0   rocegen incast: h0 and h1 RDMA-WRITE to h2 on lossless priority 3, DCQCN (nvidia, lab
#         timescale), for 18 s; TCP with ECN (iperf3, 5 Mb/s, DSCP 4: lossless priority 4) from
#         h3 to h1 for 16 s; every 6th cycle (3 minutes) a PFC storm from h3 on priority 4 (3 s
#         of XOFF at 500 frames/s while a UDP flow on priority 4 goes to h3): the watchdog must
#         detect it and restore the queue within the cycle.
#   t=5   a capture of one port, 5 s, to a pcap file.
#   t=10  one control-plane change, in turn: SIGHUP reload; `set` of a key (a restart of the
#         dataplane) then `config rollback` to the snapshot saved at start; `clear counters`.
#   t=20  idle: no traffic.
# Throughout: four clients poll `show` (ports, fdb, pfc counters, snapshot) twice a second.
#
# Every 10 s: the switch's RSS, open file descriptors and threads, and a scrape of its
# Prometheus endpoint. Judged at the end (exit 1 on any failure, with a table on stdout):
#   - growth: RSS, FDs and threads at the idle samples, after a warm-up, must not grow;
#   - drift: at every idle sample every occupancy (PG use, egress queue occupancy, pool use) is 0;
#   - lossless drops: none (headroom exhausted, ring full, lossless queue drops other than the
#     watchdog's during a storm);
#   - monotonicity: every counter (*_total) of the endpoint never decreases (clears and
#     reconfigurations included);
#   - the watchdog: every storm detected during its cycle and restored by the cycle's end.
#
# Needs root, network namespaces, iproute2, chrt, iperf3, python3 and a built headroom and
# rocegen (target/debug, or SOAK_PROFILE=release). Runs the switch SCHED_FIFO and the traffic at
# nice -10, as the lab tests do; builds nothing itself. Removes its lab at exit.
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
minutes=30
prefix=soak
speed=25M
out=""
judge_only=""
storms_sent=0
while [[ $# -gt 0 ]]; do
    case "$1" in
        --judge) judge_only="$2"; shift 2 ;;
        --storms) storms_sent="$2"; shift 2 ;;
        --minutes) minutes="$2"; shift 2 ;;
        --prefix) prefix="$2"; shift 2 ;;
        --speed) speed="$2"; shift 2 ;;
        --out) out="$2"; shift 2 ;;
        -h|--help) sed -n '2,34p' "$0"; exit 0 ;;
        *) echo "soak: unknown argument $1 (see --help)" >&2; exit 2 ;;
    esac
done
[[ "$minutes" =~ ^[0-9]+$ && "$minutes" -ge 1 ]] || { echo "soak: --minutes must be a whole number >= 1" >&2; exit 2; }

# Judges a samples file: prints the table, exits 1 on any failure.
judge() {
    python3 - "$@" <<'JUDGE'
import json, re, sys
path, storms, minutes = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
samples = [json.loads(l) for l in open(path)]
line = re.compile(r'^([a-z_]+)(\{[^}]*\})? (\S+)$')
def parse(page):
    m = {}
    for l in page.splitlines():
        g = line.match(l)
        if g:
            m[(g.group(1), g.group(2) or "")] = float(g.group(3))
    return m
for s in samples:
    s["m"] = parse(s["metrics"])
failures = []
# Monotonicity of every counter.
prev = {}
decreases = 0
for s in samples:
    for (name, labels), v in s["m"].items():
        if name.endswith("_total") or name.endswith("_count") or name.endswith("_sum"):
            k = (name, labels)
            if k in prev and v < prev[k]:
                decreases += 1
                if decreases <= 5:
                    failures.append(f"counter {name}{labels} went from {prev[k]} to {v} at t={s['t']}")
            prev[k] = v
# Drift: every occupancy 0 at idle samples.
idle = [s for s in samples if s["phase"] == "idle" and s["m"]]
drift = 0
for s in idle:
    for (name, labels), v in s["m"].items():
        if name in ("headroom_pg_used_bytes", "headroom_queue_occupancy_bytes", "headroom_pool_used_bytes") and v != 0:
            drift += 1
            if drift <= 5:
                failures.append(f"idle at t={s['t']}: {name}{labels} = {v}")
# Lossless drops.
def total(m, name, pred=lambda labels: True):
    return sum(v for (n, l), v in m.items() if n == name and pred(l))
last = samples[-1]["m"] if samples and samples[-1]["m"] else {}
lossless = (total(last, "headroom_port_drops_total", lambda l: 'reason="ingress_headroom_exhausted"' in l)
            + total(last, "headroom_port_drops_total", lambda l: 'reason="queue_ring_full"' in l)
            + total(last, "headroom_queue_drop_frames_total", lambda l: 'queue="3"' in l or 'queue="4"' in l)
            - total(last, "headroom_port_drops_total", lambda l: 'reason="pfcwd_queue"' in l))
if lossless != 0:
    failures.append(f"{lossless:.0f} lossless drops")
detected = total(last, "headroom_pfcwd_storms_detected_total")
restored = total(last, "headroom_pfcwd_storms_restored_total")
# Every storm detected during its cycle, and restored by the cycle's idle moment (a pause that
# outlives the storm's last frame may be detected again and restored again: counted, fine).
missed = []
previous_idle = {}
for s in idle:
    previous = previous_idle.get("m", {})
    if s.get("storm"):
        d0 = total(previous, "headroom_pfcwd_storms_detected_total")
        d1 = total(s["m"], "headroom_pfcwd_storms_detected_total")
        r1 = total(s["m"], "headroom_pfcwd_storms_restored_total")
        if d1 <= d0 or r1 != d1:
            missed.append(f"cycle {s['cycle']}: detected {d0:.0f} -> {d1:.0f}, restored {r1:.0f}")
    previous_idle = s
storm_cycles = sum(1 for s in idle if s.get("storm"))
if storms and (storm_cycles < storms or missed):
    failures.append(f"watchdog: {storms} storms, {storm_cycles} judged; " + "; ".join(missed))
# Growth at idle samples after a warm-up (the first cycle, and the first fifth of the run).
warm = [s for s in idle[1:] if s["t"] >= samples[-1]["t"] / 5] if samples else []
def slope(xs, ys):
    n = len(xs)
    if n < 3:
        return 0.0
    mx, my = sum(xs) / n, sum(ys) / n
    den = sum((x - mx) ** 2 for x in xs)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / den if den else 0.0
rows = []
for key, unit, allowed in (("rss_kib", "KiB", None), ("fds", "", 2), ("threads", "", 0)):
    ys = [s[key] for s in warm]
    xs = [s["t"] for s in warm]
    if not ys:
        rows.append((key, "-", "-", "-", "-", "no idle samples"))
        failures.append(f"{key}: no idle sample after the warm-up")
        continue
    growth = slope(xs, ys) * (xs[-1] - xs[0]) if len(ys) >= 3 else 0.0
    if key == "rss_kib":
        # Allowed: 2 MiB or 3 % over the run, whichever is larger (allocator noise).
        allowed_kib = max(2048.0, 0.03 * ys[0])
        ok = growth <= allowed_kib
        verdict = f"trend {growth:+.0f} KiB (allowed {allowed_kib:.0f})"
    else:
        ok = max(ys) - min(ys) <= allowed and growth <= max(allowed, 0.5)
        verdict = f"range {min(ys)}..{max(ys)}, trend {growth:+.1f}"
    rows.append((key, ys[0], ys[-1], min(ys), max(ys), verdict + ("" if ok else "  FAIL")))
    if not ok:
        failures.append(f"{key} grows: {verdict}")
print()
print(f"soak: {minutes} min, {len(samples)} samples every 10 s ({len(idle)} idle), {storms} PFC storms")
print(f"| figure | first idle | last idle | min | max | verdict |")
print(f"|---|---|---|---|---|---|")
for r in rows:
    print("| " + " | ".join(str(x) for x in r) + " |")
print(f"| occupancy at idle (PG, queue, pool) | | | | | {'0 everywhere' if drift == 0 else f'{drift} non-zero FAIL'} |")
print(f"| lossless drops | | | | | {lossless:.0f}{'' if lossless == 0 else '  FAIL'} |")
print(f"| counters decreasing | | | | | {decreases}{'' if decreases == 0 else '  FAIL'} |")
print(f"| PFC storms each detected and restored | | | | | {storms - len(missed)} of {storms} ({detected:.0f} detections, {restored:.0f} restorations){'' if not missed else '  FAIL'} |")
frames = total(last, "headroom_port_rx_frames_total")
print(f"| frames received (since start) | | | | | {frames:.0f} |")
if failures:
    print("\nFAILED:\n  " + "\n  ".join(failures))
    sys.exit(1)
print("\nsoak passed")
JUDGE
}

if [[ -n "$judge_only" ]]; then
    judge "$judge_only" "$storms_sent" "$minutes"
    exit $?
fi

profile="${SOAK_PROFILE:-debug}"
bin="$repo_root/target/$profile"
headroom="$bin/headroom"
rocegen="$bin/rocegen"
for tool in ip chrt nice iperf3 python3 flock timeout; do
    command -v "$tool" >/dev/null || { echo "soak: $tool is missing" >&2; exit 2; }
done
for b in "$headroom" "$rocegen"; do
    [[ -x "$b" ]] || { echo "soak: $b is missing; build it first (cargo build -p headroom-cli -p headroom-rocegen)" >&2; exit 2; }
done
[[ "$(id -u)" -eq 0 ]] || { echo "soak: needs root (namespaces, veth pairs, packet sockets)" >&2; exit 2; }

# One lab run at a time on this machine: the end-to-end tests take the same lock.
exec 9>/run/lock/headroom-e2e.lock
if ! flock -n 9; then
    echo "soak: waiting for /run/lock/headroom-e2e.lock (an end-to-end test runs)" >&2
    flock 9
fi

out="${out:-$(mktemp -d /tmp/headroom-soak.XXXXXX)}"
mkdir -p "$out"
config="$out/switch.toml"
socket="/run/headroom/${prefix}-lab.sock"
metrics_port=$(( 19000 + RANDOM % 1000 ))
log() { printf '[soak %s] %s\n' "$(date +%H:%M:%S)" "$*"; }

# Everything the soak starts is ended at exit, whatever the exit (the end, a failure, a signal):
# each background process it starts is in `pids` and ends with all its descendants (a rocegen
# under `timeout` under `ip netns exec`, a poller loop and the `headroom show` it runs); then the
# switch stops; then whatever still runs in the lab's namespaces (all of it started here) is
# killed and the lab removed. Anything left (a process, a namespace) makes the exit status 1.
pids=()
switch_pid=""
# Stops a process, then its descendants, then ends them all (stopped first, so that none spawns
# a child meanwhile); prints the pids it signalled.
kill_tree() {
    local pid=$1 child
    kill -STOP "$pid" 2>/dev/null || return 0
    for child in $(pgrep -P "$pid"); do kill_tree "$child"; done
    kill -TERM "$pid" 2>/dev/null
    kill -CONT "$pid" 2>/dev/null
    echo "$pid"
}
# Waits up to $1 tenths of a second for the pids that follow to exit; kills the survivors.
reap() {
    local tenths=$1 p alive
    shift
    for _ in $(seq "$tenths"); do
        alive=0
        for p in "$@"; do kill -0 "$p" 2>/dev/null && alive=1; done
        (( alive )) || return 0
        sleep 0.1
    done
    for p in "$@"; do kill -KILL "$p" 2>/dev/null; done
}
# Keeps in `pids` only the soak's own children that still run (a finished one's pid may be
# reused by anyone's process).
prune_pids() {
    local p live=()
    for p in "${pids[@]}"; do
        [[ "$(ps -o ppid= -p "$p" 2>/dev/null | tr -d ' ')" == "$$" ]] && live+=("$p")
    done
    pids=("${live[@]}")
}
lab_namespaces() { ip netns list | awk -v p="$prefix-" 'index($1, p) == 1 { print $1 }'; }
cleanup() {
    local status=$? victims=() ns stray left=()
    set +e
    trap - EXIT INT TERM HUP
    prune_pids
    for p in "${pids[@]}"; do mapfile -t -O "${#victims[@]}" victims < <(kill_tree "$p"); done
    (( ${#victims[@]} )) && reap 50 "${victims[@]}"
    if [[ -n "$switch_pid" ]] && kill -0 "$switch_pid" 2>/dev/null; then
        kill -TERM "$switch_pid"
        reap 300 "$switch_pid"
    fi
    wait 2>/dev/null
    for ns in $(lab_namespaces); do
        stray=$(ip netns pids "$ns" 2>/dev/null | xargs)
        if [[ -n "$stray" ]]; then
            echo "soak: killing what still ran in $ns: $(ps -o pid=,comm= -p "${stray// /,}" | xargs)" >&2
            # shellcheck disable=SC2086
            kill -KILL $stray 2>/dev/null
        fi
    done
    [[ -x "$headroom" ]] && "$headroom" lab down --prefix "$prefix" >/dev/null 2>&1
    for p in "${victims[@]}" $switch_pid; do kill -0 "$p" 2>/dev/null && left+=("process $p"); done
    for ns in $(lab_namespaces); do left+=("namespace $ns"); done
    if (( ${#left[@]} )); then
        echo "soak: left behind: ${left[*]}" >&2
        status=1
    fi
    exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP

host_ns() { echo "${prefix}-h$1"; }
in_host() { local h="$1"; shift; ip netns exec "$(host_ns "$h")" nice -n -10 "$@"; }

log "lab $prefix: 4 hosts at $speed; output in $out"
"$headroom" lab up --no-switch --prefix "$prefix" --hosts 4 --speed "$speed" --write-config "$config" >"$out/lab-up.log"
# The metrics endpoint on a free port; `headroom lab` opens it in the namespace it was started
# from (this one), not the switch's. SIGHUP reloads this file.
sed -i "s/^prometheus_listen = .*/prometheus_listen = \"127.0.0.1:$metrics_port\"/" "$config"
chrt --fifo 10 "$headroom" lab --prefix "$prefix" --hosts 4 --speed "$speed" --config "$config" \
    --log-format text >"$out/switch.stdout" 2>"$out/switch.stderr" &
switch_pid=$!
for _ in $(seq 300); do
    grep -q "headroom running" "$out/switch.stderr" 2>/dev/null && break
    kill -0 "$switch_pid" 2>/dev/null || { cat "$out/switch.stderr" >&2; echo "soak: the switch exited" >&2; exit 1; }
    sleep 0.1
done
grep -q "headroom running" "$out/switch.stderr" || { echo "soak: the switch did not start" >&2; exit 1; }
hr() { "$headroom" "$@" --socket "$socket"; }
hr config save soak-start >/dev/null
# Hosts announce themselves (the lab's hosts are silent otherwise).
for h in 0 1 2 3; do in_host "$h" ping -c 1 -W 1 10.0.0.$(( (h + 1) % 4 + 1 )) >/dev/null 2>&1 || true; done

# Pollers: four clients asking `show` in a loop.
for what in "ports" "fdb" "pfc counters" "snapshot"; do
    # shellcheck disable=SC2086
    ( while true; do hr show $what --json >/dev/null 2>&1; sleep 0.5; done ) &
    pids+=($!)
done

# One sample: the switch's RSS, FDs and threads, and its whole metrics page (one JSON line).
sample() {
    python3 - "$switch_pid" "${prefix}-sw" "$metrics_port" "$out/samples.jsonl" "$1" "$start" "$2" "$3" <<'SAMPLE'
import json, os, sys, time, urllib.request
pid, ns, port, path, phase, start, cycle, storm = sys.argv[1:9]
status = open(f"/proc/{pid}/status").read()
field = lambda k: int(next(l.split()[1] for l in status.splitlines() if l.startswith(k)))
fds = len(os.listdir(f"/proc/{pid}/fd"))
# The exporter listens in the soak's own namespace (`headroom lab` opens it before entering
# the switch's). A failed scrape leaves the page empty, which the judge reports.
try:
    page = urllib.request.urlopen("http://127.0.0.1:%s/metrics" % port, timeout=5).read().decode()
except OSError as e:
    sys.stderr.write(f"soak: metrics scrape failed: {e}\n")
    page = ""
with open(path, "a") as f:
    f.write(json.dumps({"t": round(time.time() - float(start), 1), "phase": phase,
                        "cycle": int(cycle), "storm": storm == "1",
                        "rss_kib": field("VmRSS:"), "threads": field("Threads:"), "fds": fds,
                        "metrics": page}) + "\n")
SAMPLE
}
start=$(date +%s.%N)

rocegen_common=(write_bw -d eth0 --link-speed "$speed" --tclass 12 --dcqcn nvidia --json
    --dce_tcp_rtt 1000 --rpg_time_reset 10000 --rpg_byte_reset 0 --rpg_ai_rate 1
    --rpg_hai_rate 5 --rate_reduce_monitor_period 1000)

storm() {
    # h1 sends UDP on DSCP 4 to h3 while h3 pauses priority 4 with PFC XOFF: a queue held by
    # its peer, what the watchdog exists for.
    ip netns exec "$(host_ns 1)" python3 -c '
import socket, time
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.setsockopt(socket.IPPROTO_IP, socket.IP_TOS, 0x10)
end = time.time() + 4
while time.time() < end:
    s.sendto(b"x" * 200, ("10.0.0.4", 9)); time.sleep(0.002)' &
    local udp=$!
    ip netns exec "$(host_ns 3)" python3 -c '
import socket, time
mac = open("/sys/class/net/eth0/address").read().strip()
src = bytes.fromhex(mac.replace(":", ""))
frame = bytes.fromhex("0180c2000001") + src + bytes.fromhex("88080101" "0010") + bytes(8) + bytes.fromhex("ffff") + bytes(6)
frame = frame.ljust(60, b"\0")
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
s.bind(("eth0", 0))
time.sleep(0.5)
end = time.time() + 3
while time.time() < end:
    s.send(frame); time.sleep(0.002)'
    wait "$udp"
}

cycles=$(( minutes * 2 ))
storms=0
log "soak: $cycles cycles of 30 s"
# The TCP server in the foreground of a background job (not `iperf3 -D`, which would outlive
# the soak).
in_host 1 iperf3 -s -p 5201 --logfile "$out/iperf3-server.log" &
pids+=($!)
for cycle in $(seq 0 $(( cycles - 1 ))); do
    t0=$(date +%s)
    in_host 2 timeout 40 "$rocegen" "${rocegen_common[@]}" --clients 2 >"$out/rocegen-server.json" 2>>"$out/rocegen.err" &
    server=$!
    pids+=("$server")
    sleep 0.3
    for h in 0 1; do
        in_host "$h" timeout 40 "$rocegen" "${rocegen_common[@]}" -s 65536 -t 32 -D 18 10.0.0.3 >"$out/rocegen-client$h.json" 2>>"$out/rocegen.err" &
        pids+=($!)
    done
    in_host 3 iperf3 -c 10.0.0.2 -p 5201 -t 16 -b 5M --tos 0x10 -J >"$out/iperf3-$cycle.json" 2>&1 &
    pids+=($!)
    stormy=0
    # A storm every 3 minutes, in the cycles whose change is `clear counters` (not a restart:
    # a storm in progress ends with a replaced dataplane).
    if (( cycle % 6 == 2 )); then storm & pids+=($!); storms=$(( storms + 1 )); stormy=1; fi
    sleep 5
    sample traffic "$cycle" "$stormy"
    timeout 10 "$headroom" capture --port Ethernet2 --duration 5 -w "$out/capture.pcap" --socket "$socket" >/dev/null 2>&1 &
    pids+=($!)
    sleep 5
    case $(( cycle % 3 )) in
        0) kill -HUP "$switch_pid"; echo "$cycle sighup" >>"$out/changes.log" ;;
        1) hr set wred LAB_LOSSLESS --min 50000 >>"$out/changes.log" 2>&1
           sleep 2
           hr config rollback soak-start >>"$out/changes.log" 2>&1 ;;
        2) hr clear counters >>"$out/changes.log" 2>&1 ;;
    esac
    sleep $(( 15 - ($(date +%s) - t0) > 0 ? 15 - ($(date +%s) - t0) : 0 ))
    sample traffic "$cycle" "$stormy"
    wait "$server" || echo "$cycle rocegen server exit $?" >>"$out/rocegen.err"
    # Idle: everything has stopped for a few seconds.
    sleep $(( 25 - ($(date +%s) - t0) > 0 ? 25 - ($(date +%s) - t0) : 0 ))
    sample idle "$cycle" "$stormy"
    sleep $(( 30 - ($(date +%s) - t0) > 0 ? 30 - ($(date +%s) - t0) : 0 ))
    prune_pids
    log "cycle $(( cycle + 1 ))/$cycles"
done

log "judging $(wc -l <"$out/samples.jsonl") samples"
judge "$out/samples.jsonl" "$storms" "$minutes"
