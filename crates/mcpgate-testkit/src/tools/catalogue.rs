//! What the testkit offers: the protocol versions it speaks, its tool list, resource and
//! prompt, the shape of tool results (text, tool errors) and the request results
//! ([`Done`]) the session turns into JSON-RPC answers.

use std::sync::LazyLock;

use serde_json::{Value, json};

use crate::rpc::INVALID_PARAMS;

/// Protocol versions the testkit speaks.
pub(crate) const SUPPORTED_VERSIONS: [&str; 4] =
    ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"];
/// The version answered when the client asks for one we do not know.
pub(crate) const LATEST_VERSION: &str = "2025-11-25";

const RESOURCE_NOT_FOUND: i64 = -32002;

/// The `name` of a `tools/call`.
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

/// What handling a request came to, before it is framed as a JSON-RPC answer.
pub(super) enum Done {
    /// A result.
    Ok(Value),
    /// A JSON-RPC error: code and message.
    Err(i64, String),
    /// No answer (cancelled, or the session ended).
    Silent,
    /// The server dies without answering.
    Die,
}

/// An invalid-params error.
pub(super) fn invalid(msg: impl Into<String>) -> Done {
    Done::Err(INVALID_PARAMS, msg.into())
}

/// A tool result with one text item.
pub(super) fn text_result(text: impl Into<String>) -> Value {
    json!({"content": [{"type": "text", "text": text.into()}]})
}

/// A tool result that reports an error (`isError`).
pub(super) fn tool_error(text: impl Into<String>) -> Done {
    Done::Ok(json!({"content": [{"type": "text", "text": text.into()}], "isError": true}))
}

/// The `tools/list` result.
pub(super) static TOOLS: LazyLock<Value> = LazyLock::new(|| {
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
        {"name": "count", "description": "Counts this session's calls of it: 1, 2, 3, …",
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

/// The `initialize` result: the asked version if spoken, else the latest.
pub(super) fn initialize_result(params: Option<&Value>) -> Value {
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

/// `resources/read`: the one static resource.
pub(super) fn read_resource(params: Option<&Value>) -> Done {
    match params.and_then(|p| p.get("uri")).and_then(Value::as_str) {
        Some(uri @ "test://static") => Done::Ok(json!({"contents": [
            {"uri": uri, "mimeType": "text/plain", "text": "hello"}
        ]})),
        Some(uri) => Done::Err(RESOURCE_NOT_FOUND, format!("resource not found: {uri}")),
        None => invalid("resources/read needs a `uri`"),
    }
}

/// `prompts/get`: the one prompt, `greet`.
pub(super) fn get_prompt(params: Option<&Value>) -> Done {
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
