//! Linux's `/proc`, read in one place for the tests and the benchmarks:
//! which processes live, what they are, whose children they are, and the
//! CPU time and memory they used. A process may exit between two reads, so
//! one that is gone reads as nothing (`None`, empty), never as an error.

use std::collections::BTreeMap;
use std::time::Duration;

/// Clock ticks per second of `/proc/PID/stat`'s times (`USER_HZ`, 100 on Linux).
const TICKS_PER_SECOND: u64 = 100;

/// What `/proc/PID/stat` says of a process (the fields after its name).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stat {
    /// `R`, `S`, `Z` (a zombie, waiting for its parent to reap it), ...
    pub state: char,
    /// Its parent's pid.
    pub parent: u32,
    /// User plus system CPU time, in clock ticks.
    pub cpu_ticks: u64,
}

impl Stat {
    /// User plus system CPU time.
    pub fn cpu(&self) -> Duration {
        Duration::from_millis(self.cpu_ticks * 1000 / TICKS_PER_SECOND)
    }
}

/// Every live process's pid (zombies included).
pub fn pids() -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse().ok())
        .collect()
}

/// Its `stat` line, parsed.
pub fn stat(pid: u32) -> Option<Stat> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The name (in parentheses) may hold spaces and parentheses: the fields
    // start after the last `)`.
    let fields: Vec<&str> = text.rsplit_once(')')?.1.split_whitespace().collect();
    let number = |i: usize| fields.get(i).and_then(|f| f.parse::<u64>().ok());
    Some(Stat {
        state: fields.first()?.chars().next()?,
        parent: u32::try_from(number(1)?).ok()?,
        cpu_ticks: number(11)? + number(12)?,
    })
}

/// Whether it is gone, or a zombie (it has exited; only its parent's reaping is left).
pub fn gone(pid: u32) -> bool {
    stat(pid).is_none_or(|s| s.state == 'Z')
}

/// Its name as the kernel keeps it (`comm`: at most 15 bytes).
pub fn name(pid: u32) -> Option<String> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/comm")).ok()?;
    Some(text.trim_end_matches('\n').to_owned())
}

/// Its command line, one string per argument.
pub fn arguments(pid: u32) -> Vec<String> {
    nul_separated(&format!("/proc/{pid}/cmdline"))
}

/// Its environment, one `NAME=value` per variable (readable for one's own
/// processes only).
pub fn environment(pid: u32) -> Vec<String> {
    nul_separated(&format!("/proc/{pid}/environ"))
}

/// Its resident memory, in KiB (`VmRSS` of `/proc/PID/status`).
pub fn resident_kib(pid: u32) -> Option<u64> {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()?
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

/// The CPU time of each of its threads so far, in ns, by thread id
/// (`/proc/PID/task/TID/schedstat`).
pub fn thread_cpu_ns(pid: u32) -> BTreeMap<u32, u64> {
    let mut threads = BTreeMap::new();
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return threads;
    };
    for task in tasks.flatten() {
        let Some(tid) = task.file_name().to_str().and_then(|t| t.parse().ok()) else {
            continue;
        };
        let text = std::fs::read_to_string(task.path().join("schedstat")).unwrap_or_default();
        if let Some(ns) = text.split_whitespace().next().and_then(|n| n.parse().ok()) {
            threads.insert(tid, ns);
        }
    }
    threads
}

fn nul_separated(path: &str) -> Vec<String> {
    let bytes = std::fs::read(path).unwrap_or_default();
    bytes
        .split(|b| *b == 0)
        .filter(|part| !part.is_empty())
        .map(|part| String::from_utf8_lossy(part).into_owned())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_reads_as_itself() {
        let me = std::process::id();
        assert!(pids().contains(&me));
        let stat = stat(me).expect("our own stat");
        assert_ne!(stat.state, 'Z', "{stat:?}");
        assert_eq!(stat.parent, nix::unistd::getppid().as_raw() as u32);
        assert!(!gone(me));
        let arguments = arguments(me);
        let program = std::env::current_exe().expect("our program");
        assert!(
            arguments[0].ends_with(&*program.file_name().expect("a name").to_string_lossy()),
            "{arguments:?}"
        );
        assert!(
            environment(me).iter().any(|kv| kv.starts_with("PATH=")),
            "PATH is in our environment"
        );
        assert!(resident_kib(me).is_some_and(|kib| kib > 0));
        assert!(thread_cpu_ns(me).values().any(|ns| *ns > 0));
        let name = name(me).expect("a name");
        assert!(!name.is_empty() && name.len() <= 15, "{name}");
    }

    #[test]
    fn a_process_that_never_was_is_gone_and_reads_as_nothing() {
        // Above the kernel's largest pid (4194304).
        let never = 4_194_305;
        assert!(gone(never));
        assert_eq!(stat(never), None);
        assert_eq!(name(never), None);
        assert!(arguments(never).is_empty() && environment(never).is_empty());
        assert_eq!(resident_kib(never), None);
        assert!(thread_cpu_ns(never).is_empty());
    }
}
