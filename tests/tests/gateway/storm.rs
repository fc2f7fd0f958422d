//! Reconnect storm: many clients opening and closing sessions fast, a quarter of them
//! vanishing without DELETE, against an upstream whose per-session timer fires ~300 ms
//! after each session starts (the field's crash: a timer outliving its session).

use std::time::Duration;

use mcpgate_testkit::{HttpOptions, HttpServer};
use mcpgate_tests::{Client, Gateway, children_of, wait_until};
use serde_json::json;

const CLIENTS: usize = 20;
const CYCLES: usize = 100;
const CONFIG: &str = "[listen]\nkeep_alive = \"100ms\"\n[session]\nidle_timeout = \"3s\"\n";

/// Runs the storm; returns how many sessions were dropped without DELETE.
async fn storm(url: String) -> usize {
    let tasks: Vec<_> = (0..CLIENTS)
        .map(|i| {
            let url = url.clone();
            tokio::spawn(async move {
                let mut dropped = 0;
                for cycle in 0..CYCLES {
                    // A fresh HTTP client per cycle: dropping it really closes its sockets.
                    let c = Client::new(&url);
                    let s = c.initialize().await;
                    let mut stream = s.open_stream().await;
                    let opened = stream.recv().await.unwrap();
                    assert_eq!(
                        opened["status"], 200,
                        "GET stream of cycle {cycle}: {opened}"
                    );
                    let text = format!("{i}-{cycle}");
                    assert_eq!(s.call("echo", json!({ "text": text })).await.text(), text);
                    if cycle % 4 == 3 {
                        drop(stream);
                        drop(c);
                        dropped += 1;
                    } else {
                        assert_eq!(s.delete().await, 200);
                    }
                }
                dropped
            })
        })
        .collect();
    let mut dropped = 0;
    for t in tasks {
        dropped += t.await.unwrap();
    }
    dropped
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reconnect_storm_http_upstream() {
    let up = HttpServer::start(
        "127.0.0.1:0".parse().unwrap(),
        HttpOptions {
            timer_ms: Some(300),
            ..Default::default()
        },
    )
    .await
    .unwrap();
    let mut gw = Gateway::http(&up.url(), CONFIG);
    let dropped = storm(gw.url()).await;
    assert_eq!(dropped, CLIENTS * CYCLES / 4);
    gw.assert_drained(Duration::from_secs(20)).await;
    assert!(gw.is_running());
    let st = up.stats();
    let total = (CLIENTS * CYCLES) as u64;
    assert_eq!(
        st.sessions_created, total,
        "one upstream session per client session"
    );
    assert!(
        wait_until(Duration::from_secs(5), || async {
            up.stats().sessions_deleted == total
        })
        .await,
        "every upstream session deleted: {:?}",
        up.stats()
    );
    assert_eq!(
        gw.metric("mcpgate_sessions_closed_total{reason=\"idle\"}")
            .await,
        dropped as f64
    );
    assert_eq!(
        gw.metric("mcpgate_sessions_closed_total{reason=\"client_delete\"}")
            .await,
        (total as usize - dropped) as f64
    );
    assert!(!gw.log().contains("panicked"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reconnect_storm_stdio_upstream() {
    let mut gw = Gateway::stdio_testkit(&["--timer-ms", "300"], CONFIG);
    let dropped = storm(gw.url()).await;
    assert_eq!(dropped, CLIENTS * CYCLES / 4);
    gw.assert_drained(Duration::from_secs(20)).await;
    assert!(gw.is_running());
    assert!(
        wait_until(Duration::from_secs(10), || async {
            children_of(gw.pid()).is_empty()
        })
        .await,
        "children left: {:?}",
        children_of(gw.pid())
    );
    assert_eq!(
        gw.metric("mcpgate_sessions_opened_total").await,
        (CLIENTS * CYCLES) as f64
    );
    assert_eq!(gw.metric("mcpgate_stdio_children").await, 0.0);
    assert!(!gw.log().contains("panicked"));
}
