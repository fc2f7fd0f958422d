//! What every stdio child of one gateway shares, and what one child carries from its start
//! to its reaping: the live count, the reaper that kills groups the gateway leaves behind,
//! the start records (backoff), the memory/process sampler, and where sandboxed sessions'
//! private `/tmp` directories go.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

use mcpgate_child::{
    Breach, Cgroup, Cgroups, Containment, PrivateTmp, Reaper, Record, Starts, Watch, Watched,
};
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use tokio::process::Child;
use tokio_util::task::TaskTracker;
use tracing::info;

use crate::error::{SpawnError, UpstreamError};

/// What starts a child: its command line and environment, and what contains it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Spawn<'a> {
    pub(crate) command: &'a [String],
    pub(crate) env: &'a BTreeMap<String, String>,
    pub(crate) env_clear: bool,
    pub(crate) cwd: Option<&'a str>,
    pub(crate) contain: &'a Containment,
}

/// A started child, not yet attached to a session (a warm one waits so).
#[derive(Debug)]
pub(crate) struct Ready {
    pub(crate) child: Child,
    pub(crate) held: Held,
}

/// The gateway-wide side of stdio children (one per connector).
#[derive(Debug, Clone)]
pub(crate) struct Children {
    count: Arc<AtomicI64>,
    reaper: Option<Arc<Reaper>>,
    starts: Arc<Starts>,
    watch: Watch,
    tmp_base: PathBuf,
    cgroups: Option<Arc<Cgroups>>,
}

impl Default for Children {
    fn default() -> Self {
        Children {
            count: Arc::new(AtomicI64::new(0)),
            reaper: None,
            starts: Arc::new(Starts::default()),
            watch: Watch::default(),
            tmp_base: std::env::temp_dir(),
            cgroups: None,
        }
    }
}

impl Children {
    pub(crate) fn live(&self) -> i64 {
        self.count.load(Ordering::Relaxed)
    }

    pub(crate) fn set_reaper(&mut self, r: Arc<Reaper>) {
        self.reaper = Some(r);
    }

    pub(crate) fn set_cgroups(&mut self, c: Arc<Cgroups>) {
        self.cgroups = Some(c);
    }

    pub(crate) fn set_starts(&mut self, s: Starts) {
        self.starts = Arc::new(s);
    }

    /// The commands whose children keep failing to start.
    pub(crate) fn failing(&self) -> Vec<(Vec<String>, mcpgate_child::Standing)> {
        self.starts.failing()
    }

    /// Starts a child as `how` says (refused while its command backs off); `warm` says
    /// it starts ahead of its session.
    pub(crate) fn launch(
        &self,
        how: Spawn<'_>,
        tasks: &TaskTracker,
        warm: bool,
    ) -> Result<Ready, UpstreamError> {
        let (program, args) = how.command.split_first().ok_or(SpawnError::EmptyCommand)?;
        let (record, tmp) = self.prepare(&how)?;
        let cgroup = self
            .cgroups
            .as_ref()
            .map(|c| c.create(&how.contain.limits))
            .transpose()
            .map_err(SpawnError::Contain)?;
        let launch = mcpgate_child::Launch {
            program,
            args,
            env: how.env,
            env_clear: how.env_clear,
            cwd: how.cwd,
            contain: how.contain,
            tmp: tmp.as_ref().map(PrivateTmp::path),
            cgroup: cgroup.as_ref(),
        };
        let child = launch.command().spawn().map_err(|e| SpawnError::Os {
            program: program.clone(),
            source: Arc::new(e),
        })?;
        let pid = child.id();
        info!(pid, command = %program, sandboxed = how.contain.sandbox.is_some(), warm, cgroup = ?cgroup.as_ref().map(Cgroup::path), "started stdio upstream");
        let mut held = self.started(pid, how.contain, tasks, record, (tmp, cgroup));
        held.warm = warm;
        Ok(Ready { child, held })
    }

    /// Before a start: the command's start record (refusing while it backs off) and,
    /// when sandboxed, the session's private `/tmp`.
    fn prepare(&self, how: &Spawn<'_>) -> Result<(Arc<Record>, Option<PrivateTmp>), SpawnError> {
        let key = format!(
            "{:?}|{:?}|{:?}|{}|{:?}",
            how.command, how.env, how.cwd, how.env_clear, how.contain
        );
        let record = self.starts.record(&key, how.command);
        record.admit().map_err(SpawnError::Backoff)?;
        let tmp = match how.contain.sandbox {
            Some(_) => Some(PrivateTmp::create(&self.tmp_base)?),
            None => None,
        };
        Ok((record, tmp))
    }

    /// After a start: counted, its group (and cgroup) told to the reaper and, under
    /// memory or process bounds, to the sampler.
    fn started(
        &self,
        pid: Option<u32>,
        contain: &Containment,
        tasks: &TaskTracker,
        record: Arc<Record>,
        (tmp, cgroup): (Option<PrivateTmp>, Option<Cgroup>),
    ) -> Held {
        self.count.fetch_add(1, Ordering::Relaxed);
        let pgid = pid.and_then(|p| i32::try_from(p).ok());
        if let (Some(r), Some(g)) = (&self.reaper, pgid) {
            r.watch(g);
        }
        if let (Some(r), Some(c)) = (&self.reaper, &cgroup) {
            r.cgroup(c.path(), true);
        }
        let watched = match pgid {
            Some(g) if contain.limits.watched() => {
                Some(self.watch.add(g, contain.limits, cgroup.as_ref(), tasks))
            }
            _ => None,
        };
        Held {
            children: self.clone(),
            pgid,
            watched,
            cpu_secs: contain.limits.cpu.map(|d| d.as_secs()),
            tmp,
            cgroup,
            record,
            warm: false,
            reaped: false,
        }
    }
}

/// What one live child holds until it is reaped.
#[derive(Debug)]
pub(crate) struct Held {
    children: Children,
    pgid: Option<i32>,
    watched: Option<Watched>,
    cpu_secs: Option<u64>,
    tmp: Option<PrivateTmp>,
    cgroup: Option<Cgroup>,
    /// Its command's start record.
    pub(crate) record: Arc<Record>,
    warm: bool,
    /// Set once the child was reaped and its group killed by its supervisor.
    reaped: bool,
}

impl Held {
    /// Why the gateway ended the child, when a bound did: "memory limit 256 MiB reached
    /// (…)", "CPU time limit 10 s reached". `signal` is the one that ended it, if any.
    /// The first item is the bound's metric label.
    pub(crate) fn bound_reached(&self, signal: Option<Signal>) -> Option<(&'static str, String)> {
        // The kernel's own record first: an OOM kill ends the child before any sample.
        let breach = (self.cgroup.as_ref().and_then(Cgroup::breach))
            .or_else(|| self.watched.as_ref().and_then(Watched::breach));
        if let Some(b) = breach {
            let label = match b {
                Breach::Memory { .. } => "memory",
                Breach::Processes { .. } => "processes",
            };
            return Some((label, b.to_string()));
        }
        match (signal, self.cpu_secs) {
            (Some(Signal::SIGXCPU), Some(s)) => {
                Some(("cpu", format!("CPU time limit {s} s reached")))
            }
            _ => None,
        }
    }

    /// Whether it was started ahead of its session.
    pub(crate) fn was_warm(&self) -> bool {
        self.warm
    }

    /// The child was reaped and its group killed: its private `/tmp` is removed (off the
    /// async threads); dropping does the rest.
    pub(crate) async fn release(mut self) {
        self.reaped = true;
        // Unwatched and forgotten before the await: the pid (the group's id) may be
        // reused by a new child while the directory is removed.
        self.forget();
        if let Some(t) = self.tmp.take() {
            t.remove().await;
        }
        if let Some(c) = self.cgroup.take() {
            let path = c.path().to_owned();
            c.remove().await;
            if let Some(r) = &self.children.reaper {
                r.cgroup(&path, false);
            }
        }
    }

    /// Out of the sampler and the reaper (once); a group never reaped is killed first.
    fn forget(&mut self) {
        self.watched = None;
        if let Some(g) = self.pgid.take() {
            if !self.reaped {
                let _ = killpg(Pid::from_raw(g), Signal::SIGKILL);
            }
            if let Some(r) = &self.children.reaper {
                r.forget(g);
            }
        }
        if let Some(c) = self.cgroup.take() {
            let path = c.path().to_owned();
            drop(c);
            if let Some(r) = &self.children.reaper {
                r.cgroup(&path, false);
            }
        }
    }
}

impl Drop for Held {
    /// Uncounted, forgotten by the sampler and the reaper; a child that was never reaped
    /// (a warm one nobody took) has its whole group killed first.
    fn drop(&mut self) {
        self.forget();
        self.children.count.fetch_sub(1, Ordering::Relaxed);
    }
}
