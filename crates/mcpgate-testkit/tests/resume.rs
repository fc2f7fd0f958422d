//! Event ids, `Last-Event-ID` resumption, the `cut_after` fault, priming, and
//! the standalone-stream tools (`sample_async`, `touch`) plus `roots`, driven
//! with a raw hyper client on a real socket.

use std::collections::HashSet;
use std::time::Duration;

use anyhow::{Context, Result, bail, ensure};
use http::{Method, Response, StatusCode};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use mcpgate_testkit::{HttpOptions, HttpServer};
use serde_json::{Value, json};
use tokio::time::timeout;

mod common;
use common::{call, send, start};

async fn post(server: &HttpServer, session: &str, body: Value) -> Result<Response<Incoming>> {
    send(server, Method::POST, Some(session), &[], Some(&body)).await
}

/// Opens a GET stream, resuming after `last_event_id` if given.
async fn get(server: &HttpServer, session: &str, last_event_id: Option<&str>) -> Result<Sse> {
    let extra: Vec<(&str, &str)> = last_event_id
        .map(|id| ("last-event-id", id))
        .into_iter()
        .collect();
    let resp = send(server, Method::GET, Some(session), &extra, None).await?;
    ensure!(resp.status() == StatusCode::OK, "GET: {}", resp.status());
    Ok(Sse::new(resp))
}

async fn json_body(resp: Response<Incoming>) -> Result<Value> {
    ensure!(
        resp.headers()
            .get("content-type")
            .is_some_and(|v| v == "application/json"),
        "not JSON: {:?}",
        resp.headers()
    );
    let bytes = timeout(Duration::from_secs(3), resp.into_body().collect()).await??;
    Ok(serde_json::from_slice(&bytes.to_bytes())?)
}

async fn initialize(server: &HttpServer) -> Result<String> {
    Ok(common::initialize(server, "2025-11-25").await?.0)
}

/// One SSE field block.
#[derive(Debug, Default)]
struct Event {
    id: Option<String>,
    data: Option<String>,
    retry: Option<u64>,
}

impl Event {
    /// The JSON-RPC message of an event with non-empty data.
    fn msg(&self) -> Option<Value> {
        let data = self.data.as_deref().filter(|d| !d.is_empty())?;
        serde_json::from_str(data).ok()
    }

    fn is_priming(&self) -> bool {
        self.id.is_some() && self.data.as_deref() == Some("")
    }
}

fn parse_event(block: &str) -> Event {
    let mut ev = Event::default();
    for line in block.lines() {
        let (field, value) = line.split_once(':').unwrap_or((line, ""));
        let value = value.strip_prefix(' ').unwrap_or(value);
        match field {
            "id" => ev.id = Some(value.to_owned()),
            "data" => {
                let data = ev.data.get_or_insert_with(String::new);
                if !data.is_empty() {
                    data.push('\n');
                }
                data.push_str(value);
            }
            "retry" => ev.retry = value.parse().ok(),
            _ => {}
        }
    }
    ev
}

/// How an SSE body ended.
#[derive(Debug, PartialEq, Eq)]
enum End {
    /// The response completed.
    Clean,
    /// The connection broke mid-body.
    Aborted,
}

/// Reads an SSE response body event by event.
struct Sse {
    body: Incoming,
    buf: String,
    end: Option<End>,
}

impl Sse {
    fn new(resp: Response<Incoming>) -> Self {
        Self {
            body: resp.into_body(),
            buf: String::new(),
            end: None,
        }
    }

    /// The next event, or `None` once the body has ended (see `end`).
    async fn next(&mut self) -> Result<Option<Event>> {
        loop {
            if let Some(end) = self.buf.find("\n\n") {
                let block: String = self.buf.drain(..end + 2).collect();
                return Ok(Some(parse_event(&block)));
            }
            if self.end.is_some() {
                return Ok(None);
            }
            match timeout(Duration::from_secs(3), self.body.frame()).await? {
                Some(Ok(frame)) => {
                    if let Ok(data) = frame.into_data() {
                        self.buf.push_str(std::str::from_utf8(&data)?);
                    }
                }
                Some(Err(_)) => self.end = Some(End::Aborted),
                None => self.end = Some(End::Clean),
            }
        }
    }

    /// The next event carrying a message.
    async fn next_msg(&mut self) -> Result<(String, Value)> {
        loop {
            let ev = self.next().await?.context("stream ended")?;
            if let Some(m) = ev.msg() {
                return Ok((ev.id.context("event without id")?, m));
            }
        }
    }

    /// Every remaining event, and how the body ended.
    async fn rest(&mut self) -> Result<(Vec<Event>, End)> {
        let mut events = Vec::new();
        while let Some(ev) = self.next().await? {
            events.push(ev);
        }
        Ok((events, self.end.take().context("no end")?))
    }
}

fn split_id(id: &str) -> Result<(u64, u64)> {
    let (stream, seq) = id.split_once('-').context("id without '-'")?;
    Ok((stream.parse()?, seq.parse()?))
}

/// The `data.seq` of `notify` log messages, and the final response if any.
fn notify_parts(events: &[Event]) -> (Vec<u64>, Option<Value>) {
    let mut seqs = Vec::new();
    let mut response = None;
    for m in events.iter().filter_map(Event::msg) {
        if m["method"] == "notifications/message" {
            seqs.extend(m["params"]["data"]["seq"].as_u64());
        } else if m.get("result").is_some() || m.get("error").is_some() {
            response = Some(m);
        }
    }
    (seqs, response)
}

async fn wait_for<F: Fn() -> bool>(what: &str, cond: F) -> Result<()> {
    for _ in 0..300 {
        if cond() {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    bail!("timed out waiting for {what}")
}

#[tokio::test]
async fn event_ids_are_present_and_unique_across_streams() -> Result<()> {
    let server = start(HttpOptions::default()).await?;
    let sid = initialize(&server).await?;
    let mut standalone = get(&server, &sid, None).await?;
    let sub = json!({"jsonrpc": "2.0", "id": 1, "method": "resources/subscribe",
                     "params": {"uri": "test://static"}});
    json_body(post(&server, &sid, sub).await?).await?;

    let mut ids = Vec::new();
    let mut post_streams = HashSet::new();
    for n in 0..2u64 {
        let resp = post(
            &server,
            &sid,
            call(10 + n, "notify", json!({"tag": "t", "count": 3})),
        )
        .await?;
        let (events, end) = Sse::new(resp).rest().await?;
        ensure!(end == End::Clean && events.len() == 4, "{events:?}");
        for ev in &events {
            let id = ev.id.clone().context("event without id")?;
            post_streams.insert(split_id(&id)?.0);
            ids.push(id);
        }
        let touch = call(20 + n, "touch", json!({"uri": "test://static"}));
        let answer = json_body(post(&server, &sid, touch).await?).await?;
        ensure!(
            answer["result"]["content"][0]["text"] == "notified 1",
            "{answer}"
        );
        let (id, msg) = standalone.next_msg().await?;
        ensure!(msg["method"] == "notifications/resources/updated");
        ensure!(
            split_id(&id)?.0 == 0,
            "standalone events are stream 0: {id}"
        );
        ids.push(id);
    }
    ensure!(
        post_streams.len() == 2 && !post_streams.contains(&0),
        "{post_streams:?}"
    );
    let unique: HashSet<_> = ids.iter().collect();
    ensure!(unique.len() == ids.len() && ids.len() == 10, "{ids:?}");
    server.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn cut_after_then_resume_gets_every_event_once_and_the_result() -> Result<()> {
    let server = start(HttpOptions {
        cut_after: Some(2),
        priming: true,
        ..HttpOptions::default()
    })
    .await?;
    let sid = initialize(&server).await?;
    let args = json!({"tag": "c", "count": 6, "interval_ms": 40});
    let resp = post(&server, &sid, call(5, "notify", args)).await?;
    let (events, end) = Sse::new(resp).rest().await?;
    ensure!(end == End::Aborted, "the stream was not cut: {events:?}");
    ensure!(events.first().is_some_and(Event::is_priming), "{events:?}");
    ensure!(
        events.last().is_some_and(|e| e.retry == Some(100)),
        "{events:?}"
    );
    let (mut seqs, response) = notify_parts(&events);
    ensure!(seqs == [0, 1] && response.is_none(), "{events:?}");
    let last_id = events
        .iter()
        .rev()
        .find(|e| e.msg().is_some())
        .and_then(|e| e.id.clone())
        .context("no id")?;

    // The call is still running: the resumed stream replays what was missed,
    // then follows the call live to its response and ends.
    let mut resumed = get(&server, &sid, Some(&last_id)).await?;
    let (events, end) = resumed.rest().await?;
    ensure!(end == End::Clean, "{events:?}");
    ensure!(!events.iter().any(Event::is_priming), "{events:?}");
    let (more, response) = notify_parts(&events);
    seqs.extend(more);
    ensure!(seqs == [0, 1, 2, 3, 4, 5], "{seqs:?}");
    let response = response.context("no response after resuming")?;
    ensure!(
        response["id"] == 5 && response["result"]["content"][0]["text"] == "c:6",
        "{response}"
    );
    let stream = split_id(&last_id)?.0;
    for ev in &events {
        let (s, _) = split_id(ev.id.as_deref().context("event without id")?)?;
        ensure!(s == stream, "replayed another stream's event: {ev:?}");
    }
    let stats = server.stats();
    ensure!(
        stats.resumed == 1 && stats.get_streams_open == 0,
        "{stats:?}"
    );

    // Only the session's first stream is cut.
    let resp = post(
        &server,
        &sid,
        call(6, "notify", json!({"tag": "d", "count": 3})),
    )
    .await?;
    let (events, end) = Sse::new(resp).rest().await?;
    ensure!(end == End::Clean, "{events:?}");
    let (seqs, response) = notify_parts(&events);
    ensure!(seqs == [0, 1, 2] && response.is_some(), "{events:?}");
    server.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn a_finished_stream_replays_and_ends() -> Result<()> {
    let server = start(HttpOptions::default()).await?;
    let sid = initialize(&server).await?;
    let resp = post(
        &server,
        &sid,
        call(3, "notify", json!({"tag": "f", "count": 4})),
    )
    .await?;
    let (events, end) = Sse::new(resp).rest().await?;
    ensure!(end == End::Clean && events.len() == 5, "{events:?}");
    let first = events[0].id.clone().context("no id")?;

    let (replayed, end) = get(&server, &sid, Some(&first)).await?.rest().await?;
    ensure!(end == End::Clean, "{replayed:?}");
    let (seqs, response) = notify_parts(&replayed);
    ensure!(seqs == [1, 2, 3], "{replayed:?}");
    ensure!(response.is_some_and(|r| r["result"]["content"][0]["text"] == "f:4"));
    let original: Vec<_> = events[1..].iter().map(|e| e.id.clone()).collect();
    let again: Vec<_> = replayed.iter().map(|e| e.id.clone()).collect();
    ensure!(
        original == again,
        "replayed ids differ: {original:?} vs {again:?}"
    );
    ensure!(server.stats().resumed == 1);

    // An unknown id replays nothing and serves the standalone stream.
    let mut fresh = get(&server, &sid, Some("99-1")).await?;
    ensure!(server.stats().resumed == 1 && server.stats().get_streams_open == 1);
    let sub = json!({"jsonrpc": "2.0", "id": 4, "method": "resources/subscribe",
                     "params": {"uri": "test://x"}});
    json_body(post(&server, &sid, sub).await?).await?;
    json_body(post(&server, &sid, call(5, "touch", json!({"uri": "test://x"}))).await?).await?;
    let (id, msg) = fresh.next_msg().await?;
    ensure!(
        msg["params"]["uri"] == "test://x" && id.starts_with("0-"),
        "{id} {msg}"
    );
    server.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn standalone_stream_resumes_after_a_disconnect() -> Result<()> {
    let server = start(HttpOptions {
        priming: true,
        ..HttpOptions::default()
    })
    .await?;
    let sid = initialize(&server).await?;
    let sub = json!({"jsonrpc": "2.0", "id": 1, "method": "resources/subscribe",
                     "params": {"uri": "test://static"}});
    json_body(post(&server, &sid, sub).await?).await?;
    let mut standalone = get(&server, &sid, None).await?;
    let prime = standalone.next().await?.context("no priming event")?;
    ensure!(prime.is_priming(), "{prime:?}");
    let prime_id = prime.id.context("no id")?;
    ensure!(prime_id.starts_with("0-"), "{prime_id}");
    drop(standalone);
    wait_for("the GET stream to close", || {
        server.stats().get_streams_open == 0
    })
    .await?;

    // Sent while nobody reads the standalone stream: kept for a resume.
    let touch = call(2, "touch", json!({"uri": "test://static"}));
    json_body(post(&server, &sid, touch).await?).await?;
    let mut resumed = get(&server, &sid, Some(&prime_id)).await?;
    let (_, msg) = resumed.next_msg().await?;
    ensure!(msg["method"] == "notifications/resources/updated", "{msg}");
    ensure!(server.stats().resumed == 1 && server.stats().get_streams_open == 1);
    server.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn sample_async_round_trips_on_the_get_stream() -> Result<()> {
    let server = start(HttpOptions::default()).await?;
    let sid = initialize(&server).await?;
    let mut standalone = get(&server, &sid, None).await?;
    let answer = json_body(
        post(
            &server,
            &sid,
            call(1, "sample_async", json!({"prompt": "p?"})),
        )
        .await?,
    )
    .await?;
    ensure!(
        answer["result"]["content"][0]["text"] == "queued",
        "{answer}"
    );
    let (id, request) = standalone.next_msg().await?;
    ensure!(id.starts_with("0-"), "{id}");
    ensure!(request["method"] == "sampling/createMessage", "{request}");
    ensure!(request["params"]["messages"][0]["content"]["text"] == "p?");
    let reply = json!({"jsonrpc": "2.0", "id": request["id"],
        "result": {"role": "assistant", "model": "m",
                   "content": {"type": "text", "text": "async!"}}});
    let resp = post(&server, &sid, reply).await?;
    ensure!(resp.status() == StatusCode::ACCEPTED);
    wait_for("the sampled answer", || !server.stats().sampled.is_empty()).await?;
    let stats = server.stats();
    ensure!(
        stats.sampled == ["async!"] && stats.responses_received == 1,
        "{stats:?}"
    );
    server.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn touch_notifies_subscribed_sessions_only() -> Result<()> {
    let server = start(HttpOptions::default()).await?;
    let subscriber = initialize(&server).await?;
    let other = initialize(&server).await?;
    let mut sub_stream = get(&server, &subscriber, None).await?;
    let mut other_stream = get(&server, &other, None).await?;
    let sub = json!({"jsonrpc": "2.0", "id": 1, "method": "resources/subscribe",
                     "params": {"uri": "test://static"}});
    let r = json_body(post(&server, &subscriber, sub).await?).await?;
    ensure!(r["result"] == json!({}), "{r}");
    let bad = json!({"jsonrpc": "2.0", "id": 2, "method": "resources/subscribe", "params": {}});
    let r = json_body(post(&server, &subscriber, bad).await?).await?;
    ensure!(r["error"]["code"] == -32602, "{r}");

    // Touched from the other session: only the subscriber hears of it.
    let touch = call(3, "touch", json!({"uri": "test://static"}));
    let r = json_body(post(&server, &other, touch).await?).await?;
    ensure!(r["result"]["content"][0]["text"] == "notified 1", "{r}");
    let (_, note) = sub_stream.next_msg().await?;
    ensure!(
        note == json!({"jsonrpc": "2.0", "method": "notifications/resources/updated",
                       "params": {"uri": "test://static"}}),
        "{note}"
    );
    ensure!(
        timeout(Duration::from_millis(100), other_stream.next())
            .await
            .is_err(),
        "the other session got a notification"
    );

    let unsub = json!({"jsonrpc": "2.0", "id": 4, "method": "resources/unsubscribe",
                       "params": {"uri": "test://static"}});
    json_body(post(&server, &subscriber, unsub).await?).await?;
    let touch = call(5, "touch", json!({"uri": "test://static"}));
    let r = json_body(post(&server, &subscriber, touch).await?).await?;
    ensure!(r["result"]["content"][0]["text"] == "notified 0", "{r}");
    server.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn roots_asks_the_client_on_the_post_stream() -> Result<()> {
    let server = start(HttpOptions::default()).await?;
    let sid = initialize(&server).await?;
    let resp = post(&server, &sid, call(8, "roots", json!({}))).await?;
    let mut stream = Sse::new(resp);
    let (_, request) = stream.next_msg().await?;
    ensure!(request["method"] == "roots/list", "{request}");
    let reply = json!({"jsonrpc": "2.0", "id": request["id"],
        "result": {"roots": [{"uri": "file:///a", "name": "a"}, {"uri": "file:///b"}]}});
    ensure!(post(&server, &sid, reply).await?.status() == StatusCode::ACCEPTED);
    let (_, result) = stream.next_msg().await?;
    ensure!(
        result["id"] == 8 && result["result"]["content"][0]["text"] == "file:///a,file:///b",
        "{result}"
    );
    server.shutdown().await;
    Ok(())
}
