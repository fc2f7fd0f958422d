//! `input_required` (2026-07-28) ↔ server-to-client requests (session era).

use bytes::Bytes;
use mcpgate_jsonrpc::{Id, Message, Method};
use serde_json::{Map, Value, json};

/// The `requestState` prefix of an `input_required` that asks the user to consent to an
/// upstream server (URL mode): its retry holds no call; it is run afresh.
pub const CONSENT_STATE: &str = "mcpgate-consent.";

/// Whether `state` is a consent's (see [`CONSENT_STATE`]).
pub fn is_consent_state(state: &str) -> bool {
    state.starts_with(CONSENT_STATE)
}

/// Whether a call of `method` may be answered with `input_required`.
pub fn may_ask_client(method: &Method) -> bool {
    matches!(
        method,
        Method::ToolsCall | Method::ResourcesRead | Method::PromptsGet
    )
}

/// The `input_required` answer to the client's request `id`: each of the upstream's
/// `requests` under its key (method and params as the upstream sent them), and `state`,
/// the handle the retry brings back.
pub fn input_required(id: Option<&Id>, requests: &[(String, &Message)], state: &str) -> Bytes {
    let mut asks = Map::new();
    for (key, m) in requests {
        let v: Value = serde_json::from_slice(m.raw()).unwrap_or(Value::Null);
        let mut ask = json!({ "method": m.method_name() });
        if let Some(p) = v.get("params") {
            ask["params"] = p.clone();
        }
        asks.insert(key.clone(), ask);
    }
    let out = json!({
        "jsonrpc": "2.0",
        "id": id.map_or(Value::Null, Id::to_value),
        "result": {
            "resultType": "input_required",
            "inputRequests": asks,
            "requestState": state,
        },
    });
    Bytes::from(out.to_string())
}

/// The answer to the upstream's request `upstream_id`: the client's bare result from
/// `inputResponses`, or (none given) an error.
pub fn input_answer(upstream_id: &Id, response: Option<&Value>) -> Bytes {
    let id = upstream_id.to_value();
    let out = match response {
        Some(r) => json!({"jsonrpc": "2.0", "id": id, "result": r}),
        None => {
            json!({"jsonrpc": "2.0", "id": id, "error": {"code": mcpgate_jsonrpc::error::INVALID_PARAMS, "message": "the client's retry carried no answer to this request"}})
        }
    };
    Bytes::from(out.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_requests_become_input_requests_and_back() {
        let ask = Message::parse(Bytes::from_static(
            br#"{"jsonrpc":"2.0","id":4,"method":"elicitation/create","params":{"message":"ok?","requestedSchema":{"type":"object"}}}"#,
        ))
        .unwrap();
        let roots = Message::parse(Bytes::from_static(
            br#"{"jsonrpc":"2.0","id":5,"method":"roots/list"}"#,
        ))
        .unwrap();
        let b = input_required(
            Some(&Id::number(9)),
            &[("a".into(), &ask), ("b".into(), &roots)],
            "st",
        );
        let v: Value = serde_json::from_slice(&b).unwrap();
        assert_eq!(v["id"], 9);
        assert_eq!(v["result"]["resultType"], "input_required");
        assert_eq!(v["result"]["requestState"], "st");
        assert_eq!(
            v["result"]["inputRequests"]["a"]["method"],
            "elicitation/create"
        );
        assert_eq!(
            v["result"]["inputRequests"]["a"]["params"]["message"],
            "ok?"
        );
        assert_eq!(
            v["result"]["inputRequests"]["b"],
            json!({"method": "roots/list"})
        );
        let a = input_answer(&Id::number(4), Some(&json!({"action": "accept"})));
        let v: Value = serde_json::from_slice(&a).unwrap();
        assert_eq!(
            v,
            json!({"jsonrpc": "2.0", "id": 4, "result": {"action": "accept"}})
        );
        let none: Value = serde_json::from_slice(&input_answer(&Id::number(5), None)).unwrap();
        assert_eq!(none["error"]["code"], -32602);
    }
}
