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

    /// Parses `NAME`, `NAME[]`, `NAME[BIT]` or `NAME[START..END]` (inclusive END).
    pub fn parse(s: &str) -> Result<Subfield, Error> {
        let s = s.trim();
        let (name, range) = match s.find('[') {
            Some(i) => {
                let rest = &s[i + 1..];
                let close = rest
                    .find(']')
                    .ok_or_else(|| Error::Parse(format!("{s}: missing `]' in subfield")))?;
                if !rest[close + 1..].trim().is_empty() {
                    return Err(Error::Parse(format!(
                        "{s}: trailing garbage after subfield"
                    )));
                }
                (&s[..i], Some(&rest[..close]))
            }
            None => (s, None),
        };
        let field = Field::by_name(name)
            .ok_or_else(|| Error::Parse(format!("{name}: unknown field `{name}'")))?;
        let (ofs, n_bits) = match range {
            None => (0, field.n_bits),
            Some("") => (0, field.n_bits),
            Some(r) => {
                let num = |t: &str| {
                    t.trim()
                        .parse::<u16>()
                        .map_err(|_| Error::Parse(format!("{s}: syntax error parsing subfield")))
                };
                match r.split_once("..") {
                    Some((a, b)) => {
                        let (a, b) = (num(a)?, num(b)?);
                        if b < a {
                            return Err(Error::Parse(format!(
                                "{s}: starting bit {a} is after ending bit {b}"
                            )));
                        }
                        let n = u32::from(b) - u32::from(a) + 1;
                        (a, u16::try_from(n).unwrap_or(u16::MAX))
                    }
                    None => (num(r)?, 1),
                }
            }
        };
        if u32::from(ofs) + u32::from(n_bits) > u32::from(field.n_bits) {
            return Err(Error::Parse(format!(
                "{s}: bits {}..{} are outside the {}-bit field {}",
                ofs,
                u32::from(ofs) + u32::from(n_bits) - 1,
                field.n_bits,
                field.name
            )));
        }
        Ok(Subfield { field, ofs, n_bits })
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
        assert!(Subfield::parse("xxreg0[0..127]").is_ok());
    }
}
