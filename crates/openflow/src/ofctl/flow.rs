//! Parsing ovs-ofctl flow text (OVS `parse_ofp_str`): `key=value` or `key:value` pairs
//! separated by commas or white space, then `actions=...`.
//!
//! Besides the match, the parser computes the flow's *usable protocols* as ovs-ofctl does:
//! each field narrows the set by whether its mask is exact, CIDR or arbitrary (the
//! registry's three sets), some keywords narrow it (`table` needs a table-id capable
//! protocol, `reset_counts` OpenFlow 1.2+, `no_packet_counts` 1.3+, a cookie mask NXM or
//! 1.1+, `out_group` 1.1+), matching L3/L4 fields of IPv6 needs NXM or OXM, and the
//! actions narrow it last. An empty set is `actions are invalid with specified match
//! (OFPBAC_MATCH_INCONSISTENT)`. ovs-ofctl then picks the first usable protocol among the
//! ones its options allow, in the order OpenFlow 1.0, NXM, OpenFlow 1.1, 1.2, ... 1.5.
//!
//! # Prerequisites and what the protocol carries
//!
//! OVS does not check prerequisites while parsing. Its encoders write only what the chosen
//! protocol carries and what the match's protocol allows (`nx_put_raw`, the OpenFlow 1.0
//! and 1.1 match converters): `ip,tp_src=80` goes out as `ip`, IPv6 addresses only with
//! `ipv6`, the OpenFlow 1.0/1.1 VLAN match as an exact VID and/or priority. [`parse_flow`]
//! applies the same rules for the chosen protocol, so the flow it returns is what an OVS
//! switch would install and prints as ovs-ofctl prints it (checked against ovs-ofctl 3.1
//! by `tests/match_differential.rs`). With [`ParseOptions::strict_prerequisites`] such a
//! match is rejected instead ([`Error::Prerequisite`], OVS's `OFPBMC_BAD_PREREQ` for a raw
//! NXM/OXM flow_mod).

use packet::key::fields;

use crate::action::OfVersion;
use crate::field::{Field, Format, Protocols};
use crate::flow::{FlowEntry, FlowFlags, OFPG_ANY};
use crate::flow_match::{
    Match, ETH_TYPE_ARP, ETH_TYPE_IP, ETH_TYPE_IPV6, ETH_TYPE_MPLS, ETH_TYPE_MPLS_MCAST,
    ETH_TYPE_RARP,
};
use crate::ofctl::actions::{parse_actions, ActionContext};
use crate::ofctl::value::{parse_int, parse_port, parse_value_mask};
use crate::subfield::Subfield;
use crate::Error;

/// What the flow text is for: ovs-ofctl accepts different keywords per command.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum FlowCommand {
    /// `add-flow`: actions required; timeouts, priority, flags, importance allowed.
    #[default]
    Add,
    /// `mod-flows`: like add, without importance.
    Modify,
    /// `mod-flows --strict`.
    ModifyStrict,
    /// `del-flows`: no actions; `out_port`/`out_group` allowed.
    Delete,
    /// `del-flows --strict`: also a priority.
    DeleteStrict,
    /// `dump-flows`: a match with `out_port`/`out_group`.
    Query,
}

/// Options that change how flow text is read: the protocols ovs-ofctl's command line
/// allows, the command, and port names.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ParseOptions {
    /// Protocols the command line allows (`-O`, `--protocols`, `-F`).
    pub allowed: Protocols,
    /// The command the text is for.
    pub command: FlowCommand,
    /// Port names accepted wherever a port number is (`in_port=p1`, `output:p1`), as OVS's
    /// port map. Reserved names (`LOCAL`, ...) are always accepted.
    pub port_names: Vec<(String, u16)>,
    /// Reject a match whose fields lack their prerequisites (`tp_src` without `tcp`...)
    /// with [`Error::Prerequisite`], as a switch rejects such an NXM/OXM flow_mod. Off by
    /// default: ovs-ofctl then drops those fields silently, because its encoders only
    /// write fields whose prerequisites hold.
    pub strict_prerequisites: bool,
}

impl Default for ParseOptions {
    /// Every protocol allowed, command `add`.
    fn default() -> Self {
        ParseOptions {
            allowed: Protocols::ANY,
            command: FlowCommand::Add,
            port_names: Vec::new(),
            strict_prerequisites: false,
        }
    }
}

impl ParseOptions {
    /// Reads ovs-ofctl options: `-O VERSIONS` / `--protocols VERSIONS` (`OpenFlow10` ...
    /// `OpenFlow15`, comma-separated) and `-F FORMATS` / `--flow-format FORMATS` (`nxm`,
    /// `OpenFlow10`, `OXM-OpenFlow13`...). As in ovs-ofctl, the versions default to
    /// OpenFlow 1.0 alone and the allowed protocols are the formats those versions speak.
    pub fn from_ofctl_options(s: &str) -> Result<ParseOptions, Error> {
        let mut versions: Vec<OfVersion> = Vec::new();
        let mut formats = Protocols::ANY;
        let words: Vec<&str> = s.split_whitespace().collect();
        let mut i = 0;
        while i < words.len() {
            let w = words[i];
            let (opt, inline) = match w.split_once('=') {
                Some((o, v)) if o.starts_with("--") => (o, Some(v)),
                _ => (w, None),
            };
            let (opt, inline) = match (opt, inline) {
                (o, None) if o.starts_with("-O") && o.len() > 2 => ("-O", Some(&o[2..])),
                (o, None) if o.starts_with("-F") && o.len() > 2 => ("-F", Some(&o[2..])),
                other => other,
            };
            let mut arg = || -> Result<&str, Error> {
                if let Some(v) = inline {
                    return Ok(v);
                }
                i += 1;
                words
                    .get(i)
                    .copied()
                    .ok_or_else(|| Error::Parse(format!("option '{opt}' requires an argument")))
            };
            match opt {
                "-O" | "--protocols" => {
                    for v in arg()?.split(',').filter(|v| !v.is_empty()) {
                        versions.push(parse_version(v)?);
                    }
                }
                "-F" | "--flow-format" => {
                    let v = arg()?;
                    formats = Protocols::from_ofctl_string(v)
                        .ok_or_else(|| Error::Parse(format!("{v}: unknown flow protocol")))?;
                }
                _ => return Err(Error::Parse(format!("unknown option '{w}'"))),
            }
            i += 1;
        }
        if versions.is_empty() {
            versions.push(OfVersion::Of10);
        }
        let by_version = versions
            .iter()
            .fold(Protocols::NONE, |a, v| a.or(Protocols::from_version(*v)));
        let allowed = formats.and(by_version);
        if allowed.is_empty() {
            versions.sort();
            versions.dedup();
            let names: Vec<String> = versions
                .iter()
                .map(|v| {
                    let minor = match v {
                        OfVersion::Of10 => 0,
                        OfVersion::Of11 => 1,
                        OfVersion::Of12 => 2,
                        OfVersion::Of13 => 3,
                        OfVersion::Of14 => 4,
                        OfVersion::Of15 => 5,
                    };
                    format!("OpenFlow1{minor}")
                })
                .collect();
            return Err(Error::Parse(format!(
                "None of the enabled OpenFlow versions ({}) supports any of the enabled flow \
                 formats ({}).  (Use -O to enable additional OpenFlow versions or -F to enable \
                 additional flow formats.)",
                names.join(", "),
                formats.to_ofctl_string()
            )));
        }
        Ok(ParseOptions {
            allowed,
            command: FlowCommand::Add,
            port_names: Vec::new(),
            strict_prerequisites: false,
        })
    }
}

fn parse_version(v: &str) -> Result<OfVersion, Error> {
    Ok(match v.to_ascii_lowercase().as_str() {
        "openflow10" => OfVersion::Of10,
        "openflow11" => OfVersion::Of11,
        "openflow12" => OfVersion::Of12,
        "openflow13" => OfVersion::Of13,
        "openflow14" => OfVersion::Of14,
        "openflow15" => OfVersion::Of15,
        _ => return Err(Error::Parse(format!("Unknown OpenFlow version: \"{v}\""))),
    })
}

/// The result of parsing a flow.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParsedFlow {
    /// The flow entry.
    pub flow: FlowEntry,
    /// The protocols that can express it (what `ovs-ofctl parse-flow` reports).
    pub usable: Protocols,
    /// The protocol ovs-ofctl would send it with: the first usable one the options allow.
    pub chosen: Protocols,
    /// The command the flow was parsed for.
    pub command: FlowCommand,
}

impl ParsedFlow {
    /// The OpenFlow version of the chosen protocol (what decides how actions print).
    pub fn version(&self) -> OfVersion {
        self.chosen.version()
    }

    /// The flow as `ovs-ofctl parse-flow` prints it (after `OFPT_FLOW_MOD: ADD `).
    pub fn to_ofctl_string(&self) -> String {
        self.flow.to_ofctl_string(self.version())
    }
}

/// Splits ovs-ofctl `key=value` text into pairs (OVS `ofputil_parse_key_value`): pairs are
/// separated by commas or white space; a key ends at `=`, `:` or `(`; a value after `=` or
/// `:` ends at a comma or white space outside parentheses, a value after `(` at the
/// matching `)`. A key without a value gets an empty one.
pub fn split_key_values(s: &str) -> Vec<(&str, &str)> {
    let b = s.as_bytes();
    let is_sep = |c: u8| matches!(c, b',' | b' ' | b'\t' | b'\r' | b'\n');
    let mut out = Vec::new();
    let mut i = 0;
    loop {
        while i < b.len() && is_sep(b[i]) {
            i += 1;
        }
        if i >= b.len() {
            return out;
        }
        let key_start = i;
        while i < b.len() && !matches!(b[i], b':' | b'=' | b'(') && !is_sep(b[i]) {
            i += 1;
        }
        let key = &s[key_start..i];
        let delim = b.get(i).copied();
        if delim.is_some() {
            i += 1;
        }
        let paren = match delim {
            Some(b':' | b'=') => false,
            Some(b'(') => true,
            _ => {
                out.push((key, ""));
                continue;
            }
        };
        let value_start = i;
        let mut end = value_end(b, i, paren);
        if paren && b.get(end) == Some(&b')') && b[end + 1..].starts_with(b"->") {
            end = value_end(b, end, false);
        }
        out.push((key, &s[value_start..end]));
        i = end;
        if i < b.len() {
            i += 1;
        }
    }
}

/// OVS `parse_value`: the end of a value starting at `i`, skipping balanced parentheses.
fn value_end(b: &[u8], mut i: usize, paren: bool) -> usize {
    let is_delim = |c: u8| {
        if paren {
            c == b')'
        } else {
            matches!(c, b',' | b' ' | b'\t' | b'\r' | b'\n')
        }
    };
    while i < b.len() && !is_delim(b[i]) {
        if b[i] == b'(' {
            let mut level = 0i32;
            loop {
                match b.get(i) {
                    None => return i,
                    Some(b'(') => level += 1,
                    Some(b')') => level -= 1,
                    _ => {}
                }
                i += 1;
                if level <= 0 {
                    break;
                }
            }
        } else {
            i += 1;
        }
    }
    i
}

/// The protocol shorthands (OVS `ofp_parse_protocol`): name, `dl_type`, `nw_proto`.
pub const PROTOCOL_SHORTHANDS: [(&str, u16, u8); 17] = [
    ("ip", ETH_TYPE_IP, 0),
    ("ipv4", ETH_TYPE_IP, 0),
    ("ip4", ETH_TYPE_IP, 0),
    ("arp", ETH_TYPE_ARP, 0),
    ("icmp", ETH_TYPE_IP, 1),
    ("tcp", ETH_TYPE_IP, 6),
    ("udp", ETH_TYPE_IP, 17),
    ("sctp", ETH_TYPE_IP, 132),
    ("ipv6", ETH_TYPE_IPV6, 0),
    ("ip6", ETH_TYPE_IPV6, 0),
    ("icmp6", ETH_TYPE_IPV6, 58),
    ("tcp6", ETH_TYPE_IPV6, 6),
    ("udp6", ETH_TYPE_IPV6, 17),
    ("sctp6", ETH_TYPE_IPV6, 132),
    ("rarp", ETH_TYPE_RARP, 0),
    ("mpls", ETH_TYPE_MPLS, 0),
    ("mplsm", ETH_TYPE_MPLS_MCAST, 0),
];

/// A field named as ovs-ofctl's flow syntax accepts it: its name or its alias (OVS
/// `mf_from_name`; NXM/OXM names are for subfields only).
pub fn field_by_ofctl_name(name: &str) -> Option<&'static Field> {
    Field::by_name(name).filter(|f| f.name == name || f.alias == Some(name))
}

/// Match-side state of a parse: the match, its usable protocols and the port names.
#[derive(Debug, Clone, Copy)]
pub(crate) struct MatchBuilder<'a> {
    m: Match,
    usable: Protocols,
    port_names: &'a [(String, u16)],
}

impl<'a> MatchBuilder<'a> {
    pub(crate) fn new(port_names: &'a [(String, u16)]) -> Self {
        MatchBuilder {
            m: Match::catch_all(),
            usable: Protocols::ANY,
            port_names,
        }
    }

    pub(crate) fn into_match(self) -> Match {
        self.m
    }

    /// Tries `name=value` as a match item; `Ok(false)` if `name` is not a match keyword.
    pub(crate) fn item(&mut self, name: &str, value: &str) -> Result<bool, Error> {
        if let Some((_, dl_type, proto)) = PROTOCOL_SHORTHANDS.iter().find(|p| p.0 == name) {
            self.m.set_exact(fields::DL_TYPE, u128::from(*dl_type));
            if *proto != 0 {
                self.m.set_exact(fields::NW_PROTO, u128::from(*proto));
            }
            return Ok(true);
        }
        if name == "eth" {
            // Ethernet is the only packet type a key holds.
            return Ok(true);
        }
        if let Some(f) = field_by_ofctl_name(name) {
            let named;
            let mut s = if value.is_empty() { "0/0" } else { value };
            if matches!(f.format, Format::OfpPort | Format::OfpPortOxm) {
                if let Some((_, n)) = self.port_names.iter().find(|(pn, _)| pn == s) {
                    named = n.to_string();
                    s = &named;
                }
            }
            let (v, mask) = parse_value_mask(f, s)?;
            self.usable = self.usable.and(self.m.set_field(f, v, mask));
            return Ok(true);
        }
        if name.contains('[') {
            self.subfield(name, value)?;
            return Ok(true);
        }
        Ok(false)
    }

    /// `FIELD[BITS]=VALUE` (OVS `parse_subfield`).
    fn subfield(&mut self, name: &str, value: &str) -> Result<(), Error> {
        let sf = Subfield::parse(name)?;
        let f = sf.field;
        let val = parse_int(value, f.n_bytes())
            .ok_or_else(|| Error::Parse(format!("{name}: cannot parse integer value: {value}")))?;
        let n = u32::from(sf.n_bits);
        if n < 128 && val >> n != 0 {
            return Err(Error::Parse(format!(
                "{name}: value {} does not fit into {} bits",
                crate::ofctl::value::format_value(f, val),
                sf.n_bits
            )));
        }
        let bits = if n >= 128 {
            u128::MAX
        } else {
            ((1u128 << n) - 1) << sf.ofs
        };
        let (cur_v, cur_m) = self.m.get_field(f);
        let v = (cur_v & !bits) | ((val << sf.ofs) & bits);
        let m = cur_m | bits;
        self.usable = self.usable.and(self.m.set_field(f, v, m));
        Ok(())
    }

    /// OVS's cross-field rule: OpenFlow 1.0 and 1.1 cannot match L3/L4 fields of IPv6.
    fn finish(&mut self) {
        let mk = self.m.mask();
        if self.m.value().dl_type() == ETH_TYPE_IPV6
            && (mk.nw_proto() != 0 || mk.nw_tos() != 0 || mk.tp_src() != 0 || mk.tp_dst() != 0)
        {
            self.usable = self.usable.and(Protocols::NXM_OXM);
        }
    }
}

/// Parses a match alone (no actions, no flow keywords), e.g. `tcp,nw_dst=10.0.0.0/8`.
pub fn parse_match(s: &str) -> Result<Match, Error> {
    parse_match_usable(s).map(|(m, _)| m)
}

/// Parses a match alone and returns it with its usable protocols.
pub fn parse_match_usable(s: &str) -> Result<(Match, Protocols), Error> {
    let mut b = MatchBuilder::new(&[]);
    for (name, value) in split_key_values(s) {
        if !b.item(name, value)? {
            return Err(Error::Parse(format!("unknown keyword {name}")));
        }
    }
    b.finish();
    Ok((b.m, b.usable))
}

fn str_to_u16(value: &str, name: &str) -> Result<u16, Error> {
    parse_c_uint(value)
        .and_then(|v| u16::try_from(v).ok())
        .ok_or_else(|| Error::Parse(format!("invalid {name} \"{value}\"")))
}

/// A C `strtol(.., 0)` style unsigned number: decimal, `0x` hex or `0` octal.
fn parse_c_uint(s: &str) -> Option<u64> {
    if let Some(h) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        u64::from_str_radix(h, 16).ok()
    } else if s.len() > 1 && s.starts_with('0') {
        u64::from_str_radix(&s[1..], 8).ok()
    } else {
        s.parse().ok()
    }
}

/// A C `strtoull(.., 0)` number, where `-N` wraps (so `-1` is all ones).
fn str_to_u64(s: &str) -> Result<u64, Error> {
    if s.is_empty() {
        return Err(Error::Parse(
            "missing required numeric argument".to_string(),
        ));
    }
    let v = match s.strip_prefix('-') {
        Some(rest) => parse_c_uint(rest).map(u64::wrapping_neg),
        None => parse_c_uint(s),
    };
    v.ok_or_else(|| Error::Parse(format!("invalid numeric format {s}")))
}

/// Parses one flow in ovs-ofctl syntax (OVS `parse_ofp_str`, as `ovs-ofctl parse-flow`
/// reads it) and computes its usable and chosen protocols.
///
/// ```
/// use openflow::ofctl::{parse_flow, ParseOptions};
/// let p = parse_flow("cookie=0x123456789abcdef hard_timeout=10 priority=60000 actions=drop",
///                    &ParseOptions::default()).unwrap();
/// assert_eq!(p.to_ofctl_string(), "priority=60000 cookie:0x123456789abcdef hard:10 actions=drop");
/// ```
pub fn parse_flow(text: &str, opts: &ParseOptions) -> Result<ParsedFlow, Error> {
    let cmd = opts.command;
    let has_actions = matches!(
        cmd,
        FlowCommand::Add | FlowCommand::Modify | FlowCommand::ModifyStrict
    );
    let has_out_port = matches!(
        cmd,
        FlowCommand::Delete | FlowCommand::DeleteStrict | FlowCommand::Query
    );
    let has_priority = cmd != FlowCommand::Delete && cmd != FlowCommand::Query;
    let has_importance = cmd == FlowCommand::Add;

    let (match_text, act_text) = if has_actions {
        let at = text
            .find("action")
            .ok_or_else(|| Error::Parse("must specify an action".to_string()))?;
        let eq = text[at..]
            .find('=')
            .ok_or_else(|| Error::Parse("must specify an action".to_string()))?;
        (&text[..at], Some(&text[at + eq + 1..]))
    } else {
        (text, None)
    };

    let mut flow = FlowEntry::default();
    let mut b = MatchBuilder::new(&opts.port_names);
    for (name, value) in split_key_values(match_text) {
        if has_actions {
            let flag = match name {
                "send_flow_rem" => Some((FlowFlags::SEND_FLOW_REM, Protocols::ANY)),
                "check_overlap" => Some((FlowFlags::CHECK_OVERLAP, Protocols::ANY)),
                "reset_counts" => Some((FlowFlags::RESET_COUNTS, Protocols::OF12_UP)),
                "no_packet_counts" => Some((FlowFlags::NO_PKT_COUNTS, Protocols::OF13_UP)),
                "no_byte_counts" => Some((FlowFlags::NO_BYT_COUNTS, Protocols::OF13_UP)),
                _ => None,
            };
            if let Some((f, p)) = flag {
                flow.flags.insert(f);
                b.usable = b.usable.and(p);
                continue;
            }
        }
        if matches!(name, "no_readonly_table" | "allow_hidden_fields") {
            continue;
        }
        if b.item(name, value)? {
            continue;
        }
        if value.is_empty() {
            return Err(Error::Parse(format!("field {name} missing value")));
        }
        match name {
            "table" => {
                let t = value
                    .parse::<u32>()
                    .ok()
                    .filter(|t| *t <= 255)
                    .and_then(|t| u8::try_from(t).ok())
                    .ok_or_else(|| Error::Parse(format!("unknown table \"{value}\"")))?;
                flow.table = Some(t);
                if t != 255 {
                    b.usable = b.usable.and(Protocols::TID);
                }
            }
            "out_port" if has_out_port => {
                flow.out_port = parse_port(value)
                    .map_err(|_| Error::Parse(format!("{value} is not a valid OpenFlow port")))?;
            }
            "out_group" if has_out_port => {
                b.usable = b.usable.and(Protocols::OF11_UP);
                flow.out_group = parse_group(value).ok_or_else(|| {
                    Error::Parse(format!("{value} is not a valid OpenFlow group"))
                })?;
            }
            "priority" if has_priority => flow.priority = str_to_u16(value, name)?,
            "idle_timeout" if has_actions => flow.idle_timeout = str_to_u16(value, name)?,
            "hard_timeout" if has_actions => flow.hard_timeout = str_to_u16(value, name)?,
            "importance" if has_importance => flow.importance = str_to_u16(value, name)?,
            "cookie" => {
                if let Some((v, m)) = value.split_once('/') {
                    if cmd == FlowCommand::Add {
                        return Err(Error::Parse(
                            "flow additions cannot use a cookie mask".to_string(),
                        ));
                    }
                    flow.cookie = str_to_u64(v)?;
                    flow.cookie_mask = str_to_u64(m)?;
                    if flow.cookie_mask != 0 {
                        b.usable = b.usable.and(Protocols::NXM_OXM_OF11);
                    }
                } else {
                    if !has_actions {
                        return Err(Error::Parse(format!(
                            "cannot set cookie (to match on a cookie, specify a mask, e.g. \
                             cookie={value}/-1)"
                        )));
                    }
                    flow.cookie = str_to_u64(value)?;
                }
            }
            // `dump-flows` output fed back: OVS ignores the counters; we keep them.
            "n_packets" => flow.stats.n_packets = parse_c_uint(value).unwrap_or(0),
            "n_bytes" => flow.stats.n_bytes = parse_c_uint(value).unwrap_or(0),
            "duration" => flow.stats.duration_ms = parse_duration_ms(value).unwrap_or(0),
            "idle_age" | "hard_age" => {}
            _ => return Err(Error::Parse(format!("unknown keyword {name}"))),
        }
    }
    b.finish();
    let mut usable = b.usable;
    if let Some(act) = act_text {
        let mut ctx = ActionContext::new(&b.m, opts.allowed);
        ctx.port_names = &opts.port_names;
        ctx.table_id = flow.table;
        let parsed = parse_actions(act, &ctx)?;
        usable = usable.and(parsed.usable);
        if usable.is_empty() {
            return Err(Error::Parse(
                "actions are invalid with specified match (OFPBAC_MATCH_INCONSISTENT)".to_string(),
            ));
        }
        flow.actions = parsed.actions;
    }
    let chosen = usable.and(opts.allowed).preferred();
    if chosen.is_empty() {
        return Err(Error::Parse("no usable protocol".to_string()));
    }
    let mut m = b.m;
    if opts.strict_prerequisites {
        m.check_prerequisites()?;
    }
    if chosen.intersects(Protocols::OF10) {
        normalize_of10(&mut m);
        normalize_std_vlan(&mut m);
    } else if chosen == Protocols::OF11 {
        normalize_nxm(&mut m, false);
        normalize_std_vlan(&mut m);
        // The OpenFlow 1.1 match has the DSCP bits of the TOS byte only.
        let (tos, tmask) = m.get_masked(fields::NW_TOS);
        m.set_masked(fields::NW_TOS, tos, tmask & 0xfc);
    } else {
        normalize_nxm(&mut m, chosen.intersects(Protocols::OXM));
    }
    flow.flow_match = m;
    Ok(ParsedFlow {
        flow,
        usable,
        chosen,
        command: cmd,
    })
}

/// Parses one line of an `ovs-ofctl add-flows` / `--bundle` file, which may start with a
/// command word (`add`, `modify`, `modify_strict`, `delete`, `delete_strict`, or any prefix
/// of one; none means `add`), as OVS `parse_ofp_str` with command -2 does. `opts.command`
/// is ignored.
pub fn parse_flow_mod_line(text: &str, opts: &ParseOptions) -> Result<ParsedFlow, Error> {
    let start = text.len() - text.trim_start_matches([' ', '\t', '\r', '\n']).len();
    let rest = &text[start..];
    let len = rest
        .find([',', ' ', '\t', '\r', '\n'])
        .unwrap_or(rest.len());
    let word = &rest[..len];
    let is = |name: &str| name.starts_with(word) && !word.is_empty();
    let command = if is("add") {
        Some(FlowCommand::Add)
    } else if is("delete") {
        Some(FlowCommand::Delete)
    } else if is("delete_strict") {
        Some(FlowCommand::DeleteStrict)
    } else if is("modify") {
        Some(FlowCommand::Modify)
    } else if is("modify_strict") {
        Some(FlowCommand::ModifyStrict)
    } else {
        None
    };
    let mut o = opts.clone();
    o.command = command.unwrap_or(FlowCommand::Add);
    let body = if command.is_some() {
        &rest[len..]
    } else {
        rest
    };
    let mut parsed = parse_flow(body, &o)?;
    parsed.command = o.command;
    Ok(parsed)
}

fn parse_group(s: &str) -> Option<u32> {
    match s.to_ascii_lowercase().as_str() {
        "all" => Some(0xffff_fffc),
        "any" => Some(OFPG_ANY),
        _ => s.parse::<u32>().ok().filter(|g| *g <= 0xffff_ff00),
    }
}

/// `1.5s` or `1.5` (seconds) as milliseconds.
fn parse_duration_ms(s: &str) -> Option<u64> {
    let s = s.trim_end_matches('s');
    let (whole, frac) = s.split_once('.').unwrap_or((s, ""));
    let ms: String = frac.chars().chain("000".chars()).take(3).collect();
    whole
        .parse::<u64>()
        .ok()?
        .checked_mul(1000)?
        .checked_add(ms.parse::<u64>().ok()?)
}

/// Clears the fields an OpenFlow 1.0 switch ignores for the match's protocol (OVS
/// `ofputil_normalize_match`): L3 fields without IPv4/IPv6/ARP, L4 ports without TCP, UDP,
/// SCTP or ICMP, IPv6 fields without IPv6, ND fields without an ND type, MPLS without MPLS.
pub fn normalize_of10(m: &mut Match) {
    let v = *m.value();
    let dl_type = v.dl_type();
    let proto = v.nw_proto();
    let (mut nw_addr, mut tp, mut nw_proto, mut ipvx) = (false, false, false, false);
    let (mut sha, mut tha, mut ipv6, mut nd, mut mpls) = (false, false, false, false, false);
    match dl_type {
        ETH_TYPE_IP => {
            nw_proto = true;
            ipvx = true;
            nw_addr = true;
            tp = matches!(proto, 6 | 17 | 132 | 1);
        }
        ETH_TYPE_IPV6 => {
            nw_proto = true;
            ipvx = true;
            ipv6 = true;
            if matches!(proto, 6 | 17 | 132) {
                tp = true;
            } else if proto == 58 {
                tp = true;
                match v.tp_src() {
                    135 => {
                        nd = true;
                        sha = true;
                    }
                    136 => {
                        nd = true;
                        tha = true;
                    }
                    _ => {}
                }
            }
        }
        ETH_TYPE_ARP | ETH_TYPE_RARP => {
            nw_proto = true;
            nw_addr = true;
            sha = true;
            tha = true;
        }
        ETH_TYPE_MPLS | ETH_TYPE_MPLS_MCAST => mpls = true,
        _ => {}
    }
    let clear = |m: &mut Match, on: bool, fs: &[packet::key::KeyField]| {
        if !on {
            for f in fs {
                m.wildcard(*f);
            }
        }
    };
    clear(m, nw_addr, &[fields::NW_SRC, fields::NW_DST]);
    clear(m, tp, &[fields::TP_SRC, fields::TP_DST]);
    clear(m, nw_proto, &[fields::NW_PROTO]);
    clear(m, ipvx, &[fields::NW_TOS, fields::NW_TTL]);
    clear(m, sha, &[fields::ARP_SHA]);
    clear(m, tha, &[fields::ARP_THA]);
    clear(
        m,
        ipv6,
        &[fields::IPV6_SRC, fields::IPV6_DST, fields::IPV6_LABEL],
    );
    clear(m, nd, &[fields::ND_TARGET]);
    clear(
        m,
        mpls,
        &[fields::MPLS_LSE0, fields::MPLS_LSE1, fields::MPLS_LSE2],
    );
}

/// The VLAN match as the OpenFlow 1.0/1.1 standard matches carry it (OVS
/// `ofputil_match_to_ofp10_match` and back): "no tag" when the present bit is matched as
/// 0, else an exact VID and/or an exact priority, each with the present bit.
pub fn normalize_std_vlan(m: &mut Match) {
    use crate::flow_match::{VLAN_CFI, VLAN_PCP_MASK, VLAN_VID_MASK};
    let (tci, mask) = m.get_masked(fields::VLAN_TCI);
    let (cfi, vid, pcp) = (
        u128::from(VLAN_CFI),
        u128::from(VLAN_VID_MASK),
        u128::from(VLAN_PCP_MASK),
    );
    if mask == 0 {
        return;
    }
    if mask & cfi != 0 && tci & cfi == 0 {
        m.set_masked(fields::VLAN_TCI, 0, 0xffff);
        return;
    }
    let mut new_mask = 0;
    if mask & vid != 0 {
        new_mask |= vid | cfi;
    }
    if mask & pcp != 0 {
        new_mask |= pcp | cfi;
    }
    m.set_masked(fields::VLAN_TCI, tci | cfi, new_mask);
}

/// Keeps what OVS's NXM/OXM encoder (`nx_put_raw`) writes for the match, which is what
/// ovs-ofctl prints and a switch installs: IPv4 addresses only for IPv4 and IPv6 ones only
/// for IPv6, L4 fields only with `nw_proto` matched and a known transport (ICMP type and
/// code become exact 8-bit values), ND fields only for ND, ARP fields only for ARP, MPLS
/// only for MPLS. With `oxm`, the VLAN priority is kept only with a VLAN id to go with it.
pub fn normalize_nxm(m: &mut Match, oxm: bool) {
    let v = *m.value();
    let mk = *m.mask();
    let dl_type = v.dl_type();
    let proto = v.nw_proto();
    let is_ip = dl_type == ETH_TYPE_IP || dl_type == ETH_TYPE_IPV6;
    let is_arp = dl_type == ETH_TYPE_ARP || dl_type == ETH_TYPE_RARP;
    let is_mpls = dl_type == ETH_TYPE_MPLS || dl_type == ETH_TYPE_MPLS_MCAST;
    let mut clear = |on: bool, fs: &[packet::key::KeyField]| {
        if !on {
            for f in fs {
                m.wildcard(*f);
            }
        }
    };
    clear(is_mpls, &[fields::MPLS_LSE0]);
    clear(false, &[fields::MPLS_LSE1, fields::MPLS_LSE2]);
    clear(
        dl_type == ETH_TYPE_IP || is_arp,
        &[fields::NW_SRC, fields::NW_DST],
    );
    clear(
        dl_type == ETH_TYPE_IPV6,
        &[fields::IPV6_SRC, fields::IPV6_DST],
    );
    clear(
        is_ip,
        &[
            fields::NW_FRAG,
            fields::NW_TOS,
            fields::NW_TTL,
            fields::IPV6_LABEL,
        ],
    );
    clear(is_ip || is_arp, &[fields::NW_PROTO]);
    let l4 = is_ip && mk.nw_proto() != 0;
    let tcp = l4 && proto == 6;
    let ports = l4 && matches!(proto, 6 | 17 | 132);
    let icmp =
        l4 && ((dl_type == ETH_TYPE_IP && proto == 1) || (dl_type == ETH_TYPE_IPV6 && proto == 58));
    let nd = icmp && dl_type == ETH_TYPE_IPV6 && matches!(v.tp_src(), 135 | 136) && v.tp_dst() == 0;
    clear(ports || icmp, &[fields::TP_SRC, fields::TP_DST]);
    clear(tcp, &[fields::TCP_FLAGS]);
    clear(nd, &[fields::ND_TARGET]);
    clear(is_arp || (nd && v.tp_src() == 135), &[fields::ARP_SHA]);
    clear(is_arp || (nd && v.tp_src() == 136), &[fields::ARP_THA]);
    if v.ct_nw_proto() == 0 {
        m.wildcard(fields::CT_NW_PROTO);
        m.wildcard(fields::CT_TP_SRC);
        m.wildcard(fields::CT_TP_DST);
    }
    if icmp {
        // ICMP type and code are exact 8-bit fields on the wire.
        for f in [fields::TP_SRC, fields::TP_DST] {
            if m.mask().get(f) != 0 {
                let val = m.value().get(f) & 0xff;
                m.set_masked(f, val, 0xffff);
            }
        }
    }
    if oxm {
        let (tci, tmask) = m.get_masked(fields::VLAN_TCI);
        let vid_cfi = u128::from(crate::flow_match::VLAN_VID_MASK | crate::flow_match::VLAN_CFI);
        let pcp = u128::from(crate::flow_match::VLAN_PCP_MASK);
        let mut new_mask = tmask & vid_cfi;
        if tci & vid_cfi != 0 && tmask & pcp != 0 {
            new_mask |= pcp;
        }
        m.set_masked(fields::VLAN_TCI, tci, new_mask);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ofctl::format_match;

    fn any() -> ParseOptions {
        ParseOptions::default()
    }

    fn printed(text: &str) -> String {
        format_match(&parse_match(text).expect("match parses"), None)
    }

    fn err(text: &str, opts: &ParseOptions) -> String {
        parse_flow(text, opts)
            .expect_err("flow is rejected")
            .to_string()
    }

    #[test]
    fn split_key_values_follows_ovs() {
        assert_eq!(
            split_key_values("a=b c:d ,e(f(g),h),i"),
            vec![("a", "b"), ("c", "d"), ("e", "f(g),h"), ("i", "")]
        );
        assert_eq!(split_key_values("  ,, "), Vec::<(&str, &str)>::new());
        assert_eq!(
            split_key_values("x(1)->y,z"),
            vec![("x", "1)->y"), ("z", "")]
        );
    }

    #[test]
    fn match_vlan_family() {
        assert_eq!(printed("dl_vlan=9"), "dl_vlan=9");
        assert_eq!(printed("vlan_tci=0x1009/0x1fff"), "dl_vlan=9");
        assert_eq!(
            printed("dl_vlan=9,dl_vlan_pcp=7"),
            "dl_vlan=9,dl_vlan_pcp=7"
        );
        assert_eq!(printed("vlan_vid=11/0x1"), "vlan_tci=0x0001/0x0001");
        assert_eq!(printed("dl_vlan=0xffff"), "vlan_tci=0x0000");
        assert_eq!(printed("vlan_tci=0"), "vlan_tci=0x0000");
        assert_eq!(printed("vlan_pcp=5"), "dl_vlan_pcp=5");
    }

    #[test]
    fn match_ip_family() {
        assert_eq!(printed("ip,nw_tos=0xf0"), "ip,nw_tos=240");
        assert_eq!(
            printed("ip,ip_dscp=0x3c,nw_ecn=1"),
            "ip,nw_tos=240,nw_ecn=1"
        );
        assert_eq!(printed("ip,ip_frag=first"), "ip,nw_frag=first");
        assert_eq!(printed("ip,ip_frag=not_later"), "ip,nw_frag=not_later");
        assert_eq!(
            printed("ip,nw_src=192.0.168.0/255.0.255.0"),
            "ip,nw_src=192.0.168.0/255.0.255.0"
        );
        assert_eq!(printed("ipv6,ipv6_src=::1/::1"), "ipv6,ipv6_src=::1/::1");
        assert_eq!(
            printed("ipv6,ipv6_label=5,nw_ttl=3"),
            "ipv6,ipv6_label=0x00005,nw_ttl=3"
        );
        assert_eq!(printed("ip,nw_proto=2"), "ip,nw_proto=2");
    }

    #[test]
    fn match_l4_family() {
        assert_eq!(printed("tcp,tp_src[5]=1"), "tcp,tp_src=0x20/0x20");
        assert_eq!(printed("tcp,tcp_flags=+syn-ack"), "tcp,tcp_flags=+syn-ack");
        assert_eq!(printed("tcp,tcp_flags=syn|ack"), "tcp,tcp_flags=syn|ack");
        assert_eq!(printed("udp6,udp_dst[12]=1"), "udp6,tp_dst=0x1000/0x1000");
        assert_eq!(
            printed("icmp,icmp_type=8,icmp_code=0"),
            "icmp,icmp_type=8,icmp_code=0"
        );
        assert_eq!(
            printed("icmp6,icmp_type=135,nd_target=::1,nd_sll=00:00:00:00:00:01"),
            "icmp6,icmp_type=135,nd_target=::1,nd_sll=00:00:00:00:00:01"
        );
        assert_eq!(printed("sctp6,sctp_src=9"), "sctp6,tp_src=9");
    }

    #[test]
    fn match_other_families() {
        assert_eq!(
            printed("arp,arp_op=1,arp_spa=1.2.3.4,arp_sha=00:00:00:00:00:01"),
            "arp,arp_spa=1.2.3.4,arp_op=1,arp_sha=00:00:00:00:00:01"
        );
        assert_eq!(
            printed("mpls,mpls_label=5,mpls_tc=1,mpls_ttl=1,mpls_bos=0"),
            "mpls,mpls_label=5,mpls_tc=1,mpls_ttl=1,mpls_bos=0"
        );
        assert_eq!(printed("ct_state=+trk+est-new"), "ct_state=-new+est+trk");
        assert_eq!(printed("ct_state=trk|est"), "ct_state=est|trk");
        assert_eq!(
            printed("tun_flags=+oam,tun_id=0x5"),
            "tun_id=0x5,tun_flags=+oam"
        );
        assert_eq!(printed("reg3[]=3"), "reg3=0x3");
        assert_eq!(printed("reg0=0/1"), "reg0=0/0x1");
        assert_eq!(
            printed("xreg15[0..31]=2,xreg15[32..63]=3"),
            "reg30=0x3,reg31=0x2"
        );
        assert_eq!(
            printed("in_port=LOCAL,metadata=0x5/0xf"),
            "metadata=0x5/0xf,in_port=LOCAL"
        );
        assert_eq!(printed("dl_dst=aa:bb:cc:dd:ee:ff/00:00:00:00:00:00"), "");
        assert_eq!(printed("dl_type=0x1234"), "dl_type=0x1234");
        assert_eq!(
            printed("pkt_mark=0xbb,ct_mark=0"),
            "pkt_mark=0xbb,ct_mark=0"
        );
    }

    #[test]
    fn match_errors_carry_ovs_messages() {
        let e = |t: &str| parse_match(t).expect_err("rejected").to_string();
        assert_eq!(e("nosuch=1"), "unknown keyword nosuch");
        assert_eq!(e("ip,nw_ttl=5/1"), "5/1: invalid mask for field nw_ttl");
        assert_eq!(e("nw_src=1.2.3"), "1.2.3: invalid IP address");
        assert_eq!(e("dl_src=1:2:3"), "1:2:3: invalid Ethernet address");
        assert_eq!(
            e("in_port=bogus"),
            "bogus: invalid or unknown port for in_port"
        );
        assert_eq!(
            e("reg0[0..3]=16"),
            "reg0[0..3]: value 0x10 does not fit into 4 bits"
        );
        assert_eq!(e("reg0[1]=x"), "reg0[1]: cannot parse integer value: x");
        assert!(e("ip_frag=sometimes").starts_with("sometimes: unknown fragment type"));
        assert_eq!(e("tcp_flags=+bogus"), "bogus: unknown TCP flag(s)");
        assert_eq!(e("tcp_flags=bogus"), "bogus: unknown TCP flag(s)");
    }

    #[test]
    fn flow_keywords_and_printing() {
        let p = parse_flow(
            "table=3,priority=7,cookie=0x10,idle_timeout=5,hard_timeout=6,importance=9,\
             send_flow_rem,check_overlap,n_packets=4,n_bytes=100,duration=1.5s,actions=drop",
            &any(),
        )
        .expect("flow parses");
        assert_eq!(p.flow.table, Some(3));
        assert_eq!(p.usable, Protocols::TID);
        assert_eq!(p.chosen, Protocols::OF10_STD_TID);
        assert_eq!(p.flow.stats.n_packets, 4);
        assert_eq!(p.flow.stats.duration_ms, 1500);
        assert_eq!(
            p.to_ofctl_string(),
            "table:3 priority=7 cookie:0x10 idle:5 hard:6 send_flow_rem check_overlap \
             actions=drop"
        );
        assert_eq!(
            p.flow.to_ofctl_string(OfVersion::Of14),
            "table:3 priority=7 cookie:0x10 idle:5 hard:6 importance:9 send_flow_rem \
             check_overlap actions=drop"
        );
        assert_eq!(
            p.flow.to_dump_flows_string(OfVersion::Of10, true),
            "cookie=0x10, duration=1.500s, table=3, n_packets=4, n_bytes=100, \
             idle_timeout=5, hard_timeout=6, send_flow_rem check_overlap importance=9, \
             priority=7 actions=drop"
        );
    }

    #[test]
    fn flow_flags_narrow_protocols() {
        let p = parse_flow("reset_counts,actions=drop", &any()).expect("parses");
        assert_eq!(p.usable, Protocols::OF12_UP);
        assert_eq!(p.chosen, Protocols::OF12_OXM);
        assert_eq!(p.to_ofctl_string(), "reset_counts actions=drop");
        let p = parse_flow("no_packet_counts,actions=drop", &any()).expect("parses");
        assert_eq!(p.chosen, Protocols::OF13_OXM);
    }

    #[test]
    fn flow_errors_carry_ovs_messages() {
        assert_eq!(err("ip", &any()), "must specify an action");
        assert_eq!(err("bogus=1,actions=drop", &any()), "unknown keyword bogus");
        assert_eq!(
            err("bogus,actions=drop", &any()),
            "field bogus missing value"
        );
        assert_eq!(
            err("table,actions=drop", &any()),
            "field table missing value"
        );
        assert_eq!(
            err("priority=x,actions=drop", &any()),
            "invalid priority \"x\""
        );
        assert_eq!(
            err("table=256,actions=drop", &any()),
            "unknown table \"256\""
        );
        assert_eq!(
            err("cookie=1/-1,actions=drop", &any()),
            "flow additions cannot use a cookie mask"
        );
        assert_eq!(
            err("tun_ttl=0,actions=drop", &any()),
            "actions are invalid with specified match (OFPBAC_MATCH_INCONSISTENT)"
        );
        assert_eq!(
            err("out_port=1,actions=drop", &any()),
            "unknown keyword out_port"
        );
        let of11 = ParseOptions::from_ofctl_options("-O OpenFlow10").expect("options");
        assert_eq!(
            err("metadata=1,reset_counts,actions=drop", &of11),
            "no usable protocol"
        );
    }

    #[test]
    fn flow_delete_takes_cookie_mask_and_out_port() {
        let opts = ParseOptions {
            command: FlowCommand::Delete,
            ..ParseOptions::default()
        };
        let p = parse_flow("cookie=0x5/-1,out_port=2,out_group=3,ip", &opts).expect("parses");
        assert_eq!((p.flow.cookie, p.flow.cookie_mask), (5, u64::MAX));
        assert_eq!((p.flow.out_port, p.flow.out_group), (2, 3));
        assert_eq!(p.usable, Protocols::OF11_UP);
        assert!(parse_flow("cookie=5,ip", &opts).is_err());
    }

    #[test]
    fn flow_prerequisites_follow_the_chosen_protocol() {
        // OpenFlow 1.0: the switch drops what the protocol cannot have.
        let p = parse_flow("tp_src=80,actions=drop", &any()).expect("parses");
        assert_eq!(p.chosen, Protocols::OF10_STD);
        assert_eq!(p.to_ofctl_string(), "actions=drop");
        // NXM: the encoder does not write it either.
        let mut nxm = ParseOptions::from_ofctl_options("-F nxm").expect("options");
        let p = parse_flow("ip,tp_src=80,actions=drop", &nxm).expect("parses");
        assert_eq!(p.to_ofctl_string(), "ip actions=drop");
        // Strict: rejected as a switch rejects such an NXM flow_mod.
        nxm.strict_prerequisites = true;
        assert_eq!(
            err("tp_src=80,actions=drop", &nxm),
            "tcp_src: prerequisites not met (needs tcp or tcp6) (OFPBMC_BAD_PREREQ)"
        );
        assert!(parse_flow("udp,tp_src=80,actions=drop", &nxm).is_ok());
    }

    #[test]
    fn flow_ipv6_l3_needs_nxm_or_oxm() {
        let p = parse_flow("ipv6,nw_proto=1,actions=drop", &any()).expect("parses");
        assert_eq!(p.usable.to_ofctl_string(), "NXM,OXM");
        let p = parse_flow("dl_type=0x86dd,actions=drop", &any()).expect("parses");
        assert_eq!(p.usable, Protocols::ANY);
    }

    #[test]
    fn options_from_ofctl_command_lines() {
        let o = |s: &str| {
            ParseOptions::from_ofctl_options(s)
                .expect("options")
                .allowed
        };
        assert_eq!(o(""), Protocols::OF10_ANY);
        assert_eq!(o("--protocols OpenFlow11"), Protocols::OF11);
        assert_eq!(o("--protocols=OpenFlow12"), Protocols::OF12_OXM);
        assert_eq!(o("-O OpenFlow13"), Protocols::OF13_OXM);
        assert_eq!(
            o("-OOpenFlow10,OpenFlow13"),
            Protocols::OF10_ANY.or(Protocols::OF13_OXM)
        );
        assert_eq!(o("-F nxm"), Protocols::NXM);
        assert_eq!(o("-F OXM -O OpenFlow14"), Protocols::OF14_OXM);
        assert_eq!(
            ParseOptions::from_ofctl_options("-F oxm -O openflow10,openflow11")
                .expect_err("no common protocol")
                .to_string(),
            "None of the enabled OpenFlow versions (OpenFlow10, OpenFlow11) supports any of \
             the enabled flow formats (OXM).  (Use -O to enable additional OpenFlow versions \
             or -F to enable additional flow formats.)"
        );
        assert!(ParseOptions::from_ofctl_options("--bogus").is_err());
        assert!(ParseOptions::from_ofctl_options("-O").is_err());
    }

    #[test]
    fn flow_mod_lines_take_a_command_word() {
        let p = parse_flow_mod_line("delete_strict priority=5,ip", &any()).expect("parses");
        assert_eq!(p.command, FlowCommand::DeleteStrict);
        assert_eq!(p.flow.priority, 5);
        let p = parse_flow_mod_line("mod ip actions=drop", &any()).expect("parses");
        assert_eq!(p.command, FlowCommand::Modify);
        let p = parse_flow_mod_line(" ip,actions=drop", &any()).expect("parses");
        assert_eq!(p.command, FlowCommand::Add);
        let p = parse_flow_mod_line("del", &any()).expect("parses");
        assert_eq!(p.command, FlowCommand::Delete);
    }

    #[test]
    fn port_names_resolve_in_matches() {
        let opts = ParseOptions {
            port_names: vec![("p1".to_string(), 5)],
            ..ParseOptions::default()
        };
        let p = parse_flow("in_port=p1,actions=drop", &opts).expect("parses");
        assert_eq!(p.to_ofctl_string(), "in_port=5 actions=drop");
    }
}
