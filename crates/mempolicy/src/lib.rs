//! The process's memory policy: keep the memory the allocator frees, and back the heap with
//! transparent huge pages.
//!
//! A switch's tables grow in steps: a classifier subtable doubles its hash table, a trie is
//! built again in a new arena, a bundle's scratch vectors come and go. With glibc's defaults,
//! large blocks are `mmap`ed and given back to the kernel when freed, and the top of the heap
//! is trimmed, so the next table of that size starts on fresh pages: a page fault per 4 KB,
//! which on this kind of virtual machine costs several microseconds each. Measured with the
//! first group of the policy: a 100,000-rule classifier commit 0.112 → 0.088 s, and rule
//! insertion under traffic (`ferrovs-bench insert`) 640K → 780-830K rules/s.
//!
//! The policy is glibc's tunables [`TUNABLES`], in two groups ([`GROUPS`]):
//!
//! - **Keep freed memory**: every block comes from the heap (`mmap_max=0`) and the heap is never
//!   trimmed, so freed memory is reused without faults. The cost is the memory the process keeps
//!   after its peak: at 256K exact rules and megaflows, `ferrovs-bench datapath` measured 602 MiB
//!   of RSS with this policy against 331 MiB with glibc's defaults (the freed parse and setup
//!   buffers of 256K rules stay in the heap, for later allocations to reuse). A middle way was
//!   measured and not taken: `mmap` for blocks of 32 MB and more (glibc's largest threshold) keeps
//!   RSS at 404 MiB, but a 256K-rule subtable's table is 48 MB, so its growth faults again: a
//!   100,000-rule commit into 162,144 rules took 0.113 s instead of 0.102 s and its replay 0.064 s
//!   instead of 0.039 s. OVS-DPDK at the same point holds 1.14 GiB plus 2 GiB of hugepages.
//! - **Transparent huge pages for the heap** (`hugetlb=1`): malloc grows the heap in 2 MB steps and
//!   asks for huge pages there (`madvise`), where the kernel's mode is `madvise` (in `always` every
//!   process has them, in `never` none). A classifier lookup in a 256K-rule table reads a few cache
//!   lines at random in some 50 MB of arrays: with 4 KB pages each is a TLB miss too. Measured in
//!   `classifier-bench` (run 29 in the classifier's README, alternated with `--small-pages`):
//!   262,144-rule batched lookups 5 to 10% faster, single rule insertions 3 to 5%, the 100,000-rule
//!   batch's median unchanged. A fresh heap faults in 2 MB at a time (30 faults instead of 16,000
//!   for the first 100,000-rule batch into 262,144 rules), which on this kind of virtual machine
//!   took as long in all (0.12 to 0.2 s: the host backs memory the guest never touched on first
//!   use).
//!
//! **glibc 2.36 (Debian 12) reads the kernel's mode wrong in about half the processes**: it
//! compares the 23 bytes it read from `/sys/kernel/mm/transparent_hugepage/enabled` with
//! `strcmp` without terminating them, so the answer depends on a byte of uninitialised stack
//! (later glibc terminates the string). Where that makes `hugetlb=1` a no-op, [`enforce`]
//! notices (a fresh 4 MB block of the heap is not marked for huge pages in
//! `/proc/self/smaps`) and runs the program again, up to [`HUGE_PAGE_TRIES`] times; each run
//! starts with another stack layout.
//!
//! **A heap reserved at start** ([`reserve_heap`]): memory the process has never used is
//! faulted in on first use, so the first commit that takes the tables to a new peak pays for
//! it (run 29 of the classifier: the first 100,000-rule batch into 262,144 rules took 0.19 to
//! 0.29 s, the later ones 0.06 to 0.09 s). With the first group in force, memory the process
//! once used stays in its heap; [`reserve_heap`] grows the heap by a given size at start,
//! touches every page of it and frees it, so later allocations up to that size fault nothing,
//! as OVS-DPDK's memory reserved at start. The cost is that RSS from the start.
//!
//! glibc reads its tunables from the environment when a process starts, so [`enforce`] runs
//! the program again (`exec`, same process id and arguments) with them added to
//! `GLIBC_TUNABLES`. A binary that runs the switch calls [`retain_freed_memory`] first thing
//! in `main`, before it starts threads or opens anything. Safe code throughout: the project
//! keeps `unsafe` to the few modules style.md lists, and `mallopt` or `madvise` would need it.

use std::ffi::OsString;

/// The glibc tunables of the daemon's policy: [`GROUPS`] together.
pub const TUNABLES: &str =
    "glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=2147483647:glibc.malloc.hugetlb=1";

/// The group that keeps freed memory.
const KEEP_FREED: &str = "glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=2147483647";
/// The group that asks for transparent huge pages.
const HUGE_PAGES: &str = "glibc.malloc.hugetlb=1";

/// The policy's tunables in groups, each with the tunables that, set by the user, leave the
/// group out (the user's choice stands): keeping freed memory (`mmap_max`, `trim_threshold`),
/// and transparent huge pages for the heap (`hugetlb`).
pub const GROUPS: [(&str, &[&str]); 2] = [
    (
        KEEP_FREED,
        &[
            "glibc.malloc.mmap_threshold=",
            "glibc.malloc.mmap_max=",
            "glibc.malloc.trim_threshold=",
        ],
    ),
    (HUGE_PAGES, &["glibc.malloc.hugetlb="]),
];

/// Runs of the program [`enforce`] makes at most to get glibc to take its huge pages (see the
/// crate documentation); about one in two does, so eight fail together one time in 256.
pub const HUGE_PAGE_TRIES: u32 = 8;

/// The environment variable that counts those runs.
const TRIES_VAR: &str = "FERROVS_HUGE_PAGE_TRIES";

/// Which parts of the policy a program wants.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Policy {
    /// Keep freed memory (the first group of [`GROUPS`]).
    pub keep_freed: bool,
    /// Transparent huge pages for the heap (the second).
    pub huge_pages: bool,
}

impl Policy {
    /// The daemon's policy: both.
    pub const DAEMON: Policy = Policy {
        keep_freed: true,
        huge_pages: true,
    };

    /// The groups of [`GROUPS`] this policy wants.
    fn groups(self) -> impl Iterator<Item = &'static (&'static str, &'static [&'static str])> {
        GROUPS.iter().filter(move |(g, _)| match *g {
            KEEP_FREED => self.keep_freed,
            _ => self.huge_pages,
        })
    }
}

/// The `GLIBC_TUNABLES` value that adds the daemon's policy to `current`: each group of
/// [`GROUPS`] that `current` neither has nor overrides. `None` if there is none to add.
pub fn tunables_with_policy(current: Option<&str>) -> Option<String> {
    tunables_with(Policy::DAEMON, current)
}

/// [`tunables_with_policy`] for the groups of `policy`.
pub fn tunables_with(policy: Policy, current: Option<&str>) -> Option<String> {
    let current = current.unwrap_or_default();
    let mut parts: Vec<&str> = policy
        .groups()
        .filter(|(_, set)| !set.iter().any(|t| current.contains(t)))
        .map(|(group, _)| *group)
        .collect();
    if parts.is_empty() {
        return None;
    }
    if !current.is_empty() {
        parts.insert(0, current);
    }
    Some(parts.join(":"))
}

/// Makes this process follow the daemon's policy ([`enforce`] of [`Policy::DAEMON`]).
pub fn retain_freed_memory() -> bool {
    enforce(Policy::DAEMON)
}

/// Makes this process follow `policy`: if `GLIBC_TUNABLES` lacks a part of it, runs the
/// program again with it (this call then does not return); if it asks for huge pages and
/// glibc did not take them (see the crate documentation), runs it again too, up to
/// [`HUGE_PAGE_TRIES`] times. Returns `true` if the policy is in force, `false` if it could
/// not be set (another C library, the program could not be run again, or glibc kept refusing
/// its huge pages: each printed), which changes only speed.
pub fn enforce(policy: Policy) -> bool {
    if !cfg!(all(target_os = "linux", target_env = "gnu")) {
        return false;
    }
    let current = std::env::var("GLIBC_TUNABLES").ok();
    if let Some(tunables) = tunables_with(policy, current.as_deref()) {
        return fail_rerun(&tunables, rerun_with(&tunables, None));
    }
    let current = current.unwrap_or_default();
    if !has_group(&current, HUGE_PAGES) || huge_pages_taken() != Some(false) {
        return true;
    }
    let tries = std::env::var(TRIES_VAR)
        .ok()
        .and_then(|s| s.parse::<u32>().ok())
        .unwrap_or(0)
        + 1;
    if tries >= HUGE_PAGE_TRIES {
        eprintln!("ferrovs: glibc did not take {HUGE_PAGES} in {tries} runs; the heap stays on 4 KB pages");
        return false;
    }
    fail_rerun(&current, rerun_with(&current, Some(tries)))
}

/// Prints why the program could not run again; `false`.
fn fail_rerun(tunables: &str, r: std::io::Result<std::convert::Infallible>) -> bool {
    match r {
        Ok(never) => match never {},
        Err(e) => {
            eprintln!("ferrovs: cannot run again with GLIBC_TUNABLES={tunables} ({e}); glibc's default memory policy stays");
            false
        }
    }
}

/// Bytes between two writes of [`reserve_heap`]: the smallest page.
const PAGE: usize = 4096;

/// Largest reservation [`reserve_heap`] makes: below the policy's `trim_threshold`, so that
/// glibc keeps the freed block in the heap.
pub const MAX_RESERVE: usize = 1 << 30;

/// Whether this process keeps the memory it frees: `GLIBC_TUNABLES` has the first group of
/// [`GROUPS`] as the policy sets it.
pub fn keeps_freed_memory() -> bool {
    cfg!(all(target_os = "linux", target_env = "gnu"))
        && std::env::var("GLIBC_TUNABLES").is_ok_and(|t| has_group(&t, KEEP_FREED))
}

/// True if the `GLIBC_TUNABLES` value `tunables` sets every tunable of `group` (one of
/// [`GROUPS`]) exactly as the group does.
fn has_group(tunables: &str, group: &str) -> bool {
    group
        .split(':')
        .all(|want| tunables.split(':').any(|have| have == want))
}

/// Grows the heap by `bytes` (at most [`MAX_RESERVE`]), writes one byte in every page of it
/// so that the kernel backs it, and frees it: where this process keeps the memory it frees
/// ([`keeps_freed_memory`]: [`enforce`] first), later allocations take it from the heap
/// without a page fault. Returns the bytes reserved: 0 where the process does not keep freed
/// memory (the block would go back to the kernel) or `bytes` is 0.
///
/// The reservation is in the calling thread's malloc arena. The process's first thread uses
/// the main heap, which grows as one block; every other thread gets an arena of its own,
/// whose heaps hold at most 64 MB each, and a larger block (or a reservation of one) goes to
/// the main heap instead. So call it from the thread that will allocate the tables (the
/// writer), best the first thread, or set `glibc.malloc.arena_max=1` so that every thread
/// shares the main heap.
pub fn reserve_heap(bytes: usize) -> usize {
    let bytes = bytes.min(MAX_RESERVE);
    if bytes == 0 || !keeps_freed_memory() {
        return 0;
    }
    let mut block: Vec<u8> = Vec::with_capacity(bytes);
    for page in block.spare_capacity_mut().iter_mut().step_by(PAGE) {
        page.write(1);
    }
    // Kept from being optimized away: the block's writes are what faults its pages in.
    std::hint::black_box(&mut block);
    drop(block);
    bytes
}

/// Minor page faults of the calling thread so far (`/proc/thread-self/stat`), `None` where
/// that cannot be read: what [`reserve_heap`] takes out of later allocations.
pub fn minor_faults() -> Option<u64> {
    let stat = std::fs::read_to_string("/proc/thread-self/stat").ok()?;
    // The fields after the command name, which may hold spaces and parentheses: the state
    // is the third field, minor faults the tenth.
    let rest = stat.rsplit_once(')')?.1;
    rest.split_whitespace().nth(7)?.parse().ok()
}

/// Whether glibc asks for huge pages for its heap in this process: `Some(true)` if a fresh
/// 4 MB block of it lies in memory marked for them (`hg` in `/proc/self/smaps`), `Some(false)`
/// if not, `None` where that cannot be told or does not apply (the kernel's mode is not
/// `madvise`, no `/proc`).
pub fn huge_pages_taken() -> Option<bool> {
    let mode = std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled").ok()?;
    if !mode.contains("[madvise]") {
        return None;
    }
    // Larger than any free block of a starting process: glibc grows the heap for it (or maps
    // it, without `mmap_max=0`) and marks the new memory if it took the tunable.
    let probe: Vec<u8> = Vec::with_capacity(4 << 20);
    let at = probe.as_ptr() as usize;
    let smaps = std::fs::read_to_string("/proc/self/smaps").ok()?;
    vma_flags(&smaps, at).map(|f| f.split_whitespace().any(|x| x == "hg"))
}

/// The `VmFlags` of the mapping of `smaps` (the text of `/proc/PID/smaps`) that holds address
/// `at`.
fn vma_flags(smaps: &str, at: usize) -> Option<&str> {
    let mut inside = false;
    for line in smaps.lines() {
        let first = line.split_whitespace().next().unwrap_or_default();
        if let Some((lo, hi)) = first.split_once('-') {
            if let (Ok(lo), Ok(hi)) = (usize::from_str_radix(lo, 16), usize::from_str_radix(hi, 16))
            {
                inside = (lo..hi).contains(&at);
                continue;
            }
        }
        if inside {
            if let Some(flags) = line.strip_prefix("VmFlags:") {
                return Some(flags);
            }
        }
    }
    None
}

/// `exec`s this program with the same arguments, `GLIBC_TUNABLES=tunables` and, if given, the
/// count of huge-page runs so far.
#[cfg(unix)]
fn rerun_with(tunables: &str, tries: Option<u32>) -> std::io::Result<std::convert::Infallible> {
    use std::os::unix::process::CommandExt as _;
    let exe = std::env::current_exe()?;
    let mut args = std::env::args_os();
    let arg0 = args.next().unwrap_or_else(|| OsString::from(&exe));
    let mut cmd = std::process::Command::new(exe);
    cmd.arg0(arg0).args(args).env("GLIBC_TUNABLES", tunables);
    if let Some(t) = tries {
        cmd.env(TRIES_VAR, t.to_string());
    }
    Err(cmd.exec())
}

#[cfg(not(unix))]
fn rerun_with(_tunables: &str, _tries: Option<u32>) -> std::io::Result<std::convert::Infallible> {
    Err(std::io::Error::other("not a Unix system"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tunables_are_added_once_and_the_users_choice_stands() {
        assert_eq!(tunables_with_policy(None).as_deref(), Some(TUNABLES));
        assert_eq!(tunables_with_policy(Some("")).as_deref(), Some(TUNABLES));
        assert_eq!(
            GROUPS.map(|(g, _)| g).join(":"),
            TUNABLES,
            "the groups make the policy"
        );
        assert_eq!(
            tunables_with_policy(Some("glibc.malloc.hugetlb=0")).as_deref(),
            Some(format!("glibc.malloc.hugetlb=0:{KEEP_FREED}").as_str())
        );
        assert_eq!(tunables_with_policy(Some(TUNABLES)), None);
        assert_eq!(
            tunables_with_policy(Some("glibc.malloc.trim_threshold=0")).as_deref(),
            Some("glibc.malloc.trim_threshold=0:glibc.malloc.hugetlb=1")
        );
        assert_eq!(
            tunables_with_policy(Some("glibc.malloc.mmap_max=0:glibc.malloc.hugetlb=0")),
            None
        );
        assert_eq!(
            tunables_with_policy(Some("glibc.rtld.optional_static_tls=512")).as_deref(),
            Some(format!("glibc.rtld.optional_static_tls=512:{TUNABLES}").as_str())
        );
    }

    #[test]
    fn a_policy_adds_only_its_groups() {
        let small = Policy {
            keep_freed: true,
            huge_pages: false,
        };
        assert_eq!(tunables_with(small, None).as_deref(), Some(KEEP_FREED));
        assert_eq!(tunables_with(small, Some(KEEP_FREED)), None);
        let none = Policy {
            keep_freed: false,
            huge_pages: false,
        };
        assert_eq!(tunables_with(none, None), None);
        let huge = Policy {
            keep_freed: false,
            huge_pages: true,
        };
        assert_eq!(
            tunables_with(huge, Some(KEEP_FREED)).as_deref(),
            Some(TUNABLES)
        );
    }

    #[test]
    fn the_flags_of_the_mapping_holding_an_address() {
        let smaps = "\
55de1e07a000-55de35c37000 rw-p 00000000 00:00 0                          [heap]
Size:             386292 kB
AnonHugePages:         0 kB
VmFlags: rd wr mr mw me ac
55de35c37000-55de36000000 rw-p 00000000 00:00 0                          [heap]
Size:               3876 kB
VmFlags: rd wr mr mw me ac hg
7ffd1000-7ffd2000 r--p 00000000 08:01 12 /usr/lib/x.so
VmFlags: rd mr
";
        assert_eq!(
            vma_flags(smaps, 0x55de_1e07_a000),
            Some(" rd wr mr mw me ac")
        );
        assert_eq!(
            vma_flags(smaps, 0x55de_35c3_7000),
            Some(" rd wr mr mw me ac hg")
        );
        assert_eq!(vma_flags(smaps, 0x55de_3600_0000), None);
        assert_eq!(vma_flags(smaps, 0x7ffd_1fff), Some(" rd mr"));
    }

    /// Set in the child processes of `a_reserved_heap_takes_later_faults_away`: what the child
    /// does (`reserve` or `control`).
    const CHILD_VAR: &str = "FERROVS_MEMPOLICY_TEST_CHILD";

    /// In a child: minor faults of allocating and touching 48 MB, after a reservation of
    /// 64 MB (`reserve`) or without one (`control`), printed on a line of its own.
    #[test]
    fn reserve_child() {
        let Ok(mode) = std::env::var(CHILD_VAR) else {
            return;
        };
        let reserved = if mode == "reserve" {
            reserve_heap(64 << 20)
        } else {
            0
        };
        let before = minor_faults().expect("fault count");
        let mut v: Vec<u8> = Vec::with_capacity(48 << 20);
        for page in v.spare_capacity_mut().iter_mut().step_by(PAGE) {
            page.write(2);
        }
        std::hint::black_box(&mut v);
        let faults = minor_faults().expect("fault count") - before;
        println!("CHILD reserved={reserved} faults={faults} .");
    }

    /// Runs `reserve_child` in a child process with the first group of the policy (no huge
    /// pages, so that every 4 KB page faults on its own) and returns (reserved, faults).
    fn child(mode: &str) -> (usize, u64) {
        let out = std::process::Command::new(std::env::current_exe().expect("test binary"))
            .args([
                "--exact",
                "tests::reserve_child",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(CHILD_VAR, mode)
            // One arena: the test runs on a thread of libtest's, whose own arena's heaps hold at
            // most 64 MB each (see `reserve_heap`).
            .env(
                "GLIBC_TUNABLES",
                format!("{KEEP_FREED}:glibc.malloc.arena_max=1"),
            )
            .output()
            .expect("run the child");
        let text = String::from_utf8_lossy(&out.stdout);
        let line = text
            .lines()
            .find_map(|l| Some(&l[l.find("CHILD ")? + 6..]))
            .unwrap_or_else(|| panic!("no child line in {text:?}"));
        let field = |name: &str| -> u64 {
            line.split_whitespace()
                .find_map(|f| f.strip_prefix(name)?.parse().ok())
                .unwrap_or_else(|| panic!("no {name} in {line:?}"))
        };
        (
            usize::try_from(field("reserved=")).expect("fits"),
            field("faults="),
        )
    }

    #[test]
    fn a_reserved_heap_takes_later_faults_away() {
        if !cfg!(all(target_os = "linux", target_env = "gnu"))
            || minor_faults().is_none()
            || std::env::var_os(CHILD_VAR).is_some()
        {
            return;
        }
        let (none, control) = child("control");
        let (reserved, after) = child("reserve");
        assert_eq!(none, 0);
        assert_eq!(reserved, 64 << 20, "the child keeps freed memory");
        // 48 MB of 4 KB pages is 12,288 faults without the reservation (fewer only if the
        // kernel gives every process huge pages, `always` mode).
        let thp_always = std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled")
            .is_ok_and(|m| m.contains("[always]"));
        if !thp_always {
            assert!(control > 10_000, "control faults: {control}");
        }
        assert!(
            after < 64 && after * 4 < control.max(64),
            "faults after the reservation: {after}, without: {control}"
        );
    }

    #[test]
    fn no_reservation_without_the_policy() {
        if keeps_freed_memory() {
            return;
        }
        assert_eq!(reserve_heap(1 << 20), 0);
        assert_eq!(reserve_heap(0), 0);
    }

    #[test]
    fn huge_pages_are_told_in_this_process() {
        // Whatever glibc did in the test process, the answer is one of the three and the
        // probe does not fail; where the kernel's mode is `madvise` and `/proc` is mounted,
        // it is `Some`.
        let mode = std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled");
        let r = huge_pages_taken();
        if mode.is_ok_and(|m| m.contains("[madvise]"))
            && std::path::Path::new("/proc/self/smaps").exists()
        {
            assert!(r.is_some());
        } else {
            assert!(r.is_none());
        }
    }
}
