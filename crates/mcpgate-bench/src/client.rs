//! A minimal MCP Streamable HTTP client on one keep-alive hyper connection:
//! initialize, the initialized notification, `tools/call echo`, DELETE, and
//! just enough response parsing to tell a JSON-RPC result from anything else.

use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::{Context, Result, anyhow, bail};
use bytes::Bytes;
use http::header::{ACCEPT, CONTENT_TYPE, HOST};
use http::{HeaderValue, Method, Request, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::{self, SendRequest};
use hyper_util::rt::TokioIo;
use serde_json::Value;
use tokio::net::TcpStream;

/// The protocol version the bench asks for; the server's answer is used after.
const PROTOCOL_VERSION: &str = "2025-11-25";
const SESSION_HEADER: &str = "mcp-session-id";
const VERSION_HEADER: &str = "mcp-protocol-version";
const ACCEPT_BOTH: &str = "application/json, text/event-stream";

/// Which test server is upstream; decides the echo tool's argument name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Upstream {
    /// `mcpgate-testkit http` (echo answers plain JSON).
    Testkit,
    /// `mcpgate-testkit http --always-sse` (every answer is a one-event SSE stream).
    TestkitSse,
    /// The official everything server in Node (answers are SSE).
    Everything,
    /// A TypeScript SDK 2.4 server in Node (`tests/modern/ts_server.mjs`), both eras.
    TsModern,
    /// A virtual server of three testkits (the echo of the first; direct: that testkit).
    Virtual,
}

impl Upstream {
    /// A label for the report.
    pub(crate) fn label(self) -> &'static str {
        match self {
            Upstream::Testkit => "testkit",
            Upstream::TestkitSse => "testkit, SSE answers",
            Upstream::Everything => "everything (node)",
            Upstream::TsModern => "ts-sdk 2.4 (node)",
            Upstream::Virtual => "virtual of 3 testkits",
        }
    }

    fn echo_arg(self) -> &'static str {
        match self {
            Upstream::Testkit | Upstream::TestkitSse | Upstream::TsModern | Upstream::Virtual => {
                "text"
            }
            Upstream::Everything => "message",
        }
    }
}

/// Where to send requests: a loopback `http://host:port/path` URL.
#[derive(Debug)]
pub(crate) struct Target {
    addr: SocketAddr,
    authority: HeaderValue,
    path: String,
}

impl Target {
    /// Parses `http://127.0.0.1:PORT/mcp`.
    pub(crate) fn parse(url: &str) -> Result<Arc<Target>> {
        let rest = url
            .strip_prefix("http://")
            .ok_or_else(|| anyhow!("only http:// URLs are supported: {url}"))?;
        let (authority, path) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, "/"),
        };
        let addr: SocketAddr = authority
            .parse()
            .with_context(|| format!("URL host must be ip:port: {url}"))?;
        Ok(Arc::new(Target {
            addr,
            authority: HeaderValue::from_str(authority)?,
            path: path.to_owned(),
        }))
    }
}

/// An MCP session: its id and the negotiated protocol version.
#[derive(Debug, Clone)]
pub(crate) struct Session {
    id: HeaderValue,
    version: HeaderValue,
}

/// One keep-alive HTTP/1.1 connection; reconnects after a transport error.
pub(crate) struct Conn {
    target: Arc<Target>,
    tx: Option<SendRequest<Full<Bytes>>>,
}

/// A complete HTTP answer.
struct Reply {
    status: StatusCode,
    session: Option<HeaderValue>,
    sse: bool,
    body: Bytes,
}

impl Conn {
    /// Connects to `target`.
    pub(crate) async fn open(target: Arc<Target>) -> Result<Conn> {
        let mut conn = Conn { target, tx: None };
        conn.connect().await?;
        Ok(conn)
    }

    async fn connect(&mut self) -> Result<&mut SendRequest<Full<Bytes>>> {
        let stream = TcpStream::connect(self.target.addr)
            .await
            .with_context(|| format!("connect {}", self.target.addr))?;
        stream.set_nodelay(true)?;
        let (tx, conn) = http1::handshake(TokioIo::new(stream)).await?;
        tokio::spawn(async move {
            // Ends when the peer closes or the sender is dropped.
            let _ = conn.await;
        });
        Ok(self.tx.insert(tx))
    }

    async fn send(
        &mut self,
        method: Method,
        session: Option<&Session>,
        body: Option<String>,
    ) -> Result<Reply> {
        self.send_with(method, session, body, &[]).await
    }

    async fn send_with(
        &mut self,
        method: Method,
        session: Option<&Session>,
        body: Option<String>,
        extra: &[(&'static str, &'static str)],
    ) -> Result<Reply> {
        let mut req = Request::builder()
            .method(method)
            .uri(self.target.path.as_str())
            .header(HOST, self.target.authority.clone())
            .header(ACCEPT, ACCEPT_BOTH);
        for (k, v) in extra {
            req = req.header(*k, *v);
        }
        if body.is_some() {
            req = req.header(CONTENT_TYPE, "application/json");
        }
        if let Some(s) = session {
            req = req
                .header(SESSION_HEADER, s.id.clone())
                .header(VERSION_HEADER, s.version.clone());
        }
        let req = req.body(Full::new(Bytes::from(body.unwrap_or_default())))?;
        let tx = match self.tx.as_mut() {
            Some(tx) if !tx.is_closed() => tx,
            _ => self.connect().await?,
        };
        let result = async {
            tx.ready().await?;
            let resp = tx.send_request(req).await?;
            let (parts, body) = resp.into_parts();
            let body = body.collect().await?.to_bytes();
            Ok::<_, hyper::Error>((parts, body))
        }
        .await;
        let (parts, body) = match result {
            Ok(r) => r,
            Err(e) => {
                self.tx = None;
                return Err(anyhow!("transport: {e}"));
            }
        };
        let sse = parts
            .headers
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|ct| ct.starts_with("text/event-stream"));
        Ok(Reply {
            status: parts.status,
            session: parts.headers.get(SESSION_HEADER).cloned(),
            sse,
            body,
        })
    }

    /// `initialize` + `notifications/initialized`: a ready session.
    pub(crate) async fn open_session(&mut self) -> Result<Session> {
        let body = format!(
            r#"{{"jsonrpc":"2.0","id":0,"method":"initialize","params":{{"protocolVersion":"{PROTOCOL_VERSION}","capabilities":{{}},"clientInfo":{{"name":"mcpgate-bench","version":"0.1.0"}}}}}}"#
        );
        let reply = self.send(Method::POST, None, Some(body)).await?;
        let result = rpc_result(&reply, "initialize")?;
        let id = reply
            .session
            .clone()
            .ok_or_else(|| anyhow!("initialize: no Mcp-Session-Id header"))?;
        let version = result
            .get("protocolVersion")
            .and_then(Value::as_str)
            .ok_or_else(|| anyhow!("initialize: no protocolVersion in result"))?;
        let session = Session {
            id,
            version: HeaderValue::from_str(version)?,
        };
        let note = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#.to_owned();
        let reply = self.send(Method::POST, Some(&session), Some(note)).await?;
        if reply.status != StatusCode::ACCEPTED {
            bail!(
                "initialized: HTTP {} {}",
                reply.status.as_u16(),
                snippet(&reply.body)
            );
        }
        Ok(session)
    }

    /// `tools/call echo` with request id `id`; Ok when the answer is a
    /// JSON-RPC result that is not a tool error.
    pub(crate) async fn echo(
        &mut self,
        upstream: Upstream,
        session: &Session,
        id: u64,
    ) -> Result<()> {
        let body = format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"echo","arguments":{{"{}":"hello from mcpgate-bench"}}}}}}"#,
            upstream.echo_arg()
        );
        let reply = self.send(Method::POST, Some(session), Some(body)).await?;
        let result = rpc_result(&reply, "tools/call")?;
        if result.get("isError").and_then(Value::as_bool) == Some(true) {
            bail!("tools/call: tool error {}", snippet(&reply.body));
        }
        Ok(())
    }

    /// `tools/call echo` at MCP 2026-07-28: no session, the mirrored headers and the
    /// per-request `_meta` on every request.
    pub(crate) async fn modern_echo(&mut self, upstream: Upstream, id: u64) -> Result<()> {
        let body = format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"echo","arguments":{{"{}":"hello from mcpgate-bench"}},"_meta":{{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{{}},"io.modelcontextprotocol/clientInfo":{{"name":"mcpgate-bench","version":"0.1.0"}}}}}}}}"#,
            upstream.echo_arg()
        );
        let headers = [
            (VERSION_HEADER, "2026-07-28"),
            ("mcp-method", "tools/call"),
            ("mcp-name", "echo"),
        ];
        let reply = self
            .send_with(Method::POST, None, Some(body), &headers)
            .await?;
        let result = rpc_result(&reply, "tools/call (2026-07-28)")?;
        if result.get("isError").and_then(Value::as_bool) == Some(true) {
            bail!("tools/call: tool error {}", snippet(&reply.body));
        }
        Ok(())
    }

    /// DELETE the session.
    pub(crate) async fn close_session(&mut self, session: &Session) -> Result<()> {
        let reply = self.send(Method::DELETE, Some(session), None).await?;
        if !reply.status.is_success() {
            bail!(
                "DELETE: HTTP {} {}",
                reply.status.as_u16(),
                snippet(&reply.body)
            );
        }
        Ok(())
    }
}

/// The `result` of the JSON-RPC response in `reply` (plain JSON or SSE).
fn rpc_result(reply: &Reply, what: &str) -> Result<Value> {
    if reply.status != StatusCode::OK {
        bail!(
            "{what}: HTTP {} {}",
            reply.status.as_u16(),
            snippet(&reply.body)
        );
    }
    let mut found = None;
    if reply.sse {
        let text = std::str::from_utf8(&reply.body).context("SSE body is not UTF-8")?;
        for line in text.lines() {
            // Empty data lines are priming events (resumability), not messages.
            if let Some(data) = line.strip_prefix("data:").map(str::trim)
                && !data.is_empty()
            {
                let v: Value = serde_json::from_str(data)
                    .with_context(|| format!("{what}: SSE data is not JSON"))?;
                if v.get("result").is_some() || v.get("error").is_some() {
                    found = Some(v);
                    break;
                }
            }
        }
    } else {
        found = Some(
            serde_json::from_slice::<Value>(&reply.body)
                .with_context(|| format!("{what}: body is not JSON"))?,
        );
    }
    let mut msg = found.ok_or_else(|| anyhow!("{what}: no JSON-RPC response in SSE body"))?;
    if let Some(err) = msg.get("error") {
        bail!("{what}: JSON-RPC error {err}");
    }
    msg.get_mut("result")
        .map(Value::take)
        .ok_or_else(|| anyhow!("{what}: response has no result: {}", snippet(&reply.body)))
}

/// The start of a body, for error messages.
fn snippet(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    let text = text.trim();
    match text.char_indices().nth(100) {
        Some((i, _)) => format!("{}…", &text[..i]),
        None => text.to_owned(),
    }
}
