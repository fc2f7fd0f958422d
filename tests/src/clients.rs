//! The fixtures in `tests/clients` (installed by `scripts/setup-test-deps`): the official
//! everything server ([`Everything`], or over stdio: [`everything_stdio_toml`]) and the
//! official TypeScript and Python SDK clients ([`run_client`]), plus [`run_json_line`],
//! which runs any client script that prints its findings as one JSON line.

use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, ChildStdin, Command};

/// What to run when a fixture is missing.
pub const SETUP_HINT: &str = "run `scripts/setup-test-deps` from the repository root";
/// How long an SDK client run may take.
const CLIENT_TIMEOUT: Duration = Duration::from_secs(30);

/// The repository root.
pub fn repo_root() -> PathBuf {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
        .canonicalize()
        .expect("repository root exists")
}

/// `dir` (relative to the repository root), after checking that each of `deps` (relative
/// to it) is installed; a missing one fails with `hint`.
pub(crate) fn installed(dir: &str, deps: &[&str], hint: &str) -> PathBuf {
    let dir = repo_root().join(dir);
    for dep in deps {
        assert!(
            dir.join(dep).exists(),
            "missing {}: {hint}",
            dir.join(dep).display()
        );
    }
    dir
}

/// `tests/clients`, after checking the node dependencies are installed.
pub fn dir() -> PathBuf {
    installed(
        "tests/clients",
        &[
            "node_modules/@modelcontextprotocol/sdk/package.json",
            "node_modules/@modelcontextprotocol/server-everything/package.json",
            "node_modules/@modelcontextprotocol/server-basic-vanillajs/package.json",
            "node_modules/@modelcontextprotocol/server-map/package.json",
            "node_modules/@modelcontextprotocol/ext-apps/package.json",
        ],
        SETUP_HINT,
    )
}

/// A `[[server]]` named `everything`: `node everything_server.mjs stdio`, one child per
/// session.
pub fn everything_stdio_toml() -> String {
    let launcher = dir().join("everything_server.mjs").display().to_string();
    format!(
        "[[server]]\nname = \"everything\"\ntransport = \"stdio\"\ncommand = [\"node\", {launcher:?}, \"stdio\"]\n"
    )
}

/// The everything server in an HTTP mode (`streamableHttp`, `sse`); killed on drop (and
/// it exits by itself when its stdin, held here, closes).
#[derive(Debug)]
pub struct Everything {
    _child: Child,
    _stdin: ChildStdin,
    /// Its MCP endpoint.
    pub url: String,
    /// Every stderr line so far (its request log), drained continuously.
    log: Arc<Mutex<Vec<String>>>,
}

impl Everything {
    /// Starts it in `mode` on an ephemeral port and waits (20 s at most) until it is ready.
    pub async fn start(mode: &str) -> Everything {
        let mut child = Command::new("node")
            .arg(dir().join("everything_server.mjs"))
            .arg(mode)
            .env("PORT", "0")
            .env("EVERYTHING_EXIT_ON_STDIN_EOF", "1")
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap_or_else(|e| panic!("spawn node failed ({e}): {SETUP_HINT}"));
        let stdin = child.stdin.take().unwrap();
        let stderr = child.stderr.take().unwrap();
        let log = Arc::new(Mutex::new(Vec::new()));
        let (ready_tx, ready_rx) = tokio::sync::oneshot::channel();
        let sink = log.clone();
        tokio::spawn(async move {
            let mut ready_tx = Some(ready_tx);
            let mut lines = BufReader::new(stderr).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                if let Some(rest) = line.strip_prefix("MCPGATE_EVERYTHING_READY ") {
                    let url = rest
                        .split_whitespace()
                        .find_map(|f| f.strip_prefix("url="))
                        .map(str::to_owned);
                    if let (Some(tx), Some(url)) = (ready_tx.take(), url) {
                        let _ = tx.send(url);
                    }
                }
                sink.lock().unwrap().push(line);
            }
        });
        let url = tokio::time::timeout(Duration::from_secs(20), ready_rx)
            .await
            .ok()
            .and_then(Result::ok)
            .unwrap_or_else(|| {
                panic!(
                    "the everything server ({mode}) did not get ready within 20 s; stderr:\n{}",
                    log.lock().unwrap().join("\n")
                )
            });
        Everything {
            _child: child,
            _stdin: stdin,
            url,
            log,
        }
    }

    /// Its stderr (request log) so far.
    pub fn lines(&self) -> Vec<String> {
        self.log.lock().unwrap().clone()
    }

    /// The session ids it created (from its "Session initialized with ID" log).
    pub fn session_ids(&self) -> Vec<String> {
        self.lines()
            .iter()
            .filter_map(|l| l.strip_prefix("Session initialized with ID: "))
            .map(|s| s.trim().to_owned())
            .collect()
    }
}

/// How a client script ended.
#[derive(Debug)]
pub struct JsonRun {
    /// The last line of its stdout that is JSON.
    pub json: Value,
    /// Its stderr.
    pub stderr: String,
    /// Its exit status.
    pub status: ExitStatus,
}

/// Runs `cmd` (stdin closed, killed when it takes longer than `limit`) and returns the
/// last JSON line it printed; panics, naming `what` and `hint`, when it cannot be spawned,
/// times out or prints no JSON line.
pub async fn run_json_line(mut cmd: Command, what: &str, limit: Duration, hint: &str) -> JsonRun {
    let out = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(limit, out)
        .await
        .unwrap_or_else(|_| panic!("{what} timed out after {limit:?}"))
        .unwrap_or_else(|e| panic!("spawn {what} failed ({e}): {hint}"));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let json = stdout
        .lines()
        .rev()
        .find_map(|l| serde_json::from_str(l).ok())
        .unwrap_or_else(|| {
            panic!(
                "{what} printed no JSON line ({}):\nstdout: {stdout}\nstderr: {stderr}",
                out.status
            )
        });
    JsonRun {
        json,
        stderr,
        status: out.status,
    }
}

/// Which official SDK client.
#[derive(Debug, Clone, Copy)]
pub enum Sdk {
    /// `tests/clients/ts_client.mjs` (TypeScript SDK).
    Ts,
    /// `tests/clients/py_client.py` (Python SDK, in `.venv`).
    Py,
}

/// The program and script that run `sdk`'s client; fails when it is not installed.
fn client_command(sdk: Sdk) -> (PathBuf, PathBuf) {
    let dir = dir(); // checks node_modules (the TS SDK)
    match sdk {
        Sdk::Ts => (PathBuf::from("node"), dir.join("ts_client.mjs")),
        Sdk::Py => {
            let python = repo_root().join(".venv/bin/python");
            assert!(
                python.exists(),
                "missing {} (Python SDK venv): {SETUP_HINT}",
                python.display()
            );
            (python, dir.join("py_client.py"))
        }
    }
}

/// Runs the SDK client against `url` (initialize, tools/list, `echo` with `message`,
/// DELETE; `extra` arguments such as `--sse`); with `ca`, the client trusts that CA for an
/// https `url` (the TypeScript SDK through `NODE_EXTRA_CA_CERTS`, the Python SDK through
/// httpx's `verify`). Panics unless it exits 0 with `"ok": true`; returns its JSON line.
pub async fn run_client(
    sdk: Sdk,
    url: &str,
    message: &str,
    ca: Option<&Path>,
    extra: &[&str],
) -> Value {
    let (program, script) = client_command(sdk);
    let mut cmd = Command::new(&program);
    cmd.arg(&script)
        .arg(url)
        .args(extra)
        .args(["--tool", "echo", "--args"])
        .arg(json!({ "message": message }).to_string());
    match (sdk, ca) {
        (Sdk::Ts, Some(ca)) => {
            cmd.env("NODE_EXTRA_CA_CERTS", ca);
        }
        (Sdk::Py, Some(ca)) => {
            cmd.arg("--ca").arg(ca);
        }
        (_, None) => {}
    }
    let what = format!("{sdk:?} client");
    let run = run_json_line(cmd, &what, CLIENT_TIMEOUT, SETUP_HINT).await;
    let v = run.json;
    assert!(
        run.status.success() && v["ok"] == true,
        "{sdk:?} client failed ({}): {v}\nstderr: {}",
        run.status,
        run.stderr
    );
    v
}

/// Runs `tests/clients/bridge_client.mjs` (the TypeScript SDK 1.32 client in session mode:
/// progress, a resource, an elicitation, a subscription on its GET stream, DELETE) against
/// `url` and returns its JSON line, whatever it says.
pub async fn run_bridge_client(url: &str) -> Value {
    let mut cmd = Command::new("node");
    cmd.arg(dir().join("bridge_client.mjs")).arg(url);
    run_json_line(cmd, "bridge client", CLIENT_TIMEOUT, SETUP_HINT)
        .await
        .json
}
