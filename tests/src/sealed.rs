//! Replicas with sealed session ids: their config, a GET stream that keeps event ids, and a
//! client's retry of a request that was in flight on a replica that died.

use std::time::Duration;

use futures::StreamExt;
use serde_json::{Value, json};
use tokio::sync::mpsc;

use crate::client::{Client, Reply};

/// Seal keys (32 bytes each, base64), as an operator would make them with
/// `openssl rand -base64 32`.
pub const KEY_1: &str = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=";
/// A second key, for rotation.
pub const KEY_2: &str = "ICEiIyQlJicoKSorLC0uLzAxMjM0NTY3ODk6Ozw9Pj8=";

/// The `[listen]` and `[session]` sections of a replica sealing with `keys` (id, secret),
/// the first one sealing.
pub fn replica_config(keys: &[(&str, &str)], extra_session: &str) -> String {
    let keys: Vec<String> = keys
        .iter()
        .map(|(id, secret)| format!("{{ id = \"{id}\", secret = \"{secret}\" }}"))
        .collect();
    format!(
        "[listen]\ndrain = \"2s\"\n[session]\nseal_keys = [{}]\n{extra_session}\n",
        keys.join(", ")
    )
}

/// A GET stream that yields each event's id with its JSON data.
#[derive(Debug)]
pub struct IdStream {
    /// The HTTP status of the GET.
    pub status: u16,
    rx: mpsc::UnboundedReceiver<(Option<String>, Value)>,
    task: tokio::task::JoinHandle<()>,
}

impl IdStream {
    /// Opens the standalone stream of session `sid` at `url`, resuming after `last` when
    /// given (`Last-Event-ID`).
    pub async fn open(url: &str, sid: &str, last: Option<&str>) -> IdStream {
        let mut req = reqwest::Client::new()
            .get(url)
            .header("accept", "text/event-stream")
            .header("mcp-session-id", sid)
            .header("mcp-protocol-version", "2025-11-25")
            .timeout(Duration::from_secs(600));
        if let Some(l) = last {
            req = req.header("last-event-id", l);
        }
        let resp = req.send().await.expect("GET failed");
        let status = resp.status().as_u16();
        let (tx, rx) = mpsc::unbounded_channel();
        let task = tokio::spawn(async move {
            let mut events = sse_stream::SseStream::from_bytes_stream(resp.bytes_stream());
            while let Some(Ok(ev)) = events.next().await {
                let Some(v) = ev
                    .data
                    .as_deref()
                    .and_then(|d| serde_json::from_str(d).ok())
                else {
                    continue;
                };
                if tx.send((ev.id, v)).is_err() {
                    return;
                }
            }
        });
        IdStream { status, rx, task }
    }

    /// The next event with data, within `limit`.
    pub async fn next(&mut self, limit: Duration) -> Option<(Option<String>, Value)> {
        tokio::time::timeout(limit, self.rx.recv())
            .await
            .ok()
            .flatten()
    }
}

impl Drop for IdStream {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Calls `tool` on session `sid` through `client`, as an MCP client whose connection broke
/// mid-request does: a request that got no answer, or the proxy's 502 for a replica that
/// died with it, is sent again (up to 5 times). Returns the answer and how many retries it
/// took.
pub async fn call_retrying(client: &Client, sid: &str, tool: &str, args: &Value) -> (Reply, u32) {
    let body = json!({"jsonrpc":"2.0","id":7,"method":"tools/call",
                      "params":{"name":tool,"arguments":args}})
    .to_string();
    let headers = [
        ("content-type", "application/json"),
        ("accept", "application/json, text/event-stream"),
        ("mcp-session-id", sid),
        ("mcp-protocol-version", "2025-11-25"),
    ];
    let mut retries = 0;
    loop {
        match client.try_post_raw(&headers, body.clone()).await {
            Some(r) if r.status != 502 => return (r, retries),
            other if retries >= 5 => panic!("no answer after {retries} retries: {other:?}"),
            _ => {
                retries += 1;
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
}
