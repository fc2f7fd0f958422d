//! The memory and process bounds: one sampler per gateway reads `/proc` (every process's
//! group, resident size and thread count) while any watched child lives, sums them per
//! watched process group, and kills a group over its bound, recording why, so the child's
//! session ends with a reason the client can read. Without a delegated cgroup this is how
//! a bound reaches a child's grandchildren too (an `npx` wrapper's `node`).

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use tokio_util::task::TaskTracker;
use tracing::warn;

use crate::breach::Breach;
use crate::cgroup::{Cgroup, breach_at, kill_dir};
use crate::contain::Limits;

/// The sampler of one gateway.
#[derive(Debug, Clone)]
pub struct Watch {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    interval: Duration,
    groups: Mutex<HashMap<i32, Entry>>,
    running: AtomicBool,
}

#[derive(Debug)]
struct Entry {
    /// The bounds sampled from `/proc`.
    limits: Limits,
    /// The child's cgroup and the bounds the kernel holds there (read from its events).
    cgroup: Option<(PathBuf, Limits)>,
    breach: Arc<Mutex<Option<Breach>>>,
}

impl Default for Watch {
    fn default() -> Self {
        Watch::new(Duration::from_millis(200))
    }
}

/// One watched child; dropping it stops the watch.
#[derive(Debug)]
pub struct Watched {
    pgid: i32,
    inner: Arc<Inner>,
    breach: Arc<Mutex<Option<Breach>>>,
}

impl Watched {
    /// Why the gateway killed the child, if it did.
    pub fn breach(&self) -> Option<Breach> {
        lock(&self.breach).clone()
    }
}

impl Drop for Watched {
    fn drop(&mut self) {
        lock(&self.inner.groups).remove(&self.pgid);
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    match m.lock() {
        Ok(g) => g,
        Err(p) => p.into_inner(),
    }
}

impl Watch {
    /// A sampler reading `/proc` every `interval` while anything is watched.
    pub fn new(interval: Duration) -> Self {
        Watch {
            inner: Arc::new(Inner {
                interval,
                groups: Mutex::new(HashMap::new()),
                running: AtomicBool::new(false),
            }),
        }
    }

    /// Watches process group `pgid` under `limits` (the sampler runs on `tasks` until
    /// nothing is watched). The bounds its `cgroup` holds are the kernel's; the sampler
    /// only reads whether they were reached.
    pub fn add(
        &self,
        pgid: i32,
        limits: Limits,
        cgroup: Option<&Cgroup>,
        tasks: &TaskTracker,
    ) -> Watched {
        let breach = Arc::new(Mutex::new(None));
        let held = cgroup.map(Cgroup::held).unwrap_or_default();
        let sampled = Limits {
            memory: limits.memory.filter(|_| held.memory.is_none()),
            processes: limits.processes.filter(|_| held.processes.is_none()),
            ..limits
        };
        lock(&self.inner.groups).insert(
            pgid,
            Entry {
                limits: sampled,
                cgroup: cgroup.map(|c| (c.path().to_owned(), held)),
                breach: breach.clone(),
            },
        );
        if !self.inner.running.swap(true, Ordering::AcqRel) {
            tasks.spawn(sample_loop(self.inner.clone()));
        }
        Watched {
            pgid,
            inner: self.inner.clone(),
            breach,
        }
    }
}

async fn sample_loop(inner: Arc<Inner>) {
    loop {
        tokio::time::sleep(inner.interval).await;
        let now = {
            let groups = lock(&inner.groups);
            let wanted: Vec<i32> = groups
                .iter()
                .filter(|(_, e)| e.limits.watched())
                .map(|(g, _)| *g)
                .collect();
            let cgroups: Vec<(i32, PathBuf, Limits)> = groups
                .iter()
                .filter_map(|(g, e)| e.cgroup.clone().map(|(p, l)| (*g, p, l)))
                .collect();
            if groups.is_empty() {
                None
            } else {
                Some((wanted, cgroups))
            }
        };
        let Some((wanted, cgroups)) = now else {
            inner.running.store(false, Ordering::Release);
            // A child added between the check and the store starts no second loop; it
            // is picked up here.
            if lock(&inner.groups).is_empty() || inner.running.swap(true, Ordering::AcqRel) {
                return;
            }
            continue;
        };
        let read = move || {
            let usage = if wanted.is_empty() {
                HashMap::new()
            } else {
                scan(&wanted)
            };
            let kernel: Vec<(i32, Breach, PathBuf)> = cgroups
                .into_iter()
                .filter_map(|(g, p, held)| breach_at(&p, &held).map(|b| (g, b, p)))
                .collect();
            (usage, kernel)
        };
        let Ok((usage, kernel)) = tokio::task::spawn_blocking(read).await else {
            continue;
        };
        enforce(&inner, &usage, &kernel);
    }
}

/// Kills each group over a bound, recording the breach first: those the sampler found
/// over, and the cgroups whose kernel-held bound was reached (`kernel`).
fn enforce(inner: &Inner, usage: &HashMap<i32, Usage>, kernel: &[(i32, Breach, PathBuf)]) {
    let groups = lock(&inner.groups);
    for (pgid, breach, path) in kernel {
        if let Some(e) = groups.get(pgid) {
            record(&e.breach, *pgid, breach.clone());
            kill_dir(path);
        }
    }
    for (pgid, e) in groups.iter() {
        let Some(u) = usage.get(pgid) else { continue };
        let breach = match (e.limits.memory, e.limits.processes) {
            (Some(limit), _) if u.rss > limit => Breach::Memory { limit, used: u.rss },
            (_, Some(limit)) if u.threads > limit => Breach::Processes {
                limit,
                count: u.threads,
            },
            _ => continue,
        };
        record(&e.breach, *pgid, breach);
        let _ = killpg(Pid::from_raw(*pgid), Signal::SIGKILL);
    }
}

/// The first breach of a child is its reason.
fn record(slot: &Mutex<Option<Breach>>, pgid: i32, breach: Breach) {
    let mut b = lock(slot);
    if b.is_none() {
        warn!(pgid, "stdio child {breach}: killing it");
        *b = Some(breach);
    }
}

/// What one process group holds.
#[derive(Debug, Default, Clone, Copy)]
struct Usage {
    rss: u64,
    threads: u64,
}

/// Reads every `/proc/PID/stat` and sums the `wanted` groups' resident bytes and threads.
fn scan(wanted: &[i32]) -> HashMap<i32, Usage> {
    let page = nix::unistd::sysconf(nix::unistd::SysconfVar::PAGE_SIZE)
        .ok()
        .flatten()
        .and_then(|p| u64::try_from(p).ok())
        .unwrap_or(4096);
    let mut out: HashMap<i32, Usage> = HashMap::new();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return out;
    };
    for e in dir.flatten() {
        let name = e.file_name();
        let Some(pid) = name
            .to_str()
            .filter(|n| n.bytes().all(|b| b.is_ascii_digit()))
        else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        let Some((pgrp, threads, rss)) = parse_stat(&stat) else {
            continue;
        };
        if wanted.contains(&pgrp) {
            let u = out.entry(pgrp).or_default();
            u.threads += threads;
            u.rss += rss.saturating_mul(page);
        }
    }
    out
}

/// `(pgrp, num_threads, rss pages)` from a `/proc/PID/stat` line (fields 5, 20 and 24;
/// counted after the parenthesised command name, which may hold spaces).
fn parse_stat(stat: &str) -> Option<(i32, u64, u64)> {
    let (_, rest) = stat.rsplit_once(')')?;
    let f: Vec<&str> = rest.split_whitespace().collect();
    // rest starts at field 3 (state).
    let pgrp = f.get(2)?.parse().ok()?;
    let threads = f.get(17)?.parse().ok()?;
    let rss = f.get(21)?.parse().ok()?;
    Some((pgrp, threads, rss))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_group_threads_and_rss_past_a_command_with_spaces() {
        let line = "4242 (a (b) c) S 1 4240 4240 0 -1 4194560 100 0 0 0 5 3 0 0 20 0 7 0 1234 \
                    987654 321 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0";
        assert_eq!(parse_stat(line), Some((4240, 7, 321)));
    }

    #[test]
    fn names_the_bound() {
        let b = Breach::Memory {
            limit: 256 << 20,
            used: 300 << 20,
        };
        assert_eq!(
            b.to_string(),
            "memory limit 256 MiB reached (300 MiB resident)"
        );
    }
}
