//! What `mcpgate inspector` refuses, and that a refusal starts nothing: targets outside the
//! allowlist (403), malformed queries (400), a missing or wrong token (401), a foreign
//! Origin or Host (403); and `--dangerously-omit-auth`, which is loud and still checks the
//! Origin and the allowlist.

use std::time::Duration;

use mcpgate_testkit::{HttpOptions, HttpServer};
use mcpgate_tests::inspector::{
    INIT, Inspector, TOKEN, UI, mcp_post, message, open_sse, stdio_query, testkit, testkit_toml,
};
use mcpgate_tests::{children_of, wait_until};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusals_have_the_documented_statuses_and_start_nothing() {
    let up = HttpServer::start("127.0.0.1:0".parse().unwrap(), HttpOptions::default())
        .await
        .unwrap();
    let port = up.addr().port();
    let toml = testkit_toml(&format!(
        "[[url]]\nprefix = \"http://127.0.0.1:{port}/mcp\"\n"
    ));
    let insp = Inspector::start(&toml, &[], Some(TOKEN));
    let cmd = testkit();

    // Targets outside the allowlist: 403 with a message naming what was refused.
    let refused_stdio: [(&str, &str, &str, &str); 5] = [
        ("/bin/sh", "-c id", "{}", "command not allowed"),
        ("sh", "", "{}", "command not allowed"),
        (cmd.as_str(), "http", "{}", "arguments not allowed"),
        (
            cmd.as_str(),
            "stdio --timer-ms 1",
            "{}",
            "arguments not allowed",
        ),
        (
            cmd.as_str(),
            "stdio",
            r#"{"LD_PRELOAD":"/tmp/x.so"}"#,
            "environment variable(s) not allowed",
        ),
    ];
    for (c, a, e, want) in refused_stdio {
        for path in ["/stdio", "/mcp"] {
            let url = insp.url(path, &stdio_query(&insp, c, a, e));
            let (status, body) = if path == "/stdio" {
                match open_sse(&insp, &url).await {
                    Ok(_) => panic!("{c} {a} {e} was accepted"),
                    Err(x) => x,
                }
            } else {
                let r = mcp_post(&insp, &url, None, &serde_json::from_str(INIT).unwrap()).await;
                (r.status().as_u16(), r.text().await.unwrap())
            };
            assert_eq!(status, 403, "{path} {c} {a} {e}: {body}");
            assert!(message(&body).contains(want), "{path} {c} {a}: {body}");
        }
    }
    let refused_urls = [
        format!("http://127.0.0.1:{port}/other"),
        format!("http://127.0.0.1:{port}/mcpx"),
        format!("http://127.0.0.1:{port}/mcp/../admin"),
        format!("http://127.0.0.1:{port}/mcp/%2e%2e/admin"),
        format!("http://127.0.0.1:{}/mcp", port + 1),
        format!("https://127.0.0.1:{port}/mcp"),
        format!("http://localhost:{port}/mcp"),
        format!("http://127.0.0.1:{port}@169.254.169.254/mcp"),
        format!("http://user:pw@127.0.0.1:{port}/mcp"),
        "file:///etc/passwd".to_owned(),
    ];
    for u in &refused_urls {
        let r = mcp_post(
            &insp,
            &insp.url("/mcp", &[("url", u), ("transportType", "streamable-http")]),
            None,
            &serde_json::from_str(INIT).unwrap(),
        )
        .await;
        let status = r.status().as_u16();
        let body = r.text().await.unwrap();
        assert_eq!(status, 403, "{u}: {body}");
        assert!(message(&body).contains("URL not allowed"), "{u}: {body}");
        let (status, body) = match open_sse(
            &insp,
            &insp.url("/sse", &[("url", u), ("transportType", "sse")]),
        )
        .await
        {
            Ok(_) => panic!("{u} accepted on /sse"),
            Err(x) => x,
        };
        assert_eq!(status, 403, "/sse {u}: {body}");
    }
    // Malformed queries: 400.
    for q in [
        vec![
            ("command", cmd.as_str()),
            ("transportType", "carrier-pigeon"),
        ],
        vec![("transportType", "stdio")],
        vec![
            ("command", cmd.as_str()),
            ("args", "'unterminated"),
            ("transportType", "stdio"),
        ],
        vec![
            ("command", cmd.as_str()),
            ("args", "stdio"),
            ("env", "not json"),
            ("transportType", "stdio"),
        ],
        vec![("transportType", "streamable-http")],
    ] {
        let r = mcp_post(
            &insp,
            &insp.url("/mcp", &q),
            None,
            &serde_json::from_str(INIT).unwrap(),
        )
        .await;
        assert_eq!(r.status().as_u16(), 400, "{q:?}");
    }

    // The token: missing, wrong (same length, other length), in the wrong header.
    let good = insp.url("/stdio", &stdio_query(&insp, &cmd, "stdio", "{}"));
    let wrong_same_len: String = TOKEN.chars().rev().collect::<String>();
    for auth in [
        None,
        Some(("x-mcp-proxy-auth", format!("Bearer {wrong_same_len}"))),
        Some(("x-mcp-proxy-auth", "Bearer short".to_owned())),
        Some(("x-mcp-proxy-auth", TOKEN.to_owned())),
        Some(("authorization", format!("Bearer {TOKEN}"))),
    ] {
        for (method, url) in [
            (reqwest::Method::GET, good.clone()),
            (reqwest::Method::GET, insp.url("/config", &[])),
            (
                reqwest::Method::POST,
                insp.url(
                    "/mcp",
                    &[("url", &up.url()), ("transportType", "streamable-http")],
                ),
            ),
            (
                reqwest::Method::POST,
                insp.url("/message", &[("sessionId", "x")]),
            ),
        ] {
            let mut r = insp
                .http
                .request(method.clone(), &url)
                .header("origin", UI)
                .header("accept", "application/json, text/event-stream")
                .header("content-type", "application/json");
            if let Some((h, v)) = &auth {
                r = r.header(*h, v);
            }
            let r = r.body(INIT).send().await.unwrap();
            assert_eq!(r.status().as_u16(), 401, "{method} {url} with {auth:?}");
            // The UI's origin may read the refusal.
            assert_eq!(r.headers()["access-control-allow-origin"], UI);
        }
    }

    // A foreign Origin: 403 with the right token, no CORS answer, on every endpoint.
    for origin in [
        "http://evil.example",
        "http://127.0.0.1:6275",
        "null",
        "http://localhost:6274",
    ] {
        for (method, path) in [
            (reqwest::Method::GET, good.clone()),
            (reqwest::Method::GET, insp.url("/health", &[])),
            (reqwest::Method::GET, insp.url("/config", &[])),
            (reqwest::Method::OPTIONS, insp.url("/mcp", &[])),
        ] {
            let r = insp
                .http
                .request(method.clone(), &path)
                .header("origin", origin)
                .header("x-mcp-proxy-auth", format!("Bearer {TOKEN}"))
                .header("accept", "text/event-stream")
                .send()
                .await
                .unwrap();
            assert_eq!(r.status().as_u16(), 403, "{origin} {method} {path}");
            assert!(!r.headers().contains_key("access-control-allow-origin"));
            let body = r.text().await.unwrap();
            assert!(message(&body).contains("Origin not allowed"), "{body}");
        }
    }
    // A rebound name (DNS rebinding) and a same-origin page of the proxy: 403.
    let r = insp
        .ui(reqwest::Method::GET, &good)
        .header("host", "attacker.example:6277")
        .header("accept", "text/event-stream")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 403);
    let r = insp
        .http
        .get(&good)
        .header("sec-fetch-site", "same-origin")
        .header("x-mcp-proxy-auth", format!("Bearer {TOKEN}"))
        .header("accept", "text/event-stream")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 403);
    // Without any Origin (a non-browser client) the token is enough.
    let r = insp
        .http
        .get(insp.url("/config", &[]))
        .header("x-mcp-proxy-auth", format!("Bearer {TOKEN}"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);

    // Nothing was started by any of it.
    assert_eq!(insp.metric("mcpgate_sessions_opened_total").await, 0.0);
    assert!(children_of(insp.pid()).is_empty());
    assert_eq!(up.stats().sessions_created, 0);
    let log = insp.log();
    assert!(!log.contains(TOKEN), "the token is in the log");
    // The allowed target still works afterwards.
    let mut s = open_sse(&insp, &good).await.unwrap();
    s.initialize(&insp).await;
    drop(s);
    insp.assert_empty(Duration::from_secs(10)).await;
    up.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn disabling_auth_is_explicit_loud_and_still_needs_the_origin() {
    let insp = Inspector::start(&testkit_toml(""), &["--dangerously-omit-auth"], Some(TOKEN));
    assert!(insp.token.is_none());
    assert!(
        insp.banner[0].contains("WARNING") && insp.banner[0].contains("DISABLED"),
        "{:?}",
        insp.banner
    );
    assert!(
        !insp.banner[1].contains("MCP_PROXY_AUTH_TOKEN"),
        "{:?}",
        insp.banner
    );
    let warned = wait_until(Duration::from_secs(5), || async {
        insp.log().contains("AUTHENTICATION IS DISABLED")
    })
    .await;
    assert!(warned, "no warning in the log:\n{}", insp.log());
    // No Origin: refused (the Origin is all that is left to check).
    let r = insp
        .http
        .get(insp.url("/config", &[]))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 403);
    let r = insp
        .http
        .get(insp.url("/config", &[]))
        .header("origin", "http://evil.example")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 403);
    // The UI's origin without a token: served, and the allowlist still applies.
    let cmd = testkit();
    let mut s = open_sse(
        &insp,
        &insp.url("/stdio", &stdio_query(&insp, &cmd, "stdio", "{}")),
    )
    .await
    .unwrap();
    s.initialize(&insp).await;
    let (status, _) = match open_sse(
        &insp,
        &insp.url("/stdio", &stdio_query(&insp, "/bin/sh", "-c id", "{}")),
    )
    .await
    {
        Ok(_) => panic!("/bin/sh accepted"),
        Err(x) => x,
    };
    assert_eq!(status, 403);
    drop(s);
    insp.assert_empty(Duration::from_secs(10)).await;
    // Every session opened without authentication is logged as such.
    assert!(
        insp.log().contains("without authentication"),
        "{}",
        insp.log()
    );
}
