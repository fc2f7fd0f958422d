//! The MCP server logic shared by both transports: message classification,
//! `initialize`, tools, resources (with subscriptions), prompts,
//! server-to-client requests (sampling, roots) and cancellation. Transports
//! only frame messages and route them here.

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, LazyLock, Mutex, MutexGuard};
use std::time::Duration;

use futures::future::BoxFuture;
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

/// A session's standalone channel (the HTTP GET stream, stdout for stdio):
/// sends one serialized message, true if it reached a live reader.
pub(crate) type Standalone = Arc<dyn Fn(String) -> bool + Send + Sync>;

/// The server's resource subscriptions: by URI, the standalone channel of
/// each subscribed session (by session id).
#[derive(Default)]
pub(crate) struct Subscriptions {
    by_uri: Mutex<HashMap<String, HashMap<String, Standalone>>>,
}

impl std::fmt::Debug for Subscriptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let uris: Vec<String> = lock(&self.by_uri).keys().cloned().collect();
        f.debug_struct("Subscriptions")
            .field("uris", &uris)
            .finish()
    }
}

impl Subscriptions {
    fn subscribe(&self, uri: &str, session: &str, channel: Standalone) {
        lock(&self.by_uri)
            .entry(uri.to_owned())
            .or_default()
            .insert(session.to_owned(), channel);
    }

    fn unsubscribe(&self, uri: &str, session: &str) {
        let mut map = lock(&self.by_uri);
        if let Some(sessions) = map.get_mut(uri) {
            sessions.remove(session);
            if sessions.is_empty() {
                map.remove(uri);
            }
        }
    }

    /// Drops every subscription of a session.
    fn forget(&self, session: &str) {
        lock(&self.by_uri).retain(|_, sessions| {
            sessions.remove(session);
            !sessions.is_empty()
        });
    }

    /// The standalone channels of the sessions subscribed to `uri`.
    fn subscribers(&self, uri: &str) -> Vec<Standalone> {
        lock(&self.by_uri)
            .get(uri)
            .map(|sessions| sessions.values().cloned().collect())
            .unwrap_or_default()
    }
}

/// Transport hooks for the fault tools that need more than serialized messages on a
/// channel: a flood paced by its reader, and bytes that are not text.
pub(crate) trait FaultHooks: Send + Sync {
    /// Sends `count` notifications of about `size` bytes each on the session's
    /// standalone channel, as fast as its reader takes them (nothing is kept for
    /// replay); resolves to how many were handed to a reader (HTTP) or queued for
    /// stdout (stdio, where they are written before anything queued later).
    fn flood(&self, count: u64, size: usize) -> BoxFuture<'static, u64>;
    /// Queues one line of bytes that are not UTF-8 for the standalone channel,
    /// ahead of anything queued later (stdio); false when the transport cannot.
    fn binary_line(&self) -> bool;
}

/// A JSON-RPC `notifications/message` of about `size` bytes (at least the envelope):
/// `params.data` is `{"seq": seq, "pad": "xxx…"}`.
pub(crate) fn padded_notification(logger: &str, seq: u64, size: usize) -> String {
    let head = format!(
        r#"{{"jsonrpc":"2.0","method":"notifications/message","params":{{"level":"debug","logger":"{logger}","data":{{"seq":{seq},"pad":""#
    );
    let tail = r#""}}}"#;
    let pad = size.saturating_sub(head.len() + tail.len());
    let mut s = String::with_capacity(head.len() + pad + tail.len());
    s.push_str(&head);
    s.extend(std::iter::repeat_n('x', pad));
    s.push_str(tail);
    s
}

/// One notification of a `flood`.
pub(crate) fn flood_notification(seq: u64, size: usize) -> String {
    padded_notification("flood", seq, size)
}

/// The standalone timer notification for a session.
pub(crate) fn timer_notification(session_id: &str) -> String {
    json!({
        "jsonrpc": "2.0",
        "method": "notifications/message",
        "params": {"level": "info", "logger": "timer", "data": {"timer": true, "session": session_id}}
    })
    .to_string()
}

pub(crate) fn tool_name(params: Option<&Value>) -> Option<&str> {
    params?.get("name")?.as_str()
}

/// Whether a request's answer is sent as an SSE stream over HTTP (it has
/// related messages, takes time, or may never come).
pub(crate) fn streams(method: &str, params: Option<&Value>) -> bool {
    method == "tools/call"
        && matches!(
            tool_name(params),
            Some("notify" | "sample" | "roots" | "slow" | "hang" | "garbage" | "flood")
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

/// What a server-to-client request waits for.
enum Waiter {
    /// An in-flight call (`sample`, `roots`) awaits the answer.
    Call(oneshot::Sender<Result<Value, Value>>),
    /// Nobody waits (`sample_async`): the answer is recorded in the stats.
    Record,
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
         "inputSchema": obj(json!({}), &[])},
        {"name": "sample_async", "description": "Answers \"queued\", then asks the client to sample on the standalone stream; the answer is recorded in the stats.",
         "inputSchema": obj(json!({"prompt": {"type": "string"}}), &["prompt"])},
        {"name": "roots", "description": "Asks the client for its roots (roots/list) and returns their URIs joined by \",\".",
         "inputSchema": obj(json!({}), &[])},
        {"name": "touch", "description": "Sends notifications/resources/updated for uri to every session subscribed to it.",
         "inputSchema": obj(json!({"uri": {"type": "string"}}), &["uri"])},
        {"name": "flood", "description": "Fault: sends count notifications of about size bytes on the standalone channel (GET stream / stdout) as fast as they are read, then answers; with background, answers first and floods after.",
         "inputSchema": obj(json!({"count": {"type": "integer"}, "size": {"type": "integer"},
                                   "background": {"type": "boolean"}}), &["count"])},
        {"name": "garbage", "description": "Fault: sends one bad message related to the call (invalid: not JSON; not_jsonrpc: JSON that is not JSON-RPC; huge: a notification of mib MiB, default 10; binary: a stdout line that is not UTF-8, stdio only), then answers.",
         "inputSchema": obj(json!({"kind": {"type": "string", "enum": ["invalid", "not_jsonrpc", "huge", "binary"]},
                                   "mib": {"type": "integer"}}), &["kind"])},
        {"name": "close_early", "description": "Fault (HTTP): starts an SSE answer, sends events notifications (default 1) without event ids, and ends the stream cleanly without a response.",
         "inputSchema": obj(json!({"events": {"type": "integer"}}), &[])},
        {"name": "stats", "description": "Returns this server's counters (the testkit's Stats) as JSON text.",
         "inputSchema": obj(json!({}), &[])}
    ]})
});

/// The MCP state of one session (one HTTP `Mcp-Session-Id`, or one stdio process).
pub(crate) struct McpSession {
    id: String,
    stats: Arc<StatsCell>,
    next_server_id: AtomicU64,
    /// Server-to-client requests awaiting the client's response, by id.
    pending: Mutex<HashMap<String, Waiter>>,
    /// Cancellable in-flight client requests, by [`id_key`].
    inflight: Mutex<HashMap<String, CancellationToken>>,
    ended: CancellationToken,
    /// This session's standalone channel.
    standalone: Standalone,
    /// The server's resource subscriptions (shared by all its sessions).
    subscriptions: Arc<Subscriptions>,
    /// Standalone messages to send once the current request's answer is out.
    deferred: Mutex<Vec<(Standalone, String)>>,
    /// Background work to start once the current request's answer is out
    /// (`flood` with `background`).
    deferred_work: Mutex<Vec<BoxFuture<'static, u64>>>,
    /// The transport's hooks for fault tools, if it has them.
    hooks: Option<Arc<dyn FaultHooks>>,
}

impl std::fmt::Debug for McpSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpSession")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

impl McpSession {
    /// A fresh session whose standalone messages go to `standalone`.
    pub(crate) fn new(
        id: String,
        stats: Arc<StatsCell>,
        standalone: Standalone,
        subscriptions: Arc<Subscriptions>,
    ) -> Self {
        Self {
            id,
            stats,
            next_server_id: AtomicU64::new(1),
            pending: Mutex::new(HashMap::new()),
            inflight: Mutex::new(HashMap::new()),
            ended: CancellationToken::new(),
            standalone,
            subscriptions,
            deferred: Mutex::new(Vec::new()),
            deferred_work: Mutex::new(Vec::new()),
            hooks: None,
        }
    }

    /// Gives the session its transport's hooks for the fault tools.
    pub(crate) fn with_hooks(mut self, hooks: Arc<dyn FaultHooks>) -> Self {
        self.hooks = Some(hooks);
        self
    }

    /// Sends the standalone messages queued by requests handled so far
    /// (`sample_async`, `touch`); transports call this after delivering an answer.
    pub(crate) fn send_deferred(&self) {
        let deferred = std::mem::take(&mut *lock(&self.deferred));
        for (channel, msg) in deferred {
            // Undelivered standalone messages are the transport's to count or log.
            let _ = channel(msg);
        }
        let work = std::mem::take(&mut *lock(&self.deferred_work));
        for w in work {
            let ended = self.ended.clone();
            tokio::spawn(async move {
                tokio::select! {
                    () = ended.cancelled() => {}
                    _ = w => {}
                }
            });
        }
    }

    fn next_request_id(&self) -> String {
        format!("s-{}", self.next_server_id.fetch_add(1, Ordering::Relaxed))
    }

    /// This session's id.
    pub(crate) fn id(&self) -> &str {
        &self.id
    }

    /// Ends the session: hanging calls and sampling waits finish without answering.
    pub(crate) fn end(&self) {
        self.ended.cancel();
        lock(&self.pending).clear();
        lock(&self.deferred).clear();
        lock(&self.deferred_work).clear();
        self.subscriptions.forget(&self.id);
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
        let Some(waiter) = lock(&self.pending).remove(&key) else {
            return;
        };
        let answer = match (result, error) {
            (Some(r), _) => Ok(r),
            (None, e) => Err(e.unwrap_or(Value::Null)),
        };
        match waiter {
            // The waiter may have been cancelled meanwhile; nothing to do then.
            Waiter::Call(tx) => {
                let _ = tx.send(answer);
            }
            Waiter::Record => self.stats.record_sampled(match answer {
                Ok(r) => match r.pointer("/content/text").and_then(Value::as_str) {
                    Some(text) => text.to_owned(),
                    None => "<no text>".to_owned(),
                },
                Err(e) => format!("error: {e}"),
            }),
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
            "ping" | "logging/setLevel" => Done::Ok(json!({})),
            "resources/subscribe" | "resources/unsubscribe" => {
                match params
                    .as_ref()
                    .and_then(|p| p.get("uri"))
                    .and_then(Value::as_str)
                {
                    Some(uri) if method == "resources/subscribe" => {
                        let channel = Arc::clone(&self.standalone);
                        self.subscriptions.subscribe(uri, &self.id, channel);
                        Done::Ok(json!({}))
                    }
                    Some(uri) => {
                        self.subscriptions.unsubscribe(uri, &self.id);
                        Done::Ok(json!({}))
                    }
                    None => invalid(format!("{method} needs a string `uri`")),
                }
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
            "sample_async" => match str_arg("prompt") {
                Some(prompt) => {
                    let sid = self.next_request_id();
                    lock(&self.pending).insert(sid.clone(), Waiter::Record);
                    let request = sampling_request(&sid, prompt);
                    let channel = Arc::clone(&self.standalone);
                    lock(&self.deferred).push((channel, request));
                    Done::Ok(text_result("queued"))
                }
                None => invalid("sample_async needs a string `prompt`"),
            },
            "roots" => self.cancellable(id, self.roots(out)).await,
            "touch" => match str_arg("uri") {
                Some(uri) => {
                    let note =
                        json!({"jsonrpc": "2.0", "method": "notifications/resources/updated",
                        "params": {"uri": uri}})
                        .to_string();
                    let subscribers = self.subscriptions.subscribers(uri);
                    let n = subscribers.len();
                    lock(&self.deferred).extend(subscribers.into_iter().map(|c| (c, note.clone())));
                    Done::Ok(text_result(format!("notified {n}")))
                }
                None => invalid("touch needs a string `uri`"),
            },
            "flood" => match u64_arg("count") {
                Some(count) => {
                    let size =
                        usize::try_from(u64_arg("size").unwrap_or(1024)).unwrap_or(usize::MAX);
                    let background = args
                        .get("background")
                        .and_then(Value::as_bool)
                        .unwrap_or(false);
                    self.flood(id, count, size, background).await
                }
                None => invalid("flood needs an integer `count`"),
            },
            "garbage" => match str_arg("kind") {
                Some(kind) => {
                    let mib = usize::try_from(u64_arg("mib").unwrap_or(10)).unwrap_or(10);
                    self.garbage(kind, mib, out)
                }
                None => invalid("garbage needs a string `kind`"),
            },
            // The HTTP transport answers it itself, before it gets here.
            "close_early" => tool_error("close_early only applies over HTTP"),
            "stats" => Done::Ok(text_result(
                serde_json::to_string(&self.stats.snapshot()).unwrap_or_default(),
            )),
            other => invalid(format!("unknown tool: {other}")),
        }
    }

    async fn flood(&self, id: &Value, count: u64, size: usize, background: bool) -> Done {
        let Some(hooks) = self.hooks.clone() else {
            return tool_error("flood is not supported by this transport");
        };
        if background {
            lock(&self.deferred_work).push(hooks.flood(count, size));
            return Done::Ok(text_result(format!("flooding {count}")));
        }
        self.cancellable(id, async move {
            let sent = hooks.flood(count, size).await;
            Done::Ok(text_result(format!("flooded {sent}/{count}")))
        })
        .await
    }

    fn garbage(&self, kind: &str, mib: usize, out: Option<&Outbound>) -> Done {
        let Some(out) = out else {
            return Done::Err(INVALID_REQUEST, "no channel for related messages".into());
        };
        let line = match kind {
            "invalid" => "this is not JSON {".to_owned(),
            "not_jsonrpc" => r#"{"hello":"this is JSON but not JSON-RPC"}"#.to_owned(),
            "huge" => padded_notification("garbage", 0, mib.saturating_mul(1024 * 1024)),
            "binary" => {
                return match &self.hooks {
                    Some(h) if h.binary_line() => Done::Ok(text_result("garbage binary sent")),
                    _ => tool_error("binary garbage is not supported by this transport"),
                };
            }
            other => return invalid(format!("unknown garbage kind: {other}")),
        };
        // A closed channel means the client went away; the answer is moot then.
        let _ = out.send(line);
        Done::Ok(text_result(format!("garbage {kind} sent")))
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

    /// Sends a server-to-client request on `out` and waits for the client's
    /// answer; `Err(done)` when it cannot be asked or the session ended.
    async fn ask(
        &self,
        out: Option<&Outbound>,
        request: impl FnOnce(&str) -> String,
    ) -> Result<Result<Value, Value>, Done> {
        let Some(out) = out else {
            return Err(Done::Err(
                INVALID_REQUEST,
                "no channel for server-to-client requests".into(),
            ));
        };
        let sid = self.next_request_id();
        let (tx, rx) = oneshot::channel();
        lock(&self.pending).insert(sid.clone(), Waiter::Call(tx));
        let _registered = Registered {
            map: &self.pending,
            key: sid.clone(),
        };
        if out.send(request(&sid)).is_err() {
            return Err(Done::Silent);
        }
        // An error here means the session ended while waiting.
        rx.await.map_err(|_| Done::Silent)
    }

    async fn sample(&self, prompt: &str, out: Option<&Outbound>) -> Done {
        match self.ask(out, |sid| sampling_request(sid, prompt)).await {
            Ok(Ok(result)) => match result.pointer("/content/text").and_then(Value::as_str) {
                Some(text) => Done::Ok(text_result(text)),
                None => tool_error("sampling result had no content.text"),
            },
            Ok(Err(error)) => tool_error(format!("sampling failed: {error}")),
            Err(done) => done,
        }
    }

    async fn roots(&self, out: Option<&Outbound>) -> Done {
        let request =
            |sid: &str| json!({"jsonrpc": "2.0", "id": sid, "method": "roots/list"}).to_string();
        match self.ask(out, request).await {
            Ok(Ok(result)) => match result.get("roots").and_then(Value::as_array) {
                Some(roots) => {
                    let uris: Vec<&str> = roots
                        .iter()
                        .filter_map(|r| r.get("uri").and_then(Value::as_str))
                        .collect();
                    Done::Ok(text_result(uris.join(",")))
                }
                None => tool_error("roots/list result had no roots array"),
            },
            Ok(Err(error)) => tool_error(format!("roots/list failed: {error}")),
            Err(done) => done,
        }
    }
}

fn tool_error(text: impl Into<String>) -> Done {
    Done::Ok(json!({"content": [{"type": "text", "text": text.into()}], "isError": true}))
}

/// A serialized `sampling/createMessage` request with server request id `sid`.
fn sampling_request(sid: &str, prompt: &str) -> String {
    json!({
        "jsonrpc": "2.0", "id": sid, "method": "sampling/createMessage",
        "params": {"messages": [{"role": "user", "content": {"type": "text", "text": prompt}}],
                   "maxTokens": 16}
    })
    .to_string()
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
        McpSession::new(
            "sid".into(),
            Arc::default(),
            Arc::new(|_| false),
            Arc::default(),
        )
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
        assert_eq!(r["result"]["tools"].as_array().map(Vec::len), Some(15));
        let r = call(
            &s,
            "prompts/get",
            json!({"name": "greet", "arguments": {"name": "Ann"}}),
        )
        .await;
        assert_eq!(r["result"]["messages"][0]["content"]["text"], "Hello, Ann!");
    }
}
