//! CPU time from /proc: of a process (all its threads, the exited ones
//! included: `utime + stime` of `/proc/PID/stat`), and of this process's
//! live threads by name (`/proc/self/task/TID`).

use std::{path::Path, process::Command};

/// Clock ticks per second of /proc's times (`getconf CLK_TCK`).
pub fn ticks_per_second() -> anyhow::Result<f64> {
    let out = Command::new("getconf").arg("CLK_TCK").output()?;
    Ok(String::from_utf8(out.stdout)?.trim().parse()?)
}

/// `utime + stime` of a `stat` file, in ticks.
fn stat_ticks(stat: &Path) -> anyhow::Result<u64> {
    let text = std::fs::read_to_string(stat)?;
    // The command name, in parentheses, may hold spaces: count fields from
    // the last ')'. After it, field 3 (state) is index 0; utime (14) is
    // index 11 and stime (15) index 12.
    let after = text
        .rsplit_once(')')
        .map(|(_, rest)| rest)
        .ok_or_else(|| anyhow::anyhow!("{}: no command name", stat.display()))?;
    let fields: Vec<&str> = after.split_whitespace().collect();
    anyhow::ensure!(fields.len() > 12, "{}: too few fields", stat.display());
    Ok(fields[11].parse::<u64>()? + fields[12].parse::<u64>()?)
}

/// CPU ticks the process `pid` has used.
pub fn process_ticks(pid: u32) -> anyhow::Result<u64> {
    stat_ticks(Path::new(&format!("/proc/{pid}/stat")))
}

/// CPU ticks of this process's live threads whose name starts with
/// `prefix` (a tokio runtime's `thread_name`).
pub fn own_threads_ticks(prefix: &str) -> anyhow::Result<u64> {
    let mut total = 0;
    for entry in std::fs::read_dir("/proc/self/task")? {
        let dir = entry?.path();
        // A thread that exits between listing and reading is skipped.
        let Ok(name) = std::fs::read_to_string(dir.join("comm")) else {
            continue;
        };
        if name.starts_with(prefix) {
            total += stat_ticks(&dir.join("stat")).unwrap_or(0);
        }
    }
    Ok(total)
}

/// The machine's load averages (`/proc/loadavg`: 1, 5 and 15 minutes).
pub fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "?".into())
}
