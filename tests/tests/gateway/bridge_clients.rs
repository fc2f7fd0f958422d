//! The era bridge with the official SDK clients: a client pinned to MCP 2026-07-28 fails
//! directly against a server that speaks only the session era, and works through mcpgate,
//! which holds a session-era upstream session for it — the official everything server
//! over stdio and Streamable HTTP (tools, progress, log messages asked for with
//! `_meta.logLevel`, a resource, a prompt, an elicitation and a sampling round trip via
//! `input_required`, answered by the clients' own handlers), and the testkit (every log
//! message of a call, none duplicated).

use mcpgate_tests::clients::{Everything, dir, everything_stdio_toml};
use mcpgate_tests::modern::{self, Mode, Sdk, Target};
use mcpgate_tests::{Gateway, wait_until};
use serde_json::Value;
use std::time::Duration;

const TOUR: &[&str] = &["--tour", "--elicit", "Ada", "--sample"];

fn assert_toured(v: &Value, cell: &str) {
    assert_eq!(v["ok"], true, "{cell}: {v}");
    assert_eq!(v["protocolVersion"], "2026-07-28", "{cell}: {v}");
    assert_eq!(
        v["long"]["progress"].as_array().map(Vec::len),
        Some(3),
        "{cell}: {v}"
    );
    assert!(
        v["logs"].as_u64().unwrap_or(0) >= 1,
        "a log message: {cell}: {v}"
    );
    assert!(
        v["elicit"].as_str().unwrap_or("").contains("Ada"),
        "{cell}: {v}"
    );
    assert!(
        v["sample"].as_str().unwrap_or("").contains("sampled: "),
        "{cell}: {v}"
    );
}

#[tokio::test]
async fn pinned_clients_reach_the_session_era_everything_server() {
    let cmd: Vec<String> = vec![
        "node".into(),
        dir().join("everything_server.mjs").display().to_string(),
        "stdio".into(),
    ];
    let http = Everything::start("streamableHttp").await;
    let via_stdio = Gateway::start(&everything_stdio_toml());
    let via_http = Gateway::http(&http.url, "");
    for sdk in [Sdk::Ts, Sdk::Py] {
        for (what, direct, gw) in [
            ("stdio", Target::Stdio(cmd.clone()), &via_stdio),
            ("http", Target::Url(http.url.clone()), &via_http),
        ] {
            let cell = format!("{sdk:?} pinned, everything over {what}");
            let d = modern::client(sdk, Mode::Pin, &direct, TOUR).await;
            assert_eq!(d["ok"], false, "directly it cannot work: {cell}: {d}");
            let g = modern::client(sdk, Mode::Pin, &Target::Url(gw.url()), TOUR).await;
            assert_toured(&g, &format!("{cell}, through mcpgate"));
        }
    }
    // Every pooled session ends with the gateway's idle expiry or shutdown, not before:
    // the sessions are the gateway's, and they show as such.
    assert!(via_stdio.metric("mcpgate_sessions_active").await >= 1.0);
    assert!(
        via_stdio
            .log()
            .contains("bridged session opened for a 2026-07-28 client")
    );
}

#[tokio::test]
async fn log_messages_come_when_asked_for() {
    let gw = Gateway::stdio_testkit(&[], "");
    for sdk in [Sdk::Ts, Sdk::Py] {
        let g = modern::client(sdk, Mode::Pin, &Target::Url(gw.url()), &["--sample"]).await;
        // The testkit's resource text differs from the TS server's, so `ok` is false;
        // everything else is what a direct 2026-07-28 server gives.
        let cell = format!("{sdk:?} pinned through mcpgate: {g}");
        assert_eq!(g["protocolVersion"], "2026-07-28", "{cell}");
        assert_eq!(
            g["notify"],
            serde_json::json!({"text": "t1:5", "progress": 5, "logs": 5, "duplicates": 0}),
            "{cell}"
        );
        assert_eq!(g["prompt"], "Hello, mcpgate!", "{cell}");
        assert_eq!(g["sample"], "sampled: say hi", "{cell}");
    }
    assert!(
        wait_until(Duration::from_secs(5), || async {
            gw.log().contains("bridged session opened")
        })
        .await
    );
}
