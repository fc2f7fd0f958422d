//! No orphans, even when the gateway is killed with SIGKILL: a small process of its own
//! (the gateway's binary, started as its hidden `reaper` subcommand) that is told every
//! child's process group as it starts and ends, and kills what is left when the gateway
//! goes away.
//!
//! The gateway holds the write end of the reaper's stdin (close-on-exec, so no child
//! inherits it). However the gateway ends — drained, crashed, SIGKILLed, OOM-killed — the
//! kernel closes that pipe; the reaper reads end-of-file and sends SIGKILL to every group
//! still listed: children that ignore stdin EOF and SIGTERM, and their own children (they
//! share the group), go too. A restarted gateway finds nothing of the old one.
//!
//! The reaper ignores SIGINT, SIGTERM, SIGHUP and SIGQUIT (a Ctrl-C to the terminal's
//! process group must not make it leave before the gateway has finished its drain).
//!
//! A child in a cgroup of its own is told by its cgroup's path too: at end-of-file the
//! reaper kills the whole cgroup (`cgroup.kill`), which reaches a descendant that left the
//! process group, and removes it.
//!
//! Protocol: one line per event, `+PGID` or `+/cgroup/path` (watch), `-PGID` or
//! `-/cgroup/path` (forget).

use std::collections::BTreeSet;
use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use nix::fcntl::{FcntlArg, OFlag, fcntl};
use nix::sys::signal::{SigHandler, Signal, killpg, signal};
use nix::unistd::Pid;
use tracing::{error, warn};

use crate::error::ChildError;

/// The gateway's side: tells the reaper which process groups are live.
#[derive(Debug)]
pub struct Reaper {
    inner: Mutex<Inner>,
}

#[derive(Debug)]
struct Inner {
    pipe: Option<ChildStdin>,
    /// Events the pipe did not take yet.
    pending: Vec<u8>,
    /// Kept so the reaper is reaped when the gateway exits normally.
    _process: Child,
}

impl Reaper {
    /// Starts `program args…` as the reaper (the gateway's own binary and its hidden
    /// subcommand), its stdin a pipe from this process.
    pub fn start(program: &Path, args: &[&str]) -> Result<Reaper, ChildError> {
        let mut process = std::process::Command::new(program)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| ChildError::Reaper {
                program: program.to_owned(),
                source: Arc::new(e),
            })?;
        let pipe = process.stdin.take();
        // Never block a gateway thread on it: a reaper that stops reading (stopped by a
        // debugger, say) costs lost events, logged, not a stalled spawn path.
        if let Some(p) = &pipe {
            let _ = fcntl(p, FcntlArg::F_SETFL(OFlag::O_NONBLOCK));
        }
        Ok(Reaper {
            inner: Mutex::new(Inner {
                pipe,
                pending: Vec::new(),
                _process: process,
            }),
        })
    }

    /// A child's process group started.
    pub fn watch(&self, pgid: i32) {
        self.say('+', pgid);
    }

    /// A child's process group was killed and reaped.
    pub fn forget(&self, pgid: i32) {
        self.say('-', pgid);
    }

    /// A child's cgroup was made (`true`) or removed (`false`).
    pub fn cgroup(&self, path: &Path, live: bool) {
        self.say(if live { '+' } else { '-' }, path.display());
    }

    /// Queues the event and writes what the pipe takes now. The reaper reads
    /// continuously, so the queue is empty but for a reaper that stopped reading (then
    /// events wait, in order, for the next write; none is lost or cut in half). A reaper
    /// that is gone is logged once, and children then die only with their sessions.
    fn say(&self, sign: char, what: impl std::fmt::Display) {
        let Ok(mut inner) = self.inner.lock() else {
            return;
        };
        let Inner { pipe, pending, .. } = &mut *inner;
        let Some(p) = pipe.as_mut() else {
            return;
        };
        pending.extend_from_slice(format!("{sign}{what}\n").as_bytes());
        while !pending.is_empty() {
            match p.write(pending) {
                Ok(0) => break,
                Ok(n) => {
                    pending.drain(..n);
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    if pending.len() > MAX_PENDING {
                        warn!(
                            bytes = pending.len(),
                            "the reaper is not reading; its events wait"
                        );
                    }
                    break;
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => {
                    error!(error = %e, "the reaper process is gone: stdio children will not be killed if the gateway is");
                    *pipe = None;
                    pending.clear();
                    break;
                }
            }
        }
    }
}

/// Events queued beyond this many bytes are worth a warning (a reaper stopped for long).
const MAX_PENDING: usize = 64 * 1024;

/// The reaper's side (`mcpgate reaper`): reads the events until end-of-file, then kills
/// every group and cgroup still listed. Returns how many groups and cgroups it killed.
pub fn serve(input: impl BufRead) -> usize {
    for s in [
        Signal::SIGINT,
        Signal::SIGTERM,
        Signal::SIGHUP,
        Signal::SIGQUIT,
    ] {
        // SAFETY: installs SIG_IGN, not a handler; no code runs on the signal.
        #[allow(unsafe_code)]
        let _ = unsafe { signal(s, SigHandler::SigIgn) };
    }
    reap(input)
}

/// Reads the events until end-of-file, then kills every group and cgroup still listed.
fn reap(input: impl BufRead) -> usize {
    let mut live = BTreeSet::new();
    let mut cgroups = BTreeSet::new();
    for line in input.lines() {
        let Ok(line) = line else { break };
        let (sign, n) = line.split_at(line.len().min(1));
        if n.starts_with('/') {
            match sign {
                "+" => cgroups.insert(PathBuf::from(n)),
                "-" => cgroups.remove(Path::new(n)),
                _ => false,
            };
            continue;
        }
        let Ok(pgid) = n.trim().parse::<i32>() else {
            continue;
        };
        if pgid <= 1 {
            continue;
        }
        match sign {
            "+" => live.insert(pgid),
            "-" => live.remove(&pgid),
            _ => false,
        };
    }
    for path in &cgroups {
        crate::cgroup::kill_dir(path);
    }
    // Twice: a member that was forking during the first signal is caught by the second.
    for round in 0..2 {
        for pgid in &live {
            let _ = killpg(Pid::from_raw(*pgid), Signal::SIGKILL);
        }
        if round == 0 {
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    for path in &cgroups {
        crate::cgroup::remove_dir(path, Duration::from_secs(1));
    }
    live.len() + cgroups.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kills_only_the_groups_still_listed_at_end_of_file() {
        // Group ids above any pid_max (2^22): no process has them, so nothing real is hit.
        let input = "+1000000001\n+1000000002\n-1000000001\nnot an event\n+1\n+0\n-7\n";
        assert_eq!(
            serve(input.as_bytes()),
            1,
            "only 1000000002 is left; 0 and 1 are never signalled"
        );
    }
}
