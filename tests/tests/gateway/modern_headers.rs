//! The 2026-07-28 header checks: every mismatch or omission gets its status and JSON-RPC
//! code with the request's id, before anything goes upstream (the upstream's request
//! count does not move), and other traffic goes on. Valid requests pass with their
//! mirrored and `Mcp-Param-*` headers re-emitted, and never the client's `Authorization`.

use mcpgate_testkit::{HttpOptions, HttpServer};
use mcpgate_tests::{Client, Gateway};
use reqwest::Method;
use serde_json::{Value, json};

const V: &str = "2026-07-28";

fn meta() -> Value {
    json!({"io.modelcontextprotocol/protocolVersion": V, "io.modelcontextprotocol/clientCapabilities": {}})
}

fn call(id: u64, name: &str) -> Value {
    json!({"jsonrpc":"2.0","id":id,"method":"tools/call","params":{"name":name,"arguments":{},"_meta":meta()}})
}

struct Case {
    name: &'static str,
    headers: Vec<(&'static str, &'static str)>,
    body: Value,
    status: u16,
    code: i64,
}

#[tokio::test]
async fn mismatched_and_missing_headers_are_refused_before_the_upstream() {
    let up = HttpServer::start("127.0.0.1:0".parse().unwrap(), HttpOptions::default())
        .await
        .unwrap();
    // protocol pinned: no discovery probe reaches the upstream either.
    let gw = Gateway::http(&up.url(), "protocol = \"2026-07-28\"\n");
    let std_headers = |method: &'static str, name: Option<&'static str>| {
        let mut h = vec![("mcp-protocol-version", V), ("mcp-method", method)];
        if let Some(n) = name {
            h.push(("mcp-name", n));
        }
        h
    };
    let cases = vec![
        Case {
            name: "wrong Mcp-Method",
            headers: std_headers("tools/list", Some("echo")),
            body: call(1, "echo"),
            status: 400,
            code: -32020,
        },
        Case {
            name: "Mcp-Method in another case",
            headers: std_headers("TOOLS/CALL", Some("echo")),
            body: call(2, "echo"),
            status: 400,
            code: -32020,
        },
        Case {
            name: "missing Mcp-Method",
            headers: vec![("mcp-protocol-version", V), ("mcp-name", "echo")],
            body: call(3, "echo"),
            status: 400,
            code: -32020,
        },
        Case {
            name: "wrong Mcp-Name",
            headers: std_headers("tools/call", Some("other")),
            body: call(4, "echo"),
            status: 400,
            code: -32020,
        },
        Case {
            name: "missing Mcp-Name",
            headers: std_headers("tools/call", None),
            body: call(5, "echo"),
            status: 400,
            code: -32020,
        },
        Case {
            name: "base64 Mcp-Name that decodes to another name",
            headers: std_headers("tools/call", Some("=?base64?b3RoZXI=?=")),
            body: call(6, "echo"),
            status: 400,
            code: -32020,
        },
        Case {
            name: "invalid base64 in Mcp-Name",
            headers: std_headers("tools/call", Some("=?base64?***?=")),
            body: call(7, "echo"),
            status: 400,
            code: -32020,
        },
        Case {
            name: "version header differs from _meta",
            headers: std_headers("tools/call", Some("echo")),
            body: json!({"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"echo","_meta":{"io.modelcontextprotocol/protocolVersion":"2025-11-25","io.modelcontextprotocol/clientCapabilities":{}}}}),
            status: 400,
            code: -32020,
        },
        Case {
            name: "missing _meta protocol version",
            headers: std_headers("tools/list", None),
            body: json!({"jsonrpc":"2.0","id":9,"method":"tools/list","params":{}}),
            status: 400,
            code: -32602,
        },
        Case {
            name: "missing _meta client capabilities",
            headers: std_headers("tools/list", None),
            body: json!({"jsonrpc":"2.0","id":10,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":V}}}),
            status: 400,
            code: -32602,
        },
        Case {
            name: "Mcp-Method sent twice",
            headers: vec![
                ("mcp-protocol-version", V),
                ("mcp-method", "tools/list"),
                ("mcp-method", "tools/list"),
            ],
            body: json!({"jsonrpc":"2.0","id":11,"method":"tools/list","params":{"_meta":meta()}}),
            status: 400,
            code: -32020,
        },
        Case {
            name: "unsupported version",
            headers: vec![
                ("mcp-protocol-version", "2099-01-01"),
                ("mcp-method", "tools/list"),
            ],
            body: json!({"jsonrpc":"2.0","id":12,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2099-01-01","io.modelcontextprotocol/clientCapabilities":{}}}}),
            status: 400,
            code: -32022,
        },
        Case {
            name: "a JSON-RPC response posted",
            headers: vec![("mcp-protocol-version", V)],
            body: json!({"jsonrpc":"2.0","id":13,"result":{}}),
            status: 400,
            code: -32600,
        },
        Case {
            name: "a batch",
            headers: vec![("mcp-protocol-version", V)],
            body: json!([{"jsonrpc":"2.0","id":14,"method":"tools/list","params":{"_meta":meta()}}]),
            status: 400,
            code: -32600,
        },
    ];
    let http = reqwest::Client::new();
    for k in &cases {
        let mut req = http
            .post(gw.url())
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .body(k.body.to_string());
        for (h, v) in &k.headers {
            req = req.header(*h, *v);
        }
        let resp = req.send().await.unwrap();
        let status = resp.status().as_u16();
        let body: Value = resp.json().await.unwrap_or(Value::Null);
        assert_eq!(status, k.status, "{}: {body}", k.name);
        assert_eq!(body["error"]["code"], k.code, "{}: {body}", k.name);
        if let Some(id) = k.body.get("id") {
            assert_eq!(
                &body["id"], id,
                "{}: the error carries the request's id",
                k.name
            );
        }
    }
    let unsupported: Value = http
        .post(gw.url())
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2099-01-01")
        .body(cases[11].body.to_string())
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(unsupported["error"]["data"]["supported"], json!([V]));
    assert_eq!(unsupported["error"]["data"]["requested"], "2099-01-01");
    assert_eq!(up.stats().posts, 0, "nothing refused reached the upstream");
    // 2026-07-28 has no GET stream and no DELETE.
    for m in [Method::GET, Method::DELETE] {
        let r = http
            .request(m.clone(), gw.url())
            .header("accept", "text/event-stream")
            .header("mcp-protocol-version", V)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 405, "{m}");
    }

    // A valid request passes, base64 and whitespace decoded, with its headers re-emitted
    // (an unknown Mcp-Param-* untouched) and the client's Authorization left behind.
    let mut valid = call(20, "echo");
    valid["params"]["arguments"] = json!({"text": "valid"});
    let r = Client::new(&gw.url())
        .post_raw(
            &[
                ("content-type", "application/json"),
                ("accept", "application/json, text/event-stream"),
                ("mcp-protocol-version", V),
                ("mcp-method", "tools/call"),
                ("mcp-name", " =?base64?ZWNobw==?= "),
                ("mcp-param-region", "=?base64?w7wtMQ==?="),
                ("authorization", "Bearer client-secret"),
            ],
            valid.to_string(),
        )
        .await;
    let (status, body) = (r.status, &r.body);
    assert!(
        !body.contains("-32020"),
        "passed validation: {status} {body}"
    );
    // And was served: 200 with the echo, for request 20.
    assert_eq!(status, 200, "{r:?}");
    assert_eq!(r.error_code(), None, "{r:?}");
    assert_eq!(r.last()["id"], 20, "{r:?}");
    assert_eq!(r.text(), "valid", "{r:?}");
    assert_eq!(
        up.stats().posts,
        1,
        "the valid request reached the upstream"
    );
    let seen = up.stats().last_headers;
    let header = |n: &str| seen.iter().find(|(k, _)| k == n).map(|(_, v)| v.clone());
    assert_eq!(header("mcp-method").as_deref(), Some("tools/call"));
    assert_eq!(
        header("mcp-name").as_deref().map(str::trim),
        Some("=?base64?ZWNobw==?=")
    );
    assert_eq!(
        header("mcp-param-region").as_deref(),
        Some("=?base64?w7wtMQ==?=")
    );
    assert_eq!(header("mcp-protocol-version").as_deref(), Some(V));
    assert!(header("authorization").is_none(), "{seen:?}");
    assert!(header("mcp-session-id").is_none(), "{seen:?}");

    // Session-era traffic on the same endpoint is untouched.
    let s = Client::new(&gw.url()).initialize().await;
    assert_eq!(
        s.call("echo", json!({"text":"still"})).await.text(),
        "still"
    );
    assert_eq!(s.delete().await, 200);
}
