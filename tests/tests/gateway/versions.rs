//! Protocol versions: each session-era version negotiates through the gateway, its
//! `MCP-Protocol-Version` header is handled as that version says, and 2025-03-26 batches
//! are accepted.

use mcpgate_testkit::{HttpOptions, HttpServer};
use mcpgate_tests::{Client, Gateway};
use serde_json::{Value, json};

const VERSIONS: [&str; 4] = ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"];

async fn init(c: &Client, version: &str) -> String {
    let r = c
        .post(
            None,
            &json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{
                "protocolVersion":version,"capabilities":{},"clientInfo":{"name":"v","version":"0"}}}),
        )
        .await;
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(
        r.last()["result"]["protocolVersion"],
        version,
        "the upstream's negotiated version reaches the client"
    );
    r.header("mcp-session-id").unwrap().to_owned()
}

async fn ping(c: &Client, sid: &str, version: Option<&str>) -> u16 {
    let mut h = vec![
        ("content-type", "application/json"),
        ("accept", "application/json, text/event-stream"),
        ("mcp-session-id", sid),
    ];
    if let Some(v) = version {
        h.push(("mcp-protocol-version", v));
    }
    c.post_raw(&h, r#"{"jsonrpc":"2.0","id":9,"method":"ping"}"#)
        .await
        .status
}

#[tokio::test]
async fn every_version_negotiates_and_its_header_is_checked() {
    let up = HttpServer::start("127.0.0.1:0".parse().unwrap(), HttpOptions::default())
        .await
        .unwrap();
    let gw = Gateway::http(&up.url(), "");
    let c = Client::new(&gw.url());
    for v in VERSIONS {
        let sid = init(&c, v).await;
        assert_eq!(ping(&c, &sid, Some(v)).await, 200, "{v} with its header");
        // The upstream hears the negotiated version, whatever the client sent.
        let upstream_version = up
            .stats()
            .last_headers
            .iter()
            .find(|(k, _)| k == "mcp-protocol-version")
            .map(|(_, v)| v.clone());
        assert_eq!(
            upstream_version.as_deref(),
            Some(v),
            "upstream header for {v}"
        );
        assert_eq!(
            ping(&c, &sid, None).await,
            200,
            "{v}: no header means 2025-03-26, accepted"
        );
        assert_eq!(
            ping(&c, &sid, Some("2099-01-01")).await,
            400,
            "{v}: unsupported header"
        );
        assert_eq!(
            ping(&c, &sid, Some("not a version")).await,
            400,
            "{v}: garbage header"
        );
    }
}

#[tokio::test]
async fn batches_of_2025_03_26() {
    let up = HttpServer::start("127.0.0.1:0".parse().unwrap(), HttpOptions::default())
        .await
        .unwrap();
    let gw = Gateway::http(&up.url(), "");
    let c = Client::new(&gw.url());
    let sid = init(&c, "2025-03-26").await;
    let h = [
        ("content-type", "application/json"),
        ("accept", "application/json, text/event-stream"),
        ("mcp-session-id", sid.as_str()),
    ];
    let batch = json!([
        {"jsonrpc":"2.0","method":"notifications/initialized"},
        {"jsonrpc":"2.0","id":"a","method":"ping"},
        {"jsonrpc":"2.0","id":"b","method":"tools/call","params":{"name":"echo","arguments":{"text":"in a batch"}}},
        {"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"add","arguments":{"a":2,"b":3}}}
    ]);
    let r = c.post_raw(&h, batch.to_string()).await;
    assert_eq!(r.status, 200, "{r:?}");
    let answers: Vec<Value> = serde_json::from_str(&r.body).unwrap();
    assert_eq!(answers.len(), 3, "one response per request: {answers:?}");
    let by_id = |id: Value| {
        answers
            .iter()
            .find(|a| a["id"] == id)
            .unwrap_or_else(|| panic!("no answer for {id}"))
    };
    assert_eq!(by_id(json!("a"))["result"], json!({}));
    assert_eq!(
        by_id(json!("b"))["result"]["content"][0]["text"],
        "in a batch"
    );
    assert_eq!(by_id(json!(1))["result"]["content"][0]["text"], "5");
    let only_notes = c
        .post_raw(
            &h,
            r#"[{"jsonrpc":"2.0","method":"notifications/roots/list_changed"}]"#,
        )
        .await;
    assert_eq!(only_notes.status, 202);
    let with_init = c
        .post_raw(&h, r#"[{"jsonrpc":"2.0","id":5,"method":"initialize","params":{"protocolVersion":"2025-03-26","capabilities":{},"clientInfo":{"name":"v","version":"0"}}}]"#)
        .await;
    assert_eq!(with_init.status, 400);
    let empty = c.post_raw(&h, "[]").await;
    assert_eq!((empty.status, empty.error_code()), (400, Some(-32600)));
}
