//! Wire formats: one module per header, each a typed view over a byte buffer plus a
//! high-level representation, in the style of smoltcp.
//!
//! # The view/repr contract
//!
//! - `Packet<T: AsRef<[u8]>>` (or `Header`, `Frame`) wraps a buffer without copying.
//!   `new_unchecked` wraps any buffer: its accessors then index the buffer and may panic on a short
//!   one (never undefined behaviour). `new_checked` validates the lengths once — the fixed header,
//!   and the variable lengths the header itself declares — so that after it returns `Ok` no
//!   accessor panics.
//! - Setters need `T: AsMut<[u8]>` and write the field in network byte order.
//! - `Repr` is the parsed, owned form of a header: `Repr::parse(&view)` validates the semantic
//!   content (versions, checksums when the [`ChecksumCaps`] ask for it), `Repr::buffer_len()` is
//!   the header length it emits, and `Repr::emit(&mut view)` writes it (filling checksums when the
//!   capabilities ask for it). `parse(emit(r)) == r` holds for every `Repr`, and is
//!   property-tested.
//! - Protocol numbers are enums with an `Unknown(..)` variant and `From` in both directions, so
//!   every value round-trips.
//!
//! Fast-path extraction ([`mod@crate::extract`]) does not go through these views: it follows
//! OVS's lax rules byte by byte. The views are for code that reads or rewrites one header
//! (action execution, tunnels, tests, the traffic generator).

pub mod arp;
pub mod ethernet;
pub mod geneve;
pub mod icmpv4;
pub mod icmpv6;
pub mod ip;
pub mod ipv4;
pub mod ipv6;
pub mod mpls;
pub mod sctp;
pub mod tcp;
pub mod udp;
pub mod vlan;
pub mod vxlan;

/// Why a header could not be viewed or parsed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// The buffer is shorter than the header (or than a length the header declares).
    #[error("truncated header: the buffer is shorter than the header or its declared length")]
    Truncated,
    /// A field holds a value the format forbids (the message names it).
    #[error("malformed header: {0}")]
    Malformed(&'static str),
    /// The checksum does not verify.
    #[error("bad checksum")]
    Checksum,
}

/// Result of wire parsing.
pub type Result<T> = core::result::Result<T, Error>;

/// Which direction(s) of checksum work software does for one protocol; the rest is offloaded
/// (or skipped).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Checksum {
    /// Verify on parse and fill on emit.
    #[default]
    Both,
    /// Verify on parse only.
    Rx,
    /// Fill on emit only.
    Tx,
    /// Neither.
    None,
}

impl Checksum {
    /// True if parsing verifies the checksum.
    pub fn rx(self) -> bool {
        matches!(self, Checksum::Both | Checksum::Rx)
    }

    /// True if emitting fills the checksum.
    pub fn tx(self) -> bool {
        matches!(self, Checksum::Both | Checksum::Tx)
    }
}

/// Checksum capabilities, per protocol, passed to `parse` and `emit` (a port with checksum
/// offload passes `Tx`/`None` for what the hardware does).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ChecksumCaps {
    /// IPv4 header checksum.
    pub ipv4: Checksum,
    /// TCP checksum.
    pub tcp: Checksum,
    /// UDP checksum.
    pub udp: Checksum,
    /// ICMPv4 checksum.
    pub icmpv4: Checksum,
    /// ICMPv6 checksum.
    pub icmpv6: Checksum,
    /// SCTP CRC32c.
    pub sctp: Checksum,
}

impl ChecksumCaps {
    /// Everything offloaded: no verification, no filling.
    pub fn ignored() -> Self {
        ChecksumCaps {
            ipv4: Checksum::None,
            tcp: Checksum::None,
            udp: Checksum::None,
            icmpv4: Checksum::None,
            icmpv6: Checksum::None,
            sctp: Checksum::None,
        }
    }
}

/// Defines a protocol-number enum with an `Unknown` variant and `From` both ways.
macro_rules! enum_with_unknown {
    (
        $(#[$attr:meta])*
        pub enum $name:ident($ty:ty) {
            $( $(#[$vattr:meta])* $variant:ident = $value:expr ),+ $(,)?
        }
    ) => {
        $(#[$attr])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum $name {
            $( $(#[$vattr])* $variant, )+
            /// A value without a name here; kept as is.
            Unknown($ty),
        }

        impl ::core::convert::From<$ty> for $name {
            fn from(value: $ty) -> Self {
                match value {
                    $( $value => $name::$variant, )+
                    other => $name::Unknown(other),
                }
            }
        }

        impl ::core::convert::From<$name> for $ty {
            fn from(value: $name) -> Self {
                match value {
                    $( $name::$variant => $value, )+
                    $name::Unknown(other) => other,
                }
            }
        }
    };
}
pub(crate) use enum_with_unknown;

/// Reads a big-endian `u16` at `at` (panics if out of range: callers check lengths first).
#[inline]
pub(crate) fn get16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

/// Reads a big-endian `u32` at `at`.
#[inline]
pub(crate) fn get32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// Writes a big-endian `u16` at `at`.
#[inline]
pub(crate) fn put16(b: &mut [u8], at: usize, v: u16) {
    b[at..at + 2].copy_from_slice(&v.to_be_bytes());
}

/// Writes a big-endian `u32` at `at`.
#[inline]
pub(crate) fn put32(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 4].copy_from_slice(&v.to_be_bytes());
}

/// Converts a length to a 16-bit field, or reports it as too long.
pub(crate) fn len16(len: usize) -> Result<u16> {
    u16::try_from(len).map_err(|_| Error::Malformed("length does not fit in 16 bits"))
}

#[cfg(test)]
mod tests;
