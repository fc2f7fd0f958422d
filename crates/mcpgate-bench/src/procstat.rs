//! Readings from /proc: CPU time and resident memory of a process, machine-wide
//! busy time, and open file descriptors.

use std::sync::OnceLock;

use anyhow::{Context, Result, anyhow};
use nix::unistd::{SysconfVar, sysconf};

/// Clock ticks per second, the unit of /proc CPU times (100 if unknown).
fn clk_tck() -> f64 {
    static TCK: OnceLock<f64> = OnceLock::new();
    *TCK.get_or_init(|| match sysconf(SysconfVar::CLK_TCK) {
        Ok(Some(t)) if t > 0 => t as f64,
        _ => 100.0,
    })
}

/// User + system CPU seconds used so far by `pid` (all threads).
pub(crate) fn cpu_secs(pid: u32) -> Result<f64> {
    let (user, sys) = cpu_split(pid)?;
    Ok(user + sys)
}

/// (user, system) CPU seconds used so far by `pid` (all threads).
pub(crate) fn cpu_split(pid: u32) -> Result<(f64, f64)> {
    let path = format!("/proc/{pid}/stat");
    let text = std::fs::read_to_string(&path).with_context(|| format!("cannot read {path}"))?;
    // The command name (field 2) may contain spaces; fields after it are plain.
    let after = text
        .rfind(')')
        .map(|i| &text[i + 1..])
        .ok_or_else(|| anyhow!("{path}: unexpected format"))?;
    let fields: Vec<&str> = after.split_whitespace().collect();
    // `after` starts at field 3 (state); utime is field 14, stime field 15.
    let tick = |i: usize| -> Result<f64> {
        let raw = fields
            .get(i)
            .ok_or_else(|| anyhow!("{path}: too few fields"))?;
        Ok(raw
            .parse::<u64>()
            .with_context(|| format!("{path}: bad field"))? as f64)
    };
    Ok((tick(11)? / clk_tck(), tick(12)? / clk_tck()))
}

/// CPU seconds of this process.
pub(crate) fn self_cpu_secs() -> Result<f64> {
    cpu_secs(std::process::id())
}

/// Resident set size of `pid` in KiB (VmRSS).
pub(crate) fn rss_kib(pid: u32) -> Result<u64> {
    let path = format!("/proc/{pid}/status");
    let text = std::fs::read_to_string(&path).with_context(|| format!("cannot read {path}"))?;
    text.lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| anyhow!("{path}: no VmRSS line"))
}

/// Context switches (voluntary + involuntary) summed over all threads of `pid`.
pub(crate) fn ctx_switches(pid: u32) -> u64 {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return 0;
    };
    tasks
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("status")).ok())
        .flat_map(|text| {
            text.lines()
                .filter(|l| l.contains("ctxt_switches:"))
                .filter_map(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
                .collect::<Vec<_>>()
        })
        .sum()
}

/// Number of open file descriptors of `pid` (0 if unreadable).
pub(crate) fn fd_count(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |d| d.count())
}

/// Machine-wide CPU counters from /proc/stat: (busy ticks, total ticks).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct MachineTicks {
    busy: u64,
    total: u64,
}

impl MachineTicks {
    /// Reads the aggregate `cpu` line (zeros if unreadable).
    pub(crate) fn now() -> MachineTicks {
        let text = std::fs::read_to_string("/proc/stat").unwrap_or_default();
        let Some(line) = text.lines().find(|l| l.starts_with("cpu ")) else {
            return MachineTicks::default();
        };
        // user nice system idle iowait irq softirq steal (guest counted in user).
        let v: Vec<u64> = line
            .split_whitespace()
            .skip(1)
            .take(8)
            .filter_map(|x| x.parse().ok())
            .collect();
        let total: u64 = v.iter().sum();
        let idle = v.get(3).copied().unwrap_or(0) + v.get(4).copied().unwrap_or(0);
        MachineTicks {
            busy: total.saturating_sub(idle),
            total,
        }
    }

    /// Fraction of all cores' time that was busy between `self` and `later`.
    pub(crate) fn busy_since(self, later: MachineTicks) -> f64 {
        let total = later.total.saturating_sub(self.total);
        if total == 0 {
            return 0.0;
        }
        later.busy.saturating_sub(self.busy) as f64 / total as f64
    }
}
