//! Front resumability: a client whose POST stream drops mid-call resumes with
//! `GET` + `Last-Event-ID` and receives every remaining notification exactly once, then
//! the result; the standalone stream resumes the same way.

use std::collections::BTreeMap;
use std::time::Duration;

use futures::StreamExt;
use mcpgate_testkit::{HttpOptions, HttpServer};
use mcpgate_tests::{Client, Gateway};
use serde_json::{Value, json};

const COUNT: u64 = 30;

/// Reads SSE events from a response until `stop` says so; returns (id, json) pairs.
async fn read_events(
    resp: reqwest::Response,
    mut stop: impl FnMut(&[(String, Value)]) -> bool,
) -> Vec<(String, Value)> {
    let mut out = Vec::new();
    let mut events = sse_stream::SseStream::from_bytes_stream(resp.bytes_stream());
    while let Ok(Some(Ok(ev))) = tokio::time::timeout(Duration::from_secs(10), events.next()).await
    {
        let Some(data) = ev.data.filter(|d| !d.is_empty()) else {
            continue;
        };
        out.push((
            ev.id.unwrap_or_default(),
            serde_json::from_str(&data).unwrap(),
        ));
        if stop(&out) {
            break;
        }
    }
    out
}

async fn cut_and_resume(gw: &Gateway) {
    let c = Client::new(&gw.url());
    let s = c.initialize().await;
    let http = reqwest::Client::new();
    let call = json!({"jsonrpc":"2.0","id":"long","method":"tools/call","params":{
        "name":"notify","arguments":{"tag":"r","count":COUNT,"interval_ms":20},"_meta":{"progressToken":"pt"}}});
    let resp = http
        .post(gw.url())
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-session-id", &s.id)
        .header("mcp-protocol-version", "2025-11-25")
        .body(call.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(resp.headers()["content-type"], "text/event-stream");
    // Read a few events, then drop the connection mid-call.
    let first = read_events(resp, |got| got.len() >= 5).await;
    drop(http);
    let last_id = first.last().unwrap().0.clone();
    assert!(!last_id.is_empty(), "events carry ids");
    tokio::time::sleep(Duration::from_millis(100)).await;
    let resumed = reqwest::Client::new()
        .get(gw.url())
        .header("accept", "text/event-stream")
        .header("mcp-session-id", &s.id)
        .header("last-event-id", &last_id)
        .send()
        .await
        .unwrap();
    assert_eq!(resumed.status(), 200);
    let rest = read_events(resumed, |got| {
        got.last().is_some_and(|(_, m)| m.get("id").is_some())
    })
    .await;
    let all: Vec<&Value> = first.iter().chain(rest.iter()).map(|(_, m)| m).collect();
    let (seqs, progress) = notify_counts(all.iter().copied());
    let result = all.last().unwrap();
    assert_eq!(result["id"], "long");
    assert_eq!(result["result"]["content"][0]["text"], format!("r:{COUNT}"));
    assert_eq!(
        progress.len() as u64,
        COUNT,
        "every progress notification: {progress:?}"
    );
    assert!(
        progress.values().all(|n| *n == 1),
        "each exactly once: {progress:?}"
    );
    assert_eq!(
        seqs.len() as u64,
        COUNT,
        "every message notification: {seqs:?}"
    );
    assert!(
        seqs.values().all(|n| *n == 1),
        "each exactly once: {seqs:?}"
    );
    // Ids are unique across everything received.
    let mut ids: Vec<&String> = first.iter().chain(rest.iter()).map(|(id, _)| id).collect();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), first.len() + rest.len());
}

/// How often each `notify` log message (by `data.seq`) and progress notification (by
/// `progress`) occurs among `messages`.
fn notify_counts<'a>(
    messages: impl IntoIterator<Item = &'a Value>,
) -> (BTreeMap<u64, usize>, BTreeMap<u64, usize>) {
    let mut seqs: BTreeMap<u64, usize> = BTreeMap::new();
    let mut progress: BTreeMap<u64, usize> = BTreeMap::new();
    for m in messages {
        match m["method"].as_str() {
            Some("notifications/message") => {
                *seqs
                    .entry(m["params"]["data"]["seq"].as_u64().unwrap())
                    .or_default() += 1
            }
            Some("notifications/progress") => {
                *progress
                    .entry(m["params"]["progress"].as_u64().unwrap())
                    .or_default() += 1
            }
            _ => {}
        }
    }
    (seqs, progress)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn post_stream_cut_then_resumed_http_upstream() {
    let up = HttpServer::start("127.0.0.1:0".parse().unwrap(), HttpOptions::default())
        .await
        .unwrap();
    let gw = Gateway::http(&up.url(), "");
    cut_and_resume(&gw).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn post_stream_cut_then_resumed_stdio_upstream() {
    let gw = Gateway::stdio_testkit(&[], "");
    // stdio: messages not tied to the request ride on the in-flight POST stream only
    // while no GET stream is open, so this covers the side-channel path too.
    cut_and_resume(&gw).await;
}

#[tokio::test]
async fn standalone_stream_resumes_without_loss() {
    let gw = Gateway::stdio_testkit(&[], "");
    let c = Client::new(&gw.url());
    let s = c.initialize().await;
    let open = |last: Option<String>| {
        let url = gw.url();
        let sid = s.id.clone();
        async move {
            let mut req = reqwest::Client::new()
                .get(url)
                .header("accept", "text/event-stream")
                .header("mcp-session-id", sid)
                .header("mcp-protocol-version", "2025-11-25");
            if let Some(l) = last {
                req = req.header("last-event-id", l);
            }
            req.send().await.unwrap()
        }
    };
    let get = open(None).await;
    // stdio notifications not tied to a request go to the GET stream.
    let r = s.call("notify", json!({"tag":"g","count":10})).await;
    assert_eq!(r.text(), "g:10");
    let first = read_events(get, |got| got.len() >= 4).await;
    let last = first.last().unwrap().0.clone();
    // The old connection may still look open to the gateway: resuming takes over.
    let again = open(Some(last)).await;
    assert_eq!(again.status(), 200);
    let rest = read_events(again, |got| first.len() + got.len() >= 10).await;
    let seqs: Vec<u64> = first
        .iter()
        .chain(rest.iter())
        .filter_map(|(_, m)| m["params"]["data"]["seq"].as_u64())
        .collect();
    assert_eq!(
        seqs,
        (0..10).collect::<Vec<_>>(),
        "in order, none lost, none twice"
    );
}

/// Upstream resumability: the upstream cuts its POST stream mid-call (after 5 events,
/// with `retry: 100`); the gateway resumes it with `Last-Event-ID` and the client, which
/// never lost its own connection, sees every notification exactly once and the result.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upstream_stream_cut_is_resumed_by_the_gateway() {
    let up = HttpServer::start(
        "127.0.0.1:0".parse().unwrap(),
        HttpOptions {
            cut_after: Some(5),
            ..Default::default()
        },
    )
    .await
    .unwrap();
    let gw = Gateway::http(&up.url(), "");
    let c = Client::new(&gw.url());
    let s = c.initialize().await;
    let r = s
        .request("tools/call", json!({"name":"notify","arguments":{"tag":"u","count":COUNT,"interval_ms":10},"_meta":{"progressToken":"up"}}))
        .await;
    assert_eq!(r.text(), format!("u:{COUNT}"), "{r:?}");
    let (seqs, progress) = notify_counts(&r.messages);
    assert_eq!(
        (seqs.len() as u64, progress.len() as u64),
        (COUNT, COUNT),
        "none lost"
    );
    assert!(
        seqs.values().chain(progress.values()).all(|n| *n == 1),
        "none twice"
    );
    assert_eq!(
        up.stats().resumed,
        1,
        "the gateway resumed the upstream stream once"
    );
    // The session is intact afterwards.
    assert_eq!(
        s.call("echo", json!({"text":"after"})).await.text(),
        "after"
    );
}
