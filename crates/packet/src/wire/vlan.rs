//! VLAN tags (IEEE 802.1Q § 9.6): the 4 bytes after a TPID of 0x8100 (C-tag) or 0x88a8
//! (802.1ad S-tag): PCP (3 bits), DEI (1), VID (12), then the inner type.
//!
//! A [`Tag`] views those 4 bytes (the TPID itself is the type field of what precedes it).
//! [`Tag::new_checked`] validates the length once; after that no accessor panics.
//! [`TagIter`] walks stacked tags (QinQ and beyond) from an Ethernet payload.

use super::ethernet::EtherType;
use super::{get16, put16, Error, Result};

/// Length of a tag after its TPID: TCI and inner type.
pub const HEADER_LEN: usize = 4;
/// Largest VLAN id; 0xfff is reserved (IEEE 802.1Q Table 9-2).
pub const VID_MAX: u16 = 0x0ffe;

/// A view of one VLAN tag (TCI + inner type).
#[derive(Debug, Clone)]
pub struct Tag<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Tag<T> {
    /// Wraps a buffer without checking its length.
    pub const fn new_unchecked(buffer: T) -> Tag<T> {
        Tag { buffer }
    }

    /// Wraps a buffer, checking that it holds a tag.
    pub fn new_checked(buffer: T) -> Result<Tag<T>> {
        let t = Self::new_unchecked(buffer);
        t.check_len()?;
        Ok(t)
    }

    /// Checks that the buffer holds the 4-byte tag.
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

    /// The whole tag control information.
    pub fn tci(&self) -> u16 {
        get16(self.buffer.as_ref(), 0)
    }

    /// Priority code point (3 bits).
    pub fn pcp(&self) -> u8 {
        self.buffer.as_ref()[0] >> 5
    }

    /// Drop eligible indicator (formerly CFI).
    pub fn dei(&self) -> bool {
        self.buffer.as_ref()[0] & 0x10 != 0
    }

    /// VLAN identifier (12 bits).
    pub fn vid(&self) -> u16 {
        self.tci() & 0x0fff
    }

    /// The type after the tag (the next TPID for stacked tags).
    pub fn ethertype(&self) -> EtherType {
        EtherType::from(get16(self.buffer.as_ref(), 2))
    }

    /// The bytes after the tag.
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[HEADER_LEN..]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Tag<T> {
    /// Sets the whole TCI.
    pub fn set_tci(&mut self, tci: u16) {
        put16(self.buffer.as_mut(), 0, tci);
    }

    /// Sets the priority (low 3 bits of `pcp`).
    pub fn set_pcp(&mut self, pcp: u8) {
        let tci = (self.tci() & 0x1fff) | (u16::from(pcp & 7) << 13);
        self.set_tci(tci);
    }

    /// Sets the DEI bit.
    pub fn set_dei(&mut self, dei: bool) {
        let tci = (self.tci() & !0x1000) | (u16::from(dei) << 12);
        self.set_tci(tci);
    }

    /// Sets the VLAN id (low 12 bits of `vid`).
    pub fn set_vid(&mut self, vid: u16) {
        let tci = (self.tci() & 0xf000) | (vid & 0x0fff);
        self.set_tci(tci);
    }

    /// Sets the inner type.
    pub fn set_ethertype(&mut self, t: EtherType) {
        put16(self.buffer.as_mut(), 2, t.into());
    }

    /// The bytes after the tag, mutably.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[HEADER_LEN..]
    }
}

/// A VLAN tag.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Repr {
    /// Priority code point (0..=7).
    pub pcp: u8,
    /// Drop eligible indicator.
    pub dei: bool,
    /// VLAN id (0..=0xfff).
    pub vid: u16,
    /// Inner type.
    pub ethertype: EtherType,
}

impl Repr {
    /// Parses a tag.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(tag: &Tag<&T>) -> Result<Repr> {
        tag.check_len()?;
        Ok(Repr {
            pcp: tag.pcp(),
            dei: tag.dei(),
            vid: tag.vid(),
            ethertype: tag.ethertype(),
        })
    }

    /// The TCI this tag emits.
    pub fn tci(&self) -> u16 {
        (u16::from(self.pcp & 7) << 13) | (u16::from(self.dei) << 12) | (self.vid & 0x0fff)
    }

    /// Length of the emitted tag.
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Writes the tag.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, tag: &mut Tag<T>) {
        tag.set_tci(self.tci());
        tag.set_ethertype(self.ethertype);
    }
}

/// Walks stacked VLAN tags: yields `(tpid, tag)` for each tag, starting from the type
/// field `first` and the bytes after it. Stops at the first non-VLAN type or a truncated
/// tag; [`TagIter::rest`] then gives the final type and its payload.
#[derive(Debug, Clone)]
pub struct TagIter<'a> {
    ethertype: EtherType,
    data: &'a [u8],
}

impl<'a> TagIter<'a> {
    /// Starts at an Ethernet type field `first` followed by `data`.
    pub fn new(first: EtherType, data: &'a [u8]) -> Self {
        TagIter {
            ethertype: first,
            data,
        }
    }

    /// The type and payload after the tags walked so far.
    pub fn rest(&self) -> (EtherType, &'a [u8]) {
        (self.ethertype, self.data)
    }
}

impl<'a> Iterator for TagIter<'a> {
    type Item = (EtherType, Repr);

    fn next(&mut self) -> Option<Self::Item> {
        if !self.ethertype.is_vlan() {
            return None;
        }
        let tag = Tag::new_checked(self.data).ok()?;
        let repr = Repr::parse(&tag).ok()?;
        let tpid = self.ethertype;
        self.ethertype = repr.ethertype;
        self.data = &self.data[HEADER_LEN..];
        Some((tpid, repr))
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn tag_deconstruct_fixture() {
        let t = Tag::new_checked(&[0xb0, 0x64, 0x08, 0x00, 0x45][..]).expect("tag");
        assert_eq!((t.pcp(), t.dei(), t.vid()), (5, true, 100));
        assert_eq!(t.ethertype(), EtherType::Ipv4);
        assert_eq!(t.payload(), &[0x45]);
    }

    #[test]
    fn tag_setters_touch_only_their_bits() {
        let mut buf = [0xff, 0xff, 0, 0];
        let mut t = Tag::new_unchecked(&mut buf[..]);
        t.set_vid(0x123);
        assert_eq!(t.tci(), 0xf123);
        t.set_pcp(2);
        t.set_dei(false);
        assert_eq!(t.tci(), 0x4123);
        t.set_ethertype(EtherType::Ipv6);
        assert_eq!(buf, [0x41, 0x23, 0x86, 0xdd]);
    }

    #[test]
    fn tag_truncated_is_rejected() {
        assert_eq!(
            Tag::new_checked(&[0u8; 3][..]).err(),
            Some(Error::Truncated)
        );
    }

    #[test]
    fn tag_iter_walks_qinq() {
        let data = [0x00, 0x0a, 0x81, 0x00, 0x20, 0x14, 0x86, 0xdd, 0x60];
        let mut it = TagIter::new(EtherType::QinQ, &data);
        let (tpid, outer) = it.next().expect("outer");
        assert_eq!((tpid, outer.vid), (EtherType::QinQ, 10));
        let (tpid, inner) = it.next().expect("inner");
        assert_eq!((tpid, inner.vid, inner.pcp), (EtherType::Vlan, 20, 1));
        assert!(it.next().is_none());
        assert_eq!(it.rest(), (EtherType::Ipv6, &data[8..]));
    }

    #[test]
    fn tag_iter_stops_at_truncated_tag() {
        let mut it = TagIter::new(EtherType::Vlan, &[0, 1, 8]);
        assert!(it.next().is_none());
        assert_eq!(it.rest().0, EtherType::Vlan);
    }

    proptest! {
        #[test]
        fn repr_parse_emit_round_trip(pcp in 0u8..8, dei: bool, vid in 0u16..0x1000, ty: u16) {
            let r = Repr { pcp, dei, vid, ethertype: ty.into() };
            let mut buf = [0u8; HEADER_LEN];
            r.emit(&mut Tag::new_unchecked(&mut buf[..]));
            prop_assert_eq!(Repr::parse(&Tag::new_checked(&buf[..]).expect("tag")).expect("parse"), r);
        }
    }
}
