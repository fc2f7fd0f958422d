//! Per-child bounds: a child over its memory or process bound is ended by the gateway;
//! its session ends with the reason, counted; the other sessions of the same server go on.

use mcpgate_tests::{Client, Gateway, Reply, Session, bin};
use serde_json::json;

/// A testkit server under `limits`; its runtime has two workers whatever the host's cores
/// (so its own threads are a known few under a process bound).
fn bounded(limits: &str) -> Gateway {
    Gateway::start(&format!(
        "[[server]]\nname = \"up\"\ntransport = \"stdio\"\ncommand = [{:?}, \"stdio\"]\n\
         env = {{ TOKIO_WORKER_THREADS = \"2\" }}\n[server.limits]\n{limits}\n",
        bin("mcpgate-testkit").display().to_string()
    ))
}

/// The first failed answer of `s`: `first`, or that of a slow call made after it. The
/// answer that crossed the bound may be sent before the sampler (every 200 ms) sees it;
/// the call after it is then in flight when the child is ended.
async fn ended(s: &Session, first: Reply) -> Reply {
    if first.error_code().is_some() {
        return first;
    }
    s.call("slow", json!({"ms": 5000})).await
}

#[tokio::test]
async fn a_child_past_its_memory_bound_ends_only_its_own_session() {
    let gw = bounded("memory_mib = 64");
    let c = Client::new(&gw.url());
    let (hog, bystander) = (c.initialize().await, c.initialize().await);
    // Under the bound: fine.
    assert_eq!(
        hog.call("hold_memory", json!({"mib": 16})).await.text(),
        "holding 16 MiB more"
    );
    let first = hog.call("hold_memory", json!({"mib": 200})).await;
    let r = ended(&hog, first).await;
    assert_eq!(r.error_code(), Some(-32003), "{r:?}");
    let msg = r.last()["error"]["message"].as_str().unwrap_or_default();
    assert!(
        msg.contains("memory limit 64 MiB reached"),
        "the reason reaches the client: {msg}"
    );
    assert_eq!(
        hog.call("echo", json!({"text": "x"})).await.status,
        404,
        "its session is over"
    );
    assert_eq!(
        bystander.call("echo", json!({"text": "fine"})).await.text(),
        "fine"
    );
    assert!(
        gw.metric("mcpgate_upstream_errors_total{kind=\"limit\"}")
            .await
            >= 1.0
    );
    assert!(
        gw.log().contains("memory limit 64 MiB reached"),
        "{}",
        gw.log()
    );
}

#[tokio::test]
async fn a_child_past_its_process_bound_ends_with_that_reason() {
    let gw = bounded("processes = 40");
    let c = Client::new(&gw.url());
    let (forker, bystander) = (c.initialize().await, c.initialize().await);
    let first = forker.call("threads", json!({"count": 100})).await;
    let ended = ended(&forker, first).await;
    assert_eq!(ended.error_code(), Some(-32003), "{ended:?}");
    let text = format!("{ended:?}{}", gw.log());
    assert!(text.contains("process limit 40 reached"), "{text}");
    assert_eq!(
        bystander.call("echo", json!({"text": "fine"})).await.text(),
        "fine"
    );
}
