//! What real clients and servers tripped over: a stdio server's own last words in the
//! error, redirects (same origin followed, another origin refused, named once), idle
//! sessions evicted when the gateway is full, and the index page.

use std::time::Duration;

use mcpgate_testkit::{HttpOptions, HttpServer};
use mcpgate_tests::{Client, Gateway, bin};
use serde_json::{Value, json};

fn init() -> Value {
    json!({"jsonrpc":"2.0","id":3,"method":"initialize","params":{
        "protocolVersion":"2025-11-25","capabilities":{},
        "clientInfo":{"name":"field","version":"0"}}})
}

fn stdio_server(name: &str, command: &[&str]) -> String {
    let cmd: Vec<String> = command.iter().map(|c| format!("{c:?}")).collect();
    format!(
        "[[server]]\nname = \"{name}\"\ntransport = \"stdio\"\ncommand = [{}]\n",
        cmd.join(", ")
    )
}

/// A server that exits at start with a message on stderr: the client's initialize error
/// says how it ended and what it said; so does one warning.
#[tokio::test]
async fn a_stdio_servers_last_words_reach_the_client() {
    let gw = Gateway::start(&format!(
        "{}{}",
        stdio_server(
            "needs-key",
            &[
                "sh",
                "-c",
                "echo 'starting' >&2; echo 'Error: API_KEY environment variable is required' >&2; exit 1"
            ]
        ),
        stdio_server("killed", &["sh", "-c", "kill -9 $$"]),
    ));
    let c = Client::new(&format!("{}/servers/needs-key/mcp", gw.base));
    let r = c.post(None, &init()).await;
    assert_eq!(r.error_code(), Some(-32003), "{r:?}");
    assert_eq!(r.last()["id"], 3);
    let msg = r.last()["error"]["message"].as_str().unwrap();
    assert!(msg.contains("exited with status 1"), "{msg}");
    assert!(
        msg.contains("Error: API_KEY environment variable is required"),
        "{msg}"
    );
    let c = Client::new(&format!("{}/servers/killed/mcp", gw.base));
    let r = c.post(None, &init()).await;
    let msg = r.last()["error"]["message"].as_str().unwrap();
    assert!(msg.contains("killed by signal 9 (SIGKILL)"), "{msg}");
    let log = gw.log();
    let warned = log
        .lines()
        .filter(|l| l.contains("WARN") && l.contains("API_KEY environment variable"))
        .count();
    assert_eq!(warned, 1, "one warning names the cause:\n{log}");
    assert_eq!(gw.metric("mcpgate_stdio_children").await, 0.0);
}

/// `/mcp` → `/mcp/` on the same origin is followed for every request of the session;
/// a redirect to another origin is refused with the target named, and that origin never
/// sees a request (nor the configured credentials).
#[tokio::test]
async fn redirects_same_origin_followed_other_origin_refused() {
    let moved = HttpServer::start(
        "127.0.0.1:0".parse().unwrap(),
        HttpOptions {
            path: "/mcp/".into(),
            redirect: Some(("/mcp".into(), "/mcp/".into())),
            ..HttpOptions::default()
        },
    )
    .await
    .unwrap();
    let elsewhere = HttpServer::start("127.0.0.1:0".parse().unwrap(), HttpOptions::default())
        .await
        .unwrap();
    let pointing = HttpServer::start(
        "127.0.0.1:0".parse().unwrap(),
        HttpOptions {
            redirect: Some(("/mcp".into(), elsewhere.url())),
            ..HttpOptions::default()
        },
    )
    .await
    .unwrap();
    let sse_pointing = HttpServer::start(
        "127.0.0.1:0".parse().unwrap(),
        HttpOptions {
            redirect: Some(("/sse".into(), format!("{}/sse", elsewhere.url()))),
            ..HttpOptions::default()
        },
    )
    .await
    .unwrap();
    let moved_url = moved.url().trim_end_matches('/').to_owned();
    let gw = Gateway::start(&format!(
        "[[server]]\nname = \"moved\"\ntransport = \"streamable-http\"\nurl = \"{moved_url}\"\n\
         [[server]]\nname = \"away\"\ntransport = \"streamable-http\"\nurl = \"{}\"\nheaders = {{ \"X-Key\" = \"secret\" }}\n\
         [[server]]\nname = \"sse-away\"\ntransport = \"sse\"\nurl = \"http://{}/sse\"\n",
        pointing.url(),
        sse_pointing.addr(),
    ));
    let s = Client::new(&format!("{}/servers/moved/mcp", gw.base))
        .initialize()
        .await;
    assert_eq!(
        s.call("echo", json!({"text":"moved"})).await.text(),
        "moved"
    );
    assert_eq!(s.delete().await, 200);
    let st = moved.stats();
    assert_eq!((st.sessions_created, st.sessions_deleted), (1, 1));
    assert!(st.redirected >= 3, "each request was redirected: {st:?}");

    for (name, target) in [
        ("away", elsewhere.url()),
        ("sse-away", format!("{}/sse", elsewhere.url())),
    ] {
        let r = Client::new(&format!("{}/servers/{name}/mcp", gw.base))
            .post(None, &init())
            .await;
        assert_eq!(r.error_code(), Some(-32003), "{name}: {r:?}");
        let msg = r.last()["error"]["message"].as_str().unwrap();
        assert!(
            msg.contains(&target) && msg.contains("another origin"),
            "{name}: {msg}"
        );
        assert!(!msg.contains("process"), "{name}: {msg}");
    }
    assert_eq!(elsewhere.stats().requests, 0);
    assert!(elsewhere.stats().last_headers.is_empty());
    assert!(
        !gw.log().contains("process exited"),
        "an HTTP upstream is not a process:\n{}",
        gw.log()
    );
}

/// When the stdio children limit is reached, the longest-idle session with nothing in
/// flight and no open stream is evicted (reason `evicted`) instead of refusing the
/// newcomer; busy sessions are never evicted.
#[tokio::test]
async fn idle_sessions_are_evicted_when_the_children_limit_is_reached() {
    let gw = Gateway::start(&format!(
        "{}[upstream]\nmax_stdio_children = 2\n",
        stdio_server(
            "up",
            &[&bin("mcpgate-testkit").display().to_string(), "stdio"]
        )
    ));
    let c = Client::new(&gw.url());
    let oldest = c.initialize().await;
    tokio::time::sleep(Duration::from_millis(50)).await;
    let newer = c.initialize().await;
    assert_eq!(newer.call("echo", json!({"text":"n"})).await.text(), "n");
    let third = c.initialize().await;
    assert_eq!(third.call("echo", json!({"text":"t"})).await.text(), "t");
    assert_eq!(
        gw.metric("mcpgate_sessions_closed_total{reason=\"evicted\"}")
            .await,
        1.0
    );
    assert_eq!(
        oldest.call("echo", json!({"text":"o"})).await.status,
        404,
        "the longest-idle session was the one evicted"
    );
    assert_eq!(newer.call("echo", json!({"text":"n"})).await.text(), "n");
    // Both remaining sessions busy (an open GET stream each): nothing to evict, 503.
    let _a = newer.open_stream().await;
    let _b = third.open_stream().await;
    let r = c.post(None, &init()).await;
    assert_eq!(r.status, 503, "{r:?}");
    assert_eq!(gw.metric("mcpgate_stdio_children").await, 2.0);
}

/// `GET /` names the MCP endpoints.
#[tokio::test]
async fn the_index_names_the_endpoints() {
    let gw = Gateway::start(&stdio_server(
        "demo",
        &[&bin("mcpgate-testkit").display().to_string(), "stdio"],
    ));
    let r = reqwest::get(format!("{}/", gw.base)).await.unwrap();
    assert_eq!(r.status(), 200);
    let text = r.text().await.unwrap();
    assert!(
        text.contains("/mcp") && text.contains("/servers/demo/mcp"),
        "{text}"
    );
}

/// The one-command form: `--env KEY=VALUE` and `--cwd DIR` reach the child (seen here in
/// its last words, which the failed initialize reports).
#[tokio::test]
async fn env_and_cwd_for_the_one_command_form() {
    use std::io::{BufRead, BufReader};
    let dir = std::env::temp_dir();
    let mut child = std::process::Command::new(bin("mcpgate"))
        .args([
            "--listen",
            "127.0.0.1:0",
            "--env",
            "GREETING=hello-from-env",
            "--cwd",
        ])
        .arg(&dir)
        .args(["--", "sh", "-c", "echo \"$GREETING in $(pwd)\" >&2; exit 2"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let base = line
        .trim()
        .strip_prefix("mcpgate listening on ")
        .unwrap()
        .to_owned();
    let r = Client::new(&format!("{base}/mcp"))
        .post(None, &init())
        .await;
    let _ = child.kill();
    let _ = child.wait();
    let msg = r.last()["error"]["message"].as_str().unwrap().to_owned();
    let cwd = dir.canonicalize().unwrap();
    assert!(
        msg.contains("exited with status 2")
            && msg.contains(&format!("hello-from-env in {}", cwd.display())),
        "{msg}"
    );
}
