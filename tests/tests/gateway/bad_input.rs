//! Every malformed request gets its precise status and JSON-RPC code, and the gateway
//! keeps serving the sessions it has.

use mcpgate_testkit::{HttpOptions, HttpServer};
use mcpgate_tests::{Client, Gateway};
use reqwest::Method;
use serde_json::json;

const JSON: (&str, &str) = ("content-type", "application/json");
const BOTH: (&str, &str) = ("accept", "application/json, text/event-stream");
const PING: &str = r#"{"jsonrpc":"2.0","id":7,"method":"ping"}"#;

#[tokio::test]
async fn each_bad_request_gets_its_status_and_code() {
    let up = HttpServer::start("127.0.0.1:0".parse().unwrap(), HttpOptions::default())
        .await
        .unwrap();
    let gw = Gateway::http(&up.url(), "[listen]\nmax_body_bytes = 2048\n");
    let c = Client::new(&gw.url());
    let good = c.initialize().await;
    let second = c.initialize().await;
    let sid = good.id.as_str();
    let big = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"ping","params":{{"pad":"{}"}}}}"#,
        "x".repeat(4096)
    );
    let _held_stream = second.open_stream().await;

    struct Case<'a> {
        name: &'a str,
        method: Method,
        headers: Vec<(&'a str, &'a str)>,
        body: String,
        status: u16,
        code: Option<i64>,
    }
    let case =
        |name, method, headers: Vec<(&'static str, &'static str)>, body: &str, status, code| Case {
            name,
            method,
            headers,
            body: body.to_owned(),
            status,
            code,
        };
    let with_sid = |mut h: Vec<(&'static str, &'static str)>, s: &'static str| {
        h.push(("mcp-session-id", s));
        h
    };
    let sid_static: &'static str = Box::leak(sid.to_owned().into_boxed_str());
    let second_static: &'static str = Box::leak(second.id.clone().into_boxed_str());
    let cases = vec![
        case(
            "no session on a non-initialize POST",
            Method::POST,
            vec![JSON, BOTH],
            PING,
            400,
            Some(-32000),
        ),
        case(
            "unknown session",
            Method::POST,
            with_sid(vec![JSON, BOTH], "feedfacefeedfacefeedfacefeedface"),
            PING,
            404,
            Some(-32001),
        ),
        case(
            "unsupported protocol version",
            Method::POST,
            with_sid(
                vec![JSON, BOTH, ("mcp-protocol-version", "1999-01-01")],
                sid_static,
            ),
            PING,
            400,
            // The spec's UnsupportedProtocolVersion (2026-07-28), with data.supported.
            Some(-32022),
        ),
        case(
            "Accept without event-stream",
            Method::POST,
            with_sid(vec![JSON, ("accept", "application/json")], sid_static),
            PING,
            406,
            Some(-32000),
        ),
        case(
            "Accept of another type",
            Method::POST,
            with_sid(vec![JSON, ("accept", "text/html")], sid_static),
            PING,
            406,
            Some(-32000),
        ),
        case(
            "wrong Content-Type",
            Method::POST,
            with_sid(vec![("content-type", "text/plain"), BOTH], sid_static),
            PING,
            415,
            Some(-32000),
        ),
        case(
            "malformed JSON",
            Method::POST,
            with_sid(vec![JSON, BOTH], sid_static),
            "{\"jsonrpc\":",
            400,
            Some(-32700),
        ),
        case(
            "JSON but not JSON-RPC",
            Method::POST,
            with_sid(vec![JSON, BOTH], sid_static),
            r#"{"hello":"world"}"#,
            400,
            Some(-32600),
        ),
        case(
            "body over the limit",
            Method::POST,
            with_sid(vec![JSON, BOTH], sid_static),
            &big,
            413,
            Some(-32600),
        ),
        case(
            "initialize with a session id",
            Method::POST,
            with_sid(vec![JSON, BOTH], sid_static),
            r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}"#,
            400,
            Some(-32000),
        ),
        case(
            "GET without event-stream",
            Method::GET,
            with_sid(vec![("accept", "application/json")], sid_static),
            "",
            406,
            Some(-32000),
        ),
        case(
            "GET unknown session",
            Method::GET,
            with_sid(vec![("accept", "text/event-stream")], "nope"),
            "",
            404,
            Some(-32001),
        ),
        // (A GET without a session that accepts an event stream is a legacy HTTP+SSE
        // client: it gets that transport, see sdk_clients.rs,
        // legacy_sse_client_pointed_at_the_mcp_endpoint.)
        case(
            "GET without session or event-stream",
            Method::GET,
            vec![("accept", "application/json")],
            "",
            406,
            Some(-32000),
        ),
        case(
            "second GET stream",
            Method::GET,
            with_sid(vec![("accept", "text/event-stream")], second_static),
            "",
            409,
            Some(-32000),
        ),
        case(
            "DELETE without session",
            Method::DELETE,
            vec![],
            "",
            400,
            Some(-32000),
        ),
        case(
            "DELETE unknown session",
            Method::DELETE,
            with_sid(vec![], "nope"),
            "",
            404,
            Some(-32001),
        ),
        case(
            "foreign Host (DNS rebinding)",
            Method::POST,
            with_sid(vec![JSON, BOTH, ("host", "evil.example.com")], sid_static),
            PING,
            403,
            Some(-32000),
        ),
        case(
            "foreign Origin",
            Method::POST,
            with_sid(
                vec![JSON, BOTH, ("origin", "http://evil.example.com")],
                sid_static,
            ),
            PING,
            403,
            Some(-32000),
        ),
        case(
            "foreign Origin on GET",
            Method::GET,
            with_sid(
                vec![
                    ("accept", "text/event-stream"),
                    ("origin", "https://evil.example.com"),
                ],
                sid_static,
            ),
            "",
            403,
            Some(-32000),
        ),
        case(
            "PUT",
            Method::PUT,
            with_sid(vec![JSON], sid_static),
            PING,
            405,
            Some(-32000),
        ),
    ];
    let http = reqwest::Client::new();
    for k in cases {
        let mut req = http
            .request(k.method.clone(), gw.url())
            .body(k.body.clone());
        for (h, v) in &k.headers {
            req = req.header(*h, *v);
        }
        let resp = req.send().await.unwrap();
        let status = resp.status().as_u16();
        let body: serde_json::Value = resp.json().await.unwrap_or(json!(null));
        assert_eq!(status, k.status, "{}: status (body {body})", k.name);
        if let Some(code) = k.code {
            assert_eq!(
                body["error"]["code"].as_i64(),
                Some(code),
                "{}: JSON-RPC code in {body}",
                k.name
            );
            assert_eq!(body["jsonrpc"], "2.0", "{}", k.name);
        }
    }
    // Unknown paths are 404 too.
    let r = http
        .get(format!("{}/nowhere", gw.base))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 404);

    // The sessions that existed all along are untouched.
    let r = good.call("echo", json!({"text": "still here"})).await;
    assert_eq!(r.text(), "still here");
    let r = second.call("echo", json!({"text": "me too"})).await;
    assert_eq!(r.text(), "me too");
    assert_eq!(gw.metric("mcpgate_sessions_active").await, 2.0);
}
