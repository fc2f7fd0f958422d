//! `mcpgate --check-config` (the real binary) on TLS settings: every certificate file is
//! loaded and checked — an expired one is an error with its date, a key that does not
//! match is an error — URL schemes are checked, and the dangerous switch is reported.

use std::process::Command;

use mcpgate_tests::{Pki, bin};

fn check(pki: &Pki, toml: &str) -> (i32, String, String) {
    let path = pki.dir().join("check.toml");
    std::fs::write(&path, toml).unwrap();
    let out = Command::new(bin("mcpgate"))
        .arg("--check-config")
        .arg(&path)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

const SERVER: &str = "[[server]]\nname = \"a\"\ntransport = \"stdio\"\ncommand = [\"x\"]\n";

#[test]
fn certificate_files_urls_and_the_dangerous_switch() {
    let pki = Pki::new();
    let listen = |cert: &std::path::Path, key: &std::path::Path| {
        format!("[listen]\ntls_cert = {cert:?}\ntls_key = {key:?}\n{SERVER}")
    };
    let (code, out, err) = check(&pki, &listen(&pki.server.cert, &pki.server.key));
    assert_eq!(code, 0, "{out}{err}");

    let (code, _, err) = check(&pki, &listen(&pki.expired.cert, &pki.expired.key));
    assert_eq!(code, 64);
    assert!(
        err.contains("expired on") && err.contains("expired.pem"),
        "{err}"
    );

    let (code, _, err) = check(&pki, &listen(&pki.server.cert, &pki.client.key));
    assert_eq!(code, 64);
    assert!(err.contains("does not match"), "{err}");

    let (code, _, err) = check(
        &pki,
        &listen(&pki.server.cert, &pki.dir().join("missing-key.pem")),
    );
    assert_eq!(code, 64);
    assert!(
        err.contains("cannot read") && err.contains("missing-key.pem"),
        "{err}"
    );

    let upstream = |extra: &str| {
        format!(
            "[[server]]\nname = \"r\"\ntransport = \"streamable-http\"\nurl = \"https://127.0.0.1:9/mcp\"\n{extra}\n"
        )
    };
    let (code, _, err) = check(
        &pki,
        &upstream(&format!("ca_file = {:?}", pki.expired.cert)),
    );
    assert_eq!(code, 64);
    assert!(err.contains("expired on"), "{err}");
    let (code, out, err) = check(&pki, &upstream("dangerously_accept_invalid_certs = true"));
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("warning:") && out.contains("dangerously_accept_invalid_certs"),
        "reported: {out}"
    );
    let (code, _, err) = check(
        &pki,
        "[[server]]\nname = \"r\"\ntransport = \"streamable-http\"\nurl = \"ftp://x/mcp\"\n",
    );
    assert_eq!(code, 64);
    assert!(err.contains("ftp"), "{err}");
    let (code, _, err) = check(&pki, &upstream("proxy = \"socks9://p:1\""));
    assert_eq!(code, 64);
    assert!(err.contains("proxy"), "{err}");
    let (code, _, err) = check(
        &pki,
        &format!("{SERVER}[auth.jwt]\nissuer = \"i\"\naudience = \"a\"\njwks_url = \"ldap://x\"\n"),
    );
    assert_eq!(code, 64);
    assert!(err.contains("jwks_url"), "{err}");
}
