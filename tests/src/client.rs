//! A minimal Streamable HTTP MCP client that shows tests everything on the wire.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use futures::StreamExt;
use reqwest::header::HeaderMap;
use serde_json::{Value, json};
use tokio::sync::mpsc;

/// An HTTP answer from the gateway.
#[derive(Debug)]
pub struct Reply {
    /// HTTP status.
    pub status: u16,
    /// Response headers.
    pub headers: HeaderMap,
    /// The JSON-RPC messages in the body (one for JSON, every JSON event for SSE).
    pub messages: Vec<Value>,
    /// For an SSE body: the data of every event that carries any, as sent, JSON or not
    /// (so a test can see what was forwarded that is not JSON); empty for a JSON body.
    pub events: Vec<String>,
    /// The raw body.
    pub body: String,
}

impl Reply {
    /// The last message (the response of a request).
    pub fn last(&self) -> &Value {
        self.messages
            .last()
            .unwrap_or_else(|| panic!("no message in reply: {self:?}"))
    }

    /// The JSON-RPC error code of the last message, if it is an error.
    pub fn error_code(&self) -> Option<i64> {
        self.messages.last()?.get("error")?.get("code")?.as_i64()
    }

    /// The `content[0].text` of a tool result.
    pub fn text(&self) -> String {
        self.last()["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or_else(|| panic!("no text in {self:?}"))
            .to_owned()
    }

    /// A header value.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    /// The SSE events whose data is not JSON (none when nothing but JSON-RPC came).
    pub fn non_json(&self) -> Vec<&str> {
        self.events
            .iter()
            .filter(|d| serde_json::from_str::<Value>(d).is_err())
            .map(String::as_str)
            .collect()
    }
}

/// The data of each event of an SSE body that has any (its `data:` lines joined), as
/// sent: JSON or not. Events without data (a priming event's id, a comment) are not
/// listed.
pub fn sse_events(body: &str) -> Vec<String> {
    body.split("\n\n")
        .filter_map(|ev| {
            let data: Vec<&str> = ev
                .lines()
                .filter_map(|l| l.strip_prefix("data:"))
                .map(|d| d.strip_prefix(' ').unwrap_or(d))
                .collect();
            if data.is_empty() || data.iter().all(|d| d.is_empty()) {
                return None;
            }
            Some(data.join("\n"))
        })
        .collect()
}

/// Parses an SSE body into the JSON of its `data` fields; panics on an event whose data
/// is not JSON (nothing but JSON-RPC may reach a client; see [`sse_events`] to look at
/// such events instead).
pub fn parse_sse(body: &str) -> Vec<Value> {
    sse_events(body)
        .iter()
        .map(|d| {
            serde_json::from_str(d)
                .unwrap_or_else(|e| panic!("an SSE event whose data is not JSON ({e}): {d:?}"))
        })
        .collect()
}

/// A client of one gateway endpoint.
#[derive(Debug, Clone)]
pub struct Client {
    http: reqwest::Client,
    url: String,
}

impl Client {
    /// A client for the MCP endpoint `url`.
    pub fn new(url: &str) -> Client {
        Client::with(
            url,
            reqwest::Client::builder()
                .timeout(Duration::from_secs(60))
                .build()
                .unwrap(),
        )
    }

    /// A client for `url` over the given HTTP client (e.g. one that trusts a test CA).
    pub fn with(url: &str, http: reqwest::Client) -> Client {
        Client {
            http,
            url: url.to_owned(),
        }
    }

    /// POSTs `body` with exactly the given headers.
    pub async fn post_raw(
        &self,
        headers: &[(&str, &str)],
        body: impl Into<reqwest::Body>,
    ) -> Reply {
        let mut req = self.http.post(&self.url).body(body);
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        into_reply(req.send().await.expect("POST failed at the HTTP level")).await
    }

    /// POSTs `body` with exactly the given headers; `None` when no whole answer came (the
    /// request failed at the HTTP level, timed out, or its body broke off before its end,
    /// as an answer cut by a dying server does).
    pub async fn try_post_raw(
        &self,
        headers: &[(&str, &str)],
        body: impl Into<reqwest::Body>,
    ) -> Option<Reply> {
        let mut req = self.http.post(&self.url).body(body);
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        read_reply(req.send().await.ok()?).await.ok()
    }

    /// POSTs `body` with the given headers and forwards the answer's SSE events to the
    /// returned stream (a 2026-07-28 `subscriptions/listen`); its first item is
    /// `{"status": N}`.
    pub async fn post_stream(&self, headers: &[(&str, &str)], body: String) -> Stream {
        let (tx, rx) = mpsc::unbounded_channel();
        let mut req = self
            .http
            .post(&self.url)
            .body(body)
            .timeout(Duration::from_secs(3600));
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        let resp = req.send().await.expect("POST failed");
        let _ = tx.send(json!({"status": resp.status().as_u16()}));
        let sse = resp
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("text/event-stream"));
        if !sse {
            // A plain JSON answer is the one message of the stream.
            let task = tokio::spawn(async move {
                if let Ok(v) = resp.json::<Value>().await {
                    let _ = tx.send(v);
                }
            });
            return Stream { rx, task };
        }
        let task = forward_sse(resp, tx);
        Stream { rx, task }
    }

    /// Sends a request with any method and the given headers.
    pub async fn send(&self, method: reqwest::Method, headers: &[(&str, &str)]) -> Reply {
        let mut req = self.http.request(method, &self.url);
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        into_reply(req.send().await.expect("request failed at the HTTP level")).await
    }

    /// POSTs a JSON-RPC message with the standard headers (and the session's, if given).
    pub async fn post(&self, session: Option<&str>, msg: &Value) -> Reply {
        let mut h = vec![
            ("content-type", "application/json"),
            ("accept", "application/json, text/event-stream"),
        ];
        if let Some(s) = session {
            h.push(("mcp-session-id", s));
        }
        self.post_raw(&h, msg.to_string()).await
    }

    /// Calls a tool on session `id` (request id 7), wherever this client points: the
    /// session's own gateway, another replica, a proxy in front of them.
    pub async fn call_on(&self, id: &str, tool: &str, args: Value) -> Reply {
        self.post(
            Some(id),
            &json!({"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":tool,"arguments":args}}),
        )
        .await
    }

    /// Runs initialize + notifications/initialized; panics unless both succeed.
    pub async fn initialize(&self) -> Session {
        let r = self
            .post(
                None,
                &json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{
                    "protocolVersion":"2025-11-25","capabilities":{"sampling":{}},
                    "clientInfo":{"name":"mcpgate-tests","version":"0"}}}),
            )
            .await;
        assert_eq!(r.status, 200, "initialize failed: {r:?}");
        let id = r
            .header("mcp-session-id")
            .unwrap_or_else(|| panic!("no session id: {r:?}"))
            .to_owned();
        let s = Session {
            client: self.clone(),
            id,
            next: AtomicU64::new(1),
        };
        let n = s.notify("notifications/initialized", json!({})).await;
        assert_eq!(n.status, 202, "initialized notification: {n:?}");
        s
    }
}

/// Reads the whole answer; panics when its body cannot be read to the end (a body that
/// broke off is not an empty one).
async fn into_reply(resp: reqwest::Response) -> Reply {
    let status = resp.status().as_u16();
    read_reply(resp)
        .await
        .unwrap_or_else(|e| panic!("reading the body of an HTTP {status} answer failed: {e:?}"))
}

/// Reads the whole answer; `Err` when its body cannot be read to the end.
async fn read_reply(resp: reqwest::Response) -> Result<Reply, reqwest::Error> {
    let status = resp.status().as_u16();
    let headers = resp.headers().clone();
    let sse = headers
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/event-stream"));
    let body = resp.text().await?;
    let (messages, events) = if sse {
        let events = sse_events(&body);
        let json = events
            .iter()
            .filter_map(|d| serde_json::from_str(d).ok())
            .collect();
        (json, events)
    } else {
        let json = serde_json::from_str(&body)
            .map(|v| vec![v])
            .unwrap_or_default();
        (json, Vec::new())
    };
    Ok(Reply {
        status,
        headers,
        messages,
        events,
        body,
    })
}

/// An initialised session.
#[derive(Debug)]
pub struct Session {
    /// The client it belongs to.
    pub client: Client,
    /// The gateway-minted session id.
    pub id: String,
    next: AtomicU64,
}

impl Session {
    /// Sends a request (fresh id) and reads the whole answer.
    pub async fn request(&self, method: &str, params: Value) -> Reply {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        self.request_with_id(json!(id), method, params).await
    }

    /// Sends a request with a chosen id.
    pub async fn request_with_id(&self, id: Value, method: &str, params: Value) -> Reply {
        self.client
            .post(
                Some(&self.id),
                &json!({"jsonrpc":"2.0","id":id,"method":method,"params":params}),
            )
            .await
    }

    /// Calls a tool.
    pub async fn call(&self, tool: &str, args: Value) -> Reply {
        self.request("tools/call", json!({"name": tool, "arguments": args}))
            .await
    }

    /// Sends a notification.
    pub async fn notify(&self, method: &str, params: Value) -> Reply {
        self.client
            .post(
                Some(&self.id),
                &json!({"jsonrpc":"2.0","method":method,"params":params}),
            )
            .await
    }

    /// DELETEs the session; returns the status.
    pub async fn delete(&self) -> u16 {
        self.client
            .send(reqwest::Method::DELETE, &[("mcp-session-id", &self.id)])
            .await
            .status
    }

    /// Opens the GET stream. The first value is the HTTP status as `{"status": N}`.
    /// Dropping the [`Stream`] closes the connection.
    pub async fn open_stream(&self) -> Stream {
        let (tx, rx) = mpsc::unbounded_channel();
        let resp = self
            .client
            .http
            .get(&self.client.url)
            .header("accept", "text/event-stream")
            .header("mcp-session-id", &self.id)
            .timeout(Duration::from_secs(3600))
            .send()
            .await
            .expect("GET failed");
        let _ = tx.send(json!({"status": resp.status().as_u16()}));
        let task = forward_sse(resp, tx);
        Stream { rx, task }
    }
}

/// Forwards the events of an SSE response to `tx` until it ends or `tx` closes: each JSON
/// `data` as it is, an `endpoint` event (legacy HTTP+SSE) as `{"endpoint": data}`, any
/// other non-empty data as `{"non_json": data}` (so a test sees it and fails); empty data
/// (a priming event) is skipped.
pub(crate) fn forward_sse(
    resp: reqwest::Response,
    tx: mpsc::UnboundedSender<Value>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut events = sse_stream::SseStream::from_bytes_stream(resp.bytes_stream());
        while let Some(Ok(ev)) = events.next().await {
            let value = match (ev.event.as_deref(), ev.data.as_deref()) {
                (Some("endpoint"), Some(d)) => Some(json!({"endpoint": d})),
                (_, Some("")) => None,
                (_, Some(d)) => Some(
                    serde_json::from_str::<Value>(d).unwrap_or_else(|_| json!({"non_json": d})),
                ),
                _ => None,
            };
            if let Some(v) = value
                && tx.send(v).is_err()
            {
                return;
            }
        }
    })
}

/// An open GET stream.
#[derive(Debug)]
pub struct Stream {
    rx: mpsc::UnboundedReceiver<Value>,
    task: tokio::task::JoinHandle<()>,
}

impl Stream {
    /// The next message; `None` when the stream ended.
    pub async fn recv(&mut self) -> Option<Value> {
        self.rx.recv().await
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        self.task.abort();
    }
}
