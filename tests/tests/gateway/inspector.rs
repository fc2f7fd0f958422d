//! Inspector-proxy mode (`mcpgate inspector`), driven with the MCP Inspector UI's own query
//! shapes and headers (npm `@modelcontextprotocol/inspector` 1.0.x): `X-MCP-Proxy-Auth:
//! Bearer <token>`, the UI's `Origin`, `/stdio?command=…&args=…&env=…&proxyFullAddress=…&
//! transportType=stdio`, `/sse?url=…&transportType=sse`, `/mcp?url=…&transportType=
//! streamable-http`, `POST /message?sessionId=…`, `/health`, `/config` and the CORS
//! preflights. Allowed targets work; everything outside the allowlist, a missing or wrong
//! token, a foreign Origin or Host are refused with the documented status and start
//! nothing; two UI sessions of one command get two children and only their own
//! notifications; rapid reconnects leave no session and no child behind; spawned commands
//! get a scrubbed environment.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use futures::StreamExt;
use mcpgate_testkit::{HttpOptions, HttpServer};
use mcpgate_tests::{Gateway, bin, children_of, wait_until};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use reqwest::Url;
use serde_json::{Value, json};
use tokio::sync::mpsc;

/// The origin the tests' "UI" is served from.
const UI: &str = "http://127.0.0.1:6274";
/// The token given through `MCPGATE_INSPECTOR_TOKEN`.
const TOKEN: &str = "inspector-test-token-0123456789abcdef";
/// Set in the gateway's environment; a spawned command must never see it.
const CANARY: &str = "MCPGATE_TEST_CANARY";

/// A running `mcpgate inspector`; SIGTERM on drop.
struct Inspector {
    child: Option<Child>,
    base: String,
    token: Option<String>,
    /// The printed lines after the first (token or warning, ready URL).
    banner: Vec<String>,
    dir: PathBuf,
    http: reqwest::Client,
    _stdout: BufReader<ChildStdout>,
}

impl Inspector {
    /// Starts `mcpgate inspector --config <toml> --listen 127.0.0.1:0 --ui-origin UI args…`;
    /// `token`: given through the environment (`None`: generated, read from stdout).
    fn start(toml: &str, args: &[&str], token: Option<&str>) -> Inspector {
        static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir =
            std::env::temp_dir().join(format!("mcpgate-inspector-test-{}-{n}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let cfg = dir.join("inspector.toml");
        std::fs::write(&cfg, toml).unwrap();
        let log = dir.join("stderr.log");
        let mut cmd = Command::new(bin("mcpgate"));
        cmd.arg("inspector")
            .arg("--config")
            .arg(&cfg)
            .arg("--listen")
            .arg("127.0.0.1:0")
            .arg("--ui-origin")
            .arg(UI)
            .args(args)
            .env(
                "RUST_LOG",
                std::env::var("MCPGATE_TEST_LOG").unwrap_or_else(|_| "info".into()),
            )
            .env(CANARY, "must-not-leak")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&log).unwrap());
        match token {
            Some(t) => cmd.env("MCPGATE_INSPECTOR_TOKEN", t),
            None => cmd.env_remove("MCPGATE_INSPECTOR_TOKEN"),
        };
        let mut child = cmd.spawn().expect("spawn mcpgate inspector");
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut line = || {
            let mut l = String::new();
            stdout.read_line(&mut l).unwrap();
            l.trim().to_owned()
        };
        let first = line();
        let Some(base) = first.strip_prefix("mcpgate inspector listening on ") else {
            panic!(
                "unexpected first line {first:?}; log:\n{}",
                std::fs::read_to_string(&log).unwrap_or_default()
            );
        };
        let base = base.to_owned();
        let banner = vec![line(), line()];
        let token = banner[0]
            .strip_prefix("mcpgate inspector session token: ")
            .map(str::to_owned);
        Inspector {
            child: Some(child),
            base,
            token,
            banner,
            dir,
            http: reqwest::Client::builder()
                .timeout(Duration::from_secs(30))
                .build()
                .unwrap(),
            _stdout: stdout,
        }
    }

    fn pid(&self) -> u32 {
        self.child.as_ref().map(Child::id).unwrap_or(0)
    }

    fn is_running(&mut self) -> bool {
        self.child
            .as_mut()
            .is_some_and(|c| c.try_wait().ok().flatten().is_none())
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("stderr.log")).unwrap_or_default()
    }

    /// `base` + a path and the query, encoded as the UI's `URLSearchParams` does.
    fn url(&self, path: &str, query: &[(&str, &str)]) -> String {
        let u = format!("{}{path}", self.base);
        if query.is_empty() {
            return u;
        }
        Url::parse_with_params(&u, query).unwrap().to_string()
    }

    /// A request as the UI's browser page makes it: its Origin and the token header.
    fn ui(&self, method: reqwest::Method, url: &str) -> reqwest::RequestBuilder {
        let mut r = self.http.request(method, url).header("origin", UI);
        if let Some(t) = &self.token {
            r = r.header("x-mcp-proxy-auth", format!("Bearer {t}"));
        }
        r
    }

    async fn metric(&self, name: &str) -> f64 {
        let text = self
            .http
            .get(format!("{}/metrics", self.base))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        text.lines()
            .filter_map(|l| l.rsplit_once(' '))
            .find(|(k, _)| *k == name)
            .and_then(|(_, v)| v.parse().ok())
            .unwrap_or(0.0)
    }

    /// Waits until no session and no child is left; panics with the log otherwise.
    async fn assert_empty(&self, limit: Duration) {
        let ok = wait_until(limit, || async {
            self.metric("mcpgate_sessions_active").await == 0.0
                && children_of(self.pid()).is_empty()
        })
        .await;
        assert!(
            ok,
            "sessions_active = {}, children {:?}; log:\n{}",
            self.metric("mcpgate_sessions_active").await,
            children_of(self.pid()),
            self.log()
        );
    }
}

impl Drop for Inspector {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = kill(Pid::from_raw(child.id() as i32), Signal::SIGTERM);
            let dir = self.dir.clone();
            std::thread::spawn(move || {
                let until = Instant::now() + Duration::from_secs(30);
                while Instant::now() < until {
                    if let Ok(Some(_)) = child.try_wait() {
                        let _ = std::fs::remove_dir_all(&dir);
                        return;
                    }
                    std::thread::sleep(Duration::from_millis(20));
                }
                let _ = child.kill();
                let _ = child.wait();
            });
        }
    }
}

/// The allowlist entry for the testkit's stdio server (optionally more config after it).
fn testkit_toml(extra: &str) -> String {
    format!(
        "[[stdio]]\nname = \"testkit\"\ncommand = {:?}\nargs = [\"stdio\"]\nallow_env = [\"TESTKIT_OK\"]\n{extra}",
        bin("mcpgate-testkit").display().to_string()
    )
}

/// The UI's query for a stdio connection (`/stdio`), in its order.
fn stdio_query<'a>(
    insp: &'a Inspector,
    command: &'a str,
    args: &'a str,
    env: &'a str,
) -> Vec<(&'a str, &'a str)> {
    vec![
        ("command", command),
        ("args", args),
        ("env", env),
        ("proxyFullAddress", insp.base.as_str()),
        ("transportType", "stdio"),
    ]
}

fn testkit() -> String {
    bin("mcpgate-testkit").display().to_string()
}

/// A legacy SSE connection as the UI's `SSEClientTransport` makes it.
struct Sse {
    /// Where to POST (from the `endpoint` event), absolute.
    post_url: String,
    rx: mpsc::UnboundedReceiver<Value>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Sse {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Opens `url` as the UI's EventSource does; `Err((status, body))` when refused.
async fn open_sse(insp: &Inspector, url: &str) -> Result<Sse, (u16, String)> {
    let resp = insp
        .ui(reqwest::Method::GET, url)
        .header("accept", "text/event-stream")
        .timeout(Duration::from_secs(3600))
        .send()
        .await
        .expect("GET failed at the HTTP level");
    let status = resp.status().as_u16();
    if status != 200 {
        return Err((status, resp.text().await.unwrap_or_default()));
    }
    let (tx, mut rx) = mpsc::unbounded_channel();
    let task = tokio::spawn(async move {
        let mut events = sse_stream::SseStream::from_bytes_stream(resp.bytes_stream());
        while let Some(Ok(ev)) = events.next().await {
            let v = match (ev.event.as_deref(), ev.data.as_deref()) {
                (Some("endpoint"), Some(d)) => json!({"endpoint": d}),
                (_, Some(d)) => match serde_json::from_str::<Value>(d) {
                    Ok(v) => v,
                    Err(_) => continue,
                },
                _ => continue,
            };
            if tx.send(v).is_err() {
                return;
            }
        }
    });
    let first = tokio::time::timeout(Duration::from_secs(10), rx.recv())
        .await
        .expect("no endpoint event in 10 s")
        .expect("stream ended before the endpoint event");
    let endpoint = first["endpoint"]
        .as_str()
        .unwrap_or_else(|| panic!("first event is not the endpoint: {first}"));
    // The UI resolves it against the SSE URL and requires the same origin.
    let post_url = Url::parse(url).unwrap().join(endpoint).unwrap();
    assert_eq!(
        post_url.origin(),
        Url::parse(&insp.base).unwrap().origin(),
        "the endpoint {endpoint} leaves the proxy's origin"
    );
    Ok(Sse {
        post_url: post_url.to_string(),
        rx,
        task,
    })
}

impl Sse {
    /// POSTs a message as the UI does; the HTTP status.
    async fn post(&self, insp: &Inspector, msg: &Value) -> u16 {
        insp.ui(reqwest::Method::POST, &self.post_url)
            .header("content-type", "application/json")
            .body(msg.to_string())
            .send()
            .await
            .unwrap()
            .status()
            .as_u16()
    }

    /// Waits for the response to request `id`; what came before it is pushed to `seen`.
    async fn response(&mut self, id: i64, seen: &mut Vec<Value>) -> Value {
        let until = tokio::time::Instant::now() + Duration::from_secs(20);
        loop {
            let m = tokio::time::timeout_at(until, self.rx.recv())
                .await
                .unwrap_or_else(|_| panic!("no response to {id} within 20 s; saw {seen:?}"))
                .unwrap_or_else(|| panic!("stream ended before the response to {id}"));
            if m["id"] == id && (m.get("result").is_some() || m.get("error").is_some()) {
                return m;
            }
            seen.push(m);
        }
    }

    async fn request(&mut self, insp: &Inspector, id: i64, method: &str, params: Value) -> Value {
        let status = self
            .post(
                insp,
                &json!({"jsonrpc":"2.0","id":id,"method":method,"params":params}),
            )
            .await;
        assert_eq!(status, 202, "POST {method}");
        self.response(id, &mut Vec::new()).await
    }

    /// initialize + notifications/initialized, as the UI's client does.
    async fn initialize(&mut self, insp: &Inspector) -> Value {
        let r = self
            .request(
                insp,
                0,
                "initialize",
                json!({"protocolVersion":"2025-11-25","capabilities":{"sampling":{},"roots":{"listChanged":true}},
                       "clientInfo":{"name":"inspector-client","version":"1.0.3"}}),
            )
            .await;
        assert!(r["result"]["protocolVersion"].is_string(), "{r}");
        let s = self
            .post(
                insp,
                &json!({"jsonrpc":"2.0","method":"notifications/initialized"}),
            )
            .await;
        assert_eq!(s, 202);
        r
    }
}

/// The text of a tool result.
fn text(r: &Value) -> String {
    r["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("no text in {r}"))
        .to_owned()
}

/// The body of a JSON-RPC refusal: its message.
fn message(body: &str) -> String {
    serde_json::from_str::<Value>(body)
        .ok()
        .and_then(|v| v["error"]["message"].as_str().map(str::to_owned))
        .unwrap_or_else(|| panic!("not a JSON-RPC error body: {body}"))
}

/// A Streamable HTTP POST as the UI's `StreamableHTTPClientTransport` makes it through the
/// proxy: the proxy URL with the target query, the token, its Origin.
async fn mcp_post(
    insp: &Inspector,
    url: &str,
    session: Option<&str>,
    msg: &Value,
) -> reqwest::Response {
    let mut r = insp
        .ui(reqwest::Method::POST, url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(msg.to_string());
    if let Some(s) = session {
        r = r
            .header("mcp-session-id", s)
            .header("mcp-protocol-version", "2025-11-25");
    }
    r.send().await.unwrap()
}

/// The JSON-RPC messages of a response body (JSON or SSE).
async fn messages(r: reqwest::Response) -> Vec<Value> {
    let sse = r
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/event-stream"));
    let body = r.text().await.unwrap();
    if sse {
        mcpgate_tests::parse_sse(&body)
    } else {
        vec![serde_json::from_str(&body).unwrap_or_else(|_| panic!("not JSON: {body}"))]
    }
}

const INIT: &str = r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"inspector-client","version":"1.0.3"}}}"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_config_cors_and_the_ready_url() {
    // No configured token: one is generated and printed with the ready URL.
    let insp = Inspector::start(&testkit_toml(""), &[], None);
    let token = insp
        .token
        .clone()
        .unwrap_or_else(|| panic!("no token line: {:?}", insp.banner));
    assert_eq!(token.len(), 64, "{token}");
    assert!(token.bytes().all(|b| b.is_ascii_hexdigit()));
    let ready = insp.banner[1]
        .strip_prefix("mcpgate inspector UI: ")
        .unwrap_or_else(|| panic!("no ready URL: {:?}", insp.banner));
    let ready = Url::parse(ready).unwrap();
    assert_eq!(ready.origin().ascii_serialization(), UI);
    let params: BTreeMap<String, String> = ready.query_pairs().into_owned().collect();
    assert_eq!(params["MCP_PROXY_AUTH_TOKEN"], token);
    assert_eq!(params["MCP_PROXY_FULL_ADDRESS"], insp.base);

    // /health: no token needed, CORS for the UI's origin.
    let r = insp
        .http
        .get(insp.url("/health", &[]))
        .header("origin", UI)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    assert_eq!(r.headers()["access-control-allow-origin"], UI);
    assert_eq!(r.text().await.unwrap(), r#"{"status":"ok"}"#);

    // /config with the token: the UI's defaults; the gateway's environment stays private.
    let r = insp
        .ui(reqwest::Method::GET, &insp.url("/config", &[]))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    assert_eq!(r.headers()["access-control-allow-origin"], UI);
    let cfg: Value = serde_json::from_str(&r.text().await.unwrap()).unwrap();
    assert_eq!(cfg["defaultEnvironment"], json!({}));
    assert_eq!(cfg["defaultCommand"], testkit());
    assert_eq!(cfg["defaultArgs"], "stdio");
    assert_eq!(cfg["defaultTransport"], "stdio");
    assert_eq!(cfg["defaultServerUrl"], "");
    // Without the token: 401 with the text the UI recognises.
    let r = insp
        .http
        .get(insp.url("/config", &[]))
        .header("origin", UI)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 401);
    assert!(r.headers().contains_key("www-authenticate"));
    assert!(
        message(&r.text().await.unwrap())
            .contains("Authentication required. Use the session token")
    );

    // CORS preflights of every endpoint the UI calls, with the headers it sends.
    for path in ["/health", "/config", "/mcp", "/stdio", "/sse", "/message"] {
        let r = insp
            .http
            .request(reqwest::Method::OPTIONS, insp.url(path, &[]))
            .header("origin", UI)
            .header("access-control-request-method", "POST")
            .header(
                "access-control-request-headers",
                "content-type,mcp-protocol-version,mcp-session-id,x-mcp-proxy-auth,x-custom-auth-headers,x-api-key",
            )
            .send()
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), 204, "preflight {path}");
        let h = r.headers();
        assert_eq!(h["access-control-allow-origin"], UI, "{path}");
        assert!(
            h["access-control-allow-methods"]
                .to_str()
                .unwrap()
                .contains("DELETE")
        );
        let allowed = h["access-control-allow-headers"].to_str().unwrap();
        for want in ["x-mcp-proxy-auth", "mcp-session-id", "x-api-key"] {
            assert!(allowed.contains(want), "{path}: {allowed}");
        }
    }
    // Not part of the protocol here: /fetch (arbitrary fetches) and unknown paths.
    for path in ["/fetch", "/nope", "/servers/x/mcp"] {
        let r = insp
            .ui(reqwest::Method::POST, &insp.url(path, &[]))
            .body("{}")
            .send()
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), 404, "{path}");
    }
    // The gateway's own endpoints still answer.
    let r = insp
        .http
        .get(insp.url("/healthz", &[]))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    assert_eq!(insp.metric("mcpgate_sessions_active").await, 0.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdio_through_the_sse_endpoint() {
    let insp = Inspector::start(&testkit_toml(""), &[], Some(TOKEN));
    assert_eq!(insp.token.as_deref(), Some(TOKEN));
    let cmd = testkit();
    let url = insp.url(
        "/stdio",
        &stdio_query(&insp, &cmd, "stdio", r#"{"TESTKIT_OK":"1"}"#),
    );
    let mut s = open_sse(&insp, &url).await.unwrap();
    let init = s.initialize(&insp).await;
    assert_eq!(init["id"], 0);
    let tools = s.request(&insp, 1, "tools/list", json!({})).await;
    let names: Vec<&str> = tools["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert!(names.contains(&"echo"), "{names:?}");
    let r = s
        .request(
            &insp,
            2,
            "tools/call",
            json!({"name":"echo","arguments":{"text":"hello inspector"}}),
        )
        .await;
    assert_eq!(text(&r), "hello inspector");
    let kids = children_of(insp.pid());
    assert_eq!(kids.len(), 1, "{kids:?}");
    assert_eq!(insp.metric("mcpgate_sessions_active").await, 1.0);
    // The UI disconnects by closing its EventSource: the session and its child end.
    drop(s);
    insp.assert_empty(Duration::from_secs(10)).await;
    assert_eq!(
        insp.metric("mcpgate_sessions_closed_total{reason=\"client_gone\"}")
            .await,
        1.0
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streamable_http_through_the_mcp_endpoint() {
    let up = HttpServer::start("127.0.0.1:0".parse().unwrap(), HttpOptions::default())
        .await
        .unwrap();
    let toml = testkit_toml(&format!(
        "[[url]]\nname = \"testkit-http\"\nprefix = \"http://{}/\"\ntransports = [\"streamable-http\"]\nheaders = {{ x-from-config = \"cfg\" }}\n",
        up.addr()
    ));
    let insp = Inspector::start(&toml, &[], Some(TOKEN));
    let target = up.url();
    let url = insp.url(
        "/mcp",
        &[("url", &target), ("transportType", "streamable-http")],
    );
    // The UI's custom upstream headers ride along on its requests to the proxy.
    let r = insp
        .ui(reqwest::Method::POST, &url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("authorization", "Bearer upstream-credential")
        .header("x-api-key", "k-123")
        .header("x-custom-auth-headers", r#"["x-api-key"]"#)
        .body(INIT)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    assert_eq!(r.headers()["access-control-allow-origin"], UI);
    let exposed = r.headers()["access-control-expose-headers"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(exposed.contains("mcp-session-id"), "{exposed}");
    let sid = r.headers()["mcp-session-id"].to_str().unwrap().to_owned();
    let init = messages(r).await;
    assert!(init[0]["result"]["protocolVersion"].is_string(), "{init:?}");
    // What reached the upstream: its configured header and the UI's upstream headers,
    // never the proxy token or the browser's Origin.
    let seen: BTreeMap<String, String> = up.stats().last_headers.into_iter().collect();
    assert_eq!(seen.get("x-from-config").map(String::as_str), Some("cfg"));
    assert_eq!(
        seen.get("authorization").map(String::as_str),
        Some("Bearer upstream-credential")
    );
    assert_eq!(seen.get("x-api-key").map(String::as_str), Some("k-123"));
    assert!(!seen.contains_key("x-mcp-proxy-auth"), "{seen:?}");
    assert!(!seen.contains_key("origin"), "{seen:?}");

    let r = mcp_post(
        &insp,
        &url,
        Some(&sid),
        &json!({"jsonrpc":"2.0","method":"notifications/initialized"}),
    )
    .await;
    assert_eq!(r.status().as_u16(), 202);
    // The standalone GET stream, as the transport opens it.
    let get = insp
        .ui(reqwest::Method::GET, &url)
        .header("accept", "text/event-stream")
        .header("mcp-session-id", &sid)
        .header("mcp-protocol-version", "2025-11-25")
        .timeout(Duration::from_secs(3600))
        .send()
        .await
        .unwrap();
    assert_eq!(get.status().as_u16(), 200);
    assert_eq!(get.headers()["access-control-allow-origin"], UI);
    let r = mcp_post(
        &insp,
        &url,
        Some(&sid),
        &json!({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"via /mcp"}}}),
    )
    .await;
    assert_eq!(r.status().as_u16(), 200);
    assert_eq!(text(messages(r).await.last().unwrap()), "via /mcp");
    // The UI's disconnect: DELETE on the same URL.
    let r = insp
        .ui(reqwest::Method::DELETE, &url)
        .header("mcp-session-id", &sid)
        .header("mcp-protocol-version", "2025-11-25")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    drop(get);
    insp.assert_empty(Duration::from_secs(5)).await;
    assert!(
        wait_until(Duration::from_secs(5), || async {
            up.stats().sessions_deleted == 1
        })
        .await
    );

    // The same endpoint with a stdio target (the proxy's /mcp takes every transportType).
    let cmd = testkit();
    let url = insp.url(
        "/mcp",
        &[
            ("command", cmd.as_str()),
            ("args", "stdio"),
            ("env", "{}"),
            ("transportType", "stdio"),
        ],
    );
    let r = mcp_post(
        &insp,
        &url,
        None,
        &serde_json::from_str::<Value>(INIT).unwrap(),
    )
    .await;
    assert_eq!(r.status().as_u16(), 200);
    let sid = r.headers()["mcp-session-id"].to_str().unwrap().to_owned();
    assert_eq!(children_of(insp.pid()).len(), 1);
    let r = mcp_post(
        &insp,
        &url,
        Some(&sid),
        &json!({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"add","arguments":{"a":2,"b":3}}}),
    )
    .await;
    assert_eq!(text(messages(r).await.last().unwrap()), "5");
    let r = insp
        .ui(reqwest::Method::DELETE, &url)
        .header("mcp-session-id", &sid)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    insp.assert_empty(Duration::from_secs(5)).await;
    up.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn legacy_sse_upstream_through_the_sse_endpoint() {
    // A legacy HTTP+SSE server: a plain mcpgate in front of the testkit serves /sse.
    let legacy = Gateway::stdio_testkit(&[], "");
    let toml = testkit_toml(&format!(
        "[[url]]\nname = \"legacy\"\nprefix = \"{}/sse\"\ntransports = [\"sse\"]\n",
        legacy.base
    ));
    let insp = Inspector::start(&toml, &[], Some(TOKEN));
    let target = format!("{}/sse", legacy.base);
    let url = insp.url(
        "/sse",
        &[
            ("url", target.as_str()),
            ("proxyFullAddress", insp.base.as_str()),
            ("transportType", "sse"),
        ],
    );
    let mut s = open_sse(&insp, &url).await.unwrap();
    s.initialize(&insp).await;
    let r = s
        .request(
            &insp,
            1,
            "tools/call",
            json!({"name":"echo","arguments":{"text":"through two gateways"}}),
        )
        .await;
    assert_eq!(text(&r), "through two gateways");
    // Streamable HTTP is not allowed for that prefix.
    let r = mcp_post(
        &insp,
        &insp.url(
            "/mcp",
            &[
                ("url", target.as_str()),
                ("transportType", "streamable-http"),
            ],
        ),
        None,
        &serde_json::from_str::<Value>(INIT).unwrap(),
    )
    .await;
    assert_eq!(r.status().as_u16(), 403);
    drop(s);
    insp.assert_empty(Duration::from_secs(10)).await;
    legacy.assert_drained(Duration::from_secs(10)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusals_have_the_documented_statuses_and_start_nothing() {
    let up = HttpServer::start("127.0.0.1:0".parse().unwrap(), HttpOptions::default())
        .await
        .unwrap();
    let port = up.addr().port();
    let toml = testkit_toml(&format!(
        "[[url]]\nprefix = \"http://127.0.0.1:{port}/mcp\"\n"
    ));
    let insp = Inspector::start(&toml, &[], Some(TOKEN));
    let cmd = testkit();

    // Targets outside the allowlist: 403 with a message naming what was refused.
    let refused_stdio: [(&str, &str, &str, &str); 5] = [
        ("/bin/sh", "-c id", "{}", "command not allowed"),
        ("sh", "", "{}", "command not allowed"),
        (cmd.as_str(), "http", "{}", "arguments not allowed"),
        (
            cmd.as_str(),
            "stdio --timer-ms 1",
            "{}",
            "arguments not allowed",
        ),
        (
            cmd.as_str(),
            "stdio",
            r#"{"LD_PRELOAD":"/tmp/x.so"}"#,
            "environment variable(s) not allowed",
        ),
    ];
    for (c, a, e, want) in refused_stdio {
        for path in ["/stdio", "/mcp"] {
            let url = insp.url(path, &stdio_query(&insp, c, a, e));
            let (status, body) = if path == "/stdio" {
                match open_sse(&insp, &url).await {
                    Ok(_) => panic!("{c} {a} {e} was accepted"),
                    Err(x) => x,
                }
            } else {
                let r = mcp_post(&insp, &url, None, &serde_json::from_str(INIT).unwrap()).await;
                (r.status().as_u16(), r.text().await.unwrap())
            };
            assert_eq!(status, 403, "{path} {c} {a} {e}: {body}");
            assert!(message(&body).contains(want), "{path} {c} {a}: {body}");
        }
    }
    let refused_urls = [
        format!("http://127.0.0.1:{port}/other"),
        format!("http://127.0.0.1:{port}/mcpx"),
        format!("http://127.0.0.1:{port}/mcp/../admin"),
        format!("http://127.0.0.1:{port}/mcp/%2e%2e/admin"),
        format!("http://127.0.0.1:{}/mcp", port + 1),
        format!("https://127.0.0.1:{port}/mcp"),
        format!("http://localhost:{port}/mcp"),
        format!("http://127.0.0.1:{port}@169.254.169.254/mcp"),
        format!("http://user:pw@127.0.0.1:{port}/mcp"),
        "file:///etc/passwd".to_owned(),
    ];
    for u in &refused_urls {
        let r = mcp_post(
            &insp,
            &insp.url("/mcp", &[("url", u), ("transportType", "streamable-http")]),
            None,
            &serde_json::from_str(INIT).unwrap(),
        )
        .await;
        let status = r.status().as_u16();
        let body = r.text().await.unwrap();
        assert_eq!(status, 403, "{u}: {body}");
        assert!(message(&body).contains("URL not allowed"), "{u}: {body}");
        let (status, body) = match open_sse(
            &insp,
            &insp.url("/sse", &[("url", u), ("transportType", "sse")]),
        )
        .await
        {
            Ok(_) => panic!("{u} accepted on /sse"),
            Err(x) => x,
        };
        assert_eq!(status, 403, "/sse {u}: {body}");
    }
    // Malformed queries: 400.
    for q in [
        vec![
            ("command", cmd.as_str()),
            ("transportType", "carrier-pigeon"),
        ],
        vec![("transportType", "stdio")],
        vec![
            ("command", cmd.as_str()),
            ("args", "'unterminated"),
            ("transportType", "stdio"),
        ],
        vec![
            ("command", cmd.as_str()),
            ("args", "stdio"),
            ("env", "not json"),
            ("transportType", "stdio"),
        ],
        vec![("transportType", "streamable-http")],
    ] {
        let r = mcp_post(
            &insp,
            &insp.url("/mcp", &q),
            None,
            &serde_json::from_str(INIT).unwrap(),
        )
        .await;
        assert_eq!(r.status().as_u16(), 400, "{q:?}");
    }

    // The token: missing, wrong (same length, other length), in the wrong header.
    let good = insp.url("/stdio", &stdio_query(&insp, &cmd, "stdio", "{}"));
    let wrong_same_len: String = TOKEN.chars().rev().collect::<String>();
    for auth in [
        None,
        Some(("x-mcp-proxy-auth", format!("Bearer {wrong_same_len}"))),
        Some(("x-mcp-proxy-auth", "Bearer short".to_owned())),
        Some(("x-mcp-proxy-auth", TOKEN.to_owned())),
        Some(("authorization", format!("Bearer {TOKEN}"))),
    ] {
        for (method, url) in [
            (reqwest::Method::GET, good.clone()),
            (reqwest::Method::GET, insp.url("/config", &[])),
            (
                reqwest::Method::POST,
                insp.url(
                    "/mcp",
                    &[("url", &up.url()), ("transportType", "streamable-http")],
                ),
            ),
            (
                reqwest::Method::POST,
                insp.url("/message", &[("sessionId", "x")]),
            ),
        ] {
            let mut r = insp
                .http
                .request(method.clone(), &url)
                .header("origin", UI)
                .header("accept", "application/json, text/event-stream")
                .header("content-type", "application/json");
            if let Some((h, v)) = &auth {
                r = r.header(*h, v);
            }
            let r = r.body(INIT).send().await.unwrap();
            assert_eq!(r.status().as_u16(), 401, "{method} {url} with {auth:?}");
            // The UI's origin may read the refusal.
            assert_eq!(r.headers()["access-control-allow-origin"], UI);
        }
    }

    // A foreign Origin: 403 with the right token, no CORS answer, on every endpoint.
    for origin in [
        "http://evil.example",
        "http://127.0.0.1:6275",
        "null",
        "http://localhost:6274",
    ] {
        for (method, path) in [
            (reqwest::Method::GET, good.clone()),
            (reqwest::Method::GET, insp.url("/health", &[])),
            (reqwest::Method::GET, insp.url("/config", &[])),
            (reqwest::Method::OPTIONS, insp.url("/mcp", &[])),
        ] {
            let r = insp
                .http
                .request(method.clone(), &path)
                .header("origin", origin)
                .header("x-mcp-proxy-auth", format!("Bearer {TOKEN}"))
                .header("accept", "text/event-stream")
                .send()
                .await
                .unwrap();
            assert_eq!(r.status().as_u16(), 403, "{origin} {method} {path}");
            assert!(!r.headers().contains_key("access-control-allow-origin"));
            let body = r.text().await.unwrap();
            assert!(message(&body).contains("Origin not allowed"), "{body}");
        }
    }
    // A rebound name (DNS rebinding) and a same-origin page of the proxy: 403.
    let r = insp
        .ui(reqwest::Method::GET, &good)
        .header("host", "attacker.example:6277")
        .header("accept", "text/event-stream")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 403);
    let r = insp
        .http
        .get(&good)
        .header("sec-fetch-site", "same-origin")
        .header("x-mcp-proxy-auth", format!("Bearer {TOKEN}"))
        .header("accept", "text/event-stream")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 403);
    // Without any Origin (a non-browser client) the token is enough.
    let r = insp
        .http
        .get(insp.url("/config", &[]))
        .header("x-mcp-proxy-auth", format!("Bearer {TOKEN}"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);

    // Nothing was started by any of it.
    assert_eq!(insp.metric("mcpgate_sessions_opened_total").await, 0.0);
    assert!(children_of(insp.pid()).is_empty());
    assert_eq!(up.stats().sessions_created, 0);
    let log = insp.log();
    assert!(!log.contains(TOKEN), "the token is in the log");
    // The allowed target still works afterwards.
    let mut s = open_sse(&insp, &good).await.unwrap();
    s.initialize(&insp).await;
    drop(s);
    insp.assert_empty(Duration::from_secs(10)).await;
    up.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn disabling_auth_is_explicit_loud_and_still_needs_the_origin() {
    let insp = Inspector::start(&testkit_toml(""), &["--dangerously-omit-auth"], Some(TOKEN));
    assert!(insp.token.is_none());
    assert!(
        insp.banner[0].contains("WARNING") && insp.banner[0].contains("DISABLED"),
        "{:?}",
        insp.banner
    );
    assert!(
        !insp.banner[1].contains("MCP_PROXY_AUTH_TOKEN"),
        "{:?}",
        insp.banner
    );
    let warned = wait_until(Duration::from_secs(5), || async {
        insp.log().contains("AUTHENTICATION IS DISABLED")
    })
    .await;
    assert!(warned, "no warning in the log:\n{}", insp.log());
    // No Origin: refused (the Origin is all that is left to check).
    let r = insp
        .http
        .get(insp.url("/config", &[]))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 403);
    let r = insp
        .http
        .get(insp.url("/config", &[]))
        .header("origin", "http://evil.example")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 403);
    // The UI's origin without a token: served, and the allowlist still applies.
    let cmd = testkit();
    let mut s = open_sse(
        &insp,
        &insp.url("/stdio", &stdio_query(&insp, &cmd, "stdio", "{}")),
    )
    .await
    .unwrap();
    s.initialize(&insp).await;
    let (status, _) = match open_sse(
        &insp,
        &insp.url("/stdio", &stdio_query(&insp, "/bin/sh", "-c id", "{}")),
    )
    .await
    {
        Ok(_) => panic!("/bin/sh accepted"),
        Err(x) => x,
    };
    assert_eq!(status, 403);
    drop(s);
    insp.assert_empty(Duration::from_secs(10)).await;
    // Every session opened without authentication is logged as such.
    assert!(
        insp.log().contains("without authentication"),
        "{}",
        insp.log()
    );
}

/// What one UI session saw of the notify tool's notifications.
#[derive(Debug, Default)]
struct Seen {
    own: BTreeSet<u64>,
    foreign: Vec<Value>,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_ui_sessions_get_two_children_and_only_their_own_notifications() {
    let insp = Inspector::start(&testkit_toml(""), &[], Some(TOKEN));
    let cmd = testkit();
    let url = insp.url("/stdio", &stdio_query(&insp, &cmd, "stdio", "{}"));
    let mut a = open_sse(&insp, &url).await.unwrap();
    let mut b = open_sse(&insp, &url).await.unwrap();
    a.initialize(&insp).await;
    b.initialize(&insp).await;
    let kids = children_of(insp.pid());
    assert_eq!(kids.len(), 2, "one child per UI session: {kids:?}");
    let who_a = text(
        &a.request(
            &insp,
            1,
            "tools/call",
            json!({"name":"whoami","arguments":{}}),
        )
        .await,
    );
    let who_b = text(
        &b.request(
            &insp,
            1,
            "tools/call",
            json!({"name":"whoami","arguments":{}}),
        )
        .await,
    );
    assert_ne!(who_a, who_b, "the two sessions share a server");

    const COUNT: u64 = 40;
    let run = |mut s: Sse, tag: &'static str| {
        let insp_base = insp.base.clone();
        let http = insp.http.clone();
        async move {
            let msg = json!({"jsonrpc":"2.0","id":7,"method":"tools/call",
                "params":{"name":"notify","arguments":{"tag":tag,"count":COUNT,"interval_ms":2},"_meta":{"progressToken":tag}}});
            let status = http
                .post(&s.post_url)
                .header("origin", UI)
                .header("x-mcp-proxy-auth", format!("Bearer {TOKEN}"))
                .header("content-type", "application/json")
                .body(msg.to_string())
                .send()
                .await
                .unwrap()
                .status()
                .as_u16();
            assert_eq!(status, 202, "{insp_base}");
            let mut before = Vec::new();
            let r = s.response(7, &mut before).await;
            assert_eq!(text(&r), format!("{tag}:{COUNT}"));
            // Whatever else arrives shortly after must be ours too.
            while let Ok(Some(m)) =
                tokio::time::timeout(Duration::from_millis(300), s.rx.recv()).await
            {
                before.push(m);
            }
            let mut seen = Seen::default();
            for m in before {
                let mine = match m["method"].as_str() {
                    Some("notifications/message") => {
                        let d = &m["params"]["data"];
                        d["tag"] == tag && seen.own.insert(d["seq"].as_u64().unwrap_or(u64::MAX))
                    }
                    Some("notifications/progress") => m["params"]["progressToken"] == tag,
                    _ => true,
                };
                if !mine {
                    seen.foreign.push(m);
                }
            }
            (s, seen)
        }
    };
    let ((a, seen_a), (b, seen_b)) = tokio::join!(run(a, "A"), run(b, "B"));
    for (name, seen) in [("A", &seen_a), ("B", &seen_b)] {
        assert!(
            seen.foreign.is_empty(),
            "session {name} saw someone else's messages: {:?}",
            seen.foreign
        );
        assert_eq!(
            seen.own.len() as u64,
            COUNT,
            "session {name}: {:?}",
            seen.own
        );
    }
    // Ending one leaves the other (and its child) alone.
    drop(a);
    let one = wait_until(Duration::from_secs(10), || async {
        children_of(insp.pid()).len() == 1 && insp.metric("mcpgate_sessions_active").await == 1.0
    })
    .await;
    assert!(one, "{:?}", children_of(insp.pid()));
    let mut b = b;
    let r = b
        .request(
            &insp,
            9,
            "tools/call",
            json!({"name":"echo","arguments":{"text":"still here"}}),
        )
        .await;
    assert_eq!(text(&r), "still here");
    drop(b);
    insp.assert_empty(Duration::from_secs(10)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rapid_reconnects_leave_no_session_and_no_child_behind() {
    // A short idle timeout: Streamable HTTP sessions the client abandons without DELETE
    // must be reaped too.
    let toml = format!("idle_timeout = \"2s\"\n{}", testkit_toml(""));
    let insp = Inspector::start(&toml, &[], Some(TOKEN));
    let cmd = testkit();
    let sse_url = insp.url("/stdio", &stdio_query(&insp, &cmd, "stdio", "{}"));
    let mcp_url = insp.url(
        "/mcp",
        &[
            ("command", cmd.as_str()),
            ("args", "stdio"),
            ("env", "{}"),
            ("transportType", "stdio"),
        ],
    );
    const ROUNDS: usize = 40;
    let started = Instant::now();
    // The UI's Restart: the old connection is dropped while the new one connects, over and
    // over, at every stage of the new one's initialize.
    let mut current: Option<Sse> = None;
    for i in 0..ROUNDS {
        let mut next = open_sse(&insp, &sse_url).await.unwrap();
        match i % 4 {
            0 => {
                next.initialize(&insp).await;
            }
            1 => {
                // initialize sent, answer not awaited.
                let _ = next.post(&insp, &serde_json::from_str(INIT).unwrap()).await;
            }
            2 => {}
            _ => {
                // A Streamable HTTP connection too: half of them DELETEd, half abandoned.
                let r = mcp_post(&insp, &mcp_url, None, &serde_json::from_str(INIT).unwrap()).await;
                assert_eq!(r.status().as_u16(), 200);
                let sid = r.headers()["mcp-session-id"].to_str().unwrap().to_owned();
                if i % 8 == 3 {
                    let d = insp
                        .ui(reqwest::Method::DELETE, &mcp_url)
                        .header("mcp-session-id", &sid)
                        .send()
                        .await
                        .unwrap();
                    assert_eq!(d.status().as_u16(), 200);
                }
            }
        }
        drop(current.replace(next));
    }
    let storm = started.elapsed();
    // The last connection is live and works.
    let mut last = current.take().unwrap();
    if last
        .post(&insp, &json!({"jsonrpc":"2.0","id":99,"method":"ping"}))
        .await
        == 202
    {
        // It may not be initialised yet (round 39 is a bare connect): any answer will do.
        let _ =
            tokio::time::timeout(Duration::from_secs(5), last.response(99, &mut Vec::new())).await;
    }
    drop(last);
    let mut insp = insp;
    assert!(
        insp.is_running(),
        "the gateway died during the reconnect storm"
    );
    insp.assert_empty(Duration::from_secs(15)).await;
    let opened = insp.metric("mcpgate_sessions_opened_total").await;
    assert_eq!(opened, (ROUNDS + ROUNDS / 4) as f64, "sessions opened");
    assert_eq!(insp.metric("mcpgate_stdio_children").await, 0.0);
    eprintln!(
        "inspector reconnect storm: {ROUNDS} reconnects in {storm:?}, drained after {:?}",
        started.elapsed()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spawned_commands_get_a_scrubbed_environment() {
    let insp_dir =
        std::env::temp_dir().join(format!("mcpgate-inspector-env-{}", std::process::id()));
    std::fs::create_dir_all(&insp_dir).unwrap();
    let script = insp_dir.join("envdump.sh");
    std::fs::write(&script, "#!/bin/sh\nenv > \"$1\"\nexec \"$2\" stdio\n").unwrap();
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let dump = insp_dir.join("env-1.txt");
    let toml = format!(
        "inherit_env = [\"PATH\", \"HOME\"]\n\
         [[stdio]]\nname = \"envdump\"\ncommand = {:?}\nargs = [{:?}, {:?}]\n\
         env = {{ FIXED_BY_CONFIG = \"yes\" }}\nallow_env = [\"CALLER_MAY_SET\"]\n",
        script.display().to_string(),
        format!("{}/env-?.txt", insp_dir.display()),
        testkit(),
    );
    let insp = Inspector::start(&toml, &[], Some(TOKEN));
    let script_s = script.display().to_string();
    let args = format!("{} {}", dump.display(), testkit());
    let url = insp.url(
        "/stdio",
        &stdio_query(
            &insp,
            &script_s,
            &args,
            r#"{"CALLER_MAY_SET":"from the UI"}"#,
        ),
    );
    let mut s = open_sse(&insp, &url).await.unwrap();
    s.initialize(&insp).await;
    let env: BTreeMap<String, String> = std::fs::read_to_string(&dump)
        .unwrap()
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
    assert_eq!(env.get("FIXED_BY_CONFIG").map(String::as_str), Some("yes"));
    assert_eq!(
        env.get("CALLER_MAY_SET").map(String::as_str),
        Some("from the UI")
    );
    assert_eq!(env.get("PATH"), std::env::var("PATH").ok().as_ref());
    // Only what was allowed (plus what sh itself sets).
    let allowed = [
        "PATH",
        "HOME",
        "FIXED_BY_CONFIG",
        "CALLER_MAY_SET",
        "PWD",
        "SHLVL",
        "OLDPWD",
        "_",
    ];
    let extra: Vec<&String> = env
        .keys()
        .filter(|k| !allowed.contains(&k.as_str()))
        .collect();
    assert!(extra.is_empty(), "leaked into the child: {extra:?}");
    assert!(!env.contains_key(CANARY) && !env.contains_key("RUST_LOG"));
    drop(s);
    insp.assert_empty(Duration::from_secs(10)).await;
    // The dump path must match its pattern: another file name is refused.
    let bad_args = format!("{}/elsewhere.txt {}", insp_dir.display(), testkit());
    let url = insp.url("/stdio", &stdio_query(&insp, &script_s, &bad_args, "{}"));
    assert_eq!(open_sse(&insp, &url).await.err().map(|e| e.0), Some(403));
    let _ = std::fs::remove_dir_all(&insp_dir);
}

#[test]
fn check_mode_validates_the_config() {
    let dir = std::env::temp_dir().join(format!("mcpgate-inspector-check-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let run = |toml: &str, extra: &[&str]| {
        let p = dir.join("c.toml");
        std::fs::write(&p, toml).unwrap();
        Command::new(bin("mcpgate"))
            .args(["inspector", "--check", "--config"])
            .arg(&p)
            .args(extra)
            .output()
            .unwrap()
    };
    let ok = run(
        &testkit_toml("[[url]]\nprefix = \"http://127.0.0.1:3001/\"\n"),
        &[],
    );
    assert!(
        ok.status.success(),
        "{}",
        String::from_utf8_lossy(&ok.stderr)
    );
    for (toml, extra, want) in [
        ("listen = \"0.0.0.0:6277\"\n", &[][..], "loopback"),
        (
            "[[url]]\nprefix = \"http://u:p@h/\"\n",
            &[][..],
            "user info",
        ),
        ("bogus = 1\n", &[][..], "unknown field"),
        ("token = \"short\"\n", &[][..], "at least 16"),
        ("[[stdio]]\ncommand = \"A=B\"\n", &[][..], "'='"),
        ("", &["--ui-origin", "http://x:1/path"][..], "UI origin"),
    ] {
        let out = run(toml, extra);
        assert_eq!(out.status.code(), Some(64), "{toml}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(want), "{toml}: {err}");
    }
    // The example shipped with the tests is valid.
    let example =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("inspector/mcpgate-inspector.example.toml");
    let out = Command::new(bin("mcpgate"))
        .args(["inspector", "--check", "--config"])
        .arg(&example)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let _ = std::fs::remove_dir_all(&dir);
}
