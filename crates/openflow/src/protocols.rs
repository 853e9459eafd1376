//! Sets of OpenFlow protocol variants (OVS `enum ofputil_protocol`): which protocols can
//! express a flow ("usable protocols"), which ones ovs-ofctl's options allow, and which one
//! it chooses (the lowest bit of both). Re-exported as [`crate::field::Protocols`].
//!
//! # Example
//! ```
//! use openflow::field::Protocols;
//! let usable = Protocols::NXM_OXM_OF11;
//! assert_eq!(usable.to_ofctl_string(), "NXM,OXM,OpenFlow11");
//! assert_eq!(usable.and(Protocols::OF10_ANY).preferred().name(), Some("NXM-table_id"));
//! ```

/// A set of OpenFlow protocol variants: OVS's `enum ofputil_protocol`, bit for bit.
///
/// OpenFlow 1.0 comes in four variants (standard match or Nicira extended match, each with
/// or without the `flow_mod_table_id` extension); OpenFlow 1.1 has its standard match;
/// OpenFlow 1.2 to 1.5 use OXM. The named unions (`OF10`, `NXM`, `OXM`, `ANY`...) are the
/// abbreviations ovs-ofctl prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Protocols(pub u16);

impl Protocols {
    /// No protocol can express it.
    pub const NONE: Protocols = Protocols(0);
    /// OpenFlow 1.0 standard match, no table id (`OpenFlow10-table_id`).
    pub const OF10_STD: Protocols = Protocols(1 << 0);
    /// OpenFlow 1.0 standard match with table id (`OpenFlow10+table_id`).
    pub const OF10_STD_TID: Protocols = Protocols(1 << 1);
    /// OpenFlow 1.0 with NXM, no table id (`NXM-table_id`).
    pub const OF10_NXM: Protocols = Protocols(1 << 2);
    /// OpenFlow 1.0 with NXM and table id (`NXM+table_id`).
    pub const OF10_NXM_TID: Protocols = Protocols(1 << 3);
    /// OpenFlow 1.1 standard match (`OpenFlow11`).
    pub const OF11: Protocols = Protocols(1 << 4);
    /// OpenFlow 1.2 (`OXM-OpenFlow12`).
    pub const OF12_OXM: Protocols = Protocols(1 << 5);
    /// OpenFlow 1.3 (`OXM-OpenFlow13`).
    pub const OF13_OXM: Protocols = Protocols(1 << 6);
    /// OpenFlow 1.4 (`OXM-OpenFlow14`).
    pub const OF14_OXM: Protocols = Protocols(1 << 7);
    /// OpenFlow 1.5 (`OXM-OpenFlow15`).
    pub const OF15_OXM: Protocols = Protocols(1 << 8);
    /// OpenFlow 1.0 with its standard match, either table-id variant (`OpenFlow10`).
    pub const OF10: Protocols = Protocols(0b11);
    /// OpenFlow 1.0 with Nicira extended match, either table-id variant (`NXM`).
    pub const NXM: Protocols = Protocols(0b1100);
    /// Every OpenFlow 1.0 variant.
    pub const OF10_ANY: Protocols = Protocols(0b1111);
    /// OpenFlow 1.2 and later, OXM match (`OXM`).
    pub const OXM: Protocols = Protocols(0b1_1110_0000);
    /// Every protocol (`any`).
    pub const ANY: Protocols = Protocols(0b1_1111_1111);
    /// NXM and OXM (OVS `OFPUTIL_P_NXM_OXM_ANY`).
    pub const NXM_OXM: Protocols = Protocols(Self::NXM.0 | Self::OXM.0);
    /// NXM, OXM and OpenFlow 1.1 (OVS `OFPUTIL_P_NXM_OF11_UP`).
    pub const NXM_OXM_OF11: Protocols = Protocols(Self::NXM.0 | Self::OF11.0 | Self::OXM.0);
    /// OpenFlow 1.1 and later (OVS `OFPUTIL_P_OF11_UP`).
    pub const OF11_UP: Protocols = Protocols(Self::OF11.0 | Self::OXM.0);
    /// OpenFlow 1.2 and later.
    pub const OF12_UP: Protocols = Self::OXM;
    /// OpenFlow 1.3 and later.
    pub const OF13_UP: Protocols = Protocols(0b1_1100_0000);
    /// OpenFlow 1.4 and later.
    pub const OF14_UP: Protocols = Protocols(0b1_1000_0000);
    /// OpenFlow 1.5.
    pub const OF15_UP: Protocols = Self::OF15_OXM;
    /// The variants that can name a flow table (OVS `OFPUTIL_P_TID`).
    pub const TID: Protocols =
        Protocols(Self::OF10_STD_TID.0 | Self::OF10_NXM_TID.0 | Self::OF11_UP.0);

    /// Intersection.
    pub const fn and(self, o: Protocols) -> Protocols {
        Protocols(self.0 & o.0)
    }

    /// Union.
    pub const fn or(self, o: Protocols) -> Protocols {
        Protocols(self.0 | o.0)
    }

    /// True if the set contains every protocol of `o`.
    pub const fn contains(self, o: Protocols) -> bool {
        self.0 & o.0 == o.0
    }

    /// True if the sets share a protocol.
    pub const fn intersects(self, o: Protocols) -> bool {
        self.0 & o.0 != 0
    }

    /// True if empty.
    pub const fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// The single protocol ovs-ofctl prefers among `self`: the lowest bit (OpenFlow 1.0
    /// standard first, then NXM, OpenFlow 1.1, OXM 1.2 ... 1.5). `NONE` if empty.
    pub const fn preferred(self) -> Protocols {
        Protocols(self.0 & self.0.wrapping_neg())
    }

    /// The OpenFlow version a single protocol speaks (the lowest one for a set).
    pub fn version(self) -> crate::action::OfVersion {
        use crate::action::OfVersion;
        let p = self.preferred();
        if p.intersects(Protocols::OF10_ANY) || p.is_empty() {
            OfVersion::Of10
        } else if p == Protocols::OF11 {
            OfVersion::Of11
        } else if p == Protocols::OF12_OXM {
            OfVersion::Of12
        } else if p == Protocols::OF13_OXM {
            OfVersion::Of13
        } else if p == Protocols::OF14_OXM {
            OfVersion::Of14
        } else {
            OfVersion::Of15
        }
    }

    /// The protocols that speak OpenFlow `version` (OVS `ofputil_protocols_from_ofp_version`).
    pub fn from_version(version: crate::action::OfVersion) -> Protocols {
        use crate::action::OfVersion;
        match version {
            OfVersion::Of10 => Protocols::OF10_ANY,
            OfVersion::Of11 => Protocols::OF11,
            OfVersion::Of12 => Protocols::OF12_OXM,
            OfVersion::Of13 => Protocols::OF13_OXM,
            OfVersion::Of14 => Protocols::OF14_OXM,
            OfVersion::Of15 => Protocols::OF15_OXM,
        }
    }

    /// The name of a single protocol (`OpenFlow10-table_id`, `NXM+table_id`,
    /// `OXM-OpenFlow13`...), or of an abbreviation; `None` for other sets (OVS
    /// `ofputil_protocol_to_string`).
    pub fn name(self) -> Option<&'static str> {
        SINGLE_NAMES
            .iter()
            .chain(ABBREVIATIONS.iter())
            .find(|(p, _)| *p == self)
            .map(|(_, n)| *n)
    }

    /// Parses a comma-separated list of protocol names and abbreviations, case-insensitively
    /// (OVS `ofputil_protocols_from_string`, what `-F` takes).
    pub fn from_ofctl_string(s: &str) -> Option<Protocols> {
        let mut out = Protocols::NONE;
        for part in s.split(',').filter(|p| !p.is_empty()) {
            let p = SINGLE_NAMES
                .iter()
                .chain(ABBREVIATIONS.iter())
                .find(|(_, n)| n.eq_ignore_ascii_case(part))?;
            out = out.or(p.0);
        }
        (!out.is_empty()).then_some(out)
    }

    /// ovs-ofctl's spelling: `none`, or abbreviations (`any`, `OpenFlow10`, `NXM`, `OXM`)
    /// first and then single protocols, comma-separated (`ofputil_protocols_to_string`).
    pub fn to_ofctl_string(self) -> String {
        if self.is_empty() {
            return "none".to_string();
        }
        let mut rest = self.and(Protocols::ANY);
        let mut parts = Vec::new();
        while !rest.is_empty() {
            if let Some((p, n)) = ABBREVIATIONS.iter().find(|(p, _)| rest.contains(*p)) {
                parts.push(*n);
                rest = Protocols(rest.0 & !p.0);
                continue;
            }
            let bit = rest.preferred();
            parts.push(bit.name().unwrap_or("?"));
            rest = Protocols(rest.0 & !bit.0);
        }
        parts.join(",")
    }
}

const SINGLE_NAMES: [(Protocols, &str); 9] = [
    (Protocols::OF10_NXM, "NXM-table_id"),
    (Protocols::OF10_NXM_TID, "NXM+table_id"),
    (Protocols::OF10_STD, "OpenFlow10-table_id"),
    (Protocols::OF10_STD_TID, "OpenFlow10+table_id"),
    (Protocols::OF11, "OpenFlow11"),
    (Protocols::OF12_OXM, "OXM-OpenFlow12"),
    (Protocols::OF13_OXM, "OXM-OpenFlow13"),
    (Protocols::OF14_OXM, "OXM-OpenFlow14"),
    (Protocols::OF15_OXM, "OXM-OpenFlow15"),
];

const ABBREVIATIONS: [(Protocols, &str); 4] = [
    (Protocols::ANY, "any"),
    (Protocols::OF10, "OpenFlow10"),
    (Protocols::NXM, "NXM"),
    (Protocols::OXM, "OXM"),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn protocols_print_like_ofctl() {
        assert_eq!(Protocols::ANY.to_ofctl_string(), "any");
        assert_eq!(Protocols::NXM_OXM.to_ofctl_string(), "NXM,OXM");
        assert_eq!(
            Protocols::NXM_OXM_OF11.to_ofctl_string(),
            "NXM,OXM,OpenFlow11"
        );
    }

    #[test]
    fn protocols_parse_names_and_abbreviations() {
        assert_eq!(Protocols::from_ofctl_string("nxm"), Some(Protocols::NXM));
        assert_eq!(
            Protocols::from_ofctl_string("OpenFlow10,OXM-OpenFlow13"),
            Some(Protocols::OF10.or(Protocols::OF13_OXM))
        );
        assert_eq!(Protocols::from_ofctl_string("bogus"), None);
        assert_eq!(
            Protocols::TID.to_ofctl_string(),
            "OXM,OpenFlow10+table_id,NXM+table_id,OpenFlow11"
        );
        assert_eq!(Protocols::NONE.to_ofctl_string(), "none");
    }
}
