//! Byte-exact wire formats for a lossless Ethernet switch.
//!
//! Every format follows the same two-level model (after smoltcp's `wire` module):
//!
//! * a zero-copy **view** `Xxx<T: AsRef<[u8]>>` over a buffer owned by anyone (`&[u8]`, `&mut [u8]`,
//!   `Vec<u8>`, a DMA buffer). Getters live in `impl<T: AsRef<[u8]>>`, setters in
//!   `impl<T: AsRef<[u8]> + AsMut<[u8]>>`. Field offsets are spelled out in a `mod field` per format.
//! * a plain `Copy` **Repr** struct with `parse(&view) -> Result<Repr, Error>`, `buffer_len()` and
//!   `emit(&mut view)`.
//!
//! # The `check_len` contract
//!
//! Every view has `new_unchecked` (no check), `check_len` and `new_checked` (= `new_unchecked` +
//! `check_len`). **After `check_len` has succeeded, no getter or setter of that view panics**, whatever the
//! buffer contents. Use `new_checked` on untrusted input (a frame that arrived on a port). When emitting
//! into a buffer you sized with `Repr::buffer_len()`, use `new_unchecked`; the `emit` methods only write
//! fields that lie inside `buffer_len()`.
//!
//! Setters that rewrite a length field (IHL, total length, UDP length) can break what `check_len`
//! established; the payload accessors clamp to the buffer so that they still do not panic, but run
//! `check_len` again before trusting the other fields.
//!
//! Nothing in this crate allocates: outside tests it is `#![no_std]` and never uses `alloc`.
//! `Repr::parse` and the free functions ([`ethernet::parse_l2`], [`roce::parse_rocev2`],
//! [`roce::verify_icrc`], [`vlan::strip_vlan_tag`], ...) never panic, whatever the input; they run the
//! length checks themselves. The `emit` methods of the Reprs panic if handed a view shorter than
//! `Repr::buffer_len()` (a programming error, as in smoltcp). The helpers that write into a caller's
//! `&mut [u8]` ([`vlan::insert_vlan_tag`], [`mac_control::MacControlRepr::emit_frame`],
//! [`roce::RoceV2PacketRepr::emit`]) check the length and return an error instead.
//!
//! # Unknown code points
//!
//! Unknown EtherTypes, IP protocols, MAC Control opcodes, BTH opcodes and LLDP TLV types are carried
//! as `Unknown(raw)` variants, never refused: the switch forwards what it does not understand.
#![cfg_attr(not(test), no_std)]
#![forbid(unsafe_code)]

#[macro_use]
mod macros;

pub mod checksum;
pub mod ethernet;
pub mod ip;
pub mod ipv4;
pub mod ipv6;
pub mod lldp;
pub mod mac_control;
pub mod pause;
pub mod roce;
pub mod udp;
pub mod vlan;

mod error;

pub use error::Error;
pub use ip::{CeMark, Ecn, IpProtocol};

/// Byte range of a fixed-size field inside a header.
pub(crate) type Field = core::ops::Range<usize>;
/// Byte range from a fixed offset to the end of the buffer.
pub(crate) type Rest = core::ops::RangeFrom<usize>;
