//! Session lifecycle: DELETE, idle expiry, an upstream that resets on DELETE, shutdown.

use std::time::Duration;

use mcpgate_testkit::{HttpOptions, HttpServer};
use mcpgate_tests::{Client, Gateway, children_of, wait_until};
use serde_json::json;

async fn testkit(opts: HttpOptions) -> HttpServer {
    HttpServer::start("127.0.0.1:0".parse().unwrap(), opts)
        .await
        .unwrap()
}

#[tokio::test]
async fn delete_ends_the_session_and_its_upstream_session() {
    let up = testkit(HttpOptions::default()).await;
    let gw = Gateway::http(&up.url(), "");
    let c = Client::new(&gw.url());
    let s = c.initialize().await;
    assert_eq!(s.call("echo", json!({"text":"a"})).await.text(), "a");
    // The client never sees the upstream's session id.
    let upstream_id = s.call("whoami", json!({})).await.text();
    assert_ne!(upstream_id, s.id);
    assert!(s.id.len() >= 32 && s.id.bytes().all(|b| (0x21..=0x7e).contains(&b)));
    assert_eq!(s.delete().await, 200);
    assert_eq!(up.stats().sessions_deleted, 1);
    let r = s.call("echo", json!({"text":"b"})).await;
    assert_eq!((r.status, r.error_code()), (404, Some(-32001)));
    assert_eq!(s.delete().await, 404, "a second DELETE finds nothing");
    assert_eq!(gw.metric("mcpgate_sessions_active").await, 0.0);
    assert_eq!(
        gw.metric("mcpgate_sessions_closed_total{reason=\"client_delete\"}")
            .await,
        1.0
    );
}

#[tokio::test]
async fn upstream_reset_on_delete_still_answers_the_client() {
    let up = testkit(HttpOptions {
        reset_on_delete: true,
        ..Default::default()
    })
    .await;
    let gw = Gateway::http(&up.url(), "");
    let c = Client::new(&gw.url());
    let other = c.initialize().await;
    let s = c.initialize().await;
    assert_eq!(
        s.delete().await,
        200,
        "the client's DELETE succeeds although the upstream reset"
    );
    let r = s.call("echo", json!({"text":"x"})).await;
    assert_eq!(r.status, 404);
    assert_eq!(
        up.stats().sessions_deleted,
        1,
        "the upstream did get the DELETE"
    );
    assert!(
        gw.metric("mcpgate_upstream_errors_total{kind=\"delete_failed\"}")
            .await
            >= 1.0,
        "the reset is counted"
    );
    assert!(gw.log().contains("delete failed"), "and logged");
    assert_eq!(other.call("echo", json!({"text":"ok"})).await.text(), "ok");
    let health = reqwest::get(format!("{}/healthz", gw.base)).await.unwrap();
    assert_eq!(health.status().as_u16(), 200);
}

#[tokio::test]
async fn idle_sessions_expire_through_the_teardown_path() {
    let up = testkit(HttpOptions::default()).await;
    let gw = Gateway::http(&up.url(), "[session]\nidle_timeout = \"300ms\"\n");
    let c = Client::new(&gw.url());
    let s = c.initialize().await;
    let busy = c.initialize().await;
    let mut stream = busy.open_stream().await; // an open stream keeps a session alive
    assert_eq!(stream.recv().await.unwrap()["status"], 200);
    assert!(
        wait_until(Duration::from_secs(5), || async {
            up.stats().sessions_deleted == 1
        })
        .await
    );
    let r = s.call("echo", json!({"text":"late"})).await;
    assert_eq!(r.status, 404);
    assert_eq!(
        gw.metric("mcpgate_sessions_closed_total{reason=\"idle\"}")
            .await,
        1.0
    );
    assert_eq!(
        busy.call("echo", json!({"text":"alive"})).await.text(),
        "alive"
    );
}

#[tokio::test]
async fn sigterm_closes_every_session_and_leaves_no_child() {
    let mut gw = Gateway::stdio_testkit(&[], "");
    let c = Client::new(&gw.url());
    let mut sessions = Vec::new();
    for _ in 0..5 {
        sessions.push(c.initialize().await);
    }
    let pid = gw.pid();
    assert_eq!(children_of(pid).len(), 5, "one child per session");
    assert_eq!(gw.metric("mcpgate_stdio_children").await, 5.0);
    assert_eq!(gw.stop(), Some(0), "exit 0 after the drain");
    assert!(children_of(pid).is_empty());
    let log = gw.log();
    assert_eq!(log.matches("reason=\"shutdown\"").count(), 5, "{log}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_drains_in_flight_requests_then_exits() {
    let mut gw = Gateway::stdio_testkit(&[], "[listen]\ndrain = \"10s\"\n");
    let c = Client::new(&gw.url());
    let s = c.initialize().await;
    let ready = reqwest::get(format!("{}/readyz", gw.base)).await.unwrap();
    assert_eq!(ready.status().as_u16(), 200);
    const REQUESTS: &str = "mcpgate_requests_total{era=\"2025\"}";
    let forwarded = gw.metric(REQUESTS).await;
    let slow = {
        let c = c.clone();
        let id = s.id.clone();
        tokio::spawn(async move {
            c.post(Some(&id), &json!({"jsonrpc":"2.0","id":"drain","method":"tools/call","params":{"name":"slow","arguments":{"ms":1500}}}))
                .await
        })
    };
    // The call is in flight once the gateway has taken it for the upstream.
    let in_flight = wait_until(Duration::from_secs(10), || async {
        gw.metric(REQUESTS).await > forwarded
    })
    .await;
    assert!(in_flight, "the slow call reached the gateway");
    let pid = gw.pid();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    // The drain has begun once readiness says so (the signal is handled asynchronously).
    let readyz = || async {
        reqwest::get(format!("{}/readyz", gw.base))
            .await
            .unwrap()
            .status()
            .as_u16()
    };
    let draining = wait_until(Duration::from_secs(10), || async { readyz().await == 503 }).await;
    assert!(draining, "readiness goes false while draining");
    let ready = reqwest::get(format!("{}/readyz", gw.base)).await.unwrap();
    assert_eq!(
        ready.status().as_u16(),
        503,
        "readiness goes false while draining"
    );
    let health = reqwest::get(format!("{}/healthz", gw.base)).await.unwrap();
    assert_eq!(health.status().as_u16(), 200, "still alive");
    let refused = Client::new(&gw.url())
        .post(None, &json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"late","version":"0"}}}))
        .await;
    assert_eq!(
        refused.status, 503,
        "new sessions are refused while draining"
    );
    assert!(refused.header("retry-after").is_some());
    let r = slow.await.unwrap();
    assert_eq!(
        r.text(),
        "slept 1500",
        "the in-flight request finished: {r:?}"
    );
    assert_eq!(gw.stop(), Some(0));
    assert!(children_of(pid).is_empty());
}
