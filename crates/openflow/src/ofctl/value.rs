//! Field values in ovs-ofctl text: numbers, Ethernet/IPv4/IPv6 addresses, port names, and
//! the special formats (frag, TCP flags, ct_state, tunnel flags), with optional `/mask`.
//!
//! Values are exchanged as `u128` in the field's storage units (see [`crate::field`]).
//!
//! NOTE: first version (numbers, addresses, ports); the special formats and the exact
//! ovs-ofctl corner cases are completed with the match syntax.

use std::net::{Ipv4Addr, Ipv6Addr};

use crate::field::{Field, Format};
use crate::Error;

/// OpenFlow 1.0 reserved port numbers (OVS `OFPP_*`), with their ovs-ofctl names.
pub const PORT_NAMES: [(u16, &str); 8] = [
    (0xfff8, "IN_PORT"),
    (0xfff9, "TABLE"),
    (0xfffa, "NORMAL"),
    (0xfffb, "FLOOD"),
    (0xfffc, "ALL"),
    (0xfffd, "CONTROLLER"),
    (0xfffe, "LOCAL"),
    (0xffff, "NONE"),
];

/// `OFPP_LOCAL`.
pub const OFPP_LOCAL: u16 = 0xfffe;
/// `OFPP_IN_PORT`.
pub const OFPP_IN_PORT: u16 = 0xfff8;
/// `OFPP_CONTROLLER`.
pub const OFPP_CONTROLLER: u16 = 0xfffd;
/// `OFPP_NONE` / `OFPP_ANY`.
pub const OFPP_NONE: u16 = 0xffff;

/// Parses an unsigned integer in decimal or `0x` hexadecimal.
pub fn parse_uint(s: &str) -> Option<u128> {
    let s = s.trim();
    if let Some(h) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        u128::from_str_radix(h, 16).ok()
    } else {
        s.parse::<u128>().ok()
    }
}

/// Parses an OpenFlow 1.0 port: a number or a reserved name (case-insensitive, as OVS).
pub fn parse_port(s: &str) -> Result<u16, Error> {
    let t = s.trim();
    for (n, name) in PORT_NAMES {
        if t.eq_ignore_ascii_case(name) || (name == "NONE" && t.eq_ignore_ascii_case("ANY")) {
            return Ok(n);
        }
    }
    match parse_uint(t) {
        Some(v) => u16::try_from(v).map_err(|_| Error::Parse(format!("{t}: port is out of range"))),
        None => Err(Error::Parse(format!("{t}: invalid or unknown port"))),
    }
}

/// Prints a port number as ovs-ofctl does (reserved ports by name).
pub fn format_port(p: u16) -> String {
    PORT_NAMES
        .iter()
        .find(|(n, _)| *n == p)
        .map(|(_, name)| (*name).to_string())
        .unwrap_or_else(|| p.to_string())
}

/// Parses an Ethernet address `xx:xx:xx:xx:xx:xx` into its key form.
pub fn parse_mac(s: &str) -> Option<u64> {
    let parts: Vec<&str> = s.trim().split(':').collect();
    if parts.len() != 6 {
        return None;
    }
    let mut v = 0u64;
    for p in parts {
        if p.is_empty() || p.len() > 2 {
            return None;
        }
        v = (v << 8) | u64::from(u8::from_str_radix(p, 16).ok()?);
    }
    Some(v)
}

/// Prints the key form of an Ethernet address.
pub fn format_mac(v: u64) -> String {
    let b = packet::key::mac_to_bytes(v);
    format!(
        "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
        b[0], b[1], b[2], b[3], b[4], b[5]
    )
}

fn bad_value(f: &Field, s: &str) -> Error {
    Error::Parse(format!("{s}: invalid value for field {}", f.name))
}

/// Parses a value without a mask.
pub fn parse_value(f: &Field, s: &str) -> Result<u128, Error> {
    let s = s.trim();
    let v = match f.format {
        Format::Ethernet => parse_mac(s).map(u128::from),
        Format::Ipv4 => s.parse::<Ipv4Addr>().ok().map(|a| u128::from(u32::from(a))),
        Format::Ipv6 => s.parse::<Ipv6Addr>().ok().map(u128::from),
        Format::OfpPort | Format::OfpPortOxm => return parse_port(s).map(u128::from),
        _ => parse_uint(s),
    }
    .ok_or_else(|| bad_value(f, s))?;
    if v > f.max_value() {
        return Err(Error::Parse(format!(
            "{s}: value too large for field {}",
            f.name
        )));
    }
    Ok(v)
}

/// Parses `VALUE` or `VALUE/MASK` (IPv4/IPv6 also `/PREFIXLEN`). Without a mask the mask is
/// all ones over the field.
pub fn parse_value_mask(f: &Field, s: &str) -> Result<(u128, u128), Error> {
    let s = s.trim();
    match s.split_once('/') {
        None => Ok((parse_value(f, s)?, f.max_value())),
        Some((v, m)) => {
            let value = parse_value(f, v)?;
            let mask = match f.format {
                Format::Ipv4 | Format::Ipv6 if !m.contains('.') && !m.contains(':') => {
                    let bits: u32 = m
                        .parse()
                        .map_err(|_| Error::Parse(format!("{s}: invalid prefix length")))?;
                    let width = u32::from(f.key.width);
                    if bits > width {
                        return Err(Error::Parse(format!("{s}: prefix length too long")));
                    }
                    if bits == 0 {
                        0
                    } else {
                        (f.max_value() >> (width - bits)) << (width - bits)
                    }
                }
                _ => parse_value(f, m)?,
            };
            Ok((value & mask, mask))
        }
    }
}

/// Prints a value without a mask.
pub fn format_value(f: &Field, v: u128) -> String {
    match f.format {
        #[allow(clippy::cast_possible_truncation)]
        Format::Ethernet => format_mac(v as u64),
        #[allow(clippy::cast_possible_truncation)]
        Format::Ipv4 => Ipv4Addr::from(v as u32).to_string(),
        Format::Ipv6 => Ipv6Addr::from(v).to_string(),
        #[allow(clippy::cast_possible_truncation)]
        Format::OfpPort | Format::OfpPortOxm => format_port(v as u16),
        Format::Hex => format!("{v:#x}"),
        _ => v.to_string(),
    }
}

/// Prints `VALUE` or `VALUE/MASK` (a mask of all ones is omitted).
pub fn format_value_mask(f: &Field, v: u128, m: u128) -> String {
    if m == f.max_value() {
        format_value(f, v)
    } else {
        match f.format {
            Format::Decimal => format!("{v:#x}/{m:#x}"),
            _ => format!("{}/{}", format_value(f, v), format_value(f, m)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn value_parse_addresses_and_ports() {
        let f = Field::by_name("nw_src").unwrap();
        assert_eq!(
            parse_value_mask(f, "192.168.0.0/24").unwrap(),
            (0xc0a8_0000, 0xffff_ff00)
        );
        let f = Field::by_name("dl_src").unwrap();
        assert_eq!(
            format_value(f, parse_value(f, "00:0A:E4:25:6B:B0").unwrap()),
            "00:0a:e4:25:6b:b0"
        );
        assert_eq!(parse_port("LOCAL").unwrap(), OFPP_LOCAL);
        assert_eq!(format_port(OFPP_LOCAL), "LOCAL");
    }
}
