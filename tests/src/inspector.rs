//! `mcpgate inspector` (the MCP Inspector's proxy protocol) and the requests the Inspector
//! UI (npm `@modelcontextprotocol/inspector` 1.0.x) makes to it: its `Origin`, the
//! `X-MCP-Proxy-Auth: Bearer <token>` header, the `/stdio`, `/sse` and `/mcp` query shapes,
//! a legacy SSE connection as its `SSEClientTransport` makes it ([`Sse`]) and a Streamable
//! HTTP POST as its `StreamableHTTPClientTransport` makes it ([`mcp_post`]).

use std::time::Duration;

use reqwest::Url;
use serde_json::{Value, json};

use crate::client::parse_sse;
use crate::gateway::{Gateway, Launch, bin, children_of, wait_until};
use crate::legacy::EndpointStream;

/// The origin the tests' "UI" is served from (unless launched with another).
pub const UI: &str = "http://127.0.0.1:6274";
/// The token given through `MCPGATE_INSPECTOR_TOKEN`.
pub const TOKEN: &str = "inspector-test-token-0123456789abcdef";
/// Set in the gateway's environment; a spawned command must never see it.
pub const CANARY: &str = "MCPGATE_TEST_CANARY";
/// The UI's `initialize` request.
pub const INIT: &str = r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"inspector-client","version":"1.0.3"}}}"#;

/// A running `mcpgate inspector`; SIGTERM on drop (it is a [`Gateway`] underneath).
#[derive(Debug)]
pub struct Inspector {
    gw: Gateway,
    /// Base URL, e.g. `http://127.0.0.1:40123`.
    pub base: String,
    /// The UI's origin it allows.
    pub origin: String,
    /// The session token (configured or printed); `None` with auth disabled.
    pub token: Option<String>,
    /// The printed lines after the first (token or warning, ready URL).
    pub banner: Vec<String>,
    /// A client with a 30 s timeout.
    pub http: reqwest::Client,
}

impl Inspector {
    /// Starts `mcpgate inspector --config <toml> --listen 127.0.0.1:0 --ui-origin UI args…`
    /// with [`CANARY`] in its environment; `token`: given through the environment (`None`:
    /// generated, read from stdout).
    pub fn start(toml: &str, args: &[&str], token: Option<&str>) -> Inspector {
        Inspector::launch(toml, UI, args, token)
    }

    /// Like [`Inspector::start`] for a UI served from `ui_origin`.
    pub fn launch(toml: &str, ui_origin: &str, args: &[&str], token: Option<&str>) -> Inspector {
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(30))
            .build()
            .unwrap();
        // The 1.x proxy protocol (the 2.x backend has its own harness: `inspector2.rs`).
        let mut cli = vec![
            "--protocol".to_owned(),
            "v1".to_owned(),
            "--ui-origin".to_owned(),
            ui_origin.to_owned(),
        ];
        cli.extend(args.iter().map(|a| (*a).to_owned()));
        let gw = Gateway::launch(
            toml,
            Launch {
                env: vec![
                    (CANARY.into(), "must-not-leak".into()),
                    // Empty counts as unset: the inspector generates a token then.
                    ("MCPGATE_INSPECTOR_TOKEN".into(), token.unwrap_or("").into()),
                ],
                stdout_lines: 3,
                http: Some(http.clone()),
                subcommand: Some("inspector".into()),
                args: cli,
                cgroup: None,
            },
        );
        let banner = gw.stdout[1..].to_vec();
        let token = banner[0]
            .strip_prefix("mcpgate inspector session token: ")
            .map(str::to_owned);
        Inspector {
            base: gw.base.clone(),
            origin: ui_origin.to_owned(),
            gw,
            token,
            banner,
            http,
        }
    }

    /// The gateway's pid.
    pub fn pid(&self) -> u32 {
        self.gw.pid()
    }

    /// Whether the process is still running.
    pub fn is_running(&mut self) -> bool {
        self.gw.is_running()
    }

    /// The gateway's log so far.
    pub fn log(&self) -> String {
        self.gw.log()
    }

    /// One sample's value from `/metrics` (see [`Gateway::metric`]).
    pub async fn metric(&self, name: &str) -> f64 {
        self.gw.metric(name).await
    }

    /// `base` + a path and the query, encoded as the UI's `URLSearchParams` does.
    pub fn url(&self, path: &str, query: &[(&str, &str)]) -> String {
        let u = format!("{}{path}", self.base);
        if query.is_empty() {
            return u;
        }
        Url::parse_with_params(&u, query).unwrap().to_string()
    }

    /// A request as the UI's browser page makes it: its Origin and the token header.
    pub fn ui(&self, method: reqwest::Method, url: &str) -> reqwest::RequestBuilder {
        let mut r = self
            .http
            .request(method, url)
            .header("origin", &self.origin);
        if let Some(t) = &self.token {
            r = r.header("x-mcp-proxy-auth", format!("Bearer {t}"));
        }
        r
    }

    /// Waits until no session and no child is left; panics with the log otherwise.
    pub async fn assert_empty(&self, limit: Duration) {
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

/// The `mcpgate-testkit` binary's path.
pub fn testkit() -> String {
    bin("mcpgate-testkit").display().to_string()
}

/// The allowlist entry for the testkit's stdio server (optionally more config after it).
pub fn testkit_toml(extra: &str) -> String {
    format!(
        "[[stdio]]\nname = \"testkit\"\ncommand = {:?}\nargs = [\"stdio\"]\nallow_env = [\"TESTKIT_OK\"]\n{extra}",
        testkit()
    )
}

/// The UI's query for a stdio connection (`/stdio`), in its order.
pub fn stdio_query<'a>(
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

/// A legacy SSE connection as the UI's `SSEClientTransport` makes it.
#[derive(Debug)]
pub struct Sse {
    /// Where to POST (from the `endpoint` event), absolute.
    pub post_url: String,
    /// The stream: the endpoint event, then the JSON-RPC messages.
    pub events: EndpointStream,
}

/// Opens `url` as the UI's EventSource does; `Err((status, body))` when refused.
pub async fn open_sse(insp: &Inspector, url: &str) -> Result<Sse, (u16, String)> {
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
    let events = EndpointStream::read(resp).await;
    let endpoint = &events.endpoint;
    // The UI resolves it against the SSE URL and requires the same origin.
    let post_url = Url::parse(url).unwrap().join(endpoint).unwrap();
    assert_eq!(
        post_url.origin(),
        Url::parse(&insp.base).unwrap().origin(),
        "the endpoint {endpoint} leaves the proxy's origin"
    );
    Ok(Sse {
        post_url: post_url.to_string(),
        events,
    })
}

impl Sse {
    /// POSTs a message as the UI does; the HTTP status.
    pub async fn post(&self, insp: &Inspector, msg: &Value) -> u16 {
        insp.ui(reqwest::Method::POST, &self.post_url)
            .header("content-type", "application/json")
            .body(msg.to_string())
            .send()
            .await
            .unwrap()
            .status()
            .as_u16()
    }

    /// Waits up to 20 s for the response to request `id`; what came before it is pushed to
    /// `seen`.
    pub async fn response(&mut self, id: i64, seen: &mut Vec<Value>) -> Value {
        self.events
            .response(&json!(id), Duration::from_secs(20), seen)
            .await
    }

    /// POSTs a request (202 expected) and waits for its response on the stream.
    pub async fn request(
        &mut self,
        insp: &Inspector,
        id: i64,
        method: &str,
        params: Value,
    ) -> Value {
        let status = self
            .post(
                insp,
                &json!({"jsonrpc":"2.0","id":id,"method":method,"params":params}),
            )
            .await;
        assert_eq!(status, 202, "POST {method}");
        self.response(id, &mut Vec::new()).await
    }

    /// `tools/call` of `tool` with `args`: the response.
    pub async fn call(&mut self, insp: &Inspector, id: i64, tool: &str, args: Value) -> Value {
        self.request(
            insp,
            id,
            "tools/call",
            json!({"name": tool, "arguments": args}),
        )
        .await
    }

    /// initialize + notifications/initialized, as the UI's client does.
    pub async fn initialize(&mut self, insp: &Inspector) -> Value {
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
pub fn text(r: &Value) -> String {
    r["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("no text in {r}"))
        .to_owned()
}

/// The body of a JSON-RPC refusal: its message.
pub fn message(body: &str) -> String {
    serde_json::from_str::<Value>(body)
        .ok()
        .and_then(|v| v["error"]["message"].as_str().map(str::to_owned))
        .unwrap_or_else(|| panic!("not a JSON-RPC error body: {body}"))
}

/// A Streamable HTTP POST as the UI's `StreamableHTTPClientTransport` makes it through the
/// proxy: the proxy URL with the target query, the token, its Origin.
pub async fn mcp_post(
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
pub async fn messages(r: reqwest::Response) -> Vec<Value> {
    let sse = r
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/event-stream"));
    let body = r.text().await.unwrap();
    if sse {
        parse_sse(&body)
    } else {
        vec![serde_json::from_str(&body).unwrap_or_else(|_| panic!("not JSON: {body}"))]
    }
}
