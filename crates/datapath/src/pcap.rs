//! Classic libpcap capture files: a reader ([`Capture`]) and a writer ([`PcapWriter`]).
//!
//! Format: a 24-byte global header (magic, version 2.4, timezone, sigfigs, snaplen, link
//! type), then per frame a 16-byte record header (seconds, fraction, captured length,
//! original length) and the captured bytes (draft-ietf-opsawg-pcap § 4, § 5). The magic
//! `0xa1b2c3d4` gives microsecond timestamps, `0xa1b23c4d` nanoseconds; read in the other
//! byte order, it says the file was written on a machine of the other endianness. Both
//! byte orders and both precisions are read.
//!
//! pcapng files (draft-ietf-opsawg-pcapng, what Wireshark writes by default) are read too:
//! section headers of either byte order, interface descriptions (link type, `if_tsresol`),
//! enhanced and simple packet blocks; other blocks are skipped. Their timestamps are
//! converted to nanoseconds. The writer writes classic pcap only.
//!
//! # Contract
//!
//! [`Capture::parse`] never panics: a truncated or malformed file is a [`PcapError`] that
//! says which record, at which byte offset, is wrong. A whole file is loaded at once (a
//! capture for replay is loaded once and looped); frames are packed into one buffer, each
//! starting on a 64-byte boundary so that a small frame is one cache line to copy.
//!
//! # Example
//!
//! ```
//! use datapath::pcap::{Capture, PcapWriter, WriterOptions};
//!
//! let mut w = PcapWriter::new(Vec::new(), WriterOptions::default()).expect("write to a Vec");
//! w.write_frame(1, 500, &[0xff; 60]).expect("write to a Vec");
//! let bytes = w.into_inner();
//! let cap = Capture::parse(&bytes).expect("a valid capture");
//! assert_eq!(cap.len(), 1);
//! assert_eq!(cap.frame(0), &[0xff; 60]);
//! ```

use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// Microsecond-precision magic (draft-ietf-opsawg-pcap § 4).
pub const MAGIC_MICROS: u32 = 0xa1b2_c3d4;
/// Nanosecond-precision magic.
pub const MAGIC_NANOS: u32 = 0xa1b2_3c4d;
/// The block type of a pcapng section header, which opens every pcapng file.
pub const PCAPNG_MAGIC: u32 = 0x0a0d_0d0a;
/// The byte-order magic inside a pcapng section header.
const PCAPNG_BYTE_ORDER_MAGIC: u32 = 0x1a2b_3c4d;
/// pcapng block types (draft-ietf-opsawg-pcapng § 4).
const PCAPNG_IDB: u32 = 1;
const PCAPNG_SPB: u32 = 3;
const PCAPNG_EPB: u32 = 6;
/// `LINKTYPE_ETHERNET`.
pub const LINKTYPE_ETHERNET: u32 = 1;
/// Largest captured length accepted per record (libpcap's `MAXIMUM_SNAPLEN`).
pub const MAX_CAPLEN: u32 = 262_144;
/// Length of the global header.
pub const GLOBAL_HEADER_LEN: usize = 24;
/// Length of a record header.
pub const RECORD_HEADER_LEN: usize = 16;
/// Frames are packed at this alignment in a [`Capture`].
const FRAME_ALIGN: usize = 64;

/// Timestamp precision.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Precision {
    /// The fraction counts microseconds.
    #[default]
    Micros,
    /// The fraction counts nanoseconds.
    Nanos,
}

/// Byte order of a file's header fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ByteOrder {
    /// Little endian (what x86 machines write).
    #[default]
    Little,
    /// Big endian.
    Big,
}

impl ByteOrder {
    fn u16(self, b: [u8; 2]) -> u16 {
        match self {
            ByteOrder::Little => u16::from_le_bytes(b),
            ByteOrder::Big => u16::from_be_bytes(b),
        }
    }

    fn u32(self, b: [u8; 4]) -> u32 {
        match self {
            ByteOrder::Little => u32::from_le_bytes(b),
            ByteOrder::Big => u32::from_be_bytes(b),
        }
    }

    fn put_u16(self, v: u16) -> [u8; 2] {
        match self {
            ByteOrder::Little => v.to_le_bytes(),
            ByteOrder::Big => v.to_be_bytes(),
        }
    }

    fn put_u32(self, v: u32) -> [u8; 4] {
        match self {
            ByteOrder::Little => v.to_le_bytes(),
            ByteOrder::Big => v.to_be_bytes(),
        }
    }
}

/// Why a capture could not be read.
#[derive(Debug, thiserror::Error)]
pub enum PcapError {
    /// The file could not be read.
    #[error("cannot read pcap file {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        source: io::Error,
    },
    /// Fewer bytes than a global header.
    #[error("not a pcap file: {len} bytes is shorter than the 24-byte pcap header")]
    TooShort {
        /// Bytes in the file.
        len: usize,
    },
    /// A pcapng block is malformed.
    #[error("corrupt pcapng: block at byte {offset}: {what}")]
    BadBlock {
        /// Byte offset of the block.
        offset: usize,
        /// What is wrong with it.
        what: &'static str,
    },
    /// A pcapng file holds frames of several link types.
    #[error("the capture mixes link types {first} and {other}; replay needs a single one")]
    MixedLinkTypes {
        /// The first interface's link type.
        first: u32,
        /// Another interface's link type.
        other: u32,
    },
    /// The first four bytes are not a pcap magic number.
    #[error("not a pcap file: bad magic number {0:#010x}")]
    BadMagic(u32),
    /// A version other than 2.x.
    #[error("unsupported pcap version {major}.{minor} (only 2.x is read)")]
    Version {
        /// Major version.
        major: u16,
        /// Minor version.
        minor: u16,
    },
    /// The file ends inside a record header.
    #[error("pcap truncated: record {index} at byte {offset} has a partial header ({available} of 16 bytes)")]
    TruncatedHeader {
        /// Record number, from 0.
        index: usize,
        /// Byte offset of the record header.
        offset: usize,
        /// Bytes left in the file.
        available: usize,
    },
    /// The file ends inside a frame.
    #[error("pcap truncated: record {index} at byte {offset} declares {caplen} bytes but {available} remain")]
    TruncatedFrame {
        /// Record number, from 0.
        index: usize,
        /// Byte offset of the record header.
        offset: usize,
        /// Declared captured length.
        caplen: u32,
        /// Bytes left after the record header.
        available: usize,
    },
    /// A record declares an implausible captured length (a corrupt file).
    #[error("corrupt pcap: record {index} at byte {offset} declares {caplen} captured bytes (limit {MAX_CAPLEN})")]
    BadCapLen {
        /// Record number, from 0.
        index: usize,
        /// Byte offset of the record header.
        offset: usize,
        /// Declared captured length.
        caplen: u32,
    },
}

/// One frame's record in a [`Capture`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Record {
    /// Timestamp, whole seconds.
    pub ts_sec: u32,
    /// Timestamp, fraction in the capture's [`Precision`].
    pub ts_frac: u32,
    /// Length of the frame on the wire (may exceed the captured length).
    pub orig_len: u32,
    /// Where the captured bytes are in the capture's frame buffer.
    offset: usize,
    /// Captured length.
    caplen: u32,
}

impl Record {
    /// Captured length.
    pub fn caplen(&self) -> usize {
        self.caplen as usize
    }
}

/// A whole capture file in memory.
#[derive(Debug, Clone)]
pub struct Capture {
    /// Link type (`LINKTYPE_*`): 1 is Ethernet.
    pub link_type: u32,
    /// Precision of the records' `ts_frac`: the file's for classic pcap, nanoseconds for
    /// pcapng (converted from each interface's resolution).
    pub precision: Precision,
    /// Byte order of the file (of its first section, for pcapng).
    pub byte_order: ByteOrder,
    /// The snapshot length from the global header ([`MAX_CAPLEN`] for pcapng).
    pub snaplen: u32,
    /// The frames, packed, each at a multiple of `FRAME_ALIGN` from `base`.
    data: Vec<u8>,
    /// Where the aligned area starts in `data`.
    base: usize,
    records: Vec<Record>,
}

impl Capture {
    /// Reads and parses the file at `path`.
    pub fn read(path: impl AsRef<Path>) -> Result<Capture, PcapError> {
        let path = path.as_ref();
        let bytes = std::fs::read(path).map_err(|source| PcapError::Io {
            path: path.to_owned(),
            source,
        })?;
        Capture::parse(&bytes)
    }

    /// Parses a whole capture file held in memory, classic pcap or pcapng.
    pub fn parse(bytes: &[u8]) -> Result<Capture, PcapError> {
        let magic = bytes
            .get(..4)
            .map(|m| u32::from_le_bytes([m[0], m[1], m[2], m[3]]))
            .ok_or(PcapError::TooShort { len: bytes.len() })?;
        let (header, spans) = if magic == PCAPNG_MAGIC {
            parse_pcapng(bytes)?
        } else {
            parse_classic(bytes)?
        };
        Ok(Capture::pack(bytes, header, &spans))
    }

    /// Copies the frames that `spans` locate in `bytes` into one cache-line-aligned buffer.
    fn pack(bytes: &[u8], header: Header, spans: &[Span]) -> Capture {
        let packed_len: usize = spans
            .iter()
            .map(|s| (s.caplen as usize).next_multiple_of(FRAME_ALIGN))
            .sum();
        let mut data = Vec::with_capacity(packed_len + FRAME_ALIGN);
        // Align the packed frames to the cache line, whatever malloc gave us.
        let base = (FRAME_ALIGN - (data.as_ptr() as usize % FRAME_ALIGN)) % FRAME_ALIGN;
        data.resize(base, 0);
        let mut records = Vec::with_capacity(spans.len());
        for s in spans {
            let at = data.len();
            data.extend_from_slice(&bytes[s.src..s.src + s.caplen as usize]);
            data.resize(at + (s.caplen as usize).next_multiple_of(FRAME_ALIGN), 0);
            records.push(Record {
                ts_sec: s.ts_sec,
                ts_frac: s.ts_frac,
                orig_len: s.orig_len,
                offset: at,
                caplen: s.caplen,
            });
        }
        Capture {
            link_type: header.link_type,
            precision: header.precision,
            byte_order: header.byte_order,
            snaplen: header.snaplen,
            data,
            base,
            records,
        }
    }

    /// Number of frames.
    pub fn len(&self) -> usize {
        self.records.len()
    }

    /// Whether the capture holds no frame.
    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
    }

    /// The records, in file order.
    pub fn records(&self) -> &[Record] {
        &self.records
    }

    /// The captured bytes of frame `index`; panics if `index >= len()`, like slice indexing.
    #[inline]
    pub fn frame(&self, index: usize) -> &[u8] {
        let r = &self.records[index];
        &self.data[r.offset..r.offset + r.caplen as usize]
    }

    /// The captured bytes of every frame, in file order.
    pub fn frames(&self) -> impl ExactSizeIterator<Item = &[u8]> + '_ {
        self.records
            .iter()
            .map(|r| &self.data[r.offset..r.offset + r.caplen as usize])
    }

    /// Total captured bytes.
    pub fn n_bytes(&self) -> usize {
        self.records.iter().map(Record::caplen).sum()
    }

    /// Bytes the capture holds in memory for its frames (with alignment padding).
    pub fn memory_len(&self) -> usize {
        self.data.len() - self.base
    }
}

/// What a file's headers say about the whole capture.
#[derive(Debug, Clone, Copy)]
struct Header {
    link_type: u32,
    precision: Precision,
    byte_order: ByteOrder,
    snaplen: u32,
}

/// Where one frame is in the file, and its record fields.
#[derive(Debug, Clone, Copy)]
struct Span {
    src: usize,
    ts_sec: u32,
    ts_frac: u32,
    caplen: u32,
    orig_len: u32,
}

/// Reads a `u32` at `at` in `bytes`, if there are four bytes there.
fn u32_at(bytes: &[u8], at: usize, bo: ByteOrder) -> Option<u32> {
    let b = bytes.get(at..at.checked_add(4)?)?;
    Some(bo.u32([b[0], b[1], b[2], b[3]]))
}

/// Reads a `u16` at `at` in `bytes`, if there are two bytes there.
fn u16_at(bytes: &[u8], at: usize, bo: ByteOrder) -> Option<u16> {
    let b = bytes.get(at..at.checked_add(2)?)?;
    Some(bo.u16([b[0], b[1]]))
}

/// Validates a classic pcap file and locates its frames.
fn parse_classic(bytes: &[u8]) -> Result<(Header, Vec<Span>), PcapError> {
    let head: &[u8; GLOBAL_HEADER_LEN] = bytes
        .get(..GLOBAL_HEADER_LEN)
        .and_then(|h| h.try_into().ok())
        .ok_or(PcapError::TooShort { len: bytes.len() })?;
    let magic_le = u32::from_le_bytes([head[0], head[1], head[2], head[3]]);
    let (byte_order, precision) = match magic_le {
        MAGIC_MICROS => (ByteOrder::Little, Precision::Micros),
        MAGIC_NANOS => (ByteOrder::Little, Precision::Nanos),
        m if m.swap_bytes() == MAGIC_MICROS => (ByteOrder::Big, Precision::Micros),
        m if m.swap_bytes() == MAGIC_NANOS => (ByteOrder::Big, Precision::Nanos),
        m => return Err(PcapError::BadMagic(m)),
    };
    let bo = byte_order;
    let field = |at: usize| bo.u32([head[at], head[at + 1], head[at + 2], head[at + 3]]);
    let major = bo.u16([head[4], head[5]]);
    let minor = bo.u16([head[6], head[7]]);
    if major != 2 {
        return Err(PcapError::Version { major, minor });
    }
    let header = Header {
        // The link type is the low 16 bits; the upper bits carry FCS flags (§ 4).
        link_type: field(20) & 0xffff,
        precision,
        byte_order,
        snaplen: field(16),
    };

    let mut spans = Vec::new();
    let mut offset = GLOBAL_HEADER_LEN;
    while offset < bytes.len() {
        let index = spans.len();
        let rest = &bytes[offset..];
        let rh: &[u8; RECORD_HEADER_LEN] = rest
            .get(..RECORD_HEADER_LEN)
            .and_then(|h| h.try_into().ok())
            .ok_or(PcapError::TruncatedHeader {
                index,
                offset,
                available: rest.len(),
            })?;
        let word = |at: usize| bo.u32([rh[at], rh[at + 1], rh[at + 2], rh[at + 3]]);
        let caplen = word(8);
        if caplen > MAX_CAPLEN {
            return Err(PcapError::BadCapLen {
                index,
                offset,
                caplen,
            });
        }
        let available = rest.len() - RECORD_HEADER_LEN;
        if caplen as usize > available {
            return Err(PcapError::TruncatedFrame {
                index,
                offset,
                caplen,
                available,
            });
        }
        spans.push(Span {
            src: offset + RECORD_HEADER_LEN,
            ts_sec: word(0),
            ts_frac: word(4),
            caplen,
            orig_len: word(12),
        });
        offset += RECORD_HEADER_LEN + caplen as usize;
    }
    Ok((header, spans))
}

/// One pcapng interface: its link type, snap length and timestamp resolution.
#[derive(Debug, Clone, Copy)]
struct Interface {
    link_type: u32,
    snaplen: u32,
    /// `if_tsresol`: bit 7 clear, ticks of 10^-v s; set, ticks of 2^-v s.
    tsresol: u8,
}

impl Interface {
    /// Splits a timestamp in ticks into seconds and nanoseconds.
    fn to_sec_ns(self, ticks: u64) -> (u32, u32) {
        let v = u32::from(self.tsresol & 0x7f);
        let ticks = u128::from(ticks);
        let ns = if self.tsresol & 0x80 == 0 {
            match v.checked_sub(9) {
                None => ticks * 10u128.pow(9 - v),
                Some(extra) => ticks / 10u128.checked_pow(extra).unwrap_or(u128::MAX),
            }
        } else {
            (ticks * 1_000_000_000).checked_shr(v).unwrap_or_default()
        };
        let sec = u32::try_from(ns / 1_000_000_000).unwrap_or(u32::MAX);
        let frac = u32::try_from(ns % 1_000_000_000).unwrap_or_default();
        (sec, frac)
    }

    /// Finds `if_tsresol` (option 9) in an interface description's options.
    fn tsresol_option(options: &[u8], bo: ByteOrder) -> u8 {
        let mut at = 0;
        while let (Some(code), Some(len)) = (u16_at(options, at, bo), u16_at(options, at + 2, bo)) {
            let len = usize::from(len);
            match code {
                0 => break,
                9 if len == 1 => return options.get(at + 4).copied().unwrap_or(6),
                _ => at += 4 + len.next_multiple_of(4),
            }
        }
        6
    }
}

/// Validates a pcapng file and locates its frames.
fn parse_pcapng(bytes: &[u8]) -> Result<(Header, Vec<Span>), PcapError> {
    let mut bo = ByteOrder::Little;
    let mut first_order = None;
    let mut interfaces: Vec<Interface> = Vec::new();
    let mut spans = Vec::new();
    let mut offset = 0;
    while offset < bytes.len() {
        let bad = |what| PcapError::BadBlock { offset, what };
        let block_type = u32_at(bytes, offset, bo).ok_or(bad("truncated block header"))?;
        if block_type == PCAPNG_MAGIC {
            // A section header sets the byte order of everything up to the next one.
            let magic = u32_at(bytes, offset + 8, ByteOrder::Little)
                .ok_or(bad("truncated section header"))?;
            bo = if magic == PCAPNG_BYTE_ORDER_MAGIC {
                ByteOrder::Little
            } else if magic.swap_bytes() == PCAPNG_BYTE_ORDER_MAGIC {
                ByteOrder::Big
            } else {
                return Err(bad("bad byte-order magic in section header"));
            };
            first_order.get_or_insert(bo);
            let major = u16_at(bytes, offset + 12, bo).ok_or(bad("truncated section header"))?;
            if major != 1 {
                return Err(bad("unsupported pcapng major version (only 1 is read)"));
            }
            // Interface ids are numbered per section.
            interfaces.clear();
        }
        let len = u32_at(bytes, offset + 4, bo).ok_or(bad("truncated block header"))? as usize;
        if len < 12 || len % 4 != 0 {
            return Err(bad("block length is not a multiple of 4 of at least 12"));
        }
        let block = bytes
            .get(offset..offset + len)
            .ok_or(bad("block runs past the end of the file"))?;
        if u32_at(block, len - 4, bo) != u32::try_from(len).ok() {
            return Err(bad("trailing block length does not match"));
        }
        let body = &block[8..len - 4];
        match block_type {
            PCAPNG_IDB => {
                let link_type = u16_at(body, 0, bo).ok_or(bad("truncated interface block"))?;
                let snaplen = u32_at(body, 4, bo).ok_or(bad("truncated interface block"))?;
                interfaces.push(Interface {
                    link_type: u32::from(link_type),
                    snaplen,
                    tsresol: Interface::tsresol_option(body.get(8..).unwrap_or_default(), bo),
                });
            }
            PCAPNG_EPB => {
                let field = |at| u32_at(body, at, bo).ok_or(bad("truncated packet block"));
                let iface = interfaces
                    .get(field(0)? as usize)
                    .ok_or(bad("packet on an undeclared interface"))?;
                let ticks = (u64::from(field(4)?) << 32) | u64::from(field(8)?);
                let caplen = field(12)?;
                if caplen > MAX_CAPLEN || 20 + caplen as usize > body.len() {
                    return Err(bad("captured length runs past the block"));
                }
                let (ts_sec, ts_frac) = iface.to_sec_ns(ticks);
                spans.push((
                    iface.link_type,
                    Span {
                        src: offset + 8 + 20,
                        ts_sec,
                        ts_frac,
                        caplen,
                        orig_len: field(16)?,
                    },
                ));
            }
            PCAPNG_SPB => {
                let iface = interfaces
                    .first()
                    .ok_or(bad("packet on an undeclared interface"))?;
                let orig_len = u32_at(body, 0, bo).ok_or(bad("truncated packet block"))?;
                let mut caplen = orig_len.min(MAX_CAPLEN);
                if iface.snaplen != 0 {
                    caplen = caplen.min(iface.snaplen);
                }
                if 4 + caplen as usize > body.len() {
                    return Err(bad("captured length runs past the block"));
                }
                spans.push((
                    iface.link_type,
                    Span {
                        src: offset + 8 + 4,
                        ts_sec: 0,
                        ts_frac: 0,
                        caplen,
                        orig_len,
                    },
                ));
            }
            _ => {} // Section headers (handled above), statistics, name resolution, custom.
        }
        offset += len;
    }
    let link_type = spans.first().map_or(LINKTYPE_ETHERNET, |(l, _)| *l);
    if let Some((other, _)) = spans.iter().find(|(l, _)| *l != link_type) {
        return Err(PcapError::MixedLinkTypes {
            first: link_type,
            other: *other,
        });
    }
    let header = Header {
        link_type,
        precision: Precision::Nanos,
        byte_order: first_order.unwrap_or_default(),
        snaplen: MAX_CAPLEN,
    };
    Ok((header, spans.into_iter().map(|(_, s)| s).collect()))
}

/// How a [`PcapWriter`] writes its file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WriterOptions {
    /// Byte order of the header fields.
    pub byte_order: ByteOrder,
    /// Timestamp precision.
    pub precision: Precision,
    /// Snapshot length written in the global header.
    pub snaplen: u32,
    /// Link type; Ethernet unless stated.
    pub link_type: u32,
}

impl Default for WriterOptions {
    fn default() -> Self {
        WriterOptions {
            byte_order: ByteOrder::Little,
            precision: Precision::Micros,
            snaplen: 65_535,
            link_type: LINKTYPE_ETHERNET,
        }
    }
}

/// Writes a classic pcap file, frame by frame.
#[derive(Debug)]
pub struct PcapWriter<W: Write> {
    out: W,
    opts: WriterOptions,
}

impl<W: Write> PcapWriter<W> {
    /// Writes the global header to `out`.
    pub fn new(mut out: W, opts: WriterOptions) -> io::Result<PcapWriter<W>> {
        let bo = opts.byte_order;
        let magic = match opts.precision {
            Precision::Micros => MAGIC_MICROS,
            Precision::Nanos => MAGIC_NANOS,
        };
        let mut h = Vec::with_capacity(GLOBAL_HEADER_LEN);
        h.extend_from_slice(&bo.put_u32(magic));
        h.extend_from_slice(&bo.put_u16(2));
        h.extend_from_slice(&bo.put_u16(4));
        h.extend_from_slice(&[0; 8]); // thiszone, sigfigs
        h.extend_from_slice(&bo.put_u32(opts.snaplen));
        h.extend_from_slice(&bo.put_u32(opts.link_type));
        out.write_all(&h)?;
        Ok(PcapWriter { out, opts })
    }

    /// Appends one frame with timestamp `ts_sec` + `ts_frac` (in the writer's precision).
    /// The frame is written whole; its captured and original lengths are equal.
    pub fn write_frame(&mut self, ts_sec: u32, ts_frac: u32, frame: &[u8]) -> io::Result<()> {
        let len = u32::try_from(frame.len())
            .ok()
            .filter(|l| *l <= MAX_CAPLEN)
            .ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("frame of {} bytes exceeds {MAX_CAPLEN}", frame.len()),
                )
            })?;
        let bo = self.opts.byte_order;
        let mut h = [0u8; RECORD_HEADER_LEN];
        h[0..4].copy_from_slice(&bo.put_u32(ts_sec));
        h[4..8].copy_from_slice(&bo.put_u32(ts_frac));
        h[8..12].copy_from_slice(&bo.put_u32(len));
        h[12..16].copy_from_slice(&bo.put_u32(len));
        self.out.write_all(&h)?;
        self.out.write_all(frame)
    }

    /// Flushes and returns the underlying writer.
    pub fn into_inner(mut self) -> W {
        // A flush error will surface on the writer's next use or drop; a `Vec` never fails.
        let _ = self.out.flush();
        self.out
    }
}

#[cfg(test)]
#[allow(clippy::cast_possible_truncation)] // Fixtures cast small indices to bytes.
mod tests {
    use super::*;

    fn frames() -> Vec<Vec<u8>> {
        [60usize, 64, 128, 1514, 9000, 1]
            .iter()
            .enumerate()
            .map(|(i, &len)| (0..len).map(|b| (b * 7 + i) as u8).collect())
            .collect()
    }

    fn write(opts: WriterOptions, frames: &[Vec<u8>]) -> Vec<u8> {
        let mut w = PcapWriter::new(Vec::new(), opts).unwrap();
        for (i, f) in frames.iter().enumerate() {
            w.write_frame(i as u32, 1000 + i as u32, f).unwrap();
        }
        w.into_inner()
    }

    #[test]
    fn parse_round_trip_every_byte_order_and_precision() {
        let frames = frames();
        for byte_order in [ByteOrder::Little, ByteOrder::Big] {
            for precision in [Precision::Micros, Precision::Nanos] {
                let opts = WriterOptions {
                    byte_order,
                    precision,
                    ..WriterOptions::default()
                };
                let cap = Capture::parse(&write(opts, &frames)).unwrap();
                assert_eq!(cap.byte_order, byte_order);
                assert_eq!(cap.precision, precision);
                assert_eq!(cap.link_type, LINKTYPE_ETHERNET);
                assert_eq!(cap.snaplen, 65_535);
                assert_eq!(cap.len(), frames.len());
                for (i, (got, want)) in cap.frames().zip(&frames).enumerate() {
                    assert_eq!(got, &want[..]);
                    let r = cap.records()[i];
                    assert_eq!((r.ts_sec, r.ts_frac), (i as u32, 1000 + i as u32));
                    assert_eq!(r.orig_len as usize, want.len());
                }
                assert_eq!(cap.n_bytes(), frames.iter().map(Vec::len).sum::<usize>());
            }
        }
    }

    #[test]
    fn parse_frames_are_cache_line_aligned() {
        let cap = Capture::parse(&write(WriterOptions::default(), &frames())).unwrap();
        for f in cap.frames() {
            assert_eq!(f.as_ptr() as usize % FRAME_ALIGN, 0);
        }
    }

    #[test]
    fn parse_header_only_is_empty_capture() {
        let cap = Capture::parse(&write(WriterOptions::default(), &[])).unwrap();
        assert!(cap.is_empty());
    }

    #[test]
    fn parse_short_file_is_too_short() {
        assert!(matches!(
            Capture::parse(&[0xd4, 0xc3, 0xb2]),
            Err(PcapError::TooShort { len: 3 })
        ));
        assert!(matches!(
            Capture::parse(&[]),
            Err(PcapError::TooShort { len: 0 })
        ));
    }

    #[test]
    fn parse_bad_magic_is_error() {
        let mut bytes = write(WriterOptions::default(), &frames());
        bytes[0] = 0x00;
        assert!(matches!(
            Capture::parse(&bytes),
            Err(PcapError::BadMagic(_))
        ));
    }

    #[test]
    fn parse_bad_version_is_error() {
        let mut bytes = write(WriterOptions::default(), &[]);
        bytes[4] = 3;
        assert!(matches!(
            Capture::parse(&bytes),
            Err(PcapError::Version { major: 3, minor: 4 })
        ));
    }

    #[test]
    fn parse_truncated_record_header_is_error() {
        let frames = frames();
        let bytes = write(WriterOptions::default(), &frames[..2]);
        let cut = GLOBAL_HEADER_LEN + RECORD_HEADER_LEN + 60 + 5;
        match Capture::parse(&bytes[..cut]) {
            Err(PcapError::TruncatedHeader {
                index: 1,
                offset,
                available: 5,
            }) => assert_eq!(offset, GLOBAL_HEADER_LEN + RECORD_HEADER_LEN + 60),
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn parse_truncated_frame_is_error() {
        let bytes = write(WriterOptions::default(), &frames()[..1]);
        let err = Capture::parse(&bytes[..bytes.len() - 1]).unwrap_err();
        assert!(
            matches!(
                err,
                PcapError::TruncatedFrame {
                    index: 0,
                    caplen: 60,
                    available: 59,
                    ..
                }
            ),
            "{err:?}"
        );
        assert!(err.to_string().contains("record 0"));
    }

    #[test]
    fn parse_huge_caplen_is_error() {
        let mut bytes = write(WriterOptions::default(), &frames()[..1]);
        let at = GLOBAL_HEADER_LEN + 8;
        bytes[at..at + 4].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(matches!(
            Capture::parse(&bytes),
            Err(PcapError::BadCapLen {
                index: 0,
                caplen: u32::MAX,
                ..
            })
        ));
    }

    #[test]
    fn parse_every_prefix_never_panics() {
        let bytes = write(WriterOptions::default(), &frames()[..3]);
        for cut in 0..bytes.len() {
            let _ = Capture::parse(&bytes[..cut]);
        }
        // Garbage in every header field.
        for i in 0..bytes.len().min(200) {
            let mut b = bytes.clone();
            b[i] ^= 0xff;
            let _ = Capture::parse(&b);
        }
    }

    #[test]
    fn read_missing_file_names_path() {
        let err = Capture::read("/nonexistent/ferrovs.pcap").unwrap_err();
        assert!(err.to_string().contains("/nonexistent/ferrovs.pcap"));
    }

    #[test]
    fn write_frame_too_long_is_error() {
        let mut w = PcapWriter::new(Vec::new(), WriterOptions::default()).unwrap();
        assert!(w
            .write_frame(0, 0, &vec![0; MAX_CAPLEN as usize + 1])
            .is_err());
    }

    mod pcapng {
        use super::*;

        fn block(bo: ByteOrder, ty: u32, body: &[u8]) -> Vec<u8> {
            let mut body = body.to_vec();
            body.resize(body.len().next_multiple_of(4), 0);
            let len = (12 + body.len()) as u32;
            let mut b = bo.put_u32(ty).to_vec();
            b.extend_from_slice(&bo.put_u32(len));
            b.extend_from_slice(&body);
            b.extend_from_slice(&bo.put_u32(len));
            b
        }

        fn shb(bo: ByteOrder) -> Vec<u8> {
            let mut body = bo.put_u32(PCAPNG_BYTE_ORDER_MAGIC).to_vec();
            body.extend_from_slice(&bo.put_u16(1));
            body.extend_from_slice(&bo.put_u16(0));
            body.extend_from_slice(&[0xff; 8]);
            block(bo, PCAPNG_MAGIC, &body)
        }

        fn idb(bo: ByteOrder, link_type: u16, tsresol: Option<u8>) -> Vec<u8> {
            let mut body = bo.put_u16(link_type).to_vec();
            body.extend_from_slice(&bo.put_u16(0));
            body.extend_from_slice(&bo.put_u32(65_535));
            if let Some(r) = tsresol {
                // An unrelated option first (if_name), then if_tsresol, then opt_endofopt.
                body.extend_from_slice(&bo.put_u16(2));
                body.extend_from_slice(&bo.put_u16(3));
                body.extend_from_slice(b"eth\0");
                body.extend_from_slice(&bo.put_u16(9));
                body.extend_from_slice(&bo.put_u16(1));
                body.extend_from_slice(&[r, 0, 0, 0]);
                body.extend_from_slice(&[0; 4]);
            }
            block(bo, PCAPNG_IDB, &body)
        }

        fn epb(bo: ByteOrder, iface: u32, ticks: u64, frame: &[u8]) -> Vec<u8> {
            let mut body = bo.put_u32(iface).to_vec();
            body.extend_from_slice(&bo.put_u32((ticks >> 32) as u32));
            body.extend_from_slice(&bo.put_u32(ticks as u32));
            body.extend_from_slice(&bo.put_u32(frame.len() as u32));
            body.extend_from_slice(&bo.put_u32(frame.len() as u32 + 4));
            body.extend_from_slice(frame);
            block(bo, PCAPNG_EPB, &body)
        }

        fn spb(bo: ByteOrder, frame: &[u8]) -> Vec<u8> {
            let mut body = bo.put_u32(frame.len() as u32).to_vec();
            body.extend_from_slice(frame);
            block(bo, PCAPNG_SPB, &body)
        }

        fn file(bo: ByteOrder) -> Vec<u8> {
            let f = frames();
            let mut b = shb(bo);
            b.extend(idb(bo, 1, Some(9)));
            b.extend(idb(bo, 1, None));
            b.extend(epb(bo, 0, 3_000_000_005, &f[0]));
            b.extend(block(bo, 0x0bad, &[1, 2, 3]));
            b.extend(spb(bo, &f[1]));
            b.extend(epb(bo, 1, 2_000_007, &f[4]));
            b
        }

        #[test]
        fn parse_both_byte_orders_reads_frames_and_timestamps() {
            let f = frames();
            for bo in [ByteOrder::Little, ByteOrder::Big] {
                let cap = Capture::parse(&file(bo)).unwrap();
                assert_eq!(cap.byte_order, bo);
                assert_eq!(cap.precision, Precision::Nanos);
                assert_eq!(cap.link_type, LINKTYPE_ETHERNET);
                let got: Vec<&[u8]> = cap.frames().collect();
                assert_eq!(got, vec![&f[0][..], &f[1][..], &f[4][..]]);
                let r = cap.records();
                assert_eq!((r[0].ts_sec, r[0].ts_frac), (3, 5));
                assert_eq!(r[0].orig_len as usize, f[0].len() + 4);
                // Default resolution: microseconds.
                assert_eq!((r[2].ts_sec, r[2].ts_frac), (2, 7_000));
            }
        }

        #[test]
        fn parse_sections_switch_byte_order() {
            let f = frames();
            let mut b = file(ByteOrder::Little);
            b.extend(shb(ByteOrder::Big));
            b.extend(idb(ByteOrder::Big, 1, None));
            b.extend(epb(ByteOrder::Big, 0, 0, &f[2]));
            let cap = Capture::parse(&b).unwrap();
            assert_eq!(cap.len(), 4);
            assert_eq!(cap.frame(3), &f[2][..]);
        }

        #[test]
        fn parse_binary_resolution_converts_to_nanos() {
            let iface = Interface {
                link_type: 1,
                snaplen: 0,
                tsresol: 0x80 | 10,
            };
            assert_eq!(iface.to_sec_ns(1024 * 3 + 512), (3, 500_000_000));
        }

        #[test]
        fn parse_packet_before_interface_is_error() {
            let mut b = shb(ByteOrder::Little);
            b.extend(epb(ByteOrder::Little, 0, 0, &[0; 60]));
            let err = Capture::parse(&b).unwrap_err();
            assert!(err.to_string().contains("undeclared interface"), "{err}");
        }

        #[test]
        fn parse_mixed_link_types_is_error() {
            let mut b = shb(ByteOrder::Little);
            b.extend(idb(ByteOrder::Little, 1, None));
            b.extend(idb(ByteOrder::Little, 101, None));
            b.extend(epb(ByteOrder::Little, 0, 0, &[0; 60]));
            b.extend(epb(ByteOrder::Little, 1, 0, &[0; 60]));
            assert!(matches!(
                Capture::parse(&b),
                Err(PcapError::MixedLinkTypes {
                    first: 1,
                    other: 101
                })
            ));
        }

        #[test]
        fn parse_bad_trailing_length_is_error() {
            let mut b = file(ByteOrder::Little);
            let shb_len = shb(ByteOrder::Little).len();
            b[shb_len - 4] ^= 4;
            assert!(matches!(
                Capture::parse(&b),
                Err(PcapError::BadBlock { offset: 0, .. })
            ));
        }

        #[test]
        fn parse_truncated_is_error_never_panic() {
            let b = file(ByteOrder::Big);
            for cut in 4..b.len() {
                let err = Capture::parse(&b[..cut]);
                // Cuts at block boundaries give a valid, shorter capture.
                if let Err(e) = err {
                    assert!(matches!(e, PcapError::BadBlock { .. }), "{e}");
                }
            }
            for i in 0..b.len() {
                let mut c = b.clone();
                c[i] ^= 0xa5;
                let _ = Capture::parse(&c);
            }
        }
    }
}
