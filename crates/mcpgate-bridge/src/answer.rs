//! Answers in the client's revision: `server/discover` from the upstream's
//! `InitializeResult`, and upstream responses as 2026-07-28 expects them.

use bytes::Bytes;
use mcpgate_jsonrpc::modern::META_PROTOCOL_VERSION;
use mcpgate_jsonrpc::{Id, Message, Method, mcp};
use serde_json::{Value, json};

use crate::error::BridgeError;

/// The `result` of an answer; its error's message when it has none.
pub(crate) fn result_of(answer: &Message) -> Result<Value, BridgeError> {
    let mut v: Value = serde_json::from_slice(answer.raw())?;
    match v.get_mut("result").map(Value::take) {
        Some(r) => Ok(r),
        None => {
            let why = v
                .pointer("/error/message")
                .and_then(Value::as_str)
                .unwrap_or("no result");
            Err(BridgeError::Refused {
                message: why.to_owned(),
            })
        }
    }
}

/// `_meta` key of the server's self-description on every 2026-07-28 result.
const META_SERVER_INFO: &str = "io.modelcontextprotocol/serverInfo";
/// Resource not found: its own code in the session era, `-32602` in 2026-07-28.
const SESSION_RESOURCE_NOT_FOUND: i64 = -32002;
/// Whether complete results of `method` carry `ttlMs` and `cacheScope` in 2026-07-28.
fn cacheable(method: &Method) -> bool {
    matches!(
        method,
        Method::ToolsList
            | Method::PromptsList
            | Method::ResourcesList
            | Method::ResourceTemplatesList
            | Method::ResourcesRead
    )
}

/// The answer to `server/discover` (request id `id`), from `init`, the upstream's answer
/// to the pooled session's `initialize`: the upstream's capabilities (list changes and
/// resource updates reach the client through a bridged `subscriptions/listen`);
/// `ttlMs: 0` and `cacheScope: "private"`, because it was learned on one principal's
/// session.
pub fn discover(id: &Id, init: &Message) -> Result<Bytes, BridgeError> {
    let v = result_of(init)?;
    let result = &v;
    let caps = result
        .get("capabilities")
        .cloned()
        .unwrap_or_else(|| json!({}));
    let mut out = json!({
        "resultType": "complete",
        "supportedVersions": [mcp::MODERN_PROTOCOL_VERSION],
        "capabilities": caps,
        "ttlMs": 0,
        "cacheScope": "private",
    });
    if let Some(i) = result.get("instructions").filter(|i| i.is_string()) {
        out["instructions"] = i.clone();
    }
    if let Some(info) = result.get("serverInfo") {
        out["_meta"] = json!({ META_SERVER_INFO: info });
    }
    Ok(mcpgate_jsonrpc::result_body(Some(id), &out.to_string()))
}

/// The `serverInfo` of an `initialize` answer, for [`to_modern_answer`].
pub fn server_info(init: &Message) -> Option<Value> {
    let v: Value = serde_json::from_slice(init.raw()).ok()?;
    v.pointer("/result/serverInfo").cloned()
}

/// An upstream response as a 2026-07-28 client expects it: a result gains
/// `resultType: "complete"` (when it has none) and `_meta.serverInfo`; an error whose code
/// the revision renamed gets the new one (resource not found → `-32602`). The answers the
/// revision makes cacheable (`method` a list or `resources/read`) gain `ttlMs: 0` and
/// `cacheScope: "private"` — a session-era server says nothing about caching, so nothing
/// may be cached. A message that is not a JSON object is passed on unchanged.
pub fn to_modern_answer(msg: &Message, method: &Method, server_info: Option<&Value>) -> Bytes {
    let Ok(mut v) = serde_json::from_slice::<Value>(msg.raw()) else {
        return msg.raw().clone();
    };
    if let Some(r) = v.get_mut("result").and_then(Value::as_object_mut) {
        r.entry("resultType").or_insert_with(|| json!("complete"));
        if cacheable(method) {
            r.entry("ttlMs").or_insert_with(|| json!(0));
            r.entry("cacheScope").or_insert_with(|| json!("private"));
        }
        if let Some(info) = server_info {
            let meta = r.entry("_meta").or_insert_with(|| json!({}));
            if let Some(m) = meta.as_object_mut() {
                m.entry(META_SERVER_INFO).or_insert_with(|| info.clone());
                m.remove(META_PROTOCOL_VERSION);
            }
        }
    } else if let Some(code) = v.pointer_mut("/error/code")
        && code.as_i64() == Some(SESSION_RESOURCE_NOT_FOUND)
    {
        *code = json!(mcpgate_jsonrpc::error::INVALID_PARAMS);
    }
    Bytes::from(v.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::msg;

    #[test]
    fn discover_comes_from_the_initialize_result() {
        let init = msg(
            r#"{"jsonrpc":"2.0","id":"i","result":{"protocolVersion":"2025-11-25","capabilities":{"tools":{"listChanged":true},"resources":{"subscribe":true},"logging":{}},"serverInfo":{"name":"up","version":"3"},"instructions":"be nice"}}"#,
        );
        let d = discover(&Id::number(5), &init).unwrap();
        let v: Value = serde_json::from_slice(&d).unwrap();
        assert_eq!(v["id"], 5);
        let r = &v["result"];
        assert_eq!(r["resultType"], "complete");
        assert_eq!(r["supportedVersions"], json!(["2026-07-28"]));
        assert_eq!(
            r["capabilities"],
            json!({"tools": {"listChanged": true}, "resources": {"subscribe": true}, "logging": {}})
        );
        assert_eq!(r["instructions"], "be nice");
        assert_eq!(r["ttlMs"], 0);
        assert_eq!(r["cacheScope"], "private");
        assert_eq!(r["_meta"][META_SERVER_INFO]["name"], "up");
        let refused = msg(r#"{"jsonrpc":"2.0","id":"i","error":{"code":-32600,"message":"no"}}"#);
        assert!(matches!(
            discover(&Id::number(1), &refused),
            Err(BridgeError::Refused { message }) if message == "no"
        ));
    }

    #[test]
    fn answers_gain_result_type_and_renamed_codes() {
        let info = json!({"name": "up", "version": "3"});
        let r = to_modern_answer(
            &msg(r#"{"jsonrpc":"2.0","id":1,"result":{"content":[]}}"#),
            &Method::ToolsCall,
            Some(&info),
        );
        let v: Value = serde_json::from_slice(&r).unwrap();
        assert_eq!(v["result"]["resultType"], "complete");
        assert_eq!(v["result"]["_meta"][META_SERVER_INFO], info);
        assert!(v["result"].get("ttlMs").is_none());
        let list = to_modern_answer(
            &msg(r#"{"jsonrpc":"2.0","id":1,"result":{"tools":[]}}"#),
            &Method::ToolsList,
            None,
        );
        let v: Value = serde_json::from_slice(&list).unwrap();
        assert_eq!(v["result"]["ttlMs"], 0);
        assert_eq!(v["result"]["cacheScope"], "private");
        let kept = to_modern_answer(
            &msg(r#"{"jsonrpc":"2.0","id":1,"result":{"resultType":"input_required"}}"#),
            &Method::ToolsCall,
            None,
        );
        let v: Value = serde_json::from_slice(&kept).unwrap();
        assert_eq!(v["result"]["resultType"], "input_required");
        let e = to_modern_answer(
            &msg(
                r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32002,"message":"Resource not found"}}"#,
            ),
            &Method::ResourcesRead,
            None,
        );
        let v: Value = serde_json::from_slice(&e).unwrap();
        assert_eq!(v["error"]["code"], -32602);
        assert_eq!(v["error"]["message"], "Resource not found");
    }
}
