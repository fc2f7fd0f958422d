//! Many stdio sessions at once: each gets its own child and its own answers, and after
//! their DELETEs no process of theirs is left.

use std::time::Duration;

use futures::future::join_all;
use mcpgate_tests::children::{Kind, MARK_VAR, mark, marked, stdio_server};
use mcpgate_tests::{Client, Gateway, wait_until};
use serde_json::json;

/// Opens `n` sessions on `url` at once, checks each answers with its own text, DELETEs
/// them all at once; returns the distinct child pids seen.
async fn crowd(url: &str, n: usize, tool: &str, arg: &str) -> usize {
    let c = Client::new(url);
    let sessions = join_all((0..n).map(|_| c.initialize())).await;
    let answers = join_all(sessions.iter().enumerate().map(|(i, s)| {
        let text = format!("session {i}");
        async move {
            let r = s.call(tool, json!({ arg: text.clone() })).await;
            (text, r)
        }
    }))
    .await;
    for (want, r) in &answers {
        let got = r.last()["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or_default();
        assert!(got.contains(want.as_str()), "{want:?} got {r:?}");
    }
    // The testkit tells its pid (`whoami`); other servers are not asked.
    let pids: std::collections::BTreeSet<String> = if tool == "echo" && arg == "text" {
        join_all(
            sessions
                .iter()
                .map(|s| async move { s.call("whoami", json!({})).await.text() }),
        )
        .await
        .into_iter()
        .collect()
    } else {
        std::collections::BTreeSet::new()
    };
    let statuses = join_all(sessions.iter().map(|s| s.delete())).await;
    assert!(statuses.iter().all(|s| *s == 200), "{statuses:?}");
    pids.len()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_hundred_testkit_sessions_at_once_leave_nothing_behind() {
    let m = mark("crowd");
    let gw = Gateway::start(&stdio_server("up", Kind::Family, &m));
    let n = 200;
    let distinct = crowd(&gw.url(), n, "echo", "text").await;
    assert_eq!(distinct, n, "one child per session");
    let gone = wait_until(Duration::from_secs(20), || async { marked(&m).is_empty() }).await;
    assert!(
        gone,
        "{} processes left after the DELETEs",
        marked(&m).len()
    );
    assert_eq!(gw.metric("mcpgate_stdio_children").await, 0.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forty_everything_server_sessions_at_once_leave_nothing_behind() {
    let m = mark("crowd-node");
    let toml =
        mcpgate_tests::virtuals::everything("up") + &format!("env = {{ {MARK_VAR} = \"{m}\" }}\n");
    let gw = Gateway::start(&toml);
    crowd(
        &format!("{}/servers/up/mcp", gw.base),
        40,
        "echo",
        "message",
    )
    .await;
    let gone = wait_until(Duration::from_secs(20), || async { marked(&m).is_empty() }).await;
    assert!(
        gone,
        "{} processes left after the DELETEs",
        marked(&m).len()
    );
    assert_eq!(gw.metric("mcpgate_stdio_children").await, 0.0);
}
