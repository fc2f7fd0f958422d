//! No orphans: children (and theirs) die with their session, and with the gateway even
//! when it is killed with SIGKILL.

use std::time::{Duration, Instant};

use mcpgate_tests::children::{Kind, mark, marked, stdio_server};
use mcpgate_tests::{Client, Gateway, wait_until};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

/// Sessions per kind of child: 17 × 3 = 51 children.
const PER_KIND: usize = 17;

#[tokio::test]
async fn sigkill_of_the_gateway_leaves_no_child_or_grandchild() {
    let m = mark("orphans");
    let toml = [
        stdio_server("plain", Kind::Plain, &m),
        stdio_server("stubborn", Kind::Stubborn, &m),
        stdio_server("family", Kind::Family, &m),
    ]
    .concat();
    let mut gw = Gateway::start(&toml);
    let mut sessions = Vec::new();
    for name in ["plain", "stubborn", "family"] {
        let c = Client::new(&format!("{}/servers/{name}/mcp", gw.base));
        for _ in 0..PER_KIND {
            sessions.push(c.initialize().await);
        }
    }
    // plain: the testkit; stubborn: its shell and the testkit; family: the testkit and
    // its grandchild `sleep`.
    let expected = PER_KIND * 5;
    let all_up = wait_until(Duration::from_secs(10), || async {
        marked(&m).len() == expected
    })
    .await;
    assert!(
        all_up,
        "{} marked processes, expected {expected}",
        marked(&m).len()
    );

    kill(Pid::from_raw(gw.pid() as i32), Signal::SIGKILL).unwrap();
    let killed_at = Instant::now();
    let gone = wait_until(Duration::from_secs(2), || async { marked(&m).is_empty() }).await;
    let left = marked(&m);
    assert!(
        gone,
        "{} processes outlived the gateway by 2 s: {left:?}; log:\n{}",
        left.len(),
        gw.log()
    );
    eprintln!(
        "all {expected} processes gone {:?} after SIGKILL",
        killed_at.elapsed()
    );
    let reaped = wait_until(Duration::from_secs(2), || async {
        gw.log().contains(&format!("groups={}", PER_KIND * 3))
    })
    .await;
    assert!(reaped, "the reaper says what it killed; log:\n{}", gw.log());
    assert!(!gw.is_running());
}

#[tokio::test]
async fn a_session_s_end_takes_its_stubborn_child_and_grandchild_only() {
    let m = mark("teardown");
    let other = mark("teardown-other");
    let toml = [
        stdio_server("stubborn", Kind::Stubborn, &m),
        stdio_server("family", Kind::Family, &m),
        stdio_server("bystander", Kind::Plain, &other),
    ]
    .concat();
    let gw = Gateway::start(&format!("{toml}[upstream]\nexit_grace = \"300ms\"\n"));
    let stubborn = Client::new(&format!("{}/servers/stubborn/mcp", gw.base))
        .initialize()
        .await;
    let family = Client::new(&format!("{}/servers/family/mcp", gw.base))
        .initialize()
        .await;
    let bystander = Client::new(&format!("{}/servers/bystander/mcp", gw.base))
        .initialize()
        .await;
    assert!(wait_until(Duration::from_secs(5), || async { marked(&m).len() == 4 }).await);
    assert_eq!(stubborn.delete().await, 200);
    assert_eq!(family.delete().await, 200);
    let gone = wait_until(Duration::from_secs(5), || async { marked(&m).is_empty() }).await;
    assert!(gone, "left after DELETE: {:?}", marked(&m));
    assert_eq!(
        marked(&other).len(),
        1,
        "the other session's child is untouched"
    );
    let r = bystander
        .call("echo", serde_json::json!({"text": "still here"}))
        .await;
    assert_eq!(r.text(), "still here");
}
