//! Replaying the ovs-ofctl acceptance cases (`testdata/ofctl-parse-cases.jsonl`, taken
//! from OVS `tests/ovs-ofctl.at`).
//!
//! Each case gives a flow text, the ovs-ofctl options it was parsed with, and one expected
//! fact: the normalized text ovs-ofctl prints (`kind=normalize`), the usable protocols it
//! reports (`kind=usable_protocols`), or the error it fails with (`kind=error`).
//! [`replay_parse_case`] checks one case; the fields come in as plain strings so that this
//! crate needs no JSON library (the test and the `ferrovs-cases` binary read the file).
//!
//! IPv6 addresses compare by value: three cases expect `fec0::1234:…` where RFC 5952 (and
//! this crate) print `fec0:0:1234:…`.
//!
//! # Example
//! ```
//! use openflow::cases::{replay_parse_case, ParseCase};
//! let case = ParseCase {
//!     kind: "normalize",
//!     ofctl_options: "",
//!     input: "tcp,tp_src=123,actions=drop",
//!     expected: "tcp,tp_src=123 actions=drop",
//!     chosen_protocol: None,
//! };
//! assert_eq!(replay_parse_case(&case), Ok(()));
//! ```

use std::net::Ipv6Addr;

use crate::field::Protocols;
use crate::ofctl::{parse_flow, ParseOptions};

/// One case, as plain strings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ParseCase<'a> {
    /// `normalize`, `usable_protocols` or `error`.
    pub kind: &'a str,
    /// The ovs-ofctl options (`""`, `--protocols OpenFlow11`, `-F nxm`, `-O OpenFlow13`).
    pub ofctl_options: &'a str,
    /// The flow text.
    pub input: &'a str,
    /// The expected fact: the `normalized` text, the `usable_protocols` string, or the
    /// `expected_error` message, by kind.
    pub expected: &'a str,
    /// The protocol ovs-ofctl chose for the whole file the case comes from
    /// (`chosen_protocol`), if known. It decides how actions print; a flow parsed alone
    /// may choose another one.
    pub chosen_protocol: Option<&'a str>,
}

/// Checks one case. `Err` carries a one-line explanation (what was expected, what came).
pub fn replay_parse_case(case: &ParseCase<'_>) -> Result<(), String> {
    let opts = ParseOptions::from_ofctl_options(case.ofctl_options)
        .map_err(|e| format!("bad options {:?}: {e}", case.ofctl_options))?;
    let parsed = parse_flow(case.input, &opts);
    match case.kind {
        "normalize" => {
            let p = parsed.map_err(|e| format!("parse error: {e}"))?;
            let version = case
                .chosen_protocol
                .and_then(Protocols::from_ofctl_string)
                .map(|p| p.version())
                .unwrap_or_else(|| p.version());
            let got = p.flow.to_ofctl_string(version);
            if same_text(&got, case.expected) {
                Ok(())
            } else {
                Err(format!("expected `{}`, got `{got}`", case.expected))
            }
        }
        "usable_protocols" => {
            let p = parsed.map_err(|e| format!("parse error: {e}"))?;
            let got = p.usable.to_ofctl_string();
            if got == case.expected {
                Ok(())
            } else {
                Err(format!("expected usable `{}`, got `{got}`", case.expected))
            }
        }
        "error" => match parsed {
            Ok(p) => Err(format!(
                "expected error `{}`, parsed as `{}`",
                case.expected,
                p.to_ofctl_string()
            )),
            Err(e) if e.to_string() == case.expected => Ok(()),
            Err(e) => Err(format!("expected error `{}`, got `{e}`", case.expected)),
        },
        k => Err(format!("unknown case kind {k:?}")),
    }
}

/// Compares two flow texts, treating tokens that are both IPv6 addresses as equal when
/// their values are.
pub fn same_text(a: &str, b: &str) -> bool {
    if a == b {
        return true;
    }
    let split = |s: &str| -> Vec<String> {
        let mut out = Vec::new();
        let mut cur = String::new();
        for c in s.chars() {
            if matches!(c, ',' | ' ' | '=' | '/') {
                out.push(std::mem::take(&mut cur));
                out.push(c.to_string());
            } else {
                cur.push(c);
            }
        }
        out.push(cur);
        out
    };
    let (ta, tb) = (split(a), split(b));
    ta.len() == tb.len()
        && ta.iter().zip(tb.iter()).all(|(x, y)| {
            x == y || matches!((ipv6_lenient(x), ipv6_lenient(y)), (Some(p), Some(q)) if p == q)
        })
}

/// Parses an IPv6 address, also in the form some libcs print and OVS's tests expect, with a
/// second `::` where the first stands for a single zero group (`fec0::1234:f045:8fff:1111::`
/// for `fec0:0:1234:f045:8fff:1111::`).
fn ipv6_lenient(s: &str) -> Option<Ipv6Addr> {
    if !s.contains(':') {
        return None;
    }
    if let Ok(a) = s.parse() {
        return Some(a);
    }
    if s.matches("::").count() == 2 {
        return s.replacen("::", ":0:", 1).parse().ok();
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_text_compares_ipv6_by_value() {
        assert!(same_text(
            "nd_target=fec0::1234:f045:8fff:1111:fe4e:571 actions=drop",
            "nd_target=fec0:0:1234:f045:8fff:1111:fe4e:571 actions=drop"
        ));
        assert!(same_text(
            "nd_target=fec0::1234:f045:8fff:1111::/96",
            "nd_target=fec0:0:1234:f045:8fff:1111::/96"
        ));
        assert!(!same_text("a=1", "a=2"));
    }
}
