//! OpenTelemetry: a tools/call through mcpgate with a client `traceparent` reaches an OTLP
//! receiver as a `mcp` span (child of the client's span, with the server, session, method,
//! tool name, era and outcome) with an `upstream` child span, and the upstream sees a
//! `traceparent` naming the gateway's upstream span as its parent.

use std::time::Duration;

use mcpgate_testkit::{HttpOptions, HttpServer};
use mcpgate_tests::otlp::Receiver;
use mcpgate_tests::{Client, Gateway, Launch, wait_until};
use serde_json::json;

const TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const CLIENT_SPAN: &str = "00f067aa0ba902b7";

#[tokio::test]
async fn a_tools_call_is_traced_to_otlp_and_into_the_upstream() {
    let otlp = Receiver::start().await;
    let upstream = HttpServer::start("127.0.0.1:0".parse().unwrap(), HttpOptions::default())
        .await
        .unwrap();
    let gw = Gateway::launch(
        &format!(
            "[[server]]\nname = \"kit\"\ntransport = \"streamable-http\"\nurl = \"{}\"\n\
             [telemetry]\notlp_endpoint = \"{}\"\nservice_name = \"mcpgate-test\"\n",
            upstream.url(),
            otlp.endpoint
        ),
        Launch {
            env: vec![("OTEL_BSP_SCHEDULE_DELAY".into(), "100".into())],
            ..Launch::default()
        },
    );
    let c = Client::new(&format!("{}/servers/kit/mcp", gw.base));
    let s = c.initialize().await;
    let traceparent = format!("00-{TRACE}-{CLIENT_SPAN}-01");
    let r = c
        .post_raw(
            &[
                ("content-type", "application/json"),
                ("accept", "application/json, text/event-stream"),
                ("mcp-session-id", &s.id),
                ("mcp-protocol-version", "2025-11-25"),
                ("traceparent", &traceparent),
            ],
            json!({"jsonrpc":"2.0","id":9,"method":"tools/call",
                   "params":{"name":"echo","arguments":{"text":"traced"}}})
            .to_string(),
        )
        .await;
    assert_eq!(r.text(), "traced", "{r:?}");
    // The upstream got a traceparent of the same trace, whose parent is not the client's
    // span but the gateway's.
    let headers = upstream.stats().last_headers;
    let seen = headers
        .iter()
        .find(|(k, _)| k == "traceparent")
        .map(|(_, v)| v.clone())
        .unwrap_or_else(|| panic!("no traceparent upstream: {headers:?}"));
    let parts: Vec<&str> = seen.split('-').collect();
    assert_eq!(parts.len(), 4, "{seen}");
    assert_eq!(parts[1], TRACE, "same trace: {seen}");
    assert_ne!(
        parts[2], CLIENT_SPAN,
        "the gateway's span is the parent: {seen}"
    );

    let got = wait_until(Duration::from_secs(15), || async {
        otlp.spans()
            .iter()
            .any(|s| s.trace_id == TRACE && s.name == "upstream")
    })
    .await;
    let spans = otlp.spans();
    assert!(got, "no spans of the call: {spans:#?}\n{}", gw.log());
    let call = spans
        .iter()
        .find(|s| s.trace_id == TRACE && s.name == "mcp")
        .unwrap_or_else(|| panic!("no mcp span: {spans:#?}"));
    let up = spans
        .iter()
        .find(|s| s.trace_id == TRACE && s.name == "upstream")
        .unwrap();
    assert_eq!(
        call.parent_id, CLIENT_SPAN,
        "the client's span is the parent"
    );
    assert_eq!(
        up.parent_id, call.span_id,
        "upstream is a child of the request span"
    );
    assert_eq!(
        parts[2], up.span_id,
        "the upstream's traceparent names the upstream span"
    );
    assert_eq!(call.service, "mcpgate-test");
    assert_eq!(call.attr("server"), Some("kit"), "{call:?}");
    assert_eq!(call.attr("method"), Some("tools/call"), "{call:?}");
    assert_eq!(call.attr("name"), Some("echo"), "{call:?}");
    assert_eq!(call.attr("era"), Some("2025"), "{call:?}");
    assert_eq!(call.attr("outcome"), Some("200"), "{call:?}");
    let tag = call.attr("session").unwrap_or_default();
    assert!(
        !tag.is_empty() && s.id.starts_with(tag),
        "session tag {tag:?} of {}",
        s.id
    );
}
