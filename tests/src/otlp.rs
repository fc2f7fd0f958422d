//! A small OTLP/HTTP trace receiver on loopback: it accepts `POST /v1/traces` (protobuf)
//! and keeps every span it was sent, for tests to inspect.

use std::sync::{Arc, Mutex};

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value as Any;
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// A received span: its ids as hex, its name, its attributes as strings.
#[derive(Debug, Clone)]
pub struct Received {
    /// Trace id (32 hex digits).
    pub trace_id: String,
    /// Span id (16 hex digits).
    pub span_id: String,
    /// Parent span id (empty for a root span).
    pub parent_id: String,
    /// The span's name.
    pub name: String,
    /// Attributes, values as strings.
    pub attributes: Vec<(String, String)>,
    /// The `service.name` of the resource that sent it.
    pub service: String,
}

impl Received {
    /// An attribute's value.
    pub fn attr(&self, key: &str) -> Option<&str> {
        self.attributes
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}

/// The receiver; stops with its task when dropped.
#[derive(Debug)]
pub struct Receiver {
    /// `http://127.0.0.1:PORT/v1/traces`.
    pub endpoint: String,
    spans: Arc<Mutex<Vec<Received>>>,
    task: tokio::task::JoinHandle<()>,
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn text(v: Option<&opentelemetry_proto::tonic::common::v1::AnyValue>) -> String {
    match v.and_then(|v| v.value.as_ref()) {
        Some(Any::StringValue(s)) => s.clone(),
        Some(Any::IntValue(i)) => i.to_string(),
        Some(Any::BoolValue(b)) => b.to_string(),
        Some(Any::DoubleValue(d)) => d.to_string(),
        Some(other) => format!("{other:?}"),
        None => String::new(),
    }
}

fn received(service: &str, s: &Span) -> Received {
    Received {
        trace_id: hex(&s.trace_id),
        span_id: hex(&s.span_id),
        parent_id: hex(&s.parent_span_id),
        name: s.name.clone(),
        attributes: s
            .attributes
            .iter()
            .map(|kv| (kv.key.clone(), text(kv.value.as_ref())))
            .collect(),
        service: service.to_owned(),
    }
}

async fn serve(mut c: TcpStream, spans: Arc<Mutex<Vec<Received>>>) {
    let mut buf = Vec::new();
    loop {
        // One request: the head, then Content-Length bytes.
        let head_end = loop {
            if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break i + 4;
            }
            let mut chunk = [0u8; 8192];
            match c.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        };
        let head = String::from_utf8_lossy(&buf[..head_end]).to_lowercase();
        let len: usize = head
            .lines()
            .find_map(|l| l.strip_prefix("content-length:"))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0);
        while buf.len() < head_end + len {
            let mut chunk = [0u8; 8192];
            match c.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        }
        let body: Vec<u8> = buf.drain(..head_end + len).skip(head_end).collect();
        if let Ok(req) = ExportTraceServiceRequest::decode(body.as_slice()) {
            let mut got = spans.lock().unwrap();
            for rs in &req.resource_spans {
                let service = rs
                    .resource
                    .as_ref()
                    .and_then(|r| r.attributes.iter().find(|kv| kv.key == "service.name"))
                    .map(|kv| text(kv.value.as_ref()))
                    .unwrap_or_default();
                for ss in &rs.scope_spans {
                    got.extend(ss.spans.iter().map(|s| received(&service, s)));
                }
            }
        }
        let ok =
            b"HTTP/1.1 200 OK\r\ncontent-type: application/x-protobuf\r\ncontent-length: 0\r\n\r\n";
        if c.write_all(ok).await.is_err() {
            return;
        }
    }
}

impl Receiver {
    /// Starts a receiver on an ephemeral loopback port.
    pub async fn start() -> Receiver {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let endpoint = format!("http://{}/v1/traces", l.local_addr().unwrap());
        let spans = Arc::new(Mutex::new(Vec::new()));
        let kept = spans.clone();
        let task = tokio::spawn(async move {
            while let Ok((c, _)) = l.accept().await {
                tokio::spawn(serve(c, kept.clone()));
            }
        });
        Receiver {
            endpoint,
            spans,
            task,
        }
    }

    /// Every span received so far.
    pub fn spans(&self) -> Vec<Received> {
        self.spans.lock().unwrap().clone()
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.task.abort();
    }
}
