//! A raw MCP 2026-07-28 client for the era-bridge tests: each request a POST with the
//! per-request `_meta` and the mirrored headers, optionally as a principal (bearer token).

use serde_json::{Value, json};

use crate::client::{Client, Reply, Stream};

/// The one question of an `input_required` answer and its `requestState`:
/// `(input key, requestState)`; panics unless `reply` is such an answer.
pub fn input_required(reply: &Reply) -> (String, String) {
    let r = &reply.last()["result"];
    assert_eq!(r["resultType"], "input_required", "{reply:?}");
    let key = r["inputRequests"]
        .as_object()
        .and_then(|q| q.keys().next())
        .unwrap_or_else(|| panic!("no input request: {reply:?}"))
        .clone();
    let state = r["requestState"]
        .as_str()
        .unwrap_or_else(|| panic!("no requestState: {reply:?}"))
        .to_owned();
    (key, state)
}

/// A 2026-07-28 client of one endpoint, declaring `capabilities` on every request.
#[derive(Debug, Clone)]
pub struct Modern {
    client: Client,
    token: Option<String>,
    capabilities: Value,
}

impl Modern {
    /// A client of `url` as the holder of `token` (none: anonymous).
    pub fn new(url: &str, token: Option<&str>) -> Modern {
        Modern {
            client: Client::new(url),
            token: token.map(str::to_owned),
            capabilities: json!({}),
        }
    }

    /// A client of `url` as the holder of `token` whose requests give up after `limit`
    /// (it goes away mid-call).
    pub fn impatient(url: &str, token: Option<&str>, limit: std::time::Duration) -> Modern {
        let http = reqwest::Client::builder().timeout(limit).build().unwrap();
        Modern {
            client: Client::with(url, http),
            token: token.map(str::to_owned),
            capabilities: json!({}),
        }
    }

    /// The same client declaring `capabilities`.
    pub fn with_capabilities(mut self, capabilities: Value) -> Modern {
        self.capabilities = capabilities;
        self
    }

    /// Sends request `id` of `method` with `params` (the envelope added to its `_meta`).
    pub async fn request(&self, id: u64, method: &str, params: Value) -> Reply {
        self.try_request(id, method, params)
            .await
            .expect("POST failed at the HTTP level")
    }

    /// As [`Modern::request`], `None` when no answer came (an impatient client gave up).
    pub async fn try_request(&self, id: u64, method: &str, params: Value) -> Option<Reply> {
        let (h, body) = self.envelope(id, method, params);
        let h: Vec<(&str, &str)> = h.iter().map(|(k, v)| (*k, v.as_str())).collect();
        self.client.try_post_raw(&h, body).await
    }

    /// Opens `subscriptions/listen` (request `id`) for `notifications`; the stream's first
    /// item is the HTTP status.
    pub async fn listen(&self, id: u64, notifications: Value) -> Stream {
        let (h, body) = self.envelope(
            id,
            "subscriptions/listen",
            json!({"notifications": notifications}),
        );
        let h: Vec<(&str, &str)> = h.iter().map(|(k, v)| (*k, v.as_str())).collect();
        self.client.post_stream(&h, body).await
    }

    /// The headers and body of request `id`.
    fn envelope(
        &self,
        id: u64,
        method: &str,
        mut params: Value,
    ) -> (Vec<(&'static str, String)>, String) {
        if !params.is_object() {
            params = json!({});
        }
        let meta = params
            .as_object_mut()
            .unwrap()
            .entry("_meta")
            .or_insert_with(|| json!({}));
        meta["io.modelcontextprotocol/protocolVersion"] = json!("2026-07-28");
        meta["io.modelcontextprotocol/clientCapabilities"] = self.capabilities.clone();
        let name = match method {
            "tools/call" | "prompts/get" => params["name"].as_str().map(str::to_owned),
            "resources/read" => params["uri"].as_str().map(str::to_owned),
            _ => None,
        };
        let body = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        let mut h = vec![
            ("content-type", "application/json".to_owned()),
            ("accept", "application/json, text/event-stream".to_owned()),
            ("mcp-protocol-version", "2026-07-28".to_owned()),
            ("mcp-method", method.to_owned()),
        ];
        if let Some(n) = name {
            h.push(("mcp-name", n));
        }
        if let Some(t) = &self.token {
            h.push(("authorization", format!("Bearer {t}")));
        }
        (h, body.to_string())
    }

    /// Calls `tool` with `args` (request `id`).
    pub async fn call(&self, id: u64, tool: &str, args: Value) -> Reply {
        self.request(id, "tools/call", json!({"name": tool, "arguments": args}))
            .await
    }
}
