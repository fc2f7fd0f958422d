//! What the numbers were measured on: cores, CPU model, versions.

use std::path::Path;
use std::process::{Command, Stdio};

/// The machine and software the run used.
#[derive(Debug)]
pub(crate) struct Machine {
    /// `available_parallelism`.
    pub(crate) cores: usize,
    /// `model name` from /proc/cpuinfo.
    pub(crate) cpu_model: String,
    /// `uname -r`.
    pub(crate) kernel: String,
    /// `git rev-parse --short HEAD` (+ "-dirty" with uncommitted changes) at run
    /// time; the binaries may be older (see `mcpgate_built`).
    pub(crate) commit: String,
    /// `mcpgate --version`.
    pub(crate) mcpgate: String,
    /// When the measured `mcpgate` binary was last modified (built), UTC.
    pub(crate) mcpgate_built: String,
    /// `node --version`.
    pub(crate) node: String,
}

impl Machine {
    /// Collects the facts; anything unknown reads "unknown".
    pub(crate) fn probe(root: &Path, bins: &Path) -> Machine {
        let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
        let cpu_model = std::fs::read_to_string("/proc/cpuinfo")
            .ok()
            .and_then(|t| {
                t.lines()
                    .find_map(|l| l.strip_prefix("model name"))
                    .and_then(|l| l.split_once(':'))
                    .map(|(_, m)| m.trim().to_owned())
            })
            .unwrap_or_else(unknown);
        let root_s = root.to_string_lossy();
        let commit = match run("git", &["-C", &root_s, "rev-parse", "--short", "HEAD"]) {
            Some(c) => {
                let dirty = run("git", &["-C", &root_s, "status", "--porcelain"])
                    .is_some_and(|s| !s.is_empty());
                if dirty { format!("{c}-dirty") } else { c }
            }
            None => unknown(),
        };
        let gw = bins.join("mcpgate");
        Machine {
            cores,
            cpu_model,
            kernel: run("uname", &["-r"]).unwrap_or_else(unknown),
            commit,
            mcpgate: run(&gw.to_string_lossy(), &["--version"]).unwrap_or_else(unknown),
            mcpgate_built: run(
                "date",
                &["-u", "-r", &gw.to_string_lossy(), "+%Y-%m-%d %H:%M:%S UTC"],
            )
            .unwrap_or_else(unknown),
            node: run("node", &["--version"]).unwrap_or_else(|| "not found".to_owned()),
        }
    }
}

fn unknown() -> String {
    "unknown".to_owned()
}

/// Runs a command and returns its trimmed stdout when it succeeds.
fn run(program: &str, args: &[&str]) -> Option<String> {
    let out = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
}
