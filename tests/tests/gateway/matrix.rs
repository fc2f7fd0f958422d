//! Feature matrix: the official TypeScript SDK client (`tests/clients/matrix_client.mjs`)
//! through mcpgate to the official everything server, for every pairing of client front
//! (Streamable HTTP `/mcp`, legacy SSE `/sse`) and upstream transport (Streamable HTTP,
//! legacy SSE, stdio). Each run covers initialize, tools/list, progress, server→client
//! sampling and roots requests, cancellation, resource subscriptions and close; then the
//! gateway must hold no session and (stdio) no child.
//!
//! Needs `scripts/setup-test-deps` (tests/clients/node_modules); without it these tests
//! fail, they never pass silently.

use std::time::Duration;

use mcpgate_tests::clients::{self, Everything, SETUP_HINT, everything_stdio_toml, run_json_line};
use mcpgate_tests::{Gateway, children_of, wait_until};
use serde_json::Value;
use tokio::process::Command;

const CLIENT_TIMEOUT: Duration = Duration::from_secs(60);
const STEPS: [&str; 8] = [
    "initialize",
    "toolsList",
    "progress",
    "sampling",
    "roots",
    "cancel",
    "subscribe",
    "close",
];

#[derive(Debug, Clone, Copy)]
enum Front {
    StreamableHttp,
    Sse,
}

#[derive(Debug, Clone, Copy)]
enum Upstream {
    StreamableHttp,
    Sse,
    Stdio,
}

/// Runs `matrix_client.mjs` against `url`; returns its JSON line, stderr and whether it
/// exited 0.
async fn run_client(url: &str, sse: bool) -> (Value, String, bool) {
    let mut cmd = Command::new("node");
    cmd.arg(clients::dir().join("matrix_client.mjs")).arg(url);
    if sse {
        cmd.arg("--sse");
    }
    let run = run_json_line(cmd, "matrix_client.mjs", CLIENT_TIMEOUT, SETUP_HINT).await;
    (run.json, run.stderr, run.status.success())
}

async fn matrix(front: Front, upstream: Upstream) {
    let (server, config) = match upstream {
        Upstream::StreamableHttp | Upstream::Sse => {
            let (mode, transport) = match upstream {
                Upstream::Sse => ("sse", "sse"),
                _ => ("streamableHttp", "streamable-http"),
            };
            let server = Everything::start(mode).await;
            let config = format!(
                "[[server]]\nname = \"everything\"\ntransport = \"{transport}\"\nurl = \"{}\"\n",
                server.url
            );
            (Some(server), config)
        }
        Upstream::Stdio => (None, everything_stdio_toml()),
    };
    let gw = Gateway::start(&config);
    let (url, sse) = match front {
        Front::StreamableHttp => (gw.url(), false),
        Front::Sse => (format!("{}/sse", gw.base), true),
    };

    let (v, stderr, success) = run_client(&url, sse).await;
    let context = || {
        format!(
            "{front:?} front, {upstream:?} upstream\nresult: {v}\nclient stderr:\n{stderr}\ngateway log:\n{}",
            gw.log()
        )
    };
    for step in STEPS {
        assert_eq!(v["steps"][step], true, "step {step} failed: {}", context());
    }
    assert!(success && v["ok"] == true, "client failed: {}", context());
    assert_eq!(v["serverName"], "mcp-servers/everything", "{}", context());
    eprintln!(
        "{front:?} front × {upstream:?} upstream: {} ms total, steps {}",
        v["totalMs"], v["timingsMs"]
    );

    gw.assert_drained(Duration::from_secs(10)).await;
    assert_eq!(gw.metric("mcpgate_sessions_opened_total").await, 1.0);
    if let Upstream::Stdio = upstream {
        let pid = gw.pid();
        assert!(
            wait_until(Duration::from_secs(10), || async {
                children_of(pid).is_empty()
            })
            .await,
            "the everything server child was not reaped: {:?}\ngateway log:\n{}",
            children_of(pid),
            gw.log()
        );
        assert_eq!(gw.metric("mcpgate_stdio_children").await, 0.0);
    }
    drop(gw);
    drop(server);
}

#[tokio::test]
async fn matrix_http_front_http_upstream() {
    matrix(Front::StreamableHttp, Upstream::StreamableHttp).await;
}

#[tokio::test]
async fn matrix_http_front_sse_upstream() {
    matrix(Front::StreamableHttp, Upstream::Sse).await;
}

#[tokio::test]
async fn matrix_http_front_stdio_upstream() {
    matrix(Front::StreamableHttp, Upstream::Stdio).await;
}

/// A legacy SSE client's `GET /sse` arrives before the upstream `initialize`, so the
/// session's upstream GET stream waits for the initialize and builds each attempt with the
/// session headers of the moment (`mcp-session-id`, `mcp-protocol-version`): server-initiated
/// messages outside a request (the `roots/list` after `initialized`,
/// `notifications/resources/updated`) reach the client. (Built once without those headers,
/// every attempt got HTTP 400 and none of them did.)
#[tokio::test]
async fn matrix_sse_front_http_upstream() {
    matrix(Front::Sse, Upstream::StreamableHttp).await;
}

#[tokio::test]
async fn matrix_sse_front_sse_upstream() {
    matrix(Front::Sse, Upstream::Sse).await;
}

#[tokio::test]
async fn matrix_sse_front_stdio_upstream() {
    matrix(Front::Sse, Upstream::Stdio).await;
}
