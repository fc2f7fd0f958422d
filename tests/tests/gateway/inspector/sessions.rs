//! UI sessions of `mcpgate inspector`: two UI sessions of one command get two children and
//! only their own notifications; rapid reconnects (the UI's Restart) leave no session and
//! no child behind.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use mcpgate_tests::inspector::{
    INIT, Inspector, Sse, TOKEN, mcp_post, open_sse, stdio_query, testkit, testkit_toml, text,
};
use mcpgate_tests::{children_of, wait_until};
use serde_json::{Value, json};

/// What one UI session saw of the notify tool's notifications.
#[derive(Debug, Default)]
struct Seen {
    own: BTreeSet<u64>,
    foreign: Vec<Value>,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_ui_sessions_get_two_children_and_only_their_own_notifications() {
    let insp = Inspector::start(&testkit_toml(""), &[], Some(TOKEN));
    let cmd = testkit();
    let url = insp.url("/stdio", &stdio_query(&insp, &cmd, "stdio", "{}"));
    let mut a = open_sse(&insp, &url).await.unwrap();
    let mut b = open_sse(&insp, &url).await.unwrap();
    a.initialize(&insp).await;
    b.initialize(&insp).await;
    let kids = children_of(insp.pid());
    assert_eq!(kids.len(), 2, "one child per UI session: {kids:?}");
    let who_a = text(&a.call(&insp, 1, "whoami", json!({})).await);
    let who_b = text(&b.call(&insp, 1, "whoami", json!({})).await);
    assert_ne!(who_a, who_b, "the two sessions share a server");

    const COUNT: u64 = 40;
    let run = |mut s: Sse, tag: &'static str| {
        let insp = &insp;
        async move {
            let msg = json!({"jsonrpc":"2.0","id":7,"method":"tools/call",
                "params":{"name":"notify","arguments":{"tag":tag,"count":COUNT,"interval_ms":2},"_meta":{"progressToken":tag}}});
            let status = s.post(insp, &msg).await;
            assert_eq!(status, 202, "{}", insp.base);
            let mut before = Vec::new();
            let r = s.response(7, &mut before).await;
            assert_eq!(text(&r), format!("{tag}:{COUNT}"));
            // Whatever else arrives shortly after must be ours too.
            while let Ok(Some(m)) =
                tokio::time::timeout(Duration::from_millis(300), s.events.rx.recv()).await
            {
                before.push(m);
            }
            let mut seen = Seen::default();
            for m in before {
                let mine = match m["method"].as_str() {
                    Some("notifications/message") => {
                        let d = &m["params"]["data"];
                        d["tag"] == tag && seen.own.insert(d["seq"].as_u64().unwrap_or(u64::MAX))
                    }
                    Some("notifications/progress") => m["params"]["progressToken"] == tag,
                    _ => true,
                };
                if !mine {
                    seen.foreign.push(m);
                }
            }
            (s, seen)
        }
    };
    let ((a, seen_a), (b, seen_b)) = tokio::join!(run(a, "A"), run(b, "B"));
    for (name, seen) in [("A", &seen_a), ("B", &seen_b)] {
        assert!(
            seen.foreign.is_empty(),
            "session {name} saw someone else's messages: {:?}",
            seen.foreign
        );
        assert_eq!(
            seen.own.len() as u64,
            COUNT,
            "session {name}: {:?}",
            seen.own
        );
    }
    // Ending one leaves the other (and its child) alone.
    drop(a);
    let one = wait_until(Duration::from_secs(10), || async {
        children_of(insp.pid()).len() == 1 && insp.metric("mcpgate_sessions_active").await == 1.0
    })
    .await;
    assert!(one, "{:?}", children_of(insp.pid()));
    let mut b = b;
    let r = b.call(&insp, 9, "echo", json!({"text":"still here"})).await;
    assert_eq!(text(&r), "still here");
    drop(b);
    insp.assert_empty(Duration::from_secs(10)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rapid_reconnects_leave_no_session_and_no_child_behind() {
    // A short idle timeout: Streamable HTTP sessions the client abandons without DELETE
    // must be reaped too.
    let toml = format!("idle_timeout = \"2s\"\n{}", testkit_toml(""));
    let insp = Inspector::start(&toml, &[], Some(TOKEN));
    let cmd = testkit();
    let sse_url = insp.url("/stdio", &stdio_query(&insp, &cmd, "stdio", "{}"));
    let mcp_url = insp.url(
        "/mcp",
        &[
            ("command", cmd.as_str()),
            ("args", "stdio"),
            ("env", "{}"),
            ("transportType", "stdio"),
        ],
    );
    const ROUNDS: usize = 40;
    let started = Instant::now();
    // The UI's Restart: the old connection is dropped while the new one connects, over and
    // over, at every stage of the new one's initialize.
    let mut current: Option<Sse> = None;
    for i in 0..ROUNDS {
        let mut next = open_sse(&insp, &sse_url).await.unwrap();
        match i % 4 {
            0 => {
                next.initialize(&insp).await;
            }
            1 => {
                // initialize sent, answer not awaited.
                let _ = next.post(&insp, &serde_json::from_str(INIT).unwrap()).await;
            }
            2 => {}
            _ => {
                // A Streamable HTTP connection too: half of them DELETEd, half abandoned.
                let r = mcp_post(&insp, &mcp_url, None, &serde_json::from_str(INIT).unwrap()).await;
                assert_eq!(r.status().as_u16(), 200);
                let sid = r.headers()["mcp-session-id"].to_str().unwrap().to_owned();
                if i % 8 == 3 {
                    let d = insp
                        .ui(reqwest::Method::DELETE, &mcp_url)
                        .header("mcp-session-id", &sid)
                        .send()
                        .await
                        .unwrap();
                    assert_eq!(d.status().as_u16(), 200);
                }
            }
        }
        drop(current.replace(next));
    }
    let storm = started.elapsed();
    // The last connection is live and works. It is a bare connect (the last round is one
    // of the `_` arm's), so the test initialises it.
    const { assert!((ROUNDS - 1) % 4 == 3) };
    let mut last = current.take().unwrap();
    let ping = last
        .post(&insp, &json!({"jsonrpc":"2.0","id":99,"method":"ping"}))
        .await;
    assert_eq!(ping, 202, "the last connection takes messages");
    let pong = last.response(99, &mut Vec::new()).await;
    assert_eq!(pong["id"], 99, "the ping is answered: {pong}");
    last.initialize(&insp).await;
    let r = last
        .call(&insp, 100, "echo", json!({"text": "the last one"}))
        .await;
    assert_eq!(text(&r), "the last one");
    drop(last);
    let mut insp = insp;
    assert!(
        insp.is_running(),
        "the gateway died during the reconnect storm"
    );
    insp.assert_empty(Duration::from_secs(15)).await;
    let opened = insp.metric("mcpgate_sessions_opened_total").await;
    assert_eq!(opened, (ROUNDS + ROUNDS / 4) as f64, "sessions opened");
    assert_eq!(insp.metric("mcpgate_stdio_children").await, 0.0);
    eprintln!(
        "inspector reconnect storm: {ROUNDS} reconnects in {storm:?}, drained after {:?}",
        started.elapsed()
    );
}
