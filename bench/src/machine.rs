//! What the machine itself shows in `/proc`: CPU time of a process, of Postgres's processes and
//! of the whole machine, resident memory, and the kernel's dirty page cache and writeback. The
//! benchmark runs on the machine it measures, so everything here is local.

use std::collections::HashMap;

use crate::fields::field;

pub fn clock_ticks() -> f64 {
    // SAFETY: sysconf has no preconditions.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if ticks > 0 { ticks as f64 } else { 100.0 }
}

/// utime + stime of the process, in clock ticks (fields 14 and 15 of /proc/PID/stat).
pub fn cpu_ticks(pid: u32) -> Option<u64> {
    stat_ticks(&std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?).map(|(_, t)| t)
}

/// (command name, utime + stime) from the text of a /proc/PID/stat.
fn stat_ticks(stat: &str) -> Option<(&str, u64)> {
    // The command name is in parentheses and may hold spaces; fields after it are space
    // separated.
    let open = stat.find('(')?;
    let close = stat.rfind(')')?;
    let rest = stat.get(close + 2..)?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // `rest` starts at field 3 (state), so utime (14) is index 11.
    let ticks = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    Some((&stat[open + 1..close], ticks))
}

/// (busy, total) ticks of the whole machine from /proc/stat.
pub fn machine_ticks() -> Option<(u64, u64)> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let cpu = stat.lines().next()?.strip_prefix("cpu ")?;
    let v: Vec<u64> = cpu
        .split_whitespace()
        .filter_map(|x| x.parse().ok())
        .collect();
    let total: u64 = v.iter().take(8).sum();
    let idle = v.get(3)? + v.get(4).copied().unwrap_or(0);
    Some((total - idle, total))
}

pub fn status_kib(pid: u32, key: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    field(&status, key).map(|kib| kib as u64)
}

/// The CPU of every process named `postgres` on this machine (the postmaster, its backends,
/// the WAL writer, the checkpointer): Postgres runs beside the benchmark, so what it spends is
/// part of what a request costs the machine. Processes come and go (connections), so ticks
/// are kept per process and only what each spent since it was last seen counts.
#[derive(Default)]
pub struct PostgresCpu {
    seen: HashMap<u32, u64>,
}

impl PostgresCpu {
    /// Ticks spent by Postgres's processes since the previous call (all they ever spent, the
    /// first time).
    pub fn ticks_since_last(&mut self) -> u64 {
        let mut now = HashMap::new();
        let mut spent = 0;
        for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
            let Some(pid) = entry
                .file_name()
                .to_str()
                .and_then(|s| s.parse::<u32>().ok())
            else {
                continue;
            };
            let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
                continue;
            };
            let Some(("postgres", ticks)) = stat_ticks(&stat) else {
                continue;
            };
            spent += ticks.saturating_sub(self.seen.get(&pid).copied().unwrap_or(0));
            now.insert(pid, ticks);
        }
        self.seen = now;
        spent
    }
}

/// Dirty page cache not yet written, plus what is being written now (`Dirty` + `Writeback`
/// in /proc/meminfo), in KiB.
pub fn dirty_kib() -> Option<u64> {
    let meminfo = std::fs::read_to_string("/proc/meminfo").ok()?;
    let dirty = field(&meminfo, "Dirty:")?;
    let writeback = field(&meminfo, "Writeback:").unwrap_or(0.0);
    Some((dirty + writeback) as u64)
}

/// Pages the kernel has written to disk since boot (`nr_written` in /proc/vmstat).
pub fn written_pages() -> Option<u64> {
    let vmstat = std::fs::read_to_string("/proc/vmstat").ok()?;
    field(&vmstat, "nr_written ").map(|n| n as u64)
}

pub fn page_kib() -> f64 {
    // SAFETY: sysconf has no preconditions.
    let bytes = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if bytes > 0 {
        bytes as f64 / 1024.0
    } else {
        4.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_and_the_machine_parse() {
        assert!(cpu_ticks(std::process::id()).is_some());
        assert!(status_kib(std::process::id(), "VmHWM:").unwrap() > 0);
        assert!(machine_ticks().is_some());
        assert!(dirty_kib().is_some());
        assert!(written_pages().is_some());
    }

    #[test]
    fn a_command_name_with_spaces_and_parentheses_parses() {
        let stat = "42 (postgres: wal (writer)) S 1 42 42 0 -1 4194624 100 0 0 0 7 5 0 0 20 0 1 0";
        assert_eq!(stat_ticks(stat), Some(("postgres: wal (writer)", 12)));
        let stat = "7 (postgres) S 1 7 7 0 -1 4194624 100 0 0 0 30 12 0 0 20 0 1 0";
        assert_eq!(stat_ticks(stat), Some(("postgres", 42)));
    }
}
