//! TLS toward upstreams (real rustls on both ends, certificates made at test time): an
//! https upstream trusted through `ca_file`; the errors a client sees for an untrusted
//! issuer, a hostname mismatch and an expired certificate; mutual TLS; and an upstream
//! reached through an HTTP `CONNECT` proxy named by `HTTPS_PROXY`.

use mcpgate_testkit::{HttpOptions, HttpServer};
use mcpgate_tests::{CertFiles, Client, ConnectProxy, Gateway, Launch, Pki};
use serde_json::{Value, json};

async fn https(pki: &Pki, files: &CertFiles, mtls: bool) -> HttpServer {
    let opts = HttpOptions {
        tls: Some(pki.server_config(files, mtls)),
        ..HttpOptions::default()
    };
    HttpServer::start("127.0.0.1:0".parse().unwrap(), opts)
        .await
        .unwrap()
}

fn init() -> Value {
    json!({"jsonrpc":"2.0","id":7,"method":"initialize","params":{
        "protocolVersion":"2025-11-25","capabilities":{},
        "clientInfo":{"name":"tls-test","version":"0"}}})
}

fn server(name: &str, url: &str, extra: &str) -> String {
    format!(
        "[[server]]\nname = \"{name}\"\ntransport = \"streamable-http\"\nurl = \"{url}\"\n{extra}\n"
    )
}

/// initialize → tools/list → tools/call with notifications → DELETE over https.
#[tokio::test]
async fn https_upstream_full_session() {
    let pki = Pki::new();
    let up = https(&pki, &pki.server, false).await;
    let gw = Gateway::http(&up.url(), &format!("ca_file = {:?}\n", pki.ca));
    let c = Client::new(&gw.url());
    let s = c.initialize().await;
    let tools = s.request("tools/list", json!({})).await;
    assert!(
        tools.last()["result"]["tools"]
            .as_array()
            .is_some_and(|t| t.iter().any(|t| t["name"] == "notify")),
        "{tools:?}"
    );
    let r = s
        .request(
            "tools/call",
            json!({"name":"notify","arguments":{"tag":"t","count":5},"_meta":{"progressToken":"p"}}),
        )
        .await;
    assert_eq!(r.text(), "t:5");
    let progress = r
        .messages
        .iter()
        .filter(|m| m["method"] == "notifications/progress")
        .count();
    assert_eq!(progress, 5, "{r:?}");
    assert_eq!(s.delete().await, 200);
    let st = up.stats();
    assert_eq!((st.sessions_created, st.sessions_deleted), (1, 1));
    assert!(st.tls_connections >= 1);
}

/// Untrusted issuer, another name, expired: each initialize gets -32003 naming the
/// cause (and a log line with the session, a `kind="tls"` count); the gateway keeps
/// serving a good upstream.
#[tokio::test]
async fn upstream_tls_failures_name_their_cause() {
    let pki = Pki::new();
    let good = https(&pki, &pki.server, false).await;
    let expired = https(&pki, &pki.expired, false).await;
    let other = https(&pki, &pki.other_name, false).await;
    let ca = format!("ca_file = {:?}", pki.ca);
    let gw = Gateway::start(&format!(
        "{}{}{}{}",
        server("untrusted", &good.url(), ""),
        server("mismatch", &other.url(), &ca),
        server("expired", &expired.url(), &ca),
        server("good", &good.url(), &ca),
    ));
    for (name, cause) in [
        ("untrusted", "unknown issuer"),
        ("mismatch", "hostname mismatch"),
        ("expired", "expired"),
    ] {
        let c = Client::new(&format!("{}/servers/{name}/mcp", gw.base));
        let r = c.post(None, &init()).await;
        assert_eq!(r.error_code(), Some(-32003), "{name}: {r:?}");
        assert_eq!(
            r.last()["id"],
            7,
            "{name}: the error carries the request's id"
        );
        let msg = r.last()["error"]["message"].as_str().unwrap_or("");
        assert!(msg.contains(cause), "{name}: {msg:?} should name {cause:?}");
        assert!(r.header("mcp-session-id").is_none());
    }
    assert_eq!(
        gw.metric("mcpgate_upstream_errors_total{kind=\"tls\"}")
            .await,
        3.0
    );
    let log = gw.log();
    for cause in ["unknown issuer", "hostname mismatch", "expired"] {
        assert!(
            log.lines()
                .any(|l| l.contains(cause) && l.contains("session")),
            "a log line with the session names {cause:?}:\n{log}"
        );
    }
    let c = Client::new(&format!("{}/servers/good/mcp", gw.base));
    let s = c.initialize().await;
    assert_eq!(
        s.call("echo", json!({"text":"still up"})).await.text(),
        "still up"
    );
    assert_eq!(s.delete().await, 200);
    assert_eq!(gw.metric("mcpgate_sessions_active").await, 0.0);
}

/// An upstream that requires a client certificate: with `client_cert` it works; without,
/// the error names the handshake failure.
#[tokio::test]
async fn mutual_tls_upstream() {
    let pki = Pki::new();
    let up = https(&pki, &pki.server, true).await;
    let ca = format!("ca_file = {:?}", pki.ca);
    let with = format!(
        "{ca}\nclient_cert = {:?}\nclient_key = {:?}",
        pki.client.cert, pki.client.key
    );
    let gw = Gateway::start(&format!(
        "{}{}",
        server("with", &up.url(), &with),
        server("without", &up.url(), &ca)
    ));
    let c = Client::new(&format!("{}/servers/with/mcp", gw.base));
    let s = c.initialize().await;
    assert_eq!(s.call("echo", json!({"text":"mtls"})).await.text(), "mtls");
    assert_eq!(s.delete().await, 200);
    let c = Client::new(&format!("{}/servers/without/mcp", gw.base));
    let r = c.post(None, &init()).await;
    assert_eq!(r.error_code(), Some(-32003), "{r:?}");
    let msg = r.last()["error"]["message"].as_str().unwrap_or("");
    assert!(
        msg.contains("TLS handshake failed") && msg.contains("client certificate"),
        "{msg:?}"
    );
    assert!(up.stats().tls_handshake_failures >= 1);
}

/// `HTTPS_PROXY` sends upstream connections through a CONNECT proxy; `proxy = "none"`
/// does not.
#[tokio::test]
async fn upstream_through_a_connect_proxy() {
    let pki = Pki::new();
    let up = https(&pki, &pki.server, false).await;
    let proxy = ConnectProxy::start().await;
    let ca = format!("ca_file = {:?}", pki.ca);
    let gw = Gateway::launch(
        &format!(
            "{}{}",
            server("proxied", &up.url(), &ca),
            server("direct", &up.url(), &format!("{ca}\nproxy = \"none\""))
        ),
        Launch {
            env: vec![
                ("HTTPS_PROXY".into(), proxy.url.clone()),
                ("NO_PROXY".into(), String::new()),
            ],
            ..Launch::default()
        },
    );
    let c = Client::new(&format!("{}/servers/direct/mcp", gw.base));
    let s = c.initialize().await;
    assert_eq!(s.call("echo", json!({"text":"d"})).await.text(), "d");
    assert_eq!(s.delete().await, 200);
    assert!(proxy.tunnels().is_empty(), "proxy = \"none\" bypasses it");
    let c = Client::new(&format!("{}/servers/proxied/mcp", gw.base));
    let s = c.initialize().await;
    assert_eq!(s.call("echo", json!({"text":"p"})).await.text(), "p");
    assert_eq!(s.delete().await, 200);
    let target = up.url();
    let target = target
        .trim_start_matches("https://")
        .trim_end_matches("/mcp");
    assert!(
        proxy.tunnels().iter().all(|t| t == target) && !proxy.tunnels().is_empty(),
        "tunnels {:?} to {target}",
        proxy.tunnels()
    );
}
