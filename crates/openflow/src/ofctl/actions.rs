//! ovs-ofctl action syntax: parse `actions=...` text and print actions in the normalized
//! form ovs-ofctl prints for a given protocol version.
//!
//! # Parsing
//!
//! [`parse_actions`] follows OVS's `ofpacts_parse_instructions` and then
//! `ofpacts_check`: the text is split into `key[:=(]value` items exactly as
//! `ofputil_parse_key_value` does (so `output:1 output(2),resubmit(,3)` works), each item
//! is parsed by the action it names (or as a bare port), instruction order is verified,
//! and finally the list is checked against the flow's match (an action that needs a
//! prerequisite the match does not guarantee either narrows the usable protocols to
//! OpenFlow 1.0, or fails, as in OVS).
//!
//! # Printing
//!
//! OVS prints what the switch would see: the actions are encoded for the chosen protocol
//! version and decoded back. [`format_actions`] reproduces that round trip without the
//! wire format ([`mod@print`]): under OpenFlow 1.2+ `mod_nw_src` becomes
//! `set_field:...->ip_src`, under OpenFlow 1.0 `set_field:...->ip_src` becomes
//! `mod_nw_src`, a `set_field` that OpenFlow 1.0 cannot express becomes `load`s, and so
//! on.
//!
//! Parsing never panics, whatever the input (a property test checks it).

mod check;
mod learn;
mod parse;
pub mod print;
mod verify;

use crate::action::{Action, OfVersion};
use crate::field::Protocols;
use crate::flow_match::Match;
use crate::Error;

/// What parsing an action list yields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParsedActions {
    /// The actions (instructions last), empty for `drop`.
    pub actions: Vec<Action>,
    /// The protocols that can express these actions with this match (OVS intersects this
    /// with the match's own usable protocols; an empty intersection is the error
    /// [`inconsistent_match_error`]).
    pub usable: Protocols,
}

/// Context for parsing actions: the flow's match (some actions depend on it) and the
/// protocols the user allowed.
#[derive(Debug, Clone, Copy)]
pub struct ActionContext<'a> {
    /// The flow's match.
    pub flow_match: &'a Match,
    /// Protocols allowed by the command-line options (informational: OVS decides the
    /// usable protocols of actions without it).
    pub allowed: Protocols,
    /// Port names accepted where a port number is (`output:p1`, bare `p1`), as OVS's port
    /// map. Reserved names (`LOCAL`, `NORMAL`, ...) are always accepted.
    pub port_names: &'a [(String, u16)],
    /// The flow's table, if known: `goto_table` must go to a later table.
    pub table_id: Option<u8>,
}

impl<'a> ActionContext<'a> {
    /// A context with no port names and an unknown table.
    pub fn new(flow_match: &'a Match, allowed: Protocols) -> Self {
        ActionContext {
            flow_match,
            allowed,
            port_names: &[],
            table_id: None,
        }
    }
}

/// The error OVS reports when actions and match together leave no usable protocol, or
/// when `ofpacts_check` fails with `code` (an OpenFlow error name such as
/// `OFPBAC_BAD_OUT_PORT`).
pub fn check_error(code: &str) -> Error {
    Error::Parse(format!("actions are invalid with specified match ({code})"))
}

/// [`check_error`] for `OFPBAC_MATCH_INCONSISTENT`, the error for an empty intersection
/// of the match's and the actions' usable protocols.
pub fn inconsistent_match_error() -> Error {
    check_error("OFPBAC_MATCH_INCONSISTENT")
}

/// Parses the text after `actions=`.
pub fn parse_actions(s: &str, ctx: &ActionContext<'_>) -> Result<ParsedActions, Error> {
    let mut st = parse::State::new(ctx);
    let mut actions = st.parse_list(s, true, parse::Outer::None)?;
    let mut flow = check::FlowState::from_match(ctx.flow_match);
    let mut usable = Protocols::ANY;
    check::check_list(&mut actions, &mut flow, &mut usable, ctx.table_id)?;
    let usable = st.usable.and(usable);
    if usable.is_empty() {
        // No protocol can carry these actions with this match, whatever the match's own
        // protocols are.
        return Err(inconsistent_match_error());
    }
    check::decode_rules(&actions)?;
    Ok(ParsedActions { actions, usable })
}

/// Prints actions as ovs-ofctl does for `version` (`drop` for none).
pub fn format_actions(actions: &[Action], version: OfVersion) -> String {
    print::format_list(&print::encode_list(actions, version), version)
}

/// Splits `s` into ovs-ofctl `key[:=(]value` items (OVS `ofputil_parse_key_value`).
///
/// A key ends at `:`, `=`, `(`, `,` or white space. After `:` or `=` the value runs to the
/// next `,` or white space; after `(` to the matching `)`. Parentheses nest inside values,
/// and `key(x)->y` keeps `x)->y` as the value.
#[derive(Debug, Clone)]
pub struct KeyValues<'a> {
    s: &'a str,
    pos: usize,
}

impl<'a> KeyValues<'a> {
    /// Iterates over the items of `s`.
    pub fn new(s: &'a str) -> Self {
        KeyValues { s, pos: 0 }
    }
}

/// Length of the value at the start of `s` up to one of `delims` (or the end), skipping
/// over balanced parentheses (OVS `parse_value`).
fn value_len(s: &[u8], delims: &[u8]) -> usize {
    let mut n = 0;
    while n < s.len() && !delims.contains(&s[n]) {
        if s[n] == b'(' {
            let mut level = 0usize;
            loop {
                match s.get(n) {
                    None => return n,
                    Some(b'(') => level += 1,
                    Some(b')') => level -= 1,
                    Some(_) => {}
                }
                n += 1;
                if level == 0 {
                    break;
                }
            }
        } else {
            n += 1;
        }
    }
    n
}

impl<'a> Iterator for KeyValues<'a> {
    type Item = (&'a str, &'a str);

    fn next(&mut self) -> Option<(&'a str, &'a str)> {
        let b = self.s.as_bytes();
        while self.pos < b.len() && b", \t\r\n".contains(&b[self.pos]) {
            self.pos += 1;
        }
        if self.pos >= b.len() {
            return None;
        }
        let key_start = self.pos;
        let mut key_end = key_start;
        while key_end < b.len() && !b":=(, \t\r\n".contains(&b[key_end]) {
            key_end += 1;
        }
        let key = &self.s[key_start..key_end];
        let delim = b.get(key_end).copied();
        self.pos = if delim.is_some() {
            key_end + 1
        } else {
            key_end
        };
        let delims: &[u8] = match delim {
            Some(b':') | Some(b'=') => b", \t\r\n",
            Some(b'(') => b")",
            _ => return Some((key, "")),
        };
        let start = self.pos;
        let rest = &b[start..];
        let mut len = value_len(rest, delims);
        if delim == Some(b'(')
            && rest.get(len) == Some(&b')')
            && rest.get(len + 1) == Some(&b'-')
            && rest.get(len + 2) == Some(&b'>')
        {
            len += value_len(&rest[len..], b", \t\r\n");
        }
        let value = &self.s[start..start + len];
        self.pos = if start + len < b.len() {
            start + len + 1
        } else {
            start + len
        };
        Some((key, value))
    }
}

#[cfg(test)]
mod tests;
