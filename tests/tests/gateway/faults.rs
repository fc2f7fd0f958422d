//! Fault injection: an upstream that hangs, floods, sends garbage, closes its stream
//! early or dies during initialize, and clients that stall half-way. In every case the
//! gateway stays up, its memory stays bounded, and another session keeps working.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use mcpgate_testkit::{HttpOptions, HttpServer};
use mcpgate_tests::{Client, Gateway, Reply, Session, children_of, wait_until};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

// ---------------------------------------------------------------------------------------
// helpers

/// One `kB` figure from `/proc/<pid>/status` (`VmRSS`, `VmHWM`).
fn proc_kib(pid: u32, field: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// Samples a process's RSS every 10 ms until stopped; `peak()` is the highest seen.
struct RssSampler {
    peak: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<()>,
}

impl RssSampler {
    fn start(pid: u32) -> RssSampler {
        let peak = Arc::new(AtomicU64::new(proc_kib(pid, "VmRSS")));
        let stop = Arc::new(AtomicBool::new(false));
        let task = {
            let (peak, stop) = (peak.clone(), stop.clone());
            tokio::spawn(async move {
                while !stop.load(Ordering::Relaxed) {
                    peak.fetch_max(proc_kib(pid, "VmRSS"), Ordering::Relaxed);
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            })
        };
        RssSampler { peak, stop, task }
    }

    async fn finish(self) -> u64 {
        self.stop.store(true, Ordering::Relaxed);
        let _ = self.task.await;
        self.peak.load(Ordering::Relaxed)
    }
}

/// Bytes a process has written so far (`wchar` in `/proc/<pid>/io`).
fn written_bytes(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/io"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("wchar: "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

/// `host:port` of the gateway.
fn addr(gw: &Gateway) -> String {
    gw.base.trim_start_matches("http://").to_owned()
}

/// A raw HTTP/1.1 request head for the gateway's `/mcp`.
fn head(gw: &Gateway, method: &str, sid: Option<&str>, extra: &str) -> String {
    let sid = sid
        .map(|s| format!("mcp-session-id: {s}\r\n"))
        .unwrap_or_default();
    format!(
        "{method} /mcp HTTP/1.1\r\nhost: {}\r\naccept: application/json, text/event-stream\r\n{sid}{extra}\r\n",
        addr(gw)
    )
}

/// Opens the session's GET stream on a raw connection, reads the response head, and then
/// never reads again (the socket stays open).
async fn get_never_read(gw: &Gateway, sid: &str) -> TcpStream {
    let mut tcp = TcpStream::connect(addr(gw)).await.unwrap();
    tcp.write_all(head(gw, "GET", Some(sid), "").as_bytes())
        .await
        .unwrap();
    let mut got = Vec::new();
    let mut byte = [0u8; 1];
    while !got.ends_with(b"\r\n\r\n") {
        let n = tokio::time::timeout(Duration::from_secs(5), tcp.read(&mut byte))
            .await
            .expect("GET answer head")
            .unwrap();
        assert!(n > 0, "GET closed: {}", String::from_utf8_lossy(&got));
        got.push(byte[0]);
    }
    let head = String::from_utf8_lossy(&got);
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    tcp
}

/// POSTs `msg` on a raw connection and never reads the answer.
async fn post_never_read(gw: &Gateway, sid: &str, msg: &Value) -> TcpStream {
    let body = msg.to_string();
    let extra = format!(
        "content-type: application/json\r\ncontent-length: {}\r\n",
        body.len()
    );
    let mut tcp = TcpStream::connect(addr(gw)).await.unwrap();
    tcp.write_all(head(gw, "POST", Some(sid), &extra).as_bytes())
        .await
        .unwrap();
    tcp.write_all(body.as_bytes()).await.unwrap();
    tcp
}

/// The gateway process is alive and answers `/healthz`.
async fn assert_up(gw: &mut Gateway) {
    assert!(gw.is_running(), "gateway exited; log:\n{}", gw.log());
    let health = reqwest::get(format!("{}/healthz", gw.base)).await.unwrap();
    assert_eq!(health.status(), 200);
}

/// The bystander's echo works, and quickly.
async fn assert_echo(s: &Session, text: &str) {
    let t0 = Instant::now();
    let r = s.call("echo", json!({ "text": text })).await;
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(r.text(), text, "{r:?}");
    assert!(
        t0.elapsed() < Duration::from_secs(5),
        "echo took {:?}",
        t0.elapsed()
    );
}

/// A stdio testkit's counters, from its `stats` tool.
async fn stdio_stats(s: &Session) -> Value {
    let r = s.call("stats", json!({})).await;
    serde_json::from_str(&r.text()).unwrap_or_else(|e| panic!("stats: {e}: {r:?}"))
}

async fn http_upstream(opts: HttpOptions) -> HttpServer {
    HttpServer::start("127.0.0.1:0".parse().unwrap(), opts)
        .await
        .unwrap()
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Up {
    Http,
    Stdio,
}

/// A gateway in front of an HTTP testkit (in-process) or a stdio testkit.
fn gateway(up: Up, http: Option<&HttpServer>, extra: &str) -> Gateway {
    match up {
        Up::Http => Gateway::http(&http.expect("http upstream").url(), extra),
        Up::Stdio => Gateway::stdio_testkit(&[], extra),
    }
}

// ---------------------------------------------------------------------------------------
// upstream hangs

/// A hanging call times out; `expect_cancel`: the upstream also got
/// `notifications/cancelled` for it.
async fn upstream_hangs(up: Up, expect_cancel: bool) {
    let http = match up {
        Up::Http => Some(http_upstream(HttpOptions::default()).await),
        Up::Stdio => None,
    };
    let mut gw = gateway(
        up,
        http.as_ref(),
        "[session]\nrequest_timeout = \"1s\"\nmax_inflight = 1\n",
    );
    let c = Client::new(&gw.url());
    let s = c.initialize().await;
    let other = c.initialize().await;

    let accepted = gw.metric("mcpgate_requests_total{era=\"2025\"}").await;
    let hang = {
        let c = c.clone();
        let sid = s.id.clone();
        tokio::spawn(async move {
            let t0 = Instant::now();
            let r = c.post(Some(&sid), &json!({"jsonrpc":"2.0","id":"h-1","method":"tools/call","params":{"name":"hang","arguments":{}}})).await;
            (r, t0.elapsed())
        })
    };
    let in_flight = wait_until(Duration::from_secs(5), || async {
        gw.metric("mcpgate_requests_total{era=\"2025\"}").await > accepted
    })
    .await;
    assert!(in_flight, "the hanging call reached the gateway");
    // The hanging call holds the session's one in-flight slot.
    let busy = s.call("echo", json!({"text": "busy"})).await;
    assert_eq!(busy.status, 429, "max_inflight = 1 is taken: {busy:?}");
    assert_eq!(busy.error_code(), Some(-32002));

    let (r, took) = hang.await.unwrap();
    assert_eq!(r.error_code(), Some(-32005), "upstream timeout: {r:?}");
    assert_eq!(r.last()["id"], "h-1", "{r:?}");
    assert!(
        took >= Duration::from_millis(900) && took < Duration::from_secs(5),
        "answered after {took:?}"
    );

    // The upstream was told to stop working on it.
    if expect_cancel {
        let cancelled = wait_until(Duration::from_secs(5), || async {
            match &http {
                Some(h) => h.stats().cancelled == 1,
                None => stdio_stats(&s).await["cancelled"] == 1,
            }
        })
        .await;
        assert!(
            cancelled,
            "upstream got no notifications/cancelled; log:\n{}",
            gw.log()
        );
    }

    // The slot came back (max_inflight = 1) and the session goes on: a timeout ends the
    // request, not the session.
    assert_echo(&s, "after the timeout").await;
    assert_eq!(gw.metric("mcpgate_sessions_active").await, 2.0);
    assert_echo(&other, "bystander").await;
    // Again: a leak of one slot per timeout would refuse the second round.
    let r = s.call("hang", json!({})).await;
    assert_eq!(r.error_code(), Some(-32005), "{r:?}");
    assert_echo(&s, "after the second timeout").await;
    if expect_cancel {
        let both = wait_until(Duration::from_secs(5), || async {
            match &http {
                Some(h) => h.stats().cancelled == 2,
                None => stdio_stats(&s).await["cancelled"] == 2,
            }
        })
        .await;
        assert!(both, "second cancellation; log:\n{}", gw.log());
    }
    assert_eq!(s.delete().await, 200);
    assert_up(&mut gw).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upstream_hangs_http() {
    upstream_hangs(Up::Http, true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upstream_hangs_stdio() {
    upstream_hangs(Up::Stdio, false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upstream_hangs_stdio_and_is_cancelled() {
    upstream_hangs(Up::Stdio, true).await;
}

// ---------------------------------------------------------------------------------------
// floods to a client that never reads

/// Notifications per flood and their size: 200 MB in all.
const FLOOD_COUNT: u64 = 2000;
const FLOOD_SIZE: u64 = 100_000;
/// How much the gateway's RSS may grow during a 200 MB flood (its buffers are bounded
/// by `backlog` and `replay_events`, 32 messages of 100 kB each, per stream).
const FLOOD_RSS_LIMIT_KIB: u64 = 48 * 1024;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reader {
    /// The client's GET stream is open and never read.
    Get,
    /// The flood call's own POST answer is never read (and there is no GET stream).
    Post,
}

async fn flood_never_read(up: Up, reader: Reader) {
    let http = match up {
        Up::Http => Some(http_upstream(HttpOptions::default()).await),
        Up::Stdio => None,
    };
    let mut gw = gateway(
        up,
        http.as_ref(),
        "[session]\nbacklog = 32\nreplay_events = 32\nrequest_timeout = \"120s\"\n",
    );
    let c = Client::new(&gw.url());
    let s = c.initialize().await;
    let other = c.initialize().await;
    // Warm up: connections, runtime threads and the allocator's first arenas are not
    // what is measured.
    let warm = s
        .call("flood", json!({"count": 40, "size": FLOOD_SIZE}))
        .await;
    assert_eq!(warm.status, 200, "{warm:?}");
    assert_echo(&other, "warm").await;
    // Over stdio the end of the flood is seen from the child's written bytes: any call
    // on the flooded session would itself be a stream the flood can go to.
    let child: Option<u32> = match up {
        Up::Stdio => Some(s.call("whoami", json!({})).await.text().parse().unwrap()),
        Up::Http => None,
    };
    let child_written = child.map_or(0, written_bytes);

    let pid = gw.pid();
    let rss_before = proc_kib(pid, "VmRSS");
    let sampler = RssSampler::start(pid);
    let t0 = Instant::now();
    let _held = match reader {
        Reader::Get => {
            let tcp = get_never_read(&gw, &s.id).await;
            let r = s
                .call(
                    "flood",
                    json!({"count": FLOOD_COUNT, "size": FLOOD_SIZE, "background": true}),
                )
                .await;
            assert_eq!(r.text(), format!("flooding {FLOOD_COUNT}"));
            tcp
        }
        Reader::Post => {
            let msg = json!({"jsonrpc":"2.0","id":"flood","method":"tools/call","params":{
                "name":"flood","arguments":{"count": FLOOD_COUNT, "size": FLOOD_SIZE}}});
            post_never_read(&gw, &s.id, &msg).await
        }
    };
    // Another session works during the flood.
    let mut slowest = Duration::ZERO;
    let mut flooded = false;
    for i in 0.. {
        let t = Instant::now();
        assert_echo(&other, &format!("during {i}")).await;
        slowest = slowest.max(t.elapsed());
        flooded = match (&http, child) {
            (Some(h), _) => h.stats().flood_sent >= 40 + FLOOD_COUNT,
            (None, Some(child)) => {
                written_bytes(child) - child_written >= FLOOD_COUNT * (FLOOD_SIZE + 1)
            }
            (None, None) => unreachable!(),
        };
        if flooded || t0.elapsed() > Duration::from_secs(90) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        flooded,
        "the flood did not get through in 90 s; log:\n{}",
        gw.log()
    );
    let flood_time = t0.elapsed();
    // Let the gateway take in the last messages.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let peak = sampler.finish().await.max(proc_kib(pid, "VmRSS"));
    let dropped = gw.metric("mcpgate_backlog_dropped_total").await;
    let replay_dropped = gw.metric("mcpgate_replay_dropped_total").await;
    eprintln!(
        "flood {up:?}/{reader:?}: {} MB in {flood_time:?}; gateway RSS before {rss_before} KiB, \
         peak {peak} KiB (+{} KiB); backlog_dropped {dropped}; replay_dropped {replay_dropped}; \
         slowest bystander echo {slowest:?}",
        FLOOD_COUNT * FLOOD_SIZE / 1_000_000,
        peak.saturating_sub(rss_before)
    );
    assert!(
        peak.saturating_sub(rss_before) < FLOOD_RSS_LIMIT_KIB,
        "gateway RSS grew from {rss_before} to {peak} KiB during a {} MB flood",
        FLOOD_COUNT * FLOOD_SIZE / 1_000_000
    );

    match reader {
        Reader::Get => {
            // The GET stream that nobody read was ended; the backlog kept the newest
            // messages and dropped (and counted) the oldest.
            assert!(
                dropped >= (FLOOD_COUNT / 2) as f64,
                "backlog_dropped_total = {dropped}; log:\n{}",
                gw.log()
            );
            assert!(
                gw.log().contains("client GET stream too slow; ended it"),
                "log:\n{}",
                gw.log()
            );
            let mut fresh = s.open_stream().await;
            assert_eq!(fresh.recv().await.unwrap()["status"], 200);
            let mut last = -1;
            while let Ok(Some(m)) =
                tokio::time::timeout(Duration::from_millis(500), fresh.recv()).await
            {
                last = m["params"]["data"]["seq"].as_i64().unwrap_or(last);
            }
            assert_eq!(
                last,
                FLOOD_COUNT as i64 - 1,
                "the backlog ends with the newest message"
            );
        }
        Reader::Post => {
            // The flood went to the session's one stream, the unread POST answer, whose
            // buffers are bounded.
        }
    }
    // The flooded session itself still works, and so does the other one.
    assert_echo(&s, "flooded session").await;
    assert_echo(&other, "after").await;
    assert_eq!(gw.metric("mcpgate_sessions_active").await, 2.0);
    assert_up(&mut gw).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flood_to_a_get_stream_never_read_http() {
    flood_never_read(Up::Http, Reader::Get).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flood_to_a_get_stream_never_read_stdio() {
    flood_never_read(Up::Stdio, Reader::Get).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flood_to_a_post_stream_never_read_http() {
    flood_never_read(Up::Http, Reader::Post).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flood_to_a_post_stream_never_read_stdio() {
    flood_never_read(Up::Stdio, Reader::Post).await;
}

/// Reads a raw HTTP answer until `end` appears in it (or nothing comes for 3 s).
async fn read_until(tcp: &mut TcpStream, end: &[u8]) -> Vec<u8> {
    let mut got = Vec::new();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        match tokio::time::timeout(Duration::from_secs(3), tcp.read(&mut buf)).await {
            Ok(Ok(n)) if n > 0 => got.extend_from_slice(&buf[..n]),
            _ => return got,
        }
        let tail = got.len().saturating_sub(buf.len() + end.len());
        if got[tail..].windows(end.len()).any(|w| w == end) {
            return got;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_post_reader_loses_nothing_silently() {
    let up = http_upstream(HttpOptions::default()).await;
    let mut gw = Gateway::http(&up.url(), "[session]\nbacklog = 32\nreplay_events = 32\n");
    let c = Client::new(&gw.url());
    let s = c.initialize().await;
    let other = c.initialize().await;
    const COUNT: u64 = 2000;
    let msg = json!({"jsonrpc":"2.0","id":"slow-reader","method":"tools/call","params":{
        "name":"flood","arguments":{"count": COUNT, "size": 10_000}}});
    let mut tcp = post_never_read(&gw, &s.id, &msg).await;
    // The reader is slow: it reads nothing until the upstream has sent everything.
    let sent = wait_until(Duration::from_secs(60), || async {
        up.stats().flood_sent == COUNT
    })
    .await;
    assert!(sent, "flood_sent = {}", up.stats().flood_sent);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let body = read_until(&mut tcp, br#""id":"slow-reader""#).await;
    let body = String::from_utf8_lossy(&body);
    let mut received = body.matches(r#""logger":"flood""#).count() as u64;
    // Messages that found no stream while the POST stream was full wait in the session's
    // backlog for its next GET stream: buffered, not lost.
    let mut get = s.open_stream().await;
    assert_eq!(get.recv().await.unwrap()["status"], 200);
    while let Ok(Some(m)) = tokio::time::timeout(Duration::from_millis(500), get.recv()).await {
        if m["params"]["logger"] == "flood" {
            received += 1;
        }
    }
    let dropped = gw.metric("mcpgate_backlog_dropped_total").await as u64;
    eprintln!(
        "slow POST reader: {received} of {COUNT} flood notifications received, \
         backlog_dropped_total {dropped}, replay_dropped_total {}, response received: {}",
        gw.metric("mcpgate_replay_dropped_total").await,
        body.contains(r#""id":"slow-reader""#)
    );
    assert!(
        body.contains(r#""id":"slow-reader""#),
        "the response arrives"
    );
    assert_eq!(
        received + dropped,
        COUNT,
        "every notification is delivered or counted as dropped"
    );
    assert_echo(&other, "bystander").await;
    assert_up(&mut gw).await;
}

// ---------------------------------------------------------------------------------------
// garbage from the upstream

/// Calls `garbage {kind}` and checks that only the answer came back.
async fn garbage_call(s: &Session, kind: &str) -> Reply {
    let r = s.call("garbage", json!({"kind": kind})).await;
    assert_eq!(r.status, 200, "{kind}: {r:?}");
    assert_eq!(r.text(), format!("garbage {kind} sent"), "{kind}: {r:?}");
    r
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdio_garbage_lines_are_logged_and_dropped() {
    let mut gw = Gateway::stdio_testkit(&[], "");
    let c = Client::new(&gw.url());
    let s = c.initialize().await;
    let other = c.initialize().await;
    let pid_before = s.call("whoami", json!({})).await.text();
    // invalid: not JSON; not_jsonrpc: a JSON object without "jsonrpc"; huge: a valid
    // notification of 10 MiB (max_line_bytes is 4 MiB); binary: bytes that are not UTF-8.
    let cases = [
        (
            "invalid",
            "stdio upstream sent a line that is not JSON-RPC; dropped",
        ),
        (
            "not_jsonrpc",
            "stdio upstream sent a line that is not JSON-RPC; dropped",
        ),
        ("huge", "stdio upstream sent an over-long line; dropped"),
        (
            "binary",
            "stdio upstream sent a line that is not UTF-8; dropped",
        ),
    ];
    for (kind, log_line) in cases {
        let logged = gw.log().matches(log_line).count();
        let t0 = Instant::now();
        let r = garbage_call(&s, kind).await;
        assert_eq!(
            r.messages.len(),
            1,
            "{kind}: the bad line is not forwarded: {}",
            &r.body[..r.body.len().min(300)]
        );
        eprintln!("garbage {kind}: answered in {:?}", t0.elapsed());
        assert_eq!(
            gw.log().matches(log_line).count(),
            logged + 1,
            "{kind}: logged once; log:\n{}",
            gw.log()
        );
        assert_echo(&s, &format!("after {kind}")).await;
    }
    // The same child process: the session was never restarted.
    assert_eq!(s.call("whoami", json!({})).await.text(), pid_before);
    assert_eq!(gw.metric("mcpgate_sessions_active").await, 2.0);
    assert_echo(&other, "bystander").await;
    assert_up(&mut gw).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_garbage_events_are_logged_and_dropped() {
    let up = http_upstream(HttpOptions::default()).await;
    let mut gw = Gateway::http(&up.url(), "");
    let c = Client::new(&gw.url());
    let s = c.initialize().await;
    let other = c.initialize().await;
    for kind in ["invalid", "not_jsonrpc"] {
        let r = garbage_call(&s, kind).await;
        assert_eq!(r.messages.len(), 1, "{kind}: {}", r.body);
        assert_echo(&s, &format!("after {kind}")).await;
    }
    assert_eq!(
        gw.log()
            .matches("upstream sent a non-JSON-RPC SSE event; dropped")
            .count(),
        2,
        "log:\n{}",
        gw.log()
    );
    // A 10 MiB event: stdio's max_line_bytes has no HTTP counterpart; whatever the
    // gateway does with it, the call is answered and everything keeps working.
    let r = garbage_call(&s, "huge").await;
    eprintln!(
        "http garbage huge: {} messages, {} bytes to the client",
        r.messages.len(),
        r.body.len()
    );
    assert_echo(&s, "after huge").await;
    assert_echo(&other, "bystander").await;
    assert_up(&mut gw).await;
}

// ---------------------------------------------------------------------------------------
// the upstream ends its SSE answer before the response

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upstream_closes_its_sse_answer_early() {
    let up = http_upstream(HttpOptions {
        priming: true,
        ..HttpOptions::default()
    })
    .await;
    let mut gw = Gateway::http(&up.url(), "");
    let c = Client::new(&gw.url());
    let s = c.initialize().await;
    let other = c.initialize().await;
    for (n, events) in [0u64, 1, 3].into_iter().enumerate() {
        let t0 = Instant::now();
        let r = tokio::time::timeout(
            Duration::from_secs(15),
            s.request_with_id(
                json!(format!("early-{n}")),
                "tools/call",
                json!({"name": "close_early", "arguments": {"events": events}}),
            ),
        )
        .await
        .expect("answered, not left hanging");
        assert_eq!(r.status, 200, "{r:?}");
        assert_eq!(r.last()["id"], format!("early-{n}"), "{r:?}");
        assert_eq!(r.error_code(), Some(-32003), "upstream error: {r:?}");
        // What the upstream sent before it gave up still reached the client.
        let notes = r
            .messages
            .iter()
            .filter(|m| m.get("method").is_some())
            .count();
        assert_eq!(notes as u64, events, "{r:?}");
        eprintln!(
            "close_early {events} events: error after {:?}",
            t0.elapsed()
        );
        // A protocol error fails the request, not the session.
        assert_echo(&s, &format!("after close_early {events}")).await;
    }
    assert_eq!(up.stats().closed_early, 3);
    assert_eq!(
        gw.metric("mcpgate_upstream_errors_total{kind=\"protocol\"}")
            .await,
        3.0
    );
    assert_eq!(gw.metric("mcpgate_sessions_active").await, 2.0);
    assert_echo(&other, "bystander").await;
    assert_up(&mut gw).await;
}

// ---------------------------------------------------------------------------------------
// half-open client connections

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn half_open_client_connections_block_nobody() {
    let up = http_upstream(HttpOptions::default()).await;
    let mut gw = Gateway::http(&up.url(), "");
    let c = Client::new(&gw.url());
    let victim = c.initialize().await;
    let other = c.initialize().await;
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

/// Whether the peer closed `tcp` (EOF or reset) within `limit`.
async fn closed_within(tcp: &mut TcpStream, limit: Duration) -> Option<Duration> {
    let t0 = Instant::now();
    let mut buf = [0u8; 1024];
    loop {
        match tokio::time::timeout(limit.saturating_sub(t0.elapsed()), tcp.read(&mut buf)).await {
            Err(_) => return None,
            Ok(Ok(0) | Err(_)) => return Some(t0.elapsed()),
            Ok(Ok(_)) => {} // e.g. a 408 answer before the close
        }
    }
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
    let closer =
        tokio::spawn(async move { closed_within(&mut tcp, Duration::from_secs(40)).await });
    // Meanwhile others are served.
    for i in 0..10 {
        assert_echo(&other, &format!("meanwhile {i}")).await;
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let closed = closer.await.unwrap();
    eprintln!("stalled request head closed after {closed:?}");
    assert!(
        closed.is_some_and(|t| t < Duration::from_secs(35)),
        "a connection that never finishes its request head stays open ({closed:?})"
    );
    assert_echo(&other, "after").await;
    assert_up(&mut gw).await;
}

// ---------------------------------------------------------------------------------------
// the upstream dies during initialize

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upstream_dies_during_initialize() {
    let testkit = format!(
        "{:?}",
        mcpgate_tests::bin("mcpgate-testkit").display().to_string()
    );
    let mut gw = Gateway::start(&format!(
        "[[server]]\nname = \"exits\"\ntransport = \"stdio\"\ncommand = [\"sh\", \"-c\", \"exit 3\"]\n\
         [[server]]\nname = \"reads-then-exits\"\ntransport = \"stdio\"\ncommand = [\"sh\", \"-c\", \"read line; echo not-json; exit 3\"]\n\
         [[server]]\nname = \"missing\"\ntransport = \"stdio\"\ncommand = [\"/nonexistent/mcp-server\"]\n\
         [[server]]\nname = \"ok\"\ntransport = \"stdio\"\ncommand = [{testkit}, \"stdio\"]\n"
    ));
    let ok = Client::new(&format!("{}/servers/ok/mcp", gw.base))
        .initialize()
        .await;
    for name in ["exits", "reads-then-exits", "missing"] {
        let c = Client::new(&format!("{}/servers/{name}/mcp", gw.base));
        let t0 = Instant::now();
        let r = c
            .post(
                None,
                &json!({"jsonrpc":"2.0","id":"init-1","method":"initialize","params":{
                    "protocolVersion":"2025-11-25","capabilities":{},
                    "clientInfo":{"name":"faults","version":"0"}}}),
            )
            .await;
        eprintln!(
            "{name}: HTTP {} after {:?}: {}",
            r.status,
            t0.elapsed(),
            r.body
        );
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "{name}: slow answer"
        );
        assert!(
            r.last()["error"]["code"].is_i64(),
            "{name}: a JSON-RPC error: {r:?}"
        );
        assert!(
            r.header("mcp-session-id").is_none(),
            "{name}: no session: {r:?}"
        );
        assert_echo(&ok, &format!("after {name}")).await;
    }
    let exited = gw
        .metric("mcpgate_upstream_errors_total{kind=\"exited\"}")
        .await;
    let spawn = gw
        .metric("mcpgate_upstream_errors_total{kind=\"spawn\"}")
        .await;
    assert!(exited >= 2.0, "exited = {exited}; log:\n{}", gw.log());
    assert_eq!(spawn, 1.0, "log:\n{}", gw.log());
    assert_eq!(gw.metric("mcpgate_sessions_active").await, 1.0);
    // No process is left of the failed sessions: only the ok session's child.
    let pid = gw.pid();
    let settled = wait_until(Duration::from_secs(5), || async {
        children_of(pid).len() == 1
    })
    .await;
    assert!(settled, "children: {:?}", children_of(pid));
    assert_eq!(gw.metric("mcpgate_stdio_children").await, 1.0);
    assert_echo(&ok, "bystander").await;
    assert_up(&mut gw).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn initialize_against_a_dying_upstream_is_always_an_upstream_error() {
    let mut gw = Gateway::start(
        "[[server]]\nname = \"exits\"\ntransport = \"stdio\"\ncommand = [\"sh\", \"-c\", \"exit 3\"]\n\
         [[server]]\nname = \"missing\"\ntransport = \"stdio\"\ncommand = [\"/nonexistent/mcp-server\"]\n",
    );
    for name in ["exits", "missing"] {
        let c = Client::new(&format!("{}/servers/{name}/mcp", gw.base));
        for i in 0..20 {
            let r = c
                .post(
                    None,
                    &json!({"jsonrpc":"2.0","id":i,"method":"initialize","params":{
                        "protocolVersion":"2025-11-25","capabilities":{},
                        "clientInfo":{"name":"faults","version":"0"}}}),
                )
                .await;
            assert_eq!(r.status, 200, "{name} #{i}: {r:?}");
            assert_eq!(r.error_code(), Some(-32003), "{name} #{i}: {r:?}");
            assert_eq!(r.last()["id"], i, "{name} #{i}: {r:?}");
        }
    }
    assert_up(&mut gw).await;
}
