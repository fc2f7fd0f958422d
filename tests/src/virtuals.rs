//! Virtual servers' fixtures: the `[[server]]` entries of their members (the testkit over
//! HTTP and stdio, the official everything and filesystem servers over stdio), a
//! directory for the filesystem server, the SDK clients' virtual-server scripts, and a
//! session that answers its members' sampling requests.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::process::Command;

use crate::clients::{SETUP_HINT, Sdk, dir, repo_root, run_json_line};
use crate::{Client, Session, Stream, bin};

/// A `[[server]]` of the testkit over Streamable HTTP at `url`.
pub fn http_kit(name: &str, url: &str) -> String {
    format!("[[server]]\nname = {name:?}\ntransport = \"streamable-http\"\nurl = {url:?}\n")
}

/// A `[[server]]` of the testkit over stdio (a child per session).
pub fn stdio_kit(name: &str) -> String {
    let kit = bin("mcpgate-testkit").display().to_string();
    format!("[[server]]\nname = {name:?}\ntransport = \"stdio\"\ncommand = [{kit:?}, \"stdio\"]\n")
}

/// A `[[server]]` of the official everything server over stdio.
pub fn everything(name: &str) -> String {
    let launcher = dir().join("everything_server.mjs").display().to_string();
    format!(
        "[[server]]\nname = {name:?}\ntransport = \"stdio\"\ncommand = [\"node\", {launcher:?}, \"stdio\"]\n"
    )
}

/// A `[[server]]` of the official filesystem server over stdio, allowed `root`.
pub fn filesystem(name: &str, root: &Path) -> String {
    let main = dir()
        .join("node_modules/@modelcontextprotocol/server-filesystem/dist/index.js")
        .display()
        .to_string();
    let root = root.display().to_string();
    format!(
        "[[server]]\nname = {name:?}\ntransport = \"stdio\"\ncommand = [\"node\", {main:?}, {root:?}]\n"
    )
}

/// A `[[server]]` of an official MCP Apps example server over stdio (`package` under
/// `@modelcontextprotocol/`, e.g. `server-basic-vanillajs`).
pub fn app_server(name: &str, package: &str) -> String {
    let main = dir()
        .join(format!(
            "node_modules/@modelcontextprotocol/{package}/dist/index.js"
        ))
        .display()
        .to_string();
    format!(
        "[[server]]\nname = {name:?}\ntransport = \"stdio\"\ncommand = [\"node\", {main:?}, \"--stdio\"]\n"
    )
}

/// Runs `tests/clients/apps_client.mjs` on `url`; its JSON line.
pub async fn run_apps_client(url: &str) -> Value {
    let mut cmd = Command::new("node");
    cmd.arg(dir().join("apps_client.mjs")).arg(url);
    let run = run_json_line(cmd, "apps client", Duration::from_secs(90), SETUP_HINT).await;
    assert!(
        run.status.success() && run.json["ok"] == true,
        "apps client failed ({}): {}\nstderr: {}",
        run.status,
        run.json,
        run.stderr
    );
    run.json
}

/// A `[[server]]` whose program does not exist (a member that cannot start).
pub fn missing(name: &str) -> String {
    format!(
        "[[server]]\nname = {name:?}\ntransport = \"stdio\"\ncommand = [\"/nonexistent/mcp-server\"]\n"
    )
}

/// A directory holding `a.txt` ("hello fs"), removed on drop.
#[derive(Debug)]
pub struct FsDir(pub PathBuf);

impl FsDir {
    /// A fresh one.
    pub fn new() -> FsDir {
        static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let d = std::env::temp_dir().join(format!("mcpgate-vfs-{}-{n}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("a.txt"), "hello fs\n").unwrap();
        FsDir(d.canonicalize().unwrap())
    }
}

impl Default for FsDir {
    fn default() -> Self {
        FsDir::new()
    }
}

impl Drop for FsDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Runs `tests/clients/virtual_client.{mjs,py}` against `url` (members `ev`, `fs`,
/// `kit`; `fs` allowed `fs_dir`) and returns its JSON line; panics unless it says ok.
pub async fn run_sdk(sdk: Sdk, url: &str, fs_dir: &Path) -> Value {
    let mut cmd = match sdk {
        Sdk::Ts => {
            let mut c = Command::new("node");
            c.arg(dir().join("virtual_client.mjs"));
            c
        }
        Sdk::Py => {
            let mut c = Command::new(repo_root().join(".venv/bin/python"));
            c.arg(dir().join("virtual_client.py"));
            c
        }
    };
    cmd.arg(url).arg(fs_dir);
    let what = format!("{sdk:?} virtual client");
    let run = run_json_line(cmd, &what, Duration::from_secs(90), SETUP_HINT).await;
    assert!(
        run.status.success() && run.json["ok"] == true,
        "{what} failed ({}): {}\nstderr: {}",
        run.status,
        run.json,
        run.stderr
    );
    run.json
}

/// Calls `tool` on `s` over a streamed POST, answering every server request on the way
/// (sampling: the text `answer`; roots: no roots), on that stream or on the session's
/// GET stream `get` (where a pipe member's requests go); returns every message of the
/// POST stream (the response last) and what came on `get` meanwhile.
pub async fn call_answering(
    s: &Session,
    mut get: Option<&mut Stream>,
    tool: &str,
    args: Value,
    answer: &str,
) -> (Vec<Value>, Vec<Value>) {
    let id = format!("call-{tool}");
    let body = json!({"jsonrpc":"2.0","id":id,"method":"tools/call","params":{"name":tool,"arguments":args,"_meta":{"progressToken":id}}});
    // The POST's answer starts only with its first message, which may wait for the answer
    // to a request that comes on the GET stream: read the POST in a task of its own.
    let (tx, mut stream) = tokio::sync::mpsc::unbounded_channel();
    let (client, sid) = (s.client.clone(), s.id.clone());
    let post = tokio::spawn(async move {
        let mut st = client
            .post_stream(
                &[
                    ("content-type", "application/json"),
                    ("accept", "application/json, text/event-stream"),
                    ("mcp-session-id", &sid),
                ],
                body.to_string(),
            )
            .await;
        while let Some(m) = st.recv().await {
            if tx.send(m).is_err() {
                return;
            }
        }
    });
    let _abort = AbortOnDrop(post);
    let mut seen = Vec::new();
    let mut beside = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let next = async {
            match get.as_deref_mut() {
                Some(g) => tokio::select! {
                    m = stream.recv() => (true, m),
                    m = g.recv() => (false, m),
                },
                None => (true, stream.recv().await),
            }
        };
        let Ok((on_post, Some(m))) = tokio::time::timeout_at(deadline, next).await else {
            break;
        };
        if m.get("method").is_some() && m.get("id").is_some() {
            let result = match m["method"].as_str() {
                Some("roots/list") => json!({"roots": []}),
                _ => {
                    json!({"role":"assistant","model":"m","content":{"type":"text","text":answer}})
                }
            };
            let r = s
                .client
                .post(
                    Some(&s.id),
                    &json!({"jsonrpc":"2.0","id":m["id"],"result":result}),
                )
                .await;
            assert_eq!(r.status, 202, "answer to {m}: {r:?}");
        }
        if !on_post {
            beside.push(m);
            continue;
        }
        if m.get("status").is_some() {
            assert_eq!(m["status"], 200, "{tool}: {m}");
            continue;
        }
        let done = m.get("id") == Some(&json!(id)) && m.get("method").is_none();
        seen.push(m);
        if done {
            return (seen, beside);
        }
    }
    panic!("{tool}: no response; saw {seen:?} and beside {beside:?}");
}

struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// A client of `url` with `token` as its bearer credential.
pub fn client_as(url: &str, token: &str) -> Client {
    let mut h = reqwest::header::HeaderMap::new();
    h.insert(
        reqwest::header::AUTHORIZATION,
        format!("Bearer {token}").parse().unwrap(),
    );
    Client::with(
        url,
        reqwest::Client::builder()
            .default_headers(h)
            .build()
            .unwrap(),
    )
}

/// The names of a `tools/list` (or `prompts/list`) answer.
pub fn names(r: &crate::Reply, key: &str) -> Vec<String> {
    r.last()["result"][key]
        .as_array()
        .unwrap_or_else(|| panic!("no {key} in {r:?}"))
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect()
}

/// Asserts that `names` is two members' catalogues under prefixes `a` and `b`
/// (`a__echo`, `b__echo`, …) that are the same testkit's: not empty, each name under one of
/// the prefixes, the same tools under both, `echo` among them.
pub fn assert_two_testkits(names: &[String], a: &str, b: &str) {
    let under = |p: &str| -> std::collections::BTreeSet<&str> {
        names
            .iter()
            .filter_map(|n| n.strip_prefix(p)?.strip_prefix("__"))
            .collect()
    };
    let (in_a, in_b) = (under(a), under(b));
    assert_eq!(
        in_a.len() + in_b.len(),
        names.len(),
        "every tool is under {a}__ or {b}__: {names:?}"
    );
    assert!(
        in_a.contains("echo"),
        "{a}'s testkit tools are listed: {names:?}"
    );
    assert_eq!(in_a, in_b, "both members' tools are listed: {names:?}");
}
