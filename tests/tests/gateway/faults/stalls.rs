//! Half-open client connections (half a request head, half a body, a GET stream never
//! read) block nobody, and a stalled request head is closed by the header timeout.

use std::time::Duration;

use mcpgate_testkit::HttpOptions;
use mcpgate_tests::faults::{
    Setup, Up, addr, assert_echo, assert_up, closed_within, get_never_read, head, http_upstream,
};
use mcpgate_tests::{Client, Gateway};
use serde_json::json;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn half_open_client_connections_block_nobody() {
    let Setup {
        http: _up,
        mut gw,
        client: c,
        s: victim,
        other,
    } = Setup::new(Up::Http, HttpOptions::default(), "").await;
    let mut held = Vec::new();
    // Half a request head, then nothing.
    for _ in 0..50 {
        let mut tcp = TcpStream::connect(addr(&gw)).await.unwrap();
        tcp.write_all(b"POST /mcp HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-ty")
            .await
            .unwrap();
        held.push(tcp);
    }
    // A whole head and part of the body, for a session and for an initialize.
    for sid in [Some(victim.id.as_str()), None] {
        for _ in 0..10 {
            let extra = "content-type: application/json\r\ncontent-length: 1000\r\n";
            let mut tcp = TcpStream::connect(addr(&gw)).await.unwrap();
            tcp.write_all(head(&gw, "POST", sid, extra).as_bytes())
                .await
                .unwrap();
            tcp.write_all(br#"{"jsonrpc":"2.0","#).await.unwrap();
            held.push(tcp);
        }
    }
    // A GET stream opened and then never read (nor closed).
    held.push(get_never_read(&gw, &victim.id).await);
    // A notification for the stalled GET stream: it cannot block anything.
    let r = victim.call("sample_async", json!({"prompt": "p"})).await;
    assert_eq!(r.text(), "queued");

    for i in 0..20 {
        assert_echo(&other, &format!("other {i}")).await;
        assert_echo(&victim, &format!("victim {i}")).await;
    }
    let fresh = c.initialize().await;
    assert_echo(&fresh, "fresh").await;
    assert_eq!(fresh.delete().await, 200);
    assert_up(&mut gw).await;
    drop(held);
    assert_echo(&other, "after").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stalled_request_head_is_closed_by_the_header_timeout() {
    let up = http_upstream(HttpOptions::default()).await;
    let mut gw = Gateway::http(&up.url(), "");
    let c = Client::new(&gw.url());
    let other = c.initialize().await;
    let mut tcp = TcpStream::connect(addr(&gw)).await.unwrap();
    tcp.write_all(b"POST /mcp HTTP/1.1\r\nhost: 127.0.0.1\r\n")
        .await
        .unwrap();
    // Closed by the (default, 10 s) header timeout rather than left open: the bound is
    // only "not open for good", generous so that a loaded machine does not fail it.
    let closer =
        tokio::spawn(async move { closed_within(&mut tcp, Duration::from_secs(60)).await });
    // Meanwhile others are served.
    for i in 0..10 {
        assert_echo(&other, &format!("meanwhile {i}")).await;
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let closed = closer.await.unwrap();
    eprintln!("stalled request head closed after {closed:?}");
    assert!(
        closed.is_some(),
        "a connection that never finishes its request head stays open ({closed:?})"
    );
    assert_echo(&other, "after").await;
    assert_up(&mut gw).await;
}
