#!/usr/bin/env bash
# The main job (the README's first command). Until the daemon exists (see ARCHITECTURE.md),
# it builds ferrovs, replays OVS's own ovs-ofctl parse cases through ferrovs's flow language
# (`N passed, M failed`), and then runs a small demo: real packets built and parsed into flow
# keys, classified against a small OpenFlow table, with the matched rule, its actions and the
# megaflow (the bits the lookup consulted) printed for each packet, traces packets through
# bridges, and runs one short point of the datapath benchmark (`ferrovs-bench datapath`) with
# its ratio to the replay->null ceiling.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/setup.sh

say "building (release)"
cargo build --release --locked -p cases --bin ferrovs-cases -p bench --bin ferrovs-bench
bin=target/release/ferrovs-cases

say "replaying OVS's ovs-ofctl parse cases (testdata/ofctl-parse-cases.jsonl)"
"$bin" parse testdata/ofctl-parse-cases.jsonl --quiet

say "flow language: one flow in ovs-ofctl's normalized form, per OpenFlow version"
"$bin" flow 'priority=100,in_port=1,tcp,nw_dst=10.0.0.0/8,tp_dst=80,actions=mod_vlan_vid:7,dec_ttl,output:2'

say "packets through a small flow table (classifier with wildcard tracking)"
"$bin" demo

say "replaying OVS's ofproto/trace cases through the pipeline (testdata/ovs-trace-cases.jsonl)"
"$bin" trace testdata/ovs-trace-cases.jsonl --quiet

say "one packet traced through two patched bridges (flows, VLAN access ports, NORMAL)"
"$bin" trace-demo

say "the cached datapath: one point of ferrovs-bench (pcap replay -> bridge -> null, 1K exact rules, 64 B)"
echo "(Mpps and cycles per packet of one PMD thread, beside the replay->null ceiling of the same pcap; %ceil is the ratio)"
target/release/ferrovs-bench datapath --flows 1K --ruleset exact --frame-len 64 \
    --seconds 2 --warmup-min 1 --warmup-max 20
