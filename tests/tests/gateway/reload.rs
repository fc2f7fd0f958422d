//! SIGHUP reloads the configuration file: a server added is served at once, a server
//! removed has its sessions ended (reason `config_reload`) while the others are untouched,
//! a rotated token is refused and its successor accepted, and an invalid file is refused
//! while the running configuration keeps serving.

use mcpgate_testkit::{HttpOptions, HttpServer};
use mcpgate_tests::{Client, Gateway, Reply};
use serde_json::{Value, json};

const OLD: &str = "old-token-0123456789abcdef";
const NEW: &str = "new-token-0123456789abcdef";

fn config(servers: &[(&str, &str)], token: &str) -> String {
    let mut s = format!("[auth]\ntokens = [{{ name = \"alice\", token = \"{token}\" }}]\n");
    for (name, url) in servers {
        s.push_str(&format!(
            "[[server]]\nname = \"{name}\"\ntransport = \"streamable-http\"\nurl = \"{url}\"\n"
        ));
    }
    s
}

async fn post(url: &str, token: &str, sid: Option<&str>, msg: &Value) -> Reply {
    let bearer = format!("Bearer {token}");
    let mut h = vec![
        ("content-type", "application/json"),
        ("accept", "application/json, text/event-stream"),
        ("authorization", bearer.as_str()),
    ];
    if let Some(s) = sid {
        h.push(("mcp-session-id", s));
    }
    Client::new(url).post_raw(&h, msg.to_string()).await
}

async fn initialize(url: &str, token: &str) -> String {
    let r = post(
        url,
        token,
        None,
        &json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{
            "protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}),
    )
    .await;
    assert_eq!(r.status, 200, "{r:?}");
    r.header("mcp-session-id").unwrap().to_owned()
}

fn whoami() -> Value {
    json!({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"whoami","arguments":{}}})
}

#[tokio::test]
async fn sighup_reloads_servers_and_tokens_and_refuses_a_bad_file() {
    let start = || HttpServer::start("127.0.0.1:0".parse().unwrap(), HttpOptions::default());
    let (kept, gone, added) = (
        start().await.unwrap(),
        start().await.unwrap(),
        start().await.unwrap(),
    );
    let gw = Gateway::start(&config(
        &[("kept", &kept.url()), ("gone", &gone.url())],
        OLD,
    ));
    let at = |name: &str| format!("{}/servers/{name}/mcp", gw.base);
    let sk = initialize(&at("kept"), OLD).await;
    let sg = initialize(&at("gone"), OLD).await;
    let me = post(&at("kept"), OLD, Some(&sk), &whoami()).await.text();
    assert_eq!(
        post(&at("gone"), OLD, Some(&sg), &whoami()).await.status,
        200
    );

    // Reload: "gone" removed, "added" added, the token rotated.
    gw.reload_with(
        &config(&[("kept", &kept.url()), ("added", &added.url())], NEW),
        "configuration reloaded",
    )
    .await;
    // The removed server's session ended through the teardown path (its upstream session
    // deleted), and it is no longer served.
    assert_eq!(
        gw.metric("mcpgate_sessions_closed_total{reason=\"config_reload\"}")
            .await,
        1.0
    );
    assert_eq!(gone.stats().sessions_deleted, 1);
    assert_eq!(
        post(&at("gone"), NEW, Some(&sg), &whoami()).await.status,
        404
    );
    // The old token is refused, the new one accepted, and the kept server's session is
    // the same session (same upstream session, nothing re-initialised).
    assert_eq!(
        post(&at("kept"), OLD, Some(&sk), &whoami()).await.status,
        401
    );
    assert_eq!(
        post(&at("kept"), NEW, Some(&sk), &whoami()).await.text(),
        me
    );
    assert_eq!(kept.stats().sessions_created, 1);
    assert_eq!(kept.stats().sessions_deleted, 0);
    // The added server is served at once.
    let sa = initialize(&at("added"), NEW).await;
    assert_eq!(
        post(&at("added"), NEW, Some(&sa), &whoami()).await.status,
        200
    );

    // An invalid file is refused; the configuration in force keeps serving.
    gw.reload_with("[[server]]\nname = 5\n", "configuration reload refused")
        .await;
    assert_eq!(
        post(&at("kept"), NEW, Some(&sk), &whoami()).await.text(),
        me
    );
    assert_eq!(
        post(&at("added"), NEW, Some(&sa), &whoami()).await.status,
        200
    );
    assert_eq!(
        post(&at("kept"), OLD, Some(&sk), &whoami()).await.status,
        401
    );
    // A valid file that fails later checks (an unknown key) is refused the same way.
    gw.reload_with(
        &format!(
            "{}\n[session]\nno_such_key = 1\n",
            config(&[("kept", &kept.url())], OLD)
        ),
        "configuration reload refused",
    )
    .await;
    assert_eq!(
        post(&at("added"), NEW, Some(&sa), &whoami()).await.status,
        200
    );
}
