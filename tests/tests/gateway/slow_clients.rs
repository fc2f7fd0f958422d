//! Slow and stalled clients cannot hold the gateway: a stalled body gets 408 and its
//! connection is closed; stalled heads and idle keep-alive connections are closed; one
//! client address cannot take more than its share of connections; and when connections
//! run short, the reserve still serves `/healthz` and sessions that already exist.

use std::net::SocketAddr;
use std::time::Duration;

use mcpgate_tests::{Client, Gateway, bin, wait_until};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};

/// A TCP connection to `to` from the loopback address `from` (127.0.0.x), so a test can
/// play several client addresses.
async fn connect_from(from: &str, to: SocketAddr) -> TcpStream {
    let s = TcpSocket::new_v4().unwrap();
    s.bind(format!("{from}:0").parse().unwrap()).unwrap();
    s.connect(to).await.unwrap()
}

/// Sends the head of a POST and 20 of its 100 body bytes, then stalls.
async fn stall_body(from: &str, to: SocketAddr) -> TcpStream {
    let mut s = connect_from(from, to).await;
    let head = format!(
        "POST /mcp HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\naccept: application/json, text/event-stream\r\ncontent-length: 100\r\n\r\n{}",
        "{\"jsonrpc\":\"2.0\",\"i"
    );
    s.write_all(head.as_bytes()).await.unwrap();
    s
}

/// Reads what the server sends until it closes (bounded); `None` if it stays open.
async fn until_closed(s: &mut TcpStream, limit: Duration) -> Option<String> {
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    let read = async {
        loop {
            match s.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => out.extend_from_slice(&buf[..n]),
            }
        }
    };
    tokio::time::timeout(limit, read).await.ok()?;
    Some(String::from_utf8_lossy(&out).into_owned())
}

fn client_from(from: &str) -> reqwest::Client {
    reqwest::Client::builder()
        .local_address(from.parse::<std::net::IpAddr>().unwrap())
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stalled_and_crowding_clients_do_not_hold_the_gateway() {
    let gw = Gateway::start(&format!(
        "[listen]\nheader_timeout = \"10s\"\nbody_timeout = \"10s\"\nmax_connections = 40\nmax_connections_per_client = 10\nconnection_reserve = 5\n\
         [[server]]\nname = \"up\"\ntransport = \"stdio\"\ncommand = [{:?}, \"stdio\"]\n",
        bin("mcpgate-testkit").display().to_string()
    ));
    let addr: SocketAddr = gw.base.trim_start_matches("http://").parse().unwrap();
    // Two clients with a session each, from their own addresses (a keep-alive connection
    // each: 2 of the 40 slots).
    let established = Client::with(&gw.url(), client_from("127.0.0.9"))
        .initialize()
        .await;
    let other = Client::with(&gw.url(), client_from("127.0.0.2"))
        .initialize()
        .await;

    // One address opens 30 stalled connections: 10 are admitted, 20 refused at once.
    let opened = futures::future::join_all((0..30).map(|_| stall_body("127.0.0.1", addr))).await;
    // The gateway has decided about all 30 once it counted 20 refusals (a loaded machine
    // can take longer than any fixed wait for that); a refused connection's 503 is then
    // already on its way, an admitted one gets nothing before the 10 s body deadline (long enough that
    // a loaded machine finishes the checks below before it passes).
    // (Read from another address: 127.0.0.1 is at its cap; one client, so one keep-alive
    // connection, counted below.)
    let reader = client_from("127.0.0.10");
    let sample = |name: &'static str| {
        let reader = reader.clone();
        let url = format!("{}/metrics", gw.base);
        async move {
            let text = reader.get(url).send().await.unwrap().text().await.unwrap();
            text.lines()
                .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
                .and_then(|v| v.parse::<f64>().ok())
                .unwrap_or(0.0)
        }
    };
    let decided = wait_until(Duration::from_secs(10), || async {
        sample("mcpgate_connections_refused_total{reason=\"per_client\"}").await >= 20.0
    })
    .await;
    assert!(decided, "20 refusals counted\n{}", gw.log());
    let attempts = futures::future::join_all(opened.into_iter().map(|mut s| async {
        let answer = until_closed(&mut s, Duration::from_millis(1000)).await;
        (s, answer)
    }))
    .await;
    let mut stalled = Vec::new();
    let mut refused = 0;
    for (s, answer) in attempts {
        match answer {
            Some(text) if text.contains("503") => refused += 1,
            Some(other) => panic!("unexpected answer {other:?}"),
            None => stalled.push(s),
        }
    }
    assert_eq!((stalled.len(), refused), (10, 20));
    // The other client still works normally.
    assert_eq!(other.call("echo", json!({"text":"ok"})).await.text(), "ok");
    // The refused connections are gone once the gateway has seen them close (a loaded
    // machine may take a while): 2 sessions + 10 stalled + the reader.
    let settled = wait_until(Duration::from_secs(10), || async {
        sample("mcpgate_connections_open").await == 13.0
    })
    .await;
    assert!(
        settled,
        "open connections did not settle at 13\n{}",
        gw.log()
    );
    // Three more addresses fill the gateway up to its reserve: 2 + 10 + 1 + 22 = 35 of 40.
    for (from, n) in [("127.0.0.3", 8), ("127.0.0.4", 8), ("127.0.0.5", 6)] {
        for _ in 0..n {
            stalled.push(stall_body(from, addr).await);
        }
    }
    // The gateway holds them all once it counts 35 open connections.
    let full = wait_until(Duration::from_secs(10), || async {
        sample("mcpgate_connections_open").await == 35.0
    })
    .await;
    assert!(
        full,
        "open connections did not reach 35 ({})\n{}",
        sample("mcpgate_connections_open").await,
        gw.log()
    );
    // In the reserve: a new session is refused, but probes and the established session
    // are served.
    let newcomer = client_from("127.0.0.6")
        .post(gw.url())
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"n","version":"0"}}}).to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(newcomer.status(), 503);
    let health = client_from("127.0.0.7")
        .get(format!("{}/healthz", gw.base))
        .send()
        .await
        .unwrap();
    assert_eq!(health.status(), 200);
    let r = Client::with(&gw.url(), client_from("127.0.0.8"))
        .post(
            Some(&established.id),
            &json!({"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"echo","arguments":{"text":"reserved"}}}),
        )
        .await;
    assert_eq!(
        r.text(),
        "reserved",
        "an existing session is served from the reserve"
    );

    // Every stalled body gets 408 and its connection closed, within the body deadline.
    for mut s in stalled {
        let text = until_closed(&mut s, Duration::from_secs(15))
            .await
            .expect("a stalled body's connection is closed");
        assert!(text.starts_with("HTTP/1.1 408"), "{text:?}");
    }
    assert_eq!(
        gw.metric("mcpgate_request_timeouts_total{reason=\"body\"}")
            .await,
        32.0
    );
    assert_eq!(
        gw.metric("mcpgate_connections_refused_total{reason=\"per_client\"}")
            .await,
        20.0
    );
    assert_eq!(
        gw.metric("mcpgate_connections_refused_total{reason=\"reserve\"}")
            .await,
        1.0
    );
    // With the crowd gone, newcomers are welcome again.
    let s = Client::with(&gw.url(), client_from("127.0.0.6"))
        .initialize()
        .await;
    assert_eq!(s.call("echo", json!({"text":"back"})).await.text(), "back");
    assert_eq!(established.delete().await, 200);
}

#[tokio::test]
async fn stalled_heads_and_idle_keep_alive_connections_are_closed() {
    let gw = Gateway::start(&format!(
        "[listen]\nheader_timeout = \"1s\"\n[[server]]\nname = \"up\"\ntransport = \"stdio\"\ncommand = [{:?}, \"stdio\"]\n",
        bin("mcpgate-testkit").display().to_string()
    ));
    let addr: SocketAddr = gw.base.trim_start_matches("http://").parse().unwrap();
    let mut head = TcpStream::connect(addr).await.unwrap();
    head.write_all(b"POST /mcp HTTP/1.1\r\nhost: 127.0.0.1\r\n")
        .await
        .unwrap();
    assert!(
        until_closed(&mut head, Duration::from_secs(3))
            .await
            .is_some(),
        "a stalled request head is closed after header_timeout"
    );
    let mut idle = TcpStream::connect(addr).await.unwrap();
    idle.write_all(b"GET /healthz HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n")
        .await
        .unwrap();
    let text = until_closed(&mut idle, Duration::from_secs(3))
        .await
        .expect("an idle keep-alive connection is closed");
    assert!(text.starts_with("HTTP/1.1 200"), "{text:?}");
}
