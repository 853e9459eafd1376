//! The slow path: bridges, OpenFlow tables, and the translation of one packet on one bridge
//! into datapath actions plus the wildcard mask the datapath installs as a megaflow. No I/O
//! and no threads here.
//!
//! # Pieces
//!
//! - [`bridge`]: the configuration model (bridges, ports with OpenFlow and datapath numbers, patch
//!   peers, VLAN modes, flags, mirrors), validated as a whole; [`vsctl`] edits it with `ovs-vsctl`
//!   commands.
//! - [`switch`]: the running switch: every bridge of one datapath with its OpenFlow tables, and the
//!   one API for configuration changes and flow_mods (add, modify, delete, strict or not,
//!   replace-flows), each atomic.
//! - [`xlate`]: translation of one packet into [`odp::DpAction`]s and a megaflow mask, with OVS's
//!   semantics (resubmit, goto_table, action sets, field writes committed lazily, patch ports,
//!   counted drops).
//! - [`trace`]: `ofproto/trace`: the walk, `Megaflow:` and `Datapath actions:`.
//! - [`odp`]: OVS's datapath vocabulary: the flow-key syntax traces take and the datapath actions
//!   translation produces.
//! - [`mac_learning`]: the MAC table NORMAL will use.
//! - [`cases`]: replays OVS's trace cases (`ovs-trace-cases.jsonl`) against a [`switch::Switch`].
//!
//! # Testing
//!
//! Unit tests per action family and NORMAL/VLAN/mirror rule; property tests of megaflow
//! soundness (random tables, resubmits, patch ports, VLAN port modes, mirrors and learned
//! MACs: every packet equal to a translated one on the mask bits gets the same actions);
//! `tests/trace_cases.rs` replays the 50 OVS trace cases; `tests/difftest_ovs.rs` (ignored
//! unless OVS is installed) compares generated cases with the real OVS through `testkit`.
//!
//! # Example
//! ```
//! use pipeline::switch::Switch;
//! use pipeline::trace::TraceInput;
//! let mut sw = Switch::new();
//! sw.vsctl("add-br br0 -- add-port br0 p1 -- add-port br0 p2").unwrap();
//! sw.add_flows_text("br0", &["in_port=1,ip,actions=dec_ttl,output:2"], "").unwrap();
//! let r = sw
//!     .trace(
//!         TraceInput::Datapath(
//!             "in_port(1),eth_type(0x0800),ipv4(src=10.0.0.1,dst=10.0.0.2,proto=17,ttl=64)",
//!         ),
//!         Default::default(),
//!     )
//!     .unwrap();
//! assert_eq!(r.datapath_actions(), "set(ipv4(ttl=63)),2");
//! ```

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod bridge;
pub mod cases;
pub mod mac_learning;
pub mod odp;
pub mod switch;
pub mod trace;
pub mod vsctl;
pub mod xlate;
