//! Garbage from the upstream (lines or events that are not JSON-RPC, over-long, not
//! UTF-8) and an upstream that ends its SSE answer before the response: logged and dropped,
//! or a -32003 for that request only; the session goes on.

use std::time::{Duration, Instant};

use mcpgate_testkit::HttpOptions;
use mcpgate_tests::faults::{Setup, Up, assert_echo, assert_up};
use mcpgate_tests::{Reply, Session, Stream};
use serde_json::json;

/// Calls `garbage {kind}` and checks that only the answer came back.
async fn garbage_call(s: &Session, kind: &str) -> Reply {
    let r = s.call("garbage", json!({"kind": kind})).await;
    assert_eq!(r.status, 200, "{kind}: {r:?}");
    assert_eq!(r.text(), format!("garbage {kind} sent"), "{kind}: {r:?}");
    r
}

/// Nothing but the answer is in `r`: no event that is not JSON (which `messages` would
/// not show), no event besides the answer.
fn assert_only_the_answer(r: &Reply, kind: &str) {
    let head = &r.body[..r.body.len().min(300)];
    assert!(
        r.non_json().is_empty(),
        "{kind}: the bad line is not forwarded: {head}"
    );
    assert!(
        r.events.len() <= 1,
        "{kind}: nothing but the answer: {head}"
    );
}

/// Over stdio an upstream's message that answers no request (as a garbage line does not)
/// goes to the session's GET stream: the next thing there must be the log line of a
/// `notify` made after the garbage, not the garbage.
async fn assert_stream_clean(s: &Session, get: &mut Stream, kind: &str) {
    let tag = format!("<after {kind}>");
    let n = s.call("notify", json!({"tag": tag, "count": 1})).await;
    assert_eq!(n.status, 200, "{kind}: {n:?}");
    let next = tokio::time::timeout(Duration::from_secs(10), get.recv())
        .await
        .unwrap_or_else(|_| panic!("{kind}: the notify log did not reach the GET stream"))
        .unwrap_or_else(|| panic!("{kind}: the GET stream ended"));
    assert_eq!(
        next["method"], "notifications/message",
        "{kind}: the bad line is not forwarded: {next}"
    );
    assert!(
        next.to_string().contains(&tag),
        "{kind}: the bad line is not forwarded: {next}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdio_garbage_lines_are_logged_and_dropped() {
    let Setup {
        http: _,
        mut gw,
        client: _,
        s,
        other,
    } = Setup::new(Up::Stdio, HttpOptions::default(), "").await;
    let pid_before = s.call("whoami", json!({})).await.text();
    let mut get = s.open_stream().await;
    assert_eq!(get.recv().await.unwrap()["status"], 200);
    // invalid: not JSON; not_jsonrpc: a JSON object without "jsonrpc"; huge: a valid
    // notification of 10 MiB (max_line_bytes is 4 MiB); binary: bytes that are not UTF-8.
    let cases = [
        (
            "invalid",
            "stdio upstream sent a line that is not JSON-RPC; dropped",
        ),
        (
            "not_jsonrpc",
            "stdio upstream sent a line that is not JSON-RPC; dropped",
        ),
        ("huge", "stdio upstream sent an over-long line; dropped"),
        (
            "binary",
            "stdio upstream sent a line that is not UTF-8; dropped",
        ),
    ];
    for (kind, log_line) in cases {
        let logged = gw.log().matches(log_line).count();
        let t0 = Instant::now();
        let r = garbage_call(&s, kind).await;
        assert_eq!(
            r.messages.len(),
            1,
            "{kind}: the bad line is not forwarded: {}",
            &r.body[..r.body.len().min(300)]
        );
        assert_only_the_answer(&r, kind);
        assert_stream_clean(&s, &mut get, kind).await;
        eprintln!("garbage {kind}: answered in {:?}", t0.elapsed());
        assert_eq!(
            gw.log().matches(log_line).count(),
            logged + 1,
            "{kind}: logged once; log:\n{}",
            gw.log()
        );
        assert_echo(&s, &format!("after {kind}")).await;
    }
    // The same child process: the session was never restarted.
    assert_eq!(s.call("whoami", json!({})).await.text(), pid_before);
    assert_eq!(gw.metric("mcpgate_sessions_active").await, 2.0);
    assert_echo(&other, "bystander").await;
    assert_up(&mut gw).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_garbage_events_are_logged_and_dropped() {
    let Setup {
        http: _up,
        mut gw,
        client: _,
        s,
        other,
    } = Setup::new(Up::Http, HttpOptions::default(), "").await;
    for kind in ["invalid", "not_jsonrpc"] {
        let r = garbage_call(&s, kind).await;
        assert_eq!(r.messages.len(), 1, "{kind}: {}", r.body);
        assert_only_the_answer(&r, kind);
        assert_echo(&s, &format!("after {kind}")).await;
    }
    assert_eq!(
        gw.log()
            .matches("upstream sent a non-JSON-RPC SSE event; dropped")
            .count(),
        2,
        "log:\n{}",
        gw.log()
    );
    // A 10 MiB event: stdio's max_line_bytes has no HTTP counterpart, and it is a valid
    // notification: it reaches the client whole, before the answer, and everything keeps
    // working.
    let r = garbage_call(&s, "huge").await;
    eprintln!(
        "http garbage huge: {} messages, {} bytes to the client",
        r.messages.len(),
        r.body.len()
    );
    assert!(r.non_json().is_empty(), "huge: only JSON");
    assert_eq!(r.messages.len(), 2, "the notification and the answer");
    assert_eq!(r.messages[0]["method"], "notifications/message");
    assert_eq!(r.messages[0]["params"]["logger"], "garbage");
    assert_eq!(r.events[0].len(), 10 * 1024 * 1024, "forwarded whole");
    assert_echo(&s, "after huge").await;
    assert_echo(&other, "bystander").await;
    assert_up(&mut gw).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upstream_closes_its_sse_answer_early() {
    let opts = HttpOptions {
        priming: true,
        ..HttpOptions::default()
    };
    let Setup {
        http,
        mut gw,
        client: _,
        s,
        other,
    } = Setup::new(Up::Http, opts, "").await;
    let up = http.unwrap();
    for (n, events) in [0u64, 1, 3].into_iter().enumerate() {
        let t0 = Instant::now();
        let r = tokio::time::timeout(
            Duration::from_secs(15),
            s.request_with_id(
                json!(format!("early-{n}")),
                "tools/call",
                json!({"name": "close_early", "arguments": {"events": events}}),
            ),
        )
        .await
        .expect("answered, not left hanging");
        assert_eq!(r.status, 200, "{r:?}");
        assert_eq!(r.last()["id"], format!("early-{n}"), "{r:?}");
        assert_eq!(r.error_code(), Some(-32003), "upstream error: {r:?}");
        // What the upstream sent before it gave up still reached the client.
        let notes = r
            .messages
            .iter()
            .filter(|m| m.get("method").is_some())
            .count();
        assert_eq!(notes as u64, events, "{r:?}");
        eprintln!(
            "close_early {events} events: error after {:?}",
            t0.elapsed()
        );
        // A protocol error fails the request, not the session.
        assert_echo(&s, &format!("after close_early {events}")).await;
    }
    assert_eq!(up.stats().closed_early, 3);
    assert_eq!(
        gw.metric("mcpgate_upstream_errors_total{kind=\"protocol\"}")
            .await,
        3.0
    );
    assert_eq!(gw.metric("mcpgate_sessions_active").await, 2.0);
    assert_echo(&other, "bystander").await;
    assert_up(&mut gw).await;
}
