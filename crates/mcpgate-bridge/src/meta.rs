//! What a 2026-07-28 request declares per request, and the session-era messages the
//! gateway sends on its behalf.

use bytes::Bytes;
use mcpgate_jsonrpc::modern::{META_CLIENT_CAPABILITIES, META_CLIENT_INFO, META_LOG_LEVEL};
use mcpgate_jsonrpc::{Message, Method, mcp};
use serde_json::{Map, Value, json};

use crate::error::BridgeError;

/// The prefix of the `_meta` keys MCP reserves for itself (the per-request envelope).
const RESERVED: &str = "io.modelcontextprotocol/";

/// The per-request state of a 2026-07-28 request that a session-era server keeps per
/// session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientMeta {
    /// `_meta[clientCapabilities]` as canonical JSON text (`{}` when absent): the
    /// pooled session's `initialize` declares exactly these, so it is part of the pool key.
    pub capabilities: String,
    /// `_meta[clientInfo]` as JSON text, when present.
    pub client_info: Option<String>,
    /// `_meta[logLevel]`, when present (absent: the client wants no log messages).
    pub log_level: Option<String>,
}

/// A 2026-07-28 request for a session-era server, parsed once: what it declares, what
/// identifies it, whether it is a retry, and its session-era form all come from here.
#[derive(Debug, Clone)]
pub struct Request(Value);

impl Request {
    /// Parses `msg` (a request that passed the 2026-07-28 header check); a body that is
    /// not a JSON object declares nothing.
    pub fn of(msg: &Message) -> Request {
        Request(serde_json::from_slice(msg.raw()).unwrap_or(Value::Null))
    }

    /// Its per-request declarations.
    pub fn meta(&self) -> ClientMeta {
        let meta = self.0.pointer("/params/_meta");
        let get = |k: &str| meta.and_then(|m| m.get(k));
        ClientMeta {
            // serde_json's map is ordered by key: the text is canonical.
            capabilities: get(META_CLIENT_CAPABILITIES)
                .filter(|c| c.is_object())
                .map_or_else(|| "{}".to_owned(), Value::to_string),
            client_info: get(META_CLIENT_INFO)
                .filter(|c| c.is_object())
                .map(Value::to_string),
            log_level: get(META_LOG_LEVEL)
                .and_then(Value::as_str)
                .map(str::to_owned),
        }
    }

    /// `params.requestState` and `params.inputResponses`, when it retries a call that got
    /// `input_required`.
    pub fn retry(&self) -> Option<(String, Map<String, Value>)> {
        let p = self.0.get("params")?;
        let state = p.get("requestState")?.as_str()?.to_owned();
        let responses = p
            .get("inputResponses")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        Some((state, responses))
    }

    /// What identifies the call beyond its method: its parameters without `_meta` and the
    /// retry's own (`inputResponses`, `requestState`), as canonical JSON. A retry after
    /// `input_required` must carry the same.
    pub fn fingerprint(&self) -> String {
        let mut p = self
            .0
            .get("params")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        for k in ["_meta", "inputResponses", "requestState"] {
            p.remove(k);
        }
        Value::Object(p).to_string()
    }

    /// The request as the session era sends it: the reserved `_meta` keys (version,
    /// capabilities, client info, log level — session state there) and a retry's
    /// `inputResponses`/`requestState` removed, `_meta` dropped when nothing else is in
    /// it; id, method and every other parameter unchanged.
    pub fn to_session(&self) -> Result<Message, BridgeError> {
        let mut v = self.0.clone();
        if let Some(params) = v.get_mut("params").and_then(Value::as_object_mut) {
            strip_reserved(params);
            // A retry's own parameters mean nothing in the session era.
            params.remove("inputResponses");
            params.remove("requestState");
        }
        Ok(Message::parse(Bytes::from(v.to_string()))?)
    }
}

/// The `initialize` request that opens a pooled session for a client with `meta`.
pub fn initialize(id: &str, meta: &ClientMeta) -> Bytes {
    let caps: Value = serde_json::from_str(&meta.capabilities).unwrap_or_else(|_| json!({}));
    let info: Value = meta
        .client_info
        .as_deref()
        .and_then(|s| serde_json::from_str(s).ok())
        .unwrap_or_else(|| json!({"name": "mcpgate-bridge", "version": env!("CARGO_PKG_VERSION")}));
    let msg = json!({
        "jsonrpc": "2.0",
        "id": id,
        "method": Method::Initialize.as_str(),
        "params": {
            "protocolVersion": mcp::LATEST_SESSION_VERSION,
            "capabilities": caps,
            "clientInfo": info,
        },
    });
    Bytes::from(msg.to_string())
}

/// `notifications/initialized`.
pub fn initialized() -> Bytes {
    let msg = json!({"jsonrpc": "2.0", "method": Method::Initialized.as_str()});
    Bytes::from(msg.to_string())
}

/// `logging/setLevel` to `level`.
pub fn set_level(id: &str, level: &str) -> Bytes {
    let msg = json!({"jsonrpc": "2.0", "id": id, "method": Method::SetLevel.as_str(), "params": {"level": level}});
    Bytes::from(msg.to_string())
}

fn strip_reserved(params: &mut Map<String, Value>) {
    let empty = match params.get_mut("_meta").and_then(Value::as_object_mut) {
        Some(meta) => {
            meta.retain(|k, _| !k.starts_with(RESERVED));
            meta.is_empty()
        }
        None => false,
    };
    if empty {
        params.remove("_meta");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::msg;

    #[test]
    fn meta_is_read_and_canonical() {
        let m = msg(
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"sampling":{},"elicitation":{"form":{}}},"io.modelcontextprotocol/clientInfo":{"name":"c","version":"1"},"io.modelcontextprotocol/logLevel":"debug"}}}"#,
        );
        let a = Request::of(&m).meta();
        assert_eq!(
            a.capabilities,
            r#"{"elicitation":{"form":{}},"sampling":{}}"#
        );
        assert_eq!(
            a.client_info.as_deref(),
            Some(r#"{"name":"c","version":"1"}"#)
        );
        assert_eq!(a.log_level.as_deref(), Some("debug"));
        let none = Request::of(&msg(r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#)).meta();
        assert_eq!(none.capabilities, "{}");
        assert_eq!(none.log_level, None);
    }

    #[test]
    fn reserved_keys_are_removed_and_the_rest_kept() {
        let m = msg(
            r#"{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{"name":"x","arguments":{"k":1},"_meta":{"progressToken":7,"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}"#,
        );
        let s = Request::of(&m).to_session().unwrap();
        let v: Value = serde_json::from_slice(s.raw()).unwrap();
        assert_eq!(v["params"]["_meta"], json!({"progressToken": 7}));
        assert_eq!(v["params"]["arguments"], json!({"k": 1}));
        assert_eq!(s.id(), m.id());
        let bare = Request::of(&msg(
            r#"{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}"#,
        ))
        .to_session()
        .unwrap();
        let v: Value = serde_json::from_slice(bare.raw()).unwrap();
        assert_eq!(v["params"], json!({}));
    }

    #[test]
    fn a_retry_has_the_fingerprint_of_its_call() {
        let call = msg(
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","arguments":{"a":1},"_meta":{"progressToken":1}}}"#,
        );
        let retry = msg(
            r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"arguments":{"a":1},"name":"x","inputResponses":{"k":{}},"requestState":"s","_meta":{}}}"#,
        );
        let other = msg(
            r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"y","arguments":{"a":1}}}"#,
        );
        assert_eq!(
            Request::of(&call).fingerprint(),
            Request::of(&retry).fingerprint()
        );
        assert_ne!(
            Request::of(&call).fingerprint(),
            Request::of(&other).fingerprint()
        );
    }

    #[test]
    fn initialize_declares_the_clients_capabilities() {
        let meta = ClientMeta {
            capabilities: r#"{"sampling":{}}"#.into(),
            client_info: None,
            log_level: None,
        };
        let v: Value = serde_json::from_slice(&initialize("init", &meta)).unwrap();
        assert_eq!(v["params"]["capabilities"], json!({"sampling": {}}));
        assert_eq!(v["params"]["protocolVersion"], mcp::LATEST_SESSION_VERSION);
        assert_eq!(v["params"]["clientInfo"]["name"], "mcpgate-bridge");
    }
}
