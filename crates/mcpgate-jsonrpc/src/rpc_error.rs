//! A JSON-RPC error object and its wire form.

use bytes::Bytes;
use serde::Serialize;
use serde_json::value::RawValue;

use crate::id::Id;
use crate::method::Method;

/// A JSON-RPC error object ready to be put on the wire.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JsonRpcError {
    /// The JSON-RPC error code.
    pub code: i64,
    /// A human-readable message.
    pub message: String,
    /// The `data` member as JSON text, when there is one.
    pub data: Option<String>,
}

/// JSON text kept as it is (an id, a result, `data`), or `null` when it is not JSON.
fn raw(text: &str) -> &RawValue {
    serde_json::from_str::<&RawValue>(text).unwrap_or(RawValue::NULL)
}

/// A response or notification as it goes on the wire.
#[derive(Serialize)]
struct Envelope<'a, P: Serialize> {
    jsonrpc: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    id: Option<&'a RawValue>,
    #[serde(skip_serializing_if = "Option::is_none")]
    method: Option<&'a str>,
    #[serde(flatten)]
    payload: P,
}

#[derive(Serialize)]
struct ErrorObject<'a> {
    code: i64,
    message: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    data: Option<&'a RawValue>,
}

#[derive(Serialize)]
enum Payload<'a> {
    #[serde(rename = "error")]
    Error(ErrorObject<'a>),
    #[serde(rename = "result")]
    Result(&'a RawValue),
    #[serde(rename = "params")]
    Params(Cancelled<'a>),
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Cancelled<'a> {
    request_id: &'a RawValue,
    reason: &'a str,
}

fn body(id: Option<&Id>, method: Option<&str>, payload: Payload<'_>) -> Bytes {
    let envelope = Envelope {
        jsonrpc: "2.0",
        // Responses always carry an id (`null` when unknown); notifications none.
        id: match (method, id) {
            (Some(_), _) => None,
            (None, Some(id)) => Some(raw(id.as_raw())),
            (None, None) => Some(RawValue::NULL),
        },
        method,
        payload,
    };
    Bytes::from(serde_json::to_vec(&envelope).unwrap_or_default())
}

impl JsonRpcError {
    /// Builds an error with the given code and message.
    pub fn new(code: i64, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            data: None,
        }
    }

    /// The same error with a `data` member (JSON text).
    pub fn with_data(mut self, data: String) -> Self {
        self.data = Some(data);
        self
    }

    /// The complete response body: `{"jsonrpc":"2.0","id":…,"error":{…}}`. Without an id
    /// the body carries `"id":null`, as JSON-RPC requires when the id is unknown.
    pub fn to_body(&self, id: Option<&Id>) -> Bytes {
        let error = ErrorObject {
            code: self.code,
            message: &self.message,
            data: self.data.as_deref().map(raw),
        };
        body(id, None, Payload::Error(error))
    }
}

/// A result response body: `{"jsonrpc":"2.0","id":…,"result":…}` (`result` is JSON text;
/// without an id, `"id":null`).
pub fn result_body(id: Option<&Id>, result: &str) -> Bytes {
    body(id, None, Payload::Result(raw(result)))
}

/// `notifications/cancelled` for the request `id`, with `reason`.
pub fn cancelled(id: &Id, reason: &str) -> Bytes {
    let params = Cancelled {
        request_id: raw(id.as_raw()),
        reason,
    };
    body(
        None,
        Some(Method::Cancelled.as_str()),
        Payload::Params(params),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::SESSION_NOT_FOUND;

    #[test]
    fn body_escapes_message_and_uses_null_id() {
        let e = JsonRpcError::new(SESSION_NOT_FOUND, "no \"such\" session");
        let v: serde_json::Value = serde_json::from_slice(&e.to_body(None)).unwrap();
        assert_eq!(v["id"], serde_json::Value::Null);
        assert_eq!(v["error"]["code"], SESSION_NOT_FOUND);
        assert_eq!(v["error"]["message"], "no \"such\" session");
    }

    #[test]
    fn results_and_cancellations() {
        let id = Id::from_raw("\"a\"").unwrap();
        let v: serde_json::Value = serde_json::from_slice(&result_body(Some(&id), "{}")).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"jsonrpc": "2.0", "id": "a", "result": {}})
        );
        let c: serde_json::Value =
            serde_json::from_slice(&cancelled(&Id::number(3), "gone \"now\"")).unwrap();
        assert_eq!(c["method"], "notifications/cancelled");
        assert_eq!(c["params"]["requestId"], 3);
        assert_eq!(c["params"]["reason"], "gone \"now\"");
        assert_eq!(id.to_value(), serde_json::json!("a"));
    }
}
