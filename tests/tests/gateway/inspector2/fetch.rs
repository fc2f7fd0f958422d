//! `/api/fetch`, the relay the 2.x UI uses for OAuth: it reaches public addresses only —
//! not loopback, link-local (cloud metadata), private or other internal ranges, whether the
//! URL names them, a host name resolves to them, or a redirect leads there — unless the
//! configuration allows a range (`--fetch-allow`). Here the "public" server is one on
//! 127.0.0.2 with that one address allowed.

use mcpgate_tests::inspector::testkit_toml;
use mcpgate_tests::inspector2::{Inspector2, raw_server};
use reqwest::Method;
use serde_json::{Value, json};

fn redirect(to: &str) -> String {
    format!(
        "HTTP/1.1 302 Found\r\nlocation: {to}\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
    )
}

async fn fetch(insp: &Inspector2, url: &str) -> (u16, Value) {
    insp.api(
        Method::POST,
        "/api/fetch",
        Some(json!({"url": url, "method": "POST", "headers": {"content-type":"application/x-www-form-urlencoded"}, "body": "grant_type=x"})),
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_fetch_relay_reaches_allowed_addresses_only() {
    // An internal server that must stay out of reach, on 127.0.0.1.
    let (internal, _i) = raw_server(
        "127.0.0.1",
        vec![(
            "/secret",
            "HTTP/1.1 200 OK\r\ncontent-length: 6\r\nconnection: close\r\n\r\nsecret".into(),
        )],
    )
    .await;
    let secret = format!("http://{internal}/secret");
    let (allowed, _a) = raw_server(
        "127.0.0.2",
        vec![
            ("/token", "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 22\r\nconnection: close\r\n\r\n{\"access_token\":\"t-1\"}".into()),
            ("/hop", redirect("http://{self}/token")),
            ("/to-internal", redirect(&secret)),
            ("/to-metadata", redirect("http://169.254.169.254/latest/meta-data/")),
            ("/to-localhost", redirect(&format!("http://localhost:{}/secret", internal.port()))),
        ],
    )
    .await;
    let insp = Inspector2::start(&testkit_toml(""), &["--fetch-allow", "127.0.0.2/32"]);
    let (s, v) = fetch(&insp, &format!("http://{allowed}/token")).await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(
        (v["ok"].clone(), v["status"].clone()),
        (json!(true), json!(200))
    );
    assert_eq!(v["body"], "{\"access_token\":\"t-1\"}");
    assert_eq!(v["headers"]["content-type"], "application/json");
    // A redirect within what is allowed is followed.
    let (s, v) = fetch(&insp, &format!("http://{allowed}/hop")).await;
    assert_eq!((s, v["status"].clone()), (200, json!(200)), "{v}");
    // Straight at internal addresses, by literal or by name.
    for url in [
        secret.clone(),
        format!("http://localhost:{}/secret", internal.port()),
        "http://169.254.169.254/latest/meta-data/".into(),
        "http://[::1]:9/".into(),
        "http://10.1.2.3/".into(),
        "http://192.168.0.1/".into(),
        "http://172.16.0.1/".into(),
        "http://[fd00:ec2::254]/".into(),
        "file:///etc/passwd".into(),
    ] {
        let (s, v) = fetch(&insp, &url).await;
        assert_eq!(s, 403, "{url}: {v}");
        assert!(!v.to_string().contains("secret\""), "{v}");
    }
    // Redirects to them.
    for hop in ["/to-internal", "/to-metadata", "/to-localhost"] {
        let (s, v) = fetch(&insp, &format!("http://{allowed}{hop}")).await;
        assert_eq!(s, 403, "{hop}: {v}");
        assert!(
            v["error"].as_str().unwrap().contains("refused")
                || v["error"].as_str().unwrap().contains("public addresses"),
            "{v}"
        );
    }
    // An allowed address whose server is gone is the server's failure (502), not a refusal.
    let gone = std::net::TcpListener::bind("127.0.0.2:0").unwrap();
    let port = gone.local_addr().unwrap().port();
    drop(gone);
    let (s, v) = fetch(
        &insp,
        &format!("http://127.0.0.2:{port}/token?code=secret-code"),
    )
    .await;
    assert_eq!(s, 502, "{v}");
    assert!(
        !v.to_string().contains("secret-code"),
        "the query leaked: {v}"
    );
    assert!(
        !insp.gw.log().contains("secret-code"),
        "the query reached the log"
    );
    let (s, _) = insp
        .api(Method::POST, "/api/fetch", Some(json!({"method":"GET"})))
        .await;
    assert_eq!(s, 400);
}
