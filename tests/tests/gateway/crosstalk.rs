//! Strict routing: many concurrent sessions, each receiving only its own notifications.

use std::collections::BTreeSet;
use std::time::Duration;

use mcpgate_testkit::{HttpOptions, HttpServer};
use mcpgate_tests::{Client, Gateway, Pki};
use serde_json::{Value, json};

const SESSIONS: usize = 50;
const COUNT: u64 = 50;

/// What one session saw.
#[derive(Debug, Default)]
struct Seen {
    misrouted: usize,
    messages: BTreeSet<u64>,
    duplicates: usize,
    progress: BTreeSet<u64>,
}

fn account(seen: &mut Seen, tag: &str, m: &Value) {
    match m["method"].as_str() {
        Some("notifications/message") => {
            let data = &m["params"]["data"];
            if data.get("timer").is_some() {
                return;
            }
            if data["tag"] != tag {
                seen.misrouted += 1;
            } else if !seen.messages.insert(data["seq"].as_u64().unwrap()) {
                seen.duplicates += 1;
            }
        }
        Some("notifications/progress") => {
            if m["params"]["progressToken"] != tag {
                seen.misrouted += 1;
            } else {
                seen.progress
                    .insert(m["params"]["progress"].as_u64().unwrap());
            }
        }
        _ => {}
    }
}

async fn one_session(url: String, i: usize) -> Seen {
    let c = Client::new(&url);
    let s = c.initialize().await;
    let mut get = s.open_stream().await;
    assert_eq!(get.recv().await.unwrap()["status"], 200);
    let tag = format!("client-{i}");
    let r = s
        .request(
            "tools/call",
            json!({"name":"notify","arguments":{"tag":tag,"count":COUNT},"_meta":{"progressToken":tag}}),
        )
        .await;
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(r.text(), format!("{tag}:{COUNT}"));
    let mut seen = Seen::default();
    for m in &r.messages {
        account(&mut seen, &tag, m);
    }
    // Messages that are not tied to the request (stdio) arrive on the GET stream.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while (seen.messages.len() as u64) < COUNT {
        match tokio::time::timeout_at(deadline, get.recv()).await {
            Ok(Some(m)) => account(&mut seen, &tag, &m),
            _ => break,
        }
    }
    // Anything else still arriving must not be someone else's either.
    while let Ok(Some(m)) = tokio::time::timeout(Duration::from_millis(100), get.recv()).await {
        account(&mut seen, &tag, &m);
    }
    assert_eq!(s.delete().await, 200);
    seen
}

async fn run(gw: &Gateway) {
    let tasks: Vec<_> = (0..SESSIONS)
        .map(|i| tokio::spawn(one_session(gw.url(), i)))
        .collect();
    let mut misrouted = 0;
    let mut lost = 0;
    let mut dup = 0;
    for t in tasks {
        let s = t.await.unwrap();
        misrouted += s.misrouted;
        dup += s.duplicates;
        lost += COUNT as usize - s.messages.len();
        assert_eq!(
            s.progress.len() as u64,
            COUNT,
            "every progress notification reaches its request"
        );
    }
    assert_eq!(
        (misrouted, lost, dup),
        (0, 0, 0),
        "misrouted, lost, duplicated"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_crosstalk_http_upstream() {
    let up = HttpServer::start("127.0.0.1:0".parse().unwrap(), HttpOptions::default())
        .await
        .unwrap();
    let gw = Gateway::http(&up.url(), "");
    run(&gw).await;
    let st = up.stats();
    assert_eq!(
        st.sessions_created, SESSIONS as u64,
        "one dedicated upstream session per client session"
    );
    assert_eq!(st.sessions_deleted, SESSIONS as u64);
}

/// The same over an https upstream (a test CA given as `ca_file`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_crosstalk_https_upstream() {
    let pki = Pki::new();
    let opts = HttpOptions {
        tls: Some(pki.server_config(&pki.server, false)),
        ..HttpOptions::default()
    };
    let up = HttpServer::start("127.0.0.1:0".parse().unwrap(), opts)
        .await
        .unwrap();
    assert!(up.url().starts_with("https://"));
    let gw = Gateway::http(&up.url(), &format!("ca_file = {:?}\n", pki.ca));
    run(&gw).await;
    assert!(up.stats().tls_connections > 0, "the upstream hop was TLS");
    let st = up.stats();
    assert_eq!(
        st.sessions_created, SESSIONS as u64,
        "one dedicated upstream session per client session"
    );
    assert_eq!(st.sessions_deleted, SESSIONS as u64);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_crosstalk_stdio_upstream() {
    let mut gw = Gateway::stdio_testkit(&[], "");
    run(&gw).await;
    assert!(gw.is_running());
    assert_eq!(gw.metric("mcpgate_stdio_children").await, 0.0);
}
