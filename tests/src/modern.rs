//! The MCP 2026-07-28 fixtures in `tests/modern` (installed by `tests/modern/setup`): the
//! official TypeScript SDK 2.4 and Python SDK 2.3 servers and clients, each client run
//! printing one JSON line about what it negotiated and received.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

use crate::clients::{installed, repo_root, run_json_line};

const SETUP_HINT: &str = "run `tests/modern/setup` from the repository root";
const CLIENT_TIMEOUT: Duration = Duration::from_secs(60);

/// Which SDK.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sdk {
    /// `@modelcontextprotocol/client` / `server` 2.4.
    Ts,
    /// `mcp` 2.3.
    Py,
}

/// A client's version negotiation mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// `initialize` only (TS default).
    Legacy,
    /// Probe with `server/discover`, fall back to `initialize` (Python default).
    Auto,
    /// 2026-07-28 only.
    Pin,
}

impl Mode {
    fn arg(self) -> &'static str {
        match self {
            Mode::Legacy => "legacy",
            Mode::Auto => "auto",
            Mode::Pin => "pin",
        }
    }
}

/// Where a client connects.
#[derive(Debug, Clone)]
pub enum Target {
    /// An HTTP MCP endpoint.
    Url(String),
    /// A stdio server the client starts itself.
    Stdio(Vec<String>),
}

/// `tests/modern`, after checking its dependencies are installed.
pub fn dir() -> PathBuf {
    let d = installed(
        "tests/modern",
        &[
            "node_modules/@modelcontextprotocol/client/package.json",
            "node_modules/@modelcontextprotocol/server/package.json",
        ],
        SETUP_HINT,
    );
    assert!(
        python().exists(),
        "missing {}: {SETUP_HINT}",
        python().display()
    );
    d
}

fn python() -> PathBuf {
    repo_root().join(".venv/bin/python")
}

/// The command that runs `sdk`'s fixture server over `transport` (`http`, `stdio`).
pub fn server_command(sdk: Sdk, transport: &str, extra: &[&str]) -> Vec<String> {
    let d = dir();
    let mut cmd = match sdk {
        Sdk::Ts => vec![
            "node".to_owned(),
            d.join("ts_server.mjs").display().to_string(),
        ],
        Sdk::Py => vec![
            python().display().to_string(),
            d.join("py_server.py").display().to_string(),
        ],
    };
    cmd.push(transport.to_owned());
    cmd.extend(extra.iter().map(|s| (*s).to_owned()));
    cmd
}

/// A fixture server on Streamable HTTP; killed when dropped.
#[derive(Debug)]
pub struct HttpFixture {
    _child: Child,
    /// Its MCP endpoint.
    pub url: String,
}

/// Starts `sdk`'s fixture server on HTTP (`extra`: e.g. `--modern-only`).
pub async fn start_http(sdk: Sdk, extra: &[&str]) -> HttpFixture {
    let cmd = server_command(sdk, "http", &[&["--port", "0"], extra].concat());
    let mut child = Command::new(&cmd[0])
        .args(&cmd[1..])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap_or_else(|e| panic!("spawn {cmd:?}: {e}: {SETUP_HINT}"));
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let mut seen = Vec::new();
    let url = tokio::time::timeout(Duration::from_secs(30), async {
        while let Ok(Some(line)) = lines.next_line().await {
            if let Some(u) = line.split_whitespace().find_map(|w| w.strip_prefix("url=")) {
                return Some(u.to_owned());
            }
            seen.push(line);
        }
        None
    })
    .await
    .ok()
    .flatten()
    .unwrap_or_else(|| panic!("{sdk:?} server did not get ready: {seen:?}"));
    // Keep reading stderr so the server never blocks on a full pipe.
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    HttpFixture { _child: child, url }
}

async fn run_json(program: &str, args: &[String]) -> Value {
    let mut cmd = Command::new(program);
    cmd.args(args);
    let what = format!("{program} {args:?}");
    run_json_line(cmd, &what, CLIENT_TIMEOUT, SETUP_HINT)
        .await
        .json
}

/// Runs `sdk`'s client in `mode` against `target` (`extra`: `--elicit A`, `--header`,
/// `--everything`, …) and returns its JSON line.
pub async fn client(sdk: Sdk, mode: Mode, target: &Target, extra: &[&str]) -> Value {
    let d = dir();
    let (program, script) = match sdk {
        Sdk::Ts => ("node".to_owned(), d.join("ts_client.mjs")),
        Sdk::Py => (python().display().to_string(), d.join("py_client.py")),
    };
    let mut args = vec![
        script.display().to_string(),
        "--mode".into(),
        mode.arg().into(),
    ];
    args.extend(extra.iter().map(|s| (*s).to_owned()));
    match target {
        Target::Url(u) => args.push(u.clone()),
        Target::Stdio(cmd) => {
            args.push("--stdio".into());
            args.extend(cmd.iter().cloned());
        }
    }
    run_json(&program, &args).await
}

/// Runs the TypeScript listen helper against `url` (`extra`: `--header`); a listener that
/// only listens is [`Passive`].
pub async fn listen(url: &str, extra: &[&str]) -> Value {
    let d = dir();
    let mut args = vec![
        d.join("ts_listen.mjs").display().to_string(),
        "--mode".into(),
        "pin".into(),
    ];
    args.extend(extra.iter().map(|s| (*s).to_owned()));
    args.push(url.to_owned());
    run_json("node", &args).await
}

/// A passive listener (`ts_listen.mjs --passive`): a `subscriptions/listen` that triggers
/// nothing and records what reaches it, until [`Passive::finish`].
#[derive(Debug)]
pub struct Passive {
    child: Child,
    /// The methods of the notifications it got so far, in order.
    notified: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
    stderr: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
}

/// Upper bound of a passive listen (the helper also stops when its stdin closes).
const PASSIVE_MAX_MS: &str = "120000";

impl Passive {
    /// Starts it against `url` (`extra`: `--header`, …) and waits until its subscription
    /// is acknowledged (`LISTENING`); panics with its stderr if that does not happen.
    pub async fn start(url: &str, extra: &[&str]) -> Passive {
        let d = dir();
        let mut child = Command::new("node")
            .arg(d.join("ts_listen.mjs"))
            .args(["--mode", "pin", "--passive", PASSIVE_MAX_MS])
            .args(extra)
            .arg(url)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap_or_else(|e| panic!("spawn ts_listen.mjs: {e}: {SETUP_HINT}"));
        let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
        let notified = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let stderr = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let (ready_tx, ready_rx) = tokio::sync::oneshot::channel();
        {
            let (notified, stderr) = (notified.clone(), stderr.clone());
            tokio::spawn(async move {
                let mut ready = Some(ready_tx);
                while let Ok(Some(line)) = lines.next_line().await {
                    if line == "LISTENING" {
                        if let Some(tx) = ready.take() {
                            let _ = tx.send(());
                        }
                    } else if let Some(m) = line.strip_prefix("NOTIFIED ") {
                        notified.lock().unwrap().push(m.to_owned());
                    }
                    stderr.lock().unwrap().push(line);
                }
            });
        }
        let p = Passive {
            child,
            notified,
            stderr,
        };
        let ready = tokio::time::timeout(CLIENT_TIMEOUT, ready_rx).await;
        assert!(
            matches!(ready, Ok(Ok(()))),
            "the passive listener did not get to LISTENING; stderr: {:?}",
            p.stderr.lock().unwrap()
        );
        p
    }

    /// The methods of the notifications it got so far.
    pub fn notified(&self) -> Vec<String> {
        self.notified.lock().unwrap().clone()
    }

    /// Waits (up to `limit`) until it has got `n` notifications; whether it has.
    pub async fn wait_notified(&self, n: usize, limit: Duration) -> bool {
        crate::gateway::wait_until(limit, || async { self.notified().len() >= n }).await
    }

    /// Ends the listen (closes its stdin) and returns its JSON line.
    pub async fn finish(mut self) -> Value {
        drop(self.child.stdin.take());
        let mut stdout = String::new();
        {
            use tokio::io::AsyncReadExt;
            let mut out = self.child.stdout.take().unwrap();
            tokio::time::timeout(CLIENT_TIMEOUT, out.read_to_string(&mut stdout))
                .await
                .expect("the passive listener did not finish")
                .unwrap();
        }
        let _ = self.child.wait().await;
        stdout
            .lines()
            .rev()
            .find_map(|l| serde_json::from_str(l).ok())
            .unwrap_or_else(|| {
                panic!(
                    "the passive listener printed no JSON line:\nstdout: {stdout}\nstderr: {:?}",
                    self.stderr.lock().unwrap()
                )
            })
    }
}
