//! URL targets through `mcpgate inspector`: a Streamable HTTP server through `/mcp` (with
//! the UI's upstream headers, never its proxy token or Origin), a stdio target through the
//! same endpoint, and a legacy HTTP+SSE server through `/sse`.

use std::collections::BTreeMap;
use std::time::Duration;

use mcpgate_testkit::{HttpOptions, HttpServer};
use mcpgate_tests::inspector::{
    INIT, Inspector, TOKEN, UI, mcp_post, messages, open_sse, testkit, testkit_toml, text,
};
use mcpgate_tests::{Gateway, children_of, wait_until};
use serde_json::{Value, json};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streamable_http_through_the_mcp_endpoint() {
    let up = HttpServer::start("127.0.0.1:0".parse().unwrap(), HttpOptions::default())
        .await
        .unwrap();
    let toml = testkit_toml(&format!(
        "[[url]]\nname = \"testkit-http\"\nprefix = \"http://{}/\"\ntransports = [\"streamable-http\"]\nheaders = {{ x-from-config = \"cfg\" }}\n",
        up.addr()
    ));
    let insp = Inspector::start(&toml, &[], Some(TOKEN));
    let target = up.url();
    let url = insp.url(
        "/mcp",
        &[("url", &target), ("transportType", "streamable-http")],
    );
    // The UI's custom upstream headers ride along on its requests to the proxy.
    let r = insp
        .ui(reqwest::Method::POST, &url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("authorization", "Bearer upstream-credential")
        .header("x-api-key", "k-123")
        .header("x-custom-auth-headers", r#"["x-api-key"]"#)
        .body(INIT)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    assert_eq!(r.headers()["access-control-allow-origin"], UI);
    let exposed = r.headers()["access-control-expose-headers"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(exposed.contains("mcp-session-id"), "{exposed}");
    let sid = r.headers()["mcp-session-id"].to_str().unwrap().to_owned();
    let init = messages(r).await;
    assert!(init[0]["result"]["protocolVersion"].is_string(), "{init:?}");
    // What reached the upstream: its configured header and the UI's upstream headers,
    // never the proxy token or the browser's Origin.
    let seen: BTreeMap<String, String> = up.stats().last_headers.into_iter().collect();
    assert_eq!(seen.get("x-from-config").map(String::as_str), Some("cfg"));
    assert_eq!(
        seen.get("authorization").map(String::as_str),
        Some("Bearer upstream-credential")
    );
    assert_eq!(seen.get("x-api-key").map(String::as_str), Some("k-123"));
    assert!(!seen.contains_key("x-mcp-proxy-auth"), "{seen:?}");
    assert!(!seen.contains_key("origin"), "{seen:?}");

    let r = mcp_post(
        &insp,
        &url,
        Some(&sid),
        &json!({"jsonrpc":"2.0","method":"notifications/initialized"}),
    )
    .await;
    assert_eq!(r.status().as_u16(), 202);
    // The standalone GET stream, as the transport opens it.
    let get = insp
        .ui(reqwest::Method::GET, &url)
        .header("accept", "text/event-stream")
        .header("mcp-session-id", &sid)
        .header("mcp-protocol-version", "2025-11-25")
        .timeout(Duration::from_secs(3600))
        .send()
        .await
        .unwrap();
    assert_eq!(get.status().as_u16(), 200);
    assert_eq!(get.headers()["access-control-allow-origin"], UI);
    let r = mcp_post(
        &insp,
        &url,
        Some(&sid),
        &json!({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"via /mcp"}}}),
    )
    .await;
    assert_eq!(r.status().as_u16(), 200);
    assert_eq!(text(messages(r).await.last().unwrap()), "via /mcp");
    // The UI's disconnect: DELETE on the same URL.
    let r = insp
        .ui(reqwest::Method::DELETE, &url)
        .header("mcp-session-id", &sid)
        .header("mcp-protocol-version", "2025-11-25")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    drop(get);
    insp.assert_empty(Duration::from_secs(5)).await;
    assert!(
        wait_until(Duration::from_secs(5), || async {
            up.stats().sessions_deleted == 1
        })
        .await
    );

    // The same endpoint with a stdio target (the proxy's /mcp takes every transportType).
    let cmd = testkit();
    let url = insp.url(
        "/mcp",
        &[
            ("command", cmd.as_str()),
            ("args", "stdio"),
            ("env", "{}"),
            ("transportType", "stdio"),
        ],
    );
    let r = mcp_post(
        &insp,
        &url,
        None,
        &serde_json::from_str::<Value>(INIT).unwrap(),
    )
    .await;
    assert_eq!(r.status().as_u16(), 200);
    let sid = r.headers()["mcp-session-id"].to_str().unwrap().to_owned();
    assert_eq!(children_of(insp.pid()).len(), 1);
    let r = mcp_post(
        &insp,
        &url,
        Some(&sid),
        &json!({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"add","arguments":{"a":2,"b":3}}}),
    )
    .await;
    assert_eq!(text(messages(r).await.last().unwrap()), "5");
    let r = insp
        .ui(reqwest::Method::DELETE, &url)
        .header("mcp-session-id", &sid)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    insp.assert_empty(Duration::from_secs(5)).await;
    up.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn legacy_sse_upstream_through_the_sse_endpoint() {
    // A legacy HTTP+SSE server: a plain mcpgate in front of the testkit serves /sse.
    let legacy = Gateway::stdio_testkit(&[], "");
    let toml = testkit_toml(&format!(
        "[[url]]\nname = \"legacy\"\nprefix = \"{}/sse\"\ntransports = [\"sse\"]\n",
        legacy.base
    ));
    let insp = Inspector::start(&toml, &[], Some(TOKEN));
    let target = format!("{}/sse", legacy.base);
    let url = insp.url(
        "/sse",
        &[
            ("url", target.as_str()),
            ("proxyFullAddress", insp.base.as_str()),
            ("transportType", "sse"),
        ],
    );
    let mut s = open_sse(&insp, &url).await.unwrap();
    s.initialize(&insp).await;
    let r = s
        .call(&insp, 1, "echo", json!({"text":"through two gateways"}))
        .await;
    assert_eq!(text(&r), "through two gateways");
    // Streamable HTTP is not allowed for that prefix.
    let r = mcp_post(
        &insp,
        &insp.url(
            "/mcp",
            &[
                ("url", target.as_str()),
                ("transportType", "streamable-http"),
            ],
        ),
        None,
        &serde_json::from_str::<Value>(INIT).unwrap(),
    )
    .await;
    assert_eq!(r.status().as_u16(), 403);
    drop(s);
    insp.assert_empty(Duration::from_secs(10)).await;
    legacy.assert_drained(Duration::from_secs(10)).await;
}
