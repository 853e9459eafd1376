//! Helpers shared by the datapath's integration tests (each test file is its own crate, so
//! each uses only some of them).
#![allow(dead_code)]

use datapath::netdev::memory::MemoryConfig;
use pipeline::switch::Switch;

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
