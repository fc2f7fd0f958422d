//! Raw HTTP/1.1 on both of the gateway's hops, for the request-smuggling (desync) tests:
//! bytes written to the front as a client would send them, and an upstream whose answers
//! to `tools/call` are whatever bytes a test gives it.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// What the front answered to raw bytes: the answer's bytes and whether it then closed
/// the connection (end-of-file or reset within 3 s).
#[derive(Debug)]
pub struct RawAnswer {
    /// Everything read.
    pub bytes: Vec<u8>,
    /// Whether the gateway closed the connection.
    pub closed: bool,
}

impl RawAnswer {
    /// The status of the first answer (0 if none).
    pub fn status(&self) -> u16 {
        let text = String::from_utf8_lossy(&self.bytes);
        text.split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or(0)
    }

    /// How many answers it holds: status lines at the start or right after a head's or
    /// body's end (a body that mentions `HTTP/1.1` is not counted).
    pub fn answers(&self) -> usize {
        let text = String::from_utf8_lossy(&self.bytes);
        let starts = usize::from(text.starts_with("HTTP/1.1 "));
        starts + text.matches("\r\n\r\nHTTP/1.1 ").count() + text.matches("}HTTP/1.1 ").count()
    }
}

/// Writes `bytes` to `addr` (`127.0.0.1:port`) and reads until the gateway closes or
/// 3 s pass without a byte.
pub async fn exchange(addr: &str, bytes: &[u8]) -> RawAnswer {
    let mut tcp = TcpStream::connect(addr).await.unwrap();
    // A write the gateway refuses half-way (it closes after its answer) is fine.
    let _ = tcp.write_all(bytes).await;
    let mut got = Vec::new();
    let mut buf = vec![0u8; 64 * 1024];
    let closed = loop {
        match tokio::time::timeout(Duration::from_secs(3), tcp.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) => break true,
            Ok(Ok(n)) => got.extend_from_slice(&buf[..n]),
            Err(_) => break false,
        }
    };
    RawAnswer { bytes: got, closed }
}

/// An HTTP upstream on loopback that answers `initialize`, notifications and DELETE as a
/// stateful MCP server does, and every other request with `answer`'s bytes, verbatim.
#[derive(Debug)]
pub struct RawUpstream {
    /// Its MCP endpoint URL.
    pub url: String,
    /// Connections it accepted.
    pub connections: Arc<AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for RawUpstream {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl RawUpstream {
    /// Starts one answering other requests with `answer`.
    pub async fn start(answer: Vec<u8>) -> RawUpstream {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/mcp", listener.local_addr().unwrap());
        let connections = Arc::new(AtomicUsize::new(0));
        let count = connections.clone();
        let answer = Arc::new(answer);
        let task = tokio::spawn(async move {
            while let Ok((tcp, _)) = listener.accept().await {
                count.fetch_add(1, Ordering::Relaxed);
                tokio::spawn(serve(tcp, answer.clone()));
            }
        });
        RawUpstream {
            url,
            connections,
            task,
        }
    }
}

/// Serves requests on one connection until it closes.
async fn serve(mut tcp: TcpStream, answer: Arc<Vec<u8>>) {
    let mut buf = Vec::new();
    loop {
        let Some((head, body)) = read_request(&mut tcp, &mut buf).await else {
            return;
        };
        let reply: Vec<u8> = if head.starts_with("DELETE") {
            b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n".to_vec()
        } else if body.contains("\"initialize\"") {
            let json = r#"{"jsonrpc":"2.0","id":ID,"result":{"protocolVersion":"2025-06-18","capabilities":{"tools":{}},"serverInfo":{"name":"raw","version":"1"}}}"#
                .replace("ID", &id_of(&body));
            format!(
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nmcp-session-id: raw-1\r\ncontent-length: {}\r\n\r\n{json}",
                json.len()
            )
            .into_bytes()
        } else if body.contains("\"notifications/") {
            b"HTTP/1.1 202 Accepted\r\ncontent-length: 0\r\n\r\n".to_vec()
        } else {
            answer.to_vec()
        };
        if tcp.write_all(&reply).await.is_err() {
            return;
        }
    }
}

/// The JSON-RPC id in `body` (as written), or `0`.
fn id_of(body: &str) -> String {
    body.split("\"id\":")
        .nth(1)
        .map(|rest| {
            rest.chars()
                .take_while(|c| *c != ',' && *c != '}')
                .collect::<String>()
        })
        .unwrap_or_else(|| "0".into())
}

/// Reads one request with a `content-length` body (the gateway sends no other kind).
async fn read_request(tcp: &mut TcpStream, buf: &mut Vec<u8>) -> Option<(String, String)> {
    let mut chunk = [0u8; 8192];
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).into_owned();
            let len = head
                .lines()
                .find_map(|l| {
                    let (k, v) = l.split_once(':')?;
                    k.eq_ignore_ascii_case("content-length")
                        .then(|| v.trim().parse::<usize>().ok())?
                })
                .unwrap_or(0);
            if buf.len() >= end + 4 + len {
                let body = String::from_utf8_lossy(&buf[end + 4..end + 4 + len]).into_owned();
                buf.drain(..end + 4 + len);
                return Some((head, body));
            }
        }
        match tcp.read(&mut chunk).await {
            Ok(0) | Err(_) => return None,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
}
