//! Many stdio sessions at once: each gets its own child and its own answers, and after
//! their DELETEs no process of theirs is left.

use std::time::Duration;

use futures::future::join_all;
use mcpgate_tests::children::{Kind, MARK_VAR, mark, marked, stdio_server};
use mcpgate_tests::{Client, Gateway, wait_until};
use serde_json::json;

/// Opens `n` sessions on `url`, `wave` at a time, and keeps them all open; checks each
/// answers with its own text (all at once), DELETEs them all at once; returns the distinct
/// child pids seen. `m` marks their processes.
async fn crowd(url: &str, n: usize, wave: usize, (tool, arg): (&str, &str), m: &str) -> usize {
    let c = Client::new(url);
    let mut sessions = Vec::with_capacity(n);
    while sessions.len() < n {
        let k = wave.min(n - sessions.len());
        sessions.extend(join_all((0..k).map(|_| c.initialize())).await);
    }
    let live = marked(m).len();
    assert!(
        live >= n,
        "{n} sessions open, {live} processes of theirs: one child each"
    );
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
    let distinct = crowd(&gw.url(), n, n, ("echo", "text"), &m).await;
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
async fn two_hundred_everything_server_sessions_leave_nothing_behind() {
    let m = mark("crowd-node");
    let toml =
        mcpgate_tests::virtuals::everything("up") + &format!("env = {{ {MARK_VAR} = \"{m}\" }}\n");
    let gw = Gateway::start(&toml);
    // Node starts take ~0.3 s of CPU each: on two cores, 200 at once would keep the last
    // initialize waiting longer than the request timeout. Opened 25 at a time, all 200
    // are live together before any is called or closed.
    let started = std::time::Instant::now();
    crowd(
        &format!("{}/servers/up/mcp", gw.base),
        200,
        25,
        ("echo", "message"),
        &m,
    )
    .await;
    eprintln!("200 everything-server sessions in {:?}", started.elapsed());
    let gone = wait_until(Duration::from_secs(20), || async { marked(&m).is_empty() }).await;
    assert!(
        gone,
        "{} processes left after the DELETEs",
        marked(&m).len()
    );
    assert_eq!(gw.metric("mcpgate_stdio_children").await, 0.0);
}
