//! The server-to-client messages the tools send: padded and flood notifications, the
//! session timer, `sampling/createMessage`, and the `notify` tool's log and progress
//! notifications.

use std::time::Duration;

use serde_json::{Value, json};

use super::Outbound;
use super::catalogue::{Done, text_result};

/// A JSON-RPC `notifications/message` of about `size` bytes (at least the envelope):
/// `params.data` is `{"seq": seq, "pad": "xxx…"}`.
pub(super) fn padded_notification(logger: &str, seq: u64, size: usize) -> String {
    let head = format!(
        r#"{{"jsonrpc":"2.0","method":"notifications/message","params":{{"level":"debug","logger":"{logger}","data":{{"seq":{seq},"pad":""#
    );
    let tail = r#""}}}"#;
    let pad = size.saturating_sub(head.len() + tail.len());
    let mut s = String::with_capacity(head.len() + pad + tail.len());
    s.push_str(&head);
    s.extend(std::iter::repeat_n('x', pad));
    s.push_str(tail);
    s
}

/// One notification of a `flood`.
pub(crate) fn flood_notification(seq: u64, size: usize) -> String {
    padded_notification("flood", seq, size)
}

/// The standalone timer notification for a session.
pub(crate) fn timer_notification(session_id: &str) -> String {
    json!({
        "jsonrpc": "2.0",
        "method": "notifications/message",
        "params": {"level": "info", "logger": "timer", "data": {"timer": true, "session": session_id}}
    })
    .to_string()
}

/// A serialized `sampling/createMessage` request with server request id `sid`.
pub(super) fn sampling_request(sid: &str, prompt: &str) -> String {
    json!({
        "jsonrpc": "2.0", "id": sid, "method": "sampling/createMessage",
        "params": {"messages": [{"role": "user", "content": {"type": "text", "text": prompt}}],
                   "maxTokens": 16}
    })
    .to_string()
}

/// The `notify` tool: `count` log notifications tagged `tag` (and progress notifications
/// when the call has a progress token), `interval_ms` apart, on `out`.
pub(super) async fn notify(
    tag: &str,
    count: u64,
    interval_ms: u64,
    progress_token: Option<&Value>,
    out: Option<&Outbound>,
) -> Done {
    for i in 0..count {
        if let Some(out) = out {
            let msg = json!({"jsonrpc": "2.0", "method": "notifications/message",
                "params": {"level": "info", "logger": "testkit", "data": {"tag": tag, "seq": i}}});
            // A closed channel means the client went away; the answer is moot then.
            let _ = out.send(msg.to_string());
            if let Some(token) = progress_token {
                let msg = json!({"jsonrpc": "2.0", "method": "notifications/progress",
                    "params": {"progressToken": token, "progress": i + 1, "total": count}});
                let _ = out.send(msg.to_string());
            }
        }
        if interval_ms > 0 && i + 1 < count {
            tokio::time::sleep(Duration::from_millis(interval_ms)).await;
        }
    }
    Done::Ok(text_result(format!("{tag}:{count}")))
}
