//! The official TypeScript and Python SDK clients through mcpgate, against the official
//! everything server (stdio and Streamable HTTP): initialize → tools/list → tools/call →
//! DELETE, then the gateway holds no session and (stdio) no child.
//!
//! Needs `scripts/setup-test-deps` (tests/clients/node_modules and .venv); without them
//! these tests fail, they never pass silently.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use mcpgate_tests::{Gateway, children_of, wait_until};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, ChildStdin, Command};

const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/..");
const CLIENT_TIMEOUT: Duration = Duration::from_secs(30);
const SETUP_HINT: &str = "run `scripts/setup-test-deps` from the repository root";

#[derive(Debug, Clone, Copy)]
enum Sdk {
    Ts,
    Py,
}

fn root() -> PathBuf {
    Path::new(ROOT)
        .canonicalize()
        .expect("repository root exists")
}

/// The everything server launcher, after checking the node dependencies are installed.
fn everything_launcher() -> PathBuf {
    let clients = root().join("tests/clients");
    for dep in [
        "node_modules/@modelcontextprotocol/sdk/package.json",
        "node_modules/@modelcontextprotocol/server-everything/package.json",
    ] {
        assert!(
            clients.join(dep).exists(),
            "missing {}: {SETUP_HINT}",
            clients.join(dep).display()
        );
    }
    clients.join("everything_server.mjs")
}

/// The program and script that run `sdk`'s client; fails when it is not installed.
fn client_command(sdk: Sdk) -> (PathBuf, PathBuf) {
    let root = root();
    everything_launcher(); // checks node_modules (the TS SDK)
    match sdk {
        Sdk::Ts => (
            PathBuf::from("node"),
            root.join("tests/clients/ts_client.mjs"),
        ),
        Sdk::Py => {
            let python = root.join(".venv/bin/python");
            assert!(
                python.exists(),
                "missing {} (Python SDK venv): {SETUP_HINT}",
                python.display()
            );
            (python, root.join("tests/clients/py_client.py"))
        }
    }
}

/// Runs the SDK client against `url` (echo with `message`) and returns its JSON line.
async fn run_client(sdk: Sdk, url: &str, message: &str) -> Value {
    run_client_with(sdk, url, message, None, &[]).await
}

/// Like [`run_client`]; with `ca`, the client trusts that CA for an https `url` (the
/// TypeScript SDK through `NODE_EXTRA_CA_CERTS`, the Python SDK through httpx's `verify`).
async fn run_client_with(
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
    let out = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(CLIENT_TIMEOUT, out)
        .await
        .unwrap_or_else(|_| panic!("{sdk:?} client timed out after {CLIENT_TIMEOUT:?}"))
        .unwrap_or_else(|e| panic!("spawn {} failed ({e}): {SETUP_HINT}", program.display()));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let line = stdout.lines().rev().find(|l| !l.trim().is_empty());
    let v: Value = line
        .and_then(|l| serde_json::from_str(l).ok())
        .unwrap_or_else(|| {
            panic!(
                "{sdk:?} client printed no JSON line ({}):\nstdout: {stdout}\nstderr: {stderr}",
                out.status
            )
        });
    assert!(
        out.status.success() && v["ok"] == true,
        "{sdk:?} client failed ({}): {v}\nstderr: {stderr}",
        out.status
    );
    v
}

/// Asserts what every client run must show; returns the session id the client saw.
fn check_client_result(sdk: Sdk, v: &Value, message: &str) -> String {
    assert_eq!(v["ok"], true, "{sdk:?}: {v}");
    assert_eq!(
        v["serverInfo"]["name"], "mcp-servers/everything",
        "{sdk:?}: {v}"
    );
    let tools: Vec<&str> = v["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("{sdk:?}: no tools in {v}"))
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(tools.contains(&"echo"), "{sdk:?}: tools {tools:?}");
    assert_eq!(
        v["callResult"]["content"][0]["text"],
        format!("Echo: {message}"),
        "{sdk:?}: {v}"
    );
    assert_ne!(v["callResult"]["isError"], true, "{sdk:?}: {v}");
    assert_eq!(
        v["terminated"], true,
        "{sdk:?}: the DELETE must succeed: {v}"
    );
    assert_eq!(v["deleteStatus"], 200, "{sdk:?}: {v}");
    let id = v["sessionId"]
        .as_str()
        .unwrap_or_else(|| panic!("{sdk:?}: no sessionId in {v}"))
        .to_owned();
    // mcpgate mints its own ids (32 hex chars); the everything server's are dashed UUIDs.
    assert!(
        !id.contains('-') && id.len() >= 32,
        "{sdk:?}: the client saw {id:?}, not a gateway-minted session id"
    );
    id
}

/// A gateway in front of `node everything_server.mjs stdio` (one child per session).
fn stdio_gateway() -> Gateway {
    stdio_gateway_with("")
}

fn stdio_gateway_with(listen: &str) -> Gateway {
    let launcher = everything_launcher();
    Gateway::start(&format!(
        "{listen}[[server]]\nname = \"everything\"\ntransport = \"stdio\"\ncommand = [\"node\", {:?}, \"stdio\"]\n",
        launcher.display().to_string()
    ))
}

/// The SDK client through mcpgate's TLS listener (`https://127.0.0.1:PORT/mcp`).
async fn sdk_through_tls_listener(sdk: Sdk) {
    let pki = mcpgate_tests::Pki::new();
    let gw = stdio_gateway_with(&format!(
        "[listen]\ntls_cert = {:?}\ntls_key = {:?}\n",
        pki.server.cert, pki.server.key
    ));
    assert!(gw.url().starts_with("https://127.0.0.1:"), "{}", gw.url());
    let message = format!("hello mcpgate from {sdk:?} over https");
    let v = run_client_with(sdk, &gw.url(), &message, Some(&pki.ca), &[]).await;
    check_client_result(sdk, &v, &message);
}

/// A legacy HTTP+SSE client pointed at `/mcp` (python mcp-proxy's default) gets the
/// legacy transport there (the 2025-03-26 backwards-compatibility probe) instead of 400.
#[tokio::test]
async fn legacy_sse_client_pointed_at_the_mcp_endpoint() {
    let gw = stdio_gateway();
    let message = "legacy client on /mcp";
    let v = run_client_with(Sdk::Ts, &gw.url(), message, None, &["--sse"]).await;
    assert_eq!(v["ok"], true, "{v}");
    assert_eq!(v["transport"], "sse", "{v}");
    assert_eq!(
        v["callResult"]["content"][0]["text"],
        format!("Echo: {message}"),
        "{v}"
    );
    gw.assert_drained(Duration::from_secs(10)).await;
}

async fn sdk_over_stdio(sdk: Sdk) {
    let gw = stdio_gateway();
    let message = format!("hello mcpgate from {sdk:?} over stdio");
    let v = run_client(sdk, &gw.url(), &message).await;
    check_client_result(sdk, &v, &message);
    gw.assert_all_closed_by_client(1.0).await;
    let pid = gw.pid();
    assert!(
        wait_until(Duration::from_secs(5), || async {
            children_of(pid).is_empty()
        })
        .await,
        "the everything server child was not reaped after DELETE: {:?}",
        children_of(pid)
    );
    assert_eq!(gw.metric("mcpgate_stdio_children").await, 0.0);
}

/// The everything server in Streamable HTTP mode; killed on drop (and it exits on its
/// own when its stdin, held here, closes).
struct EverythingHttp {
    _child: Child,
    _stdin: ChildStdin,
    url: String,
    /// Every stderr line so far (request log), drained continuously.
    log: Arc<Mutex<Vec<String>>>,
}

impl EverythingHttp {
    async fn start() -> EverythingHttp {
        let launcher = everything_launcher();
        let mut child = Command::new("node")
            .arg(&launcher)
            .arg("streamableHttp")
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
                    "the everything server did not get ready; stderr:\n{}",
                    log.lock().unwrap().join("\n")
                )
            });
        EverythingHttp {
            _child: child,
            _stdin: stdin,
            url,
            log,
        }
    }

    fn lines(&self) -> Vec<String> {
        self.log.lock().unwrap().clone()
    }

    /// The session ids the server created (from its "Session initialized with ID" log).
    fn session_ids(&self) -> Vec<String> {
        self.lines()
            .iter()
            .filter_map(|l| l.strip_prefix("Session initialized with ID: "))
            .map(|s| s.trim().to_owned())
            .collect()
    }
}

async fn sdk_over_http(sdk: Sdk) {
    let up = EverythingHttp::start().await;
    let gw = Gateway::http(&up.url, "");
    let message = format!("hello mcpgate from {sdk:?} over streamableHttp");
    let v = run_client(sdk, &gw.url(), &message).await;
    let client_id = check_client_result(sdk, &v, &message);
    gw.assert_all_closed_by_client(1.0).await;
    // Exactly one upstream session, with an id the client never saw, and the client's
    // DELETE reached it.
    let upstream = up.session_ids();
    assert_eq!(
        upstream.len(),
        1,
        "upstream log:\n{}",
        up.lines().join("\n")
    );
    assert_ne!(upstream[0], client_id);
    assert!(
        upstream[0].contains('-'),
        "upstream ids are UUIDs: {upstream:?}"
    );
    let terminated = format!(
        "Received session termination request for session {}",
        upstream[0]
    );
    assert!(
        wait_until(Duration::from_secs(5), || {
            let seen = up.lines().iter().any(|l| l.contains(&terminated));
            async move { seen }
        })
        .await,
        "the upstream session was not DELETEd; upstream log:\n{}",
        up.lines().join("\n")
    );
}

#[tokio::test]
async fn typescript_sdk_over_stdio_upstream() {
    sdk_over_stdio(Sdk::Ts).await;
}

#[tokio::test]
async fn python_sdk_over_stdio_upstream() {
    sdk_over_stdio(Sdk::Py).await;
}

#[tokio::test]
async fn typescript_sdk_through_the_tls_listener() {
    sdk_through_tls_listener(Sdk::Ts).await;
}

#[tokio::test]
async fn python_sdk_through_the_tls_listener() {
    sdk_through_tls_listener(Sdk::Py).await;
}

#[tokio::test]
async fn typescript_sdk_over_http_upstream() {
    sdk_over_http(Sdk::Ts).await;
}

#[tokio::test]
async fn python_sdk_over_http_upstream() {
    sdk_over_http(Sdk::Py).await;
}
