//! The official TypeScript and Python SDK clients through mcpgate, against the official
//! everything server (stdio and Streamable HTTP): initialize → tools/list → tools/call →
//! DELETE, then the gateway holds no session and (stdio) no child.
//!
//! Needs `scripts/setup-test-deps` (tests/clients/node_modules and .venv); without them
//! these tests fail, they never pass silently.

use std::time::Duration;

use mcpgate_tests::clients::{Everything, Sdk, everything_stdio_toml, run_client};
use mcpgate_tests::{Gateway, children_of, wait_until};
use serde_json::Value;

/// Asserts what every client run must show; returns the session id the client saw.
fn check_client_result(sdk: Sdk, v: &Value, message: &str) -> String {
    assert_eq!(v["ok"], true, "{sdk:?}: {v}");
    assert_eq!(
        v["serverInfo"]["name"], "mcp-servers/everything",
        "{sdk:?}: {v}"
    );
    let tools: Vec<&str> = v["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("{sdk:?}: no tools in {v}"))
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(tools.contains(&"echo"), "{sdk:?}: tools {tools:?}");
    assert_eq!(
        v["callResult"]["content"][0]["text"],
        format!("Echo: {message}"),
        "{sdk:?}: {v}"
    );
    assert_ne!(v["callResult"]["isError"], true, "{sdk:?}: {v}");
    assert_eq!(
        v["terminated"], true,
        "{sdk:?}: the DELETE must succeed: {v}"
    );
    assert_eq!(v["deleteStatus"], 200, "{sdk:?}: {v}");
    let id = v["sessionId"]
        .as_str()
        .unwrap_or_else(|| panic!("{sdk:?}: no sessionId in {v}"))
        .to_owned();
    // mcpgate mints its own ids (32 hex chars); the everything server's are dashed UUIDs.
    assert!(
        !id.contains('-') && id.len() >= 32,
        "{sdk:?}: the client saw {id:?}, not a gateway-minted session id"
    );
    id
}

/// A gateway in front of `node everything_server.mjs stdio` (one child per session).
fn stdio_gateway() -> Gateway {
    stdio_gateway_with("")
}

fn stdio_gateway_with(listen: &str) -> Gateway {
    Gateway::start(&format!("{listen}{}", everything_stdio_toml()))
}

/// The SDK client through mcpgate's TLS listener (`https://127.0.0.1:PORT/mcp`).
async fn sdk_through_tls_listener(sdk: Sdk) {
    let pki = mcpgate_tests::Pki::new();
    let gw = stdio_gateway_with(&format!(
        "[listen]\ntls_cert = {:?}\ntls_key = {:?}\n",
        pki.server.cert, pki.server.key
    ));
    assert!(gw.url().starts_with("https://127.0.0.1:"), "{}", gw.url());
    let message = format!("hello mcpgate from {sdk:?} over https");
    let v = run_client(sdk, &gw.url(), &message, Some(&pki.ca), &[]).await;
    check_client_result(sdk, &v, &message);
}

/// A legacy HTTP+SSE client pointed at `/mcp` (python mcp-proxy's default) gets the
/// legacy transport there (the 2025-03-26 backwards-compatibility probe) instead of 400.
#[tokio::test]
async fn legacy_sse_client_pointed_at_the_mcp_endpoint() {
    let gw = stdio_gateway();
    let message = "legacy client on /mcp";
    let v = run_client(Sdk::Ts, &gw.url(), message, None, &["--sse"]).await;
    assert_eq!(v["ok"], true, "{v}");
    assert_eq!(v["transport"], "sse", "{v}");
    assert_eq!(
        v["callResult"]["content"][0]["text"],
        format!("Echo: {message}"),
        "{v}"
    );
    gw.assert_drained(Duration::from_secs(10)).await;
}

async fn sdk_over_stdio(sdk: Sdk) {
    let gw = stdio_gateway();
    let message = format!("hello mcpgate from {sdk:?} over stdio");
    let v = run_client(sdk, &gw.url(), &message, None, &[]).await;
    check_client_result(sdk, &v, &message);
    gw.assert_all_closed_by_client(1.0).await;
    let pid = gw.pid();
    assert!(
        wait_until(Duration::from_secs(5), || async {
            children_of(pid).is_empty()
        })
        .await,
        "the everything server child was not reaped after DELETE: {:?}",
        children_of(pid)
    );
    assert_eq!(gw.metric("mcpgate_stdio_children").await, 0.0);
}

async fn sdk_over_http(sdk: Sdk) {
    let up = Everything::start("streamableHttp").await;
    let gw = Gateway::http(&up.url, "");
    let message = format!("hello mcpgate from {sdk:?} over streamableHttp");
    let v = run_client(sdk, &gw.url(), &message, None, &[]).await;
    let client_id = check_client_result(sdk, &v, &message);
    gw.assert_all_closed_by_client(1.0).await;
    // Exactly one upstream session, with an id the client never saw, and the client's
    // DELETE reached it.
    let upstream = up.session_ids();
    assert_eq!(
        upstream.len(),
        1,
        "upstream log:\n{}",
        up.lines().join("\n")
    );
    assert_ne!(upstream[0], client_id);
    assert!(
        upstream[0].contains('-'),
        "upstream ids are UUIDs: {upstream:?}"
    );
    let terminated = format!(
        "Received session termination request for session {}",
        upstream[0]
    );
    assert!(
        wait_until(Duration::from_secs(5), || {
            let seen = up.lines().iter().any(|l| l.contains(&terminated));
            async move { seen }
        })
        .await,
        "the upstream session was not DELETEd; upstream log:\n{}",
        up.lines().join("\n")
    );
}

#[tokio::test]
async fn typescript_sdk_over_stdio_upstream() {
    sdk_over_stdio(Sdk::Ts).await;
}

#[tokio::test]
async fn python_sdk_over_stdio_upstream() {
    sdk_over_stdio(Sdk::Py).await;
}

#[tokio::test]
async fn typescript_sdk_through_the_tls_listener() {
    sdk_through_tls_listener(Sdk::Ts).await;
}

#[tokio::test]
async fn python_sdk_through_the_tls_listener() {
    sdk_through_tls_listener(Sdk::Py).await;
}

#[tokio::test]
async fn typescript_sdk_over_http_upstream() {
    sdk_over_http(Sdk::Ts).await;
}

#[tokio::test]
async fn python_sdk_over_http_upstream() {
    sdk_over_http(Sdk::Py).await;
}
