//! A private reference Open vSwitch: `ovsdb-server` plus `ovs-vswitchd --enable-dummy`, on
//! unix sockets in a directory of its own, used as the oracle for trace parity.
//!
//! [`OvsReference::start`] creates a temporary directory, points `OVS_RUNDIR`, `OVS_LOGDIR`,
//! `OVS_DBDIR` and `OVS_SYSCONFDIR` at it for every command it runs, creates a database there
//! and starts both daemons detached with pidfiles in it. `ovs-vswitchd` runs with
//! `--enable-dummy --disable-system --disable-system-route`: no kernel module, no network,
//! only OVS's in-memory `dummy` datapath (named `ovs-dummy`). The system's own OVS service,
//! if any, is never touched. [`Drop`] stops exactly the two daemons it started (by the pids in
//! its pidfiles) and removes the directory; set `FERROVS_KEEP_OVS=1` to keep the directory
//! (database and logs) for inspection.
//!
//! Bridges are built the way OVS's own tests build them ([`OvsReference::add_bridge`],
//! [`OvsReference::add_of_ports`]). [`OvsReference::reset`] removes every bridge (and with
//! them ports, mirrors, flow tables and learned MACs) and clears `Open_vSwitch:other_config`
//! in one transaction, so one daemon serves thousands of cases: a reset and a new bridge cost
//! tens of milliseconds where a restart costs about 0.23 s.
//!
//! `ovs-vsctl` and `ovs-ofctl` run as child processes with argument vectors (never a shell).
//! `ovs-appctl` commands, traces included, go straight to `ovs-vswitchd`'s unixctl socket as
//! JSON-RPC on one kept-open connection, which saves a process per trace.
//!
//! # Example
//! ```no_run
//! use testkit::ovs::OvsReference;
//! let mut ovs = OvsReference::start()?;
//! ovs.add_bridge(0, &[] as &[&str])?;
//! ovs.add_of_ports("br0", &[1, 2])?;
//! ovs.add_flows("br0", &[] as &[&str], &["in_port=1,actions=output:2"])?;
//! let t = ovs.trace(Some("ovs-dummy"), "in_port(1),eth(src=50:54:00:00:00:01,dst=50:54:00:00:00:02),eth_type(0x1234)", &[] as &[&str])?;
//! assert_eq!(t.datapath_actions, "2");
//! # Ok::<(), testkit::ovs::OvsError>(())
//! ```

use std::ffi::OsStr;
use std::io::{Read as _, Write as _};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use std::{fs, io};

use serde_json::Value;

/// The OpenFlow versions OVS's test macros enable on every bridge.
pub const OF_PROTOCOLS: &str =
    "protocols=[OpenFlow10,OpenFlow11,OpenFlow12,OpenFlow13,OpenFlow14,OpenFlow15]";

/// The name of the dummy datapath that every dummy bridge shares.
pub const DUMMY_DATAPATH: &str = "ovs-dummy";

/// Where Debian's `openvswitch-common` puts the database schema.
const DEFAULT_SCHEMA: &str = "/usr/share/openvswitch/vswitch.ovsschema";

/// The OpenFlow number of a bridge's own internal port (`LOCAL`).
pub const OFPP_LOCAL: u32 = 65534;

/// Seconds that `ovs-vsctl` and `ovs-ofctl` may wait for the daemons.
const CLIENT_TIMEOUT_SECS: &str = "30";

/// How long a unixctl request may take before the connection is declared dead.
const UNIXCTL_TIMEOUT: Duration = Duration::from_secs(60);

/// What went wrong talking to the reference OVS.
#[derive(Debug, thiserror::Error)]
pub enum OvsError {
    /// An OVS program is missing.
    #[error("{program} not installed: apt-get install openvswitch-switch")]
    NotInstalled {
        /// The program or file that was not found.
        program: String,
    },
    /// A program could not be started for another reason than its absence.
    #[error("cannot run {program}: {source}")]
    Spawn {
        /// The program.
        program: String,
        /// The OS error.
        source: io::Error,
    },
    /// A command ran and exited with an error: OVS rejected the input.
    #[error("`{command}` failed ({status}): {stderr}")]
    CommandFailed {
        /// The command line, shell-quoted for display.
        command: String,
        /// The exit status.
        status: String,
        /// What the command printed on stderr (and stdout, if stderr was empty).
        stderr: String,
    },
    /// An `ovs-appctl` command answered with an error.
    #[error("ovs-appctl {command} failed: {message}")]
    Appctl {
        /// The command and its arguments, shell-quoted for display.
        command: String,
        /// OVS's error text.
        message: String,
    },
    /// The private directory or one of its files could not be used.
    #[error("{what} {path}: {source}")]
    Io {
        /// What was being done.
        what: &'static str,
        /// The file or directory.
        path: PathBuf,
        /// The OS error.
        source: io::Error,
    },
    /// A unixctl reply was not the JSON-RPC OVS speaks.
    #[error("bad unixctl reply from {target}: {reason}")]
    BadReply {
        /// The daemon.
        target: String,
        /// What was wrong.
        reason: String,
    },
    /// The trace output has no `Datapath actions:` line.
    #[error("no `Datapath actions:` line in the trace output:\n{raw}")]
    TraceUnparsable {
        /// The whole trace output.
        raw: String,
    },
}

impl OvsError {
    /// Whether OVS rejected its input (a flow, a command, a packet) rather than the harness
    /// failing.
    pub fn is_rejection(&self) -> bool {
        matches!(self, Self::CommandFailed { .. } | Self::Appctl { .. })
    }
}

/// The result of one `ofproto/trace`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceResult {
    /// The text after `Datapath actions: ` (the last such line), for example `2,100`.
    pub datapath_actions: String,
    /// The text after `Megaflow: `, if the trace printed one.
    pub megaflow: Option<String>,
    /// The text after the first `Flow: `: the packet in OpenFlow syntax.
    pub flow: Option<String>,
    /// The whole output.
    pub raw: String,
}

impl TraceResult {
    /// Parses `ovs-appctl ofproto/trace` output.
    pub fn parse(raw: &str) -> Result<Self, OvsError> {
        let mut actions = None;
        let mut megaflow = None;
        let mut flow = None;
        for line in raw.lines() {
            if let Some(rest) = line.strip_prefix("Datapath actions: ") {
                actions = Some(rest.trim().to_owned());
            } else if let Some(rest) = line.strip_prefix("Megaflow: ") {
                megaflow = Some(rest.trim().to_owned());
            } else if let Some(rest) = line.strip_prefix("Flow: ") {
                flow.get_or_insert_with(|| rest.trim().to_owned());
            }
        }
        let datapath_actions = actions.ok_or_else(|| OvsError::TraceUnparsable {
            raw: raw.to_owned(),
        })?;
        Ok(Self {
            datapath_actions,
            megaflow,
            flow,
            raw: raw.to_owned(),
        })
    }
}

/// One port as `ovs-appctl dpif/show` lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DpifPort {
    /// The bridge it belongs to.
    pub bridge: String,
    /// The port name.
    pub name: String,
    /// The OpenFlow port number ([`OFPP_LOCAL`] for the bridge's internal port).
    pub ofport: u32,
    /// The datapath port number; `None` for ports without one (patch ports).
    pub dp_port: Option<u32>,
    /// The interface type, such as `dummy`, `dummy-internal` or `patch`.
    pub port_type: String,
    /// The options OVS prints after the type, such as `peer=patch20`.
    pub options: Option<String>,
}

impl DpifPort {
    /// Whether this is the bridge's internal port (OpenFlow `LOCAL`).
    pub fn is_local(&self) -> bool {
        self.ofport == OFPP_LOCAL
    }
}

/// Parses `ovs-appctl dpif/show` output.
pub fn parse_dpif_show(text: &str) -> Vec<DpifPort> {
    let mut ports = Vec::new();
    let mut bridge: Option<String> = None;
    for line in text.lines() {
        let indent = line.len() - line.trim_start().len();
        let body = line.trim();
        if indent == 2 {
            if let Some(name) = body.strip_suffix(':') {
                if !name.contains(' ') {
                    bridge = Some(name.to_owned());
                }
            }
            continue;
        }
        let (Some(br), true) = (&bridge, indent == 4) else {
            continue;
        };
        // `p1 1/1: (dummy)` or `patch10 10/none: (patch: peer=patch20)`.
        let Some((name, rest)) = body.split_once(' ') else {
            continue;
        };
        let Some((numbers, kind)) = rest.split_once(": ") else {
            continue;
        };
        let Some((of, dp)) = numbers.split_once('/') else {
            continue;
        };
        let Ok(ofport) = of.parse() else { continue };
        let kind = kind.trim().trim_start_matches('(').trim_end_matches(')');
        let (port_type, options) = match kind.split_once(':') {
            Some((t, o)) => (t.trim().to_owned(), Some(o.trim().to_owned())),
            None => (kind.to_owned(), None),
        };
        ports.push(DpifPort {
            bridge: br.clone(),
            name: name.to_owned(),
            ofport,
            dp_port: dp.parse().ok(),
            port_type,
            options,
        });
    }
    ports
}

/// A private `ovsdb-server` + `ovs-vswitchd --enable-dummy`; see the module documentation.
#[derive(Debug)]
pub struct OvsReference {
    dir: PathBuf,
    vswitchd_pid: Option<u32>,
    ovsdb_pid: Option<u32>,
    ctl: Option<UnixStream>,
    next_id: u64,
    version: String,
}

impl OvsReference {
    /// Starts both daemons in a new temporary directory.
    ///
    /// Fails with [`OvsError::NotInstalled`] if Debian's `openvswitch-switch` is missing.
    pub fn start() -> Result<Self, OvsError> {
        let schema = std::env::var_os("OVS_SCHEMA")
            .map_or_else(|| PathBuf::from(DEFAULT_SCHEMA), PathBuf::from);
        let version = first_line(&run_plain("ovs-vswitchd", &["--version"])?);
        if !schema.exists() {
            return Err(OvsError::NotInstalled {
                program: schema.display().to_string(),
            });
        }
        let dir = make_private_dir()?;
        let mut ovs = Self {
            dir,
            vswitchd_pid: None,
            ovsdb_pid: None,
            ctl: None,
            next_id: 0,
            version,
        };
        let db = ovs.dir.join("conf.db");
        let sock = format!("unix:{}", ovs.dir.join("db.sock").display());
        ovs.run(
            "ovsdb-tool",
            &[OsStr::new("create"), db.as_os_str(), schema.as_os_str()],
            None,
        )?;
        ovs.run(
            "ovsdb-server",
            &[
                OsStr::new("--detach"),
                OsStr::new("--no-chdir"),
                OsStr::new("--pidfile"),
                OsStr::new("--log-file"),
                OsStr::new(&format!("--remote=p{sock}")),
                db.as_os_str(),
            ],
            None,
        )?;
        ovs.ovsdb_pid = Some(ovs.read_pid("ovsdb-server")?);
        ovs.vsctl_raw(&["--no-wait", "init"])?;
        ovs.run(
            "ovs-vswitchd",
            &[
                "--enable-dummy",
                "--disable-system",
                "--disable-system-route",
                "--detach",
                "--no-chdir",
                "--pidfile",
                "--log-file",
                &sock,
            ]
            .map(OsStr::new),
            None,
        )?;
        ovs.vswitchd_pid = Some(ovs.read_pid("ovs-vswitchd")?);
        Ok(ovs)
    }

    /// The private directory (database, sockets, logs).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The first line of `ovs-vswitchd --version`, e.g. `ovs-vswitchd (Open vSwitch) 3.1.0`.
    pub fn version(&self) -> &str {
        &self.version
    }

    /// Deletes every bridge (with its ports, mirrors, flow tables and MAC table) and clears
    /// `Open_vSwitch:other_config`, so that the next case starts from a clean switch.
    pub fn reset(&mut self) -> Result<(), OvsError> {
        self.vsctl_raw(&[
            "--",
            "clear",
            "Open_vSwitch",
            ".",
            "bridges",
            "--",
            "clear",
            "Open_vSwitch",
            ".",
            "other_config",
        ])
        .map(drop)
    }

    /// Adds bridge `br<brnum>` the way OVS's test macros do (dummy datapath, `fail-mode=secure`,
    /// a fixed datapath id and MAC, all OpenFlow versions), then applies `extra_vsctl`: more
    /// `ovs-vsctl` words in the same transaction, commands separated by `--`.
    pub fn add_bridge<S: AsRef<str>>(
        &mut self,
        brnum: u32,
        extra_vsctl: &[S],
    ) -> Result<(), OvsError> {
        let br = format!("br{brnum}");
        let mut args: Vec<String> = [
            "--",
            "add-br",
            &br,
            "--",
            "set",
            "bridge",
            &br,
            "datapath-type=dummy",
            "fail-mode=secure",
            &format!(
                "other-config:datapath-id=fedcba98765432{:02x}",
                0x10 + brnum
            ),
            &format!("other-config:hwaddr=aa:55:aa:55:00:{brnum:02x}"),
            OF_PROTOCOLS,
        ]
        .map(str::to_owned)
        .into();
        if extra_vsctl.iter().any(|w| !w.as_ref().trim().is_empty()) {
            args.push("--".to_owned());
            args.extend(extra_vsctl.iter().map(|w| w.as_ref().to_owned()));
        }
        self.vsctl(&args).map(drop)
    }

    /// Adds ports `pN` (type `dummy`, OpenFlow port `N`) to `bridge`.
    pub fn add_of_ports(&mut self, bridge: &str, ports: &[u32]) -> Result<(), OvsError> {
        if ports.is_empty() {
            return Ok(());
        }
        let mut args = Vec::new();
        for n in ports {
            args.extend(add_of_port_args(bridge, *n, &[]));
        }
        self.vsctl(&args).map(drop)
    }

    /// Runs `ovs-vsctl ARGS` against the private database and returns its stdout.
    pub fn vsctl<S: AsRef<str>>(&mut self, args: &[S]) -> Result<String, OvsError> {
        let args: Vec<&str> = args.iter().map(AsRef::as_ref).collect();
        self.vsctl_raw(&args)
    }

    /// Runs `ovs-ofctl ARGS` (for example `["-O", "OpenFlow13", "dump-flows", "br0"]`).
    pub fn ofctl<S: AsRef<str>>(&mut self, args: &[S]) -> Result<String, OvsError> {
        self.ofctl_stdin(args, None)
    }

    /// Runs `ovs-ofctl OPTIONS add-flows BRIDGE -` with `flows` on stdin, one per line.
    pub fn add_flows<S: AsRef<str>, F: AsRef<str>>(
        &mut self,
        bridge: &str,
        ofctl_options: &[S],
        flows: &[F],
    ) -> Result<(), OvsError> {
        self.load_flows("add-flows", bridge, ofctl_options, flows)
    }

    /// Runs `ovs-ofctl OPTIONS replace-flows BRIDGE -` with `flows` on stdin.
    pub fn replace_flows<S: AsRef<str>, F: AsRef<str>>(
        &mut self,
        bridge: &str,
        ofctl_options: &[S],
        flows: &[F],
    ) -> Result<(), OvsError> {
        self.load_flows("replace-flows", bridge, ofctl_options, flows)
    }

    /// Runs an `ovs-appctl` command: `args[0]` is the command, the rest its arguments. A
    /// leading `-t TARGET`/`--target=TARGET` other than `ovs-vswitchd` runs the `ovs-appctl`
    /// program; everything else goes over the kept-open unixctl connection.
    pub fn appctl<S: AsRef<str>>(&mut self, args: &[S]) -> Result<String, OvsError> {
        let mut args: Vec<&str> = args.iter().map(AsRef::as_ref).collect();
        match args.first().copied() {
            Some("-t" | "--target") if args.get(1) == Some(&"ovs-vswitchd") => {
                args.drain(..2);
            }
            Some("--target=ovs-vswitchd") => {
                args.remove(0);
            }
            Some(a) if a.starts_with('-') => {
                let args: Vec<&OsStr> = args.iter().map(OsStr::new).collect();
                return self.run("ovs-appctl", &args, None);
            }
            _ => {}
        }
        let Some((method, params)) = args.split_first() else {
            return Err(OvsError::Appctl {
                command: String::new(),
                message: "no command given".into(),
            });
        };
        self.unixctl(method, params)
    }

    /// Runs `ofproto/trace [TARGET] INPUT OPTIONS...` and parses its output. `target` is a
    /// bridge (OpenFlow-syntax input) or the datapath `ovs-dummy` (datapath-syntax input);
    /// `None` lets OVS pick the datapath.
    pub fn trace<S: AsRef<str>>(
        &mut self,
        target: Option<&str>,
        input: &str,
        options: &[S],
    ) -> Result<TraceResult, OvsError> {
        let mut params: Vec<&str> = Vec::new();
        params.extend(target.filter(|t| !t.is_empty()));
        params.push(input);
        params.extend(options.iter().map(AsRef::as_ref).filter(|o| !o.is_empty()));
        let raw = self.unixctl("ofproto/trace", &params)?;
        TraceResult::parse(&raw)
    }

    /// `ovs-appctl dpif/show`, parsed: every port with its OpenFlow and datapath numbers.
    pub fn dpif_show(&mut self) -> Result<Vec<DpifPort>, OvsError> {
        Ok(parse_dpif_show(&self.unixctl("dpif/show", &[])?))
    }

    fn load_flows<S: AsRef<str>, F: AsRef<str>>(
        &mut self,
        verb: &str,
        bridge: &str,
        ofctl_options: &[S],
        flows: &[F],
    ) -> Result<(), OvsError> {
        let mut args: Vec<&str> = ofctl_options
            .iter()
            .map(AsRef::as_ref)
            .filter(|o| !o.is_empty())
            .collect();
        args.extend([verb, bridge, "-"]);
        let mut text = String::new();
        for f in flows {
            text.push_str(f.as_ref());
            text.push('\n');
        }
        self.ofctl_stdin(&args, Some(&text)).map(drop)
    }

    fn ofctl_stdin<S: AsRef<str>>(
        &mut self,
        args: &[S],
        stdin: Option<&str>,
    ) -> Result<String, OvsError> {
        let timeout = format!("--timeout={CLIENT_TIMEOUT_SECS}");
        let mut all: Vec<&OsStr> = vec![OsStr::new(&timeout)];
        all.extend(args.iter().map(|a| OsStr::new(a.as_ref())));
        self.run("ovs-ofctl", &all, stdin)
    }

    fn vsctl_raw(&mut self, args: &[&str]) -> Result<String, OvsError> {
        let db = format!("--db=unix:{}", self.dir.join("db.sock").display());
        let timeout = format!("--timeout={CLIENT_TIMEOUT_SECS}");
        let mut all: Vec<&OsStr> = vec![OsStr::new(&db), OsStr::new(&timeout)];
        all.extend(args.iter().map(OsStr::new));
        self.run("ovs-vsctl", &all, None)
    }

    /// Runs `program` with the private OVS environment and returns its stdout.
    fn run(&self, program: &str, args: &[&OsStr], stdin: Option<&str>) -> Result<String, OvsError> {
        let mut cmd = Command::new(program);
        cmd.args(args)
            .current_dir(&self.dir)
            .env("OVS_RUNDIR", &self.dir)
            .env("OVS_LOGDIR", &self.dir)
            .env("OVS_DBDIR", &self.dir)
            .env("OVS_SYSCONFDIR", &self.dir)
            .stdin(if stdin.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().map_err(|e| spawn_error(program, e))?;
        if let Some(text) = stdin {
            let mut pipe = child
                .stdin
                .take()
                .expect("stdin was requested as piped above");
            // A write error means the child exited early; its status and stderr say why.
            let _ = pipe.write_all(text.as_bytes());
        }
        let out = child
            .wait_with_output()
            .map_err(|e| spawn_error(program, e))?;
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        if out.status.success() {
            return Ok(stdout);
        }
        let stderr = String::from_utf8_lossy(&out.stderr);
        let mut words = vec![program.to_owned()];
        words.extend(args.iter().map(|a| a.to_string_lossy().into_owned()));
        Err(OvsError::CommandFailed {
            command: shell_join(&words),
            status: out.status.to_string(),
            stderr: if stderr.trim().is_empty() {
                stdout
            } else {
                stderr.trim().to_owned()
            },
        })
    }

    fn read_pid(&self, daemon: &str) -> Result<u32, OvsError> {
        let path = self.dir.join(format!("{daemon}.pid"));
        let text = fs::read_to_string(&path).map_err(|source| OvsError::Io {
            what: "cannot read the pidfile",
            path: path.clone(),
            source,
        })?;
        text.trim().parse().map_err(|_| OvsError::Io {
            what: "bad pidfile",
            path,
            source: io::Error::new(io::ErrorKind::InvalidData, text.trim().to_owned()),
        })
    }

    /// Sends one JSON-RPC request to `ovs-vswitchd`'s unixctl socket.
    fn unixctl(&mut self, method: &str, params: &[&str]) -> Result<String, OvsError> {
        let command = shell_join(
            &std::iter::once(method)
                .chain(params.iter().copied())
                .collect::<Vec<_>>(),
        );
        if self.ctl.is_none() {
            let pid = self.vswitchd_pid.ok_or_else(|| OvsError::BadReply {
                target: "ovs-vswitchd".into(),
                reason: "the daemon is not running".into(),
            })?;
            self.ctl = Some(connect_unixctl(&self.dir, "ovs-vswitchd", pid)?);
        }
        self.next_id += 1;
        let id = self.next_id;
        let stream = self.ctl.as_mut().expect("connected just above");
        match unixctl_request(stream, id, method, params) {
            Ok(Ok(result)) => Ok(result),
            Ok(Err(message)) => Err(OvsError::Appctl { command, message }),
            Err(e) => {
                // The connection state is unknown after an I/O error: reconnect next time.
                self.ctl = None;
                Err(e)
            }
        }
    }

    fn stop_daemon(&mut self, daemon: &str, pid: u32, exit_args: &[&str]) {
        let stopped = connect_unixctl(&self.dir, daemon, pid)
            .and_then(|mut s| unixctl_request(&mut s, 1, "exit", exit_args))
            .is_ok();
        let deadline = Instant::now() + Duration::from_secs(if stopped { 5 } else { 0 });
        while process_alive(pid) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        if process_alive(pid) {
            // It ignored `exit`: terminate exactly the pid from our own pidfile.
            let _ = Command::new("kill")
                .arg(pid.to_string())
                .stderr(Stdio::null())
                .status();
            let deadline = Instant::now() + Duration::from_secs(2);
            while process_alive(pid) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(10));
            }
        }
    }
}

impl Drop for OvsReference {
    fn drop(&mut self) {
        self.ctl = None;
        if let Some(pid) = self.vswitchd_pid.take() {
            self.stop_daemon("ovs-vswitchd", pid, &["--cleanup"]);
        }
        if let Some(pid) = self.ovsdb_pid.take() {
            self.stop_daemon("ovsdb-server", pid, &[]);
        }
        if std::env::var_os("FERROVS_KEEP_OVS").is_some_and(|v| v == "1") {
            eprintln!("FERROVS_KEEP_OVS=1: keeping {}", self.dir.display());
        } else {
            let _ = fs::remove_dir_all(&self.dir);
        }
    }
}

/// The `ovs-vsctl` words that add `pN` to `bridge` with OpenFlow port `N` and type `dummy`,
/// plus `port_settings` (such as `tag=10`) on the Port row.
pub fn add_of_port_args(bridge: &str, n: u32, port_settings: &[String]) -> Vec<String> {
    let name = format!("p{n}");
    let mut args = vec![
        "--".to_owned(),
        "add-port".to_owned(),
        bridge.to_owned(),
        name.clone(),
    ];
    args.extend(port_settings.iter().cloned());
    args.extend(
        [
            "--",
            "set",
            "Interface",
            &name,
            "type=dummy",
            &format!("ofport_request={n}"),
        ]
        .map(str::to_owned),
    );
    args
}

/// Quotes one word for a POSIX shell, only if it needs it.
pub fn shell_quote(word: &str) -> String {
    let plain = !word.is_empty()
        && word
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_=.,:/@%+".contains(&b));
    if plain {
        word.to_owned()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

/// Joins words into a command line a human can paste into a shell.
pub fn shell_join<S: AsRef<str>>(words: &[S]) -> String {
    words
        .iter()
        .map(|w| shell_quote(w.as_ref()))
        .collect::<Vec<_>>()
        .join(" ")
}

fn spawn_error(program: &str, source: io::Error) -> OvsError {
    if source.kind() == io::ErrorKind::NotFound {
        OvsError::NotInstalled {
            program: program.to_owned(),
        }
    } else {
        OvsError::Spawn {
            program: program.to_owned(),
            source,
        }
    }
}

/// Runs a program outside any private directory (only for `--version`).
fn run_plain(program: &str, args: &[&str]) -> Result<String, OvsError> {
    let out = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| spawn_error(program, e))?;
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn first_line(s: &str) -> String {
    s.lines().next().unwrap_or_default().trim().to_owned()
}

fn make_private_dir() -> Result<PathBuf, OvsError> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let base = std::env::temp_dir();
    loop {
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let path = base.join(format!(
            "ferrovs-ovs.{}.{n}.{nanos:08x}",
            std::process::id()
        ));
        match fs::create_dir(&path) {
            Ok(()) => return Ok(path),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(source) => {
                return Err(OvsError::Io {
                    what: "cannot create the private OVS directory",
                    path,
                    source,
                })
            }
        }
    }
}

fn connect_unixctl(dir: &Path, daemon: &str, pid: u32) -> Result<UnixStream, OvsError> {
    let path = dir.join(format!("{daemon}.{pid}.ctl"));
    let stream = UnixStream::connect(&path).map_err(|source| OvsError::Io {
        what: "cannot connect to the unixctl socket",
        path: path.clone(),
        source,
    })?;
    stream
        .set_read_timeout(Some(UNIXCTL_TIMEOUT))
        .and_then(|()| stream.set_write_timeout(Some(UNIXCTL_TIMEOUT)))
        .map_err(|source| OvsError::Io {
            what: "cannot set timeouts on",
            path,
            source,
        })?;
    Ok(stream)
}

/// One JSON-RPC round trip. The outer error is the transport, the inner one OVS's answer.
fn unixctl_request(
    stream: &mut UnixStream,
    id: u64,
    method: &str,
    params: &[&str],
) -> Result<Result<String, String>, OvsError> {
    let bad = |reason: String| OvsError::BadReply {
        target: "ovs-vswitchd".into(),
        reason,
    };
    let io_err = |source| OvsError::Io {
        what: "unixctl I/O on",
        path: PathBuf::from(method),
        source,
    };
    let request = serde_json::json!({ "id": id, "method": method, "params": params });
    stream
        .write_all(request.to_string().as_bytes())
        .map_err(io_err)?;
    let mut buf = Vec::new();
    let mut chunk = [0u8; 65536];
    loop {
        let n = stream.read(&mut chunk).map_err(io_err)?;
        if n == 0 {
            return Err(bad("connection closed before a complete reply".into()));
        }
        buf.extend_from_slice(&chunk[..n]);
        let mut de = serde_json::Deserializer::from_slice(&buf).into_iter::<Value>();
        match de.next() {
            Some(Ok(reply)) => {
                if reply.get("id").and_then(Value::as_u64) != Some(id) {
                    return Err(bad(format!("reply for another request: {reply}")));
                }
                if let Some(err) = reply.get("error").filter(|e| !e.is_null()) {
                    let text = err.as_str().map_or_else(|| err.to_string(), str::to_owned);
                    return Ok(Err(text.trim_end().to_owned()));
                }
                return match reply.get("result") {
                    Some(Value::String(s)) => Ok(Ok(s.clone())),
                    Some(Value::Null) | None => Ok(Ok(String::new())),
                    Some(other) => Ok(Ok(other.to_string())),
                };
            }
            Some(Err(e)) if e.is_eof() => continue,
            Some(Err(e)) => return Err(bad(e.to_string())),
            None => continue,
        }
    }
}

fn process_alive(pid: u32) -> bool {
    // A zombie has exited; only its parent (not us: the daemons detached) can reap it.
    match fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => !stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z')),
        Err(_) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trace_result_parses_last_actions_and_megaflow() {
        let raw = "Flow: tcp,in_port=1\n\nbridge(\"br0\")\n-------------\n 0. priority 0\n    NORMAL\n\
                   Final flow: unchanged\nMegaflow: recirc_id=0,eth,in_port=1\nDatapath actions: 100,2\n";
        let t = TraceResult::parse(raw).expect("has a Datapath actions line");
        assert_eq!(t.datapath_actions, "100,2");
        assert_eq!(t.megaflow.as_deref(), Some("recirc_id=0,eth,in_port=1"));
        assert_eq!(t.flow.as_deref(), Some("tcp,in_port=1"));
    }

    #[test]
    fn trace_result_without_actions_is_an_error() {
        assert!(matches!(
            TraceResult::parse("Flow: x\n"),
            Err(OvsError::TraceUnparsable { .. })
        ));
    }

    #[test]
    fn dpif_show_parses_ports() {
        let text = "dummy@ovs-dummy: hit:0 missed:0\n  br0:\n    br0 65534/100: (dummy-internal)\n    \
                    p1 1/1: (dummy)\n    patch10 10/none: (patch: peer=patch20)\n  br1:\n    br1 65534/101: (dummy-internal)\n";
        let ports = parse_dpif_show(text);
        assert_eq!(ports.len(), 4);
        assert!(ports[0].is_local());
        assert_eq!(ports[0].dp_port, Some(100));
        assert_eq!(ports[1].name, "p1");
        assert_eq!(ports[2].dp_port, None);
        assert_eq!(ports[2].port_type, "patch");
        assert_eq!(ports[2].options.as_deref(), Some("peer=patch20"));
        assert_eq!(ports[3].bridge, "br1");
    }

    #[test]
    fn shell_quote_quotes_only_when_needed() {
        assert_eq!(shell_quote("add-br"), "add-br");
        assert_eq!(
            shell_quote("in_port(1),eth(src=1)"),
            "'in_port(1),eth(src=1)'"
        );
        assert_eq!(shell_quote("it's"), r"'it'\''s'");
        assert_eq!(shell_quote(""), "''");
    }
}
