//! The gateway's upstream connections against a server that closes idle keep-alive
//! connections (as Node servers do after 5 s): no call fails because the connection it
//! was about to use was closed while it sat idle, or as the request reached it, and no
//! session ends over it. (Before the lean transport, 3 of 3 runs failed a call with
//! "connection closed before message completed" and ended the session.)

use std::time::Duration;

use mcpgate_testkit::{HttpOptions, HttpServer};
use mcpgate_tests::{Client, Gateway};
use serde_json::json;

/// Calls at about the server's idle-close interval (some just before it fires, some just
/// after): the request that finds its pooled connection closed goes out on a fresh one.
#[tokio::test]
async fn a_server_closing_idle_connections_fails_no_call() {
    const IDLE: Duration = Duration::from_millis(300);
    const CALLS: u64 = 40;
    let up = HttpServer::start(
        "127.0.0.1:0".parse().unwrap(),
        HttpOptions {
            idle_close: Some(IDLE),
            ..HttpOptions::default()
        },
    )
    .await
    .unwrap();
    let gw = Gateway::start(&format!(
        "[[server]]\nname = \"up\"\ntransport = \"streamable-http\"\nurl = \"{}\"\n",
        up.url()
    ));
    let s = Client::new(&format!("{}/servers/up/mcp", gw.base))
        .initialize()
        .await;
    for n in 0..CALLS {
        // Around the idle interval, stepping through ±4 ms of it, where a call meets the
        // close.
        let pause = IDLE - Duration::from_micros(4000) + Duration::from_micros((n * 1300) % 8000);
        tokio::time::sleep(pause).await;
        let text = format!("call {n}");
        let r = s.call("echo", json!({ "text": text })).await;
        assert_eq!(r.status, 200, "call {n}: {r:?}");
        assert_eq!(r.error_code(), None, "call {n}: {r:?}");
        assert_eq!(r.text(), text, "call {n}: {r:?}");
    }
    let stats = up.stats();
    // The server did close the gateway's connections under it, many times.
    assert!(
        stats.idle_closed >= CALLS / 4,
        "the upstream closed only {} idle connections",
        stats.idle_closed
    );
    assert_eq!(stats.sessions_created, 1, "one upstream session throughout");
    // Every request reached the server exactly once (initialize, initialized, the calls):
    // a request sent again was one the server never read.
    assert_eq!(stats.posts, CALLS + 2, "{stats:?}");
    // No reset was counted: the sample appears with its first count, so it is absent...
    assert_eq!(
        gw.metric_or_zero("mcpgate_upstream_errors_total{kind=\"reset\"}")
            .await,
        0.0
    );
    assert_eq!(gw.metric("mcpgate_sessions_active").await, 1.0);
    // ... and this is the sample a reset counts in: a connection the server drops under a
    // call (the testkit's `die`) is one.
    let r = s.call("die", json!({})).await;
    assert_eq!(r.error_code(), Some(-32003), "{r:?}");
    assert_eq!(
        gw.metric("mcpgate_upstream_errors_total{kind=\"reset\"}")
            .await,
        1.0,
        "{}",
        gw.log()
    );
}
