//! Small validated identifiers shared by every part of the core.

use core::fmt;

/// Number of IEEE 802.1p priorities, traffic classes, priority groups and queues per port.
pub const PRIORITY_COUNT: usize = 8;

/// Index of a switch port, dense from 0 in the order of the configuration.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct PortId(pub u16);

impl PortId {
    /// The port as an index into per-port arrays.
    #[must_use]
    pub const fn index(self) -> usize {
        self.0 as usize
    }
}

impl fmt::Display for PortId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "port{}", self.0)
    }
}

macro_rules! index_0_to_7 {
    ($(#[$meta:meta])* $name:ident, $what:literal) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
        pub struct $name(u8);

        impl $name {
            /// Every value, in order.
            pub const ALL: [Self; PRIORITY_COUNT] =
                [Self(0), Self(1), Self(2), Self(3), Self(4), Self(5), Self(6), Self(7)];

            /// The value `n`, or `None` when `n > 7`.
            #[must_use]
            pub const fn new(n: u8) -> Option<Self> {
                if (n as usize) < PRIORITY_COUNT {
                    Some(Self(n))
                } else {
                    None
                }
            }

            /// The low three bits of `n` (for values read from 3-bit wire fields).
            #[must_use]
            pub const fn from_low_bits(n: u8) -> Self {
                Self(n & 7)
            }

            /// The raw value, 0..=7.
            #[must_use]
            pub const fn get(self) -> u8 {
                self.0
            }

            /// The value as an index into 8-entry arrays.
            #[must_use]
            pub const fn index(self) -> usize {
                self.0 as usize
            }

            /// This value's bit in an 8-bit vector (the PFC class-enable vector layout).
            #[must_use]
            pub const fn bit(self) -> u8 {
                1 << self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}{}", $what, self.0)
            }
        }
    };
}

index_0_to_7!(
    /// An IEEE 802.1p priority (the PCP of an 802.1Q tag, and a PFC priority).
    Priority,
    "prio"
);
index_0_to_7!(
    /// A traffic class: the switch-internal class a frame is mapped to by `dot1p_to_tc` or
    /// `dscp_to_tc`.
    TrafficClass,
    "tc"
);
index_0_to_7!(
    /// An ingress priority group: the unit of ingress buffer accounting and PFC generation.
    PgIndex,
    "pg"
);
index_0_to_7!(
    /// An egress queue of a port.
    QueueIndex,
    "q"
);

/// A set of priorities (or queues, or PGs) as an 8-bit vector, bit `i` for value `i`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct PrioritySet(pub u8);

impl PrioritySet {
    /// The empty set.
    pub const EMPTY: Self = Self(0);

    /// Whether `p` is in the set.
    #[must_use]
    pub const fn contains(self, p: Priority) -> bool {
        self.0 & p.bit() != 0
    }

    /// The set with `p` added.
    #[must_use]
    pub const fn with(self, p: Priority) -> Self {
        Self(self.0 | p.bit())
    }

    /// Members in increasing order.
    pub fn iter(self) -> impl Iterator<Item = Priority> {
        Priority::ALL.into_iter().filter(move |p| self.contains(*p))
    }

    /// Whether the set is empty.
    #[must_use]
    pub const fn is_empty(self) -> bool {
        self.0 == 0
    }
}

impl fmt::Display for PrioritySet {
    /// Comma-separated, as SONiC prints `pfc_enable` ("3,4").
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        for p in self.iter() {
            if !first {
                f.write_str(",")?;
            }
            write!(f, "{}", p.get())?;
            first = false;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn priority_bounds() {
        assert_eq!(Priority::new(7).map(Priority::get), Some(7));
        assert_eq!(Priority::new(8), None);
        assert_eq!(Priority::from_low_bits(0xB).get(), 3);
        assert_eq!(Priority::new(3).unwrap().bit(), 0x08);
    }

    #[test]
    fn set_display_matches_sonic() {
        let s = PrioritySet::EMPTY
            .with(Priority::new(4).unwrap())
            .with(Priority::new(3).unwrap());
        assert_eq!(s.to_string(), "3,4");
        assert!(s.contains(Priority::new(3).unwrap()));
        assert!(!s.contains(Priority::new(5).unwrap()));
        assert_eq!(PrioritySet::EMPTY.to_string(), "");
    }
}
