//! A stateless MCP 2026-07-28 leg for the HTTP test server (the benchmark's fast modern
//! upstream): a POST whose `MCP-Protocol-Version` is 2026-07-28 is answered on its own,
//! without a session — `server/discover`, `tools/list` and `tools/call echo` as JSON; any
//! other method 404 / `-32601`; notifications 202.

use http::StatusCode;
use serde_json::{Value, json};

use super::reply::{Body, json as json_reply, status_only};
use crate::rpc::{self, Incoming as Msg};

/// The revision this leg serves.
pub(super) const VERSION: &str = "2026-07-28";

fn result(id: &Value, mut r: Value) -> String {
    r["resultType"] = json!("complete");
    r["_meta"] = json!({"io.modelcontextprotocol/serverInfo": {"name": "mcpgate-testkit", "version": env!("CARGO_PKG_VERSION")}});
    json!({"jsonrpc": "2.0", "id": id, "result": r}).to_string()
}

/// Answers one 2026-07-28 POST body.
pub(super) fn answer(bytes: &[u8]) -> http::Response<Body> {
    let msg = match rpc::parse(bytes) {
        Ok(m) => m,
        Err(error) => return json_reply(StatusCode::BAD_REQUEST, error),
    };
    let Msg::Request { id, method, params } = msg else {
        return status_only(StatusCode::ACCEPTED);
    };
    let body = match method.as_str() {
        "server/discover" => result(
            &id,
            json!({"supportedVersions": [VERSION], "capabilities": {"tools": {}}, "ttlMs": 0, "cacheScope": "private"}),
        ),
        "tools/list" => result(
            &id,
            json!({"tools": [{"name": "echo", "description": "Echoes text.",
                              "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}}}],
                   "ttlMs": 0, "cacheScope": "private"}),
        ),
        "tools/call" if params.as_ref().and_then(|p| p["name"].as_str()) == Some("echo") => {
            let text = params
                .as_ref()
                .and_then(|p| p["arguments"]["text"].as_str())
                .unwrap_or("")
                .to_owned();
            result(&id, json!({"content": [{"type": "text", "text": text}]}))
        }
        _ => {
            let e = json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32601, "message": "Method not found"}});
            return json_reply(StatusCode::NOT_FOUND, e.to_string());
        }
    };
    json_reply(StatusCode::OK, body)
}
