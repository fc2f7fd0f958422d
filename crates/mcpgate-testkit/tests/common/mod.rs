//! What the testkit's integration tests share: a raw hyper client for the Streamable HTTP
//! server on a real socket, and the built binary in stdio mode.

// Each test file uses part of this module.
#![allow(dead_code)]

use std::net::SocketAddr;
use std::process::Stdio;
use std::time::Duration;

use anyhow::{Context, Result, ensure};
use bytes::Bytes;
use http::{Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use mcpgate_testkit::{HttpOptions, HttpServer};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tokio::process::{Child, ChildStdin, ChildStdout, Command};
use tokio::time::timeout;

/// The `Accept` of a POST.
pub(crate) const ACCEPT_BOTH: &str = "application/json, text/event-stream";
/// How long a request, a body or a stdio line may take.
const LIMIT: Duration = Duration::from_secs(5);

/// A `tools/call` request.
pub(crate) fn call(id: u64, tool: &str, args: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
           "params": {"name": tool, "arguments": args}})
}

/// An HTTP server on an ephemeral loopback port.
pub(crate) async fn start(opts: HttpOptions) -> Result<HttpServer> {
    Ok(HttpServer::start(SocketAddr::from(([127, 0, 0, 1], 0)), opts).await?)
}

/// Sends one request to `/mcp` on a fresh connection with exactly `headers` (plus `host`,
/// the session's header and, with a body, `content-type: application/json`).
pub(crate) async fn request(
    server: &HttpServer,
    method: Method,
    session: Option<&str>,
    headers: &[(&str, &str)],
    body: Option<&Value>,
) -> Result<Response<Incoming>> {
    let stream = TcpStream::connect(server.addr()).await?;
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
    tokio::spawn(conn);
    let mut req = Request::builder()
        .method(method)
        .uri("/mcp")
        .header("host", server.addr().to_string());
    if let Some(s) = session {
        req = req.header("mcp-session-id", s);
    }
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let body = match body {
        Some(v) => {
            req = req.header("content-type", "application/json");
            Full::new(Bytes::from(v.to_string()))
        }
        None => Full::new(Bytes::new()),
    };
    Ok(timeout(LIMIT, sender.send_request(req.body(body)?)).await??)
}

/// Like [`request`] with the `Accept` a client sends for `method` (GET: SSE; otherwise
/// JSON and SSE), then `extra`.
pub(crate) async fn send(
    server: &HttpServer,
    method: Method,
    session: Option<&str>,
    extra: &[(&str, &str)],
    body: Option<&Value>,
) -> Result<Response<Incoming>> {
    let accept = if method == Method::GET {
        "text/event-stream"
    } else {
        ACCEPT_BOTH
    };
    let headers: Vec<(&str, &str)> = [("accept", accept)]
        .into_iter()
        .chain(extra.iter().copied())
        .collect();
    request(server, method, session, &headers, body).await
}

/// The whole body as text.
pub(crate) async fn text(resp: Response<Incoming>) -> Result<String> {
    let bytes = timeout(LIMIT, resp.into_body().collect()).await??;
    Ok(String::from_utf8(bytes.to_bytes().to_vec())?)
}

/// `initialize` at `version` (200 expected): the session id and the answer's body.
pub(crate) async fn initialize(server: &HttpServer, version: &str) -> Result<(String, String)> {
    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {"protocolVersion": version, "capabilities": {},
                   "clientInfo": {"name": "t", "version": "0"}}});
    let resp = send(server, Method::POST, None, &[], Some(&init)).await?;
    ensure!(resp.status() == StatusCode::OK);
    let sid = resp
        .headers()
        .get("mcp-session-id")
        .context("no session header")?
        .to_str()?
        .to_owned();
    Ok((sid, text(resp).await?))
}

/// The built binary in stdio mode, talking newline-delimited JSON-RPC; killed on drop.
pub(crate) struct Proc {
    pub(crate) child: Child,
    pub(crate) stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl Proc {
    /// `mcpgate-testkit stdio extra…`; its stderr goes to `stderr`.
    pub(crate) fn spawn(extra: &[&str], stderr: Stdio) -> Result<Proc> {
        let mut child = Command::new(env!("CARGO_BIN_EXE_mcpgate-testkit"))
            .arg("stdio")
            .args(extra)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(stderr)
            .kill_on_drop(true)
            .spawn()?;
        let stdin = child.stdin.take().context("stdin")?;
        let stdout = BufReader::new(child.stdout.take().context("stdout")?);
        Ok(Proc {
            child,
            stdin,
            stdout,
        })
    }

    /// Writes one message and a newline.
    pub(crate) async fn send(&mut self, msg: Value) -> Result<()> {
        self.stdin.write_all(format!("{msg}\n").as_bytes()).await?;
        Ok(self.stdin.flush().await?)
    }

    /// One raw line, without its newline; `None` at the end of stdout.
    pub(crate) async fn next_line(&mut self) -> Result<Option<Vec<u8>>> {
        let mut buf = Vec::new();
        let n = timeout(LIMIT, self.stdout.read_until(b'\n', &mut buf)).await??;
        if n == 0 {
            return Ok(None);
        }
        if buf.last() == Some(&b'\n') {
            buf.pop();
        }
        Ok(Some(buf))
    }

    /// One raw line, without its newline.
    pub(crate) async fn line(&mut self) -> Result<Vec<u8>> {
        self.next_line().await?.context("stdout closed")
    }

    /// One message.
    pub(crate) async fn recv(&mut self) -> Result<Value> {
        Ok(serde_json::from_slice(&self.line().await?)?)
    }
}
