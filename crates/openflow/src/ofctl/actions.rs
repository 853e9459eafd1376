//! ovs-ofctl action syntax: parse `actions=...` text and print actions in the normalized
//! form ovs-ofctl prints for a given protocol version.
//!
//! NOTE: first version (`drop`, `output:N`, bare port numbers); the full vocabulary lands
//! with the ovs-ofctl action syntax.

use crate::action::{Action, OfVersion};
use crate::field::Protocols;
use crate::flow_match::Match;
use crate::ofctl::value::{format_port, parse_port};
use crate::Error;

/// What parsing an action list yields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParsedActions {
    /// The actions (instructions last), empty for `drop`.
    pub actions: Vec<Action>,
    /// The protocols that can express these actions.
    pub usable: Protocols,
}

/// Context for parsing actions: the flow's match (some actions depend on it) and the
/// protocols the user allowed.
#[derive(Debug, Clone, Copy)]
pub struct ActionContext<'a> {
    /// The flow's match.
    pub flow_match: &'a Match,
    /// Protocols allowed by the command-line options.
    pub allowed: Protocols,
}

/// Parses the text after `actions=`.
pub fn parse_actions(s: &str, _ctx: &ActionContext<'_>) -> Result<ParsedActions, Error> {
    let mut actions = Vec::new();
    for item in s.split(',').map(str::trim).filter(|t| !t.is_empty()) {
        if item.eq_ignore_ascii_case("drop") {
            continue;
        }
        let port = item.strip_prefix("output:").unwrap_or(item);
        actions.push(Action::Output {
            port: parse_port(port)?,
            max_len: 0,
        });
    }
    Ok(ParsedActions {
        actions,
        usable: Protocols::ANY,
    })
}

/// Prints actions as ovs-ofctl does for `version` (`drop` for none).
pub fn format_actions(actions: &[Action], _version: OfVersion) -> String {
    if actions.is_empty() {
        return "drop".to_string();
    }
    actions
        .iter()
        .map(|a| match a {
            Action::Output { port, .. } => format!("output:{}", format_port(*port)),
        })
        .collect::<Vec<_>>()
        .join(",")
}
