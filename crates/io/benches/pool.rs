//! Frame allocation and free, per frame: what `scripts/bench.sh pool` records in docs/perf.md as
//! ratios measured in one run.
//!
//! Every variant moves rounds of 32 frames of 64 bytes: allocate them (copying the frame in, as
//! AF_PACKET's receive does), then drop them, which returns the buffers. Pools have 8192
//! buffers, the runtime's smallest (`headroom_config::FRAME_POOL_FRAMES_MIN`). Criterion
//! reports thread CPU time per frame (the machine is shared: preemption by other work is not
//! counted). Other modes of the same executable:
//!
//! * `HEADROOM_POOL_RATIO=<seconds>`: for each variant, batches of it alternate with batches of
//!   the baseline for that long; prints the median ns/frame of both and the median ratio of
//!   adjacent batches (steadier than criterion runs seconds apart on a loaded machine).
//! * `HEADROOM_POOL_CROSS=<seconds>`: two threads, one allocating bursts and passing the frames
//!   through an SPSC ring to the other, which frees them (an RX lcore feeding a TX lcore):
//!   previous design against today's pool with both threads' caches, alternating periods of
//!   200 ms; prints the CPU ns per frame spent allocating plus freeing (timed around each
//!   burst, waiting excluded), medians.
//! * `HEADROOM_POOL_COUNT=<variant>/<rounds>`: that many rounds of one variant inside
//!   `pool::measured`, for callgrind's instruction counts (exact, independent of the load).
//!
//! * `previous_shared_queue_arc`: the pool as it was before per-lcore caches (a replica: a
//!   crossbeam `ArrayQueue` of boxed buffers, and an `Arc` of the pool cloned into every frame
//!   and dropped with it). The baseline.
//! * `previous_shared_queue_only` and `arc_clone_drop_only`: the baseline's two halves alone,
//!   to say which costs what.
//! * `shared_queue`: today's `FramePool` on a thread without a cache (the shared queue, and the
//!   frame's `Weak` upgraded on every free to reach it).
//! * `thread_cache`: today's `FramePool` on a thread with its cache attached, as every backend
//!   queue's lcore is: the steady state of an lcore that allocates and frees.
//! * `local_free_list`: a plain `Vec` of buffers, the floor any pool can reach.

use std::hint::black_box;
use std::sync::Arc;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Bencher, Criterion, Throughput};
use crossbeam_queue::ArrayQueue;
use headroom_io::pool::{FramePool, PoolConfig, PoolFrame};

const BURST: usize = 32;
const FRAME: [u8; 64] = [0x5A; 64];
/// Buffers per pool (`HEADROOM_POOL_FRAMES` overrides it).
fn pool_frames() -> usize {
    std::env::var("HEADROOM_POOL_FRAMES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(8192)
}
const BUFFER_BYTES: usize = 2048 + 128;
const HEADROOM: usize = 128;

type Queue = Arc<ArrayQueue<Box<[u8]>>>;

/// The replica of the previous pool's frame: buffer, offsets, `Arc` of the shared queue.
struct PreviousFrame {
    buf: Box<[u8]>,
    len: usize,
    pool: Queue,
}

impl Drop for PreviousFrame {
    fn drop(&mut self) {
        let _ = self.pool.push(std::mem::take(&mut self.buf));
    }
}

fn filled_queue() -> Queue {
    let queue = ArrayQueue::new(pool_frames());
    for _ in 0..pool_frames() {
        assert!(queue
            .push(vec![0u8; BUFFER_BYTES].into_boxed_slice())
            .is_ok());
    }
    Arc::new(queue)
}

/// One way of allocating and freeing frames.
trait Variant {
    /// Allocates a burst of frames and frees them.
    fn round(&mut self);
}

struct PreviousSharedQueueArc {
    pool: Queue,
    held: Vec<PreviousFrame>,
}

impl Variant for PreviousSharedQueueArc {
    fn round(&mut self) {
        for _ in 0..BURST {
            let mut buf = self.pool.pop().expect("buffer");
            buf[HEADROOM..HEADROOM + FRAME.len()].copy_from_slice(black_box(&FRAME));
            self.held.push(PreviousFrame {
                buf,
                len: FRAME.len(),
                pool: Arc::clone(&self.pool),
            });
        }
        black_box(self.held.iter().map(|f| f.len).sum::<usize>());
        self.held.clear();
    }
}

struct PreviousSharedQueueOnly {
    pool: Queue,
    held: Vec<Box<[u8]>>,
}

impl Variant for PreviousSharedQueueOnly {
    fn round(&mut self) {
        for _ in 0..BURST {
            let mut buf = self.pool.pop().expect("buffer");
            buf[HEADROOM..HEADROOM + FRAME.len()].copy_from_slice(black_box(&FRAME));
            self.held.push(buf);
        }
        for buf in self.held.drain(..) {
            let _ = self.pool.push(black_box(buf));
        }
    }
}

struct ArcCloneDropOnly {
    pool: Queue,
    held: Vec<Queue>,
}

impl Variant for ArcCloneDropOnly {
    fn round(&mut self) {
        for _ in 0..BURST {
            self.held.push(Arc::clone(black_box(&self.pool)));
        }
        self.held.clear();
    }
}

/// Today's pool: through this thread's cache when it attached one, else the shared queue.
struct Pool {
    pool: FramePool,
    held: Vec<PoolFrame>,
}

impl Variant for Pool {
    fn round(&mut self) {
        for _ in 0..BURST {
            self.held
                .push(self.pool.alloc_copy(black_box(&FRAME)).expect("buffer"));
        }
        black_box(self.held.len());
        self.held.clear();
    }
}

struct LocalFreeList {
    free: Vec<Box<[u8]>>,
    held: Vec<Box<[u8]>>,
}

impl Variant for LocalFreeList {
    fn round(&mut self) {
        for _ in 0..BURST {
            let mut buf = self.free.pop().expect("buffer");
            buf[HEADROOM..HEADROOM + FRAME.len()].copy_from_slice(black_box(&FRAME));
            self.held.push(buf);
        }
        self.free.extend(self.held.drain(..).map(black_box));
    }
}

const VARIANTS: [&str; 6] = [
    "previous_shared_queue_arc",
    "previous_shared_queue_only",
    "arc_clone_drop_only",
    "shared_queue",
    "thread_cache",
    "local_free_list",
];

fn variant(name: &str) -> Box<dyn Variant> {
    let pool = || FramePool::new(PoolConfig::with_frame_count(pool_frames())).expect("pool");
    match name {
        "previous_shared_queue_arc" => Box::new(PreviousSharedQueueArc {
            pool: filled_queue(),
            held: Vec::with_capacity(BURST),
        }),
        "previous_shared_queue_only" => Box::new(PreviousSharedQueueOnly {
            pool: filled_queue(),
            held: Vec::with_capacity(BURST),
        }),
        "arc_clone_drop_only" => Box::new(ArcCloneDropOnly {
            pool: filled_queue(),
            held: Vec::with_capacity(BURST),
        }),
        "shared_queue" => {
            let pool = pool();
            assert!(!pool.has_thread_cache());
            Box::new(Pool {
                pool,
                held: Vec::with_capacity(BURST),
            })
        }
        "thread_cache" => {
            let pool = pool();
            pool.attach_thread_cache();
            assert!(pool.has_thread_cache());
            Box::new(Pool {
                pool,
                held: Vec::with_capacity(BURST),
            })
        }
        "local_free_list" => Box::new(LocalFreeList {
            free: (0..pool_frames())
                .map(|_| vec![0u8; BUFFER_BYTES].into_boxed_slice())
                .collect(),
            held: Vec::with_capacity(BURST),
        }),
        other => panic!("no variant {other}; there are {VARIANTS:?}"),
    }
}

/// The rounds callgrind counts (`--toggle-collect=pool::measured`).
#[inline(never)]
fn measured(variant: &mut dyn Variant, rounds: u64) {
    for _ in 0..rounds {
        variant.round();
    }
}

fn thread_cpu_time() -> Duration {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
    Duration::new(
        u64::try_from(t.tv_sec).unwrap_or(0),
        u32::try_from(t.tv_nsec).unwrap_or(0),
    )
}

fn iter_cpu(b: &mut Bencher<'_>, variant: &mut dyn Variant) {
    b.iter_custom(|iters| {
        let start = thread_cpu_time();
        for _ in 0..iters {
            variant.round();
        }
        thread_cpu_time().saturating_sub(start)
    });
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

/// CPU ns per frame of `batch` rounds of `v`.
fn batch_ns(v: &mut dyn Variant, rounds: usize) -> f64 {
    let start = thread_cpu_time();
    for _ in 0..rounds {
        v.round();
    }
    thread_cpu_time().saturating_sub(start).as_secs_f64() * 1e9 / (rounds * BURST) as f64
}

fn interleaved_ratios(seconds: f64) {
    const BATCH_ROUNDS: usize = 64;
    let baseline_name = VARIANTS[0];
    for name in &VARIANTS[1..] {
        let mut baseline = variant(baseline_name);
        let mut v = variant(name);
        measured_warm(baseline.as_mut());
        measured_warm(v.as_mut());
        let (mut base_ns, mut ns, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
        let deadline = std::time::Instant::now() + Duration::from_secs_f64(seconds);
        let mut first = true;
        while std::time::Instant::now() < deadline {
            let (b, x) = if first {
                let b = batch_ns(baseline.as_mut(), BATCH_ROUNDS);
                (b, batch_ns(v.as_mut(), BATCH_ROUNDS))
            } else {
                let x = batch_ns(v.as_mut(), BATCH_ROUNDS);
                (batch_ns(baseline.as_mut(), BATCH_ROUNDS), x)
            };
            first = !first;
            base_ns.push(b);
            ns.push(x);
            ratios.push(x / b);
        }
        let pairs = ratios.len();
        println!(
            "variant={name} baseline={baseline_name} baseline_ns={:.2} ns={:.2} ratio={:.3} \
             pairs={pairs}",
            median(&mut base_ns),
            median(&mut ns),
            median(&mut ratios)
        );
    }
}

/// Frames through an SPSC ring from an allocating thread to a freeing one, for `period`.
/// Returns the CPU ns per frame spent allocating (on the first thread) plus freeing (on the
/// second), timed around each burst of 32 only: waiting on the ring is not counted, so that the
/// figure is the pool's cost when alloc and free run on different cores.
fn cross_thread_period<T: Send>(
    alloc: impl FnMut() -> Option<T> + Send,
    attach: impl Fn() + Send + Sync,
    period: Duration,
) -> f64 {
    let (mut tx, mut rx) = rtrb::RingBuffer::<T>::new(1024);
    let stop = std::sync::atomic::AtomicBool::new(false);
    let attach = &attach;
    std::thread::scope(|scope| {
        let stop = &stop;
        let consumer = scope.spawn(move || {
            attach();
            let mut held = Vec::with_capacity(BURST);
            let (mut freed, mut cpu) = (0u64, Duration::ZERO);
            loop {
                while held.len() < BURST {
                    match rx.pop() {
                        Ok(frame) => held.push(frame),
                        Err(_) => break,
                    }
                }
                if held.is_empty() {
                    if stop.load(std::sync::atomic::Ordering::Relaxed) && rx.is_empty() {
                        break;
                    }
                    std::thread::yield_now();
                    continue;
                }
                freed += held.len() as u64;
                let start = thread_cpu_time();
                held.clear();
                cpu += thread_cpu_time().saturating_sub(start);
            }
            (freed, cpu)
        });
        let producer = scope.spawn(move || {
            attach();
            let mut alloc = alloc;
            let mut held = Vec::with_capacity(BURST);
            let mut cpu = Duration::ZERO;
            let end = std::time::Instant::now() + period;
            while std::time::Instant::now() < end {
                if tx.slots() < BURST {
                    std::thread::yield_now();
                    continue;
                }
                let start = thread_cpu_time();
                for _ in 0..BURST {
                    match alloc() {
                        Some(frame) => held.push(frame),
                        None => break,
                    }
                }
                cpu += thread_cpu_time().saturating_sub(start);
                for frame in held.drain(..) {
                    let _ = tx.push(frame);
                }
            }
            stop.store(true, std::sync::atomic::Ordering::Relaxed);
            cpu
        });
        let producer_cpu = producer.join().expect("producer");
        let (freed, consumer_cpu) = consumer.join().expect("consumer");
        (producer_cpu + consumer_cpu).as_secs_f64() * 1e9 / freed.max(1) as f64
    })
}

fn cross_thread(seconds: f64) {
    let period = Duration::from_millis(200);
    let previous = filled_queue();
    let cached = FramePool::new(PoolConfig::with_frame_count(pool_frames())).expect("pool");
    let (mut prev_ns, mut cached_ns, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
    let deadline = std::time::Instant::now() + Duration::from_secs_f64(seconds);
    while std::time::Instant::now() < deadline {
        let p = cross_thread_period(
            || {
                let mut buf = previous.pop()?;
                buf[HEADROOM..HEADROOM + FRAME.len()].copy_from_slice(black_box(&FRAME));
                Some(PreviousFrame {
                    buf,
                    len: FRAME.len(),
                    pool: Arc::clone(&previous),
                })
            },
            || {},
            period,
        );
        let c = cross_thread_period(
            || cached.alloc_copy(black_box(&FRAME)),
            || cached.attach_thread_cache(),
            period,
        );
        prev_ns.push(p);
        cached_ns.push(c);
        ratios.push(c / p);
    }
    assert_eq!(previous.len(), pool_frames());
    assert_eq!(cached.stats().available, pool_frames());
    let periods = ratios.len();
    println!(
        "cross_thread previous_ns={:.2} thread_cache_ns={:.2} ratio={:.3} periods={periods}",
        median(&mut prev_ns),
        median(&mut cached_ns),
        median(&mut ratios)
    );
}

fn pool(c: &mut Criterion) {
    if let Some(seconds) = std::env::var("HEADROOM_POOL_RATIO")
        .ok()
        .and_then(|s| s.parse::<f64>().ok())
    {
        interleaved_ratios(seconds);
        return;
    }
    if let Some(seconds) = std::env::var("HEADROOM_POOL_CROSS")
        .ok()
        .and_then(|s| s.parse::<f64>().ok())
    {
        cross_thread(seconds);
        return;
    }
    if let Ok(spec) = std::env::var("HEADROOM_POOL_COUNT") {
        let (name, rounds) = spec
            .split_once('/')
            .expect("HEADROOM_POOL_COUNT=<variant>/<rounds>");
        let rounds: u64 = rounds.parse().expect("rounds");
        let mut v = variant(name);
        // Warm: every buffer of the pool touched once, caches filled.
        measured_warm(v.as_mut());
        measured(v.as_mut(), rounds);
        return;
    }
    let mut group = c.benchmark_group("pool");
    group.throughput(Throughput::Elements(BURST as u64));
    for name in VARIANTS {
        let mut v = variant(name);
        group.bench_function(name, |b| iter_cpu(b, v.as_mut()));
    }
    group.finish();
}

/// Rounds outside the measurement, enough to cycle once through a FIFO pool's buffers.
fn measured_warm(variant: &mut dyn Variant) {
    for _ in 0..2 * pool_frames() / BURST {
        variant.round();
    }
}

criterion_group!(benches, pool);
criterion_main!(benches);
