//! CPU time spent by each party of a run (the server: skiplock or a broker, the PostgreSQL cluster, the
//! load generator with its pgbench children), read from /proc. On a small machine where all three share the
//! cores, CPU per message says what bounds a workload better than throughput alone, and it is far less
//! noisy.

use std::path::Path;

/// Linux reports process times in USER_HZ ticks, 100 a second on every architecture it runs on.
const TICKS_PER_SECOND: f64 = 100.0;

/// Seconds of CPU used so far, by party.
#[derive(Debug, Clone, Copy, Default)]
pub struct CpuTimes {
    pub server: f64,
    pub postgres: f64,
    pub client: f64,
}

impl std::ops::Sub for CpuTimes {
    type Output = CpuTimes;
    fn sub(self, earlier: CpuTimes) -> CpuTimes {
        CpuTimes {
            server: self.server - earlier.server,
            postgres: self.postgres - earlier.postgres,
            client: self.client - earlier.client,
        }
    }
}

/// (pid, ppid, own seconds, reaped children's seconds) of one process.
fn stat(pid: &str) -> Option<(u32, u32, f64, f64)> {
    stat_with_name(pid).map(|(stat, _)| stat)
}

#[allow(clippy::type_complexity)]
fn stat_with_name(pid: &str) -> Option<((u32, u32, f64, f64), String)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may hold spaces and parentheses; the fields follow the last ')'.
    let name = text[text.find('(')? + 1..text.rfind(')')?].to_owned();
    let fields: Vec<&str> = text[text.rfind(')')? + 2..].split(' ').collect();
    let tick = |i: usize| fields.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0) / TICKS_PER_SECOND;
    // After the name: state(0) ppid(1) ... utime(11) stime(12) cutime(13) cstime(14).
    let stat = (pid.parse().ok()?, fields.get(1)?.parse().ok()?, tick(11) + tick(12), tick(13) + tick(14));
    Some((stat, name))
}

/// The pids of the processes whose command name is `name` (beam.smp, say).
pub fn pids_named(name: &str) -> Vec<u32> {
    let processes = std::fs::read_dir("/proc").into_iter().flatten().flatten();
    processes
        .filter_map(|entry| stat_with_name(entry.file_name().to_str()?))
        .filter(|(_, comm)| comm == name)
        .map(|((pid, ..), _)| pid)
        .collect()
}

/// CPU used by the server processes, the postmaster with every backend it has started (live ones, and
/// through the postmaster's reaped-children time, the ones that exited), and this process with its
/// reaped children (pgbench).
pub fn sample(server_pids: &[u32], postmaster_pid: u32) -> CpuTimes {
    let mut times = CpuTimes::default();
    let processes = std::fs::read_dir("/proc").into_iter().flatten().flatten();
    for entry in processes {
        let name = entry.file_name();
        let Some((pid, ppid, own, children)) = name.to_str().and_then(stat) else { continue };
        if server_pids.contains(&pid) {
            times.server += own;
        } else if pid == postmaster_pid {
            times.postgres += own + children;
        } else if ppid == postmaster_pid {
            times.postgres += own;
        }
    }
    if let Some((_, _, own, children)) = stat(&std::process::id().to_string()) {
        times.client = own + children;
    }
    times
}

/// The parent of process `pid` (a backend's is its postmaster).
pub fn parent_pid(pid: u32) -> Option<u32> {
    stat(&pid.to_string()).map(|(_, ppid, ..)| ppid)
}

/// The postmaster's pid, from the first line of `postmaster.pid` in the data directory.
pub fn postmaster_pid(data_dir: &Path) -> Option<u32> {
    std::fs::read_to_string(data_dir.join("postmaster.pid")).ok()?.lines().next()?.trim().parse().ok()
}
