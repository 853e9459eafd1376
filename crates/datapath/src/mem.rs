//! The process's memory policy: keep the memory the allocator frees.
//!
//! A switch's tables grow in steps: a classifier subtable doubles its hash table, a trie is
//! built again in a new arena, a bundle's scratch vectors come and go. With glibc's defaults,
//! large blocks are `mmap`ed and given back to the kernel when freed, and the top of the heap
//! is trimmed, so the next table of that size starts on fresh pages: a page fault per 4 KB,
//! which on this kind of virtual machine costs several microseconds each. Measured with the
//! policy below: a 100,000-rule classifier commit 0.112 → 0.088 s, and rule insertion under
//! traffic (`ferrovs-bench insert`) 640K → 780-830K rules/s.
//!
//! The policy is glibc's tunables [`TUNABLES`]: every block comes from the heap
//! (`mmap_max=0`) and the heap is never trimmed, so freed memory is reused without faults.
//!
//! The cost is the memory the process keeps after its peak: at 256K exact rules and
//! megaflows, `ferrovs-bench datapath` measured 602 MiB of RSS with this policy against 331 MiB
//! with glibc's defaults (the freed parse and setup buffers of 256K rules stay in the heap, for
//! later allocations to reuse). A middle way was measured and not taken: `mmap` for blocks of
//! 32 MB and more (glibc's largest threshold) keeps RSS at 404 MiB, but a 256K-rule subtable's
//! table is 48 MB, so its growth faults again: a 100,000-rule commit into 162,144 rules took
//! 0.113 s instead of 0.102 s and its replay 0.064 s instead of 0.039 s. OVS-DPDK at the same
//! point holds 1.14 GiB plus 2 GiB of hugepages.
//!
//! glibc reads its tunables from the environment when a process starts, so
//! [`retain_freed_memory`] runs the program again (`exec`, same process id and arguments) with
//! them added to `GLIBC_TUNABLES`. A binary that runs the switch calls it first thing in `main`,
//! before it starts threads or opens anything. Safe code throughout: the project keeps `unsafe`
//! to the few modules style.md lists, and `mallopt` would need it.

use std::ffi::OsString;

/// The glibc tunables of the policy.
pub const TUNABLES: &str = "glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=2147483647";

/// The `GLIBC_TUNABLES` value that adds the policy to `current`, or `None` if `current`
/// already has it, or sets one of the tunables it depends on itself (the user's choice
/// stands).
pub fn tunables_with_policy(current: Option<&str>) -> Option<String> {
    const OURS: [&str; 3] = [
        "glibc.malloc.mmap_threshold=",
        "glibc.malloc.mmap_max=",
        "glibc.malloc.trim_threshold=",
    ];
    match current {
        Some(c) if OURS.iter().any(|t| c.contains(t)) => None,
        Some(c) if !c.is_empty() => Some(format!("{c}:{TUNABLES}")),
        _ => Some(TUNABLES.to_string()),
    }
}

/// Makes this process keep the memory it frees: if `GLIBC_TUNABLES` lacks the policy, runs
/// the program again with it (this call then does not return). Returns `true` if the policy
/// is in force, `false` if it could not be set (another C library, or the program could not be
/// run again, which is printed), which changes only speed.
pub fn retain_freed_memory() -> bool {
    if !cfg!(all(target_os = "linux", target_env = "gnu")) {
        return false;
    }
    let current = std::env::var("GLIBC_TUNABLES").ok();
    let Some(tunables) = tunables_with_policy(current.as_deref()) else {
        return true;
    };
    match rerun_with(&tunables) {
        Ok(never) => match never {},
        Err(e) => {
            eprintln!("ferrovs: cannot run again with GLIBC_TUNABLES={tunables} ({e}); glibc's default memory policy stays");
            false
        }
    }
}

/// `exec`s this program with the same arguments and `GLIBC_TUNABLES=tunables`.
#[cfg(unix)]
fn rerun_with(tunables: &str) -> std::io::Result<std::convert::Infallible> {
    use std::os::unix::process::CommandExt as _;
    let exe = std::env::current_exe()?;
    let mut args = std::env::args_os();
    let arg0 = args.next().unwrap_or_else(|| OsString::from(&exe));
    Err(std::process::Command::new(exe)
        .arg0(arg0)
        .args(args)
        .env("GLIBC_TUNABLES", tunables)
        .exec())
}

#[cfg(not(unix))]
fn rerun_with(_tunables: &str) -> std::io::Result<std::convert::Infallible> {
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
            tunables_with_policy(Some("glibc.malloc.hugetlb=1")),
            Some(format!("glibc.malloc.hugetlb=1:{TUNABLES}"))
        );
        assert_eq!(tunables_with_policy(Some(TUNABLES)), None);
        assert_eq!(
            tunables_with_policy(Some("glibc.malloc.trim_threshold=0")),
            None
        );
        assert_eq!(tunables_with_policy(Some("glibc.malloc.mmap_max=0")), None);
    }
}
