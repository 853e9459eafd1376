//! Subfields: a bit range of a field, written `NXM_NX_REG0[0..3]`, `reg0[5]`, `reg0[]` or
//! just `reg0` (OVS `struct mf_subfield`, `mf_parse_subfield`).

use crate::field::Field;
use crate::Error;

/// `n_bits` bits of `field` starting at bit `ofs` (bit 0 is the least significant).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Subfield {
    /// The field.
    pub field: &'static Field,
    /// First bit.
    pub ofs: u16,
    /// Number of bits (at least 1).
    pub n_bits: u16,
}

impl Subfield {
    /// The whole field.
    pub fn whole(field: &'static Field) -> Subfield {
        Subfield {
            field,
            ofs: 0,
            n_bits: field.n_bits,
        }
    }

    /// True if this covers the whole field.
    pub fn is_whole(&self) -> bool {
        self.ofs == 0 && self.n_bits == self.field.n_bits
    }

    /// Parses `NAME`, `NAME[]`, `NAME[BIT]` or `NAME[START..END]` (inclusive END), with
    /// OVS `mf_parse_subfield`'s rules and messages (`reg0[40]: starting bit 40 is not
    /// valid because field is only 32 bits wide`).
    pub fn parse(s: &str) -> Result<Subfield, Error> {
        let (sf, rest) = Self::parse_prefix(s)?;
        if !rest.is_empty() {
            return Err(Error::Parse(
                "unexpected input following field syntax".to_string(),
            ));
        }
        Ok(sf)
    }

    /// Parses a subfield at the start of `s` (OVS `mf_parse_subfield__`) and returns it
    /// with the rest of the text.
    pub fn parse_prefix(s: &str) -> Result<(Subfield, &str), Error> {
        let name_len = s.find(['[', '-']).unwrap_or(s.len());
        let name = &s[..name_len];
        let field = Field::by_name(name)
            .ok_or_else(|| Error::Parse(format!("{s}: unknown field `{name}'")))?;
        let mut rest = &s[name_len..];
        let n_bits = i64::from(field.n_bits);
        let (mut start, mut end) = (0i64, n_bits - 1);
        if rest.starts_with('[') {
            let close = rest.find(']');
            let inner = close.map(|c| &rest[1..c]);
            let num = |t: &str| t.trim_start().parse::<i64>().ok();
            let parsed = match inner {
                Some("") => Some((start, end)),
                Some(t) => match t.split_once("..") {
                    Some((a, b)) => num(a).zip(num(b)),
                    None => num(t).map(|a| (a, a)),
                },
                None => None,
            };
            let Some((a, b)) = parsed else {
                return Err(Error::Parse(format!(
                    "{s}: syntax error expecting [] or [<bit>] or [<start>..<end>]"
                )));
            };
            (start, end) = (a, b);
            rest = &rest[close.map_or(rest.len(), |c| c + 1)..];
        }
        if start > end {
            return Err(Error::Parse(format!(
                "{s}: starting bit {start} is after ending bit {end}"
            )));
        }
        if start < 0 || start >= n_bits {
            return Err(Error::Parse(format!(
                "{s}: starting bit {start} is not valid because field is only {n_bits} bits \
                 wide"
            )));
        }
        if end >= n_bits {
            return Err(Error::Parse(format!(
                "{s}: ending bit {end} is not valid because field is only {n_bits} bits wide"
            )));
        }
        let ofs = u16::try_from(start).unwrap_or(0);
        let n = u16::try_from(end - start + 1).unwrap_or(1);
        Ok((
            Subfield {
                field,
                ofs,
                n_bits: n,
            },
            rest,
        ))
    }

    /// OVS's printed form: `NXM_NX_REG0[]` for a whole field, else `NXM_NX_REG0[0..3]` (a
    /// single bit prints as `[5]`).
    pub fn format(&self) -> String {
        let name = self.field.subfield_name();
        if self.is_whole() {
            format!("{name}[]")
        } else if self.n_bits == 1 {
            format!("{name}[{}]", self.ofs)
        } else {
            format!("{name}[{}..{}]", self.ofs, self.ofs + self.n_bits - 1)
        }
    }
}

impl std::fmt::Display for Subfield {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.format())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subfield_parse_forms() {
        let s = Subfield::parse("reg0[0..3]").unwrap();
        assert_eq!((s.ofs, s.n_bits), (0, 4));
        assert_eq!(s.format(), "NXM_NX_REG0[0..3]");
        assert_eq!(
            Subfield::parse("NXM_NX_REG1").unwrap().format(),
            "NXM_NX_REG1[]"
        );
        assert_eq!(Subfield::parse("tp_src[5]").unwrap().n_bits, 1);
    }

    #[test]
    fn subfield_out_of_range_is_error() {
        assert!(Subfield::parse("reg0[0..32]").is_err());
        assert!(Subfield::parse("reg0[5..3]").is_err());
        assert!(Subfield::parse("nosuch[]").is_err());
    }

    #[test]
    fn regression_subfield_widest_range_does_not_overflow() {
        assert!(Subfield::parse("reg0[0..65535]").is_err());
        assert_eq!(
            Subfield::parse("reg0[40]").unwrap_err().to_string(),
            "reg0[40]: starting bit 40 is not valid because field is only 32 bits wide"
        );
        assert_eq!(
            Subfield::parse("reg0[5..2]").unwrap_err().to_string(),
            "reg0[5..2]: starting bit 5 is after ending bit 2"
        );
        assert_eq!(
            Subfield::parse("reg0[x]").unwrap_err().to_string(),
            "reg0[x]: syntax error expecting [] or [<bit>] or [<start>..<end>]"
        );
        assert!(Subfield::parse("xxreg0[0..127]").is_ok());
    }
}
