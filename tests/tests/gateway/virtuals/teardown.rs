//! Teardown of a virtual server's sessions: idle expiry and the drain end every member
//! session through the one teardown path (HTTP members get their DELETE, stdio members'
//! children are gone); the client's DELETE is shown by the SDK and crosstalk tests.

use std::time::Duration;

use mcpgate_testkit::{HttpOptions, HttpServer};
use mcpgate_tests::virtuals::{everything, http_kit, stdio_kit};
use mcpgate_tests::{Client, Gateway, children_of, wait_until};
use serde_json::json;

fn config(kit_url: &str, idle: &str) -> String {
    format!(
        "{}{}{}[[virtual]]\nname = \"v\"\ndefault = true\n{idle}[[virtual.member]]\nserver = \"kit\"\nprefix = \"a\"\n[[virtual.member]]\nserver = \"kitstdio\"\nprefix = \"b\"\n[[virtual.member]]\nserver = \"everything\"\nprefix = \"ev\"\n",
        http_kit("kit", kit_url),
        stdio_kit("kitstdio"),
        everything("everything"),
    )
}

fn alive(pid: u32) -> bool {
    std::path::Path::new(&format!("/proc/{pid}")).exists()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_expiry_ends_every_member_session() {
    let kit = HttpServer::start("127.0.0.1:0".parse().unwrap(), HttpOptions::default())
        .await
        .unwrap();
    let gw = Gateway::start(&config(&kit.url(), "idle_timeout = \"1s\"\n"));
    let s = Client::new(&gw.url()).initialize().await;
    assert_eq!(
        s.call("ev__echo", json!({"message": "x"})).await.text(),
        "Echo: x"
    );
    let pid = gw.pid();
    assert_eq!(children_of(pid).len(), 2, "a child per stdio member");
    let ended = wait_until(Duration::from_secs(15), || async {
        // Not counted until the expiry: absent until then.
        gw.metric_or_zero(r#"mcpgate_sessions_closed_total{reason="idle"}"#)
            .await
            == 1.0
    })
    .await;
    assert!(ended, "the idle session expired: {}", gw.log());
    assert!(
        wait_until(Duration::from_secs(10), || async {
            children_of(pid).is_empty() && kit.stats().sessions_deleted == 1
        })
        .await,
        "every member's session ended: children {:?}, {:?}",
        children_of(pid),
        kit.stats()
    );
    assert_eq!(s.call("a__echo", json!({"text": "x"})).await.status, 404);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_drain_ends_every_member_session() {
    let kit = HttpServer::start("127.0.0.1:0".parse().unwrap(), HttpOptions::default())
        .await
        .unwrap();
    let mut gw = Gateway::start(&config(&kit.url(), ""));
    let mut sessions = Vec::new();
    for _ in 0..3 {
        let s = Client::new(&gw.url()).initialize().await;
        assert_eq!(s.call("b__echo", json!({"text": "x"})).await.text(), "x");
        sessions.push(s);
    }
    let children = children_of(gw.pid());
    assert_eq!(
        children.len(),
        6,
        "two stdio members per session: {children:?}"
    );
    let code = tokio::task::spawn_blocking(move || gw.stop())
        .await
        .unwrap();
    assert_eq!(code, Some(0), "SIGTERM drains and exits 0");
    assert!(
        children.iter().all(|c| !alive(*c)),
        "no member child outlived the gateway: {:?}",
        children.iter().filter(|c| alive(**c)).collect::<Vec<_>>()
    );
    let st = kit.stats();
    assert_eq!((st.sessions_created, st.sessions_deleted), (3, 3), "{st:?}");
}
