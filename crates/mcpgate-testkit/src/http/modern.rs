//! A stateless MCP 2026-07-28 leg for the HTTP test server (the benchmark's fast modern
//! upstream): a POST whose `MCP-Protocol-Version` is 2026-07-28 is answered on its own,
//! without a session — `server/discover`, `tools/list` and `tools/call echo` as JSON,
//! `tools/call hang` as an SSE stream that sends one progress event and never ends
//! (counted in `Stats::modern_streams_open` until the client goes away: how a test sees
//! that closing a stream cancels the request); any other method 404 / `-32601`;
//! notifications 202.

use std::sync::Arc;

use bytes::Bytes;
use http::StatusCode;
use http_body_util::{BodyExt, StreamBody};
use hyper::body::Frame;
use serde_json::{Value, json};

use super::reply::{Body, json as json_reply, sse_response, status_only};
use crate::rpc::{self, Incoming as Msg};
use crate::stats::StatsCell;

/// Counts an open `hang` stream until dropped.
struct Open(Arc<StatsCell>);

impl Drop for Open {
    fn drop(&mut self) {
        self.0
            .modern_streams_open
            .fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
    }
}

/// The revision this leg serves.
pub(super) const VERSION: &str = "2026-07-28";

fn result(id: &Value, mut r: Value) -> String {
    r["resultType"] = json!("complete");
    r["_meta"] = json!({"io.modelcontextprotocol/serverInfo": {"name": "mcpgate-testkit", "version": env!("CARGO_PKG_VERSION")}});
    json!({"jsonrpc": "2.0", "id": id, "result": r}).to_string()
}

/// Answers one 2026-07-28 POST body.
pub(super) fn answer(bytes: &[u8], stats: &Arc<StatsCell>) -> http::Response<Body> {
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
        "tools/call" if params.as_ref().and_then(|p| p["name"].as_str()) == Some("hang") => {
            crate::stats::bump(&stats.modern_streams_open);
            let open = Open(stats.clone());
            let first = json!({"jsonrpc": "2.0", "method": "notifications/progress",
                               "params": {"progressToken": id, "progress": 1}});
            let event = Bytes::from(format!("event: message\ndata: {first}\n\n"));
            let body = async_stream::stream! {
                let _open = open;
                yield Ok::<_, super::reply::BoxError>(Frame::data(event));
                std::future::pending::<()>().await;
            };
            return sse_response(StreamBody::new(body).boxed_unsync());
        }
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
