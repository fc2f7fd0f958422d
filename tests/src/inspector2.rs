//! `mcpgate inspector` speaking the Inspector 2.x protocol, and the 2.x UI's requests to
//! it: `/api/*` with `x-mcp-remote-auth` and the backend's own `Origin`, the MCP relay's
//! event stream read as the UI reads it (`event:` type, `data: {type, data}`).
//!
//! The UI it serves is the real one: `clients/web/dist` of npm
//! `@modelcontextprotocol/inspector` 2.12.0, installed by `tests/inspector/setup` under
//! the alias `inspector2`.

use std::path::PathBuf;
use std::time::Duration;

use futures::StreamExt;
use serde_json::{Value, json};
use tokio::sync::mpsc;

use crate::inspector::{CANARY, TOKEN};
use crate::{Gateway, Launch};

/// The installed 2.x UI.
pub fn ui_dir() -> PathBuf {
    let d = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("inspector/node_modules/inspector2/clients/web/dist");
    assert!(
        d.join("index.html").is_file(),
        "{} is missing: run tests/inspector/setup",
        d.display()
    );
    d
}

/// A running `mcpgate inspector` (2.x protocol).
pub struct Inspector2 {
    /// The process.
    pub gw: Gateway,
    /// `http://127.0.0.1:PORT`, also the UI's origin.
    pub base: String,
    /// The client every request goes through.
    pub http: reqwest::Client,
}

impl Inspector2 {
    /// Starts it with `toml` as its config file (the allowlist) and more arguments.
    pub fn start(toml: &str, args: &[&str]) -> Inspector2 {
        let mut cli = vec!["--ui".to_owned(), ui_dir().display().to_string()];
        cli.extend(args.iter().map(|a| (*a).to_owned()));
        let gw = Gateway::launch(
            toml,
            Launch {
                env: vec![
                    (CANARY.into(), "must-not-leak".into()),
                    ("MCPGATE_INSPECTOR_TOKEN".into(), TOKEN.into()),
                ],
                stdout_lines: 3,
                subcommand: Some("inspector".into()),
                args: cli,
                ..Launch::default()
            },
        );
        Inspector2 {
            base: gw.base.clone(),
            gw,
            http: reqwest::Client::new(),
        }
    }

    /// A request to the API as the UI makes it (token, its own Origin), with `headers`
    /// replacing those.
    pub fn request(
        &self,
        method: reqwest::Method,
        path: &str,
        headers: &[(&str, &str)],
    ) -> reqwest::RequestBuilder {
        let mut rb = self
            .http
            .request(method, format!("{}{path}", self.base))
            .timeout(Duration::from_secs(60));
        let mut h = vec![
            ("x-mcp-remote-auth", format!("Bearer {TOKEN}")),
            ("origin", self.base.clone()),
        ];
        for (k, v) in headers {
            h.retain(|(n, _)| !n.eq_ignore_ascii_case(k));
            if !v.is_empty() {
                h.push((k, (*v).to_owned()));
            }
        }
        for (k, v) in h {
            rb = rb.header(k, v);
        }
        rb
    }

    /// `method path` with a JSON body; the status and the JSON answer.
    pub async fn api(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
    ) -> (u16, Value) {
        let mut rb = self.request(method, path, &[]);
        if let Some(b) = body {
            rb = rb
                .header("content-type", "application/json")
                .body(b.to_string());
        }
        let r = rb.send().await.expect("request failed");
        let status = r.status().as_u16();
        let text = r.text().await.unwrap_or_else(|e| {
            panic!("reading the body of an HTTP {status} answer failed: {e:?}")
        });
        (
            status,
            serde_json::from_str(&text).unwrap_or(Value::String(text)),
        )
    }

    /// `POST /api/mcp/connect` with this server config.
    pub async fn connect(&self, config: Value) -> (u16, Value) {
        self.api(
            reqwest::Method::POST,
            "/api/mcp/connect",
            Some(json!({ "config": config, "settings": { "headers": [] } })),
        )
        .await
    }

    /// Connects (which must succeed), opens the event stream and initializes.
    pub async fn open(&self, config: Value) -> Connection<'_> {
        let (status, v) = self.connect(config).await;
        assert_eq!(status, 200, "{v}");
        let id = v["sessionId"].as_str().expect("sessionId").to_owned();
        let events = self.events(&id).await;
        let mut c = Connection {
            insp: self,
            id,
            events,
        };
        let init = c
            .request(
                0,
                "initialize",
                json!({"protocolVersion":"2025-11-25","capabilities":{"sampling":{}},
                "clientInfo":{"name":"inspector-client","version":"2.12.0"}}),
            )
            .await;
        assert!(init["result"]["protocolVersion"].is_string(), "{init}");
        c.notify("notifications/initialized", json!({})).await;
        c
    }

    /// `GET /api/mcp/events?sessionId=`: its events as `(type, data)`.
    pub async fn events(&self, id: &str) -> Events {
        let r = self
            .request(
                reqwest::Method::GET,
                &format!("/api/mcp/events?sessionId={id}"),
                &[],
            )
            .timeout(Duration::from_secs(3600))
            .send()
            .await
            .expect("events request failed");
        assert_eq!(r.status(), 200, "events stream refused");
        let (tx, rx) = mpsc::unbounded_channel();
        // What is wrong with an event goes to the test as an `Err`, which `next()` panics
        // on: a panic here, in a detached task, would only end the stream.
        let task = tokio::spawn(async move {
            let mut s = sse_stream::SseStream::from_bytes_stream(r.bytes_stream());
            while let Some(Ok(ev)) = s.next().await {
                let item = match ev.data.as_deref() {
                    None | Some("") => continue,
                    Some(d) => match serde_json::from_str::<Value>(d) {
                        Err(e) => Err(format!("an event whose data is not JSON ({e}): {d:?}")),
                        Ok(v) => {
                            // The event name and the data's type agree.
                            let kind = v["type"].as_str().unwrap_or("").to_owned();
                            if ev.event.as_deref() == Some(kind.as_str()) {
                                Ok((kind, v["data"].clone()))
                            } else {
                                Err(format!("event {:?} carries type {kind:?}: {v}", ev.event))
                            }
                        }
                    },
                };
                if tx.send(item).is_err() {
                    return;
                }
            }
        });
        Events { rx, task }
    }

    /// A metric of the backend.
    pub async fn metric(&self, name: &str) -> f64 {
        self.gw.metric(name).await
    }
}

/// A relay's event stream.
pub struct Events {
    rx: mpsc::UnboundedReceiver<Result<(String, Value), String>>,
    task: tokio::task::JoinHandle<()>,
}

impl Events {
    /// The next event (60 s at most); `None` when the stream ended.
    /// Panics on an event that is not what the relay sends (data that is not JSON, an
    /// event name that is not its data's type).
    pub async fn next(&mut self) -> Option<(String, Value)> {
        tokio::time::timeout(Duration::from_secs(60), self.rx.recv())
            .await
            .expect("no event within 60 s")
            .map(|item| item.unwrap_or_else(|e| panic!("bad relay event: {e}")))
    }
}

impl Drop for Events {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// One UI connection: its session id and event stream.
pub struct Connection<'a> {
    /// The backend.
    pub insp: &'a Inspector2,
    /// The relay's session id.
    pub id: String,
    /// Its event stream.
    pub events: Events,
}

impl Connection<'_> {
    /// `POST /api/mcp/send` of `msg`: the status and answer.
    pub async fn send(&self, msg: Value) -> (u16, Value) {
        self.insp
            .api(
                reqwest::Method::POST,
                "/api/mcp/send",
                Some(json!({ "sessionId": self.id, "message": msg })),
            )
            .await
    }

    /// Sends a request; `{ok:true}` must come back and its response must already be on
    /// the event stream. Messages before it (notifications, server requests) are kept in
    /// `seen`.
    pub async fn request_seeing(
        &mut self,
        id: u64,
        method: &str,
        params: Value,
        seen: &mut Vec<Value>,
    ) -> Value {
        let (status, v) = self
            .send(json!({"jsonrpc":"2.0","id":id,"method":method,"params":params}))
            .await;
        assert_eq!((status, &v), (200, &json!({"ok": true})), "{method}");
        loop {
            let (kind, data) = self.events.next().await.expect("event stream ended");
            assert_eq!(kind, "message", "{data}");
            if data["id"] == json!(id)
                && (data.get("result").is_some() || data.get("error").is_some())
            {
                return data;
            }
            seen.push(data);
        }
    }

    /// As [`Connection::request_seeing`], dropping what came before the response.
    pub async fn request(&mut self, id: u64, method: &str, params: Value) -> Value {
        self.request_seeing(id, method, params, &mut Vec::new())
            .await
    }

    /// Sends a notification (or a response to the server): `{ok:true}`.
    pub async fn notify(&self, method: &str, params: Value) {
        let (status, v) = self
            .send(json!({"jsonrpc":"2.0","method":method,"params":params}))
            .await;
        assert_eq!((status, &v), (200, &json!({"ok": true})), "{method}");
    }

    /// `POST /api/mcp/disconnect`.
    pub async fn disconnect(self) -> (u16, Value) {
        self.insp
            .api(
                reqwest::Method::POST,
                "/api/mcp/disconnect",
                Some(json!({ "sessionId": self.id })),
            )
            .await
    }
}

/// A minimal HTTP/1.1 server on `ip` answering each path with its raw response (head and
/// body; `{self}` in it is replaced by the server's own `ip:port`); other paths get 404.
/// It serves until the returned task is dropped (aborted).
pub async fn raw_server(
    ip: &str,
    routes: Vec<(&'static str, String)>,
) -> (std::net::SocketAddr, AbortOnDrop) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let l = tokio::net::TcpListener::bind((ip, 0)).await.unwrap();
    let addr = l.local_addr().unwrap();
    let routes: Vec<(&'static str, String)> = routes
        .into_iter()
        .map(|(p, r)| (p, r.replace("{self}", &addr.to_string())))
        .collect();
    let task = tokio::spawn(async move {
        loop {
            let Ok((mut s, _)) = l.accept().await else {
                return;
            };
            let routes = routes.clone();
            tokio::spawn(async move {
                let mut buf = vec![0u8; 8192];
                let n = s.read(&mut buf).await.unwrap_or(0);
                let head = String::from_utf8_lossy(&buf[..n]).into_owned();
                let path = head.split_whitespace().nth(1).unwrap_or("/").to_owned();
                let resp = routes
                    .iter()
                    .find(|(p, _)| *p == path)
                    .map(|(_, r)| r.clone())
                    .unwrap_or_else(|| {
                        "HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
                            .into()
                    });
                let _ = s.write_all(resp.as_bytes()).await;
                let _ = s.shutdown().await;
            });
        }
    });
    (addr, AbortOnDrop(task))
}

/// Aborts its task when dropped.
pub struct AbortOnDrop(pub tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}
