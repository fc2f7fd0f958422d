//! Authentication: static bearer tokens and JWTs (OAuth 2.1 resource server), sessions
//! bound to their principal, and no token passthrough to the upstream.

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use mcpgate_testkit::{HttpOptions, HttpServer};
use mcpgate_tests::jwt::{jwks_server, mint, now};
use mcpgate_tests::{Client, Gateway, Pki};
use serde_json::{Value, json};

const ALICE: &str = "alice-token-0123456789";
const BOB: &str = "bob-token-0123456789ab";

fn init_body() -> String {
    json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"auth","version":"0"}}}).to_string()
}

async fn post(
    url: &str,
    token: Option<&str>,
    sid: Option<&str>,
    body: String,
) -> reqwest::Response {
    let mut req = reqwest::Client::new()
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(body);
    if let Some(t) = token {
        req = req.header("authorization", format!("Bearer {t}"));
    }
    if let Some(s) = sid {
        req = req.header("mcp-session-id", s);
    }
    req.send().await.unwrap()
}

fn echo(text: &str) -> String {
    json!({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":text}}}).to_string()
}

#[tokio::test]
async fn static_tokens_principals_and_no_passthrough() {
    let up = HttpServer::start("127.0.0.1:0".parse().unwrap(), HttpOptions::default())
        .await
        .unwrap();
    let gw = Gateway::start(&format!(
        "[[server]]\nname = \"up\"\ntransport = \"streamable-http\"\nurl = \"{}\"\nheaders = {{ \"X-Upstream-Key\" = \"upstream-secret\" }}\n\
         [auth]\ntokens = [{{ name = \"alice\", token = \"{ALICE}\" }}, {{ name = \"bob\", token = \"{BOB}\" }}]\n",
        up.url()
    ));
    let url = gw.url();
    let none = post(&url, None, None, init_body()).await;
    assert_eq!(none.status(), 401);
    assert_eq!(
        none.headers()["www-authenticate"],
        "Bearer realm=\"mcpgate\""
    );
    let body: Value = none.json().await.unwrap();
    assert_eq!(body["error"]["code"], -32000);
    // An OAuth-capable client (mcp-remote) is told this endpoint takes a static token
    // instead of being left to look for an authorization server.
    let message = body["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("static bearer token") && message.contains("no OAuth"),
        "{message}"
    );
    let wrong = post(&url, Some("not-a-valid-token-at-all"), None, init_body()).await;
    assert_eq!(wrong.status(), 401);
    assert!(
        wrong.headers()["www-authenticate"]
            .to_str()
            .unwrap()
            .contains("error=\"invalid_token\"")
    );

    let ok = post(&url, Some(ALICE), None, init_body()).await;
    assert_eq!(ok.status(), 200);
    let sid = ok.headers()["mcp-session-id"].to_str().unwrap().to_owned();
    let r = post(&url, Some(ALICE), Some(&sid), echo("mine")).await;
    assert_eq!(r.status(), 200);
    // The upstream got the configured credential and never the client's token.
    let headers = up.stats().last_headers;
    assert!(
        headers
            .iter()
            .any(|(k, v)| k == "x-upstream-key" && v == "upstream-secret"),
        "{headers:?}"
    );
    assert!(
        headers
            .iter()
            .all(|(k, v)| k != "authorization" && !v.contains(ALICE)),
        "client token leaked upstream: {headers:?}"
    );
    // Bob presenting Alice's session id: exactly like an unknown session.
    let stolen = post(&url, Some(BOB), Some(&sid), echo("theirs")).await;
    assert_eq!(stolen.status(), 404);
    let body: Value = stolen.json().await.unwrap();
    assert_eq!(body["error"]["code"], -32001);
    assert!(gw.log().contains("another principal"));
    // Without any token, even with the session id: 401 (sessions are not credentials).
    assert_eq!(post(&url, None, Some(&sid), echo("x")).await.status(), 401);
    // Alice's session is unharmed.
    assert_eq!(
        post(&url, Some(ALICE), Some(&sid), echo("still mine"))
            .await
            .status(),
        200
    );
}

#[tokio::test]
async fn jwt_resource_server() {
    let up = HttpServer::start("127.0.0.1:0".parse().unwrap(), HttpOptions::default())
        .await
        .unwrap();
    let pki = Pki::new();
    let (jwks, _server) = jwks_server(&pki).await;
    assert!(jwks.starts_with("https://"));
    let iss = "https://issuer.test";
    let aud = "https://mcpgate.test/mcp";
    let gw = Gateway::start(&format!(
        "[[server]]\nname = \"up\"\ntransport = \"streamable-http\"\nurl = \"{}\"\n\
         [auth.jwt]\nissuer = \"{iss}\"\naudience = \"{aud}\"\njwks_url = \"{jwks}\"\nrequired_scopes = [\"mcp:tools\"]\nca_file = {:?}\n",
        up.url(),
        pki.ca
    ));
    let url = gw.url();
    let claims = |aud: &str, exp: u64, scope: &str| json!({"iss": iss, "aud": aud, "sub": "user-42", "exp": exp, "scope": scope});

    let none = post(&url, None, None, init_body()).await;
    assert_eq!(none.status(), 401);
    assert_eq!(
        none.headers()["www-authenticate"],
        "Bearer resource_metadata=\"https://mcpgate.test/.well-known/oauth-protected-resource/mcp\""
    );
    let good = mint(claims(aud, now() + 300, "mcp:tools other"));
    let ok = post(&url, Some(&good), None, init_body()).await;
    assert_eq!(ok.status(), 200, "{:?}", ok.text().await);

    let expired = post(
        &url,
        Some(&mint(claims(aud, now() - 600, "mcp:tools"))),
        None,
        init_body(),
    )
    .await;
    assert_eq!(expired.status(), 401);
    assert!(
        expired.headers()["www-authenticate"]
            .to_str()
            .unwrap()
            .contains("invalid_token")
    );
    let other_audience = post(
        &url,
        Some(&mint(claims(
            "https://elsewhere.test",
            now() + 300,
            "mcp:tools",
        ))),
        None,
        init_body(),
    )
    .await;
    assert_eq!(
        other_audience.status(),
        401,
        "a token minted for another resource is refused"
    );
    let forged = format!("{}x", &good[..good.len() - 1]);
    assert_eq!(
        post(&url, Some(&forged), None, init_body()).await.status(),
        401
    );
    let no_scope = post(
        &url,
        Some(&mint(claims(aud, now() + 300, "read"))),
        None,
        init_body(),
    )
    .await;
    assert_eq!(no_scope.status(), 403);
    let challenge = no_scope.headers()["www-authenticate"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(
        challenge.contains("error=\"insufficient_scope\"")
            && challenge.contains("scope=\"mcp:tools\""),
        "{challenge}"
    );

    let prm: Value = reqwest::get(format!(
        "{}/.well-known/oauth-protected-resource/mcp",
        gw.base
    ))
    .await
    .unwrap()
    .json()
    .await
    .unwrap();
    assert_eq!(prm["resource"], aud);
    assert_eq!(prm["authorization_servers"], json!([iss]));
    assert_eq!(prm["scopes_supported"], json!(["mcp:tools"]));
    // The client's bearer token never reaches the upstream.
    let headers = up.stats().last_headers;
    assert!(
        headers.iter().all(|(k, _)| k != "authorization"),
        "{headers:?}"
    );
    let _ = Client::new(&url);
}

/// A legacy SSE upstream that announces a POST endpoint on another origin is not
/// followed: the configured upstream credentials never reach that other server.
#[tokio::test]
async fn legacy_sse_endpoint_on_another_origin_is_refused() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    let elsewhere = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let elsewhere_port = elsewhere.local_addr().unwrap().port();
    let hits = Arc::new(AtomicUsize::new(0));
    let counted = hits.clone();
    tokio::spawn(async move {
        while let Ok((_s, _)) = elsewhere.accept().await {
            counted.fetch_add(1, Ordering::SeqCst);
        }
    });
    let sse = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let sse_addr = sse.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = sse.accept().await {
            tokio::spawn(async move {
                let mut buf = [0u8; 4096];
                let _ = s.read(&mut buf).await;
                let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\n\r\n";
                let ev = format!(
                    "event: endpoint\ndata: http://127.0.0.1:{elsewhere_port}/elsewhere\n\n"
                );
                let _ = s.write_all(format!("{head}{ev}").as_bytes()).await;
                tokio::time::sleep(std::time::Duration::from_secs(10)).await;
            });
        }
    });
    let gw = Gateway::start(&format!(
        "[[server]]\nname = \"up\"\ntransport = \"sse\"\nurl = \"http://{sse_addr}/sse\"\nheaders = {{ Authorization = \"Bearer upstream-secret\" }}\n\
         [upstream]\nconnect_timeout = \"1s\"\n[session]\nrequest_timeout = \"1s\"\n"
    ));
    let r = post(&gw.url(), None, None, init_body()).await;
    let body: Value = r.json().await.unwrap();
    assert!(body.get("error").is_some(), "initialize must fail: {body}");
    assert_eq!(
        hits.load(Ordering::SeqCst),
        0,
        "nothing was sent to the other origin"
    );
    assert!(gw.log().contains("another origin"));
}
