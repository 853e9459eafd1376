//! Test harnesses for ferrovs: a private reference Open vSwitch, the replay of OVS's own
//! trace cases, and a differential tester that runs random rule sets and packets through OVS
//! and (once the pipeline exists) through ferrovs, printing minimal reproducers.
//!
//! - [`ovs`]: [`ovs::OvsReference`] starts `ovsdb-server` and `ovs-vswitchd --enable-dummy`
//!   privately on unix sockets, builds bridges like OVS's test macros, loads flows, traces.
//! - [`trace_case`]: serde types for `testdata/ovs-trace-cases.jsonl` and their replay.
//! - [`compare`]: the `exact`, `unordered` and `normalized` comparisons of `Datapath actions:`
//!   strings, pure and shared with ferrovs's side.
//! - [`diffgen`]: a seeded generator of differential cases (a small bridge, 1–20 flows over 1–4
//!   tables, 1–5 packets in datapath syntax) and a delta-debugging minimizer.
//! - [`difftest`]: the [`difftest::TraceSystem`] seam and the runner that drives a reference and an
//!   optional system under test over generated cases.
//!
//! The `ferrovs-difftest` binary puts these together: `ferrovs-difftest ovs-cases FILE` and
//! `ferrovs-difftest run --cases N --seed S`.
//!
//! Everything that talks to OVS needs Debian's `openvswitch-switch` (no kernel module is
//! used) and fails with an `apt-get install openvswitch-switch` hint when it is missing.
//! Nothing here runs in a release build of ferrovs.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod compare;
pub mod diffgen;
pub mod difftest;
pub mod ovs;
pub mod trace_case;
