//! An era-bridge retry (2026-07-28 `input_required` → the client's retry with
//! `requestState`) that reaches another replica than the one holding the upstream call is
//! answered at once with an error that says to start the call over — never a hang, never
//! another call's answer — and starting over on that replica works.

use mcpgate_testkit::{HttpOptions, HttpServer};
use mcpgate_tests::Gateway;
use mcpgate_tests::bridge::{Modern, input_required};
use serde_json::json;

#[tokio::test]
async fn a_bridged_retry_on_another_replica_is_told_to_start_over() {
    let up = HttpServer::start("127.0.0.1:0".parse().unwrap(), HttpOptions::default())
        .await
        .unwrap();
    // The testkit speaks a little 2026-07-28 itself; pinned to the session era, its
    // 2026-07-28 clients go through the bridge.
    let extra = "protocol = \"2025-11-25\"\n[session]\ninput_timeout = \"5s\"\n";
    let (a, b) = (
        Gateway::http(&up.url(), extra),
        Gateway::http(&up.url(), extra),
    );
    let caps = json!({"sampling": {}});
    let on_a = Modern::new(&a.url(), None).with_capabilities(caps.clone());
    let on_b = Modern::new(&b.url(), None).with_capabilities(caps);
    // The sampling answer a client gives to the question `key`, and the retry carrying it.
    let retry = |(key, state): (String, String), text: &str| {
        json!({"name": "sample", "arguments": {"prompt": "say hi"},
               "inputResponses": {key: {"role": "assistant", "model": "m",
                   "stopReason": "endTurn", "content": {"type": "text", "text": text}}},
               "requestState": state})
    };
    let ask = on_a.call(1, "sample", json!({"prompt": "say hi"})).await;
    let elsewhere = on_b
        .request(2, "tools/call", retry(input_required(&ask), "hi back"))
        .await;
    assert_eq!(elsewhere.error_code(), Some(-32602), "{elsewhere:?}");
    assert!(
        elsewhere.body.contains("start the call over"),
        "the error says what to do: {}",
        elsewhere.body
    );
    assert_eq!(elsewhere.last()["id"], 2);
    // Starting over on that replica: a fresh question, and its retry completes there.
    let again = on_b.call(3, "sample", json!({"prompt": "say hi"})).await;
    let done = on_b
        .request(4, "tools/call", retry(input_required(&again), "hi again"))
        .await;
    assert_eq!(done.text(), "hi again", "{done:?}");
    assert_eq!(done.last()["id"], 4);
}
