//! A JSON-RPC error object and its wire form.

use bytes::Bytes;

use crate::id::Id;

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
        let id = id.map_or("null", Id::as_raw);
        let message = serde_json::to_string(&self.message).unwrap_or_else(|_| "\"\"".into());
        let data = self
            .data
            .as_deref()
            .map_or_else(String::new, |d| format!(r#","data":{d}"#));
        Bytes::from(format!(
            r#"{{"jsonrpc":"2.0","id":{id},"error":{{"code":{},"message":{message}{data}}}}}"#,
            self.code
        ))
    }
}

/// A result response body: `{"jsonrpc":"2.0","id":…,"result":…}` (`result` is JSON text;
/// without an id, `"id":null`).
pub fn result_body(id: Option<&Id>, result: &str) -> Bytes {
    let id = id.map_or("null", Id::as_raw);
    Bytes::from(format!(
        r#"{{"jsonrpc":"2.0","id":{id},"result":{result}}}"#
    ))
}

/// `notifications/cancelled` for the request `id`, with `reason`.
pub fn cancelled(id: &Id, reason: &str) -> Bytes {
    let reason = serde_json::to_string(reason).unwrap_or_else(|_| "\"\"".into());
    Bytes::from(format!(
        r#"{{"jsonrpc":"2.0","method":"notifications/cancelled","params":{{"requestId":{},"reason":{reason}}}}}"#,
        id.as_raw()
    ))
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
