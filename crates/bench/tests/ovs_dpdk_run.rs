//! One real OVS-DPDK point end to end. Ignored by default: it needs root, 2 MiB hugepages,
//! Debian's openvswitch-switch-dpdk and about a minute. Run it with
//! `cargo test -p bench --test ovs_dpdk_run -- --ignored`.

use std::process::Command;

#[test]
#[ignore = "needs root, hugepages and OVS-DPDK; about a minute"]
fn ovs_dpdk_one_point_reports_a_rate() {
    let out = Command::new(env!("CARGO_BIN_EXE_ferrovs-bench"))
        .args([
            "datapath",
            "--with-ovs",
            "--no-ferrovs",
            "--flows",
            "1K",
            "--ruleset",
            "single-udp",
            "--frame-len",
            "64",
            "--seconds",
            "2",
            "--warmup-min",
            "2",
            "--json",
            "--ovs-root",
            "/tmp/ferrovs-bench-ovs-test",
        ])
        .output()
        .expect("running ferrovs-bench");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let line = stdout.lines().next().expect("one JSON line");
    let v: serde_json::Value = serde_json::from_str(line).expect("JSON");
    assert_eq!(v["system"], "ovs-dpdk");
    assert!(v["mpps"].as_f64().unwrap_or(0.0) > 0.0, "{v}");
    assert_eq!(v["megaflows"], 1);
    assert!(v["hits"]["emc"].as_u64().unwrap_or(0) > 0, "{v}");
    let _ = std::fs::remove_dir_all("/tmp/ferrovs-bench-ovs-test");
}
