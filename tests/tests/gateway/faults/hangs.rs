//! An upstream that never answers: the call times out with -32005, the upstream is told
//! to cancel it, the session's in-flight slot comes back and the session goes on.

use std::time::{Duration, Instant};

use mcpgate_testkit::HttpOptions;
use mcpgate_tests::faults::{Setup, Up, assert_echo, assert_up, stdio_stats};
use mcpgate_tests::wait_until;
use serde_json::json;

/// A hanging call times out; `expect_cancel`: the upstream also got
/// `notifications/cancelled` for it.
async fn upstream_hangs(up: Up, expect_cancel: bool) {
    let Setup {
        http,
        mut gw,
        client: c,
        s,
        other,
    } = Setup::new(
        up,
        HttpOptions::default(),
        "[session]\nrequest_timeout = \"1s\"\nmax_inflight = 1\n",
    )
    .await;

    let accepted = gw.metric("mcpgate_requests_total{era=\"2025\"}").await;
    let hang = {
        let c = c.clone();
        let sid = s.id.clone();
        tokio::spawn(async move {
            let t0 = Instant::now();
            let r = c.post(Some(&sid), &json!({"jsonrpc":"2.0","id":"h-1","method":"tools/call","params":{"name":"hang","arguments":{}}})).await;
            (r, t0.elapsed())
        })
    };
    let in_flight = wait_until(Duration::from_secs(5), || async {
        gw.metric("mcpgate_requests_total{era=\"2025\"}").await > accepted
    })
    .await;
    assert!(in_flight, "the hanging call reached the gateway");
    // The hanging call holds the session's one in-flight slot.
    let busy = s.call("echo", json!({"text": "busy"})).await;
    assert_eq!(busy.status, 429, "max_inflight = 1 is taken: {busy:?}");
    assert_eq!(busy.error_code(), Some(-32002));

    let (r, took) = hang.await.unwrap();
    assert_eq!(r.error_code(), Some(-32005), "upstream timeout: {r:?}");
    assert_eq!(r.last()["id"], "h-1", "{r:?}");
    // Answered by the 1 s request_timeout: not before it (a timer never fires early, so
    // this cannot flake), and not left hanging (a generous bound, only "not stuck").
    assert!(
        took >= Duration::from_millis(900) && took < Duration::from_secs(30),
        "answered after {took:?}"
    );

    // The upstream was told to stop working on it.
    if expect_cancel {
        let cancelled = wait_until(Duration::from_secs(5), || async {
            match &http {
                Some(h) => h.stats().cancelled == 1,
                None => stdio_stats(&s).await["cancelled"] == 1,
            }
        })
        .await;
        assert!(
            cancelled,
            "upstream got no notifications/cancelled; log:\n{}",
            gw.log()
        );
    }

    // The slot came back (max_inflight = 1) and the session goes on: a timeout ends the
    // request, not the session.
    assert_echo(&s, "after the timeout").await;
    assert_eq!(gw.metric("mcpgate_sessions_active").await, 2.0);
    assert_echo(&other, "bystander").await;
    // Again: a leak of one slot per timeout would refuse the second round.
    let r = s.call("hang", json!({})).await;
    assert_eq!(r.error_code(), Some(-32005), "{r:?}");
    assert_echo(&s, "after the second timeout").await;
    if expect_cancel {
        let both = wait_until(Duration::from_secs(5), || async {
            match &http {
                Some(h) => h.stats().cancelled == 2,
                None => stdio_stats(&s).await["cancelled"] == 2,
            }
        })
        .await;
        assert!(both, "second cancellation; log:\n{}", gw.log());
    }
    assert_eq!(s.delete().await, 200);
    assert_up(&mut gw).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upstream_hangs_http() {
    upstream_hangs(Up::Http, true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upstream_hangs_stdio() {
    upstream_hangs(Up::Stdio, false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upstream_hangs_stdio_and_is_cancelled() {
    upstream_hangs(Up::Stdio, true).await;
}
