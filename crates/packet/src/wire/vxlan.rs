//! VXLAN headers (RFC 7348 § 5): flags (the I bit says the VNI is valid), reserved bits, a
//! 24-bit VNI, reserved. The VXLAN group-based policy extension (draft-smith-vxlan-group-
//! policy) puts a G bit in the flags and a 16-bit policy id in the first reserved word; the
//! view exposes them.
//!
//! [`Packet::new_checked`] validates the 8-byte header once; after that no accessor panics.

use super::{get16, get32, put16, put32, Error, Result};

/// Length of the header.
pub const HEADER_LEN: usize = 8;
/// The I flag: the VNI is valid (RFC 7348 § 5).
pub const FLAG_I: u8 = 0x08;
/// The G flag: a group policy id is present (VXLAN-GBP).
pub const FLAG_G: u8 = 0x80;

/// A view of a VXLAN header.
#[derive(Debug, Clone)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Wraps a buffer without checking it.
    pub const fn new_unchecked(buffer: T) -> Packet<T> {
        Packet { buffer }
    }

    /// Wraps a buffer, checking that it holds the header.
    pub fn new_checked(buffer: T) -> Result<Packet<T>> {
        let p = Self::new_unchecked(buffer);
        p.check_len()?;
        Ok(p)
    }

    /// Checks that the buffer holds 8 bytes.
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

    /// The flags byte.
    pub fn flags(&self) -> u8 {
        self.buffer.as_ref()[0]
    }

    /// Group policy id (VXLAN-GBP; meaningful when [`FLAG_G`] is set).
    pub fn group_policy_id(&self) -> u16 {
        get16(self.buffer.as_ref(), 2)
    }

    /// VXLAN network identifier (24 bits).
    pub fn vni(&self) -> u32 {
        get32(self.buffer.as_ref(), 4) >> 8
    }

    /// The inner Ethernet frame.
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[HEADER_LEN..]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Sets the flags byte.
    pub fn set_flags(&mut self, v: u8) {
        self.buffer.as_mut()[0] = v;
    }

    /// Sets the group policy id.
    pub fn set_group_policy_id(&mut self, v: u16) {
        put16(self.buffer.as_mut(), 2, v);
    }

    /// Sets the VNI (low 24 bits) and clears the last reserved byte.
    pub fn set_vni(&mut self, v: u32) {
        put32(self.buffer.as_mut(), 4, (v & 0x00ff_ffff) << 8);
    }

    /// The inner frame, mutably.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[HEADER_LEN..]
    }
}

/// A VXLAN header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Repr {
    /// VNI (24 bits).
    pub vni: u32,
    /// Group policy id, if the G flag is set.
    pub group_policy_id: Option<u16>,
}

impl Repr {
    /// Parses a header; the I flag must be set (RFC 7348 § 5).
    pub fn parse<T: AsRef<[u8]> + ?Sized>(p: &Packet<&T>) -> Result<Repr> {
        p.check_len()?;
        if p.flags() & FLAG_I == 0 {
            return Err(Error::Malformed("VXLAN I flag clear"));
        }
        Ok(Repr {
            vni: p.vni(),
            group_policy_id: (p.flags() & FLAG_G != 0).then(|| p.group_policy_id()),
        })
    }

    /// Length of the emitted header (8).
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Writes the header.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, p: &mut Packet<T>) {
        let g = if self.group_policy_id.is_some() {
            FLAG_G
        } else {
            0
        };
        p.set_flags(FLAG_I | g);
        p.buffer.as_mut()[1] = 0;
        p.set_group_policy_id(self.group_policy_id.unwrap_or(0));
        p.set_vni(self.vni);
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn packet_deconstruct_fixture() {
        let buf = [0x08, 0, 0, 0, 0x12, 0x34, 0x56, 0, 0xaa];
        let p = Packet::new_checked(&buf[..]).expect("vxlan");
        assert_eq!((p.flags(), p.vni()), (FLAG_I, 0x12_3456));
        assert_eq!(p.payload(), &[0xaa]);
        assert_eq!(
            Repr::parse(&p),
            Ok(Repr {
                vni: 0x12_3456,
                group_policy_id: None
            })
        );
    }

    #[test]
    fn repr_rejects_clear_i_flag_and_truncation() {
        let buf = [0u8; 8];
        let p = Packet::new_checked(&buf[..]).expect("vxlan");
        assert!(matches!(Repr::parse(&p), Err(Error::Malformed(_))));
        assert_eq!(Packet::new_checked(&buf[..7]).err(), Some(Error::Truncated));
    }

    proptest! {
        #[test]
        fn repr_parse_emit_round_trip(vni in 0u32..(1 << 24), gbp: Option<u16>) {
            let r = Repr { vni, group_policy_id: gbp };
            let mut buf = [0xffu8; HEADER_LEN];
            r.emit(&mut Packet::new_unchecked(&mut buf[..]));
            prop_assert_eq!(Repr::parse(&Packet::new_checked(&buf[..]).expect("vxlan")), Ok(r));
        }
    }
}
