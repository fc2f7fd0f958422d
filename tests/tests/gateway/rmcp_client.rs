//! The official Rust SDK (`rmcp`) as a Streamable HTTP client of mcpgate, in front of the
//! testkit over HTTP and over stdio: initialize → tools/list → tools/call → close.
//!
//! rmcp's Streamable HTTP transport DELETEs its session when the client is closed
//! (`RunningService::cancel`/`close` wait for the transport worker, which sends the
//! DELETE, bounded by a timeout, before it returns), so the gateway must count the
//! session as closed by the client and hold nothing afterwards.

use std::time::Duration;

use mcpgate_testkit::{HttpOptions, HttpServer};
use mcpgate_tests::{Gateway, children_of, wait_until};
use rmcp::ServiceExt;
use rmcp::model::{CallToolRequestParams, ClientConfig};
use rmcp::service::{QuitReason, RoleClient, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use serde_json::json;

const STEP: Duration = Duration::from_secs(30);

async fn connect(url: &str) -> RunningService<RoleClient, ClientConfig> {
    let transport = StreamableHttpClientTransport::from_uri(url.to_owned());
    tokio::time::timeout(STEP, ClientConfig::default().serve(transport))
        .await
        .expect("rmcp initialize timed out")
        .expect("rmcp initialize failed")
}

/// initialize → list_tools → call_tool echo → cancel (DELETE), against `gw`.
async fn rmcp_session(gw: &Gateway, text: &str) {
    let client = connect(&gw.url()).await;
    let info = client.peer_info().expect("the server's initialize result");
    assert_eq!(
        info.server_info.as_ref().map(|i| i.name.as_str()),
        Some("mcpgate-testkit"),
        "{info:?}"
    );
    assert_eq!(gw.metric("mcpgate_sessions_active").await, 1.0);

    let tools = tokio::time::timeout(STEP, client.list_all_tools())
        .await
        .expect("list_tools timed out")
        .expect("list_tools failed");
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    for want in ["echo", "add", "notify"] {
        assert!(names.contains(&want), "{want} missing from {names:?}");
    }

    let args = json!({ "text": text }).as_object().cloned().unwrap();
    let result = tokio::time::timeout(
        STEP,
        client.call_tool(CallToolRequestParams::new("echo").with_arguments(args)),
    )
    .await
    .expect("call_tool timed out")
    .expect("call_tool failed");
    assert_ne!(result.is_error, Some(true), "{result:?}");
    let got = result
        .content
        .first()
        .and_then(|c| c.as_text())
        .map(|t| t.text.as_str());
    assert_eq!(got, Some(text), "{result:?}");

    // Closing the client DELETEs the session (see the module docs).
    let quit = tokio::time::timeout(STEP, client.cancel())
        .await
        .expect("rmcp close timed out")
        .expect("rmcp service task panicked");
    assert!(matches!(quit, QuitReason::Cancelled), "{quit:?}");

    gw.assert_all_closed_by_client(1.0).await;
}

#[tokio::test]
async fn rmcp_client_through_gateway_to_http_testkit() {
    let up = HttpServer::start("127.0.0.1:0".parse().unwrap(), HttpOptions::default())
        .await
        .unwrap();
    let gw = Gateway::http(&up.url(), "");
    rmcp_session(&gw, "hello from rmcp over http").await;
    let stats = up.stats();
    assert_eq!(stats.sessions_created, 1, "{stats:?}");
    assert_eq!(
        stats.sessions_deleted, 1,
        "the DELETE reached the upstream: {stats:?}"
    );
}

#[tokio::test]
async fn rmcp_client_through_gateway_to_stdio_testkit() {
    let gw = Gateway::stdio_testkit(&[], "");
    rmcp_session(&gw, "hello from rmcp over stdio").await;
    let pid = gw.pid();
    assert!(
        wait_until(Duration::from_secs(5), || async {
            children_of(pid).is_empty()
        })
        .await,
        "the testkit child was not reaped: {:?}",
        children_of(pid)
    );
}
