//! Each limit answers with its status (and `Retry-After`) and leaves other sessions and
//! principals working.

use std::time::Duration;

use mcpgate_testkit::{HttpOptions, HttpServer};
use mcpgate_tests::{Client, Gateway, wait_until};
use serde_json::json;

const A: &str = "principal-a-token-0001";
const B: &str = "principal-b-token-0002";

async fn init(url: &str, token: &str) -> reqwest::Response {
    reqwest::Client::new()
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("authorization", format!("Bearer {token}"))
        .body(json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"l","version":"0"}}}).to_string())
        .send()
        .await
        .unwrap()
}

fn tokens() -> String {
    format!(
        "[auth]\ntokens = [{{ name = \"a\", token = \"{A}\" }}, {{ name = \"b\", token = \"{B}\" }}]\n"
    )
}

#[tokio::test]
async fn sessions_per_principal() {
    let up = HttpServer::start("127.0.0.1:0".parse().unwrap(), HttpOptions::default())
        .await
        .unwrap();
    let gw = Gateway::http(
        &up.url(),
        &format!("[session]\nmax_sessions_per_principal = 2\n{}", tokens()),
    );
    assert_eq!(init(&gw.url(), A).await.status(), 200);
    assert_eq!(init(&gw.url(), A).await.status(), 200);
    let third = init(&gw.url(), A).await;
    assert_eq!(third.status(), 429);
    assert!(third.headers().get("retry-after").is_some());
    assert_eq!(
        third.json::<serde_json::Value>().await.unwrap()["error"]["code"],
        -32002
    );
    assert_eq!(
        init(&gw.url(), B).await.status(),
        200,
        "another principal is unaffected"
    );
}

#[tokio::test]
async fn request_rate_per_principal() {
    let up = HttpServer::start("127.0.0.1:0".parse().unwrap(), HttpOptions::default())
        .await
        .unwrap();
    let gw = Gateway::http(
        &up.url(),
        &format!(
            "[listen]\nrate_limit_per_second = 2\nrate_limit_burst = 3\n{}",
            tokens()
        ),
    );
    let mut statuses = Vec::new();
    for _ in 0..6 {
        statuses.push(init(&gw.url(), A).await.status().as_u16());
    }
    assert!(statuses.contains(&429), "A is limited: {statuses:?}");
    let limited = init(&gw.url(), A).await;
    assert_eq!(limited.status(), 429);
    let wait: u64 = limited.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((1..=2).contains(&wait), "Retry-After {wait}");
    assert_eq!(
        init(&gw.url(), B).await.status(),
        200,
        "B has its own bucket"
    );
    // A client that waits what Retry-After said gets in: the wait is the behaviour under
    // test (the bucket refills with time), not a guess at when something happened.
    tokio::time::sleep(Duration::from_secs(wait)).await;
    assert_eq!(
        init(&gw.url(), A).await.status(),
        200,
        "A may go again after the wait"
    );
}

#[tokio::test]
async fn stdio_children_total_sessions_and_inflight() {
    let gw = Gateway::stdio_testkit(
        &[],
        // Eviction off: this test is about the refusal (field.rs shows eviction).
        "evict_idle = false\n[upstream]\nmax_stdio_children = 1\n[session]\nmax_inflight = 1\n",
    );
    let c = Client::new(&gw.url());
    let s = c.initialize().await;
    let second = c
        .post(None, &json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"l","version":"0"}}}))
        .await;
    assert_eq!(
        (second.status, second.error_code()),
        (503, Some(-32002)),
        "{second:?}"
    );
    assert!(second.header("retry-after").is_some());
    // One request in flight at a time in this session.
    const REQUESTS: &str = "mcpgate_requests_total{era=\"2025\"}";
    let forwarded = gw.metric(REQUESTS).await;
    let slow = {
        let c = c.clone();
        let id = s.id.clone();
        tokio::spawn(async move {
            c.post(Some(&id), &json!({"jsonrpc":"2.0","id":"s","method":"tools/call","params":{"name":"slow","arguments":{"ms":500}}})).await
        })
    };
    // The slow call holds the slot once the gateway has taken it for the upstream.
    let in_flight = wait_until(Duration::from_secs(10), || async {
        gw.metric(REQUESTS).await > forwarded
    })
    .await;
    assert!(in_flight, "the slow call reached the gateway");
    let busy = s.call("echo", json!({"text":"x"})).await;
    assert_eq!((busy.status, busy.error_code()), (429, Some(-32002)));
    assert_eq!(slow.await.unwrap().text(), "slept 500");
    assert_eq!(
        s.call("echo", json!({"text":"again"})).await.text(),
        "again",
        "the slot came back"
    );

    let small = Gateway::stdio_testkit(&[], "evict_idle = false\n[session]\nmax_sessions = 1\n");
    let c2 = Client::new(&small.url());
    let _only = c2.initialize().await;
    let over = c2
        .post(None, &json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"l","version":"0"}}}))
        .await;
    assert_eq!((over.status, over.error_code()), (503, Some(-32002)));
}
