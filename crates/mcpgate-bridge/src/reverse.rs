//! The other way round: a session-era client of a server that speaks only 2026-07-28. The
//! gateway holds the client's session and its state (declared capabilities, client info,
//! log level); every request goes upstream on its own with the `_meta` the revision needs.

use bytes::Bytes;
use mcpgate_jsonrpc::modern::{
    META_CLIENT_CAPABILITIES, META_CLIENT_INFO, META_LOG_LEVEL, META_PROTOCOL_VERSION,
};
use mcpgate_jsonrpc::{Id, Message, Method, mcp};
use serde_json::{Map, Value, json};

use crate::error::BridgeError;

/// What a session-era session declared once and a 2026-07-28 server needs on every
/// request.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SessionState {
    /// `initialize`'s `capabilities`.
    pub capabilities: Value,
    /// `initialize`'s `clientInfo`.
    pub client_info: Value,
    /// The version the client asked for in `initialize`.
    pub version: String,
    /// The level last set with `logging/setLevel` (none: no log messages).
    pub log_level: Option<String>,
}

impl SessionState {
    /// The state an `initialize` request declares.
    pub fn from_initialize(init: &Message) -> SessionState {
        let v: Value = serde_json::from_slice(init.raw()).unwrap_or(Value::Null);
        let p = v.get("params");
        SessionState {
            capabilities: p
                .and_then(|p| p.get("capabilities"))
                .filter(|c| c.is_object())
                .cloned()
                .unwrap_or_else(|| json!({})),
            client_info: p
                .and_then(|p| p.get("clientInfo"))
                .filter(|c| c.is_object())
                .cloned()
                .unwrap_or_else(|| json!({"name": "unknown", "version": "0"})),
            version: p
                .and_then(|p| p.get("protocolVersion"))
                .and_then(Value::as_str)
                .unwrap_or(mcp::LATEST_SESSION_VERSION)
                .to_owned(),
            log_level: None,
        }
    }

    fn meta(&self) -> Map<String, Value> {
        let mut m = Map::new();
        m.insert(
            META_PROTOCOL_VERSION.into(),
            json!(mcp::MODERN_PROTOCOL_VERSION),
        );
        m.insert(META_CLIENT_CAPABILITIES.into(), self.capabilities.clone());
        m.insert(META_CLIENT_INFO.into(), self.client_info.clone());
        if let Some(l) = &self.log_level {
            m.insert(META_LOG_LEVEL.into(), json!(l));
        }
        m
    }
}

/// The `server/discover` the gateway sends for a client's `initialize`.
pub fn discover_request(id: &str, state: &SessionState) -> Bytes {
    let out = json!({"jsonrpc": "2.0", "id": id, "method": Method::Discover.as_str(),
        "params": {"_meta": state.meta()}});
    Bytes::from(out.to_string())
}

/// The `InitializeResult` for the client's `initialize` (`init`), from the upstream's
/// answer to `server/discover`: the client's version when the gateway speaks it (else the
/// latest session-era one), the server's capabilities, `serverInfo` and instructions.
pub fn initialize_result(init: &Message, discover: &Message) -> Result<Bytes, BridgeError> {
    let r = crate::answer::result_of(discover)?;
    let r = &r;
    let asked = SessionState::from_initialize(init).version;
    let version = if mcp::is_session_version(&asked) {
        asked
    } else {
        mcp::LATEST_SESSION_VERSION.to_owned()
    };
    let info = r
        .pointer("/_meta/io.modelcontextprotocol~1serverInfo")
        .cloned()
        .unwrap_or_else(|| json!({"name": "unknown", "version": "0"}));
    let mut out = json!({
        "protocolVersion": version,
        "capabilities": r.get("capabilities").cloned().unwrap_or_else(|| json!({})),
        "serverInfo": info,
    });
    if let Some(i) = r.get("instructions").filter(|i| i.is_string()) {
        out["instructions"] = i.clone();
    }
    Ok(mcpgate_jsonrpc::result_body(init.id(), &out.to_string()))
}

/// A session-era request as a 2026-07-28 one: the envelope added to `params._meta`; with
/// the `Mcp-Name` value for the methods that mirror one.
pub fn to_modern_request(
    msg: &Message,
    state: &SessionState,
) -> Result<(Bytes, Option<String>), BridgeError> {
    let mut v: Value = serde_json::from_slice(msg.raw())?;
    let obj = v
        .as_object_mut()
        .ok_or(BridgeError::NotAnObject("message"))?;
    let params = obj.entry("params").or_insert_with(|| json!({}));
    let p = params
        .as_object_mut()
        .ok_or(BridgeError::NotAnObject("params"))?;
    let meta = p.entry("_meta").or_insert_with(|| json!({}));
    if let Some(m) = meta.as_object_mut() {
        m.extend(state.meta());
    }
    let name = msg
        .method()
        .and_then(Method::name_field)
        .and_then(|f| p.get(f))
        .and_then(Value::as_str)
        .map(str::to_owned);
    Ok((Bytes::from(v.to_string()), name))
}

/// What an `input_required` result asks: its input requests by key and its
/// `requestState`.
#[derive(Debug, Clone, PartialEq)]
pub struct Asked {
    /// `inputRequests`: key → `{method, params}`.
    pub requests: Vec<(String, Value)>,
    /// `requestState`, echoed on the retry.
    pub state: Option<String>,
}

/// The questions of an upstream answer, when it is an `input_required` result.
pub fn asked(answer: &Message) -> Option<Asked> {
    let v: Value = serde_json::from_slice(answer.raw()).ok()?;
    let r = v.get("result")?;
    if r.get("resultType").and_then(Value::as_str) != Some("input_required") {
        return None;
    }
    let requests = r
        .get("inputRequests")
        .and_then(Value::as_object)
        .map(|m| m.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
        .unwrap_or_default();
    Some(Asked {
        requests,
        state: r
            .get("requestState")
            .and_then(Value::as_str)
            .map(str::to_owned),
    })
}

/// One input request as a server-to-client request with id `id`.
pub fn server_request(id: &str, ask: &Value) -> Bytes {
    let mut out = json!({"jsonrpc": "2.0", "id": id, "method": ask.get("method").cloned().unwrap_or(Value::Null)});
    if let Some(p) = ask.get("params") {
        out["params"] = p.clone();
    }
    Bytes::from(out.to_string())
}

/// The retry of `original` (a 2026-07-28 request body) under id `id`, with the client's
/// answers and the server's `requestState`.
pub fn retry(
    original: &[u8],
    id: &Id,
    responses: Map<String, Value>,
    state: Option<&str>,
) -> Result<Bytes, BridgeError> {
    let mut v: Value = serde_json::from_slice(original)?;
    v["id"] = serde_json::from_str(id.as_raw())?;
    let p = v
        .get_mut("params")
        .and_then(Value::as_object_mut)
        .ok_or(BridgeError::NotAnObject("params"))?;
    p.insert("inputResponses".into(), Value::Object(responses));
    match state {
        Some(s) => p.insert("requestState".into(), json!(s)),
        None => p.remove("requestState"),
    };
    Ok(Bytes::from(v.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::msg;

    #[test]
    fn initialize_from_discover_and_requests_with_the_envelope() {
        let init = msg(
            r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{"elicitation":{}},"clientInfo":{"name":"c","version":"1"}}}"#,
        );
        let mut st = SessionState::from_initialize(&init);
        let d: Value = serde_json::from_slice(&discover_request("d", &st)).unwrap();
        assert_eq!(
            d["params"]["_meta"][META_CLIENT_CAPABILITIES],
            json!({"elicitation": {}})
        );
        let disc = msg(
            r#"{"jsonrpc":"2.0","id":"d","result":{"resultType":"complete","supportedVersions":["2026-07-28"],"capabilities":{"tools":{}},"ttlMs":0,"cacheScope":"private","_meta":{"io.modelcontextprotocol/serverInfo":{"name":"s","version":"2"}}}}"#,
        );
        let r: Value = serde_json::from_slice(&initialize_result(&init, &disc).unwrap()).unwrap();
        assert_eq!(r["id"], 0);
        assert_eq!(r["result"]["protocolVersion"], "2025-06-18");
        assert_eq!(r["result"]["serverInfo"]["name"], "s");
        assert_eq!(r["result"]["capabilities"], json!({"tools": {}}));
        st.log_level = Some("debug".into());
        let call = msg(
            r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","arguments":{},"_meta":{"progressToken":1}}}"#,
        );
        let (b, name) = to_modern_request(&call, &st).unwrap();
        let v: Value = serde_json::from_slice(&b).unwrap();
        assert_eq!(name.as_deref(), Some("echo"));
        assert_eq!(v["params"]["_meta"]["progressToken"], 1);
        assert_eq!(v["params"]["_meta"][META_PROTOCOL_VERSION], "2026-07-28");
        assert_eq!(v["params"]["_meta"][META_LOG_LEVEL], "debug");
    }

    #[test]
    fn input_required_becomes_questions_and_a_retry() {
        let a = msg(
            r#"{"jsonrpc":"2.0","id":3,"result":{"resultType":"input_required","inputRequests":{"k":{"method":"elicitation/create","params":{"message":"?"}}},"requestState":"s1"}}"#,
        );
        let asked = asked(&a).unwrap();
        assert_eq!(asked.state.as_deref(), Some("s1"));
        let q: Value = serde_json::from_slice(&server_request("q1", &asked.requests[0].1)).unwrap();
        assert_eq!(
            q,
            json!({"jsonrpc": "2.0", "id": "q1", "method": "elicitation/create", "params": {"message": "?"}})
        );
        let mut answers = Map::new();
        answers.insert("k".into(), json!({"action": "accept"}));
        let r: Value = serde_json::from_slice(
            &retry(
                br#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"x"}}"#,
                &Id::from_raw("\"r1\"").unwrap(),
                answers,
                asked.state.as_deref(),
            )
            .unwrap(),
        )
        .unwrap();
        assert_eq!(r["id"], "r1");
        assert_eq!(r["params"]["inputResponses"]["k"]["action"], "accept");
        assert_eq!(r["params"]["requestState"], "s1");
        assert!(asked_none());
    }

    fn asked_none() -> bool {
        asked(&msg(r#"{"jsonrpc":"2.0","id":3,"result":{"content":[]}}"#)).is_none()
    }
}
