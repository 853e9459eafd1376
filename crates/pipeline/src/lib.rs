//! The slow path: bridges, OpenFlow tables, and the translation of one packet on one bridge
//! into datapath actions plus the wildcard mask the datapath installs as a megaflow.
//!
//! So far this crate holds the datapath vocabulary shared with OVS ([`odp`]): the
//! `in_port(1),eth(..),ipv4(..)` flow-key syntax that OVS's traces take as input, and the
//! datapath actions (`2,push_vlan(vid=10,pcp=0),3`) that a translation produces and a trace
//! prints. Bridges, tables and translation land with the pipeline issue.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod bridge;
pub mod mac_learning;
pub mod odp;
pub mod vsctl;
