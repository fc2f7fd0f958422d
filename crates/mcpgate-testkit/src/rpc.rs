//! JSON-RPC 2.0 framing: classifying incoming messages and serializing answers.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// JSON-RPC error codes used here.
pub(crate) const PARSE_ERROR: i64 = -32700;
pub(crate) const INVALID_REQUEST: i64 = -32600;
pub(crate) const METHOD_NOT_FOUND: i64 = -32601;
pub(crate) const INVALID_PARAMS: i64 = -32602;

/// One incoming JSON-RPC message, classified.
#[derive(Debug)]
pub(crate) enum Incoming {
    /// Has `method` and `id`.
    Request {
        id: Value,
        method: String,
        params: Option<Value>,
    },
    /// Has `method`, no `id`.
    Notification {
        method: String,
        params: Option<Value>,
    },
    /// Has `id` and `result` or `error`.
    Response {
        id: Value,
        result: Option<Value>,
        error: Option<Value>,
    },
}

#[derive(Deserialize)]
struct Raw {
    jsonrpc: Option<String>,
    #[serde(default)]
    id: Option<Value>,
    method: Option<String>,
    params: Option<Value>,
    result: Option<Value>,
    error: Option<Value>,
}

/// Parses one message; on failure returns the serialized JSON-RPC error to send back.
pub(crate) fn parse(bytes: &[u8]) -> Result<Incoming, String> {
    let raw: Raw = match serde_json::from_slice(bytes) {
        Ok(r) => r,
        Err(e) => {
            let code = match e.classify() {
                serde_json::error::Category::Data => INVALID_REQUEST,
                _ => PARSE_ERROR,
            };
            return Err(error_response(&Value::Null, code, &e.to_string()));
        }
    };
    let id_for_error = raw.id.clone().unwrap_or(Value::Null);
    if raw.jsonrpc.as_deref() != Some("2.0") {
        return Err(error_response(
            &id_for_error,
            INVALID_REQUEST,
            "jsonrpc must be \"2.0\"",
        ));
    }
    match (raw.method, raw.id) {
        (Some(method), Some(id)) => Ok(Incoming::Request {
            id,
            method,
            params: raw.params,
        }),
        (Some(method), None) => Ok(Incoming::Notification {
            method,
            params: raw.params,
        }),
        (None, Some(id)) if raw.result.is_some() || raw.error.is_some() => Ok(Incoming::Response {
            id,
            result: raw.result,
            error: raw.error,
        }),
        _ => Err(error_response(
            &id_for_error,
            INVALID_REQUEST,
            "not a request, notification or response",
        )),
    }
}

#[derive(Serialize)]
struct RpcError<'a> {
    code: i64,
    message: &'a str,
}

#[derive(Serialize)]
struct Response<'a> {
    jsonrpc: &'static str,
    id: &'a Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    result: Option<&'a Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<RpcError<'a>>,
}

fn serialize(resp: &Response<'_>) -> String {
    // Serializing Values and plain structs into a String cannot fail.
    serde_json::to_string(resp).unwrap_or_default()
}

/// A serialized JSON-RPC success response.
pub(crate) fn result_response(id: &Value, result: &Value) -> String {
    serialize(&Response {
        jsonrpc: "2.0",
        id,
        result: Some(result),
        error: None,
    })
}

/// A serialized JSON-RPC error response.
pub(crate) fn error_response(id: &Value, code: i64, message: &str) -> String {
    serialize(&Response {
        jsonrpc: "2.0",
        id,
        result: None,
        error: Some(RpcError { code, message }),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classifies_and_rejects() {
        assert!(matches!(
            parse(br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#),
            Ok(Incoming::Request { .. })
        ));
        assert!(matches!(
            parse(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#),
            Ok(Incoming::Notification { .. })
        ));
        assert!(matches!(
            parse(br#"{"jsonrpc":"2.0","id":"s-1","result":{}}"#),
            Ok(Incoming::Response { .. })
        ));
        assert!(parse(b"{nope").is_err_and(|e| e.contains("-32700")));
        assert!(parse(b"[1]").is_err_and(|e| e.contains("-32600")));
        assert!(parse(br#"{"id":1,"method":"ping"}"#).is_err_and(|e| e.contains("-32600")));
    }
}
