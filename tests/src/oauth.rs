//! The upstream-OAuth fixtures in `tests/oauth` (installed by `tests/oauth/setup`): a
//! real OpenID provider (`oidc-provider`) as authorization server, a protected MCP server
//! (TypeScript SDK with its bearer-auth middleware, Streamable HTTP and legacy SSE), and
//! a browserless login and consent. Each prints one JSON line when ready; each is ended
//! when dropped.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

use crate::clients::{installed, run_json_line};

const SETUP_HINT: &str = "run `tests/oauth/setup` from the repository root";

/// `tests/oauth`, after checking its dependencies are installed.
pub fn dir() -> PathBuf {
    installed(
        "tests/oauth",
        &[
            "node_modules/oidc-provider/package.json",
            "node_modules/@modelcontextprotocol/sdk/package.json",
        ],
        SETUP_HINT,
    )
}

/// A fixture process and the JSON line it printed when ready; ended when dropped (its
/// stdin closes, and `kill_on_drop`).
#[derive(Debug)]
pub struct Fixture {
    child: Child,
    /// What it printed when ready.
    pub ready: Value,
}

impl Fixture {
    /// Starts `node tests/oauth/{script} args…` and waits for its JSON line.
    async fn start(script: &str, args: &[String]) -> Fixture {
        let mut child = Command::new("node")
            .arg(dir().join(script))
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {script}: {e}: {SETUP_HINT}"));
        let mut out = BufReader::new(child.stdout.take().unwrap()).lines();
        let mut err = BufReader::new(child.stderr.take().unwrap()).lines();
        let ready = tokio::time::timeout(Duration::from_secs(30), out.next_line())
            .await
            .ok()
            .and_then(|l| l.ok().flatten())
            .and_then(|l| serde_json::from_str::<Value>(&l).ok());
        let Some(ready) = ready else {
            let mut seen = Vec::new();
            while let Ok(Ok(Some(l))) =
                tokio::time::timeout(Duration::from_millis(200), err.next_line()).await
            {
                seen.push(l);
            }
            panic!("{script} did not get ready: {seen:?}");
        };
        // Keep reading both pipes so the fixture never blocks on a full one.
        tokio::spawn(async move { while let Ok(Some(_)) = out.next_line().await {} });
        tokio::spawn(async move { while let Ok(Some(_)) = err.next_line().await {} });
        Fixture { child, ready }
    }

    /// The string `key` of its ready line.
    pub fn get(&self, key: &str) -> String {
        self.ready[key]
            .as_str()
            .unwrap_or_else(|| panic!("no {key} in {}", self.ready))
            .to_owned()
    }

    /// Ends it now (the authorization server going down).
    pub async fn kill(&mut self) {
        let _ = self.child.kill().await;
    }
}

/// The authorization server (`as.mjs`) with `config` (see `tests/oauth/README.md`).
pub async fn authorization_server(config: &Value) -> Fixture {
    static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let file = std::env::temp_dir().join(format!("mcpgate-as-{}-{n}.json", std::process::id()));
    std::fs::write(&file, config.to_string()).unwrap();
    Fixture::start("as.mjs", &[file.display().to_string()]).await
}

/// A protected MCP server (`server.mjs`) trusting `issuer`, requiring `scope`.
pub async fn protected_server(issuer: &str, scope: &str) -> Fixture {
    let args = ["--issuer", issuer, "--scope", scope].map(str::to_owned);
    Fixture::start("server.mjs", &args).await
}

/// `scheme://host:port` of `url`.
fn origin(url: &str) -> String {
    url.split('/').take(3).collect::<Vec<_>>().join("/")
}

/// GETs `path` of a fixture at `base` as JSON.
pub async fn hook(base: &str, path: &str) -> Value {
    reqwest::get(format!("{}{path}", origin(base)))
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

/// POSTs to `path` of a fixture at `base` (a test hook).
pub async fn poke(base: &str, path: &str) -> Value {
    reqwest::Client::new()
        .post(format!("{}{path}", origin(base)))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

/// The token requests the authorization server at `issuer` saw of `grant_type`.
pub async fn token_requests(issuer: &str, grant_type: &str) -> Vec<Value> {
    hook(issuer, "/test/requests")
        .await
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["grant_type"] == grant_type)
        .cloned()
        .collect()
}

/// The tool calls the protected server at `url` saw.
pub async fn calls(url: &str) -> Vec<Value> {
    hook(url, "/test/calls").await.as_array().unwrap().clone()
}

/// Drives `user` through login and consent from `url` to the gateway's callback
/// (`stop_at`); `deny` refuses; `follow` also requests the callback. Its JSON line.
pub async fn consent(url: &str, user: &str, stop_at: &str, deny: bool, follow: bool) -> Value {
    let mut cmd = Command::new("node");
    cmd.arg(dir().join("consent.mjs"))
        .args(["--url", url, "--user", user, "--stop-at", stop_at]);
    if deny {
        cmd.arg("--deny");
    }
    if !follow {
        cmd.arg("--no-follow-callback");
    }
    run_json_line(cmd, "consent.mjs", Duration::from_secs(30), SETUP_HINT)
        .await
        .json
}
