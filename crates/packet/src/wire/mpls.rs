//! MPLS label stack entries (RFC 3032 § 2.1): label (20 bits), traffic class (3, RFC 5462),
//! bottom of stack (1), TTL (8).
//!
//! [`Lse::new_checked`] validates the 4-byte length once; after that no accessor panics.
//! [`LabelStack`] walks a stack up to its bottom entry.

use super::{get32, put32, Error, Result};

/// Length of one label stack entry.
pub const HEADER_LEN: usize = 4;

/// A view of one label stack entry.
#[derive(Debug, Clone)]
pub struct Lse<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Lse<T> {
    /// Wraps a buffer without checking its length.
    pub const fn new_unchecked(buffer: T) -> Lse<T> {
        Lse { buffer }
    }

    /// Wraps a buffer, checking that it holds an entry.
    pub fn new_checked(buffer: T) -> Result<Lse<T>> {
        let l = Self::new_unchecked(buffer);
        l.check_len()?;
        Ok(l)
    }

    /// Checks that the buffer holds 4 bytes.
    pub fn check_len(&self) -> Result<()> {
        if self.buffer.as_ref().len() < HEADER_LEN {
            Err(Error::Truncated)
        } else {
            Ok(())
        }
    }

    /// Returns the buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// The whole entry as a `u32` (the `FlowKey` `mpls_lse` form).
    pub fn raw(&self) -> u32 {
        get32(self.buffer.as_ref(), 0)
    }

    /// Label (20 bits).
    pub fn label(&self) -> u32 {
        self.raw() >> 12
    }

    /// Traffic class (3 bits).
    pub fn tc(&self) -> u8 {
        (self.buffer.as_ref()[2] >> 1) & 7
    }

    /// Bottom-of-stack bit.
    pub fn bos(&self) -> bool {
        self.buffer.as_ref()[2] & 1 != 0
    }

    /// Time to live.
    pub fn ttl(&self) -> u8 {
        self.buffer.as_ref()[3]
    }

    /// The bytes after the entry.
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[HEADER_LEN..]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Lse<T> {
    /// Sets the whole entry.
    pub fn set_raw(&mut self, v: u32) {
        put32(self.buffer.as_mut(), 0, v);
    }

    /// Sets the label (low 20 bits of `label`).
    pub fn set_label(&mut self, label: u32) {
        let v = (self.raw() & 0xfff) | ((label & 0xf_ffff) << 12);
        self.set_raw(v);
    }

    /// Sets the traffic class (low 3 bits).
    pub fn set_tc(&mut self, tc: u8) {
        let b = &mut self.buffer.as_mut()[2];
        *b = (*b & !0x0e) | ((tc & 7) << 1);
    }

    /// Sets the bottom-of-stack bit.
    pub fn set_bos(&mut self, bos: bool) {
        let b = &mut self.buffer.as_mut()[2];
        *b = (*b & !1) | u8::from(bos);
    }

    /// Sets the TTL.
    pub fn set_ttl(&mut self, ttl: u8) {
        self.buffer.as_mut()[3] = ttl;
    }
}

/// One label stack entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Repr {
    /// Label (0..2^20). Labels 0–15 are reserved (RFC 3032 § 2.1).
    pub label: u32,
    /// Traffic class (0..=7).
    pub tc: u8,
    /// Bottom of stack.
    pub bos: bool,
    /// Time to live.
    pub ttl: u8,
}

impl Repr {
    /// Parses an entry.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(lse: &Lse<&T>) -> Result<Repr> {
        lse.check_len()?;
        Ok(Repr {
            label: lse.label(),
            tc: lse.tc(),
            bos: lse.bos(),
            ttl: lse.ttl(),
        })
    }

    /// The entry as a `u32`.
    pub fn raw(&self) -> u32 {
        ((self.label & 0xf_ffff) << 12)
            | (u32::from(self.tc & 7) << 9)
            | (u32::from(self.bos) << 8)
            | u32::from(self.ttl)
    }

    /// Length of the emitted entry.
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Writes the entry.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, lse: &mut Lse<T>) {
        lse.set_raw(self.raw());
    }
}

/// Walks a label stack, yielding entries up to and including the bottom-of-stack one (or
/// until the data runs out). [`LabelStack::rest`] gives the bytes after the walked entries.
#[derive(Debug, Clone)]
pub struct LabelStack<'a> {
    data: &'a [u8],
    done: bool,
}

impl<'a> LabelStack<'a> {
    /// Starts at the first entry.
    pub fn new(data: &'a [u8]) -> Self {
        LabelStack { data, done: false }
    }

    /// The bytes after the entries walked so far.
    pub fn rest(&self) -> &'a [u8] {
        self.data
    }
}

impl Iterator for LabelStack<'_> {
    type Item = Repr;

    fn next(&mut self) -> Option<Repr> {
        if self.done {
            return None;
        }
        let repr = Repr::parse(&Lse::new_checked(self.data).ok()?).ok()?;
        self.data = &self.data[HEADER_LEN..];
        self.done = repr.bos;
        Some(repr)
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn lse_deconstruct_fixture() {
        // Label 16, TC 5, BoS, TTL 64.
        let l = Lse::new_checked(&[0x00, 0x01, 0x0b, 0x40][..]).expect("lse");
        assert_eq!((l.label(), l.tc(), l.bos(), l.ttl()), (16, 5, true, 64));
        assert_eq!(l.raw(), 0x0001_0b40);
    }

    #[test]
    fn lse_setters_touch_only_their_bits() {
        let mut buf = [0xff; 4];
        let mut l = Lse::new_unchecked(&mut buf[..]);
        l.set_label(0);
        assert_eq!(l.raw(), 0x0000_0fff);
        l.set_tc(0);
        l.set_bos(false);
        l.set_ttl(1);
        assert_eq!(buf, [0, 0, 0, 1]);
    }

    #[test]
    fn lse_truncated_is_rejected() {
        assert_eq!(
            Lse::new_checked(&[0u8; 3][..]).err(),
            Some(Error::Truncated)
        );
    }

    #[test]
    fn label_stack_stops_at_bottom() {
        let data = [0, 1, 0, 64, 0, 2, 1, 63, 0xde, 0xad];
        let mut s = LabelStack::new(&data);
        assert_eq!(s.next().map(|r| r.label), Some(16));
        assert_eq!(s.next().map(|r| (r.label, r.bos)), Some((32, true)));
        assert_eq!(s.next(), None);
        assert_eq!(s.rest(), &[0xde, 0xad]);
    }

    proptest! {
        #[test]
        fn repr_parse_emit_round_trip(label in 0u32..(1 << 20), tc in 0u8..8, bos: bool, ttl: u8) {
            let r = Repr { label, tc, bos, ttl };
            let mut buf = [0u8; HEADER_LEN];
            r.emit(&mut Lse::new_unchecked(&mut buf[..]));
            prop_assert_eq!(Repr::parse(&Lse::new_checked(&buf[..]).expect("lse")).expect("parse"), r);
        }
    }
}
