//! Per-packet cost of headroom's dataplane core, next to a baseline that only moves the frames.
//!
//! * `per_packet/headroom/{64,1024}`: a 4-port single-lcore [`LcoreStep`] driven in its
//!   documented call order (`step.rs`): every port receives a burst of 32 frames
//!   (`handle_rx_burst`), then `handle_timeout`, then every port transmits up to 32 frames
//!   (`poll_tx_burst`), then `poll_punt` and `poll_event` (both find nothing); the frames sent
//!   are dropped, which returns their buffers to the pool. Each frame goes through L2 parse,
//!   VLAN filtering, DSCP classification, FDB learn + lookup, ingress PG and egress queue
//!   admission, the SPSC ring, DWRR scheduling and shaping, WRED/ECN on the lossless queues, the
//!   release of its cells and the accounting sync. Traffic covers 4 ports × 8 queues.
//! * `per_packet/routed/{64,1024}`: the same rig and traffic with every port a router interface
//!   ([`HeadroomRig::routed`]): frames go to the ingress port's router MAC and are routed by a
//!   FIB of 1004 IPv4 /24s (router-MAC check, IPv4 header check with its checksum, LPM, MAC
//!   rewrite, TTL−1 with the RFC 1624 update) instead of FDB learn + lookup; everything after
//!   (admission, rings, scheduling, ECN) is the same.
//! * `per_packet/baseline/{64,1024}`: the same frames, from the same pool, in the same bursts of
//!   32, pushed into the same number of rtrb rings (one per port × queue, same capacity) chosen
//!   by a precomputed table, and drained round robin up to 32 per port. No parsing,
//!   classification, accounting, scheduling or ECN.
//! * `ports/{2,64}`: the same per-packet work at 64 B on a 2-port switch and on a 64-port switch
//!   (64 × 8 queues all carrying traffic), to show what the port count costs per packet
//!   ([`PortsRig`]).
//! * `parts/*`: single stages of the path, to explain where the time goes.
//!
//! One iteration of `per_packet` is one round of 4 × 32 = 128 frames; criterion reports it per
//! element (`Throughput::Elements`). `scripts/bench.sh` runs this and prints ns/packet and the
//! ratio headroom / baseline; `docs/perf.md` records results and the profile.
//!
//! Frames come from the runtime's own pool (`headroom_io::pool::FramePool`, a dev-dependency;
//! benches link one copy of the core, the one `headroom-io` uses). Receiving a frame is
//! modelled as taking a buffer from the pool and writing the frame's first
//! 64 bytes (every header the core reads, and the ECN bits it rewrites); the payload beyond is
//! left as it is in the buffer, so the 1024 B case measures the core at that frame length, not a
//! 1 KiB `memcpy`. Both the headroom and the baseline rounds do exactly the same receive and
//! transmit work.
//!
//! Time is the thread's CPU time (`CLOCK_THREAD_CPUTIME_ID`), not wall time: the build machine is
//! shared, and wall time also counts the time the thread waits for a CPU while others build.
//!
//! Three more modes, selected by environment variables and run without criterion (see `main`):
//! `HEADROOM_BENCH_COUNT` runs a fixed number of rounds for callgrind's exact instruction counts,
//! `HEADROOM_BENCH_RATIO` alternates the baseline, L2 and routed rigs and reports the ratios
//! headroom / baseline and routed / headroom from one process,
//! `HEADROOM_BENCH_PORTS_RATIO` does the same for the two port-count rigs.

use criterion::{black_box, criterion_group, Bencher, BenchmarkId, Criterion, Throughput};
use headroom_core::buffer::{EgressBuffers, IngressBuffers, PoolBoard};
use headroom_core::counters::DropReason;
use headroom_core::fdb::Fdb;
use headroom_core::frame::Frame;
use headroom_core::params::{presets, SchedulerKind, SwitchParams, VlanMode, WredParams};
use headroom_core::route::{
    fib_channel, FibBuilder, FibConfig, Ipv4Prefix, NextHop, NextHopId, RouteTarget,
};
use headroom_core::sched::QueueScheduler;
use headroom_core::step::LcoreStep;
use headroom_core::switch::lossless_queues;
use headroom_core::time::Instant;
use headroom_core::types::{PortId, TrafficClass, PRIORITY_COUNT};
use headroom_core::wred::{decide, WredRng};
use headroom_io::pool::{FramePool, PoolConfig, PoolFrame};
use headroom_wire::ethernet::parse_l2;
use headroom_wire::ethernet::MacAddress;
use headroom_wire::ipv4::Ipv4Packet;
use headroom_wire::Ecn;
use rtrb::{Consumer, Producer, RingBuffer};
use std::net::Ipv4Addr;
use std::time::Duration;

const PORTS: usize = 4;
const BURST: usize = 32;
const FRAMES_PER_ROUND: usize = PORTS * BURST;
/// Bytes written into a buffer when a frame is "received": every header the core reads.
const HEADER_BYTES: usize = 64;
/// Buffers of the frame pool of the 4-port rigs (the port-count rigs size theirs by port).
const POOL_FRAMES: usize = 1024;
/// Virtual time per round. At 4 × 100 Gb/s a round of 128 × 1024 B frames lasts about 2.7 µs on
/// the wire; the shaper is set far above that so that it never holds a frame back.
const ROUND_NS: u64 = 1_000;

/// Time this thread has spent on a CPU.
fn thread_cpu_time() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable `timespec` that outlives the call; the clock id is a
    // constant Linux supports. No other memory is touched.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime(CLOCK_THREAD_CPUTIME_ID)");
    Duration::new(
        u64::try_from(ts.tv_sec).unwrap_or(0),
        u32::try_from(ts.tv_nsec).unwrap_or(0),
    )
}

/// Like `Bencher::iter`, timed in thread CPU time.
fn iter_cpu<R>(b: &mut Bencher<'_>, mut routine: impl FnMut() -> R) {
    b.iter_custom(|iters| {
        let start = thread_cpu_time();
        for _ in 0..iters {
            black_box(routine());
        }
        thread_cpu_time().saturating_sub(start)
    });
}

type Pool = FramePool;

/// "Receives" a frame of `len` bytes whose first bytes are `header` (the rest is what the
/// buffer held), from the runtime's own frame pool (`headroom_io::pool`).
#[inline]
fn receive(pool: &Pool, header: &[u8], len: usize) -> Option<PoolFrame> {
    let mut frame = pool.alloc_unzeroed(len)?;
    frame.data_mut()[..header.len()].copy_from_slice(header);
    Some(frame)
}

fn new_pool(frames: usize) -> Pool {
    let pool = FramePool::new(PoolConfig::with_frame_count(frames)).expect("a valid pool");
    // As every backend queue does on its lcore: this thread (the rig's) allocates and frees
    // through its own cache of the pool.
    pool.attach_thread_cache();
    pool
}

/// Whether every buffer of `pool` is back.
fn pool_is_full(pool: &Pool) -> bool {
    let stats = pool.stats();
    stats.available == stats.capacity
}

/// The MAC address of the one host behind `port`.
fn host_mac(port: usize) -> [u8; 6] {
    let last = u8::try_from(port + 1).unwrap_or(u8::MAX);
    [0x02, 0xbb, 0, 0, 0, last]
}

/// Where frame `j` of a burst received on `port` goes: another port, and a traffic class.
/// Over one burst of 32, every (other port, class) pair occurs at least once, and every egress
/// port receives exactly 32 frames per round (11 + 11 + 10 from the three other ports).
fn route(port: usize, j: usize) -> (usize, usize) {
    ((port + 1 + j % 3) % PORTS, j % PRIORITY_COUNT)
}

/// DSCP of traffic class `tc` in the bench's map.
fn dscp_of(tc: usize) -> u8 {
    u8::try_from(tc * 8).unwrap_or(0)
}

/// The first [`HEADER_BYTES`] of an IPv4/UDP frame of `len` bytes, ECT(0).
fn header(src: [u8; 6], dst: [u8; 6], dscp: u8, len: usize) -> Vec<u8> {
    let payload = vec![0x5a; len - 42];
    let mut buf = Vec::with_capacity(len);
    etherparse::PacketBuilder::ethernet2(src, dst)
        .ipv4([10, 0, 0, 1], [10, 0, 0, 2], 64)
        .udp(49152, 4791)
        .write(&mut buf, &payload)
        .expect("a Vec grows");
    let mut ip = Ipv4Packet::new_checked(&mut buf[14..]).expect("valid IPv4");
    ip.set_dscp(dscp);
    ip.set_ecn(Ecn::Ect0);
    ip.fill_checksum();
    assert_eq!(buf.len(), len);
    buf.truncate(HEADER_BYTES);
    buf
}

/// `[port][j]`: the header of frame `j` of every burst received on `port`.
fn templates(len: usize) -> Vec<Vec<Vec<u8>>> {
    (0..PORTS)
        .map(|p| {
            (0..BURST)
                .map(|j| {
                    let (d, tc) = route(p, j);
                    header(host_mac(p), host_mac(d), dscp_of(tc), len)
                })
                .collect()
        })
        .collect()
}

/// `presets::simple` with: DSCP 8·t → TC t (so all eight queues carry traffic), a shaper that
/// never limits, and WRED/ECN on the lossless queues (3 and 4) with Kmin = 0 and Kmax = eight
/// frames of `len`, so that a fair share of ECT frames there is marked and the whole ECN path
/// (probability, random draw, CE rewrite with checksum update) runs.
fn bench_params(len: usize) -> SwitchParams {
    bench_params_for(PORTS, len)
}

/// [`bench_params`] for `ports` ports.
fn bench_params_for(ports: usize, len: usize) -> SwitchParams {
    let mut params = presets::simple(ports, 100_000_000_000);
    let lossless = lossless_queues(&params);
    for (p, port) in params.ports.iter_mut().enumerate() {
        for tc in 0..PRIORITY_COUNT {
            port.maps.dscp_to_tc[usize::from(dscp_of(tc))] =
                TrafficClass::from_low_bits(u8::try_from(tc).unwrap_or(0));
        }
        port.shaper_rate_bps = 1_000_000_000_000_000;
        for (q, queue) in port.queues.iter_mut().enumerate() {
            if lossless[p][q] {
                queue.wred = Some(WredParams {
                    ecn_mark: true,
                    drop_enable: false,
                    min_threshold_bytes: 0,
                    max_threshold_bytes: 8 * len as u64,
                    probability_percent: 100,
                });
            }
        }
    }
    params
}

/// Fills `rx` with the burst `port` receives.
#[inline]
fn receive_burst(pool: &Pool, headers: &[Vec<u8>], len: usize, rx: &mut Vec<PoolFrame>) {
    for h in headers {
        rx.push(receive(pool, h, len).expect("the pool never runs dry"));
    }
}

/// The full path.
struct HeadroomRig {
    sw: LcoreStep<PoolFrame>,
    pool: Pool,
    headers: Vec<Vec<Vec<u8>>>,
    len: usize,
    now: Instant,
    rx: Vec<PoolFrame>,
    tx: Vec<PoolFrame>,
}

impl HeadroomRig {
    fn new(len: usize) -> Self {
        let now = Instant::from_millis(1);
        let mut rig = Self {
            sw: LcoreStep::single(bench_params(len), now).expect("valid parameters"),
            pool: new_pool(POOL_FRAMES),
            headers: templates(len),
            len,
            now,
            rx: Vec::with_capacity(BURST),
            tx: Vec::with_capacity(BURST),
        };
        // Pre-learn every host (the first round floods, since nothing is known yet).
        for p in 0..PORTS {
            let h = header(host_mac(p), [0xff; 6], 0, 64);
            rig.rx.push(receive(&rig.pool, &h, 64).expect("room"));
            rig.sw
                .handle_rx_burst(rig.now, PortId(port_id(p)), &mut rig.rx);
        }
        for p in 0..PORTS {
            rig.drain(p);
        }
        rig
    }

    /// The same traffic routed: every port is a router interface, frame `j` of a burst on
    /// `port` is addressed to `port`'s router MAC and to 10.0.d.2 (d its egress port, as in
    /// [`route`]); the FIB has 10.0.d.0/24 → the host behind d, and 1000 other /24s. Each frame
    /// takes the router-MAC check, the IPv4 header check (checksum included), the LPM, the
    /// rewrite (MACs, TTL−1 with the RFC 1624 update), then the same path as `new`'s.
    fn routed(len: usize) -> Self {
        let now = Instant::from_millis(1);
        let mut params = bench_params(len);
        for port in &mut params.ports {
            port.vlan = VlanMode::Routed;
        }
        let router_macs: Vec<[u8; 6]> = params.ports.iter().map(|p| p.mac).collect();
        let mut sw = LcoreStep::single(params, now).expect("valid parameters");
        let mut fib = FibBuilder::new(FibConfig::default()).expect("a FIB");
        for d in 0..PORTS {
            let hop = fib
                .add_next_hop(NextHop::Resolved {
                    port: PortId(port_id(d)),
                    vlan: None,
                    mac: MacAddress(host_mac(d)),
                })
                .expect("room");
            let prefix = Ipv4Prefix::new(Ipv4Addr::new(10, 0, d as u8, 0), 24).expect("a /24");
            fib.set_route_v4(prefix, RouteTarget::NextHop(hop))
                .expect("room");
        }
        for i in 0..1000u32 {
            let prefix = Ipv4Prefix::new(Ipv4Addr::from(0x0b00_0000 | (i << 8)), 24).expect("/24");
            fib.set_route_v4(prefix, RouteTarget::NextHop(NextHopId::BLACKHOLE))
                .expect("room");
        }
        let (_sender, reader) = fib_channel(fib.publish().expect("changes"));
        sw.attach_fib(reader);
        let headers = (0..PORTS)
            .map(|p| {
                (0..BURST)
                    .map(|j| {
                        let (d, tc) = route(p, j);
                        let mut h = header(host_mac(p), router_macs[p], dscp_of(tc), len);
                        h[30..34].copy_from_slice(&[10, 0, d as u8, 2]);
                        let mut ip = Ipv4Packet::new_unchecked(&mut h[14..34]);
                        ip.fill_checksum();
                        h
                    })
                    .collect()
            })
            .collect();
        Self {
            sw,
            pool: new_pool(POOL_FRAMES),
            headers,
            len,
            now,
            rx: Vec::with_capacity(BURST),
            tx: Vec::with_capacity(BURST),
        }
    }

    fn drain(&mut self, port: usize) -> usize {
        let pool = &self.pool;
        let n = self.sw.poll_tx_burst(
            self.now,
            PortId(port_id(port)),
            &mut self.tx,
            BURST,
            &mut |len| pool.alloc(len),
        );
        // Transmitted: the buffers go back to the pool.
        self.tx.clear();
        n
    }

    /// One loop iteration of a run-to-completion lcore: 128 frames in, 128 frames out.
    /// Never inlined, so that a profile can divide its inclusive cost by its calls.
    #[inline(never)]
    fn round(&mut self) -> usize {
        self.now = self.now.saturating_add_nanos(ROUND_NS);
        for p in 0..PORTS {
            receive_burst(&self.pool, &self.headers[p], self.len, &mut self.rx);
            self.sw
                .handle_rx_burst(self.now, PortId(port_id(p)), &mut self.rx);
        }
        self.sw.handle_timeout(self.now);
        let mut sent = 0;
        for p in 0..PORTS {
            sent += self.drain(p);
        }
        while let Some(punted) = self.sw.poll_punt() {
            drop(black_box(punted));
        }
        while let Some(event) = self.sw.poll_event() {
            black_box(event);
        }
        sent
    }

    /// Runs rounds and checks that the bench measures what it says: everything received is sent,
    /// nothing is dropped, every queue of every port carries traffic, ECN marks some frames.
    fn check(&mut self) {
        let rounds = 2000;
        for _ in 0..rounds {
            assert_eq!(
                self.round(),
                FRAMES_PER_ROUND,
                "a round sends what it received"
            );
        }
        let mut sent = 0;
        let mut marked = 0;
        for p in 0..PORTS {
            let tx = self
                .sw
                .egress()
                .expect("both sides")
                .port_counters(PortId(port_id(p)));
            let rx = self
                .sw
                .ingress()
                .expect("both sides")
                .port_counters(PortId(port_id(p)));
            for q in 0..PRIORITY_COUNT {
                assert!(
                    tx.tx_frames[q].get() > 0,
                    "port {p} queue {q} carries traffic"
                );
                sent += tx.tx_frames[q].get();
                marked += tx.ecn_marked[q].get();
            }
            for r in DropReason::ALL {
                assert_eq!(rx.drops[r.index()].get(), 0, "port {p}: {} drops", r.name());
                assert_eq!(tx.drops[r.index()].get(), 0, "port {p}: {} drops", r.name());
            }
            assert_eq!(tx.pfc_frames_tx.get(), 0, "port {p} sends no PFC");
        }
        assert!(marked > 0, "the ECN path marks frames");
        assert!(pool_is_full(&self.pool), "every buffer came back");
        eprintln!(
            "headroom {} B: {sent} frames sent, {marked} CE-marked ({:.1} %), no drop",
            self.len,
            100.0 * marked as f64 / sent as f64
        );
    }
}

fn port_id(p: usize) -> u16 {
    u16::try_from(p).unwrap_or(u16::MAX)
}

/// The same frames through the same kind and number of rings, with no QoS work.
struct BaselineRig {
    producers: Vec<Vec<Producer<PoolFrame>>>,
    consumers: Vec<Vec<Consumer<PoolFrame>>>,
    /// `[port][j]`: (egress port, queue) of frame `j` of a burst, as the core would decide.
    routes: Vec<Vec<(usize, usize)>>,
    next_queue: Vec<usize>,
    pool: Pool,
    headers: Vec<Vec<Vec<u8>>>,
    len: usize,
    rx: Vec<PoolFrame>,
    tx: Vec<PoolFrame>,
}

impl BaselineRig {
    fn new(len: usize) -> Self {
        let ring_frames = bench_params(len).queue_ring_frames as usize;
        let mut producers = Vec::new();
        let mut consumers = Vec::new();
        for _ in 0..PORTS {
            let (p, c): (Vec<_>, Vec<_>) = (0..PRIORITY_COUNT)
                .map(|_| RingBuffer::new(ring_frames))
                .unzip();
            producers.push(p);
            consumers.push(c);
        }
        Self {
            producers,
            consumers,
            routes: (0..PORTS)
                .map(|p| (0..BURST).map(|j| route(p, j)).collect())
                .collect(),
            next_queue: vec![0; PORTS],
            pool: new_pool(POOL_FRAMES),
            headers: templates(len),
            len,
            rx: Vec::with_capacity(BURST),
            tx: Vec::with_capacity(BURST),
        }
    }

    /// Never inlined, like [`HeadroomRig::round`].
    #[inline(never)]
    fn round(&mut self) -> usize {
        for p in 0..PORTS {
            receive_burst(&self.pool, &self.headers[p], self.len, &mut self.rx);
            for (frame, &(out, q)) in self.rx.drain(..).zip(&self.routes[p]) {
                // A full ring drops the frame, as the core does.
                let _ = self.producers[out][q].push(frame);
            }
        }
        let mut sent = 0;
        for p in 0..PORTS {
            let rings = &mut self.consumers[p];
            let mut q = self.next_queue[p];
            let mut idle = 0;
            while self.tx.len() < BURST && idle < PRIORITY_COUNT {
                match rings[q].pop() {
                    Ok(frame) => {
                        self.tx.push(frame);
                        idle = 0;
                    }
                    Err(_) => idle += 1,
                }
                q = (q + 1) % PRIORITY_COUNT;
            }
            self.next_queue[p] = q;
            sent += self.tx.len();
            self.tx.clear();
        }
        sent
    }

    fn check(&mut self) {
        for _ in 0..2000 {
            assert_eq!(
                self.round(),
                FRAMES_PER_ROUND,
                "a round sends what it received"
            );
        }
        assert!(pool_is_full(&self.pool), "every buffer came back");
    }
}

/// The port-count rigs: the same per-packet work as [`HeadroomRig`] at 64 B (every port
/// receives a burst of 32 frames per round, each for another port and one of eight classes, and
/// transmits 32) on 2 ports and on 64 ports × 8 queues, so that what a larger switch costs per
/// packet shows: its state (counters, accounting, rings, FDB) no longer fits the caches the
/// 2-port switch's does. Both use rings of [`PORTS_RING_FRAMES`] and pools sized so that every
/// port keeps the preset's shared space.
const PORT_COUNTS: [usize; 2] = [2, 64];
const PORTS_RING_FRAMES: u32 = 256;
const PORTS_FRAME_LEN: usize = 64;

/// Where frame `j` of a burst received on `port` goes among `ports` ports: over a burst every
/// egress port receives 32 frames per round, over all eight queues.
fn route_among(ports: usize, port: usize, j: usize) -> (usize, usize) {
    ((port + 1 + j % (ports - 1)) % ports, j % PRIORITY_COUNT)
}

fn ports_params(ports: usize) -> SwitchParams {
    let mut params = bench_params_for(ports, PORTS_FRAME_LEN);
    params.queue_ring_frames = PORTS_RING_FRAMES;
    // The preset's pools with what the ports carve out of them added, so that the shared part
    // (what admission reads) is the same for any port count.
    let mut carved = vec![0u64; params.pools.len()];
    for port in &params.ports {
        for pg in &port.pgs {
            carved[pg.pool.index()] += pg.reserved_bytes + pg.xoff_bytes;
        }
        for q in &port.queues {
            carved[q.profile.pool.index()] += q.profile.reserved_bytes;
        }
    }
    for (pool, carved) in params.pools.iter_mut().zip(carved) {
        pool.size_bytes += carved;
    }
    params
}

struct PortsRig {
    sw: LcoreStep<PoolFrame>,
    pool: Pool,
    ports: usize,
    headers: Vec<Vec<Vec<u8>>>,
    now: Instant,
    rx: Vec<PoolFrame>,
    tx: Vec<PoolFrame>,
}

impl PortsRig {
    fn new(ports: usize) -> Self {
        let now = Instant::from_millis(1);
        let headers = (0..ports)
            .map(|p| {
                (0..BURST)
                    .map(|j| {
                        let (d, tc) = route_among(ports, p, j);
                        header(host_mac(p), host_mac(d), dscp_of(tc), PORTS_FRAME_LEN)
                    })
                    .collect()
            })
            .collect();
        let mut rig = Self {
            sw: LcoreStep::single(ports_params(ports), now).expect("valid parameters"),
            pool: new_pool(4 * ports * BURST),
            ports,
            headers,
            now,
            rx: Vec::with_capacity(BURST),
            tx: Vec::with_capacity(BURST),
        };
        // Pre-learn every host, one flood at a time.
        for p in 0..ports {
            let h = header(host_mac(p), [0xff; 6], 0, 64);
            rig.rx.push(receive(&rig.pool, &h, 64).expect("room"));
            rig.sw
                .handle_rx_burst(rig.now, PortId(port_id(p)), &mut rig.rx);
            for q in 0..ports {
                rig.drain(q);
            }
        }
        rig
    }

    fn drain(&mut self, port: usize) -> usize {
        let pool = &self.pool;
        let n = self.sw.poll_tx_burst(
            self.now,
            PortId(port_id(port)),
            &mut self.tx,
            BURST,
            &mut |len| pool.alloc(len),
        );
        self.tx.clear();
        n
    }

    fn frames_per_round(&self) -> usize {
        self.ports * BURST
    }

    /// One loop iteration, as [`HeadroomRig::round`]. Never inlined.
    #[inline(never)]
    fn round(&mut self) -> usize {
        self.now = self.now.saturating_add_nanos(ROUND_NS);
        for p in 0..self.ports {
            receive_burst(&self.pool, &self.headers[p], PORTS_FRAME_LEN, &mut self.rx);
            self.sw
                .handle_rx_burst(self.now, PortId(port_id(p)), &mut self.rx);
        }
        self.sw.handle_timeout(self.now);
        let mut sent = 0;
        for p in 0..self.ports {
            sent += self.drain(p);
        }
        while let Some(punted) = self.sw.poll_punt() {
            drop(black_box(punted));
        }
        while let Some(event) = self.sw.poll_event() {
            black_box(event);
        }
        sent
    }

    /// As [`HeadroomRig::check`]: everything received is sent, nothing dropped, every queue of
    /// every port carries traffic.
    fn check(&mut self) {
        for _ in 0..200 {
            assert_eq!(
                self.round(),
                self.frames_per_round(),
                "a round sends what it received"
            );
        }
        let egress = self.sw.egress().expect("both sides");
        let ingress = self.sw.ingress().expect("both sides");
        for p in 0..self.ports {
            let tx = egress.port_counters(PortId(port_id(p)));
            let rx = ingress.port_counters(PortId(port_id(p)));
            for q in 0..PRIORITY_COUNT {
                assert!(
                    tx.tx_frames[q].get() > 0,
                    "port {p} queue {q} carries traffic"
                );
            }
            for r in DropReason::ALL {
                assert_eq!(rx.drops[r.index()].get(), 0, "port {p}: {} drops", r.name());
                assert_eq!(tx.drops[r.index()].get(), 0, "port {p}: {} drops", r.name());
            }
        }
        assert!(pool_is_full(&self.pool), "every buffer came back");
    }
}

/// `ports/{2,64}`: ns/packet of the port-count rigs.
fn ports(c: &mut Criterion) {
    let mut group = c.benchmark_group("ports");
    for ports in PORT_COUNTS {
        group.throughput(Throughput::Elements((ports * BURST) as u64));
        let mut rig: Option<PortsRig> = None;
        group.bench_with_input(BenchmarkId::from_parameter(ports), &ports, |b, &ports| {
            let rig = rig.get_or_insert_with(|| {
                let mut rig = PortsRig::new(ports);
                rig.check();
                rig
            });
            iter_cpu(b, || rig.round());
        });
    }
    group.finish();
}

fn per_packet(c: &mut Criterion) {
    let mut group = c.benchmark_group("per_packet");
    group.throughput(Throughput::Elements(FRAMES_PER_ROUND as u64));
    for len in [64usize, 1024] {
        // Built (and checked) only when the filter selects the bench; criterion calls the
        // closure once per sample, the rig lives across samples.
        let mut baseline: Option<BaselineRig> = None;
        group.bench_with_input(BenchmarkId::new("baseline", len), &len, |b, &len| {
            let rig = baseline.get_or_insert_with(|| {
                let mut rig = BaselineRig::new(len);
                rig.check();
                rig
            });
            iter_cpu(b, || rig.round());
        });
        let mut headroom: Option<HeadroomRig> = None;
        group.bench_with_input(BenchmarkId::new("headroom", len), &len, |b, &len| {
            let rig = headroom.get_or_insert_with(|| {
                let mut rig = HeadroomRig::new(len);
                rig.check();
                rig
            });
            iter_cpu(b, || rig.round());
        });
        let mut routed: Option<HeadroomRig> = None;
        group.bench_with_input(BenchmarkId::new("routed", len), &len, |b, &len| {
            let rig = routed.get_or_insert_with(|| {
                let mut rig = HeadroomRig::routed(len);
                rig.check();
                rig
            });
            iter_cpu(b, || rig.round());
        });
    }
    group.finish();
}

/// Single stages, each over the 32 frames of one burst (so branches see the real mix).
fn parts(c: &mut Criterion) {
    let len = 64;
    let params = bench_params(len);
    let headers = templates(len);
    let mut group = c.benchmark_group("parts");
    group.throughput(Throughput::Elements(BURST as u64));

    let burst: Vec<&[u8]> = headers[0].iter().map(Vec::as_slice).collect();
    group.bench_function("parse_l2", |b| {
        iter_cpu(b, || {
            for f in &burst {
                let _ = black_box(parse_l2(black_box(f)));
            }
        });
    });

    let now = Instant::from_millis(1);
    let mut fdb = Fdb::new(params.fdb_capacity, params.fdb_aging_ns);
    for p in 0..PORTS {
        fdb.learn(1, host_mac(p), PortId(port_id(p)), now);
    }
    group.bench_function("fdb_learn_lookup", |b| {
        iter_cpu(b, || {
            for j in 0..BURST {
                let (d, _) = route(0, j);
                black_box(fdb.learn(1, host_mac(0), PortId(0), now));
                black_box(fdb.lookup(1, host_mac(d), now));
            }
        });
    });

    let cells = params.cells(len as u64);
    let mut ingress = IngressBuffers::new(&params, PoolBoard::new(1, params.pools.len()), 0)
        .expect("valid parameters");
    let tc_to_pg = params.ports[0].maps.tc_to_pg;
    group.bench_function("ingress_admit_update_release", |b| {
        iter_cpu(b, || {
            for j in 0..BURST {
                let (_, tc) = route(0, j);
                let pg = tc_to_pg[tc].index();
                let _ = black_box(ingress.admit(0, pg, cells));
                black_box(ingress.update_xoff(0, pg));
                ingress.release(0, pg, cells);
            }
        });
    });

    let mut egress = EgressBuffers::new(
        &params,
        lossless_queues(&params),
        PoolBoard::new(1, params.pools.len()),
        0,
    )
    .expect("valid parameters");
    group.bench_function("egress_admit_release", |b| {
        iter_cpu(b, || {
            for j in 0..BURST {
                let (out, q) = route(0, j);
                let _ = black_box(egress.admit(out, q, cells));
                egress.release(out, q, cells);
            }
        });
    });

    let wred = params.ports[0].queues[3].wred.expect("WRED on queue 3");
    let mut rng = WredRng::new(1);
    group.bench_function("wred_decide", |b| {
        iter_cpu(b, || {
            for j in 0..BURST {
                let depth = (j as u64 % 8 + 1) * len as u64;
                black_box(decide(&wred, black_box(depth), true, true, &mut rng));
            }
        });
    });

    let mut sched = QueueScheduler::new(params.ports[0].queues.map(|q| q.scheduler));
    assert!(params.ports[0]
        .queues
        .iter()
        .all(|q| matches!(q.scheduler, SchedulerKind::Dwrr { .. })));
    group.bench_function("dwrr_pick", |b| {
        iter_cpu(b, || {
            for _ in 0..BURST {
                black_box(sched.pick(black_box(0xFF), |_| 64));
            }
        });
    });

    let pool = new_pool(POOL_FRAMES);
    group.bench_function("pool_receive_drop", |b| {
        iter_cpu(b, || {
            for h in &headers[0] {
                drop(black_box(receive(&pool, h, len)));
            }
        });
    });

    // For comparison: the same buffer cycle through a plain per-thread free list (what a
    // per-lcore cache in front of the shared pool would cost), without the shared queue's atomic
    // read-modify-writes and the handle's `Arc` reference count.
    let mut free: Vec<Box<[u8; 2048]>> = (0..POOL_FRAMES).map(|_| Box::new([0u8; 2048])).collect();
    group.bench_function("local_free_list_receive_drop", |b| {
        iter_cpu(b, || {
            for h in &headers[0] {
                let mut buf = free.pop().expect("a buffer");
                buf[128..128 + h.len()].copy_from_slice(h);
                free.push(black_box(buf));
            }
        });
    });

    let (mut producer, mut consumer) = RingBuffer::<[u64; 7]>::new(1024);
    group.bench_function("rtrb_push_pop_56B", |b| {
        iter_cpu(b, || {
            for j in 0..BURST {
                let _ = producer.push([j as u64; 7]);
            }
            for _ in 0..BURST {
                let _ = black_box(consumer.pop());
            }
        });
    });
    group.finish();
}

fn config() -> Criterion {
    Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        .sample_size(50)
}

criterion_group! {
    name = benches;
    config = config();
    targets = per_packet, ports, parts
}

/// Instruction-count mode, for `valgrind --tool=callgrind --toggle-collect='pipeline::*Rig::round'`
/// (see `scripts/bench.sh`): `HEADROOM_BENCH_COUNT=<rig>/<len>/<rounds>`, e.g.
/// `headroom/64/2000`, runs exactly that many rounds of one rig with no criterion around them.
/// The Ir collected divided by rounds × 128 is the rig's instruction cost per packet: exact and
/// independent of the machine's load.
const COUNT_ENV: &str = "HEADROOM_BENCH_COUNT";

fn count_rounds(spec: &str) {
    let parts: Vec<&str> = spec.split('/').collect();
    let [rig, len, rounds] = parts[..] else {
        panic!(
            "{COUNT_ENV}={spec}: expected <headroom|routed|baseline|ports2|ports64>/<len>/<rounds>"
        );
    };
    let len: usize = len.parse().expect("frame length");
    let rounds: u64 = rounds.parse().expect("number of rounds");
    let (per_round, mut run): (usize, Box<dyn FnMut() -> usize>) = match rig {
        "headroom" => {
            let mut rig = HeadroomRig::new(len);
            (FRAMES_PER_ROUND, Box::new(move || rig.round()))
        }
        "baseline" => {
            let mut rig = BaselineRig::new(len);
            (FRAMES_PER_ROUND, Box::new(move || rig.round()))
        }
        "routed" => {
            let mut rig = HeadroomRig::routed(len);
            (FRAMES_PER_ROUND, Box::new(move || rig.round()))
        }
        ports if ports.starts_with("ports") => {
            let n: usize = ports["ports".len()..].parse().expect("ports<N>");
            assert_eq!(
                len, PORTS_FRAME_LEN,
                "the port-count rigs run {PORTS_FRAME_LEN} B"
            );
            let mut rig = PortsRig::new(n);
            (rig.frames_per_round(), Box::new(move || rig.round()))
        }
        other => panic!("{COUNT_ENV}: unknown rig {other}"),
    };
    for _ in 0..rounds {
        assert_eq!(run(), per_round);
    }
    // `frames=` is what scripts/bench.sh divides the instructions by.
    println!(
        "{rig} {len} B: {rounds} rounds of {per_round} frames frames={}",
        rounds * per_round as u64
    );
}

/// Interleaved port-count mode: `HEADROOM_BENCH_PORTS_RATIO=<seconds>` alternates batches of the
/// 2-port and the 64-port rig and prints the median ns/packet of each and the median ratio
/// (64 / 2), as [`interleaved_ratio`] does for headroom / baseline.
const PORTS_RATIO_ENV: &str = "HEADROOM_BENCH_PORTS_RATIO";

fn interleaved_ports_ratio(spec: &str) {
    let seconds: f64 = spec
        .parse()
        .unwrap_or_else(|_| panic!("{PORTS_RATIO_ENV}={spec}: expected <seconds>"));
    let mut small = PortsRig::new(PORT_COUNTS[0]);
    small.check();
    let mut large = PortsRig::new(PORT_COUNTS[1]);
    large.check();
    // Batches of about 2048 frames each.
    let batch = |rig: &mut PortsRig| {
        let rounds = (2048 / rig.frames_per_round()).max(1);
        let start = thread_cpu_time();
        for _ in 0..rounds {
            black_box(rig.round());
        }
        let elapsed = thread_cpu_time().saturating_sub(start);
        elapsed.as_secs_f64() * 1e9 / (rounds * rig.frames_per_round()) as f64
    };
    let (mut small_ns, mut large_ns, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
    let deadline = std::time::Instant::now() + Duration::from_secs_f64(seconds);
    while std::time::Instant::now() < deadline {
        let (s, l) = if ratios.len() % 2 == 0 {
            let s = batch(&mut small);
            (s, batch(&mut large))
        } else {
            let l = batch(&mut large);
            (batch(&mut small), l)
        };
        small_ns.push(s);
        large_ns.push(l);
        ratios.push(l / s);
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    println!(
        "ports2_ns={:.2} ports64_ns={:.2} ratio={:.3} pairs={}",
        median(&mut small_ns),
        median(&mut large_ns),
        median(&mut ratios),
        ratios.len()
    );
}

/// Interleaved mode: `HEADROOM_BENCH_RATIO=<len>/<seconds>` alternates batches of baseline and
/// headroom rounds for that long and prints the median ns/packet of each and the median ratio of
/// adjacent batches. Both rigs then see the same machine at (nearly) the same moment, which on a
/// shared machine makes the ratio far steadier than two criterion runs seconds apart.
const RATIO_ENV: &str = "HEADROOM_BENCH_RATIO";

fn interleaved_ratio(spec: &str) {
    const BATCH_ROUNDS: u32 = 16;
    let (len, seconds) = spec
        .split_once('/')
        .and_then(|(l, s)| Some((l.parse::<usize>().ok()?, s.parse::<f64>().ok()?)))
        .unwrap_or_else(|| panic!("{RATIO_ENV}={spec}: expected <len>/<seconds>"));
    let mut baseline = BaselineRig::new(len);
    baseline.check();
    let mut headroom = HeadroomRig::new(len);
    headroom.check();
    let mut routed = HeadroomRig::routed(len);
    routed.check();
    let batch = |run: &mut dyn FnMut() -> usize| {
        let start = thread_cpu_time();
        for _ in 0..BATCH_ROUNDS {
            black_box(run());
        }
        let elapsed = thread_cpu_time().saturating_sub(start);
        elapsed.as_secs_f64() * 1e9 / f64::from(BATCH_ROUNDS) / FRAMES_PER_ROUND as f64
    };
    let (mut base_ns, mut head_ns, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
    let (mut routed_ns, mut routed_ratios) = (Vec::new(), Vec::new());
    let deadline = std::time::Instant::now() + Duration::from_secs_f64(seconds);
    while std::time::Instant::now() < deadline {
        // Rotate which rig goes first, so that none always runs after another.
        let (b, h, r) = match ratios.len() % 3 {
            0 => {
                let b = batch(&mut || baseline.round());
                let h = batch(&mut || headroom.round());
                (b, h, batch(&mut || routed.round()))
            }
            1 => {
                let h = batch(&mut || headroom.round());
                let r = batch(&mut || routed.round());
                (batch(&mut || baseline.round()), h, r)
            }
            _ => {
                let r = batch(&mut || routed.round());
                let b = batch(&mut || baseline.round());
                (b, batch(&mut || headroom.round()), r)
            }
        };
        base_ns.push(b);
        head_ns.push(h);
        routed_ns.push(r);
        ratios.push(h / b);
        routed_ratios.push(r / h);
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    println!(
        "len={len} baseline_ns={:.2} headroom_ns={:.2} ratio={:.3} pairs={} routed_ns={:.2} \
         routed_ratio={:.3}",
        median(&mut base_ns),
        median(&mut head_ns),
        median(&mut ratios),
        ratios.len(),
        median(&mut routed_ns),
        median(&mut routed_ratios)
    );
}

fn main() {
    if let Ok(spec) = std::env::var(COUNT_ENV) {
        count_rounds(&spec);
        return;
    }
    if let Ok(spec) = std::env::var(RATIO_ENV) {
        interleaved_ratio(&spec);
        return;
    }
    if let Ok(spec) = std::env::var(PORTS_RATIO_ENV) {
        interleaved_ports_ratio(&spec);
        return;
    }
    benches();
    Criterion::default().configure_from_args().final_summary();
}
