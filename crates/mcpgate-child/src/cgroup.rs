//! Children in cgroups of their own (cgroup v2), when the gateway has a delegated subtree:
//! every child and everything it starts — a grandchild that left the process group with
//! `setsid` included — is in one cgroup, killed as a whole (`cgroup.kill`) and removed at
//! reaping. The memory and process bounds go to the kernel (`memory.max`, `pids.max`)
//! when the subtree has those controllers; a bound whose controller is missing stays with
//! the sampler ([`crate::Watch`]).
//!
//! Layout: `ROOT/mcpgate-PID-N`, one per child (PID the gateway's). A child enters its
//! cgroup between fork and exec (it writes `0` to the cgroup's `cgroup.procs`, opened
//! before the fork), so nothing it starts is ever outside it.

use std::io::Write;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::breach::Breach;
use crate::contain::Limits;
use crate::error::ChildError;

/// The name of every child's cgroup starts so.
const PREFIX: &str = "mcpgate-";

/// A delegated cgroup v2 subtree the gateway puts its children in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cgroups {
    root: PathBuf,
    memory: bool,
    pids: bool,
}

/// Where the gateway's children go.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum CgroupRoot {
    /// No cgroups: process groups, the sampler and rlimits.
    #[default]
    Off,
    /// The gateway's own cgroup, delegated to it (systemd `Delegate=yes`): the gateway
    /// moves its processes into a leaf, `gateway`, so that the children's cgroups can sit
    /// beside it (cgroup v2 lets no cgroup with processes give controllers to children).
    Delegated,
    /// This directory of the cgroup v2 hierarchy (one the gateway is not in).
    Path(PathBuf),
}

impl CgroupRoot {
    /// Opens the subtree it names on this host (`None` for [`CgroupRoot::Off`]); for
    /// [`CgroupRoot::Delegated`], moves the gateway's processes into the `gateway` leaf
    /// first. Blocking; called once per configuration.
    pub fn open(&self) -> Result<Option<Cgroups>, ChildError> {
        match self {
            CgroupRoot::Off => Ok(None),
            CgroupRoot::Path(p) => Cgroups::open(p).map(Some),
            CgroupRoot::Delegated => {
                let own = own_cgroup()?;
                step_aside(&own)?;
                Cgroups::open(&own).map(Some)
            }
        }
    }
}

/// This process's cgroup v2 directory.
fn own_cgroup() -> Result<PathBuf, ChildError> {
    let why = |why: &'static str| ChildError::CgroupDelegated { why };
    let own = std::fs::read_to_string("/proc/self/cgroup")
        .map_err(|_| why("cannot read /proc/self/cgroup"))?;
    let rel = own
        .lines()
        .find_map(|l| l.strip_prefix("0::"))
        .map(str::trim)
        .ok_or_else(|| why("the gateway is in no cgroup v2 hierarchy"))?;
    if rel == "/" {
        return Err(why(
            "the gateway runs in the hierarchy's root cgroup, which is not delegated to it",
        ));
    }
    let mount = cgroup2_mount().ok_or_else(|| why("no cgroup2 file system is mounted"))?;
    Ok(mount.join(rel.trim_start_matches('/')))
}

/// Moves every process of `own` (the gateway, a reaper started before) into its leaf
/// `own/gateway`, leaving `own` free to give controllers to the children's cgroups.
fn step_aside(own: &Path) -> Result<(), ChildError> {
    let leaf = own.join(LEAF);
    let err = |why: &'static str, e: std::io::Error| ChildError::Cgroup {
        path: leaf.clone(),
        why,
        source: Arc::new(e),
    };
    match std::fs::create_dir(&leaf) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(err("cannot be created for the gateway itself", e)),
    }
    let procs = std::fs::read_to_string(own.join("cgroup.procs")).unwrap_or_default();
    for pid in procs.lines().map(str::trim).filter(|p| !p.is_empty()) {
        match write_file(&leaf.join("cgroup.procs"), pid) {
            Ok(()) => {}
            // It ended meanwhile.
            Err(e) if e.raw_os_error() == Some(nix::libc::ESRCH) => {}
            Err(e) => return Err(err("does not take the gateway's processes", e)),
        }
    }
    Ok(())
}

/// The leaf of a delegated cgroup the gateway itself runs in.
const LEAF: &str = "gateway";

/// Where the cgroup2 file system is mounted (from `/proc/self/mountinfo`).
pub fn cgroup2_mount() -> Option<PathBuf> {
    let info = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    info.lines().find_map(|l| {
        let (left, right) = l.split_once(" - ")?;
        let fstype = right.split_whitespace().next()?;
        let point = left.split_whitespace().nth(4)?;
        (fstype == "cgroup2").then(|| PathBuf::from(point))
    })
}

impl Cgroups {
    /// Opens `root`: a cgroup v2 directory the gateway can create cgroups in and move
    /// processes to; turns on the memory and pids controllers for its children where the
    /// subtree has them. Blocking; called once per configuration.
    pub fn open(root: &Path) -> Result<Cgroups, ChildError> {
        let err = |why: &'static str, e: std::io::Error| ChildError::Cgroup {
            path: root.to_owned(),
            why,
            source: Arc::new(e),
        };
        let controllers = std::fs::read_to_string(root.join("cgroup.controllers"))
            .map_err(|e| err("is not a cgroup v2 directory (no cgroup.controllers)", e))?;
        let has = |c: &str| controllers.split_whitespace().any(|x| x == c);
        let (memory, pids) = (has("memory"), has("pids"));
        let mut enable = String::new();
        for (c, on) in [("memory", memory), ("pids", pids)] {
            if on {
                enable.push_str(&format!("+{c} "));
            }
        }
        if !enable.is_empty() {
            write_file(&root.join("cgroup.subtree_control"), enable.trim()).map_err(|e| {
                err(
                    "cannot enable its controllers for children (does it hold processes itself?)",
                    e,
                )
            })?;
        }
        let probe = root.join(format!("{PREFIX}{}-probe", std::process::id()));
        std::fs::create_dir(&probe).map_err(|e| err("is not writable by the gateway", e))?;
        let _ = std::fs::remove_dir(&probe);
        Ok(Cgroups {
            root: root.to_owned(),
            memory,
            pids,
        })
    }

    /// The subtree's directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The bounds of `limits` the kernel holds here (the rest stay with the sampler).
    pub fn holds(&self, limits: &Limits) -> Limits {
        Limits {
            memory: limits.memory.filter(|_| self.memory),
            processes: limits.processes.filter(|_| self.pids),
            cpu: None,
            open_files: None,
        }
    }

    /// The limits of `limits` no controller here can hold, by key (for a warning).
    pub fn missing(&self, limits: &Limits) -> Vec<&'static str> {
        let mut out = Vec::new();
        if limits.memory.is_some() && !self.memory {
            out.push("memory");
        }
        if limits.processes.is_some() && !self.pids {
            out.push("processes");
        }
        out
    }

    /// A new cgroup for one child under `limits` (the ones this subtree holds).
    pub fn create(&self, limits: &Limits) -> Result<Cgroup, ChildError> {
        static N: AtomicU64 = AtomicU64::new(0);
        let n = N.fetch_add(1, Ordering::Relaxed);
        let path = self
            .root
            .join(format!("{PREFIX}{}-{n}", std::process::id()));
        let err = |why: &'static str, e: std::io::Error| ChildError::Cgroup {
            path: path.clone(),
            why,
            source: Arc::new(e),
        };
        std::fs::create_dir(&path).map_err(|e| err("cannot be created", e))?;
        let mut cg = Cgroup {
            path: path.clone(),
            procs: None,
            held: self.holds(limits),
        };
        cg.apply().map_err(|e| err("does not take its limits", e))?;
        let procs = std::fs::OpenOptions::new()
            .write(true)
            .open(path.join("cgroup.procs"))
            .map_err(|e| err("cannot be entered (cgroup.procs)", e))?;
        cg.procs = Some(procs.into());
        Ok(cg)
    }

    /// Kills and removes what a gateway that is gone left here: every `mcpgate-PID-N`
    /// whose PID is no running process. Returns how many it removed. Blocking.
    pub fn sweep(&self) -> usize {
        let Ok(dir) = std::fs::read_dir(&self.root) else {
            return 0;
        };
        let mut removed = 0;
        for e in dir.flatten() {
            if !crate::tmp::left_by_gone_gateway(&e.file_name(), PREFIX) {
                continue;
            }
            kill_dir(&e.path());
            if remove_dir(&e.path(), Duration::from_secs(1)) {
                removed += 1;
            }
        }
        removed
    }
}

/// One child's cgroup; killed and removed when dropped.
#[derive(Debug)]
pub struct Cgroup {
    path: PathBuf,
    procs: Option<OwnedFd>,
    held: Limits,
}

impl Cgroup {
    /// Its directory.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The bounds the kernel holds for it.
    pub fn held(&self) -> Limits {
        self.held
    }

    /// The open `cgroup.procs` the child writes `0` to between fork and exec.
    pub(crate) fn procs_fd(&self) -> Option<RawFd> {
        self.procs.as_ref().map(AsRawFd::as_raw_fd)
    }

    /// Sets `memory.max` (no swap, the whole cgroup killed on OOM) and `pids.max`.
    fn apply(&mut self) -> std::io::Result<()> {
        if let Some(m) = self.held.memory {
            write_file(&self.path.join("memory.max"), &m.to_string())?;
            // Absent without swap accounting: nothing to bound then.
            let _ = write_file(&self.path.join("memory.swap.max"), "0");
            write_file(&self.path.join("memory.oom.group"), "1")?;
        }
        if let Some(p) = self.held.processes {
            write_file(&self.path.join("pids.max"), &p.to_string())?;
        }
        Ok(())
    }

    /// Which kernel-held bound it reached, if one: an OOM kill in it (`memory.events`), or
    /// a fork refused at `pids.max` (`pids.events`).
    pub fn breach(&self) -> Option<Breach> {
        breach_at(&self.path, &self.held)
    }

    /// Kills every process in it.
    pub fn kill(&self) {
        kill_dir(&self.path);
    }

    /// Kills what is left, waits (up to a second) for it to empty, and removes it. Off
    /// the async threads.
    pub async fn remove(mut self) {
        let path = std::mem::take(&mut self.path);
        self.procs = None;
        let _ = tokio::task::spawn_blocking(move || {
            kill_dir(&path);
            if !remove_dir(&path, Duration::from_secs(1)) {
                tracing::warn!(path = %path.display(), "cannot remove a child's cgroup");
            }
        })
        .await;
    }
}

impl Drop for Cgroup {
    /// Not removed through [`Cgroup::remove`] (a warm child nobody took): killed, and
    /// removed once its processes are gone (a brief wait: they were just killed). One
    /// left behind is swept at the next start.
    fn drop(&mut self) {
        if !self.path.as_os_str().is_empty() {
            kill_dir(&self.path);
            remove_dir(&self.path, Duration::from_millis(100));
        }
    }
}

/// Which of `held` the cgroup at `path` reached, if one.
pub(crate) fn breach_at(path: &Path, held: &Limits) -> Option<Breach> {
    if let Some(limit) = held.memory
        && event(&path.join("memory.events"), "oom_kill") > 0
    {
        let used = read_u64(&path.join("memory.peak")).unwrap_or(limit);
        return Some(Breach::Memory { limit, used });
    }
    if let Some(limit) = held.processes
        && event(&path.join("pids.events"), "max") > 0
    {
        let count = read_u64(&path.join("pids.peak"))
            .or_else(|| read_u64(&path.join("pids.current")))
            .unwrap_or(limit);
        return Some(Breach::Processes { limit, count });
    }
    None
}

/// `cgroup.kill` (Linux 5.14); before that, SIGKILL to each listed process, twice.
pub(crate) fn kill_dir(path: &Path) {
    if write_file(&path.join("cgroup.kill"), "1").is_ok() {
        return;
    }
    for _ in 0..2 {
        let Ok(procs) = std::fs::read_to_string(path.join("cgroup.procs")) else {
            return;
        };
        for pid in procs.lines().filter_map(|l| l.trim().parse::<i32>().ok()) {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
    }
}

/// Removes an empty cgroup, retrying while its killed processes leave (until `wait`).
pub(crate) fn remove_dir(path: &Path, wait: Duration) -> bool {
    let until = Instant::now() + wait;
    loop {
        match std::fs::remove_dir(path) {
            Ok(()) => return true,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return true,
            Err(_) if Instant::now() < until => std::thread::sleep(Duration::from_millis(10)),
            Err(_) => return false,
        }
    }
}

fn write_file(path: &Path, value: &str) -> std::io::Result<()> {
    std::fs::OpenOptions::new()
        .write(true)
        .open(path)?
        .write_all(value.as_bytes())
}

fn read_u64(path: &Path) -> Option<u64> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

/// The counter `key` of a flat-keyed cgroup file (`memory.events`, `pids.events`).
pub(crate) fn event(path: &Path, key: &str) -> u64 {
    std::fs::read_to_string(path)
        .ok()
        .and_then(|t| {
            t.lines().find_map(|l| {
                let (k, v) = l.split_once(' ')?;
                (k == key).then(|| v.trim().parse().ok()).flatten()
            })
        })
        .unwrap_or(0)
}

#[cfg(test)]
mod tests;
