//! Fault-injection helpers: raw HTTP/1.1 connections that stall or never read, `/proc`
//! readings (RSS, bytes written) and the checks every fault test ends with (the gateway is
//! up, a bystander session's echo is quick).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use mcpgate_testkit::{HttpOptions, HttpServer};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::client::{Client, Session};
use crate::gateway::Gateway;

/// One `kB` figure from `/proc/<pid>/status` (`VmRSS`, `VmHWM`).
pub fn proc_kib(pid: u32, field: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// Samples a process's RSS every 10 ms until stopped; `finish()` gives the highest seen.
#[derive(Debug)]
pub struct RssSampler {
    peak: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<()>,
}

impl RssSampler {
    /// Starts sampling `pid`.
    pub fn start(pid: u32) -> RssSampler {
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

    /// Stops sampling; the peak RSS seen, in KiB.
    pub async fn finish(self) -> u64 {
        self.stop.store(true, Ordering::Relaxed);
        let _ = self.task.await;
        self.peak.load(Ordering::Relaxed)
    }
}

/// Bytes a process has written so far (`wchar` in `/proc/<pid>/io`).
pub fn written_bytes(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/io"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("wchar: "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

/// `host:port` of the gateway.
pub fn addr(gw: &Gateway) -> String {
    gw.base.trim_start_matches("http://").to_owned()
}

/// A raw HTTP/1.1 request head for the gateway's `/mcp`.
pub fn head(gw: &Gateway, method: &str, sid: Option<&str>, extra: &str) -> String {
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
pub async fn get_never_read(gw: &Gateway, sid: &str) -> TcpStream {
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
pub async fn post_never_read(gw: &Gateway, sid: &str, msg: &Value) -> TcpStream {
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
pub async fn assert_up(gw: &mut Gateway) {
    assert!(gw.is_running(), "gateway exited; log:\n{}", gw.log());
    let health = reqwest::get(format!("{}/healthz", gw.base)).await.unwrap();
    assert_eq!(health.status(), 200);
}

/// The session's echo works: it is answered, not held up behind the fault. The bound is
/// only "not stuck" (generous, so a loaded machine does not fail it); how quickly such an
/// echo is answered is a benchmark's question, not a functional test's.
pub async fn assert_echo(s: &Session, text: &str) {
    let r = tokio::time::timeout(ECHO_NOT_STUCK, s.call("echo", json!({ "text": text })))
        .await
        .unwrap_or_else(|_| panic!("echo {text:?} not answered within {ECHO_NOT_STUCK:?}"));
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(r.text(), text, "{r:?}");
}

/// How long [`assert_echo`] waits before calling a session stuck.
const ECHO_NOT_STUCK: Duration = Duration::from_secs(30);

/// A stdio testkit's counters, from its `stats` tool.
pub async fn stdio_stats(s: &Session) -> Value {
    let r = s.call("stats", json!({})).await;
    serde_json::from_str(&r.text()).unwrap_or_else(|e| panic!("stats: {e}: {r:?}"))
}

/// An in-process HTTP testkit on an ephemeral loopback port.
pub async fn http_upstream(opts: HttpOptions) -> HttpServer {
    HttpServer::start("127.0.0.1:0".parse().unwrap(), opts)
        .await
        .unwrap()
}

/// Which kind of upstream a fault test runs against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Up {
    /// The in-process Streamable HTTP testkit.
    Http,
    /// The `mcpgate-testkit stdio` binary, a process per session.
    Stdio,
}

/// A fault test's start: the upstream, a gateway in front of it, and two sessions.
#[derive(Debug)]
pub struct Setup {
    /// The in-process HTTP testkit (`None` over stdio). Keep it bound: dropping it stops it.
    pub http: Option<HttpServer>,
    /// The gateway, with the test's extra config.
    pub gw: Gateway,
    /// A client of the gateway's `/mcp`.
    pub client: Client,
    /// The session the fault is aimed at.
    pub s: Session,
    /// A bystander session, which must keep working.
    pub other: Session,
}

impl Setup {
    /// An `up` upstream (HTTP: started with `opts`), a gateway in front of it with `extra`
    /// config appended, and two initialised sessions.
    pub async fn new(up: Up, opts: HttpOptions, extra: &str) -> Setup {
        let http = match up {
            Up::Http => Some(http_upstream(opts).await),
            Up::Stdio => None,
        };
        let gw = match &http {
            Some(h) => Gateway::http(&h.url(), extra),
            None => Gateway::stdio_testkit(&[], extra),
        };
        let client = Client::new(&gw.url());
        let s = client.initialize().await;
        let other = client.initialize().await;
        Setup {
            http,
            gw,
            client,
            s,
            other,
        }
    }
}

/// Reads a raw HTTP answer until `end` appears in it (or nothing comes for 3 s).
pub async fn read_until(tcp: &mut TcpStream, end: &[u8]) -> Vec<u8> {
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

/// Whether the peer closed `tcp` (EOF or reset) within `limit`.
pub async fn closed_within(tcp: &mut TcpStream, limit: Duration) -> Option<Duration> {
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
