//! `ovs-vsctl`-style configuration commands applied to a [`SwitchConfig`].
//!
//! The subset OVS users (and OVS's own tests) use to build bridges: `add-br`, `del-br`,
//! `add-port BR PORT [COLUMN=VALUE...]`, `del-port [BR] PORT`, `set-fail-mode`, `set TABLE
//! RECORD COLUMN[:KEY]=VALUE...` on the Bridge, Port, Interface, Mirror, Flow_Table and
//! Open_vSwitch tables, and `--id=@NAME create Mirror ...` / `--id=@NAME get Port P` with
//! `@NAME` references. Commands are separated by `--`, as on the ovs-vsctl command line.
//!
//! [`apply`] is transactional: it works on a copy and returns it only if every command
//! succeeded and the result validates, so a failing command leaves the previous
//! configuration in force.
//!
//! # Example
//! ```
//! use pipeline::bridge::SwitchConfig;
//! use pipeline::vsctl::apply;
//! let sw = SwitchConfig::default();
//! let sw = apply(&sw, "add-br br0 -- add-port br0 p1 tag=10 -- set Interface p1 ofport_request=1").unwrap();
//! assert_eq!(sw.bridges[0].ports[0].tag, Some(10));
//! assert!(apply(&sw, "add-port br0 p2 -- set Port p9 tag=3").is_err());
//! ```

use std::collections::BTreeMap;

use crate::bridge::{
    BridgeConfig, ConfigError, FailMode, MirrorConfig, PortConfig, PortKind, PriorityTags,
    SwitchConfig, VlanMode,
};

/// Splits a command line into words, honouring single and double quotes.
fn words(s: &str) -> Result<Vec<String>, ConfigError> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut quote: Option<char> = None;
    let mut in_word = false;
    for c in s.chars() {
        match quote {
            Some(q) if c == q => quote = None,
            Some(_) => cur.push(c),
            None if c == '"' || c == '\'' => {
                quote = Some(c);
                in_word = true;
            }
            None if c.is_whitespace() => {
                if in_word {
                    out.push(std::mem::take(&mut cur));
                    in_word = false;
                }
            }
            None => {
                cur.push(c);
                in_word = true;
            }
        }
    }
    if quote.is_some() {
        return Err(ConfigError::Invalid(format!("unterminated quote in `{s}'")));
    }
    if in_word {
        out.push(cur);
    }
    Ok(out)
}

fn invalid(msg: impl Into<String>) -> ConfigError {
    ConfigError::Invalid(msg.into())
}

fn parse_u32(col: &str, v: &str) -> Result<u32, ConfigError> {
    v.parse()
        .map_err(|_| invalid(format!("{col}={v}: not a number")))
}

fn parse_list(col: &str, v: &str) -> Result<Vec<u32>, ConfigError> {
    let v = v.trim_matches(|c| c == '[' || c == ']');
    if v.is_empty() {
        return Ok(Vec::new());
    }
    v.split(',').map(|x| parse_u32(col, x.trim())).collect()
}

fn parse_bool(col: &str, v: &str) -> Result<bool, ConfigError> {
    match v {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err(invalid(format!("{col}={v}: expected true or false"))),
    }
}

/// State carried across the commands of one invocation: `@name` references.
#[derive(Default)]
struct Refs {
    /// `@name` → port name (from `get Port`).
    ports: BTreeMap<String, String>,
    /// `@name` → mirror (from `create Mirror`), attached by `set Bridge ... mirrors=`.
    mirrors: BTreeMap<String, MirrorConfig>,
}

impl Refs {
    fn port(&self, v: &str) -> Result<String, ConfigError> {
        if v.starts_with('@') {
            self.ports
                .get(v)
                .cloned()
                .ok_or_else(|| invalid(format!("{v}: unknown reference")))
        } else {
            Ok(v.to_string())
        }
    }
}

/// Applies `args` (ovs-vsctl words, commands separated by `--`) to a copy of `sw` and
/// returns the validated result.
pub fn apply(sw: &SwitchConfig, args: &str) -> Result<SwitchConfig, ConfigError> {
    let mut new = sw.clone();
    let words = words(args)?;
    let mut refs = Refs::default();
    // `create`s may be referenced before the command that defines them (ovs-vsctl
    // semantics), so they are collected first; `get`s and every other command run in order
    // (a `get` may name a port added earlier in the same invocation); port references inside
    // mirrors are resolved once everything ran.
    let commands: Vec<&[String]> = words
        .split(|w| w == "--")
        .filter(|c| !c.is_empty())
        .collect();
    for cmd in &commands {
        if let Some(id) = cmd[0].strip_prefix("--id=") {
            if cmd.get(1).is_some_and(|v| v == "create") {
                define(&new, &mut refs, id, &cmd[1..])?;
            }
        }
    }
    for cmd in &commands {
        match cmd[0].strip_prefix("--id=") {
            Some(id) if !cmd.get(1).is_some_and(|v| v == "create") => {
                define(&new, &mut refs, id, &cmd[1..])?
            }
            Some(_) => {}
            None => run(&mut new, &refs, cmd)?,
        }
    }
    for m in new.bridges.iter_mut().flat_map(|b| b.mirrors.iter_mut()) {
        for p in m
            .select_src_port
            .iter_mut()
            .chain(m.select_dst_port.iter_mut())
            .chain(m.output_port.iter_mut())
        {
            *p = refs.port(p)?;
        }
    }
    new.validate()?;
    Ok(new)
}

fn define(sw: &SwitchConfig, refs: &mut Refs, id: &str, cmd: &[String]) -> Result<(), ConfigError> {
    match cmd {
        [verb, table, name] if verb == "get" && table.eq_ignore_ascii_case("port") => {
            if !sw
                .bridges
                .iter()
                .flat_map(|b| b.ports.iter())
                .any(|p| &p.name == name)
                && !sw.bridges.iter().any(|b| &b.name == name)
            {
                return Err(ConfigError::NoSuchPort(name.clone()));
            }
            refs.ports.insert(id.to_string(), name.clone());
            Ok(())
        }
        [verb, table, cols @ ..] if verb == "create" && table.eq_ignore_ascii_case("mirror") => {
            // Port references inside are resolved after all `get`s are known.
            let mut m = MirrorConfig::default();
            for kv in cols {
                let (k, v) = kv
                    .split_once('=')
                    .ok_or_else(|| invalid(format!("{kv}: expected column=value")))?;
                match k {
                    "name" => m.name = v.to_string(),
                    "select_all" => m.select_all = parse_bool(k, v)?,
                    "select_src_port" => {
                        m.select_src_port = v.split(',').map(String::from).collect()
                    }
                    "select_dst_port" => {
                        m.select_dst_port = v.split(',').map(String::from).collect()
                    }
                    "select_vlan" => m.select_vlan = parse_list(k, v)?,
                    "output_port" => m.output_port = Some(v.to_string()),
                    "output_vlan" => m.output_vlan = Some(parse_u32(k, v)?),
                    _ => return Err(invalid(format!("Mirror has no column {k}"))),
                }
            }
            refs.mirrors.insert(id.to_string(), m);
            Ok(())
        }
        [verb, table, ..] if verb == "create" && table == "Flow_Table" => Ok(()),
        _ => Err(invalid(format!(
            "--id={id}: unsupported command `{}'",
            cmd.join(" ")
        ))),
    }
}

fn run(sw: &mut SwitchConfig, refs: &Refs, cmd: &[String]) -> Result<(), ConfigError> {
    let verb = cmd[0].as_str();
    let args = &cmd[1..];
    match (verb, args) {
        ("add-br", [br, rest @ ..]) => {
            if sw.bridges.iter().any(|b| &b.name == br) {
                return Err(ConfigError::DuplicateBridge(br.clone()));
            }
            sw.bridges.push(BridgeConfig::new(br));
            set_columns(sw, refs, "bridge", br, rest)
        }
        ("del-br", [br]) => {
            let before = sw.bridges.len();
            sw.bridges.retain(|b| &b.name != br);
            if sw.bridges.len() == before {
                return Err(ConfigError::NoSuchBridge(br.clone()));
            }
            Ok(())
        }
        ("add-port", [br, port, rest @ ..]) => {
            sw.bridge_mut(br)?.ports.push(PortConfig::new(port));
            // Columns after add-port belong to the Port record (ovs-vsctl semantics).
            set_columns(sw, refs, "port", port, rest)
        }
        ("del-port", [port]) | ("del-port", [_, port]) => {
            let mut found = false;
            for b in &mut sw.bridges {
                let n = b.ports.len();
                b.ports.retain(|p| &p.name != port);
                found |= b.ports.len() != n;
            }
            if found {
                Ok(())
            } else {
                Err(ConfigError::NoSuchPort(port.clone()))
            }
        }
        ("set-fail-mode", [br, mode]) => {
            set_columns(sw, refs, "bridge", br, &[format!("fail-mode={mode}")])
        }
        ("set", [table, record, cols @ ..]) => set_columns(sw, refs, table, record, cols),
        ("init", []) => Ok(()),
        _ => Err(invalid(format!(
            "unsupported ovs-vsctl command `{}'",
            cmd.join(" ")
        ))),
    }
}

fn set_columns(
    sw: &mut SwitchConfig,
    refs: &Refs,
    table: &str,
    record: &str,
    cols: &[String],
) -> Result<(), ConfigError> {
    for kv in cols {
        let (k, v) = kv
            .split_once('=')
            .ok_or_else(|| invalid(format!("{kv}: expected column=value")))?;
        let v = v.trim_matches('"');
        match table.to_ascii_lowercase().as_str() {
            "bridge" | "br" => set_bridge(sw, refs, record, k, v)?,
            "port" => set_port(sw.port_mut(record)?, k, v)?,
            "interface" | "int" | "iface" => set_interface(sw.port_mut(record)?, k, v)?,
            "open_vswitch" | "open_vswitch." => {
                if let ("other_config:vlan-limit", n) = (k, v) {
                    let n = parse_u32(k, n)?;
                    for b in &mut sw.bridges {
                        b.vlan_limit = n;
                    }
                }
            }
            // Prefix-tracking configuration changes only megaflows, never actions.
            "flow_table" => {}
            _ => return Err(invalid(format!("unsupported table {table}"))),
        }
    }
    Ok(())
}

fn set_bridge(
    sw: &mut SwitchConfig,
    refs: &Refs,
    br: &str,
    k: &str,
    v: &str,
) -> Result<(), ConfigError> {
    let b = sw.bridge_mut(br)?;
    match k {
        "fail-mode" | "fail_mode" => {
            b.fail_mode = match v {
                "secure" => FailMode::Secure,
                "standalone" | "" => FailMode::Standalone,
                _ => {
                    return Err(invalid(format!(
                        "fail-mode={v}: expected secure or standalone"
                    )))
                }
            }
        }
        "mirrors" => {
            b.mirrors.clear();
            for id in v.split(',').filter(|s| !s.is_empty()) {
                let m = refs
                    .mirrors
                    .get(id)
                    .cloned()
                    .ok_or_else(|| invalid(format!("{id}: unknown mirror reference")))?;
                b.mirrors.push(m);
            }
        }
        "other-config:mac-aging-time" | "other_config:mac-aging-time" => {
            b.mac_aging_secs = parse_u32(k, v)?
        }
        "other-config:mac-table-size" | "other_config:mac-table-size" => {
            b.mac_table_size = parse_u32(k, v)?
        }
        // Accepted and without effect on forwarding here.
        "datapath-type" | "datapath_type" | "protocols" => {}
        _ if k.starts_with("other-config:")
            || k.starts_with("other_config:")
            || k.starts_with("flow_tables") => {}
        _ => return Err(invalid(format!("Bridge has no column {k}"))),
    }
    Ok(())
}

fn set_port(p: &mut PortConfig, k: &str, v: &str) -> Result<(), ConfigError> {
    match k {
        "tag" => {
            p.tag = if v.is_empty() || v == "[]" {
                None
            } else {
                Some(parse_u32(k, v)?)
            }
        }
        "trunks" => p.trunks = parse_list(k, v)?,
        "cvlans" => p.cvlans = parse_list(k, v)?,
        "vlan_mode" => {
            p.vlan_mode = if v.is_empty() || v == "[]" {
                None
            } else {
                Some(VlanMode::parse(v)?)
            }
        }
        "other-config:priority-tags" | "other_config:priority-tags" => {
            p.priority_tags = match v {
                "never" | "false" => PriorityTags::Never,
                "if-nonzero" => PriorityTags::IfNonzero,
                "always" | "true" => PriorityTags::Always,
                _ => {
                    return Err(invalid(format!(
                        "priority-tags={v}: expected never, if-nonzero or always"
                    )))
                }
            }
        }
        "other-config:qinq-ethtype" | "other_config:qinq-ethtype" => {
            p.qinq_8021q = match v {
                "802.1q" => true,
                "802.1ad" => false,
                _ => {
                    return Err(invalid(format!(
                        "qinq-ethtype={v}: expected 802.1q or 802.1ad"
                    )))
                }
            }
        }
        // Interface columns given to add-port apply to the interface of the same name.
        "type" | "ofport_request" | "options:peer" => set_interface(p, k, v)?,
        _ => return Err(invalid(format!("Port has no column {k}"))),
    }
    Ok(())
}

fn set_interface(p: &mut PortConfig, k: &str, v: &str) -> Result<(), ConfigError> {
    match k {
        "type" => {
            let peer = match &p.kind {
                PortKind::Patch { peer } => peer.clone(),
                _ => None,
            };
            p.kind = match PortKind::from_type(v)? {
                PortKind::Patch { .. } => PortKind::Patch { peer },
                other => other,
            };
        }
        "ofport_request" => p.ofport_request = Some(parse_u32(k, v)?),
        "options:peer" => match &mut p.kind {
            PortKind::Patch { peer } => *peer = Some(v.to_string()),
            _ => {
                // The type may be set after the peer within one invocation.
                p.kind = PortKind::Patch {
                    peer: Some(v.to_string()),
                };
            }
        },
        _ => return Err(invalid(format!("Interface has no column {k}"))),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn apply_patch_ports_and_mirrors() {
        let sw = apply(
            &SwitchConfig::default(),
            "add-br br0 -- add-port br0 p1 -- add-port br0 p2 -- add-port br0 p3",
        )
        .unwrap();
        let sw = apply(
            &sw,
            "add-br br1 -- set bridge br1 datapath-type=dummy fail-mode=secure -- add-port br0 patch10 \
             -- set interface patch10 type=patch options:peer=patch20 ofport_request=10 \
             -- add-port br1 patch20 -- set interface patch20 type=patch options:peer=patch10 ofport_request=20",
        )
        .unwrap();
        let l = sw.validate().unwrap();
        assert_eq!(l.port("br0", "patch10").unwrap().ofport, 10);
        let sw = apply(
            &sw,
            "set Bridge br0 mirrors=@m -- --id=@p1 get Port p1 -- --id=@p3 get Port p3 \
             -- --id=@m create Mirror name=mymirror select_src_port=@p1 output_port=@p3",
        )
        .unwrap();
        let m = &sw.bridges[0].mirrors[0];
        assert_eq!(m.select_src_port, vec!["p1".to_string()]);
        assert_eq!(m.output_port.as_deref(), Some("p3"));
    }

    #[test]
    fn apply_vlan_columns() {
        let sw = apply(
            &SwitchConfig::default(),
            "add-br br0 -- set Bridge br0 fail-mode=standalone -- add-port br0 p1 trunks=10,12 \
             -- add-port br0 p9 vlan_mode=dot1q-tunnel tag=10 cvlans=10,12 other-config:qinq-ethtype=802.1q \
             -- set Interface p9 type=dummy",
        )
        .unwrap();
        assert_eq!(sw.bridges[0].fail_mode, FailMode::Standalone);
        let l = sw.validate().unwrap();
        let p9 = l.port("br0", "p9").unwrap();
        assert_eq!(p9.vlan_mode, VlanMode::Dot1qTunnel);
        assert!(p9.qinq_8021q);
        assert_eq!(p9.cvlans.len(), 2);
    }

    #[test]
    fn apply_failure_leaves_config_unchanged() {
        let sw = apply(&SwitchConfig::default(), "add-br br0").unwrap();
        let before = sw.clone();
        assert!(apply(&sw, "add-port br0 p1 -- set Port p1 tag=5000").is_err());
        assert!(apply(&sw, "add-port br0 p1 -- add-port br0 p1").is_err());
        assert!(apply(&sw, "add-port br9 p1").is_err());
        assert!(apply(&sw, "add-port br0 px -- set Interface px type=patch").is_err());
        assert!(apply(&sw, "frobnicate").is_err());
        assert_eq!(sw, before);
    }
}
