//! Cost of the FIB: LPM lookups, route updates (with their publication and swap), ECMP hashing.
//!
//! * `lookup_v4/{dir16,dir24,prefix_trie}/{1k,100k}/{random,roce}`: 4096 IPv4 lookups per
//!   iteration against the same route set in headroom's LPM with a 16-bit first level
//!   (DIR-16-8-8), with a 24-bit one (DIR-24-8, as `rte_lpm`), and in the `prefix-trie` crate
//!   (a binary trie: the baseline). `random` destinations are uniform over the address space;
//!   `roce` ones are 64 hosts inside 16 of the routed prefixes, each looked up 8 times in a row
//!   (a fabric's few destinations, bursts of one QP).
//! * `lookup_v6/{dir16,prefix_trie}/1k/{random,roce}`: the same for IPv6 (/48, /64, /128 routes).
//! * `update_v4/{dir16,dir24}/100k/{add_del_24,add_del_8,batch_1000_24}`: route changes on a FIB
//!   of 100k routes, each followed by what makes it take effect: `FibBuilder::publish` (the
//!   spare copy repainted), the send to one lcore, its `refresh` (swap) and the reclaim. Reported
//!   per change: `add_del_*` is one add and one delete (two publications) of a /24 or a /8;
//!   `batch_1000_24` adds 1000 /24s and publishes once.
//! * `build_v4/{dir16,dir24}/100k`: the whole FIB built and published from nothing (what an
//!   initial netlink dump costs): the baseline an incremental change is compared with.
//! * `ecmp/{siphash,crc32}`: the flow hash of 4096 IPv4 5-tuples; `ecmp/resolve_siphash`: an ECMP
//!   route's lookup plus member choice.
//!
//! Times are the thread's CPU time (`CLOCK_THREAD_CPUTIME_ID`): the machine is shared. The route
//! sets are generated from a fixed seed, so every run measures the same tables; memory per FIB
//! copy is printed once at the start.

use criterion::{black_box, BenchmarkId, Criterion, Throughput};
use headroom_core::route::{
    fib_channel, EcmpHash, EcmpHashAlgorithm, EcmpMember, Fib, FibBuilder, FibConfig, FibReader,
    FibSender, FlowKey, Ipv4Prefix, Ipv6Prefix, NextHop, NextHopId, RouteTarget,
};
use headroom_core::types::PortId;
use headroom_wire::ethernet::MacAddress;
use ipnet::{Ipv4Net, Ipv6Net};
use prefix_trie::PrefixMap;
use rand_core::{RngCore, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use std::collections::BTreeSet;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::sync::Arc;
use std::time::Duration;

const LOOKUPS: usize = 4096;

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

fn rng(seed: u64) -> Xoshiro256PlusPlus {
    Xoshiro256PlusPlus::seed_from_u64(seed)
}

/// `n` distinct IPv4 prefixes plus a default route, with lengths roughly as in a large table:
/// mostly /24, then /22–/23, /16–/21, some /25–/32 and a few short ones.
fn ipv4_routes(n: usize, seed: u64) -> Vec<Ipv4Prefix> {
    const LENGTHS: [(u8, u32); 12] = [
        (8, 2),
        (12, 5),
        (16, 50),
        (19, 50),
        (20, 70),
        (21, 70),
        (22, 120),
        (23, 100),
        (24, 450),
        (28, 25),
        (31, 25),
        (32, 33),
    ];
    let total: u32 = LENGTHS.iter().map(|l| l.1).sum();
    let mut r = rng(seed);
    let mut set = BTreeSet::new();
    set.insert(Ipv4Prefix::new(Ipv4Addr::UNSPECIFIED, 0).unwrap());
    while set.len() < n {
        let mut pick = r.next_u32() % total;
        let len = LENGTHS
            .iter()
            .find(|&&(_, w)| {
                if pick < w {
                    true
                } else {
                    pick -= w;
                    false
                }
            })
            .unwrap()
            .0;
        // Unicast space 1.0.0.0–223.255.255.255.
        let addr = 0x0100_0000 + r.next_u32() % (0xE000_0000 - 0x0100_0000);
        set.insert(Ipv4Prefix::new(Ipv4Addr::from(addr), len).unwrap());
    }
    set.into_iter().collect()
}

/// `n` IPv6 prefixes: /48s, /64s and /128s under a few /32s, plus a default.
fn ipv6_routes(n: usize, seed: u64) -> Vec<Ipv6Prefix> {
    let mut r = rng(seed);
    let mut set = BTreeSet::new();
    set.insert(Ipv6Prefix::new(Ipv6Addr::UNSPECIFIED, 0).unwrap());
    while set.len() < n {
        let top = 0x2001_0db8u128 + u128::from(r.next_u32() % 8);
        let addr = (top << 96) | (u128::from(r.next_u64()) << 32) | u128::from(r.next_u32());
        let len = [48u8, 64, 64, 64, 128][r.next_u32() as usize % 5];
        set.insert(Ipv6Prefix::new(Ipv6Addr::from(addr), len).unwrap());
    }
    set.into_iter().collect()
}

/// A builder with `routes` pointing round-robin at 64 next hops and 16 ECMP groups of 4.
fn fib_builder_v4(top_bits: u8, routes: &[Ipv4Prefix]) -> FibBuilder {
    let mut b = FibBuilder::new(FibConfig {
        ipv4_top_bits: top_bits,
        max_ipv4_routes: 1 << 20,
        max_ipv4_groups: 1 << 18,
        ..FibConfig::default()
    })
    .unwrap();
    let targets = targets(&mut b);
    for (i, &p) in routes.iter().enumerate() {
        b.set_route_v4(p, targets[i % targets.len()]).unwrap();
    }
    b
}

fn targets(b: &mut FibBuilder) -> Vec<RouteTarget> {
    let hops: Vec<NextHopId> = (0..64u16)
        .map(|i| {
            b.add_next_hop(NextHop::Resolved {
                port: PortId(i % 8),
                vlan: None,
                mac: MacAddress([2, 0, 0, 0, 0, i as u8]),
            })
            .unwrap()
        })
        .collect();
    let mut targets: Vec<RouteTarget> = hops.iter().map(|&h| RouteTarget::NextHop(h)).collect();
    for g in 0..16 {
        let members: Vec<EcmpMember> = (0..4).map(|m| EcmpMember::new(hops[g * 4 + m])).collect();
        targets.push(RouteTarget::Ecmp(b.add_ecmp_group(&members, None).unwrap()));
    }
    targets
}

/// A builder with one lcore attached, and the call that makes a change take effect.
struct Published {
    builder: FibBuilder,
    sender: FibSender,
    reader: FibReader,
}

impl Published {
    fn new(mut builder: FibBuilder) -> Self {
        let (mut sender, mut reader) = fib_channel(Arc::clone(builder.published()));
        let fib = builder.publish().unwrap();
        sender.send(&fib);
        drop(fib);
        reader.refresh();
        sender.reclaim();
        Self {
            builder,
            sender,
            reader,
        }
    }

    /// Publish, send, swap on the lcore, reclaim: the change is in force and the spare free.
    fn take_effect(&mut self) {
        let fib = self.builder.publish().expect("spare is free");
        self.sender.send(&fib);
        drop(fib);
        assert!(self.reader.refresh());
        self.sender.reclaim();
    }

    fn fib(&self) -> &Fib {
        self.reader.fib()
    }
}

fn random_v4(seed: u64) -> Vec<Ipv4Addr> {
    let mut r = rng(seed);
    (0..LOOKUPS).map(|_| Ipv4Addr::from(r.next_u32())).collect()
}

/// 64 hosts inside 16 of the routed prefixes (of length 16–24), each looked up 8 times in a row.
fn roce_v4(routes: &[Ipv4Prefix], seed: u64) -> Vec<Ipv4Addr> {
    let mut r = rng(seed);
    let subnets: Vec<Ipv4Prefix> = routes
        .iter()
        .filter(|p| (16..=24).contains(&p.prefix_len()))
        .step_by(7)
        .take(16)
        .copied()
        .collect();
    let hosts: Vec<Ipv4Addr> = (0..64)
        .map(|i| {
            let net = subnets[i % subnets.len()];
            let host_bits = 32 - u32::from(net.prefix_len());
            Ipv4Addr::from(net.bits() | (r.next_u32() & ((1u32 << host_bits) - 1)) | 1)
        })
        .collect();
    (0..LOOKUPS)
        .map(|i| hosts[(i / 8 * 37) % hosts.len()])
        .collect()
}

fn random_v6(seed: u64) -> Vec<Ipv6Addr> {
    let mut r = rng(seed);
    // Under the routed /32s half of the time, so that lookups go deep.
    (0..LOOKUPS)
        .map(|i| {
            let low = (u128::from(r.next_u64()) << 64) | u128::from(r.next_u64());
            let addr = if i % 2 == 0 {
                ((0x2001_0db8u128 + u128::from(r.next_u32() % 8)) << 96) | (low >> 32)
            } else {
                low
            };
            Ipv6Addr::from(addr)
        })
        .collect()
}

fn roce_v6(routes: &[Ipv6Prefix], seed: u64) -> Vec<Ipv6Addr> {
    let mut r = rng(seed);
    let subnets: Vec<Ipv6Prefix> = routes
        .iter()
        .filter(|p| p.prefix_len() == 64)
        .step_by(7)
        .take(16)
        .copied()
        .collect();
    let hosts: Vec<Ipv6Addr> = (0..64)
        .map(|i| Ipv6Addr::from(subnets[i % subnets.len()].bits() | u128::from(r.next_u64())))
        .collect();
    (0..LOOKUPS)
        .map(|i| hosts[(i / 8 * 37) % hosts.len()])
        .collect()
}

fn per_element(c: &mut Criterion, group: &str, id: BenchmarkId, n: u64, mut f: impl FnMut()) {
    let mut g = c.benchmark_group(group);
    g.throughput(Throughput::Elements(n));
    g.bench_function(id, |b| {
        b.iter_custom(|iters| {
            let start = thread_cpu_time();
            for _ in 0..iters {
                f();
            }
            thread_cpu_time() - start
        });
    });
    g.finish();
}

fn lookups_v4(c: &mut Criterion) {
    for (size_name, n) in [("1k", 1_000usize), ("100k", 100_000)] {
        let routes = ipv4_routes(n, 1);
        let mut trie: PrefixMap<Ipv4Net, u32> = PrefixMap::new();
        for (i, p) in routes.iter().enumerate() {
            trie.insert(
                Ipv4Net::new(p.addr(), p.prefix_len()).unwrap(),
                i as u32 + 1,
            );
        }
        let fibs: Vec<(&str, Published)> = [("dir16", 16u8), ("dir24", 24)]
            .into_iter()
            .map(|(name, top)| (name, Published::new(fib_builder_v4(top, &routes))))
            .collect();
        for (name, p) in &fibs {
            eprintln!(
                "route bench: IPv4 {size_name} routes, {name}: {:.1} MiB per FIB copy",
                p.fib().memory_bytes() as f64 / (1 << 20) as f64
            );
        }
        for (kind, dsts) in [("random", random_v4(2)), ("roce", roce_v4(&routes, 3))] {
            // Every structure gives the same answers (same route for each destination).
            for &d in &dsts {
                let want = trie
                    .get_lpm(&Ipv4Net::new(d, 32).unwrap())
                    .map(|(net, _)| Ipv4Prefix::new(net.addr(), net.prefix_len()).unwrap());
                let got = fibs[0].1.fib().lookup_v4(d);
                assert_eq!(got.is_some(), want.is_some());
                if let Some(w) = want {
                    assert_eq!(got, fibs[0].1.builder.route_v4(w));
                    assert_eq!(fibs[1].1.fib().lookup_v4(d), got);
                }
            }
            for (name, p) in &fibs {
                let fib = p.fib();
                per_element(
                    c,
                    "lookup_v4",
                    BenchmarkId::new(*name, format!("{size_name}/{kind}")),
                    LOOKUPS as u64,
                    || {
                        for &d in &dsts {
                            black_box(fib.lookup_v4(black_box(d)));
                        }
                    },
                );
            }
            per_element(
                c,
                "lookup_v4",
                BenchmarkId::new("prefix_trie", format!("{size_name}/{kind}")),
                LOOKUPS as u64,
                || {
                    for &d in &dsts {
                        let key = Ipv4Net::new(black_box(d), 32).unwrap();
                        black_box(trie.get_lpm(&key).map(|(_, v)| *v));
                    }
                },
            );
        }
    }
}

fn lookups_v6(c: &mut Criterion) {
    let routes = ipv6_routes(1000, 4);
    let mut b = FibBuilder::new(FibConfig::default()).unwrap();
    let t = targets(&mut b);
    let mut trie: PrefixMap<Ipv6Net, u32> = PrefixMap::new();
    for (i, &p) in routes.iter().enumerate() {
        b.set_route_v6(p, t[i % t.len()]).unwrap();
        trie.insert(
            Ipv6Net::new(p.addr(), p.prefix_len()).unwrap(),
            i as u32 + 1,
        );
    }
    let p = Published::new(b);
    eprintln!(
        "route bench: IPv6 1k routes, dir16: {:.1} MiB per FIB copy",
        p.fib().memory_bytes() as f64 / (1 << 20) as f64
    );
    for (kind, dsts) in [("random", random_v6(5)), ("roce", roce_v6(&routes, 6))] {
        for &d in &dsts {
            let want = trie
                .get_lpm(&Ipv6Net::new(d, 128).unwrap())
                .map(|(net, _)| Ipv6Prefix::new(net.addr(), net.prefix_len()).unwrap());
            assert_eq!(
                p.fib().lookup_v6(d),
                want.and_then(|w| p.builder.route_v6(w))
            );
        }
        let fib = p.fib();
        per_element(
            c,
            "lookup_v6",
            BenchmarkId::new("dir16", format!("1k/{kind}")),
            LOOKUPS as u64,
            || {
                for &d in &dsts {
                    black_box(fib.lookup_v6(black_box(d)));
                }
            },
        );
        per_element(
            c,
            "lookup_v6",
            BenchmarkId::new("prefix_trie", format!("1k/{kind}")),
            LOOKUPS as u64,
            || {
                for &d in &dsts {
                    let key = Ipv6Net::new(black_box(d), 128).unwrap();
                    black_box(trie.get_lpm(&key).map(|(_, v)| *v));
                }
            },
        );
    }
}

fn updates_v4(c: &mut Criterion) {
    let routes = ipv4_routes(100_000, 1);
    for (name, top) in [("dir16", 16u8), ("dir24", 24)] {
        let mut p = Published::new(fib_builder_v4(top, &routes));
        let target = RouteTarget::NextHop(NextHopId::BLACKHOLE);
        // /24s in 223.0.0.0/16 that are not routes yet.
        let fresh_24: Vec<Ipv4Prefix> = (0..4096u32)
            .map(|i| {
                Ipv4Prefix::new(Ipv4Addr::from(0xE000_0000 - 0x0100_0000 + (i << 8)), 24).unwrap()
            })
            .filter(|q| p.builder.route_v4(*q).is_none())
            .collect();
        let mut next = 0;
        per_element(
            c,
            "update_v4",
            BenchmarkId::new(name, "100k/add_del_24"),
            2,
            || {
                let q = fresh_24[next % fresh_24.len()];
                next += 1;
                p.builder.set_route_v4(q, target).unwrap();
                p.take_effect();
                p.builder.remove_route_v4(q);
                p.take_effect();
            },
        );
        let slash8 = Ipv4Prefix::new(Ipv4Addr::new(100, 0, 0, 0), 8).unwrap();
        assert!(p.builder.route_v4(slash8).is_none());
        per_element(
            c,
            "update_v4",
            BenchmarkId::new(name, "100k/add_del_8"),
            2,
            || {
                p.builder.set_route_v4(slash8, target).unwrap();
                p.take_effect();
                p.builder.remove_route_v4(slash8);
                p.take_effect();
            },
        );
        assert!(fresh_24.len() >= 2000);
        let mut flip = false;
        per_element(
            c,
            "update_v4",
            BenchmarkId::new(name, "100k/batch_1000_24"),
            1000,
            || {
                for q in &fresh_24[..1000] {
                    if flip {
                        p.builder.remove_route_v4(*q);
                    } else {
                        p.builder.set_route_v4(*q, target).unwrap();
                    }
                }
                flip = !flip;
                p.take_effect();
            },
        );
        black_box(p.fib().lookup_v4(Ipv4Addr::new(100, 1, 1, 1)));
    }
}

fn builds_v4(c: &mut Criterion) {
    let routes = ipv4_routes(100_000, 1);
    let mut g = c.benchmark_group("build_v4");
    g.sample_size(10);
    g.throughput(Throughput::Elements(routes.len() as u64));
    for (name, top) in [("dir16", 16u8), ("dir24", 24)] {
        g.bench_function(BenchmarkId::new(name, "100k"), |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    let start = thread_cpu_time();
                    let mut builder = fib_builder_v4(top, &routes);
                    black_box(builder.publish().unwrap());
                    total += thread_cpu_time() - start;
                    drop(builder);
                }
                total
            });
        });
    }
    g.finish();
}

fn ecmp(c: &mut Criterion) {
    let mut r = rng(7);
    let flows: Vec<FlowKey> = (0..LOOKUPS)
        .map(|_| {
            FlowKey::ipv4(
                Ipv4Addr::from(r.next_u32()),
                Ipv4Addr::from(r.next_u32()),
                17,
                (r.next_u32() as u16) | 0xC000,
                4791,
            )
        })
        .collect();
    for (name, algorithm) in [
        ("siphash", EcmpHashAlgorithm::SipHash),
        ("crc32", EcmpHashAlgorithm::Crc32),
    ] {
        let hash = EcmpHash {
            algorithm,
            seed: 0x5eed,
            rotation: 0,
        };
        per_element(
            c,
            "ecmp",
            BenchmarkId::from_parameter(name),
            LOOKUPS as u64,
            || {
                for f in &flows {
                    black_box(hash.hash(black_box(f)));
                }
            },
        );
    }
    let mut b = FibBuilder::new(FibConfig::default()).unwrap();
    let t = targets(&mut b);
    assert!(matches!(t[64], RouteTarget::Ecmp(_)));
    b.set_route_v4(Ipv4Prefix::new(Ipv4Addr::UNSPECIFIED, 0).unwrap(), t[64])
        .unwrap();
    let p = Published::new(b);
    let fib = p.fib();
    per_element(
        c,
        "ecmp",
        BenchmarkId::from_parameter("resolve_siphash"),
        LOOKUPS as u64,
        || {
            for f in &flows {
                let dst = Ipv4Addr::new(f.dst[0], f.dst[1], f.dst[2], f.dst[3]);
                let target = fib.lookup_v4(black_box(dst)).unwrap();
                black_box(fib.resolve(target, || *f));
            }
        },
    );
}

fn main() {
    let mut c = Criterion::default().configure_from_args();
    lookups_v4(&mut c);
    lookups_v6(&mut c);
    updates_v4(&mut c);
    builds_v4(&mut c);
    ecmp(&mut c);
    c.final_summary();
}
