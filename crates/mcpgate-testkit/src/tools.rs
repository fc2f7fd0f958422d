//! The MCP server logic shared by both transports: message classification,
//! `initialize`, tools, resources, prompts, server-to-client sampling and
//! cancellation. Transports only frame messages and route them here.

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, LazyLock, Mutex, MutexGuard};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use crate::rpc::{
    INVALID_PARAMS, INVALID_REQUEST, METHOD_NOT_FOUND, error_response, result_response,
};
use crate::stats::{StatsCell, bump};

/// Protocol versions the testkit speaks.
pub(crate) const SUPPORTED_VERSIONS: [&str; 4] =
    ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"];
/// The version answered when the client asks for one we do not know.
pub(crate) const LATEST_VERSION: &str = "2025-11-25";

const RESOURCE_NOT_FOUND: i64 = -32002;

/// Where related server-to-client messages go, already serialized.
pub(crate) type Outbound = mpsc::UnboundedSender<String>;

/// The standalone timer notification for a session.
pub(crate) fn timer_notification(session_id: &str) -> String {
    json!({
        "jsonrpc": "2.0",
        "method": "notifications/message",
        "params": {"level": "info", "logger": "timer", "data": {"timer": true, "session": session_id}}
    })
    .to_string()
}

fn tool_name(params: Option<&Value>) -> Option<&str> {
    params?.get("name")?.as_str()
}

/// Whether a request's answer is sent as an SSE stream over HTTP (it has
/// related messages, takes time, or may never come).
pub(crate) fn streams(method: &str, params: Option<&Value>) -> bool {
    method == "tools/call"
        && matches!(
            tool_name(params),
            Some("notify" | "sample" | "slow" | "hang")
        )
}

/// A short human label for log lines, e.g. `tools/call echo`.
pub(crate) fn label(method: &str, params: Option<&Value>) -> String {
    match tool_name(params) {
        Some(tool) if method == "tools/call" => format!("{method} {tool}"),
        _ => method.to_owned(),
    }
}

/// What a request ended in.
#[derive(Debug)]
pub(crate) enum Outcome {
    /// A serialized JSON-RPC response to send.
    Reply(String),
    /// No answer at all (cancelled, or the session ended first).
    Silent,
    /// The server must die without answering (`die` tool).
    Die,
}

enum Done {
    Ok(Value),
    Err(i64, String),
    Silent,
    Die,
}

fn invalid(msg: impl Into<String>) -> Done {
    Done::Err(INVALID_PARAMS, msg.into())
}

fn text_result(text: impl Into<String>) -> Value {
    json!({"content": [{"type": "text", "text": text.into()}]})
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn id_key(id: &Value) -> String {
    match id {
        Value::String(s) => format!("s:{s}"),
        other => format!("n:{other}"),
    }
}

/// Removes a map entry when the request that registered it finishes or is dropped.
struct Registered<'a, V> {
    map: &'a Mutex<HashMap<String, V>>,
    key: String,
}

impl<V> Drop for Registered<'_, V> {
    fn drop(&mut self) {
        lock(self.map).remove(&self.key);
    }
}

static TOOLS: LazyLock<Value> = LazyLock::new(|| {
    let obj = |props: Value, required: &[&str]| json!({"type": "object", "properties": props, "required": required});
    json!({"tools": [
        {"name": "echo", "description": "Returns its text.",
         "inputSchema": obj(json!({"text": {"type": "string"}}), &["text"])},
        {"name": "add", "description": "Adds two numbers.",
         "inputSchema": obj(json!({"a": {"type": "number"}, "b": {"type": "number"}}), &["a", "b"])},
        {"name": "notify", "description": "Emits count log (and progress) notifications, then answers.",
         "inputSchema": obj(json!({"tag": {"type": "string"}, "count": {"type": "integer"},
                                   "interval_ms": {"type": "integer"}}), &["tag", "count"])},
        {"name": "slow", "description": "Sleeps ms milliseconds, then answers.",
         "inputSchema": obj(json!({"ms": {"type": "integer"}}), &["ms"])},
        {"name": "sample", "description": "Asks the client to sample (sampling/createMessage) and returns its text.",
         "inputSchema": obj(json!({"prompt": {"type": "string"}}), &["prompt"])},
        {"name": "whoami", "description": "Returns this server session's id.",
         "inputSchema": obj(json!({}), &[])},
        {"name": "die", "description": "Kills the server (stdio) or the connection (HTTP) without answering.",
         "inputSchema": obj(json!({}), &[])},
        {"name": "hang", "description": "Never answers (until cancelled or the session ends).",
         "inputSchema": obj(json!({}), &[])}
    ]})
});

/// The MCP state of one session (one HTTP `Mcp-Session-Id`, or one stdio process).
#[derive(Debug)]
pub(crate) struct McpSession {
    id: String,
    stats: Arc<StatsCell>,
    next_server_id: AtomicU64,
    /// Server-to-client requests awaiting the client's response, by id.
    pending: Mutex<HashMap<String, oneshot::Sender<Result<Value, Value>>>>,
    /// Cancellable in-flight client requests, by [`id_key`].
    inflight: Mutex<HashMap<String, CancellationToken>>,
    ended: CancellationToken,
}

impl McpSession {
    /// A fresh session.
    pub(crate) fn new(id: String, stats: Arc<StatsCell>) -> Self {
        Self {
            id,
            stats,
            next_server_id: AtomicU64::new(1),
            pending: Mutex::new(HashMap::new()),
            inflight: Mutex::new(HashMap::new()),
            ended: CancellationToken::new(),
        }
    }

    /// This session's id.
    pub(crate) fn id(&self) -> &str {
        &self.id
    }

    /// Ends the session: hanging calls and sampling waits finish without answering.
    pub(crate) fn end(&self) {
        self.ended.cancel();
        lock(&self.pending).clear();
    }

    /// Handles a notification from the client.
    pub(crate) fn handle_notification(&self, method: &str, params: Option<&Value>) {
        bump(&self.stats.notifications_received);
        if method == "notifications/cancelled"
            && let Some(req) = params.and_then(|p| p.get("requestId"))
            && let Some(token) = lock(&self.inflight).remove(&id_key(req))
        {
            token.cancel();
        }
    }

    /// Handles the client's response to a server-to-client request.
    pub(crate) fn handle_response(&self, id: &Value, result: Option<Value>, error: Option<Value>) {
        bump(&self.stats.responses_received);
        let key = match id {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        if let Some(waiter) = lock(&self.pending).remove(&key) {
            let answer = match (result, error) {
                (Some(r), _) => Ok(r),
                (None, e) => Err(e.unwrap_or(Value::Null)),
            };
            // The waiter may have been cancelled meanwhile; nothing to do then.
            let _ = waiter.send(answer);
        }
    }

    /// Handles a request; `out` carries related messages (notifications,
    /// server-to-client requests) sent before the answer.
    pub(crate) async fn handle_request(
        &self,
        id: &Value,
        method: &str,
        params: Option<Value>,
        out: Option<&Outbound>,
    ) -> Outcome {
        bump(&self.stats.requests);
        let done = match method {
            "initialize" => Done::Ok(initialize_result(params.as_ref())),
            "ping" | "logging/setLevel" | "resources/subscribe" | "resources/unsubscribe" => {
                Done::Ok(json!({}))
            }
            "tools/list" => Done::Ok(TOOLS.clone()),
            "tools/call" => self.call_tool(id, params, out).await,
            "resources/list" => Done::Ok(json!({"resources": [
                {"uri": "test://static", "name": "static", "mimeType": "text/plain"}
            ]})),
            "resources/read" => read_resource(params.as_ref()),
            "prompts/list" => Done::Ok(json!({"prompts": [{
                "name": "greet", "description": "Greets someone.",
                "arguments": [{"name": "name", "description": "Who to greet", "required": true}]
            }]})),
            "prompts/get" => get_prompt(params.as_ref()),
            _ => Done::Err(METHOD_NOT_FOUND, format!("method not found: {method}")),
        };
        match done {
            Done::Ok(v) => Outcome::Reply(result_response(id, &v)),
            Done::Err(code, msg) => Outcome::Reply(error_response(id, code, &msg)),
            Done::Silent => Outcome::Silent,
            Done::Die => Outcome::Die,
        }
    }

    async fn call_tool(&self, id: &Value, params: Option<Value>, out: Option<&Outbound>) -> Done {
        let Some(params) = params else {
            return invalid("tools/call needs params");
        };
        let empty = Value::Object(Default::default());
        let args = params.get("arguments").unwrap_or(&empty);
        let str_arg = |k: &str| args.get(k).and_then(Value::as_str);
        let u64_arg = |k: &str| args.get(k).and_then(Value::as_u64);
        match tool_name(Some(&params)).unwrap_or_default() {
            "echo" => match str_arg("text") {
                Some(t) => Done::Ok(text_result(t)),
                None => invalid("echo needs a string `text`"),
            },
            "add" => match (
                args.get("a").and_then(Value::as_f64),
                args.get("b").and_then(Value::as_f64),
            ) {
                (Some(a), Some(b)) => {
                    let int = |k: &str| args.get(k).and_then(Value::as_i64);
                    let text = match (int("a"), int("b")) {
                        (Some(a), Some(b)) => a.wrapping_add(b).to_string(),
                        _ => (a + b).to_string(),
                    };
                    Done::Ok(text_result(text))
                }
                _ => invalid("add needs numbers `a` and `b`"),
            },
            "whoami" => Done::Ok(text_result(self.id.clone())),
            "die" => Done::Die,
            "slow" => match u64_arg("ms") {
                Some(ms) => {
                    self.cancellable(id, async move {
                        tokio::time::sleep(Duration::from_millis(ms)).await;
                        Done::Ok(text_result(format!("slept {ms}")))
                    })
                    .await
                }
                None => invalid("slow needs an integer `ms`"),
            },
            "hang" => self.cancellable(id, std::future::pending()).await,
            "notify" => match (str_arg("tag"), u64_arg("count")) {
                (Some(tag), Some(count)) => {
                    let interval = u64_arg("interval_ms").unwrap_or(0);
                    let token = params.get("_meta").and_then(|m| m.get("progressToken"));
                    let work = notify(tag, count, interval, token, out);
                    self.cancellable(id, work).await
                }
                _ => invalid("notify needs a string `tag` and an integer `count`"),
            },
            "sample" => match str_arg("prompt") {
                Some(prompt) => self.cancellable(id, self.sample(prompt, out)).await,
                None => invalid("sample needs a string `prompt`"),
            },
            other => invalid(format!("unknown tool: {other}")),
        }
    }

    /// Runs `work` unless the request is cancelled or the session ends first.
    async fn cancellable(&self, id: &Value, work: impl Future<Output = Done>) -> Done {
        let token = CancellationToken::new();
        let key = id_key(id);
        lock(&self.inflight).insert(key.clone(), token.clone());
        let _registered = Registered {
            map: &self.inflight,
            key,
        };
        tokio::select! {
            biased;
            () = token.cancelled() => {
                bump(&self.stats.cancelled);
                Done::Silent
            }
            () = self.ended.cancelled() => Done::Silent,
            d = work => d,
        }
    }

    async fn sample(&self, prompt: &str, out: Option<&Outbound>) -> Done {
        let Some(out) = out else {
            return Done::Err(INVALID_REQUEST, "no channel for sampling".into());
        };
        let sid = format!("s-{}", self.next_server_id.fetch_add(1, Ordering::Relaxed));
        let (tx, rx) = oneshot::channel();
        lock(&self.pending).insert(sid.clone(), tx);
        let _registered = Registered {
            map: &self.pending,
            key: sid.clone(),
        };
        let request = json!({
            "jsonrpc": "2.0", "id": sid, "method": "sampling/createMessage",
            "params": {"messages": [{"role": "user", "content": {"type": "text", "text": prompt}}],
                       "maxTokens": 16}
        });
        if out.send(request.to_string()).is_err() {
            return Done::Silent;
        }
        let answer = rx.await;
        match answer {
            Ok(Ok(result)) => match result.pointer("/content/text").and_then(Value::as_str) {
                Some(text) => Done::Ok(text_result(text)),
                None => Done::Ok(json!({"content": [{"type": "text",
                    "text": "sampling result had no content.text"}], "isError": true})),
            },
            Ok(Err(error)) => Done::Ok(json!({"content": [{"type": "text",
                "text": format!("sampling failed: {error}")}], "isError": true})),
            // The session ended while waiting.
            Err(_) => Done::Silent,
        }
    }
}

async fn notify(
    tag: &str,
    count: u64,
    interval_ms: u64,
    progress_token: Option<&Value>,
    out: Option<&Outbound>,
) -> Done {
    for i in 0..count {
        if let Some(out) = out {
            let msg = json!({"jsonrpc": "2.0", "method": "notifications/message",
                "params": {"level": "info", "logger": "testkit", "data": {"tag": tag, "seq": i}}});
            // A closed channel means the client went away; the answer is moot then.
            let _ = out.send(msg.to_string());
            if let Some(token) = progress_token {
                let msg = json!({"jsonrpc": "2.0", "method": "notifications/progress",
                    "params": {"progressToken": token, "progress": i + 1, "total": count}});
                let _ = out.send(msg.to_string());
            }
        }
        if interval_ms > 0 && i + 1 < count {
            tokio::time::sleep(Duration::from_millis(interval_ms)).await;
        }
    }
    Done::Ok(text_result(format!("{tag}:{count}")))
}

fn initialize_result(params: Option<&Value>) -> Value {
    let asked = params
        .and_then(|p| p.get("protocolVersion"))
        .and_then(Value::as_str);
    let version = match asked {
        Some(v) if SUPPORTED_VERSIONS.contains(&v) => v,
        _ => LATEST_VERSION,
    };
    json!({
        "protocolVersion": version,
        "capabilities": {
            "tools": {"listChanged": true},
            "resources": {"subscribe": true},
            "prompts": {},
            "logging": {}
        },
        "serverInfo": {"name": "mcpgate-testkit", "version": env!("CARGO_PKG_VERSION")}
    })
}

fn read_resource(params: Option<&Value>) -> Done {
    match params.and_then(|p| p.get("uri")).and_then(Value::as_str) {
        Some(uri @ "test://static") => Done::Ok(json!({"contents": [
            {"uri": uri, "mimeType": "text/plain", "text": "hello"}
        ]})),
        Some(uri) => Done::Err(RESOURCE_NOT_FOUND, format!("resource not found: {uri}")),
        None => invalid("resources/read needs a `uri`"),
    }
}

fn get_prompt(params: Option<&Value>) -> Done {
    let name = params.and_then(|p| p.get("name")).and_then(Value::as_str);
    if name != Some("greet") {
        return invalid(format!("unknown prompt: {}", name.unwrap_or("<none>")));
    }
    let who = params
        .and_then(|p| p.pointer("/arguments/name"))
        .and_then(Value::as_str)
        .unwrap_or("world");
    Done::Ok(json!({
        "description": "A greeting",
        "messages": [{"role": "user", "content": {"type": "text", "text": format!("Hello, {who}!")}}]
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn session() -> McpSession {
        McpSession::new("sid".into(), Arc::default())
    }

    async fn call(s: &McpSession, method: &str, params: Value) -> Value {
        match s
            .handle_request(&json!(1), method, Some(params), None)
            .await
        {
            Outcome::Reply(text) => serde_json::from_str(&text).unwrap_or(Value::Null),
            other => panic!("unexpected {other:?}"),
        }
    }

    #[tokio::test]
    async fn negotiates_version() {
        let s = session();
        let r = call(&s, "initialize", json!({"protocolVersion": "2025-03-26"})).await;
        assert_eq!(r["result"]["protocolVersion"], "2025-03-26");
        let r = call(&s, "initialize", json!({"protocolVersion": "1999-01-01"})).await;
        assert_eq!(r["result"]["protocolVersion"], LATEST_VERSION);
        assert_eq!(r["result"]["serverInfo"]["name"], "mcpgate-testkit");
    }

    #[tokio::test]
    async fn errors_and_tools() {
        let s = session();
        let r = call(&s, "nope", json!({})).await;
        assert_eq!(r["error"]["code"], METHOD_NOT_FOUND);
        let r = call(&s, "tools/call", json!({"name": "nope"})).await;
        assert_eq!(r["error"]["code"], INVALID_PARAMS);
        let r = call(
            &s,
            "tools/call",
            json!({"name": "add", "arguments": {"a": 2, "b": 3}}),
        )
        .await;
        assert_eq!(r["result"]["content"][0]["text"], "5");
        let r = call(&s, "tools/list", json!({})).await;
        assert_eq!(r["result"]["tools"].as_array().map(Vec::len), Some(8));
        let r = call(
            &s,
            "prompts/get",
            json!({"name": "greet", "arguments": {"name": "Ann"}}),
        )
        .await;
        assert_eq!(r["result"]["messages"][0]["content"]["text"], "Hello, Ann!");
    }
}
