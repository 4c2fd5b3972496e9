//! The state machines do not allocate after construction: a counting global allocator sees no
//! allocation on this thread while they run in steady state.

use headroom_roce::dcqcn::{Rp, RpParams};
use headroom_roce::np::{Np, NpConfig};
use headroom_roce::pacer::{Link, Pacer};
use headroom_roce::pause::{PauseState, Priority};
use headroom_roce::rc::{Requester, RequesterConfig, Responder, ResponderConfig, RxPacket};
use headroom_roce::time::Instant;

#[global_allocator]
static GLOBAL: headroom_testkit::CountingAllocator = headroom_testkit::CountingAllocator;

fn allocations() -> u64 {
    headroom_testkit::allocations()
}

const GBPS: u64 = 1_000_000_000;

#[test]
fn steady_state_does_not_allocate() {
    let line = 100 * GBPS;
    let mut rps = [
        Rp::new(RpParams::paper(), line, Instant::ZERO).unwrap(),
        Rp::new(RpParams::nvidia(), line, Instant::ZERO).unwrap(),
    ];
    let mut np = Np::new(NpConfig::paper(), 64).unwrap();
    let mut link = Link::new(line, Instant::ZERO).unwrap();
    let mut pacer = Pacer::new(line, 4096, Instant::ZERO).unwrap();
    let mut pause = PauseState::new(line).unwrap();
    let mut requester = Requester::new(RequesterConfig {
        message_queue_capacity: 32,
        ..RequesterConfig::default()
    })
    .unwrap();
    let mut responder = Responder::new(ResponderConfig {
        delivered_queue_capacity: 8,
        ..ResponderConfig::default()
    })
    .unwrap();
    for wr_id in 0..32 {
        requester.post_write(wr_id, 0, 0, 10_000).unwrap();
    }

    let before = allocations();
    let mut now = 0u64;
    let mut next_wr = 32;
    let mut drop_counter = 0u32;
    for step in 0..50_000u64 {
        now += 400;
        let at = Instant::from_nanos(now);
        // DCQCN: CNPs now and then, bytes always, timers.
        for rp in &mut rps {
            if step % 97 == 0 {
                rp.handle_cnp(at);
            }
            rp.handle_tx(at, 1_100);
            rp.handle_timeout(at);
            let _ = rp.poll_timeout();
        }
        pacer.set_rate(at, rps[0].current_rate_bps()).unwrap();
        // Pacing and PFC.
        if pacer.next_send_time(at, 1_100, &link) <= at {
            pacer.on_send(at, 1_100, 1_124, &mut link).unwrap();
        }
        if step % 500 == 0 {
            pause.handle_pfc(at, 0b1000, [0, 0, 0, 100, 0, 0, 0, 0]);
        }
        let _ = pause.is_paused(at, Priority::new(3).unwrap());
        let _ = pause.poll_timeout(at);
        // NP: marks for 40 flows.
        if step % 3 == 0 {
            np.handle_ce(at, (step % 40) as u32).unwrap();
        }
        while np.poll_cnp(at).is_some() {}
        // RC loopback with a drop every 500 packets, zero latency.
        for _ in 0..4 {
            let Some(packet) = requester.poll_transmit(at) else {
                break;
            };
            drop_counter += 1;
            if !drop_counter.is_multiple_of(500) {
                responder.handle_packet(&RxPacket::from(&packet));
            }
            while let Some(ack) = responder.poll_ack() {
                requester.handle_ack(at, ack);
            }
        }
        requester.handle_timeout(at);
        while responder.poll_delivered().is_some() {}
        while let Some(done) = requester.poll_completion() {
            requester.post_write(next_wr, 0, 0, done.len).unwrap();
            next_wr += 1;
        }
    }
    let after = allocations();
    assert_eq!(after - before, 0, "allocations in steady state");
    // The run did real work.
    assert!(rps[0].stats().rate_cuts_total > 100);
    assert!(np.stats().cnps_polled_total > 100);
    assert!(requester.stats().messages_completed_total > 1_000);
    assert!(requester.stats().naks_total > 0);
    assert!(pacer.packets_total() > 100);
}
