//! One client worker: sessions one after the other, from initialize through a few random
//! requests (checked) to DELETE, or abandoned.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use anyhow::Result;
use futures::StreamExt;
use serde_json::{Value, json};

use crate::client::{VERSION, post};
use crate::counters::Counters;

/// xorshift64*: plenty for picking operations.
pub(crate) struct Rng(pub(crate) u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below(hi.saturating_sub(lo) + 1)
    }
}

/// What a call checks in its answer.
enum Expect {
    /// This text.
    Text(String),
    /// `notify`: this many progress notifications, as many log notifications (unless
    /// the session has a GET stream: over stdio the gateway cannot tell that a log
    /// notification belongs to the call, so it goes to the GET stream), then `tag:count`.
    Notify {
        tag: String,
        count: u64,
        get_open: bool,
    },
    /// Any result.
    Result,
}

/// A client worker; each one always has (at most) one session.
pub(crate) struct Worker {
    pub(crate) n: usize,
    pub(crate) http: reqwest::Client,
    pub(crate) stream_http: reqwest::Client,
    pub(crate) base: String,
    pub(crate) counters: Arc<Counters>,
    pub(crate) rng: Rng,
    pub(crate) think: (u64, u64),
    pub(crate) drop_percent: u64,
    pub(crate) get_percent: u64,
}

impl Worker {
    /// Runs sessions until `deadline`.
    pub(crate) async fn run(mut self, deadline: Instant) {
        let mut round = 0u64;
        while Instant::now() < deadline {
            round += 1;
            let server = if (self.n as u64 + round).is_multiple_of(2) {
                "http"
            } else {
                "stdio"
            };
            if let Err(e) = self.session(server, round, deadline).await {
                self.counters
                    .error(format!("{server}: transport error"), format!("{e:#}"));
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }

    async fn think(&mut self) {
        let ms = self.rng.range(self.think.0, self.think.1);
        tokio::time::sleep(Duration::from_millis(ms)).await;
    }

    /// One session, from initialize to DELETE (or abandonment).
    async fn session(&mut self, server: &str, round: u64, deadline: Instant) -> Result<()> {
        let url = format!("{}/servers/{server}/mcp", self.base);
        let c = Arc::clone(&self.counters);
        let init = json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{
            "protocolVersion": VERSION, "capabilities": {},
            "clientInfo": {"name": "mcpgate-soak", "version": "0"}}});
        let a = post(&self.http, &url, None, &init).await?;
        let ok = a.status == 200
            && a.messages
                .last()
                .is_some_and(|m| m.pointer("/result/protocolVersion").is_some());
        let Some(sid) = a.session.filter(|_| ok) else {
            c.init_failed.fetch_add(1, Ordering::Relaxed);
            let detail = a.messages.last().map(Value::to_string).unwrap_or_default();
            c.error(format!("{server} initialize: HTTP {}", a.status), detail);
            self.think().await;
            return Ok(());
        };
        c.sessions_opened.fetch_add(1, Ordering::Relaxed);
        let note = json!({"jsonrpc":"2.0","method":"notifications/initialized"});
        let a = post(&self.http, &url, Some(&sid), &note).await?;
        if a.status != 202 {
            c.error(format!("{server} initialized: HTTP {}", a.status), "");
        }
        let with_get = self.rng.below(100) < self.get_percent;
        let get = if with_get {
            Some(self.open_get(&url, &sid))
        } else {
            None
        };
        if with_get {
            let sub = json!({"jsonrpc":"2.0","id":"sub","method":"resources/subscribe",
                             "params":{"uri":"test://static"}});
            self.check(server, "subscribe", &url, &sid, &sub, Expect::Result)
                .await?;
        }
        let calls = self.rng.range(3, 10);
        for i in 0..calls {
            if Instant::now() >= deadline {
                break;
            }
            self.think().await;
            let id = format!("{round}-{i}");
            let (op, msg, expect) = self.pick(&id, with_get);
            self.check(server, op, &url, &sid, &msg, expect).await?;
        }
        if let Some(get) = get {
            get.abort();
        }
        if self.rng.below(100) < self.drop_percent {
            c.sessions_abandoned.fetch_add(1, Ordering::Relaxed);
            return Ok(());
        }
        let resp = self
            .http
            .delete(&url)
            .header("mcp-session-id", &sid)
            .header("mcp-protocol-version", VERSION)
            .send()
            .await?;
        if resp.status() == 200 {
            c.sessions_deleted.fetch_add(1, Ordering::Relaxed);
        } else {
            c.error(format!("{server} DELETE: HTTP {}", resp.status()), "");
        }
        Ok(())
    }

    /// A random request for this session.
    fn pick(&mut self, id: &str, with_get: bool) -> (&'static str, Value, Expect) {
        let call = |name: &str, args: Value| {
            json!({"jsonrpc":"2.0","id":id,"method":"tools/call",
                   "params":{"name":name,"arguments":args}})
        };
        let roll = self.rng.below(100);
        match roll {
            0..30 => {
                let text = format!("soak {} {id}", self.n);
                (
                    "echo",
                    call("echo", json!({ "text": text })),
                    Expect::Text(text),
                )
            }
            30..45 => {
                let (a, b) = (self.rng.below(1000), self.rng.below(1000));
                (
                    "add",
                    call("add", json!({"a": a, "b": b})),
                    Expect::Text((a + b).to_string()),
                )
            }
            45..70 => {
                let count = self.rng.range(1, 8);
                let tag = format!("w{}-{id}", self.n);
                let msg = json!({"jsonrpc":"2.0","id":id,"method":"tools/call","params":{
                    "name":"notify","arguments":{"tag": tag, "count": count},
                    "_meta":{"progressToken": format!("p-{id}")}}});
                let expect = Expect::Notify {
                    tag,
                    count,
                    get_open: with_get,
                };
                ("notify", msg, expect)
            }
            70..80 => (
                "tools/list",
                json!({"jsonrpc":"2.0","id":id,"method":"tools/list"}),
                Expect::Result,
            ),
            80..85 => (
                "ping",
                json!({"jsonrpc":"2.0","id":id,"method":"ping"}),
                Expect::Result,
            ),
            85..90 => {
                let ms = self.rng.range(5, 30);
                (
                    "slow",
                    call("slow", json!({ "ms": ms })),
                    Expect::Text(format!("slept {ms}")),
                )
            }
            90..95 => (
                "resources/read",
                json!({"jsonrpc":"2.0","id":id,"method":"resources/read",
                       "params":{"uri":"test://static"}}),
                Expect::Result,
            ),
            _ if with_get => (
                "touch",
                call("touch", json!({"uri": "test://static"})),
                Expect::Result,
            ),
            _ => (
                "echo",
                call("echo", json!({"text": "x"})),
                Expect::Text("x".into()),
            ),
        }
    }

    async fn check(
        &mut self,
        server: &str,
        op: &str,
        url: &str,
        sid: &str,
        msg: &Value,
        expect: Expect,
    ) -> Result<()> {
        let c = &self.counters;
        let a = match post(&self.http, url, Some(sid), msg).await {
            Ok(a) => a,
            Err(e) => {
                c.calls_failed.fetch_add(1, Ordering::Relaxed);
                c.error(format!("{server} {op}: transport error"), format!("{e:#}"));
                return Ok(());
            }
        };
        let last = a.messages.last().cloned().unwrap_or(Value::Null);
        let method_count = |name: &str| {
            a.messages
                .iter()
                .filter(|m| m.get("method").and_then(Value::as_str) == Some(name))
                .count() as u64
        };
        let (progress, logs) = (
            method_count("notifications/progress"),
            method_count("notifications/message"),
        );
        let notes = a
            .messages
            .iter()
            .filter(|m| m.get("method").is_some())
            .count() as u64;
        c.notifications.fetch_add(notes, Ordering::Relaxed);
        let text = last
            .pointer("/result/content/0/text")
            .and_then(Value::as_str);
        let good = a.status == 200
            && last.get("result").is_some()
            && last.pointer("/result/isError") != Some(&Value::Bool(true))
            && match &expect {
                Expect::Result => true,
                Expect::Text(t) => text == Some(t.as_str()),
                Expect::Notify {
                    tag,
                    count,
                    get_open,
                } => {
                    text == Some(format!("{tag}:{count}").as_str())
                        && progress == *count
                        && (logs == *count || (*get_open && logs <= *count))
                }
            };
        if good {
            c.calls_ok.fetch_add(1, Ordering::Relaxed);
        } else {
            c.calls_failed.fetch_add(1, Ordering::Relaxed);
            let what = match last.pointer("/error/code") {
                Some(code) => format!("{server} {op}: HTTP {} JSON-RPC {code}", a.status),
                None => format!("{server} {op}: HTTP {} wrong answer", a.status),
            };
            let detail = format!("{} messages; last: {last}", a.messages.len());
            c.error(what, detail.chars().take(300).collect::<String>());
        }
        Ok(())
    }

    /// Opens the session's GET stream and counts its events until aborted or ended.
    fn open_get(&self, url: &str, sid: &str) -> tokio::task::JoinHandle<()> {
        let req = self
            .stream_http
            .get(url)
            .header("accept", "text/event-stream")
            .header("mcp-session-id", sid)
            .header("mcp-protocol-version", VERSION);
        let c = Arc::clone(&self.counters);
        tokio::spawn(async move {
            let resp = match req.send().await {
                Ok(r) if r.status() == 200 => r,
                Ok(r) => {
                    c.error(format!("GET: HTTP {}", r.status()), "");
                    return;
                }
                Err(e) => {
                    c.error("GET: transport error".into(), format!("{e:#}"));
                    return;
                }
            };
            c.get_streams.fetch_add(1, Ordering::Relaxed);
            let mut body = resp.bytes_stream();
            while let Some(Ok(chunk)) = body.next().await {
                let events = chunk.windows(6).filter(|w| w == b"data: ").count() as u64;
                c.get_events.fetch_add(events, Ordering::Relaxed);
            }
        })
    }
}
