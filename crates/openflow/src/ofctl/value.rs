//! Field values in ovs-ofctl text: numbers, Ethernet/IPv4/IPv6 addresses, port names, and
//! the special formats (fragment handling, TCP flags, `ct_state`, tunnel flags), each with
//! an optional `/mask`.
//!
//! # Value units
//!
//! A value or mask is a `u128` holding the field's OVS value (`union mf_value`) as an
//! unsigned integer [`Field::n_bytes`] wide: an IPv4 address is a `u32` in host order, an
//! Ethernet address the low 48 bits, `dl_vlan` the 12-bit VID, `vlan_vid` the VID plus the
//! `OFPVID_PRESENT` bit 0x1000, `ip_dscp` the DSCP shifted down, `nw_tos` the DSCP in place,
//! ports the OpenFlow 1.0 16-bit form (`in_port_oxm` too). Where that differs from the
//! field's storage in a key, [`crate::Match::set_field`] does the conversion, as OVS's
//! `mf_set` does.
//!
//! # Rules (OVS `mf_parse` / `mf_format`)
//!
//! - `*` means value 0, mask 0 (any); a mask of all ones over `n_bytes` is an exact match.
//! - Integers are decimal, octal with a leading `0`, or `0x` hexadecimal; a value that does not fit
//!   in `n_bytes` is rejected (`5000000000: value too large for 4-byte field ...`).
//! - A field that is not maskable accepts only an all-zeros or all-ones mask (`5/1: invalid mask
//!   for field nw_ttl`).
//! - IPv4 and IPv6 masks may be written as a prefix length.

use std::net::{Ipv4Addr, Ipv6Addr};

use crate::field::{Field, Format};
use crate::Error;

/// OpenFlow 1.0 reserved port numbers (OVS `OFPP_*`), with their ovs-ofctl names. Parsing
/// also accepts `NONE` for `ANY` (0xffff).
pub const PORT_NAMES: [(u16, &str); 9] = [
    (0xfff7, "UNSET"),
    (0xfff8, "IN_PORT"),
    (0xfff9, "TABLE"),
    (0xfffa, "NORMAL"),
    (0xfffb, "FLOOD"),
    (0xfffc, "ALL"),
    (0xfffd, "CONTROLLER"),
    (0xfffe, "LOCAL"),
    (0xffff, "ANY"),
];

/// `OFPP_LOCAL`.
pub const OFPP_LOCAL: u16 = 0xfffe;
/// `OFPP_IN_PORT`.
pub const OFPP_IN_PORT: u16 = 0xfff8;
/// `OFPP_CONTROLLER`.
pub const OFPP_CONTROLLER: u16 = 0xfffd;
/// `OFPP_NONE` / `OFPP_ANY`.
pub const OFPP_NONE: u16 = 0xffff;
/// `OFPP_MAX`: the first port number that is not a physical port.
pub const OFPP_MAX: u16 = 0xff00;

/// Parses an unsigned integer in decimal or `0x` hexadecimal.
pub fn parse_uint(s: &str) -> Option<u128> {
    let s = s.trim();
    if let Some(h) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        u128::from_str_radix(h, 16).ok()
    } else {
        s.parse::<u128>().ok()
    }
}

/// Parses an OpenFlow port: a decimal number or a reserved name (case-insensitive), as OVS
/// `ofputil_port_from_string`. OpenFlow 1.1 reserved numbers (0xffffff00 and up) map to
/// their 16-bit forms.
pub fn parse_port(s: &str) -> Result<u16, Error> {
    let t = s.trim();
    if !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()) {
        let n: u64 = t
            .parse()
            .map_err(|_| Error::Parse(format!("{t}: port is out of range")))?;
        return match n {
            0..=0xffff => Ok(u16::try_from(n).unwrap_or(u16::MAX)),
            0xffff_ff00..=0xffff_ffff => Ok(u16::try_from(n - 0xffff_0000).unwrap_or(u16::MAX)),
            _ => Err(Error::Parse(format!(
                "{t}: port is outside the supported range 0 through ffff or 0xffffff00 through \
                 0xffffffff"
            ))),
        };
    }
    if t.eq_ignore_ascii_case("NONE") {
        return Ok(OFPP_NONE);
    }
    PORT_NAMES
        .iter()
        .find(|(_, name)| t.eq_ignore_ascii_case(name))
        .map(|(n, _)| *n)
        .ok_or_else(|| Error::Parse(format!("{t}: invalid or unknown port")))
}

/// Prints a port number as ovs-ofctl does (reserved ports by name).
pub fn format_port(p: u16) -> String {
    PORT_NAMES
        .iter()
        .find(|(n, _)| *n == p)
        .map(|(_, name)| (*name).to_string())
        .unwrap_or_else(|| p.to_string())
}

/// Parses an Ethernet address `xx:xx:xx:xx:xx:xx` (one or two hex digits per byte) into
/// its key form.
pub fn parse_mac(s: &str) -> Option<u64> {
    let mut v = 0u64;
    let mut n = 0;
    for p in s.trim().split(':') {
        if p.is_empty() || p.len() > 2 || n == 6 {
            return None;
        }
        v = (v << 8) | u64::from(u8::from_str_radix(p, 16).ok()?);
        n += 1;
    }
    (n == 6).then_some(v)
}

/// Prints the key form of an Ethernet address.
pub fn format_mac(v: u64) -> String {
    let b = packet::key::mac_to_bytes(v);
    format!(
        "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
        b[0], b[1], b[2], b[3], b[4], b[5]
    )
}

/// Parses a dotted-quad IPv4 address.
pub fn parse_ipv4(s: &str) -> Option<u32> {
    let mut v = 0u32;
    let mut n = 0;
    for p in s.split('.') {
        if p.is_empty() || p.len() > 3 || !p.bytes().all(|b| b.is_ascii_digit()) || n == 4 {
            return None;
        }
        v = (v << 8) | u32::from(p.parse::<u8>().ok()?);
        n += 1;
    }
    (n == 4).then_some(v)
}

/// The IPv4 mask of a prefix length (0..=32).
pub fn ipv4_prefix_mask(bits: u32) -> u32 {
    if bits == 0 {
        0
    } else {
        u32::MAX << (32 - bits.min(32))
    }
}

/// The IPv6 mask of a prefix length (0..=128).
pub fn ipv6_prefix_mask(bits: u32) -> u128 {
    if bits == 0 {
        0
    } else {
        u128::MAX << (128 - bits.min(128))
    }
}

/// The prefix length of a CIDR mask of `width` bits, or `None` if `mask` is not one.
pub fn cidr_len(mask: u128, width: u32) -> Option<u32> {
    let full = if width >= 128 {
        u128::MAX
    } else {
        (1u128 << width) - 1
    };
    let inv = !mask & full;
    // A CIDR mask's complement is a run of low ones: inv + 1 is a power of two.
    if inv & inv.wrapping_add(1) == 0 {
        Some(width - inv.count_ones())
    } else {
        None
    }
}

fn ipv4_text(v: u128) -> String {
    #[allow(clippy::cast_possible_truncation)]
    Ipv4Addr::from(v as u32).to_string()
}

/// The error ovs-ofctl gives for an integer that does not parse (`mf_from_integer_string`).
fn int_error(f: &Field, s: &str, what: &str, too_large: bool) -> Error {
    if too_large {
        Error::Parse(format!(
            "{s}: {what} too large for {}-byte field {}",
            f.n_bytes(),
            f.name
        ))
    } else {
        Error::Parse(format!("{s}: bad syntax for {} {what}", f.name))
    }
}

/// What went wrong parsing an integer.
enum IntError {
    Syntax,
    TooLarge,
}

/// Parses an integer into `n_bytes` bytes like OVS `parse_int_string`: `0x` hex of any
/// length whose significant digits fit, or a C `strtoull` number (decimal, `0` octal,
/// negative numbers wrap) that fits. Returns the value and the unparsed tail.
fn parse_int_prefix(s: &str, n_bytes: u16) -> Result<(u128, &str), IntError> {
    let bits = u32::from(n_bytes) * 8;
    if let Some(h) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        let end = h.find(|c: char| !c.is_ascii_hexdigit()).unwrap_or(h.len());
        let digits = h[..end].trim_start_matches('0');
        if digits.len() * 4 > bits as usize + 3 {
            return Err(IntError::TooLarge);
        }
        let v = if digits.is_empty() {
            0
        } else {
            u128::from_str_radix(digits, 16).map_err(|_| IntError::TooLarge)?
        };
        if bits < 128 && v >> bits != 0 {
            return Err(IntError::TooLarge);
        }
        return Ok((v, &h[end..]));
    }
    let t = s.trim_start();
    let (neg, t) = match t.as_bytes().first() {
        Some(b'-') => (true, &t[1..]),
        Some(b'+') => (false, &t[1..]),
        _ => (false, t),
    };
    let (radix, body) = if t.len() > 1 && t.starts_with('0') && t.as_bytes()[1].is_ascii_digit() {
        (8, &t[1..])
    } else {
        (10, t)
    };
    let end = body
        .find(|c: char| !c.is_digit(radix))
        .unwrap_or(body.len());
    if end == 0 {
        return Err(IntError::Syntax);
    }
    let v = u64::from_str_radix(&body[..end], radix).map_err(|_| IntError::TooLarge)?;
    let v = if neg { v.wrapping_neg() } else { v };
    let v = u128::from(v);
    if bits < 64 && v >> bits != 0 {
        return Err(IntError::TooLarge);
    }
    Ok((v, &body[end..]))
}

/// Parses a whole string as an integer of `n_bytes` bytes (OVS `parse_int_string` with
/// nothing left over). Used for subfield values too.
pub fn parse_int(s: &str, n_bytes: u16) -> Option<u128> {
    match parse_int_prefix(s, n_bytes) {
        Ok((v, "")) => Some(v),
        _ => None,
    }
}

fn parse_integer(f: &Field, s: &str) -> Result<(u128, u128), Error> {
    let (v, tail) = parse_int_prefix(s, f.n_bytes()).map_err(|e| match e {
        IntError::Syntax => int_error(f, s, "value", false),
        IntError::TooLarge => int_error(f, s, "value", true),
    })?;
    if tail.is_empty() {
        return Ok((v, f.full_mask()));
    }
    let Some(m) = tail.strip_prefix('/') else {
        return Err(int_error(f, s, "value", false));
    };
    match parse_int_prefix(m, f.n_bytes()) {
        Ok((mask, "")) => Ok((v, mask)),
        Ok(_) | Err(IntError::Syntax) => Err(int_error(f, s, "mask", false)),
        Err(IntError::TooLarge) => Err(int_error(f, s, "mask", true)),
    }
}

fn parse_ethernet(s: &str) -> Result<(u128, u128), Error> {
    let bad = || Error::Parse(format!("{s}: invalid Ethernet address"));
    match s.split_once('/') {
        None => Ok((u128::from(parse_mac(s).ok_or_else(bad)?), (1u128 << 48) - 1)),
        Some((v, m)) => Ok((
            u128::from(parse_mac(v).ok_or_else(bad)?),
            u128::from(parse_mac(m).ok_or_else(bad)?),
        )),
    }
}

fn parse_ipv4_masked(s: &str) -> Result<(u128, u128), Error> {
    let bad = || Error::Parse(format!("{s}: invalid IP address"));
    match s.split_once('/') {
        None => Ok((u128::from(parse_ipv4(s).ok_or_else(bad)?), 0xffff_ffff)),
        Some((v, m)) => {
            let ip = u128::from(parse_ipv4(v).ok_or_else(bad)?);
            if let Some(mask) = parse_ipv4(m) {
                return Ok((ip, u128::from(mask)));
            }
            let bits: i64 = m.trim().parse().map_err(|_| bad())?;
            if !(0..=32).contains(&bits) {
                return Err(Error::Parse(format!(
                    "{s}: IPv4 network prefix bits not between 0 and 32, inclusive"
                )));
            }
            Ok((
                ip,
                u128::from(ipv4_prefix_mask(u32::try_from(bits).unwrap_or(32))),
            ))
        }
    }
}

fn parse_ipv6_masked(s: &str) -> Result<(u128, u128), Error> {
    let bad = || Error::Parse(format!("{s}: invalid IPv6 address"));
    let (v, m) = match s.split_once('/') {
        None => (s, None),
        Some((v, m)) => (v, Some(m)),
    };
    let ip = u128::from(v.trim_start().parse::<Ipv6Addr>().map_err(|_| bad())?);
    let Some(m) = m else {
        return Ok((ip, u128::MAX));
    };
    if !m.is_empty() && m.bytes().all(|b| b.is_ascii_digit() || b == b'-') && !m.contains(':') {
        let bits: i64 = m.parse().map_err(|_| bad())?;
        if !(0..=128).contains(&bits) {
            return Err(Error::Parse(format!(
                "{s}: IPv6 network prefix bits not between 0 and 128, inclusive"
            )));
        }
        return Ok((ip, ipv6_prefix_mask(u32::try_from(bits).unwrap_or(128))));
    }
    let mask = m
        .parse::<Ipv6Addr>()
        .map_err(|_| Error::Parse(format!("{s}: Invalid IPv6 mask")))?;
    Ok((ip, u128::from(mask)))
}

/// Fragment handling names (OVS `all_frags`): name, mask, value over the two flag bits
/// (0x1 = is a fragment, 0x2 = is a later fragment). The first match wins when printing.
const FRAGS: [(&str, u8, u8); 7] = [
    ("no", 3, 0),
    ("first", 3, 1),
    ("later", 3, 3),
    ("no", 1, 0),
    ("yes", 1, 1),
    ("not_later", 2, 0),
    ("later", 2, 2),
];

fn parse_frag(s: &str) -> Result<(u128, u128), Error> {
    FRAGS
        .iter()
        .find(|(n, _, _)| n.eq_ignore_ascii_case(s))
        .map(|(_, m, v)| (u128::from(*v), u128::from(*m | 0xfc)))
        .ok_or_else(|| {
            Error::Parse(format!(
                "{s}: unknown fragment type (valid types are \"no\", \"yes\", \"first\", \
                 \"later\", \"not_later\""
            ))
        })
}

/// Prints a fragment match (`no`, `yes`, `first`, `later`, `not_later`).
pub fn format_frag(value: u128, mask: u128) -> &'static str {
    let m = u8::try_from(mask & 3).unwrap_or(0);
    let v = u8::try_from(value & mask & 3).unwrap_or(0);
    FRAGS
        .iter()
        .find(|(_, fm, fv)| *fm == m && *fv == v)
        .map(|(n, _, _)| *n)
        .unwrap_or("<error>")
}

/// TCP flag names by bit (OVS `packet_tcp_flag_to_string`).
pub fn tcp_flag_name(bit: u32) -> Option<&'static str> {
    Some(match bit {
        0x001 => "fin",
        0x002 => "syn",
        0x004 => "rst",
        0x008 => "psh",
        0x010 => "ack",
        0x020 => "urg",
        0x040 => "ece",
        0x080 => "cwr",
        0x100 => "ns",
        0x200 => "[200]",
        0x400 => "[400]",
        0x800 => "[800]",
        _ => return None,
    })
}

/// Connection-tracking state names by bit (OVS `ct_state_to_string`).
pub fn ct_state_name(bit: u32) -> Option<&'static str> {
    Some(match bit {
        0x01 => "new",
        0x02 => "est",
        0x04 => "rel",
        0x08 => "rpl",
        0x10 => "inv",
        0x20 => "trk",
        0x40 => "snat",
        0x80 => "dnat",
        _ => return None,
    })
}

/// Tunnel flag names by bit (OVS `flow_tun_flag_to_string`).
pub fn tun_flag_name(bit: u32) -> Option<&'static str> {
    Some(match bit {
        0x1 => "oam",
        0x2 => "df",
        0x4 => "csum",
        0x8 => "key",
        _ => return None,
    })
}

/// Parses flags as OVS `parse_flags` does: `VALUE/MASK` numbers, `+name-name` (a masked
/// match), or `name|name|NUMBER` (exact). `what` names the flag family in messages and
/// `allowed` the bits that may appear.
pub fn parse_flags(
    s: &str,
    name_of: fn(u32) -> Option<&'static str>,
    what: &str,
    allowed: u32,
) -> Result<(u128, u128), Error> {
    let unknown = || Error::Parse(format!("{s}: unknown {what} flag(s)"));
    if let Some((v, m)) = s.split_once('/') {
        let (v, m) = (parse_c_int(v), parse_c_int(m));
        if let (Some(v), Some(m)) = (v, m) {
            if v & !allowed != 0 || m & !allowed != 0 {
                return Err(unknown());
            }
            return Ok((u128::from(v), u128::from(m)));
        }
    }
    if s.starts_with('+') || s.starts_with('-') {
        let (mut flags, mut mask) = (0u32, 0u32);
        let mut rest = s;
        while !rest.is_empty() {
            let set = rest.starts_with('+');
            if !set && !rest.starts_with('-') {
                return Err(Error::Parse(format!(
                    "{rest}: {what} must be preceded by '+' (for SET) or '-' (NOT SET)"
                )));
            }
            rest = &rest[1..];
            let end = rest.find(['+', '-']).unwrap_or(rest.len());
            let word = &rest[..end];
            // OVS reports the text from the failing flag on.
            let unknown_here = || Error::Parse(format!("{rest}: unknown {what} flag(s)"));
            let bit = (0..32)
                .map(|i| 1u32 << i)
                .find(|b| name_of(*b) == Some(word))
                .ok_or_else(unknown_here)?;
            if mask & bit != 0 {
                return Err(Error::Parse(format!(
                    "{rest}: Each {what} flag can be specified only once"
                )));
            }
            if bit & allowed == 0 {
                return Err(unknown_here());
            }
            if set {
                flags |= bit;
            }
            mask |= bit;
            rest = &rest[end..];
        }
        return Ok((u128::from(flags), u128::from(mask)));
    }
    let mut flags = 0u32;
    for word in s.split('|') {
        if let Some(n) = parse_c_int(word) {
            if n & !allowed != 0 {
                return Err(unknown());
            }
            flags |= n;
            continue;
        }
        let bit = (0..32)
            .map(|i| 1u32 << i)
            .find(|b| name_of(*b) == Some(word))
            .ok_or_else(unknown)?;
        if bit & allowed == 0 {
            return Err(unknown());
        }
        flags |= bit;
    }
    Ok((u128::from(flags), u128::from(u32::MAX)))
}

/// A C `%i` integer: decimal, `0x` hex or `0` octal.
fn parse_c_int(s: &str) -> Option<u32> {
    let s = s.trim();
    if let Some(h) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        u32::from_str_radix(h, 16).ok()
    } else if s.len() > 1 && s.starts_with('0') {
        u32::from_str_radix(&s[1..], 8).ok()
    } else {
        s.parse().ok()
    }
}

/// Prints flags as OVS `format_flags_masked`: with a full mask, the set flags joined by `|`
/// (`0` if none); else `+set-clear` for each masked bit.
pub fn format_flags_masked(
    name_of: fn(u32) -> Option<&'static str>,
    flags: u32,
    mask: u32,
    max_mask: u32,
) -> String {
    if mask == max_mask {
        return format_flags(name_of, flags, '|');
    }
    if mask == 0 {
        return "0/0".to_string();
    }
    let mut out = String::new();
    let mut m = mask;
    while m != 0 {
        let bit = m & m.wrapping_neg();
        out.push(if flags & bit != 0 { '+' } else { '-' });
        out.push_str(name_of(bit).unwrap_or("[Unknown]"));
        m &= !bit;
    }
    out
}

/// Prints flags joined by `del` (OVS `format_flags`), unknown bits as one hex number last.
pub fn format_flags(name_of: fn(u32) -> Option<&'static str>, flags: u32, del: char) -> String {
    if flags == 0 {
        return "0".to_string();
    }
    let mut parts: Vec<String> = Vec::new();
    let mut bad = 0u32;
    let mut f = flags;
    while f != 0 {
        let bit = f & f.wrapping_neg();
        match name_of(bit) {
            Some(n) => parts.push(n.to_string()),
            None => bad |= bit,
        }
        f &= !bit;
    }
    if bad != 0 {
        parts.push(format!("{bad:#x}"));
    }
    parts.join(&del.to_string())
}

fn wildcards_not_allowed(s: &str) -> Error {
    Error::Parse(format!("{s}: wildcards not allowed here"))
}

/// Parses a value that must be exact (OVS `mf_parse_value`): a mask other than all ones is
/// an error (`10.0.0.0/8: wildcards not allowed here`).
pub fn parse_value(f: &Field, s: &str) -> Result<u128, Error> {
    let (v, m) = parse_value_mask(f, s)?;
    let full = match f.format {
        Format::Frag => 0xff,
        Format::TcpFlags | Format::TunnelFlags | Format::CtState => u128::from(u32::MAX),
        _ => f.full_mask(),
    };
    if m & full != full {
        return Err(wildcards_not_allowed(s));
    }
    Ok(v)
}

/// Parses `VALUE` or `VALUE/MASK` as OVS `mf_parse` does, and checks the mask (`5/1:
/// invalid mask for field nw_ttl`). Without a mask the mask is all ones.
///
/// The flag formats return a mask of `u32::MAX` for an exact match; compare masks with
/// [`Field::full_mask`] after masking.
pub fn parse_value_mask(f: &Field, s: &str) -> Result<(u128, u128), Error> {
    if s == "*" {
        return Ok((0, 0));
    }
    let (v, m) = match f.format {
        Format::Decimal | Format::Hex => parse_integer(f, s)?,
        Format::Ethernet => parse_ethernet(s)?,
        Format::Ipv4 => parse_ipv4_masked(s)?,
        Format::Ipv6 => parse_ipv6_masked(s)?,
        Format::OfpPort => {
            let p = parse_port(s).map_err(|_| {
                Error::Parse(format!("{s}: invalid or unknown port for {}", f.name))
            })?;
            (u128::from(p), f.full_mask())
        }
        Format::OfpPortOxm => {
            let p = parse_port(s).map_err(|_| {
                Error::Parse(format!("{s}: port value out of range for {}", f.name))
            })?;
            (u128::from(p), f.full_mask())
        }
        Format::Frag => parse_frag(s)?,
        Format::TcpFlags => parse_flags(s, tcp_flag_name, "TCP", 0x0fff)?,
        Format::TunnelFlags => parse_flags(s, tun_flag_name, "tunnel", 0x1)?,
        Format::CtState => parse_flags(s, ct_state_name, "ct_state", 0xff)?,
    };
    if !f.maskable {
        let full = f.full_mask();
        let mm = m & full;
        if mm != 0 && mm != full {
            return Err(Error::Parse(format!(
                "{s}: invalid mask for field {}",
                f.name
            )));
        }
    }
    let m = match f.format {
        Format::Frag => m & 0xff,
        Format::TcpFlags | Format::TunnelFlags => m & 0xffff,
        Format::CtState => m & 0xffff_ffff,
        _ => m,
    };
    Ok((v, m))
}

/// Prints a value without a mask (OVS `mf_format` with an exact mask).
pub fn format_value(f: &Field, v: u128) -> String {
    match f.format {
        #[allow(clippy::cast_possible_truncation)]
        Format::Ethernet => format_mac(v as u64),
        Format::Ipv4 => ipv4_text(v),
        Format::Ipv6 => Ipv6Addr::from(v).to_string(),
        #[allow(clippy::cast_possible_truncation)]
        Format::OfpPort | Format::OfpPortOxm => format_port(v as u16),
        Format::Hex => hex_bytes(v),
        Format::Decimal => v.to_string(),
        Format::Frag => format_frag(v, 3).to_string(),
        #[allow(clippy::cast_possible_truncation)]
        Format::TcpFlags => format_flags(tcp_flag_name, v as u32, '|'),
        #[allow(clippy::cast_possible_truncation)]
        Format::TunnelFlags => format_flags(tun_flag_name, v as u32 & 1, '|'),
        #[allow(clippy::cast_possible_truncation)]
        Format::CtState => format_flags(ct_state_name, v as u32, '|'),
    }
}

/// OVS `ds_put_hex`: `0x` and the hex digits without leading zeros (`0x0` for zero).
fn hex_bytes(v: u128) -> String {
    format!("{v:#x}")
}

/// Prints `VALUE` or `VALUE/MASK` as OVS `mf_format` (`ANY` for an all-zeros mask; a mask
/// of all ones is omitted; integers print the mask in hex, addresses as prefixes where they
/// can).
pub fn format_value_mask(f: &Field, v: u128, m: u128) -> String {
    if m == 0 {
        return "ANY".to_string();
    }
    let full = f.full_mask();
    let exact = match f.format {
        Format::TcpFlags | Format::TunnelFlags | Format::CtState | Format::Frag => false,
        _ => m & full == full,
    };
    if exact {
        return format_value(f, v);
    }
    match f.format {
        Format::Ethernet => format!("{}/{}", format_value(f, v), format_value(f, m)),
        Format::Ipv4 => match cidr_len(m, 32) {
            Some(32) => ipv4_text(v),
            Some(n) => format!("{}/{n}", ipv4_text(v)),
            None => format!("{}/{}", ipv4_text(v), ipv4_text(m)),
        },
        Format::Ipv6 => match cidr_len(m, 128) {
            Some(n) => format!("{}/{n}", Ipv6Addr::from(v)),
            None => format!("{}/{}", Ipv6Addr::from(v), Ipv6Addr::from(m)),
        },
        Format::Frag => format_frag(v, m).to_string(),
        #[allow(clippy::cast_possible_truncation)]
        Format::TcpFlags => format_flags_masked(tcp_flag_name, v as u32, m as u32 & 0xfff, 0xfff),
        #[allow(clippy::cast_possible_truncation)]
        Format::TunnelFlags => format_flags_masked(tun_flag_name, v as u32, m as u32 & 1, 1),
        #[allow(clippy::cast_possible_truncation)]
        Format::CtState => format_flags_masked(ct_state_name, v as u32, m as u32, 0xffff),
        Format::Decimal | Format::Hex | Format::OfpPort | Format::OfpPortOxm => {
            let prefix = if f.format == Format::Hex {
                hex_bytes(v)
            } else {
                v.to_string()
            };
            format!("{prefix}/{}", hex_bytes(m))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field(n: &str) -> &'static Field {
        Field::by_name(n).expect("field exists")
    }

    #[test]
    fn value_parse_addresses_and_ports() {
        let f = field("nw_src");
        assert_eq!(
            parse_value_mask(f, "192.168.0.0/24").unwrap(),
            (0xc0a8_0000, 0xffff_ff00)
        );
        assert_eq!(
            parse_value_mask(f, "192.0.168.0/255.0.255.0").unwrap(),
            (0xc000_a800, 0xff00_ff00)
        );
        let f = field("dl_src");
        assert_eq!(
            format_value(f, parse_value(f, "00:0A:E4:25:6B:B0").unwrap()),
            "00:0a:e4:25:6b:b0"
        );
        assert_eq!(parse_port("LOCAL").unwrap(), OFPP_LOCAL);
        assert_eq!(parse_port("local").unwrap(), OFPP_LOCAL);
        assert_eq!(format_port(OFPP_LOCAL), "LOCAL");
        assert_eq!(parse_port("4294967294").unwrap(), OFPP_LOCAL);
        assert!(parse_port("70000").is_err());
    }

    #[test]
    fn value_integer_width_follows_ovs_bytes() {
        let f = field("dl_vlan");
        assert_eq!(parse_value_mask(f, "9").unwrap(), (9, 0xffff));
        assert_eq!(
            parse_value_mask(f, "9/0x1").unwrap_err().to_string(),
            "9/0x1: invalid mask for field dl_vlan"
        );
        let f = field("nw_ttl");
        assert_eq!(
            parse_value_mask(f, "256").unwrap_err().to_string(),
            "256: value too large for 1-byte field nw_ttl"
        );
        assert_eq!(
            parse_value_mask(f, "x").unwrap_err().to_string(),
            "x: bad syntax for nw_ttl value"
        );
        assert_eq!(parse_value_mask(f, "010").unwrap().0, 8);
        let f = field("mpls_label");
        assert_eq!(
            parse_value_mask(f, "0xfffff").unwrap(),
            (0xfffff, 0xffff_ffff)
        );
        let f = field("tun_id");
        assert_eq!(
            parse_value_mask(f, "0x1234000056780000/0xffff0000ffff0000").unwrap(),
            (0x1234_0000_5678_0000, 0xffff_0000_ffff_0000)
        );
    }

    #[test]
    fn value_ipv6_prefix_and_mask() {
        let f = field("ipv6_src");
        let (v, m) = parse_value_mask(f, "2001:db8:3c4d:1:2:3:4:5/64").unwrap();
        assert_eq!(m, ipv6_prefix_mask(64));
        assert_eq!(format_value_mask(f, v & m, m), "2001:db8:3c4d:1::/64");
        let (_, m) = parse_value_mask(f, "0:0:0:0:0:0:0:1/::1").unwrap();
        assert_eq!(m, 1);
        assert!(parse_value_mask(f, "1::/129").is_err());
    }

    #[test]
    fn value_special_formats() {
        let f = field("tcp_flags");
        assert_eq!(parse_value_mask(f, "+syn-ack").unwrap(), (0x2, 0x12));
        assert_eq!(parse_value_mask(f, "0x002/0x012").unwrap(), (0x2, 0x12));
        assert_eq!(format_value_mask(f, 0x2, 0x12), "+syn-ack");
        assert_eq!(format_value_mask(f, 0x12, 0xfff), "syn|ack");
        let f = field("ct_state");
        assert_eq!(parse_value_mask(f, "+trk+est-new").unwrap(), (0x22, 0x23));
        assert_eq!(format_value_mask(f, 0x22, 0x23), "-new+est+trk");
        assert_eq!(
            parse_value_mask(f, "+trk+bogus").unwrap_err().to_string(),
            "bogus: unknown ct_state flag(s)"
        );
        let f = field("tcp_flags");
        assert_eq!(
            parse_value_mask(f, "+ack-ack").unwrap_err().to_string(),
            "ack: Each TCP flag can be specified only once"
        );
        let f = field("ip_frag");
        assert_eq!(parse_value_mask(f, "first").unwrap(), (1, 0xff));
        assert_eq!(parse_value_mask(f, "not_later").unwrap(), (0, 0xfe));
        assert_eq!(format_value_mask(f, 1, 1), "yes");
        let f = field("tun_flags");
        assert_eq!(parse_value_mask(f, "+oam").unwrap(), (1, 1));
        assert_eq!(parse_value_mask(f, "1").unwrap().0, 1);
    }

    #[test]
    fn value_exact_only_rejects_masks() {
        let f = field("nw_dst");
        assert_eq!(
            parse_value(f, "10.0.0.0/8").unwrap_err().to_string(),
            "10.0.0.0/8: wildcards not allowed here"
        );
        assert_eq!(parse_value(f, "10.0.0.1").unwrap(), 0x0a00_0001);
    }
}
