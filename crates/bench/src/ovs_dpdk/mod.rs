//! The OVS-DPDK side of `ferrovs-bench datapath --with-ovs`: Debian's `ovs-vswitchd-dpdk`,
//! net_pcap (infinite replay of the point's pcap) -> br0 -> net_null, one PMD core, run
//! privately exactly as `shared/peers/ovs-dpdk` does.
//!
//! # What it starts, and how it cleans up
//!
//! Everything lives under one root directory (default `/tmp/ferrovs-bench-ovs`):
//! `run/ log/ db/ etc/` (`OVS_RUNDIR`, `OVS_LOGDIR`, `OVS_DBDIR`, `OVS_SYSCONFDIR` for every
//! command), `huge/` (a private hugetlbfs mount), `rules/`, `raw/<point>/` (the raw outputs of
//! each run). [`OvsDpdk::setup`]
//! 1. installs `openvswitch-switch-dpdk`, `librte-net-pcap23`, `librte-net-null23` and `dpdk-dev`
//!    (for `dpdk-testpmd`) if missing, with a `/usr/sbin/policy-rc.d` that exits 101 while apt
//!    runs, so Debian starts no system service;
//! 2. adds 2 MiB hugepages to the kernel's pool (and records how many it got in `hugepages.added`)
//!    and mounts `huge/`;
//! 3. starts its own `ovsdb-server` (pidfile in `run/`) and sets `dpdk-init`, the lcore mask (every
//!    core but the PMD's), `pmd-cpu-mask` (the PMD core), `dpdk-socket-mem` and
//!    `dpdk-extra="--file-prefix=ferrovsbench --huge-dir=<root>/huge --no-pci"`.
//!
//! Each point starts a fresh `ovs-vswitchd-dpdk` inside the network namespace
//! `ferrovsbench` (the netdev datapath creates tap devices `ovs-netdev` and `br0`, which
//! would clash with any other userspace OVS), builds `br0` (netdev, `fail_mode=secure`) with
//! `p1` = `net_null0,no-rx=1` (ofport 2), loads the rules with `ovs-ofctl add-flows` (timed),
//! then adds `p0` = `net_pcap0,rx_pcap=<pcap>,infinite_rx=1` (ofport 1) and traffic starts.
//! Warm-up (as `bench.py`): every 2 s sample p1's tx counter, the megaflow count and the
//! upcalls; done when the last three rates differ by < 3 %, the megaflow count by < 0.5 % and
//! upcalls are < 0.1 % of packets (at least `warmup_min_secs`, at most `warmup_max_secs`).
//! Then `pmd-stats-clear`, p1's tx counter over `seconds` -> Mpps, `pmd-stats-show` (cycles
//! per packet, hits per level), `dpctl/dump-flows` (megaflows). The PMD thread's CPU time
//! (`/proc/<pid>/task/<tid>/stat`) is read around the window; a window in which it got less
//! than 97 % of its core is measured again (up to 3 windows, the best is kept). The daemon is
//! stopped after the point, so nothing of OVS runs while ferrovs is measured.
//!
//! The ceiling of a pcap is DPDK's own replay without a switch: `dpdk-testpmd` with the same
//! two virtual devices, io forwarding, one forwarding lcore on the PMD core.
//!
//! [`Drop`] (and `ferrovs-bench ovs-cleanup` after a crash) stops only the processes whose
//! pids we recorded, deletes our namespace, unmounts `huge/` and gives back exactly the
//! hugepages we added.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::io::{BufRead as _, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};
use std::{fs, thread};

use anyhow::{bail, Context as _};
use serde_json::{json, Value};

use crate::point::{Point, PointResult, RunOptions};
use crate::rules;

mod parse;
pub use parse::*;

/// The system name in results.
pub const SYSTEM: &str = "ovs-dpdk";
/// Debian's DPDK build of ovs-vswitchd (run directly; the `ovs-vswitchd` alternative stays
/// on the non-DPDK build).
pub const VSWITCHD: &str = "/usr/lib/openvswitch-switch-dpdk/ovs-vswitchd-dpdk";
/// Default root of our private instance.
pub const DEFAULT_ROOT: &str = "/tmp/ferrovs-bench-ovs";
/// Our network namespace and DPDK file prefix.
const NETNS: &str = "ferrovsbench";
const FILE_PREFIX: &str = "ferrovsbench";
const TESTPMD_FILE_PREFIX: &str = "ferrovsbench-tpmd";
/// The tunables reset to OVS's defaults before every run (then `--ovs-other-config`).
const TUNABLES: [&str; 6] = [
    "flow-limit",
    "max-idle",
    "smc-enable",
    "emc-insert-inv-prob",
    "max-revalidator",
    "min-revalidate-pps",
];
/// The file naming the pid of the run that owns a root.
const OWNER_FILE: &str = "owner.pid";
const NR_HUGEPAGES: &str = "/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages";
/// Seconds between warm-up samples; relative spread of the last three rates that counts as
/// stable; PMD CPU share below which a window counts as contended; windows tried.
const WARM_STEP_SECS: f64 = 2.0;
const STABLE: f64 = 0.03;
const MIN_SHARE: f64 = 0.97;
const TRIES: usize = 3;
/// testpmd statistics blocks skipped before its ceiling window.
const TESTPMD_WARM_SAMPLES: usize = 3;

/// The Debian packages the runner needs, with a file each that shows it is installed.
const PACKAGES: [(&str, &str); 4] = [
    ("openvswitch-switch-dpdk", VSWITCHD),
    (
        "librte-net-pcap23",
        "/usr/lib/x86_64-linux-gnu/dpdk/pmds-23.0/librte_net_pcap.so.23",
    ),
    (
        "librte-net-null23",
        "/usr/lib/x86_64-linux-gnu/dpdk/pmds-23.0/librte_net_null.so.23",
    ),
    ("dpdk-dev", "/usr/bin/dpdk-testpmd"),
];

/// How the private OVS-DPDK is set up.
#[derive(Debug, Clone)]
pub struct OvsConfig {
    /// Root of run/log/db dirs, the hugetlbfs mount, rules and raw outputs.
    pub root: PathBuf,
    /// The core of the PMD thread (and of testpmd's forwarding lcore).
    pub pmd_core: usize,
    /// The core of everything else (main, handler, revalidator threads; testpmd's main lcore).
    pub lcore: usize,
    /// `dpdk-socket-mem`, MiB (also testpmd's `-m`).
    pub socket_mem_mb: u64,
    /// 2 MiB hugepages we add to the kernel's pool for the run.
    pub hugepages: u64,
    /// Extra `other_config` settings (`flow-limit=1000000`), applied before every run.
    pub other_config: Vec<String>,
    /// Install missing packages with apt-get.
    pub install: bool,
    /// Measure the ceiling with dpdk-testpmd (else with OVS's own `single` rule set).
    pub testpmd_ceiling: bool,
    /// `ferrovs-bench` itself: if set, a watchdog (`setsid`, so Ctrl-C does not reach it)
    /// runs `<exe> ovs-cleanup --ovs-root <root>` when this process dies without cleaning up.
    pub cleanup_exe: Option<PathBuf>,
}

impl OvsConfig {
    /// The defaults for points up to `max_flows` flows: 1 GiB of socket memory (2 GiB for
    /// more than 64K flows: net_pcap holds every frame of the pcap in an mbuf of OVS's pool
    /// of 262144), PMD on core 1, the rest on core 0.
    pub fn for_max_flows(max_flows: u32) -> Self {
        let socket_mem_mb = if max_flows > 64_000 { 2048 } else { 1024 };
        OvsConfig {
            root: PathBuf::from(DEFAULT_ROOT),
            pmd_core: 1,
            lcore: 0,
            socket_mem_mb,
            hugepages: socket_mem_mb / 2 + 64,
            other_config: Vec::new(),
            install: true,
            testpmd_ceiling: true,
            cleanup_exe: None,
        }
    }
}

/// A running private OVS-DPDK environment (ovsdb-server, hugepages, namespace).
#[derive(Debug)]
pub struct OvsDpdk {
    cfg: OvsConfig,
    clk_tck: f64,
    ceilings: HashMap<(u32, usize), Ceiling>,
    version: String,
}

/// The replay -> null ceiling of one pcap.
#[derive(Debug, Clone)]
pub struct Ceiling {
    /// Mpps.
    pub mpps: f64,
    /// How it was measured.
    pub source: String,
    /// CPU share of the forwarding thread during the window.
    pub cpu_share: Option<f64>,
    /// (Mpps, CPU share) of every window tried (another is tried while the share is < 97 %).
    pub windows: Vec<(f64, Option<f64>)>,
}

fn dirs(root: &Path) -> [(&'static str, PathBuf); 4] {
    [
        ("OVS_RUNDIR", root.join("run")),
        ("OVS_LOGDIR", root.join("log")),
        ("OVS_DBDIR", root.join("db")),
        ("OVS_SYSCONFDIR", root.join("etc")),
    ]
}

fn run_dir(root: &Path) -> PathBuf {
    root.join("run")
}

/// Runs `cmd`, returns its stdout; a non-zero exit is an error with its stderr.
fn output(cmd: &mut Command) -> anyhow::Result<String> {
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("running {cmd:?}"))?;
    if !out.status.success() {
        bail!(
            "{cmd:?} failed ({}): {}{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr).trim_end()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn is_root() -> bool {
    fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .and_then(|l| l.split_whitespace().nth(2).map(|u| u == "0"))
        })
        .unwrap_or(false)
}

/// Installs the missing packages (`openvswitch-switch-dpdk`, `librte-net-pcap23`,
/// `librte-net-null23`, `dpdk-dev`); keeps Debian from starting services while
/// apt runs by a temporary `/usr/sbin/policy-rc.d` (only if the machine has none).
pub fn ensure_packages(install: bool) -> anyhow::Result<()> {
    let missing: Vec<&str> = PACKAGES
        .iter()
        .filter(|(_, f)| !Path::new(f).exists())
        .map(|(p, _)| *p)
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    if !install {
        bail!(
            "missing packages: {} (apt-get install them)",
            missing.join(" ")
        );
    }
    eprintln!("ovs-dpdk: apt-get install {}", missing.join(" "));
    let policy = Path::new("/usr/sbin/policy-rc.d");
    let own_policy = !policy.exists();
    if own_policy {
        fs::write(policy, "#!/bin/sh\nexit 101\n").context("writing /usr/sbin/policy-rc.d")?;
        output(Command::new("chmod").args(["+x", "/usr/sbin/policy-rc.d"]))?;
    }
    let install = || {
        output(
            Command::new("apt-get")
                .args(["install", "-y", "-q", "--no-install-recommends"])
                .args(&missing)
                .env("DEBIAN_FRONTEND", "noninteractive"),
        )
    };
    // A stale package list is the usual reason for a failed install: update once and retry.
    let res = install().or_else(|_| {
        output(
            Command::new("apt-get")
                .args(["update", "-q"])
                .env("DEBIAN_FRONTEND", "noninteractive"),
        )?;
        install()
    });
    if own_policy {
        let _ = fs::remove_file(policy);
    }
    res.map(|_| ())
}

impl OvsDpdk {
    /// Installs what is missing, reserves hugepages and starts our ovsdb-server. Cleans up
    /// what a crashed earlier run left under the same root first.
    pub fn setup(cfg: OvsConfig) -> anyhow::Result<Self> {
        if !is_root() {
            bail!("--with-ovs needs root (hugepages, mount, network namespace)");
        }
        ensure_packages(cfg.install)?;
        fs::create_dir_all(&cfg.root)
            .with_context(|| format!("creating {}", cfg.root.display()))?;
        // Claim the root first, so that the watchdog of an earlier run leaves it alone.
        let owner = cfg.root.join(OWNER_FILE);
        fs::write(&owner, std::process::id().to_string())
            .with_context(|| format!("writing {}", owner.display()))?;
        cleanup(&cfg.root)?;
        for (_, d) in dirs(&cfg.root) {
            fs::create_dir_all(&d).with_context(|| format!("creating {}", d.display()))?;
        }
        if let Some(exe) = &cfg.cleanup_exe {
            start_watchdog(&cfg.root, exe)?;
        }
        for d in ["huge", "rules", "raw"] {
            let d = cfg.root.join(d);
            fs::create_dir_all(&d).with_context(|| format!("creating {}", d.display()))?;
        }
        let clk_tck = output(Command::new("getconf").arg("CLK_TCK"))
            .ok()
            .and_then(|s| s.trim().parse::<f64>().ok())
            .unwrap_or(100.0);
        let version = output(Command::new(VSWITCHD).arg("--version"))
            .map(|v| v.lines().next().unwrap_or_default().to_owned())
            .unwrap_or_default();
        let ovs = OvsDpdk {
            cfg,
            clk_tck,
            ceilings: HashMap::new(),
            version,
        };
        // From here on, Drop cleans up whatever of the rest succeeded.
        ovs.hugepages_up()?;
        ovs.start_db()?;
        Ok(ovs)
    }

    fn root(&self) -> &Path {
        &self.cfg.root
    }

    fn cmd(&self, prog: &str) -> Command {
        let mut c = Command::new(prog);
        for (k, v) in dirs(self.root()) {
            c.env(k, v);
        }
        c
    }

    fn db(&self) -> String {
        format!("unix:{}", run_dir(self.root()).join("db.sock").display())
    }

    fn vsctl(&self, args: &[&str]) -> anyhow::Result<String> {
        output(
            self.cmd("ovs-vsctl")
                .arg(format!("--db={}", self.db()))
                .arg("--timeout=60")
                .args(args),
        )
    }

    fn appctl(&self, args: &[&str]) -> anyhow::Result<String> {
        output(
            self.cmd("ovs-appctl")
                .arg("-t")
                .arg(run_dir(self.root()).join("ovs-vswitchd.ctl"))
                .arg("--timeout=120")
                .args(args),
        )
    }

    fn ofctl(&self, command: &str, args: &[&str]) -> anyhow::Result<String> {
        let mgmt = format!("unix:{}", run_dir(self.root()).join("br0.mgmt").display());
        output(
            self.cmd("ovs-ofctl")
                .args(["-O", "OpenFlow13", command, &mgmt])
                .args(args),
        )
    }

    fn hugepages_up(&self) -> anyhow::Result<()> {
        let marker = self.root().join("hugepages.added");
        let before = read_u64(NR_HUGEPAGES)?;
        fs::write(NR_HUGEPAGES, (before + self.cfg.hugepages).to_string())
            .with_context(|| format!("writing {NR_HUGEPAGES}"))?;
        let added = read_u64(NR_HUGEPAGES)?.saturating_sub(before);
        fs::write(&marker, added.to_string())
            .with_context(|| format!("writing {}", marker.display()))?;
        if added < self.cfg.socket_mem_mb / 2 {
            bail!(
                "asked the kernel for {} more 2 MiB hugepages and got {added}; {} MiB of \
                 socket memory need {}",
                self.cfg.hugepages,
                self.cfg.socket_mem_mb,
                self.cfg.socket_mem_mb / 2
            );
        }
        let huge = self.root().join("huge");
        if !is_mounted(&huge) {
            output(
                Command::new("mount")
                    .args(["-t", "hugetlbfs", "-o", "pagesize=2M", "nodev"])
                    .arg(&huge),
            )?;
        }
        eprintln!("ovs-dpdk: added {added} hugepages of 2 MiB");
        Ok(())
    }

    /// Makes sure `HugePages_Free` covers the socket memory of the next DPDK process: the
    /// pool is the kernel's, and another process on the machine may have taken pages from it
    /// since [`Self::hugepages_up`]. Adds what is missing (counted in `hugepages.added`, so it
    /// is given back too).
    fn ensure_free_hugepages(&self) -> anyhow::Result<()> {
        let need = self.cfg.socket_mem_mb / 2;
        // The pages of a DPDK process we just stopped come back a moment after it is gone.
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut free = meminfo_value("HugePages_Free").unwrap_or(0);
        while free < need && Instant::now() < deadline {
            thread::sleep(Duration::from_millis(200));
            free = meminfo_value("HugePages_Free").unwrap_or(0);
        }
        if free >= need {
            return Ok(());
        }
        let marker = self.root().join("hugepages.added");
        let before = read_u64(NR_HUGEPAGES)?;
        fs::write(NR_HUGEPAGES, (before + need - free).to_string())
            .with_context(|| format!("writing {NR_HUGEPAGES}"))?;
        let got = read_u64(NR_HUGEPAGES)?.saturating_sub(before);
        let added: u64 = fs::read_to_string(&marker)
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(0);
        fs::write(&marker, (added + got).to_string())
            .with_context(|| format!("writing {}", marker.display()))?;
        eprintln!(
            "ovs-dpdk: only {free} hugepages were free (another process uses the pool); added \
             {got} more"
        );
        if free + got < need {
            bail!(
                "{need} free 2 MiB hugepages needed, the kernel has {}",
                free + got
            );
        }
        Ok(())
    }

    fn start_db(&self) -> anyhow::Result<()> {
        let run = run_dir(self.root());
        let conf = self.root().join("db").join("conf.db");
        if !conf.exists() {
            output(
                self.cmd("ovsdb-tool")
                    .arg("create")
                    .arg(&conf)
                    .arg("/usr/share/openvswitch/vswitch.ovsschema"),
            )?;
        }
        output(
            self.cmd("ovsdb-server")
                .arg(&conf)
                .arg(format!("--remote=punix:{}", run.join("db.sock").display()))
                .arg(format!(
                    "--pidfile={}",
                    run.join("ovsdb-server.pid").display()
                ))
                .arg(format!(
                    "--unixctl={}",
                    run.join("ovsdb-server.ctl").display()
                ))
                .arg(format!(
                    "--log-file={}",
                    self.root().join("log").join("ovsdb-server.log").display()
                ))
                .args(["--detach", "--no-chdir"]),
        )?;
        self.vsctl(&["--no-wait", "init"])?;
        let lcore_mask = format!(
            "other_config:dpdk-lcore-mask=0x{:x}",
            1u64 << self.cfg.lcore
        );
        let pmd_mask = format!(
            "other_config:pmd-cpu-mask=0x{:x}",
            1u64 << self.cfg.pmd_core
        );
        let socket_mem = format!("other_config:dpdk-socket-mem={}", self.cfg.socket_mem_mb);
        let extra = format!(
            "other_config:dpdk-extra=\"--file-prefix={FILE_PREFIX} --huge-dir={} --no-pci\"",
            self.root().join("huge").display()
        );
        self.vsctl(&[
            "--no-wait",
            "set",
            "Open_vSwitch",
            ".",
            "other_config:dpdk-init=true",
            &lcore_mask,
            &pmd_mask,
            &socket_mem,
            &extra,
        ])?;
        Ok(())
    }

    fn vswitchd_pid(&self) -> Option<u32> {
        read_pidfile(&run_dir(self.root()).join("ovs-vswitchd.pid"))
    }

    fn start_vswitchd(&self) -> anyhow::Result<u32> {
        self.stop_vswitchd();
        let _ = self.vsctl(&["--no-wait", "--if-exists", "del-br", "br0"]);
        let mut remove = vec!["--no-wait", "remove", "Open_vSwitch", ".", "other_config"];
        remove.extend(TUNABLES);
        self.vsctl(&remove)?;
        if !self.cfg.other_config.is_empty() {
            let sets: Vec<String> = self
                .cfg
                .other_config
                .iter()
                .map(|o| {
                    if o.starts_with("other_config:") {
                        o.clone()
                    } else {
                        format!("other_config:{o}")
                    }
                })
                .collect();
            let mut args = vec!["--no-wait", "set", "Open_vSwitch", "."];
            args.extend(sets.iter().map(String::as_str));
            self.vsctl(&args)?;
        }
        self.ensure_free_hugepages()?;
        let netns_list = output(Command::new("ip").args(["netns", "list"]))?;
        if !netns_list.split_whitespace().any(|w| w == NETNS) {
            output(Command::new("ip").args(["netns", "add", NETNS]))?;
        }
        let run = run_dir(self.root());
        output(
            self.cmd("ip")
                .args(["netns", "exec", NETNS, VSWITCHD])
                .arg(self.db())
                .arg(format!(
                    "--pidfile={}",
                    run.join("ovs-vswitchd.pid").display()
                ))
                .arg(format!(
                    "--unixctl={}",
                    run.join("ovs-vswitchd.ctl").display()
                ))
                .arg(format!(
                    "--log-file={}",
                    self.root().join("log").join("ovs-vswitchd.log").display()
                ))
                .args(["--detach", "--no-chdir"]),
        )?;
        let pid = self
            .vswitchd_pid()
            .context("ovs-vswitchd-dpdk detached without a pidfile")?;
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let init = self.vsctl(&["get", "Open_vSwitch", ".", "dpdk_initialized"]);
            if init.is_ok_and(|v| v.trim() == "true") {
                break;
            }
            if Instant::now() > deadline {
                bail!(
                    "DPDK did not initialize within 60 s (see {})",
                    self.root().join("log/ovs-vswitchd.log").display()
                );
            }
            thread::sleep(Duration::from_millis(500));
        }
        Ok(pid)
    }

    /// Stops the ovs-vswitchd we started (by its pidfile), if it runs.
    pub fn stop_vswitchd(&self) {
        stop_pidfile(&run_dir(self.root()).join("ovs-vswitchd.pid"));
        let _ = fs::remove_dir_all(Path::new("/var/run/dpdk").join(FILE_PREFIX));
    }

    /// Measures `point` once on OVS-DPDK (a fresh ovs-vswitchd, stopped again at the end).
    pub fn run_point(
        &mut self,
        point: &Point,
        opts: &RunOptions,
        pcap: &Path,
    ) -> anyhow::Result<PointResult> {
        let res = self.run_point_inner(point, opts, pcap);
        self.stop_vswitchd();
        let mut r = res?;
        match self.ceiling(point, opts, pcap) {
            Ok(c) => {
                r.ceiling_mpps = Some(c.mpps);
                r.ceiling_source = Some(c.source);
                r.ratio_to_ceiling = Some(round3(r.mpps / c.mpps));
                r.extra
                    .insert("ceiling_cpu_share".into(), json!(c.cpu_share));
                r.extra.insert("ceiling_windows".into(), json!(c.windows));
                if let Some(share) = c.cpu_share.filter(|s| *s > 0.1) {
                    r.extra.insert(
                        "ceiling_mpps_per_core".into(),
                        json!(round3(c.mpps / share)),
                    );
                }
            }
            Err(e) => {
                eprintln!("ovs-dpdk: no ceiling for {point}: {e:#}");
            }
        }
        Ok(r)
    }

    fn run_point_inner(
        &mut self,
        point: &Point,
        opts: &RunOptions,
        pcap: &Path,
    ) -> anyhow::Result<PointResult> {
        let tag = format!("f{}_s{}_{}", point.flows, point.frame_len, point.ruleset);
        let raw = self.root().join("raw").join(&tag);
        fs::create_dir_all(&raw).with_context(|| format!("creating {}", raw.display()))?;
        let rules_file = self.root().join("rules").join(match point.ruleset {
            r @ (crate::point::Ruleset::Exact
            | crate::point::Ruleset::Mixed
            | crate::point::Ruleset::Masks8) => {
                format!("{r}_{}.of", point.flows)
            }
            r => format!("{r}.of"),
        });
        fs::write(
            &rules_file,
            rules::rules_text(point.ruleset, point.flows, "p1"),
        )
        .with_context(|| format!("writing {}", rules_file.display()))?;

        let mut r = PointResult::new(SYSTEM, point);
        let pid = self.start_vswitchd()?;
        self.vsctl(&[
            "add-br",
            "br0",
            "--",
            "set",
            "bridge",
            "br0",
            "datapath_type=netdev",
            "fail_mode=secure",
        ])?;
        self.vsctl(&[
            "add-port",
            "br0",
            "p1",
            "--",
            "set",
            "Interface",
            "p1",
            "type=dpdk",
            "ofport_request=2",
            "options:dpdk-devargs=\"net_null0,no-rx=1\"",
        ])?;
        self.ofctl("del-flows", &[])?;
        let t0 = Instant::now();
        self.ofctl("add-flows", &[&rules_file.to_string_lossy()])?;
        r.add_flows_secs = Some(round3(t0.elapsed().as_secs_f64()));
        r.of_rules = parse_flow_count(&self.ofctl("dump-aggregate", &[])?);
        let want = rules::rule_count(point.ruleset, point.flows);
        if r.of_rules != Some(want) {
            bail!("br0 holds {:?} rules, expected {want}", r.of_rules);
        }
        let devargs = format!(
            "options:dpdk-devargs=\"net_pcap0,rx_pcap={},infinite_rx=1\"",
            pcap.display()
        );
        self.vsctl(&[
            "add-port",
            "br0",
            "p0",
            "--",
            "set",
            "Interface",
            "p0",
            "type=dpdk",
            "ofport_request=1",
            &devargs,
        ])?;

        // Warm-up.
        let t_start = Instant::now();
        let mut hist: Vec<(f64, u64, u64, f64, f64)> = Vec::new();
        let mut trace = Vec::new();
        loop {
            thread::sleep(Duration::from_secs_f64(WARM_STEP_SECS));
            let (ports, megaflows) = parse_port_stats(&self.appctl(&["dpctl/show", "-s"])?);
            let ps = parse_pmd_stats(&self.appctl(&["dpif-netdev/pmd-stats-show"])?);
            let now = t_start.elapsed().as_secs_f64();
            let tx = ports.get("p1").map_or(0, |p| p.tx_packets);
            let miss = ps.get("miss with success upcall").copied().unwrap_or(0.0)
                + ps.get("miss with failed upcall").copied().unwrap_or(0.0);
            let rx = ps.get("packets received").copied().unwrap_or(0.0);
            hist.push((now, tx, megaflows.unwrap_or(0), rx, miss));
            trace.push(json!([round3(now), tx, megaflows, miss]));
            if hist.len() >= 4 && now >= opts.warmup_min_secs && warm(&hist) {
                break;
            }
            if now >= opts.warmup_max_secs {
                r.warmup_timeout = true;
                break;
            }
        }
        r.warmup_secs = round3(t_start.elapsed().as_secs_f64());
        r.extra.insert("warmup_trace".into(), Value::Array(trace));

        // Measurement windows.
        let mut windows: Vec<Window> = Vec::new();
        for k in 0..TRIES {
            let w = self.window(pid, opts.seconds)?;
            let ok = w.pmd_cpu_share.map_or(true, |s| s >= MIN_SHARE);
            windows.push(w);
            if ok {
                break;
            }
            if k + 1 < TRIES {
                thread::sleep(Duration::from_secs(3));
            }
        }
        r.extra.insert(
            "windows".into(),
            json!(windows
                .iter()
                .map(|w| json!([round3(w.tx_mpps), w.pmd_cpu_share]))
                .collect::<Vec<_>>()),
        );
        let w = windows
            .into_iter()
            .max_by(|a, b| {
                (a.pmd_cpu_share.unwrap_or(0.0), a.tx_mpps)
                    .partial_cmp(&(b.pmd_cpu_share.unwrap_or(0.0), b.tx_mpps))
                    .unwrap_or(std::cmp::Ordering::Equal)
            })
            .context("no measurement window")?;
        fs::write(raw.join("pmd-stats-show.txt"), &w.pmd_raw).ok();
        fs::write(raw.join("dpctl-show-s.txt"), &w.show).ok();
        let pmd = parse_pmd_stats(&w.pmd_raw);
        r.mpps = round3(w.tx_mpps);
        r.mpps_min = r.mpps;
        r.mpps_max = r.mpps;
        r.seconds = round3(w.seconds);
        r.pmd_cpu_share = w.pmd_cpu_share;
        // On a shared machine: the rate scaled to a whole core (an estimate; a busy-polling
        // thread's packets are about proportional to the CPU time it gets).
        if let Some(share) = w.pmd_cpu_share.filter(|s| *s > 0.1) {
            r.extra
                .insert("mpps_per_core".into(), json!(round3(w.tx_mpps / share)));
        }
        r.cycles_per_pkt = pmd.get("avg cycles per packet").copied().unwrap_or(0.0);
        r.hits = hits_from_pmd_stats(&pmd);
        r.extra.insert("rx_mpps".into(), json!(round3(w.rx_mpps)));
        r.extra.insert("pmd_stats".into(), json!(pmd));
        r.extra.insert("loadavg".into(), json!(w.loadavg));

        let upcall = self.appctl(&["upcall/show"]).unwrap_or_default();
        fs::write(raw.join("upcall-show.txt"), &upcall).ok();
        if let Some(limit) = parse_upcall_flow_limit(&upcall) {
            r.extra.insert("flow_limit".into(), json!(limit));
        }
        let dump = self.appctl(&["dpctl/dump-flows"])?;
        r.megaflows = count_megaflows(&dump);
        let head: String = dump.lines().take(50).fold(String::new(), |mut s, l| {
            let _ = writeln!(s, "{l}");
            s
        });
        fs::write(raw.join("dump-flows.head.txt"), head).ok();
        let status = fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
        r.rss_bytes = status_kb(&status, "VmRSS").unwrap_or(0) * 1024;
        r.hugetlb_bytes = status_kb(&status, "HugetlbPages").map(|k| k * 1024);
        r.extra.insert("ovs_version".into(), json!(self.version));
        r.extra
            .insert("other_config".into(), json!(self.cfg.other_config));
        Ok(r)
    }

    fn window(&self, pid: u32, seconds: f64) -> anyhow::Result<Window> {
        self.appctl(&["dpif-netdev/pmd-stats-clear"])?;
        let (p0, _) = parse_port_stats(&self.appctl(&["dpctl/show", "-s"])?);
        let tk0 = thread_ticks(pid, "pmd");
        let la0 = loadavg();
        let t0 = Instant::now();
        thread::sleep(Duration::from_secs_f64(seconds));
        let show = self.appctl(&["dpctl/show", "-s"])?;
        let (p1, _) = parse_port_stats(&show);
        let tk1 = thread_ticks(pid, "pmd");
        let dt = t0.elapsed().as_secs_f64();
        let pmd_raw = self.appctl(&["dpif-netdev/pmd-stats-show"])?;
        let delta = |a: &BTreeMap<String, PortCounters>,
                     b: &BTreeMap<String, PortCounters>,
                     port: &str,
                     f: fn(&PortCounters) -> u64| {
            let x = a.get(port).map_or(0, f);
            let y = b.get(port).map_or(0, f);
            to_f64(y.saturating_sub(x)) / dt / 1e6
        };
        Ok(Window {
            tx_mpps: delta(&p0, &p1, "p1", |c| c.tx_packets),
            rx_mpps: delta(&p0, &p1, "p0", |c| c.rx_packets),
            seconds: dt,
            pmd_cpu_share: match (tk0, tk1) {
                (Some(a), Some(b)) => Some(round3(to_f64(b.saturating_sub(a)) / self.clk_tck / dt)),
                _ => None,
            },
            loadavg: (la0, loadavg()),
            pmd_raw,
            show,
        })
    }

    /// The replay -> null ceiling of `pcap` (cached per flows and frame length).
    pub fn ceiling(
        &mut self,
        point: &Point,
        opts: &RunOptions,
        pcap: &Path,
    ) -> anyhow::Result<Ceiling> {
        let key = (point.flows, point.frame_len);
        if let Some(c) = self.ceilings.get(&key) {
            return Ok(c.clone());
        }
        let tried = if self.cfg.testpmd_ceiling {
            self.testpmd_ceiling(point, opts, pcap).map_err(|e| {
                eprintln!("ovs-dpdk: testpmd ceiling failed ({e:#}); using OVS's `single`");
                format!(
                    "testpmd failed: {}",
                    format!("{e:#}").lines().next().unwrap_or("")
                )
            })
        } else {
            Err("--ovs-ceiling single".to_owned())
        };
        let c = match tried {
            Ok(c) => c,
            Err(why) => {
                // OVS's own `single` rule set, served by the PMD's simple-match path (no EMC,
                // SMC or dpcls), is the closest OVS gets to replay -> null.
                let single = Point {
                    ruleset: crate::point::Ruleset::Single,
                    ..*point
                };
                let res = self.run_point_inner(&single, opts, pcap);
                self.stop_vswitchd();
                let r = res?;
                Ceiling {
                    mpps: r.mpps,
                    source: format!("ovs-dpdk `single` rule set (simple-match path; {why})"),
                    cpu_share: r.pmd_cpu_share,
                    windows: vec![(r.mpps, r.pmd_cpu_share)],
                }
            }
        };
        self.ceilings.insert(key, c.clone());
        Ok(c)
    }

    fn testpmd_ceiling(
        &self,
        point: &Point,
        opts: &RunOptions,
        pcap: &Path,
    ) -> anyhow::Result<Ceiling> {
        self.stop_vswitchd();
        self.ensure_free_hugepages()?;
        let log_path = self.root().join("log").join("testpmd.log");
        let err_path = self.root().join("log").join("testpmd.err");
        let err_file = fs::File::create(&err_path)
            .with_context(|| format!("creating {}", err_path.display()))?;
        let mbufs = u64::from(point.flows) + 32_768;
        let mut child = Command::new("stdbuf")
            .args(["-oL", "dpdk-testpmd"])
            .arg("-l")
            .arg(format!("{},{}", self.cfg.lcore, self.cfg.pmd_core))
            .arg("--main-lcore")
            .arg(self.cfg.lcore.to_string())
            .args([
                "--in-memory",
                "--no-pci",
                "--file-prefix",
                TESTPMD_FILE_PREFIX,
            ])
            .arg("--huge-dir")
            .arg(self.root().join("huge"))
            .arg("-m")
            .arg(self.cfg.socket_mem_mb.to_string())
            .arg("--vdev")
            .arg(format!(
                "net_pcap0,rx_pcap={},infinite_rx=1",
                pcap.display()
            ))
            .args(["--vdev", "net_null0,no-rx=1", "--"])
            .args([
                "--forward-mode=io",
                "--nb-cores=1",
                "--rxq=1",
                "--txq=1",
                "--burst=32",
                "--stats-period=1",
            ])
            .arg(format!("--total-num-mbufs={mbufs}"))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(err_file)
            .spawn()
            .context("starting dpdk-testpmd")?;
        let pid = child.id();
        fs::write(run_dir(self.root()).join("testpmd.pid"), pid.to_string()).ok();
        let res = self.read_testpmd(&mut child, opts);
        stop_child(&mut child);
        let _ = fs::remove_file(run_dir(self.root()).join("testpmd.pid"));
        let run = match res {
            Ok(v) => v,
            Err(e) => {
                let err = fs::read_to_string(&err_path).unwrap_or_default();
                return Err(e.context(format!("dpdk-testpmd: {}", err.trim_end())));
            }
        };
        fs::write(&log_path, &run.log).ok();
        Ok(Ceiling {
            mpps: run.mpps,
            source: "dpdk-testpmd io fwd net_pcap(infinite_rx) -> net_null, 1 lcore".into(),
            cpu_share: run.cpu_share,
            windows: run.windows,
        })
    }

    /// Reads testpmd's periodic port statistics (one block a second, `--stats-period=1`):
    /// skips the first [`TESTPMD_WARM_SAMPLES`] blocks in which port 1 transmits, then
    /// averages port 1's `Tx-pps` over the next `min(seconds, 10)` blocks. testpmd computes
    /// `Tx-pps` from the TSC over each block's interval, so the result does not depend on when
    /// its (buffered) output reaches us. Returns (Mpps, CPU share of the forwarding lcore,
    /// the output read).
    fn read_testpmd(&self, child: &mut Child, opts: &RunOptions) -> anyhow::Result<TestpmdRun> {
        let stdout = child.stdout.take().context("testpmd stdout")?;
        let (tx, rx) = mpsc::channel::<String>();
        thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let pid = child.id();
        let mut parser = TestpmdStats::default();
        let mut log = String::new();
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        let window = opts.seconds.clamp(1.0, 10.0).round() as usize;
        let deadline = Instant::now() + Duration::from_secs(180);
        let mut n_active = 0;
        let mut pps = Vec::new();
        let mut t0: Option<(Instant, Option<u64>)> = None;
        let mut windows: Vec<(f64, Option<f64>)> = Vec::new();
        loop {
            if Instant::now() > deadline {
                bail!("no steady testpmd output within 180 s");
            }
            let line = match rx.recv_timeout(Duration::from_secs(5)) {
                Ok(l) => l,
                Err(mpsc::RecvTimeoutError::Timeout) => continue,
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    bail!("dpdk-testpmd exited early; output:\n{log}")
                }
            };
            if log.len() < 200_000 {
                log.push_str(&line);
                log.push('\n');
            }
            let Some(sample) = parser.feed(&line) else {
                continue;
            };
            if sample.port != 1 || sample.tx_packets == 0 {
                continue;
            }
            n_active += 1;
            if n_active <= TESTPMD_WARM_SAMPLES {
                continue;
            }
            let (start, tk0) =
                *t0.get_or_insert_with(|| (Instant::now(), thread_ticks(pid, "rte-worker")));
            pps.push(to_f64(sample.tx_pps));
            if pps.len() >= window {
                let dt = start.elapsed().as_secs_f64();
                let share = match (tk0, thread_ticks(pid, "rte-worker")) {
                    (Some(a), Some(b)) if dt > 0.5 => {
                        Some(round3(to_f64(b.saturating_sub(a)) / self.clk_tck / dt))
                    }
                    _ => None,
                };
                let mean = pps.iter().sum::<f64>() / to_f64(u64::try_from(pps.len()).unwrap_or(1));
                windows.push((round3(mean / 1e6), share));
                // As for OVS: measure again while the forwarding thread did not get its core.
                if share.is_some_and(|s| s < MIN_SHARE) && windows.len() < TRIES {
                    pps.clear();
                    t0 = None;
                    continue;
                }
                let best = windows
                    .iter()
                    .copied()
                    .max_by(|a, b| {
                        (a.1.unwrap_or(0.0), a.0)
                            .partial_cmp(&(b.1.unwrap_or(0.0), b.0))
                            .unwrap_or(std::cmp::Ordering::Equal)
                    })
                    .unwrap_or((round3(mean / 1e6), share));
                return Ok(TestpmdRun {
                    mpps: best.0,
                    cpu_share: best.1,
                    windows,
                    log,
                });
            }
        }
    }

    /// Stops everything we started and gives back the hugepages.
    pub fn shutdown(&mut self) -> anyhow::Result<()> {
        cleanup(self.root())
    }
}

impl Drop for OvsDpdk {
    fn drop(&mut self) {
        if let Err(e) = cleanup(self.root()) {
            eprintln!("ovs-dpdk: cleanup: {e:#}");
        }
        // Cleaned up: the watchdog has nothing left to do.
        let _ = fs::remove_file(self.root().join(OWNER_FILE));
    }
}

/// Starts the watchdog of [`OvsConfig::cleanup_exe`]: a shell in a session of its own that
/// polls this process every second and, once it is gone while `owner.pid` still names it,
/// runs `ovs-cleanup` (which is safe to run twice).
fn start_watchdog(root: &Path, exe: &Path) -> anyhow::Result<()> {
    const SCRIPT: &str = "while kill -0 \"$1\" 2>/dev/null; do sleep 1; done; \
        [ \"$(cat \"$2/owner.pid\" 2>/dev/null)\" = \"$1\" ] && \
        exec \"$3\" ovs-cleanup --ovs-root \"$2\"";
    let log_path = root.join("watchdog.log");
    let log =
        fs::File::create(&log_path).with_context(|| format!("creating {}", log_path.display()))?;
    let status = Command::new("setsid")
        .args(["-f", "sh", "-c", SCRIPT, "ferrovs-bench-watchdog"])
        .arg(std::process::id().to_string())
        .arg(root)
        .arg(exe)
        .stdin(Stdio::null())
        .stdout(log.try_clone().context("watchdog log")?)
        .stderr(log)
        .status()
        .context("starting the cleanup watchdog (setsid)")?;
    if !status.success() {
        bail!("setsid for the cleanup watchdog failed: {status}");
    }
    Ok(())
}

/// What [`OvsDpdk::read_testpmd`] measured.
#[derive(Debug)]
struct TestpmdRun {
    mpps: f64,
    cpu_share: Option<f64>,
    /// (Mpps, CPU share) of every window.
    windows: Vec<(f64, Option<f64>)>,
    log: String,
}

/// One measurement window.
#[derive(Debug)]
struct Window {
    tx_mpps: f64,
    rx_mpps: f64,
    seconds: f64,
    pmd_cpu_share: Option<f64>,
    loadavg: (String, String),
    pmd_raw: String,
    show: String,
}

/// Whether the warm-up history `(t, p1 tx, megaflows, packets received, misses)` is stable:
/// the last three rates within 3 %, the megaflow count within 0.5 % (or 2), and under 0.1 %
/// upcalls over the last two steps (`bench.py`'s test).
fn warm(hist: &[(f64, u64, u64, f64, f64)]) -> bool {
    let n = hist.len();
    if n < 4 {
        return false;
    }
    let rates: Vec<f64> = (n - 3..n)
        .map(|i| to_f64(hist[i].1.saturating_sub(hist[i - 1].1)) / (hist[i].0 - hist[i - 1].0))
        .collect();
    let max = rates.iter().copied().fold(f64::MIN, f64::max);
    let min = rates.iter().copied().fold(f64::MAX, f64::min);
    let r_ok = max > 0.0 && (max - min) / max < STABLE;
    let mfs = hist[n - 3..].iter().map(|h| h.2);
    let (mf_max, mf_min) = (mfs.clone().max().unwrap_or(0), mfs.min().unwrap_or(0));
    let m_ok = to_f64(mf_max - mf_min) <= (0.005 * to_f64(mf_max)).max(2.0);
    let d_pk = hist[n - 1].3 - hist[n - 3].3;
    let d_miss = hist[n - 1].4 - hist[n - 3].4;
    let u_ok = d_pk > 0.0 && d_miss <= 0.001 * d_pk;
    r_ok && m_ok && u_ok
}

/// Stops the ovs processes of a root by their pidfiles, deletes our namespace, unmounts the
/// hugetlbfs and gives back the hugepages recorded in `hugepages.added`. Safe to run again.
pub fn cleanup(root: &Path) -> anyhow::Result<()> {
    let run = run_dir(root);
    stop_pidfile(&run.join("testpmd.pid"));
    stop_pidfile(&run.join("ovs-vswitchd.pid"));
    stop_pidfile(&run.join("ovsdb-server.pid"));
    let _ = fs::remove_dir_all(Path::new("/var/run/dpdk").join(FILE_PREFIX));
    let _ = fs::remove_dir_all(Path::new("/var/run/dpdk").join(TESTPMD_FILE_PREFIX));
    if let Ok(list) = output(Command::new("ip").args(["netns", "list"])) {
        if list.split_whitespace().any(|w| w == NETNS) {
            output(Command::new("ip").args(["netns", "del", NETNS]))?;
        }
    }
    let huge = root.join("huge");
    if is_mounted(&huge) {
        output(Command::new("umount").arg(&huge))?;
    }
    let marker = root.join("hugepages.added");
    if let Ok(s) = fs::read_to_string(&marker) {
        let added: u64 = s.trim().parse().context("hugepages.added")?;
        let cur = read_u64(NR_HUGEPAGES)?;
        fs::write(NR_HUGEPAGES, cur.saturating_sub(added).to_string())
            .with_context(|| format!("writing {NR_HUGEPAGES}"))?;
        let _ = fs::remove_file(&marker);
        eprintln!(
            "ovs-dpdk: gave back {added} hugepages (now {})",
            read_u64(NR_HUGEPAGES).unwrap_or(0)
        );
    }
    Ok(())
}

/// A value of `/proc/meminfo` (`HugePages_Free`).
fn meminfo_value(key: &str) -> Option<u64> {
    let m = fs::read_to_string("/proc/meminfo").ok()?;
    m.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        (k == key).then(|| v.split_whitespace().next()?.parse().ok())?
    })
}

fn read_u64(path: &str) -> anyhow::Result<u64> {
    fs::read_to_string(path)
        .with_context(|| format!("reading {path}"))?
        .trim()
        .parse()
        .with_context(|| format!("parsing {path}"))
}

fn is_mounted(dir: &Path) -> bool {
    let d = dir.to_string_lossy();
    fs::read_to_string("/proc/mounts")
        .map(|m| m.lines().any(|l| l.split_whitespace().nth(1) == Some(&*d)))
        .unwrap_or(false)
}

fn read_pidfile(path: &Path) -> Option<u32> {
    fs::read_to_string(path).ok()?.trim().parse().ok()
}

fn alive(pid: u32) -> bool {
    // A stopped daemon we did not fork is reaped by init; a zombie child of ours counts as gone.
    fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| {
            s.rsplit_once(')')
                .and_then(|(_, rest)| rest.split_whitespace().next())
                .is_some_and(|state| state != "Z")
        })
        .unwrap_or(false)
}

fn signal(pid: u32, sig: &str) {
    let _ = Command::new("kill")
        .args([sig, &pid.to_string()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
}

/// SIGTERM to the pid in `pidfile`, SIGKILL after 10 s; removes the pidfile.
fn stop_pidfile(pidfile: &Path) {
    if let Some(pid) = read_pidfile(pidfile) {
        if alive(pid) {
            signal(pid, "-TERM");
            let deadline = Instant::now() + Duration::from_secs(10);
            while alive(pid) && Instant::now() < deadline {
                thread::sleep(Duration::from_millis(100));
            }
            if alive(pid) {
                signal(pid, "-KILL");
            }
        }
    }
    let _ = fs::remove_file(pidfile);
}

/// SIGINT to our child (testpmd quits cleanly on it), SIGKILL after 10 s; reaps it.
fn stop_child(child: &mut Child) {
    if matches!(child.try_wait(), Ok(None)) {
        signal(child.id(), "-INT");
        let deadline = Instant::now() + Duration::from_secs(10);
        while matches!(child.try_wait(), Ok(None)) && Instant::now() < deadline {
            thread::sleep(Duration::from_millis(100));
        }
        if matches!(child.try_wait(), Ok(None)) {
            let _ = child.kill();
        }
    }
    let _ = child.wait();
}

fn loadavg() -> String {
    fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next().map(str::to_owned))
        .unwrap_or_default()
}

#[allow(clippy::cast_precision_loss)]
fn to_f64(v: u64) -> f64 {
    v as f64
}

fn round3(v: f64) -> f64 {
    (v * 1000.0).round() / 1000.0
}

/// utime + stime (clock ticks) of the threads of `pid` whose name starts with `prefix`.
fn thread_ticks(pid: u32, prefix: &str) -> Option<u64> {
    let mut total = 0;
    let mut found = false;
    for entry in fs::read_dir(format!("/proc/{pid}/task")).ok()?.flatten() {
        let dir = entry.path();
        let Ok(comm) = fs::read_to_string(dir.join("comm")) else {
            continue;
        };
        if !comm.starts_with(prefix) {
            continue;
        }
        if let Some(t) = fs::read_to_string(dir.join("stat"))
            .ok()
            .and_then(|s| parse_stat_ticks(&s))
        {
            total += t;
            found = true;
        }
    }
    found.then_some(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn warm_needs_stable_rates_megaflows_and_no_upcalls() {
        let stable: Vec<(f64, u64, u64, f64, f64)> = (0u32..5)
            .map(|i| {
                let t = f64::from(i);
                (2.0 * t, 1_000_000 * u64::from(i), 1000, 1e6 * t, 5.0)
            })
            .collect();
        assert!(warm(&stable));
        let mut ramping = stable.clone();
        ramping[4].1 = 9_000_000;
        assert!(!warm(&ramping));
        let mut upcalls = stable.clone();
        upcalls[4].4 = 1e5;
        assert!(!warm(&upcalls));
        assert!(!warm(&stable[..3]));
    }
}
