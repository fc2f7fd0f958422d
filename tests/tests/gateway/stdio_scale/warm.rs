//! Warm starts: children started before their sessions, each handed to one session only,
//! replaced in the background; one that died while waiting is never handed out.

use std::collections::BTreeSet;
use std::time::Duration;

use mcpgate_tests::children::{Kind, mark, marked, stdio_server};
use mcpgate_tests::{Client, Gateway, Session, wait_until};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use serde_json::json;

async fn pid_of(s: &Session) -> u32 {
    s.call("whoami", json!({})).await.text().parse().unwrap()
}

/// Whether process `pid` has ended (a zombie, or reaped).
fn dead(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        // The state follows the command name, which is in parentheses.
        Ok(stat) => stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .is_some_and(|state| state == "Z" || state == "X"),
    }
}

async fn settle(m: &str, n: usize) -> BTreeSet<u32> {
    let ok = wait_until(Duration::from_secs(10), || async { marked(m).len() == n }).await;
    assert!(ok, "{} marked processes, expected {n}", marked(m).len());
    marked(m).into_iter().collect()
}

#[tokio::test]
async fn sessions_take_prestarted_children_one_each_and_the_pool_refills() {
    let m = mark("warm");
    let gw = Gateway::start(&format!(
        "{}warm = 2\n",
        stdio_server("up", Kind::Plain, &m)
    ));
    let c = Client::new(&gw.url());
    // Started with the gateway, before any session.
    let warm = settle(&m, 2).await;
    assert_eq!(gw.metric("mcpgate_stdio_children").await, 2.0);

    let a = c.initialize().await;
    let a_pid = pid_of(&a).await;
    assert!(
        warm.contains(&a_pid),
        "a got a warm child: {a_pid} of {warm:?}"
    );
    let after_a = settle(&m, 3).await;
    let b = c.initialize().await;
    let b_pid = pid_of(&b).await;
    assert_ne!(a_pid, b_pid, "never one child for two sessions");
    assert!(after_a.contains(&b_pid), "b got a warm child too");
    settle(&m, 4).await;

    // A waiting child that dies is discarded, not handed out.
    let waiting: Vec<u32> = marked(&m)
        .into_iter()
        .filter(|p| *p != a_pid && *p != b_pid)
        .collect();
    for p in &waiting {
        kill(Pid::from_raw(*p as i32), Signal::SIGKILL).unwrap();
    }
    // Dead means a zombie or gone: a process that lost its memory (so /proc no longer
    // shows its mark) can still be exiting, and no one can tell it from a live one yet.
    assert!(
        wait_until(Duration::from_secs(5), || async {
            waiting.iter().all(|p| dead(*p))
        })
        .await
    );
    let d = c.initialize().await;
    let d_pid = pid_of(&d).await;
    assert!(
        !waiting.contains(&d_pid),
        "a dead warm child was handed out"
    );
    assert_eq!(d.call("echo", json!({"text": "live"})).await.text(), "live");

    // A child ends with its session and goes to nobody else.
    assert_eq!(a.delete().await, 200);
    assert!(
        wait_until(Duration::from_secs(5), || async {
            !marked(&m).contains(&a_pid)
        })
        .await
    );
    let e = c.initialize().await;
    assert_ne!(pid_of(&e).await, a_pid);
    assert_eq!(b.call("echo", json!({"text": "b"})).await.text(), "b");
}

#[tokio::test]
async fn a_reload_that_changes_the_server_ends_its_waiting_children() {
    let m = mark("warm-reload");
    let server = stdio_server("up", Kind::Plain, &m);
    let gw = Gateway::start(&format!("{server}warm = 3\n"));
    let before = settle(&m, 3).await;
    gw.reload_with(&format!("{server}warm = 1\n"), "configuration reloaded")
        .await;
    // The changed server's old children are ended; the new one starts its own.
    let gone = wait_until(Duration::from_secs(5), || async {
        let now = marked(&m);
        now.len() == 1 && now.iter().all(|p| !before.contains(p))
    })
    .await;
    assert!(gone, "after reload: {:?} (before: {before:?})", marked(&m));
    assert_eq!(gw.metric("mcpgate_stdio_children").await, 1.0);
    gw.reload_with(
        &stdio_server("other", Kind::Plain, &m),
        "configuration reloaded",
    )
    .await;
    assert!(wait_until(Duration::from_secs(5), || async { marked(&m).is_empty() }).await);
}
