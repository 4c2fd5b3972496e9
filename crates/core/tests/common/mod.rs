//! A small virtual-time lab around one single-lcore `LcoreStep<HeapFrame>`: build frames, feed
//! ports, collect what each port transmits, decode PFC frames. No sleeping: time is a number we
//! advance. It drives the step in its documented call order.
#![allow(dead_code)]

use etherparse::PacketBuilder;
use headroom_core::egress::Egress;
use headroom_core::frame::{Frame, HeapFrame};
use headroom_core::ingress::Ingress;
use headroom_core::params::SwitchParams;
use headroom_core::step::LcoreStep;
use headroom_core::time::{Duration, Instant};
use headroom_core::types::PortId;
use headroom_wire::ip::Ecn;
use headroom_wire::ipv4::Ipv4Packet;
use headroom_wire::mac_control::{MacControlFrame, MacControlRepr, PfcRepr};

pub const HOST_A: [u8; 6] = [0x02, 0xaa, 0, 0, 0, 0x0a];
pub const HOST_B: [u8; 6] = [0x02, 0xaa, 0, 0, 0, 0x0b];
pub const HOST_C: [u8; 6] = [0x02, 0xaa, 0, 0, 0, 0x0c];

/// An IPv4/UDP frame of exactly `len` bytes (without FCS) with the given DSCP and ECN.
pub fn ipv4_frame(src: [u8; 6], dst: [u8; 6], dscp: u8, ecn: Ecn, len: usize) -> HeapFrame {
    assert!(len >= 42, "an IPv4/UDP frame has at least 42 bytes");
    let payload = vec![0x5a; len - 42];
    let builder = PacketBuilder::ethernet2(src, dst)
        .ipv4([10, 0, 0, 1], [10, 0, 0, 2], 64)
        .udp(49152, 4791);
    let mut buf = Vec::with_capacity(len);
    builder
        .write(&mut buf, &payload)
        .expect("etherparse writes into a Vec");
    let mut ip = Ipv4Packet::new_checked(&mut buf[14..]).expect("valid IPv4");
    ip.set_dscp(dscp);
    ip.set_ecn(ecn);
    ip.fill_checksum();
    assert_eq!(buf.len(), len);
    HeapFrame::new(&buf)
}

/// A 60-byte PFC frame from `src` (802.1Qbb).
pub fn pfc_frame(src: [u8; 6], class_enable: u8, quanta: [u16; 8]) -> HeapFrame {
    let mut buf = [0u8; 60];
    MacControlRepr::Pfc(PfcRepr {
        class_enable,
        pause_quanta: quanta,
    })
    .emit_frame(headroom_wire::ethernet::MacAddress(src), &mut buf)
    .expect("60 bytes are enough");
    HeapFrame::new(&buf)
}

/// The PFC content of a frame, if it is a PFC frame.
pub fn as_pfc(frame: &HeapFrame) -> Option<PfcRepr> {
    let f = MacControlFrame::new_checked(frame.data()).ok()?;
    match MacControlRepr::parse(&f).ok()? {
        MacControlRepr::Pfc(p) => Some(p),
        _ => None,
    }
}

/// DSCP of an IPv4 frame.
pub fn dscp_of(frame: &HeapFrame) -> u8 {
    Ipv4Packet::new_checked(&frame.data()[14..])
        .expect("IPv4")
        .dscp()
}

pub struct Lab {
    pub sw: LcoreStep<HeapFrame>,
    pub now: Instant,
}

impl Lab {
    pub fn new(params: SwitchParams) -> Self {
        let now = Instant::from_millis(1);
        Self {
            sw: LcoreStep::single(params, now).expect("valid parameters"),
            now,
        }
    }

    pub fn rx(&mut self, port: u16, frame: HeapFrame) {
        let mut burst = vec![frame];
        self.sw.handle_rx_burst(self.now, PortId(port), &mut burst);
        self.sw.handle_timeout(self.now);
    }

    /// Everything `port` transmits now (up to `max` data frames, PFC first).
    pub fn tx(&mut self, port: u16, max: usize) -> Vec<HeapFrame> {
        let mut out = Vec::new();
        self.sw
            .poll_tx_burst(self.now, PortId(port), &mut out, max, &mut |len| {
                Some(HeapFrame::new(&vec![0; len]))
            });
        out
    }

    /// PFC frames `port` sends now, discarding data frames (the port must not hold data).
    pub fn pfc_out(&mut self, port: u16) -> Vec<PfcRepr> {
        let out = self.tx(port, 0);
        out.iter()
            .map(|f| as_pfc(f).expect("only PFC frames"))
            .collect()
    }

    pub fn advance(&mut self, d: Duration) {
        self.now += d;
        self.sw.handle_timeout(self.now);
    }

    pub fn advance_ns(&mut self, ns: u64) {
        self.advance(Duration::from_nanos(ns));
    }

    /// The ingress side (a single-lcore step has both).
    pub fn ingress(&self) -> &Ingress<HeapFrame> {
        self.sw.ingress().expect("a single-lcore step receives")
    }

    /// The egress side.
    pub fn egress(&self) -> &Egress<HeapFrame> {
        self.sw.egress().expect("a single-lcore step transmits")
    }

    /// Ingress-side counters of a port.
    pub fn rx_counters(&self, port: u16) -> &headroom_core::counters::IngressPortCounters {
        self.ingress().port_counters(PortId(port))
    }

    /// Egress-side counters of a port.
    pub fn tx_counters(&self, port: u16) -> &headroom_core::counters::EgressPortCounters {
        self.egress().port_counters(PortId(port))
    }

    /// Teaches the switch where `mac` lives by receiving a frame from it on `port`, then drains
    /// the flooded copies.
    pub fn learn(&mut self, port: u16, mac: [u8; 6]) {
        self.rx(port, ipv4_frame(mac, [0xff; 6], 0, Ecn::NotEct, 64));
        let ports = self.sw.shared().params.ports.len() as u16;
        for p in 0..ports {
            if self.sw.shared().tx_enabled(PortId(p)) {
                self.tx(p, 64);
            }
        }
    }
}
