//! Allocation counts of a proxy process, from uprobes on libc's `malloc`, `calloc` and
//! `realloc` read with `perf stat` over a measuring window (`--allocs`).
//!
//! The method works for any dynamically linked process that allocates through libc —
//! the gateway (Rust's system allocator) and nginx alike — so both are counted the same
//! way. A probe hit traps into the kernel, so CPU figures of a run that counts
//! allocations are inflated; the report says so.

use std::process::Stdio;
use std::sync::OnceLock;

use anyhow::{Context, Result, anyhow, bail};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use tokio::io::AsyncReadExt;
use tokio::process::{Child, Command};

/// The functions counted.
const FUNCTIONS: [&str; 3] = ["malloc", "calloc", "realloc"];

/// Whether this run counts allocations (set once from the command line).
static ENABLED: OnceLock<bool> = OnceLock::new();

/// Creates the uprobes (idempotent) and turns counting on for this run.
pub(crate) fn enable() -> Result<()> {
    let libc = libc_path()?;
    let listed = std::process::Command::new("perf")
        .args(["probe", "-l"])
        .output()
        .context("cannot run `perf probe -l` (is perf installed?)")?;
    let listed = String::from_utf8_lossy(&listed.stdout).into_owned();
    for f in FUNCTIONS {
        if listed.contains(&format!("probe_libc:{f} ")) {
            continue;
        }
        let out = std::process::Command::new("perf")
            .args(["probe", "-q", "-x", &libc, f])
            .output()
            .with_context(|| format!("cannot run `perf probe -x {libc} {f}`"))?;
        if !out.status.success() {
            bail!(
                "`perf probe -x {libc} {f}` failed (root and uprobes needed): {}",
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
    }
    let _ = ENABLED.set(true);
    Ok(())
}

/// Whether allocations are being counted.
pub(crate) fn enabled() -> bool {
    ENABLED.get().copied().unwrap_or(false)
}

/// The libc the probes attach to.
fn libc_path() -> Result<String> {
    [
        "/lib/x86_64-linux-gnu/libc.so.6",
        "/lib/aarch64-linux-gnu/libc.so.6",
        "/lib64/libc.so.6",
    ]
    .into_iter()
    .find(|p| std::path::Path::new(p).exists())
    .map(str::to_owned)
    .ok_or_else(|| anyhow!("no libc.so.6 found to probe"))
}

/// A running count of one process's allocations.
pub(crate) struct Counter {
    child: Child,
}

impl Counter {
    /// Starts counting `pid`'s allocations.
    pub(crate) fn start(pid: u32) -> Result<Counter> {
        let events = FUNCTIONS.map(|f| format!("probe_libc:{f}")).join(",");
        let child = Command::new("perf")
            .args(["stat", "-x", ",", "-e", &events, "-p", &pid.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .context("cannot start `perf stat`")?;
        Ok(Counter { child })
    }

    /// Stops counting and returns the number of allocations in a window of `wall`
    /// seconds: perf attaches a little after the window opened, so each count is
    /// scaled from the time its probe was enabled to the window's length.
    pub(crate) async fn stop(mut self, wall: f64) -> Result<u64> {
        let pid = self
            .child
            .id()
            .ok_or_else(|| anyhow!("perf stat ended early"))?;
        let pid = i32::try_from(pid).context("perf pid out of range")?;
        kill(Pid::from_raw(pid), Signal::SIGINT).context("cannot stop perf stat")?;
        let mut err = String::new();
        if let Some(mut e) = self.child.stderr.take() {
            e.read_to_string(&mut err).await?;
        }
        self.child.wait().await?;
        parse(&err, wall)
    }
}

/// Sums the counts of `perf stat -x ,` output (`count,unit,event,run ns,...` per line),
/// each scaled from its run time to `wall` seconds (never scaled up more than 2×).
fn parse(text: &str, wall: f64) -> Result<u64> {
    let mut total = 0.0;
    let mut seen = 0;
    for line in text.lines() {
        let mut fields = line.split(',');
        let (Some(count), Some(_), Some(event), run) =
            (fields.next(), fields.next(), fields.next(), fields.next())
        else {
            continue;
        };
        if !event.starts_with("probe_libc:") {
            continue;
        }
        seen += 1;
        // "<not counted>" when the process made no such call in the window.
        let count = count.parse::<f64>().unwrap_or(0.0);
        let run = run.and_then(|r| r.parse::<f64>().ok()).unwrap_or(0.0) / 1e9;
        let scale = if run > 0.0 {
            (wall / run).clamp(1.0, 2.0)
        } else {
            1.0
        };
        total += count * scale;
    }
    if seen == 0 {
        bail!("perf stat printed no probe counts: {}", text.trim());
    }
    Ok(total.round() as u64)
}

#[cfg(test)]
mod tests {
    use super::parse;

    #[test]
    fn sums_probe_lines_and_refuses_output_without_them() {
        let text = "120,,probe_libc:malloc,1000000000,100.00,,\n<not counted>,,probe_libc:calloc,0,0,,\n7,,probe_libc:realloc,1000000000,100.00,,\n";
        assert_eq!(parse(text, 1.0).unwrap(), 127);
        // Counted for half the window: scaled to the whole of it.
        assert_eq!(
            parse("50,,probe_libc:malloc,500000000,100.00,,\n", 1.0).unwrap(),
            100
        );
        assert!(parse("perf: no permission\n", 1.0).is_err());
    }
}
