//! An upstream that dies mid-request fails that session only.

use std::time::Duration;

use mcpgate_testkit::{HttpOptions, HttpServer};
use mcpgate_tests::{Client, Gateway, wait_until};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use serde_json::json;

/// Session-era requests the gateway took for an upstream.
const REQUESTS: &str = "mcpgate_requests_total{era=\"2025\"}";

#[tokio::test]
async fn stdio_child_killed_mid_request() {
    let gw = Gateway::stdio_testkit(&[], "");
    let c = Client::new(&gw.url());
    let victim = c.initialize().await;
    let bystander = c.initialize().await;
    let pid: i32 = victim
        .call("whoami", json!({}))
        .await
        .text()
        .parse()
        .unwrap();
    let other_pid: i32 = bystander
        .call("whoami", json!({}))
        .await
        .text()
        .parse()
        .unwrap();
    assert_ne!(pid, other_pid, "each session has its own process");
    let forwarded = gw.metric(REQUESTS).await;
    let slow = {
        let c = c.clone();
        let id = victim.id.clone();
        tokio::spawn(async move {
            c.post(Some(&id), &json!({"jsonrpc":"2.0","id":"slow-1","method":"tools/call","params":{"name":"slow","arguments":{"ms":10000}}}))
                .await
        })
    };
    // The call is in flight once the gateway has taken it for the upstream.
    let in_flight = wait_until(Duration::from_secs(10), || async {
        gw.metric(REQUESTS).await > forwarded
    })
    .await;
    assert!(in_flight, "the slow call reached the gateway");
    kill(Pid::from_raw(pid), Signal::SIGKILL).unwrap();
    // The bound is the behaviour: the call is answered, not left waiting out its 10 s.
    let r = tokio::time::timeout(Duration::from_secs(5), slow)
        .await
        .expect("in-flight request answered")
        .unwrap();
    assert_eq!(r.last()["id"], "slow-1", "{r:?}");
    assert_eq!(r.error_code(), Some(-32003), "upstream error: {r:?}");
    let next = victim.call("echo", json!({"text":"x"})).await;
    assert_eq!(
        next.status, 404,
        "the session is over; the client re-initialises"
    );
    assert_eq!(
        bystander.call("echo", json!({"text":"fine"})).await.text(),
        "fine"
    );
    // Either reason may be the one counted; the other's sample is then absent.
    assert!(
        gw.metric_or_zero("mcpgate_sessions_closed_total{reason=\"upstream_error\"}")
            .await
            + gw.metric_or_zero("mcpgate_sessions_closed_total{reason=\"upstream_closed\"}")
                .await
            >= 1.0,
        "{}",
        gw.metrics_text().await
    );
}

#[tokio::test]
async fn http_upstream_stopped_mid_request() {
    let doomed = HttpServer::start("127.0.0.1:0".parse().unwrap(), HttpOptions::default())
        .await
        .unwrap();
    let healthy = HttpServer::start("127.0.0.1:0".parse().unwrap(), HttpOptions::default())
        .await
        .unwrap();
    let gw = Gateway::start(&format!(
        "[[server]]\nname = \"doomed\"\ntransport = \"streamable-http\"\nurl = \"{}\"\n\
         [[server]]\nname = \"healthy\"\ntransport = \"streamable-http\"\nurl = \"{}\"\n",
        doomed.url(),
        healthy.url()
    ));
    let victim_c = Client::new(&format!("{}/servers/doomed/mcp", gw.base));
    let other_c = Client::new(&format!("{}/servers/healthy/mcp", gw.base));
    let victim = victim_c.initialize().await;
    let bystander = other_c.initialize().await;
    let received = doomed.stats().requests;
    let slow = {
        let c = victim_c.clone();
        let id = victim.id.clone();
        tokio::spawn(async move {
            c.post(Some(&id), &json!({"jsonrpc":"2.0","id":41,"method":"tools/call","params":{"name":"slow","arguments":{"ms":10000}}}))
                .await
        })
    };
    // The call is in flight once the upstream has it.
    let in_flight = wait_until(Duration::from_secs(10), || async {
        doomed.stats().requests > received
    })
    .await;
    assert!(in_flight, "the slow call reached the upstream");
    doomed.shutdown().await;
    // As above: answered, not left waiting out its 10 s.
    let r = tokio::time::timeout(Duration::from_secs(5), slow)
        .await
        .expect("in-flight request answered")
        .unwrap();
    assert_eq!(r.last()["id"], 41, "{r:?}");
    assert_eq!(r.error_code(), Some(-32003), "{r:?}");
    let next = victim.call("echo", json!({"text":"x"})).await;
    assert_eq!(next.status, 404, "{next:?}");
    assert_eq!(
        bystander.call("echo", json!({"text":"fine"})).await.text(),
        "fine"
    );
    let again = victim_c.post(None, &json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"x","version":"0"}}})).await;
    assert_eq!(
        again.error_code(),
        Some(-32003),
        "re-initialising against a dead upstream is a JSON-RPC error: {again:?}"
    );
    assert!(again.header("mcp-session-id").is_none());
}
