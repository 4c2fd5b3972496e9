//! IEEE 802.1Qaz DCBX: the organisationally specific LLDP TLVs of OUI 00-80-C2 that carry
//! Enhanced Transmission Selection (ETS), Priority-based Flow Control (PFC) and Application
//! Priority (IEEE 802.1Q-2018 clause D.2.8–D.2.10, formerly 802.1Qaz clause D.2).
//!
//! Offsets from the start of the *information string* (after the 3-byte OUI and 1-byte subtype):
//!
//! | subtype | length | layout |
//! |---|---|---|
//! | 9 ETS Configuration | 21 | W (bit 7), CBS (bit 6), reserved (5–3), Max TCs (2–0, 0 = 8); priority→TC table 4 × 2 nibbles (priority 0 = high nibble of the first byte); TC bandwidth % × 8; TSA × 8 |
//! | 10 ETS Recommendation | 21 | reserved byte; the same three tables |
//! | 11 PFC Configuration | 2 | W (bit 7), MBC (bit 6), reserved (5–4), PFC cap (3–0); PFC enable (bit n = priority n) |
//! | 12 Application Priority | 1 + 3n | reserved byte; n entries: priority (bits 7–5), reserved (4–3), selector (2–0), protocol ID (big-endian u16) |
//!
//! (The TLV length field counts OUI and subtype too: 25, 25, 6 and 5 + 3n.)
//!
//! **Receive policy.** Reserved bits are ignored on receipt and sent as zero (802.1Q clause D.1).
//! The lengths above are exact: an ETS or PFC TLV of any other length, or an APP TLV whose entries
//! do not fill it in whole triplets, is refused with [`Error::BadLength`] (that TLV only; the
//! LLDPDU it came in is still good). Values the standard reserves (a priority→TC nibble above 7, a
//! TSA of 3..=254, selectors 0, 6, 7) are carried as received for the caller to judge.

use crate::lldp::Oui;
use crate::Error;

/// The IEEE 802.1 organisationally unique identifier, 00-80-C2.
pub const IEEE_8021_OUI: Oui = [0x00, 0x80, 0xC2];

/// Priorities and traffic classes in the 802.1Qaz tables.
pub const PRIORITY_COUNT: usize = 8;

/// Information-string length (after OUI and subtype) of the ETS Configuration and Recommendation TLVs.
pub const ETS_INFO_LEN: usize = 21;
/// Information-string length of the PFC Configuration TLV.
pub const PFC_INFO_LEN: usize = 2;
/// Bytes of one Application Priority entry.
pub const APP_ENTRY_LEN: usize = 3;
/// Most Application Priority entries that fit one TLV: (507 − 1) / 3.
pub const MAX_APP_ENTRIES: usize = (crate::lldp::MAX_ORG_INFO_LEN - 1) / APP_ENTRY_LEN;

enum_with_unknown! {
    /// Subtypes of the 00-80-C2 TLVs that headroom decodes (802.1Q-2018 table D-1). Every other
    /// subtype (port VLAN ID 1, VLAN name 3, congestion notification 8, …) is carried undecoded.
    pub enum Ieee8021Subtype(u8) {
        /// ETS Configuration.
        EtsConfiguration = 9,
        /// ETS Recommendation.
        EtsRecommendation = 10,
        /// PFC Configuration.
        PfcConfiguration = 11,
        /// Application Priority.
        ApplicationPriority = 12,
    }
}

enum_with_unknown! {
    /// Transmission selection algorithm of a traffic class (802.1Q-2018 table 8-6; Linux
    /// `IEEE_8021QAZ_TSA_*`).
    pub enum Tsa(u8) {
        /// Strict priority.
        Strict = 0,
        /// Credit-based shaper (802.1Qav).
        CreditBasedShaper = 1,
        /// Enhanced transmission selection (bandwidth shares).
        Ets = 2,
        /// Vendor specific.
        VendorSpecific = 255,
    }
}

enum_with_unknown! {
    /// Application Priority selector (802.1Q-2018 table D-9; Linux `IEEE_8021QAZ_APP_SEL_*`).
    pub enum AppSelector(u8) {
        /// The protocol ID is an EtherType (RoCEv1: 0x8915).
        Ethertype = 1,
        /// Well-known port over TCP or SCTP.
        TcpSctpPort = 2,
        /// Well-known port over UDP or DCCP (RoCEv2: 4791).
        UdpDccpPort = 3,
        /// Well-known port over TCP, SCTP, UDP or DCCP.
        AnyPort = 4,
        /// The protocol ID is a DSCP value 0..=63.
        Dscp = 5,
    }
}

/// The three tables ETS Configuration and ETS Recommendation share.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct EtsTables {
    /// Priority → traffic class, index = priority. Values are 4-bit on the wire; 8..=15 are
    /// reserved but carried.
    pub priority_tc: [u8; PRIORITY_COUNT],
    /// Bandwidth share of each traffic class, percent (should add up to 100 over the ETS classes).
    pub tc_bandwidth_percent: [u8; PRIORITY_COUNT],
    /// Transmission selection algorithm of each traffic class.
    pub tsa: [Tsa; PRIORITY_COUNT],
}

impl Default for EtsTables {
    /// Every priority in TC 0, no bandwidth, strict priority.
    fn default() -> Self {
        EtsTables {
            priority_tc: [0; PRIORITY_COUNT],
            tc_bandwidth_percent: [0; PRIORITY_COUNT],
            tsa: [Tsa::Strict; PRIORITY_COUNT],
        }
    }
}

impl EtsTables {
    fn parse(tables: &[u8]) -> EtsTables {
        // Caller guarantees 20 bytes: 4 priority bytes, 8 bandwidths, 8 TSAs.
        let mut out = EtsTables::default();
        for (i, byte) in tables[..4].iter().enumerate() {
            out.priority_tc[2 * i] = byte >> 4;
            out.priority_tc[2 * i + 1] = byte & 0x0F;
        }
        out.tc_bandwidth_percent.copy_from_slice(&tables[4..12]);
        for (tsa, &raw) in out.tsa.iter_mut().zip(&tables[12..20]) {
            *tsa = Tsa::from(raw);
        }
        out
    }

    fn validate(&self) -> Result<(), Error> {
        if self.priority_tc.iter().any(|&tc| tc > 0x0F) {
            return Err(Error::BadLength);
        }
        Ok(())
    }

    fn emit(&self, out: &mut [u8]) {
        for (i, byte) in out[..4].iter_mut().enumerate() {
            *byte = (self.priority_tc[2 * i] << 4) | (self.priority_tc[2 * i + 1] & 0x0F);
        }
        out[4..12].copy_from_slice(&self.tc_bandwidth_percent);
        for (slot, &tsa) in out[12..20].iter_mut().zip(&self.tsa) {
            *slot = u8::from(tsa);
        }
    }
}

/// ETS Configuration (subtype 9): what the sender runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct EtsConfiguration {
    /// Willing to accept the peer's ETS Recommendation.
    pub willing: bool,
    /// Credit-based shaper supported.
    pub cbs: bool,
    /// Traffic classes supported, 1..=8 (sent as 0 for 8).
    pub max_tcs: u8,
    /// The tables.
    pub tables: EtsTables,
}

/// ETS Recommendation (subtype 10): what the sender asks a willing peer to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct EtsRecommendation {
    /// The tables.
    pub tables: EtsTables,
}

/// PFC Configuration (subtype 11).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PfcConfiguration {
    /// Willing to accept the peer's PFC configuration.
    pub willing: bool,
    /// MACsec bypass capability.
    pub mbc: bool,
    /// PFC capability: how many traffic classes may have PFC enabled at once (4 bits, 0..=15).
    pub pfc_cap: u8,
    /// PFC enabled per priority: bit n = priority n.
    pub enable: u8,
}

/// One Application Priority entry: frames of `protocol` (as `selector` says) get `priority`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct AppEntry {
    /// Priority 0..=7 (3 bits).
    pub priority: u8,
    /// How to read `protocol`.
    pub selector: AppSelector,
    /// EtherType, port number or DSCP.
    pub protocol: u16,
}

impl AppEntry {
    /// The RoCEv2 entry: UDP port 4791 at `priority`.
    pub const fn rocev2(priority: u8) -> AppEntry {
        AppEntry {
            priority,
            selector: AppSelector::UdpDccpPort,
            protocol: crate::roce::ROCEV2_UDP_PORT,
        }
    }

    /// A DSCP entry: DSCP `dscp` at `priority`.
    pub const fn dscp(dscp: u8, priority: u8) -> AppEntry {
        AppEntry {
            priority,
            selector: AppSelector::Dscp,
            protocol: dscp as u16,
        }
    }

    fn parse(bytes: &[u8]) -> AppEntry {
        AppEntry {
            priority: bytes[0] >> 5,
            selector: AppSelector::from(bytes[0] & 0x07),
            protocol: u16::from_be_bytes([bytes[1], bytes[2]]),
        }
    }

    fn validate(&self) -> Result<(), Error> {
        if self.priority > 7 || u8::from(self.selector) > 7 {
            return Err(Error::BadLength);
        }
        Ok(())
    }

    fn emit(&self, out: &mut [u8]) {
        out[0] = (self.priority << 5) | (u8::from(self.selector) & 0x07);
        out[1..3].copy_from_slice(&self.protocol.to_be_bytes());
    }
}

/// The entries of an Application Priority TLV: still encoded (as parsed, no allocation) or a
/// caller's list (to emit). Both iterate as [`AppEntry`] values and compare equal when they hold
/// the same entries in the same order.
#[derive(Clone, Copy)]
pub enum AppEntries<'a> {
    /// Entries as they are on the wire: a whole number of 3-byte triplets.
    Encoded(&'a [u8]),
    /// Entries to emit.
    Decoded(&'a [AppEntry]),
}

impl<'a> AppEntries<'a> {
    /// Number of entries.
    pub fn len(&self) -> usize {
        match self {
            AppEntries::Encoded(bytes) => bytes.len() / APP_ENTRY_LEN,
            AppEntries::Decoded(list) => list.len(),
        }
    }

    /// No entries.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The entries in TLV order.
    pub fn iter(&self) -> AppEntryIter<'a> {
        AppEntryIter { entries: *self }
    }
}

impl PartialEq for AppEntries<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.len() == other.len() && self.iter().eq(other.iter())
    }
}

impl Eq for AppEntries<'_> {}

impl core::fmt::Debug for AppEntries<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

/// Iterator over [`AppEntries`].
#[derive(Debug, Clone)]
pub struct AppEntryIter<'a> {
    entries: AppEntries<'a>,
}

impl Iterator for AppEntryIter<'_> {
    type Item = AppEntry;

    fn next(&mut self) -> Option<AppEntry> {
        match &mut self.entries {
            AppEntries::Encoded(bytes) => {
                let (head, rest) = bytes.split_at_checked(APP_ENTRY_LEN)?;
                *bytes = rest;
                Some(AppEntry::parse(head))
            }
            AppEntries::Decoded(list) => {
                let (head, rest) = list.split_first()?;
                *list = rest;
                Some(*head)
            }
        }
    }
}

/// Application Priority (subtype 12).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ApplicationPriority<'a> {
    /// The entries.
    pub entries: AppEntries<'a>,
}

/// A decoded IEEE 802.1Qaz TLV.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DcbxTlv<'a> {
    /// Subtype 9.
    EtsConfiguration(EtsConfiguration),
    /// Subtype 10.
    EtsRecommendation(EtsRecommendation),
    /// Subtype 11.
    PfcConfiguration(PfcConfiguration),
    /// Subtype 12.
    ApplicationPriority(ApplicationPriority<'a>),
}

impl<'a> DcbxTlv<'a> {
    /// Decodes the information string `info` (after OUI and subtype) of an 00-80-C2 TLV of
    /// `subtype`. `Ok(None)` for subtypes this module does not decode; `Err(BadLength)` when the
    /// length is not the one the subtype has (see the module's receive policy).
    pub fn parse(subtype: u8, info: &'a [u8]) -> Result<Option<DcbxTlv<'a>>, Error> {
        let tlv = match Ieee8021Subtype::from(subtype) {
            Ieee8021Subtype::EtsConfiguration => {
                let info = exact(info, ETS_INFO_LEN)?;
                let max_tcs = info[0] & 0x07;
                DcbxTlv::EtsConfiguration(EtsConfiguration {
                    willing: info[0] & 0x80 != 0,
                    cbs: info[0] & 0x40 != 0,
                    max_tcs: if max_tcs == 0 { 8 } else { max_tcs },
                    tables: EtsTables::parse(&info[1..]),
                })
            }
            Ieee8021Subtype::EtsRecommendation => {
                let info = exact(info, ETS_INFO_LEN)?;
                DcbxTlv::EtsRecommendation(EtsRecommendation {
                    tables: EtsTables::parse(&info[1..]),
                })
            }
            Ieee8021Subtype::PfcConfiguration => {
                let info = exact(info, PFC_INFO_LEN)?;
                DcbxTlv::PfcConfiguration(PfcConfiguration {
                    willing: info[0] & 0x80 != 0,
                    mbc: info[0] & 0x40 != 0,
                    pfc_cap: info[0] & 0x0F,
                    enable: info[1],
                })
            }
            Ieee8021Subtype::ApplicationPriority => {
                let entries = info.get(1..).ok_or(Error::BadLength)?;
                if entries.len() % APP_ENTRY_LEN != 0 {
                    return Err(Error::BadLength);
                }
                DcbxTlv::ApplicationPriority(ApplicationPriority {
                    entries: AppEntries::Encoded(entries),
                })
            }
            Ieee8021Subtype::Unknown(_) => return Ok(None),
        };
        Ok(Some(tlv))
    }

    /// The subtype this TLV is sent with.
    pub fn subtype(&self) -> Ieee8021Subtype {
        match self {
            DcbxTlv::EtsConfiguration(_) => Ieee8021Subtype::EtsConfiguration,
            DcbxTlv::EtsRecommendation(_) => Ieee8021Subtype::EtsRecommendation,
            DcbxTlv::PfcConfiguration(_) => Ieee8021Subtype::PfcConfiguration,
            DcbxTlv::ApplicationPriority(_) => Ieee8021Subtype::ApplicationPriority,
        }
    }

    /// Length of the information string `emit_info` writes.
    pub fn info_len(&self) -> usize {
        match self {
            DcbxTlv::EtsConfiguration(_) | DcbxTlv::EtsRecommendation(_) => ETS_INFO_LEN,
            DcbxTlv::PfcConfiguration(_) => PFC_INFO_LEN,
            DcbxTlv::ApplicationPriority(app) => 1 + APP_ENTRY_LEN * app.entries.len(),
        }
    }

    /// `Err(BadLength)` if a field does not fit its bits (Max TCs outside 1..=8, PFC cap above
    /// 15, a priority→TC value above 15, an APP priority above 7 or selector above 7) or the APP
    /// entries do not fit one TLV ([`MAX_APP_ENTRIES`]).
    pub fn validate(&self) -> Result<(), Error> {
        match self {
            DcbxTlv::EtsConfiguration(ets) => {
                if !(1..=8).contains(&ets.max_tcs) {
                    return Err(Error::BadLength);
                }
                ets.tables.validate()
            }
            DcbxTlv::EtsRecommendation(ets) => ets.tables.validate(),
            DcbxTlv::PfcConfiguration(pfc) => {
                if pfc.pfc_cap > 0x0F {
                    return Err(Error::BadLength);
                }
                Ok(())
            }
            DcbxTlv::ApplicationPriority(app) => {
                if app.entries.len() > MAX_APP_ENTRIES {
                    return Err(Error::BadLength);
                }
                app.entries.iter().try_for_each(|entry| entry.validate())
            }
        }
    }

    /// Writes the information string into `out[..info_len()]`, reserved bits zero. The caller has
    /// run [`DcbxTlv::validate`]; panics if `out` is shorter than `info_len()`.
    pub fn emit_info(&self, out: &mut [u8]) {
        let out = &mut out[..self.info_len()];
        match self {
            DcbxTlv::EtsConfiguration(ets) => {
                out[0] =
                    (u8::from(ets.willing) << 7) | (u8::from(ets.cbs) << 6) | (ets.max_tcs & 7);
                ets.tables.emit(&mut out[1..]);
            }
            DcbxTlv::EtsRecommendation(ets) => {
                out[0] = 0;
                ets.tables.emit(&mut out[1..]);
            }
            DcbxTlv::PfcConfiguration(pfc) => {
                out[0] =
                    (u8::from(pfc.willing) << 7) | (u8::from(pfc.mbc) << 6) | (pfc.pfc_cap & 0x0F);
                out[1] = pfc.enable;
            }
            DcbxTlv::ApplicationPriority(app) => {
                out[0] = 0;
                for (slot, entry) in out[1..]
                    .chunks_exact_mut(APP_ENTRY_LEN)
                    .zip(app.entries.iter())
                {
                    entry.emit(slot);
                }
            }
        }
    }
}

fn exact(info: &[u8], len: usize) -> Result<&[u8], Error> {
    if info.len() == len {
        Ok(info)
    } else {
        Err(Error::BadLength)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// routing-fabric-dcbx.md §7.2: `fe 06 00 80 c2 0b 08 18` = willing 0, MBC 0, cap 8, PFC 3 and 4.
    #[test]
    fn pfc_matches_reference_bytes() {
        let pfc = DcbxTlv::parse(11, &[0x08, 0x18]).unwrap().unwrap();
        assert_eq!(
            pfc,
            DcbxTlv::PfcConfiguration(PfcConfiguration {
                willing: false,
                mbc: false,
                pfc_cap: 8,
                enable: 0x18
            })
        );
        let mut out = [0xAA; 2];
        pfc.emit_info(&mut out);
        assert_eq!(out, [0x08, 0x18]);
        // Reserved bits 5-4 are ignored on receipt.
        assert_eq!(DcbxTlv::parse(11, &[0x38, 0x18]).unwrap(), Some(pfc));
        assert_eq!(
            DcbxTlv::parse(11, &[0xC8, 0x01]).unwrap(),
            Some(DcbxTlv::PfcConfiguration(PfcConfiguration {
                willing: true,
                mbc: true,
                pfc_cap: 8,
                enable: 1
            }))
        );
    }

    /// §7.2: `63 12 b7` = priority 3, selector 3, port 4791; `65 00 1a` = priority 3, DSCP 26.
    #[test]
    fn app_entries_match_reference_bytes() {
        let info = [0x00, 0x63, 0x12, 0xb7, 0x65, 0x00, 0x1a];
        let Some(DcbxTlv::ApplicationPriority(app)) = DcbxTlv::parse(12, &info).unwrap() else {
            panic!("not APP");
        };
        let entries: Vec<AppEntry> = app.entries.iter().collect();
        assert_eq!(entries, vec![AppEntry::rocev2(3), AppEntry::dscp(26, 3)]);
        let list = [AppEntry::rocev2(3), AppEntry::dscp(26, 3)];
        let decoded = DcbxTlv::ApplicationPriority(ApplicationPriority {
            entries: AppEntries::Decoded(&list),
        });
        assert_eq!(decoded, DcbxTlv::ApplicationPriority(app));
        let mut out = [0xAA; 7];
        decoded.emit_info(&mut out);
        assert_eq!(out, info);
    }

    #[test]
    fn ets_layout() {
        let tlv = DcbxTlv::EtsConfiguration(EtsConfiguration {
            willing: true,
            cbs: false,
            max_tcs: 8,
            tables: EtsTables {
                priority_tc: [0, 1, 2, 3, 4, 5, 6, 7],
                tc_bandwidth_percent: [50, 0, 0, 25, 25, 0, 0, 0],
                tsa: [
                    Tsa::Ets,
                    Tsa::Strict,
                    Tsa::Strict,
                    Tsa::Ets,
                    Tsa::Ets,
                    Tsa::Strict,
                    Tsa::Strict,
                    Tsa::VendorSpecific,
                ],
            },
        });
        let mut out = [0u8; ETS_INFO_LEN];
        tlv.emit_info(&mut out);
        assert_eq!(
            out,
            [0x80, 0x01, 0x23, 0x45, 0x67, 50, 0, 0, 25, 25, 0, 0, 0, 2, 0, 0, 2, 2, 0, 0, 255]
        );
        assert_eq!(DcbxTlv::parse(9, &out).unwrap(), Some(tlv));
    }

    #[test]
    fn lengths_are_exact() {
        assert_eq!(DcbxTlv::parse(9, &[0; 20]), Err(Error::BadLength));
        assert_eq!(DcbxTlv::parse(9, &[0; 22]), Err(Error::BadLength));
        assert_eq!(DcbxTlv::parse(10, &[0; 20]), Err(Error::BadLength));
        assert_eq!(DcbxTlv::parse(11, &[0; 1]), Err(Error::BadLength));
        assert_eq!(DcbxTlv::parse(11, &[0; 3]), Err(Error::BadLength));
        assert_eq!(DcbxTlv::parse(12, &[]), Err(Error::BadLength));
        assert_eq!(DcbxTlv::parse(12, &[0; 3]), Err(Error::BadLength));
        assert!(
            DcbxTlv::parse(12, &[0]).unwrap().is_some(),
            "no entries is fine"
        );
        assert_eq!(
            DcbxTlv::parse(1, &[0; 2]),
            Ok(None),
            "port VLAN ID: not ours"
        );
    }

    #[test]
    fn validate_refuses_what_does_not_fit() {
        let pfc = |pfc_cap| {
            DcbxTlv::PfcConfiguration(PfcConfiguration {
                willing: false,
                mbc: false,
                pfc_cap,
                enable: 0,
            })
        };
        assert_eq!(pfc(15).validate(), Ok(()));
        assert_eq!(pfc(16).validate(), Err(Error::BadLength));
        let ets = |max_tcs| {
            DcbxTlv::EtsConfiguration(EtsConfiguration {
                willing: false,
                cbs: false,
                max_tcs,
                tables: EtsTables::default(),
            })
        };
        assert_eq!(ets(0).validate(), Err(Error::BadLength));
        assert_eq!(ets(9).validate(), Err(Error::BadLength));
        let bad = [AppEntry::rocev2(8)];
        let app = DcbxTlv::ApplicationPriority(ApplicationPriority {
            entries: AppEntries::Decoded(&bad),
        });
        assert_eq!(app.validate(), Err(Error::BadLength));
        let many = [AppEntry::dscp(1, 1); MAX_APP_ENTRIES + 1];
        let app = DcbxTlv::ApplicationPriority(ApplicationPriority {
            entries: AppEntries::Decoded(&many),
        });
        assert_eq!(app.validate(), Err(Error::BadLength));
        let app = DcbxTlv::ApplicationPriority(ApplicationPriority {
            entries: AppEntries::Decoded(&many[..MAX_APP_ENTRIES]),
        });
        assert_eq!(app.validate(), Ok(()));
    }
}
