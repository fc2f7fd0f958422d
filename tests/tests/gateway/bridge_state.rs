//! The era bridge's state and isolation, with raw 2026-07-28 requests through the real
//! binary in front of the stdio testkit (a process per pooled session): a principal's
//! sequential calls keep their process (its counter goes 1, 2, 3, …), another principal
//! never meets it; concurrent principals get only their own notifications; a
//! `requestState` works once, for its own principal, and not after it expired.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use mcpgate_tests::bridge::Modern;
use mcpgate_tests::{Gateway, children_of, wait_until};
use serde_json::json;

fn token(n: usize) -> String {
    format!("bridge-principal-{n:02}-0123456789")
}

/// A stdio testkit gateway with `n` principals (static tokens) and `extra` settings.
fn gateway(n: usize, extra: &str) -> Gateway {
    let tokens: Vec<String> = (0..n)
        .map(|i| format!("{{ name = \"p{i}\", token = \"{}\" }}", token(i)))
        .collect();
    Gateway::stdio_testkit(
        &[],
        &format!("{extra}\n[auth]\ntokens = [{}]\n", tokens.join(", ")),
    )
}

#[tokio::test]
async fn a_principals_calls_keep_their_process_and_never_meet_anothers() {
    let gw = gateway(2, "");
    let a = Modern::new(&gw.url(), Some(&token(0)));
    let b = Modern::new(&gw.url(), Some(&token(1)));
    let d = a.request(1, "server/discover", json!({})).await;
    assert_eq!(d.status, 200, "{d:?}");
    let r = &d.last()["result"];
    assert_eq!(r["resultType"], "complete");
    assert_eq!(r["supportedVersions"], json!(["2026-07-28"]));
    assert_eq!(
        r["_meta"]["io.modelcontextprotocol/serverInfo"]["name"],
        "mcpgate-testkit"
    );
    assert!(r["capabilities"]["tools"].is_object(), "{r}");
    let mut a_pids = HashSet::new();
    for n in 1..=3 {
        assert_eq!(
            a.call(10 + n, "count", json!({})).await.text(),
            n.to_string()
        );
        a_pids.insert(a.call(20 + n, "whoami", json!({})).await.text());
    }
    assert_eq!(
        a_pids.len(),
        1,
        "one process for a's sequential calls: {a_pids:?}"
    );
    for n in 1..=2 {
        assert_eq!(
            b.call(30 + n, "count", json!({})).await.text(),
            n.to_string()
        );
        let pid = b.call(40 + n, "whoami", json!({})).await.text();
        assert!(!a_pids.contains(&pid), "b got a's process {pid}");
    }
    assert_eq!(a.call(50, "count", json!({})).await.text(), "4");
    // Answers are 2026-07-28 results, and what the revision has no place for is refused.
    let list = a.request(51, "tools/list", json!({})).await;
    assert_eq!(list.last()["result"]["resultType"], "complete");
    assert_eq!(list.last()["result"]["cacheScope"], "private");
    let ping = a.request(52, "ping", json!({})).await;
    assert_eq!((ping.status, ping.error_code()), (404, Some(-32601)));
    let missing = a
        .request(53, "resources/read", json!({"uri": "test://nowhere"}))
        .await;
    assert!(missing.error_code().is_some(), "{missing:?}");
    assert_ne!(missing.error_code(), Some(-32002), "renamed in 2026-07-28");
}

#[tokio::test]
async fn concurrent_principals_get_only_their_own_notifications() {
    const N: usize = 20;
    let gw = gateway(N, "");
    let mut tasks = Vec::new();
    for p in 0..N {
        let url = gw.url();
        tasks.push(tokio::spawn(async move {
            let c = Modern::new(&url, Some(&token(p)));
            let mut pids = HashSet::new();
            let calls = (0..3u64).map(|k| {
                let c = c.clone();
                async move {
                    let tag = format!("p{p}-{k}");
                    let params = json!({"name": "notify", "arguments": {"tag": tag, "count": 5},
                        "_meta": {"progressToken": tag, "io.modelcontextprotocol/logLevel": "debug"}});
                    (tag, c.request(100 + k, "tools/call", params).await)
                }
            });
            for (tag, reply) in futures::future::join_all(calls).await {
                let (mut progress, mut logs) = (0, 0);
                for m in &reply.messages {
                    match m["method"].as_str() {
                        Some("notifications/progress") => {
                            assert_eq!(m["params"]["progressToken"], tag.as_str(), "{m}");
                            progress += 1;
                        }
                        Some("notifications/message") => {
                            assert_eq!(m["params"]["data"]["tag"], tag.as_str(), "{m}");
                            logs += 1;
                        }
                        _ => {}
                    }
                }
                assert_eq!((progress, logs), (5, 5), "{tag}: {reply:?}");
                assert_eq!(reply.last()["result"]["content"][0]["text"], format!("{tag}:5"));
            }
            pids.insert(c.call(200, "whoami", json!({})).await.text());
            (p, pids)
        }));
    }
    let mut owner: HashMap<String, usize> = HashMap::new();
    for t in tasks {
        let (p, pids) = t.await.unwrap();
        for pid in pids {
            if let Some(other) = owner.insert(pid.clone(), p) {
                panic!("process {pid} served principals {other} and {p}");
            }
        }
    }
    // At most bridge_sessions (4) pooled sessions per principal, each one child.
    let children = children_of(gw.pid()).len();
    assert!(children <= N * 4, "{children} children");
}

#[tokio::test]
async fn request_state_works_once_for_its_principal_and_expires() {
    let gw = gateway(2, "[session]\ninput_timeout = \"1s\"\n");
    let caps = json!({"sampling": {}});
    let a = Modern::new(&gw.url(), Some(&token(0))).with_capabilities(caps.clone());
    let b = Modern::new(&gw.url(), Some(&token(1))).with_capabilities(caps);
    let ask = a.call(1, "sample", json!({"prompt": "say hi"})).await;
    let r = &ask.last()["result"];
    assert_eq!(r["resultType"], "input_required", "{ask:?}");
    let (key, q) = r["inputRequests"]
        .as_object()
        .unwrap()
        .iter()
        .next()
        .unwrap();
    assert_eq!(q["method"], "sampling/createMessage");
    let state = r["requestState"].as_str().unwrap().to_owned();
    let answer = json!({key.clone(): {"role": "assistant", "model": "m", "stopReason": "endTurn",
        "content": {"type": "text", "text": "hi back"}}});
    let retry = |state: &str| {
        json!({"name": "sample", "arguments": {"prompt": "say hi"},
            "inputResponses": answer, "requestState": state})
    };
    let foreign = b.request(2, "tools/call", retry(&state)).await;
    assert_eq!(
        foreign.error_code(),
        Some(-32602),
        "another principal: {foreign:?}"
    );
    let tampered = a
        .request(3, "tools/call", retry(&format!("{state}x")))
        .await;
    assert_eq!(
        tampered.error_code(),
        Some(-32602),
        "tampered: {tampered:?}"
    );
    let done = a.request(4, "tools/call", retry(&state)).await;
    assert_eq!(done.last()["id"], 4, "answered on the retry's id: {done:?}");
    assert_eq!(done.text(), "hi back");
    let again = a.request(5, "tools/call", retry(&state)).await;
    assert_eq!(again.error_code(), Some(-32602), "used once: {again:?}");
    // Not answered in time: refused after, and the principal's session serves on.
    let late = a.call(6, "sample", json!({"prompt": "say hi"})).await;
    let state = late.last()["result"]["requestState"]
        .as_str()
        .unwrap()
        .to_owned();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let expired = a.request(7, "tools/call", retry(&state)).await;
    assert_eq!(expired.error_code(), Some(-32602), "expired: {expired:?}");
    assert!(
        wait_until(Duration::from_secs(5), || async {
            gw.log().contains("call abandoned")
        })
        .await
    );
    assert_eq!(a.call(8, "count", json!({})).await.text(), "1");
    assert_eq!(a.call(9, "count", json!({})).await.text(), "2");
}

#[tokio::test]
async fn a_listen_stream_gets_its_own_session_and_only_what_it_asked_for() {
    let up = mcpgate_testkit::HttpServer::start(
        "127.0.0.1:0".parse().unwrap(),
        mcpgate_testkit::HttpOptions::default(),
    )
    .await
    .unwrap();
    // The testkit also answers 2026-07-28 statelessly; configured as session-era, the
    // bridge serves the modern client.
    let gw = Gateway::http(&up.url(), "protocol = \"2025-11-25\"\n");
    let a = Modern::new(&gw.url(), None);
    let mut stream = a
        .listen(
            7,
            json!({"toolsListChanged": true, "promptsListChanged": true, "resourceSubscriptions": ["test://static"]}),
        )
        .await;
    assert_eq!(stream.recv().await.unwrap()["status"], 200);
    let ack = stream.recv().await.unwrap();
    assert_eq!(
        ack["method"], "notifications/subscriptions/acknowledged",
        "{ack}"
    );
    assert_eq!(
        ack["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
        7
    );
    // The testkit has no prompts.listChanged: not acknowledged, not delivered.
    assert_eq!(
        ack["params"]["notifications"],
        json!({"toolsListChanged": true, "resourceSubscriptions": ["test://static"]})
    );
    let sessions = gw.metric("mcpgate_sessions_active").await;
    // A call (on a pooled session of its own) touches the resource and another one not
    // listened to.
    assert_eq!(
        a.call(1, "touch", json!({"uri": "test://other"}))
            .await
            .text(),
        "notified 0"
    );
    assert_eq!(
        a.call(2, "touch", json!({"uri": "test://static"}))
            .await
            .text(),
        "notified 1"
    );
    let upd = tokio::time::timeout(Duration::from_secs(5), stream.recv())
        .await
        .expect("the update on the listen stream")
        .unwrap();
    assert_eq!(upd["method"], "notifications/resources/updated", "{upd}");
    assert_eq!(upd["params"]["uri"], "test://static");
    assert_eq!(
        upd["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
        7
    );
    // Closing the stream ends its session (the pooled one stays).
    drop(stream);
    assert!(
        wait_until(Duration::from_secs(5), || async {
            gw.metric("mcpgate_sessions_active").await == sessions
                && gw.log().contains("reason=\"client_gone\"")
        })
        .await,
        "sessions {} (before {sessions}); log:\n{}",
        gw.metric("mcpgate_sessions_active").await,
        gw.log()
    );
}
