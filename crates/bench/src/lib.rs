//! The library behind `ferrovs-bench` (see `src/main.rs` and the README): the benchmark
//! matrix ([`point`]), the rule sets ([`rules`]), the pcaps ([`pcap`]), and one runner per
//! system ([`ferrovs`], [`ovs_dpdk`]).
//!
//! This crate is a measuring tool, not a library for others: its runners return
//! `anyhow::Result`, so that every failure carries the command and output that caused it.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod ferrovs;
pub mod insert;
pub mod ovs_dpdk;
pub mod pcap;
pub mod point;
pub mod rules;
