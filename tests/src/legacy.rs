//! Legacy HTTP+SSE (MCP 2024-11-05) client side: the `GET /sse` stream, which first
//! announces where to POST (the `endpoint` event) and then carries the answers.

use std::time::Duration;

use serde_json::Value;
use tokio::sync::mpsc;

use crate::client::forward_sse;

/// The stream of a legacy SSE session: the endpoint it announced, then its messages.
#[derive(Debug)]
pub struct EndpointStream {
    /// The `endpoint` event's data, e.g. `/message?sessionId=…` (relative or absolute).
    pub endpoint: String,
    /// The JSON-RPC messages after the endpoint event.
    pub rx: mpsc::UnboundedReceiver<Value>,
    task: tokio::task::JoinHandle<()>,
}

impl EndpointStream {
    /// Reads an accepted `text/event-stream` answer: waits up to 10 s for its first event,
    /// which must be the `endpoint` event.
    pub async fn read(resp: reqwest::Response) -> EndpointStream {
        let (tx, mut rx) = mpsc::unbounded_channel();
        let task = forward_sse(resp, tx);
        let first = tokio::time::timeout(Duration::from_secs(10), rx.recv())
            .await
            .expect("no endpoint event in 10 s")
            .expect("stream ended before the endpoint event");
        let endpoint = first["endpoint"]
            .as_str()
            .unwrap_or_else(|| panic!("first event is not the endpoint: {first}"))
            .to_owned();
        EndpointStream { endpoint, rx, task }
    }

    /// Waits up to `limit` for the response to request `id`; what came before it is pushed
    /// to `seen`.
    pub async fn response(&mut self, id: &Value, limit: Duration, seen: &mut Vec<Value>) -> Value {
        let until = tokio::time::Instant::now() + limit;
        loop {
            let m = tokio::time::timeout_at(until, self.rx.recv())
                .await
                .unwrap_or_else(|_| panic!("no response to {id} within {limit:?}; saw {seen:?}"))
                .unwrap_or_else(|| panic!("stream ended before the response to {id}"));
            if m["id"] == *id && (m.get("result").is_some() || m.get("error").is_some()) {
                return m;
            }
            seen.push(m);
        }
    }
}

impl Drop for EndpointStream {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A legacy HTTP+SSE session opened with a plain `GET {base}/sse`.
#[derive(Debug)]
pub struct Legacy {
    http: reqwest::Client,
    /// `/message?sessionId=…`, relative to whichever base the POST goes to.
    pub endpoint: String,
    /// The session id in the endpoint.
    pub id: String,
    stream: EndpointStream,
}

impl Legacy {
    /// `GET {base}/sse` (200 expected) and its endpoint event.
    pub async fn open(base: &str) -> Legacy {
        let http = reqwest::Client::new();
        let resp = http
            .get(format!("{base}/sse"))
            .header("accept", "text/event-stream")
            .send()
            .await
            .expect("GET /sse");
        assert_eq!(resp.status().as_u16(), 200, "GET {base}/sse");
        let stream = EndpointStream::read(resp).await;
        let endpoint = stream.endpoint.clone();
        let id = endpoint
            .split_once("sessionId=")
            .map(|(_, id)| id.to_owned())
            .unwrap_or_else(|| panic!("endpoint without sessionId: {endpoint}"));
        Legacy {
            http,
            endpoint,
            id,
            stream,
        }
    }

    /// POSTs `msg` to `{base}{endpoint}`; returns the HTTP status.
    pub async fn post(&self, base: &str, msg: Value) -> u16 {
        self.http
            .post(format!("{base}{}", self.endpoint))
            .header("content-type", "application/json")
            .body(msg.to_string())
            .send()
            .await
            .expect("legacy POST")
            .status()
            .as_u16()
    }

    /// POSTs a request (202 expected) and waits up to 10 s for its response on the stream.
    pub async fn request(&mut self, base: &str, msg: Value) -> Value {
        let id = msg["id"].clone();
        let status = self.post(base, msg).await;
        assert_eq!(status, 202, "legacy POST to {base}{}", self.endpoint);
        self.stream
            .response(&id, Duration::from_secs(10), &mut Vec::new())
            .await
    }
}
