//! Model checks of every cross-thread protocol of the core, under loom.
//!
//! Built only with `--cfg loom` (`scripts/test.sh`'s loom step; the command and what each check
//! shows when an ordering is weakened are in `docs/memory-ordering.md`). Each check runs the
//! protocol's own functions (the ones the ingress and egress sides call) on two or three loom
//! threads; loom runs it under every interleaving, and lets every relaxed or acquire load return
//! any value the C++/Rust memory model allows, as a weak-memory CPU (arm64) may. The atomics
//! are loom's through `crate::sync`.
//!
//! Where an ordering is needed (releases, the pause board's sequence lock, the learn rings'
//! hand-over, the ring byte counters), the check asserts what the ordering buys and fails when
//! it is weakened. Where relaxed is correct (wanted-XOFF, the mitigation board, the pool
//! board, counters), the check asserts the property the protocol relies on: a reader
//! sees only values the writer stored, in the writer's order, and (for counters) never more
//! than was counted.
//!
//! A single writer reads its own words back through `crate::sync::load_own`, which loom counts
//! as a write: with plain loads there, loom's choice of interleavings (from the last access of
//! each atomic) missed the reader's loads running after the writer's stores, and the `releases`
//! check passed with the acquire removed.
//!
//! Not checked here: [`crate::counters::Watermark`]'s read-and-clear. Its `take` is a swap
//! racing the writer's plain store, and loom 0.7.3 can order such a store between the read and
//! the write of the swap (loom issue 254, unfixed in 0.7.3), which the memory model forbids, so
//! it reports a lost level that cannot be lost. The argument is in `counters.rs`.
//!
//! Runs are bounded by loom's preemption bound: `LOOM_MAX_PREEMPTIONS` if set, else
//! [`DEFAULT_PREEMPTIONS`].

use crate::buffer::PoolBoard;
use crate::counters::Counter;
use crate::fdb::Fdb;
use crate::fdb_sync::{FdbSync, FdbUpdate};
use crate::pfc::{PauseView, PfcBoard, PfcGenerator};
use crate::shared::Releases;
use crate::sync::spsc::RingBuffer;
use crate::time::Instant;
use crate::types::{PortId, Priority};
use crate::watchdog::{MitigationBoard, QueueMitigation};
use loom::sync::Arc;
use loom::thread;

/// Preemptions per execution loom explores when `LOOM_MAX_PREEMPTIONS` is not set. Every
/// failure shown in `docs/memory-ordering.md` is found within it.
const DEFAULT_PREEMPTIONS: usize = 3;

/// Runs `f` under loom, bounded (see the module docs).
fn check(f: impl Fn() + Sync + Send + 'static) {
    let mut builder = loom::model::Builder::new();
    if builder.preemption_bound.is_none() {
        builder.preemption_bound = Some(DEFAULT_PREEMPTIONS);
    }
    builder.check(f);
}

/// Where `value` stands in `history` (the writer's stores in order, the initial value first).
fn position<T: PartialEq + core::fmt::Debug>(history: &[T], value: &T) -> usize {
    history
        .iter()
        .position(|h| h == value)
        .unwrap_or_else(|| panic!("read {value:?}, which was never stored (stored: {history:?})"))
}

/// Asserts that successive reads `values` follow `history` without going back.
fn assert_in_order<T: PartialEq + core::fmt::Debug>(history: &[T], values: &[T]) {
    let mut last = 0;
    for v in values {
        let at = position(history, v);
        assert!(
            at >= last,
            "read {v:?} after {:?}: older after newer (stored: {history:?})",
            history[last]
        );
        last = at;
    }
}

/// Releases: an ingress side that sees a new generation pulls every release counted before it.
///
/// The egress side releases cells in two polls (1 cell of PG 3, then 2 more, each published
/// with [`Releases::publish`], as `Egress::poll_tx_burst` does); the ingress side pulls twice
/// with [`Releases::pull_if_new`] and the totals its sync reads. Having seen generation g, it
/// must see at least the cells released up to g. Fails without the acquire fence of
/// `pull_if_new` (or the release fence of `publish`): a new generation with stale counters,
/// after which the ingress side would wait for another publication to see the cells.
#[test]
fn releases() {
    check(|| {
        let releases = Arc::new(Releases::new(1, 1, 1));
        let egress = {
            let releases = Arc::clone(&releases);
            thread::spawn(move || {
                for cells in [1, 2] {
                    releases.pg(0, 0, 3).add(cells);
                    releases.queue(0, 0, 0, 3).add(cells);
                    releases.publish(0);
                }
            })
        };
        // Cells released up to each generation.
        let released_by = [0, 1, 3];
        let mut seen = [0u64; 1];
        for _ in 0..2 {
            if releases.pull_if_new(&mut seen) {
                let g = usize::try_from(seen[0]).unwrap_or(usize::MAX);
                let want = released_by[g];
                let pg = releases.pg_totals(0)[3];
                let queue = releases.queue_totals(0, 0)[3];
                assert!(
                    pg >= want && queue >= want,
                    "generation {g} seen with {pg} PG and {queue} queue cells released, not {want}"
                );
            }
        }
        egress.join().unwrap();
    });
}

/// Releases from two egress sides: each side's generation covers its own counters, and one
/// acquire after the generations covers all of them.
#[test]
fn releases_from_two_egress_sides() {
    check(|| {
        let releases = Arc::new(Releases::new(2, 1, 1));
        let sides: Vec<_> = (0..2)
            .map(|e| {
                let releases = Arc::clone(&releases);
                thread::spawn(move || {
                    releases.pg(e, 0, 3).add(1);
                    releases.publish(e);
                })
            })
            .collect();
        let mut seen = [0u64; 2];
        if releases.pull_if_new(&mut seen) {
            let want = seen.iter().sum::<u64>();
            let pg = releases.pg_totals(0)[3];
            assert!(
                pg >= want,
                "generations {seen:?} seen with {pg} cells released"
            );
        }
        for s in sides {
            s.join().unwrap();
        }
    });
}

const P3: Priority = Priority::from_low_bits(3);

/// The pause board: [`PfcBoard::view`] never returns a mix of two updates.
///
/// The ingress side has recorded one PFC frame; it records a second while the watchdog reads
/// (the second continues the first's episode, so `until`, `mark`, `accumulated` and
/// `last_frame` all change). [`PfcBoard::view`] must return the slot as it was before or
/// after, never a torn mix, and the scheduler's one-word read ([`PfcBoard::paused_until`],
/// relaxed) a recorded deadline, in order. Fails without any one of the sequence lock's
/// orderings (the writer's release fence, its closing release store, the reader's acquire load
/// or its acquire fence).
#[test]
fn pause_board() {
    check(|| {
        let record = |board: &PfcBoard, at_ns: u64| {
            board.handle_pause(0, P3, Instant::from_nanos(at_ns), 500);
        };
        // The slot after the first and the second frame, worked out on a board of this thread.
        let expected: Vec<PauseView> = {
            let board = PfcBoard::new(1);
            [1_000, 1_200]
                .map(|at| {
                    record(&board, at);
                    board.view(0, P3)
                })
                .to_vec()
        };
        let deadlines: Vec<Instant> = expected.iter().map(|v| v.until).collect();
        let board = Arc::new(PfcBoard::new(1));
        record(&board, 1_000);
        let ingress = {
            let board = Arc::clone(&board);
            thread::spawn(move || record(&board, 1_200))
        };
        let until = board.paused_until(0, P3);
        let view = board.view(0, P3);
        position(&expected, &view);
        assert_in_order(&deadlines, &[until, view.until]);
        ingress.join().unwrap();
        assert_eq!(board.view(0, P3), expected[1]);
    });
}

/// Wanted-XOFF (relaxed): the egress side's generator sends only sets the ingress side
/// published, in order, and the last one once it is visible.
#[test]
fn wanted_xoff() {
    check(|| {
        // Distinct sets, so that the order of reads is visible: priority 3 in XOFF, then 3
        // and 4, then 3 released.
        let history = [0u8, 0b0000_1000, 0b0001_1000, 0b0001_0000];
        let board = Arc::new(PfcBoard::new(1));
        let ingress = {
            let board = Arc::clone(&board);
            thread::spawn(move || {
                for &set in &history[1..] {
                    board.set_wanted_xoff(0, set);
                }
            })
        };
        let now = Instant::from_micros(1);
        let mut generator = PfcGenerator::new(0xFF, 0xFFFF, 1_000_000);
        let mut read = Vec::new();
        let mut sent = vec![generator.sent_xoff()];
        for _ in 0..2 {
            let wanted = board.wanted_xoff(0);
            read.push(wanted);
            if generator.poll(now, wanted).is_some() {
                sent.push(generator.sent_xoff());
            }
        }
        assert_in_order(&history, &read);
        assert_in_order(&history, &sent);
        ingress.join().unwrap();
        let last = board.wanted_xoff(0);
        assert_eq!(last, history[3]);
        generator.poll(now, last);
        assert_eq!(generator.sent_xoff(), last);
    });
}

/// The mitigation board (relaxed): the ingress side reads only mitigations the egress side set,
/// in order (three distinct values, so that the order is visible).
#[test]
fn mitigation() {
    check(|| {
        let history = [
            QueueMitigation::None,
            QueueMitigation::Drop,
            QueueMitigation::IgnorePause,
        ];
        let board = Arc::new(MitigationBoard::new(1));
        let egress = {
            let board = Arc::clone(&board);
            thread::spawn(move || {
                for &m in &history[1..] {
                    board.set(0, 3, m);
                }
            })
        };
        let row = board.port(0);
        let read = [row.get(3), row.get(3)];
        assert_in_order(&history, &read);
        egress.join().unwrap();
        assert_eq!(board.get(0, 3), history[2]);
    });
}

/// The pool board (relaxed): another side reads each word of a slot as a level this side
/// published, in order (the two words may come from different publications; see `PoolBoard`).
#[test]
fn pool_board() {
    check(|| {
        // (shared, headroom) after each admission or release; each word distinct over time.
        let history = [(0u64, 0u64), (2, 1), (5, 3), (4, 2)];
        let board = PoolBoard::new(2, 1);
        let side0 = {
            let board = std::sync::Arc::clone(&board);
            thread::spawn(move || {
                let seat = board.seat(0);
                for &(shared, headroom) in &history[1..] {
                    board.publish(seat, 0, shared, headroom);
                }
            })
        };
        let seat1 = board.seat(1);
        let reads = [board.others(seat1, 0), board.others(seat1, 0)];
        let shared: Vec<u64> = history.iter().map(|h| h.0).collect();
        let headroom: Vec<u64> = history.iter().map(|h| h.1).collect();
        assert_in_order(&shared, &reads.map(|r| r.0));
        assert_in_order(&headroom, &reads.map(|r| r.1));
        side0.join().unwrap();
        assert_eq!(board.others(seat1, 0), history[3]);
        assert_eq!(board.total(0), history[3]);
    });
}

const AGING_NS: u64 = 300_000_000_000;
const VID: u16 = 1;
const STATION: [u8; 6] = [2, 0, 0, 0, 0, 1];
const OTHER_STATION: [u8; 6] = [2, 0, 0, 0, 0, 2];

/// One ingress side's table and learn-ring ends, as `Ingress` holds them.
struct Side {
    fdb: Fdb,
    sync: FdbSync,
    overflow: Counter,
}

impl Side {
    fn pair(ring_entries: usize) -> (Self, Self) {
        let mut syncs = FdbSync::for_sides_with_ring(2, 2, AGING_NS, ring_entries).into_iter();
        let mut side = || Side {
            fdb: Fdb::new(64, AGING_NS),
            sync: syncs
                .next()
                .flatten()
                .unwrap_or_else(|| unreachable!("two sides")),
            overflow: Counter::default(),
        };
        (side(), side())
    }

    /// What the ingress side does on a frame from `mac` on its port `port` at `at_ns`.
    fn learn(&mut self, mac: [u8; 6], port: u16, at_ns: u64) {
        let now = Instant::from_nanos(at_ns);
        let learned = self.fdb.learn(VID, mac, PortId(port), now);
        let overflow = &self.overflow;
        self.sync.publish_learn(
            &mut self.fdb,
            learned,
            VID,
            mac,
            PortId(port),
            now,
            overflow,
        );
    }

    /// What the ingress side does at the start of every burst and timeout.
    fn receive(&mut self, at_ns: u64) {
        self.sync
            .receive(&mut self.fdb, Instant::from_nanos(at_ns), |_, _| {});
    }

    fn port_of(&self, mac: [u8; 6], at_ns: u64) -> Option<PortId> {
        self.fdb.lookup(VID, mac, Instant::from_nanos(at_ns))
    }
}

/// The learn rings: a station moving from side A's port to side B's while both publish and
/// drain ends up on B's port in both tables, whatever the interleaving (newest wins), and an
/// update refused by a full ring is published again by the station's next learn.
#[test]
fn fdb_sync() {
    check(|| {
        // Rings of one update, so that a second learn before the peer drains overflows.
        let (mut a, mut b) = Side::pair(1);
        let a = thread::spawn(move || {
            a.learn(STATION, 0, 10);
            a.learn(OTHER_STATION, 0, 11);
            a.receive(30);
            a
        });
        let b = thread::spawn(move || {
            b.learn(STATION, 1, 20);
            b.receive(30);
            b
        });
        let (mut a, mut b) = (a.join().unwrap(), b.join().unwrap());
        // Their next calls: B drains, then A hears OTHER_STATION again (republishing it if its
        // first publication found the ring full), then both drain.
        b.receive(35);
        a.learn(OTHER_STATION, 0, 40);
        a.receive(50);
        b.receive(50);
        for (name, side) in [("A", &a), ("B", &b)] {
            assert_eq!(
                side.port_of(STATION, 60),
                Some(PortId(1)),
                "side {name} did not settle on the newest port"
            );
            assert_eq!(
                side.port_of(OTHER_STATION, 60),
                Some(PortId(0)),
                "side {name} lost a station after a full ring"
            );
        }
    });
}

/// The learn rings carry a flush after the learns it follows, and a receiver forgets what it
/// heard of before the flush but keeps what it heard of since.
#[test]
fn fdb_sync_flush() {
    check(|| {
        let (mut a, mut b) = Side::pair(4);
        let a = thread::spawn(move || {
            a.learn(STATION, 0, 10);
            // `Ingress::flush_fdb` at 15.
            a.fdb.flush();
            let flush = FdbUpdate::Flushed {
                at: Instant::from_nanos(15),
            };
            a.sync.publish_flush(flush, &a.overflow);
            a
        });
        let b = thread::spawn(move || {
            b.receive(12);
            b.learn(OTHER_STATION, 1, 20);
            b.receive(30);
            b
        });
        let (_a, mut b) = (a.join().unwrap(), b.join().unwrap());
        b.receive(40);
        assert_eq!(
            b.port_of(STATION, 50),
            None,
            "the flush was lost or overtaken"
        );
        assert_eq!(b.port_of(OTHER_STATION, 50), Some(PortId(1)));
    });
}

/// Ring byte counters: the egress side that pops a frame sees its bytes counted (the ingress
/// side adds them before the push, `IngressState::forward`), so the WRED depth `in − out`
/// includes the frame. Fails if the add moves after the push.
#[test]
fn ring_bytes() {
    check(|| {
        let bytes_in = Arc::new(Counter::default());
        let (mut producer, mut consumer) = RingBuffer::new(2);
        let ingress = {
            let bytes_in = Arc::clone(&bytes_in);
            thread::spawn(move || {
                for len in [64u64, 1500] {
                    bytes_in.add(len);
                    assert!(producer.push(len).is_ok());
                }
            })
        };
        let mut bytes_out = 0;
        for _ in 0..2 {
            if let Ok(len) = consumer.pop() {
                let depth = bytes_in.get().saturating_sub(bytes_out);
                assert!(depth >= len, "popped {len} B with a depth of {depth} B");
                bytes_out += len;
            }
        }
        ingress.join().unwrap();
    });
}

/// Counters (relaxed): the control plane reads a counter as monotonic and never above what was
/// counted.
#[test]
fn counters() {
    check(|| {
        let counter = Arc::new(Counter::default());
        let side = {
            let counter = Arc::clone(&counter);
            thread::spawn(move || {
                for _ in 0..3 {
                    counter.inc();
                }
            })
        };
        let reads = [counter.get(), counter.get()];
        assert!(
            reads[0] <= reads[1] && reads[1] <= 3,
            "reads {reads:?} of 3 increments"
        );
        side.join().unwrap();
        assert_eq!(counter.get(), 3);
    });
}
