//! TLS on mcpgate's own listeners: HTTPS with a test CA, plain HTTP on the TLS port
//! refused cleanly, certificates rotated on disk (picked up on change, or on SIGHUP)
//! served to the next connection while open sessions go on, a broken renewal refused,
//! mutual TLS for clients, and the admin listener over TLS.

use std::time::Duration;

use mcpgate_tests::{CertFiles, Client, Gateway, Launch, Pki, wait_until};
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;
use serde_json::json;

fn stdio_server() -> String {
    format!(
        "[[server]]\nname = \"up\"\ntransport = \"stdio\"\ncommand = [{:?}, \"stdio\"]\n",
        mcpgate_tests::bin("mcpgate-testkit").display().to_string()
    )
}

/// A gateway whose listener serves `files` (copied to its own paths, which tests rotate).
fn tls_gateway(pki: &Pki, files: &CertFiles, listen_extra: &str) -> (Gateway, CertFiles) {
    let live = CertFiles {
        cert: pki.dir().join("live.pem"),
        key: pki.dir().join("live-key.pem"),
    };
    std::fs::copy(&files.cert, &live.cert).unwrap();
    std::fs::copy(&files.key, &live.key).unwrap();
    let gw = Gateway::launch(
        &format!(
            "[listen]\ntls_cert = {:?}\ntls_key = {:?}\n{listen_extra}\n{}",
            live.cert,
            live.key,
            stdio_server()
        ),
        Launch {
            http: Some(pki.client()),
            ..Launch::default()
        },
    );
    assert!(gw.base.starts_with("https://"), "{}", gw.base);
    (gw, live)
}

/// Replaces the live files with `files` the way a renewal does (new file, then rename).
fn rotate(live: &CertFiles, files: &CertFiles) {
    for (from, to) in [(&files.cert, &live.cert), (&files.key, &live.key)] {
        let tmp = to.with_extension("tmp");
        std::fs::copy(from, &tmp).unwrap();
        std::fs::rename(&tmp, to).unwrap();
    }
}

/// The certificate a new connection is served.
async fn served(pki: &Pki, base: &str) -> Vec<u8> {
    let ca = reqwest::Certificate::from_pem(&std::fs::read(&pki.ca).unwrap()).unwrap();
    let c = reqwest::Client::builder()
        .tls_certs_only([ca])
        .tls_info(true)
        .pool_max_idle_per_host(0)
        .build()
        .unwrap();
    let r = c.get(format!("{base}/healthz")).send().await.unwrap();
    assert_eq!(r.status(), 200);
    r.extensions()
        .get::<reqwest::tls::TlsInfo>()
        .and_then(|i| i.peer_certificate())
        .unwrap()
        .to_vec()
}

fn der(files: &CertFiles) -> Vec<u8> {
    CertificateDer::from_pem_file(&files.cert).unwrap().to_vec()
}

#[tokio::test]
async fn https_listener_plain_http_and_rotation_on_change() {
    let pki = Pki::new();
    let (gw, live) = tls_gateway(&pki, &pki.server, "tls_reload_interval = \"200ms\"");
    // Plain HTTP to the TLS port: a clean 400 that says so.
    let plain = gw.base.replacen("https://", "http://", 1);
    let r = reqwest::get(format!("{plain}/mcp")).await.unwrap();
    assert_eq!(r.status(), 400);
    assert!(r.text().await.unwrap().contains("HTTPS"));
    assert_eq!(served(&pki, &gw.base).await, der(&pki.server));

    let c = Client::with(&gw.url(), pki.client());
    let s = c.initialize().await;
    // A call in flight on its connection while the certificate changes underneath.
    const REQUESTS: &str = "mcpgate_requests_total{era=\"2025\"}";
    let forwarded = gw.metric(REQUESTS).await;
    let slow = {
        let s_id = s.id.clone();
        let c = c.clone();
        tokio::spawn(async move {
            c.post(
                Some(&s_id),
                &json!({"jsonrpc":"2.0","id":99,"method":"tools/call","params":{"name":"slow","arguments":{"ms":1500}}}),
            )
            .await
        })
    };
    // In flight once the gateway has taken it for the upstream.
    let in_flight = wait_until(Duration::from_secs(10), || async {
        gw.metric(REQUESTS).await > forwarded
    })
    .await;
    assert!(in_flight, "the slow call reached the gateway");
    let renewed = pki.issue("renewed", &["localhost", "127.0.0.1"], -1, 60);
    rotate(&live, &renewed);
    assert!(
        wait_until(Duration::from_secs(5), || async {
            gw.log().contains("TLS certificate reloaded")
        })
        .await,
        "{}",
        gw.log()
    );
    assert_eq!(
        served(&pki, &gw.base).await,
        der(&renewed),
        "the next connection gets the new certificate"
    );
    let r = slow.await.unwrap();
    assert_eq!(r.status, 200, "{r:?}");
    assert!(
        r.last()["result"].is_object(),
        "the in-flight call finished: {r:?}"
    );
    assert_eq!(
        s.call("echo", json!({"text":"after"})).await.text(),
        "after"
    );
    assert_eq!(s.delete().await, 200);
}

#[tokio::test]
async fn sighup_reloads_and_a_broken_renewal_is_refused() {
    let pki = Pki::new();
    let (gw, live) = tls_gateway(&pki, &pki.server, "tls_reload_interval = \"1h\"");
    let renewed = pki.issue("renewed", &["localhost", "127.0.0.1"], -1, 60);
    rotate(&live, &renewed);
    assert_eq!(
        served(&pki, &gw.base).await,
        der(&pki.server),
        "not before the signal"
    );
    gw.hangup();
    assert!(
        wait_until(Duration::from_secs(5), || async {
            gw.log().contains("TLS certificate reloaded")
        })
        .await
    );
    assert_eq!(served(&pki, &gw.base).await, der(&renewed));
    // A renewal that does not load (an expired certificate) is refused; the last good one
    // stays.
    rotate(&live, &pki.expired);
    gw.hangup();
    assert!(
        wait_until(Duration::from_secs(5), || async {
            gw.log().contains("TLS reload refused")
        })
        .await,
        "{}",
        gw.log()
    );
    assert!(gw.log().contains("expired on"), "{}", gw.log());
    assert_eq!(served(&pki, &gw.base).await, der(&renewed));
}

#[tokio::test]
async fn client_certificates_required_with_client_ca() {
    let pki = Pki::new();
    let (gw, _live) = tls_gateway(&pki, &pki.server, &format!("client_ca = {:?}", pki.ca));
    let ca = reqwest::Certificate::from_pem(&std::fs::read(&pki.ca).unwrap()).unwrap();
    let without = reqwest::Client::builder()
        .tls_certs_only([ca.clone()])
        .build()
        .unwrap();
    assert!(
        without
            .get(format!("{}/healthz", gw.base))
            .send()
            .await
            .is_err(),
        "no client certificate, no connection"
    );
    let mut pem = std::fs::read(&pki.client.cert).unwrap();
    pem.extend(std::fs::read(&pki.client.key).unwrap());
    let with = reqwest::Client::builder()
        .tls_certs_only([ca])
        .identity(reqwest::Identity::from_pem(&pem).unwrap())
        .build()
        .unwrap();
    let s = Client::with(&gw.url(), with.clone()).initialize().await;
    assert_eq!(s.call("echo", json!({"text":"mtls"})).await.text(), "mtls");
    assert_eq!(s.delete().await, 200);
    let metrics = with
        .get(format!("{}/metrics", gw.base))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        metrics.contains("mcpgate_connections_refused_total{reason=\"tls\"} 1"),
        "{metrics}"
    );
}

#[tokio::test]
async fn admin_listener_over_tls() {
    let pki = Pki::new();
    let gw = Gateway::launch(
        &format!(
            "[admin]\naddr = \"127.0.0.1:0\"\ntoken = \"admin-token-0123456789\"\ntls_cert = {:?}\ntls_key = {:?}\n{}",
            pki.server.cert,
            pki.server.key,
            stdio_server()
        ),
        Launch {
            stdout_lines: 2,
            ..Launch::default()
        },
    );
    let admin = gw.stdout[1]
        .strip_prefix("mcpgate admin listening on ")
        .unwrap()
        .to_owned();
    assert!(admin.starts_with("https://"), "{admin}");
    let r = pki
        .client()
        .get(format!("{admin}/api/sessions"))
        .bearer_auth("admin-token-0123456789")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
}
