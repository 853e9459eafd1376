//! Helpers shared by the datapath's integration tests (each test file is its own crate, so
//! each uses only some of them).
#![allow(dead_code)]

use std::sync::Arc;

use datapath::netdev::memory::MemoryConfig;
use datapath::upcall::{Translation, Upcall, UpcallError, UpcallRequest};
use packet::key::{fields, FlowKey};
use pipeline::odp::DpAction;
use pipeline::switch::Switch;
use pipeline::xlate::XlateDeps;

/// A memory port's queues: `n_rxq` rx and `n_txq` tx queues of 4096 frames each.
pub fn queues(n_rxq: usize, n_txq: usize) -> MemoryConfig {
    MemoryConfig {
        n_rxq,
        n_txq,
        rxq_len: 4096,
        txq_len: 4096,
    }
}

/// The datapath number of port `name` on `sw`.
pub fn dp_port(sw: &Switch, name: &str) -> u32 {
    sw.layout()
        .port_by_name(name)
        .and_then(|p| p.dp_port)
        .expect("the port has a datapath number")
}

/// A translator whose megaflows match the ingress port and the IPv4 source exactly (every new
/// source is a miss), with the same actions for all.
#[derive(Debug)]
pub struct PerSource(pub Vec<DpAction>);

impl Upcall for PerSource {
    fn translate(&self, _req: &UpcallRequest<'_>) -> Result<Translation, UpcallError> {
        let mut mask = FlowKey::default();
        for f in [fields::IN_PORT, fields::DL_TYPE, fields::NW_SRC] {
            mask.set(f, u128::MAX);
        }
        Ok(Translation {
            actions: self.0.clone(),
            mask,
            bridge: Arc::from("br0"),
            of_in_port: 1,
            deps: XlateDeps::default(),
        })
    }
}
