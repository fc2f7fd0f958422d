//! What `mcpgate inspector` announces and accepts: the generated token and the ready URL it
//! prints, `/health`, `/config`, the CORS preflights of every endpoint the UI calls, the
//! paths that are not part of the protocol, and `--check` on its config file.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use mcpgate_tests::bin;
use mcpgate_tests::inspector::{Inspector, UI, message, testkit, testkit_toml};
use reqwest::Url;
use serde_json::{Value, json};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_config_cors_and_the_ready_url() {
    // No configured token: one is generated and printed with the ready URL.
    let insp = Inspector::start(&testkit_toml(""), &[], None);
    let token = insp
        .token
        .clone()
        .unwrap_or_else(|| panic!("no token line: {:?}", insp.banner));
    assert_eq!(token.len(), 64, "{token}");
    assert!(token.bytes().all(|b| b.is_ascii_hexdigit()));
    let ready = insp.banner[1]
        .strip_prefix("mcpgate inspector UI: ")
        .unwrap_or_else(|| panic!("no ready URL: {:?}", insp.banner));
    let ready = Url::parse(ready).unwrap();
    assert_eq!(ready.origin().ascii_serialization(), UI);
    let params: BTreeMap<String, String> = ready.query_pairs().into_owned().collect();
    assert_eq!(params["MCP_PROXY_AUTH_TOKEN"], token);
    assert_eq!(params["MCP_PROXY_FULL_ADDRESS"], insp.base);

    // /health: no token needed, CORS for the UI's origin.
    let r = insp
        .http
        .get(insp.url("/health", &[]))
        .header("origin", UI)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    assert_eq!(r.headers()["access-control-allow-origin"], UI);
    assert_eq!(r.text().await.unwrap(), r#"{"status":"ok"}"#);

    // /config with the token: the UI's defaults; the gateway's environment stays private.
    let r = insp
        .ui(reqwest::Method::GET, &insp.url("/config", &[]))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    assert_eq!(r.headers()["access-control-allow-origin"], UI);
    let cfg: Value = serde_json::from_str(&r.text().await.unwrap()).unwrap();
    assert_eq!(cfg["defaultEnvironment"], json!({}));
    assert_eq!(cfg["defaultCommand"], testkit());
    assert_eq!(cfg["defaultArgs"], "stdio");
    assert_eq!(cfg["defaultTransport"], "stdio");
    assert_eq!(cfg["defaultServerUrl"], "");
    // Without the token: 401 with the text the UI recognises.
    let r = insp
        .http
        .get(insp.url("/config", &[]))
        .header("origin", UI)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 401);
    assert!(r.headers().contains_key("www-authenticate"));
    assert!(
        message(&r.text().await.unwrap())
            .contains("Authentication required. Use the session token")
    );

    // CORS preflights of every endpoint the UI calls, with the headers it sends.
    for path in ["/health", "/config", "/mcp", "/stdio", "/sse", "/message"] {
        let r = insp
            .http
            .request(reqwest::Method::OPTIONS, insp.url(path, &[]))
            .header("origin", UI)
            .header("access-control-request-method", "POST")
            .header(
                "access-control-request-headers",
                "content-type,mcp-protocol-version,mcp-session-id,x-mcp-proxy-auth,x-custom-auth-headers,x-api-key",
            )
            .send()
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), 204, "preflight {path}");
        let h = r.headers();
        assert_eq!(h["access-control-allow-origin"], UI, "{path}");
        assert!(
            h["access-control-allow-methods"]
                .to_str()
                .unwrap()
                .contains("DELETE")
        );
        let allowed = h["access-control-allow-headers"].to_str().unwrap();
        for want in ["x-mcp-proxy-auth", "mcp-session-id", "x-api-key"] {
            assert!(allowed.contains(want), "{path}: {allowed}");
        }
    }
    // Not part of the protocol here: /fetch (arbitrary fetches) and unknown paths.
    for path in ["/fetch", "/nope", "/servers/x/mcp"] {
        let r = insp
            .ui(reqwest::Method::POST, &insp.url(path, &[]))
            .body("{}")
            .send()
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), 404, "{path}");
    }
    // The gateway's own endpoints still answer.
    let r = insp
        .http
        .get(insp.url("/healthz", &[]))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    assert_eq!(insp.metric("mcpgate_sessions_active").await, 0.0);
}

#[test]
fn check_mode_validates_the_config() {
    let dir = std::env::temp_dir().join(format!("mcpgate-inspector-check-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let run = |toml: &str, extra: &[&str]| {
        let p = dir.join("c.toml");
        std::fs::write(&p, toml).unwrap();
        Command::new(bin("mcpgate"))
            .args(["inspector", "--protocol", "v1", "--check", "--config"])
            .arg(&p)
            .args(extra)
            .output()
            .unwrap()
    };
    let ok = run(
        &testkit_toml("[[url]]\nprefix = \"http://127.0.0.1:3001/\"\n"),
        &[],
    );
    assert!(
        ok.status.success(),
        "{}",
        String::from_utf8_lossy(&ok.stderr)
    );
    for (toml, extra, want) in [
        ("listen = \"0.0.0.0:6277\"\n", &[][..], "loopback"),
        (
            "[[url]]\nprefix = \"http://u:p@h/\"\n",
            &[][..],
            "user info",
        ),
        ("bogus = 1\n", &[][..], "unknown field"),
        ("token = \"short\"\n", &[][..], "at least 16"),
        ("[[stdio]]\ncommand = \"A=B\"\n", &[][..], "'='"),
        ("", &["--ui-origin", "http://x:1/path"][..], "UI origin"),
    ] {
        let out = run(toml, extra);
        assert_eq!(out.status.code(), Some(64), "{toml}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(want), "{toml}: {err}");
    }
    // The example shipped with the tests is valid.
    let example =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("inspector/mcpgate-inspector.example.toml");
    let out = Command::new(bin("mcpgate"))
        .args(["inspector", "--protocol", "v1", "--check", "--config"])
        .arg(&example)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let _ = std::fs::remove_dir_all(&dir);
}
