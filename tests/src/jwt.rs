//! JWTs for the tests: a JWKS endpoint over HTTPS (the test CA's certificate) serving the
//! fixture key, tokens signed with it.

use std::time::{SystemTime, UNIX_EPOCH};

use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::Pki;

/// Serves one fixed JWKS document over HTTPS on loopback (a certificate of the test CA,
/// as a real identity provider serves it over https).
pub async fn jwks_server(pki: &Pki) -> (String, tokio::task::JoinHandle<()>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let doc = include_str!("../fixtures/jwks.json");
    let tls = tokio_rustls::TlsAcceptor::from(pki.server_config(&pki.server, false));
    let task = tokio::spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else {
                return;
            };
            let Ok(mut s) = tls.accept(tcp).await else {
                continue;
            };
            let mut buf = [0u8; 4096];
            let _ = s.read(&mut buf).await;
            let resp = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{doc}",
                doc.len()
            );
            let _ = s.write_all(resp.as_bytes()).await;
            let _ = s.shutdown().await;
        }
    });
    (format!("https://localhost:{}/jwks.json", addr.port()), task)
}

/// A token with `claims`, signed with the fixture key (kid `test-key-1`).
pub fn mint(claims: Value) -> String {
    let key = EncodingKey::from_ed_pem(include_bytes!("../fixtures/jwt-test-ed25519.pem")).unwrap();
    let mut header = Header::new(Algorithm::EdDSA);
    header.kid = Some("test-key-1".into());
    jsonwebtoken::encode(&header, &claims, &key).unwrap()
}

/// Seconds since the Unix epoch.
pub fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}
