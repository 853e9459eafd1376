//! Geneve headers (RFC 8926 § 3.4): version, options length, O and C flags, protocol type,
//! 24-bit VNI, and variable-length option TLVs (§ 3.5).
//!
//! [`Packet::new_checked`] validates once that the buffer holds the 8-byte fixed header and
//! the options length it declares; after that no accessor panics. [`OptionIter`] walks the
//! option TLVs and reports a TLV running past the options area as an error.

use super::ethernet::EtherType;
use super::{get16, get32, put16, put32, Error, Result};

/// Length of the fixed header.
pub const HEADER_LEN: usize = 8;
/// Largest options length (6 bits of 4-byte words).
pub const MAX_OPTIONS_LEN: usize = 63 * 4;

/// A view of a Geneve header.
#[derive(Debug, Clone)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Wraps a buffer without checking it.
    pub const fn new_unchecked(buffer: T) -> Packet<T> {
        Packet { buffer }
    }

    /// Wraps a buffer, checking the fixed header and the options length.
    pub fn new_checked(buffer: T) -> Result<Packet<T>> {
        let p = Self::new_unchecked(buffer);
        p.check_len()?;
        Ok(p)
    }

    /// Checks that the buffer holds the fixed header and the options.
    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        if len < HEADER_LEN || len < self.header_len() {
            Err(Error::Truncated)
        } else {
            Ok(())
        }
    }

    /// Returns the buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// Version (0).
    pub fn version(&self) -> u8 {
        self.buffer.as_ref()[0] >> 6
    }

    /// Options length in bytes.
    pub fn options_len(&self) -> usize {
        usize::from(self.buffer.as_ref()[0] & 0x3f) * 4
    }

    /// Header length with options.
    pub fn header_len(&self) -> usize {
        HEADER_LEN + self.options_len()
    }

    /// O flag: an OAM packet.
    pub fn oam(&self) -> bool {
        self.buffer.as_ref()[1] & 0x80 != 0
    }

    /// C flag: critical options are present.
    pub fn critical(&self) -> bool {
        self.buffer.as_ref()[1] & 0x40 != 0
    }

    /// Protocol type of the payload (0x6558 for Ethernet).
    pub fn protocol(&self) -> EtherType {
        EtherType::from(get16(self.buffer.as_ref(), 2))
    }

    /// Virtual network identifier (24 bits).
    pub fn vni(&self) -> u32 {
        get32(self.buffer.as_ref(), 4) >> 8
    }

    /// The option bytes.
    pub fn options(&self) -> &[u8] {
        &self.buffer.as_ref()[HEADER_LEN..self.header_len()]
    }

    /// The payload after the options.
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[self.header_len()..]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Sets version and options length (`options_len` bytes, a multiple of 4, at most 252).
    pub fn set_version_and_options_len(&mut self, version: u8, options_len: usize) {
        let words = u8::try_from(options_len / 4).unwrap_or(63) & 0x3f;
        self.buffer.as_mut()[0] = ((version & 3) << 6) | words;
    }

    /// Sets the O and C flags (and clears the reserved bits).
    pub fn set_flags(&mut self, oam: bool, critical: bool) {
        self.buffer.as_mut()[1] = (u8::from(oam) << 7) | (u8::from(critical) << 6);
    }

    /// Sets the protocol type.
    pub fn set_protocol(&mut self, v: EtherType) {
        put16(self.buffer.as_mut(), 2, v.into());
    }

    /// Sets the VNI (low 24 bits) and clears the reserved byte.
    pub fn set_vni(&mut self, v: u32) {
        put32(self.buffer.as_mut(), 4, (v & 0x00ff_ffff) << 8);
    }

    /// The option bytes, mutably.
    pub fn options_mut(&mut self) -> &mut [u8] {
        let end = self.header_len();
        &mut self.buffer.as_mut()[HEADER_LEN..end]
    }
}

/// One Geneve option TLV (RFC 8926 § 3.5).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GeneveOption<'a> {
    /// Option class.
    pub class: u16,
    /// Type (the top bit is the critical bit).
    pub kind: u8,
    /// Option data (length × 4 bytes).
    pub data: &'a [u8],
}

impl GeneveOption<'_> {
    /// True if the critical bit of the type is set.
    pub fn is_critical(&self) -> bool {
        self.kind & 0x80 != 0
    }
}

/// Walks Geneve option TLVs; a TLV running past the data yields one `Err(Truncated)` and
/// ends the walk.
#[derive(Debug, Clone)]
pub struct OptionIter<'a> {
    data: &'a [u8],
    failed: bool,
}

impl<'a> OptionIter<'a> {
    /// Walks the options in `data` (from [`Packet::options`]).
    pub fn new(data: &'a [u8]) -> Self {
        OptionIter {
            data,
            failed: false,
        }
    }
}

impl<'a> Iterator for OptionIter<'a> {
    type Item = Result<GeneveOption<'a>>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed || self.data.is_empty() {
            return None;
        }
        let total = match self.data {
            [_, _, _, len, ..] => 4 + usize::from(len & 0x1f) * 4,
            _ => usize::MAX,
        };
        if total > self.data.len() {
            self.failed = true;
            return Some(Err(Error::Truncated));
        }
        let opt = GeneveOption {
            class: get16(self.data, 0),
            kind: self.data[2],
            data: &self.data[4..total],
        };
        self.data = &self.data[total..];
        Some(Ok(opt))
    }
}

/// A Geneve header with its options.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Repr {
    /// O flag.
    pub oam: bool,
    /// C flag.
    pub critical: bool,
    /// Protocol type of the payload.
    pub protocol: EtherType,
    /// VNI (24 bits).
    pub vni: u32,
    options: [u8; MAX_OPTIONS_LEN],
    options_len: u8,
}

impl Repr {
    /// A header without options.
    pub fn new(vni: u32, protocol: EtherType) -> Repr {
        Repr {
            oam: false,
            critical: false,
            protocol,
            vni,
            options: [0; MAX_OPTIONS_LEN],
            options_len: 0,
        }
    }

    /// Sets the option bytes; `None` if longer than 252 or not a multiple of 4.
    pub fn with_options(mut self, options: &[u8]) -> Option<Repr> {
        if options.len() > MAX_OPTIONS_LEN || options.len() % 4 != 0 {
            return None;
        }
        self.options = [0; MAX_OPTIONS_LEN];
        self.options[..options.len()].copy_from_slice(options);
        self.options_len = u8::try_from(options.len() / 4).ok()?;
        Some(self)
    }

    /// The option bytes.
    pub fn options(&self) -> &[u8] {
        &self.options[..usize::from(self.options_len) * 4]
    }

    /// Parses a header (version must be 0).
    pub fn parse<T: AsRef<[u8]> + ?Sized>(p: &Packet<&T>) -> Result<Repr> {
        p.check_len()?;
        if p.version() != 0 {
            return Err(Error::Malformed("Geneve version is not 0"));
        }
        let mut r = Repr::new(p.vni(), p.protocol())
            .with_options(p.options())
            .ok_or(Error::Malformed("options"))?;
        r.oam = p.oam();
        r.critical = p.critical();
        Ok(r)
    }

    /// Length of the emitted header with options.
    pub fn buffer_len(&self) -> usize {
        HEADER_LEN + self.options().len()
    }

    /// Writes the header and options.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, p: &mut Packet<T>) {
        p.set_version_and_options_len(0, self.options().len());
        p.set_flags(self.oam, self.critical);
        p.set_protocol(self.protocol);
        p.set_vni(self.vni);
        p.options_mut().copy_from_slice(self.options());
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    static HEADER: [u8; 20] = [
        0x03, 0x40, 0x65, 0x58, 0x00, 0x00, 0x2a, 0x00, // fixed, 12 bytes of options
        0x01, 0x02, 0x80, 0x01, 0xde, 0xad, 0xbe, 0xef, // class 0x0102 type 0x80, 4 bytes
        0xff, 0xff, 0x05, 0x00, // class 0xffff type 5, no data
    ];

    #[test]
    fn packet_deconstruct_fixture() {
        let p = Packet::new_checked(&HEADER[..]).expect("geneve");
        assert_eq!((p.version(), p.options_len(), p.header_len()), (0, 12, 20));
        assert!(!p.oam() && p.critical());
        assert_eq!(p.protocol(), EtherType::TransparentEthernet);
        assert_eq!(p.vni(), 42);
        let opts: Vec<_> = OptionIter::new(p.options()).collect();
        assert_eq!(opts.len(), 2);
        let first = opts[0].expect("first");
        assert_eq!(
            (first.class, first.kind, first.data),
            (0x0102, 0x80, &[0xde, 0xad, 0xbe, 0xef][..])
        );
        assert!(first.is_critical());
        assert_eq!(opts[1].map(|o| o.data.len()), Ok(0));
    }

    #[test]
    fn repr_emit_matches_fixture() {
        let p = Packet::new_checked(&HEADER[..]).expect("geneve");
        let r = Repr::parse(&p).expect("repr");
        let mut out = [0u8; 20];
        r.emit(&mut Packet::new_unchecked(&mut out[..]));
        assert_eq!(out, HEADER);
    }

    #[test]
    fn packet_truncated_options_are_rejected() {
        assert_eq!(
            Packet::new_checked(&HEADER[..19]).err(),
            Some(Error::Truncated)
        );
        assert_eq!(
            Packet::new_checked(&HEADER[..7]).err(),
            Some(Error::Truncated)
        );
        let mut it = OptionIter::new(&[0, 1, 2, 3, 0]);
        assert_eq!(it.next(), Some(Err(Error::Truncated)));
        assert_eq!(it.next(), None);
    }

    #[test]
    fn repr_rejects_other_version() {
        let mut buf = HEADER;
        buf[0] |= 0x40;
        let p = Packet::new_checked(&buf[..]).expect("geneve");
        assert!(matches!(Repr::parse(&p), Err(Error::Malformed(_))));
    }

    proptest! {
        #[test]
        fn repr_parse_emit_round_trip(
            oam: bool, critical: bool, proto: u16, vni in 0u32..(1 << 24),
            opts in proptest::collection::vec(any::<u8>(), 0..64),
        ) {
            let opts = &opts[..opts.len() / 4 * 4];
            let mut r = Repr::new(vni, proto.into()).with_options(opts).expect("options");
            r.oam = oam;
            r.critical = critical;
            let mut buf = vec![0u8; r.buffer_len()];
            r.emit(&mut Packet::new_unchecked(&mut buf[..]));
            prop_assert_eq!(Repr::parse(&Packet::new_checked(&buf[..]).expect("geneve")), Ok(r));
        }
    }
}
