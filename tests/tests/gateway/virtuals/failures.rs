//! Failure policies: a member that cannot start, and one that dies under a live session,
//! with `fail_closed` (the session fails or ends) and `fail_open` (the member is dropped,
//! the client is told the lists changed, the metrics and the admin API say which members
//! are up); a member whose upstream session is gone ends the session, never leaving it
//! half-working.

use std::time::Duration;

use mcpgate_testkit::{HttpOptions, HttpServer};
use mcpgate_tests::admin::Admin;
use mcpgate_tests::virtuals::{assert_two_testkits, http_kit, missing, names, stdio_kit};
use mcpgate_tests::{Client, Gateway, Launch, children_of, wait_until};
use serde_json::{Value, json};

const ADMIN: &str = "admin-token-0123456789";

fn config(kit_url: &str, failure: &str, members: &[(&str, &str)]) -> String {
    let mut t = format!(
        "[admin]\naddr = \"127.0.0.1:0\"\ntoken = \"{ADMIN}\"\n{}{}{}[[virtual]]\nname = \"v\"\ndefault = true\nfailure = \"{failure}\"\n",
        http_kit("kit", kit_url),
        stdio_kit("kitstdio"),
        missing("missing"),
    );
    for (server, prefix) in members {
        t.push_str(&format!(
            "[[virtual.member]]\nserver = \"{server}\"\nprefix = \"{prefix}\"\n"
        ));
    }
    t
}

async fn kit() -> HttpServer {
    HttpServer::start("127.0.0.1:0".parse().unwrap(), HttpOptions::default())
        .await
        .unwrap()
}

fn start(toml: &str) -> Gateway {
    Gateway::launch(
        toml,
        Launch {
            stdout_lines: 2,
            ..Launch::default()
        },
    )
}

async fn initialize(url: &str) -> mcpgate_tests::Reply {
    Client::new(url)
        .post(
            None,
            &json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{
                "protocolVersion":"2025-11-25","capabilities":{},
                "clientInfo":{"name":"t","version":"0"}}}),
        )
        .await
}

/// The members of the one session the admin API lists.
async fn members(admin: &Admin) -> Vec<(String, bool)> {
    let sessions = admin.sessions().await;
    assert_eq!(sessions.len(), 1, "{sessions:?}");
    sessions[0]["members"]
        .as_array()
        .unwrap_or_else(|| panic!("no members in {sessions:?}"))
        .iter()
        .map(|m| (m["server"].as_str().unwrap().to_owned(), m["up"] == true))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fail_closed_member_that_cannot_start_fails_initialize() {
    let kit = kit().await;
    let gw = start(&config(
        &kit.url(),
        "fail_closed",
        &[("kitstdio", "b"), ("missing", "m"), ("kit", "a")],
    ));
    let r = initialize(&gw.url()).await;
    assert_eq!(r.error_code(), Some(-32003), "{r:?}");
    assert!(r.header("mcp-session-id").is_none(), "{r:?}");
    assert!(
        r.body.contains("/nonexistent/mcp-server"),
        "the cause is named: {r:?}"
    );
    let pid = gw.pid();
    assert!(
        wait_until(Duration::from_secs(10), || async {
            children_of(pid).is_empty()
        })
        .await,
        "the member that did start was ended: {:?}",
        children_of(pid)
    );
    assert_eq!(
        kit.stats().sessions_created,
        0,
        "no member session was left behind"
    );
    assert_eq!(gw.metric("mcpgate_sessions_active").await, 0.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fail_open_member_that_cannot_start_is_left_out() {
    let kit = kit().await;
    let gw = start(&config(
        &kit.url(),
        "fail_open",
        &[("kit", "a"), ("missing", "m"), ("kitstdio", "b")],
    ));
    let admin = Admin::of(&gw, ADMIN);
    let s = Client::new(&gw.url()).initialize().await;
    let tools = names(&s.request("tools/list", json!({})).await, "tools");
    assert!(tools.iter().any(|t| t == "a__echo") && tools.iter().any(|t| t == "b__echo"));
    assert!(!tools.iter().any(|t| t.starts_with("m__")), "{tools:?}");
    assert_eq!(
        s.call("b__echo", json!({"text": "still here"}))
            .await
            .text(),
        "still here"
    );
    assert_eq!(
        gw.metric(r#"mcpgate_virtual_member_failures_total{server="v",member="missing"}"#)
            .await,
        1.0
    );
    assert_eq!(
        gw.metric(r#"mcpgate_virtual_members_up{server="v",member="kitstdio"}"#)
            .await,
        1.0
    );
    assert_eq!(
        members(&admin).await,
        [
            ("kit".into(), true),
            ("missing".into(), false),
            ("kitstdio".into(), true)
        ]
    );
    assert!(
        gw.log()
            .contains("member cannot start; the session goes on without it")
    );
    assert_eq!(s.delete().await, 200);
}

/// Calls `b__die` (the stdio member exits without answering) on a session with its GET
/// stream open; returns the call's answer and what the GET stream got within 2 s.
async fn kill_member(s: &mcpgate_tests::Session) -> (mcpgate_tests::Reply, Vec<Value>) {
    let mut get = s.open_stream().await;
    assert_eq!(get.recv().await.unwrap()["status"], 200);
    let r = s.call("b__die", json!({})).await;
    let mut seen = Vec::new();
    while let Ok(Some(m)) = tokio::time::timeout(Duration::from_secs(2), get.recv()).await {
        seen.push(m);
    }
    (r, seen)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fail_open_member_killed_mid_session_is_dropped() {
    let kit = kit().await;
    let gw = start(&config(
        &kit.url(),
        "fail_open",
        &[("kit", "a"), ("kitstdio", "b")],
    ));
    let admin = Admin::of(&gw, ADMIN);
    let s = Client::new(&gw.url()).initialize().await;
    let listed = names(&s.request("tools/list", json!({})).await, "tools");
    assert_eq!(listed.len() % 2, 0);
    assert_two_testkits(&listed, "a", "b");
    let (r, seen) = kill_member(&s).await;
    assert_eq!(r.error_code(), Some(-32003), "{r:?}");
    assert!(r.body.contains("member kitstdio failed"), "{r:?}");
    assert!(
        seen.iter()
            .any(|m| m["method"] == "notifications/tools/list_changed"),
        "the client is told the catalogue changed: {seen:?}"
    );
    let tools = names(&s.request("tools/list", json!({})).await, "tools");
    assert!(
        !tools.is_empty() && tools.iter().all(|t| t.starts_with("a__")),
        "{tools:?}"
    );
    assert_eq!(s.call("a__echo", json!({"text": "on"})).await.text(), "on");
    assert_eq!(
        s.call("b__echo", json!({"text": "x"})).await.error_code(),
        Some(-32602)
    );
    assert_eq!(
        members(&admin).await,
        [("kit".into(), true), ("kitstdio".into(), false)]
    );
    assert_eq!(
        gw.metric(r#"mcpgate_virtual_member_failures_total{server="v",member="kitstdio"}"#)
            .await,
        1.0
    );
    assert_eq!(
        gw.metric(r#"mcpgate_virtual_members_up{server="v",member="kitstdio"}"#)
            .await,
        0.0
    );
    assert!(
        gw.log()
            .contains("dropped from the session's catalogue (fail_open)")
    );
    assert_eq!(s.delete().await, 200);
    assert_eq!(kit.stats().sessions_deleted, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fail_closed_member_killed_mid_session_ends_the_session() {
    let kit = kit().await;
    let gw = start(&config(
        &kit.url(),
        "fail_closed",
        &[("kit", "a"), ("kitstdio", "b")],
    ));
    let s = Client::new(&gw.url()).initialize().await;
    let (r, _) = kill_member(&s).await;
    assert!(r.error_code().is_some(), "{r:?}");
    let ended = wait_until(Duration::from_secs(5), || async {
        s.call("a__echo", json!({"text": "x"})).await.status == 404
    })
    .await;
    assert!(
        ended,
        "the session ended with its member: the client re-initialises"
    );
    assert!(
        wait_until(Duration::from_secs(5), || async {
            kit.stats().sessions_deleted == 1
        })
        .await,
        "the other member's session was ended too: {:?}",
        kit.stats()
    );
    assert!(children_of(gw.pid()).is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_whose_session_is_gone_ends_the_session() {
    let first = kit().await;
    let addr = first.addr();
    let gw = start(&config(
        &first.url(),
        "fail_open",
        &[("kit", "a"), ("kitstdio", "b")],
    ));
    let s = Client::new(&gw.url()).initialize().await;
    assert_eq!(s.call("a__echo", json!({"text": "x"})).await.text(), "x");
    // The HTTP member restarts: it no longer knows the session and answers 404.
    first.shutdown().await;
    let again = HttpServer::start(addr, HttpOptions::default())
        .await
        .unwrap();
    let r = s.call("a__echo", json!({"text": "y"})).await;
    assert!(r.error_code().is_some() || r.status == 404, "{r:?}");
    let next = s.call("b__echo", json!({"text": "z"})).await;
    assert_eq!(
        next.status, 404,
        "not half-working: the whole session ends, the client re-initialises: {next:?}"
    );
    let s2 = Client::new(&gw.url()).initialize().await;
    assert_eq!(
        s2.call("a__echo", json!({"text": "new"})).await.text(),
        "new"
    );
    assert_eq!(again.stats().sessions_created, 1);
    assert_eq!(s2.delete().await, 200);
}
