//! The processes the soak starts (the gateway, the HTTP testkit): stopped when dropped.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

/// A child process that is sent SIGTERM (then SIGKILL) when dropped.
pub(crate) struct Proc {
    child: Option<Child>,
}

impl Proc {
    /// Its pid (0 once stopped).
    pub(crate) fn pid(&self) -> u32 {
        self.child.as_ref().map_or(0, Child::id)
    }

    /// SIGTERM, then waits up to `limit`; SIGKILL after that. The exit code, if any.
    pub(crate) fn stop(&mut self, limit: Duration) -> Option<i32> {
        let mut child = self.child.take()?;
        let pid = i32::try_from(child.id()).ok()?;
        let _ = kill(Pid::from_raw(pid), Signal::SIGTERM);
        let until = Instant::now() + limit;
        loop {
            if let Ok(Some(status)) = child.try_wait() {
                return status.code();
            }
            if Instant::now() > until {
                let _ = child.kill();
                let _ = child.wait();
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.stop(Duration::from_secs(5));
    }
}

/// Starts `cmd` and returns it with the first stdout line stripped of `prefix`.
pub(crate) fn start(mut cmd: Command, prefix: &str) -> Result<(Proc, String)> {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .with_context(|| format!("cannot start {cmd:?}"))?;
    let stdout = child.stdout.take().context("stdout")?;
    let proc = Proc { child: Some(child) };
    let mut line = String::new();
    BufReader::new(stdout).read_line(&mut line)?;
    let url = line
        .trim()
        .strip_prefix(prefix)
        .ok_or_else(|| anyhow!("unexpected first line {line:?} from {cmd:?}"))?
        .to_owned();
    Ok((proc, url))
}
