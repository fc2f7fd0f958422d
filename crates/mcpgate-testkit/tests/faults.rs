//! The fault tools (`flood`, `garbage`, `close_early`, `stats`) over stdio (the built
//! binary, raw bytes) and Streamable HTTP (a raw hyper client on a real socket).

use std::net::SocketAddr;
use std::process::Stdio;
use std::time::Duration;

use anyhow::{Context, Result, ensure};
use http::{Method, StatusCode};
use http_body_util::BodyExt;
use mcpgate_testkit::{HttpOptions, HttpServer};
use serde_json::{Value, json};
use tokio::time::timeout;

mod common;
use common::{Proc, call, send, text};

fn text_of(answer: &Value) -> &str {
    answer["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
}

#[tokio::test]
async fn stdio_flood_garbage_and_stats() -> Result<()> {
    let mut p = Proc::spawn(&[], Stdio::null())?;
    // A flood is written before the answer, each line about `size` bytes.
    p.send(call(1, "flood", json!({"count": 5, "size": 300})))
        .await?;
    for seq in 0..5 {
        let line = p.line().await?;
        ensure!(line.len() == 300, "line of {} bytes", line.len());
        let v: Value = serde_json::from_slice(&line)?;
        ensure!(v["method"] == "notifications/message" && v["params"]["data"]["seq"] == seq);
        ensure!(v.get("id").is_none(), "{v}");
    }
    let answer = p.recv().await?;
    ensure!(
        answer["id"] == 1 && text_of(&answer) == "flooded 5/5",
        "{answer}"
    );
    // In the background: the answer first, then the flood.
    p.send(call(
        2,
        "flood",
        json!({"count": 3, "size": 100, "background": true}),
    ))
    .await?;
    let answer = p.recv().await?;
    ensure!(
        answer["id"] == 2 && text_of(&answer) == "flooding 3",
        "{answer}"
    );
    for seq in 0..3 {
        ensure!(p.recv().await?["params"]["data"]["seq"] == seq);
    }

    p.send(call(3, "garbage", json!({"kind": "invalid"})))
        .await?;
    let bad = p.line().await?;
    ensure!(serde_json::from_slice::<Value>(&bad).is_err());
    ensure!(text_of(&p.recv().await?) == "garbage invalid sent");

    p.send(call(4, "garbage", json!({"kind": "not_jsonrpc"})))
        .await?;
    let odd: Value = serde_json::from_slice(&p.line().await?)?;
    ensure!(odd.get("jsonrpc").is_none() && odd.is_object(), "{odd}");
    ensure!(text_of(&p.recv().await?) == "garbage not_jsonrpc sent");

    p.send(call(5, "garbage", json!({"kind": "huge", "mib": 2})))
        .await?;
    let huge = p.line().await?;
    ensure!(huge.len() == 2 * 1024 * 1024, "{} bytes", huge.len());
    let huge: Value = serde_json::from_slice(&huge)?;
    ensure!(huge["method"] == "notifications/message");
    ensure!(text_of(&p.recv().await?) == "garbage huge sent");

    p.send(call(6, "garbage", json!({"kind": "binary"})))
        .await?;
    let binary = p.line().await?;
    ensure!(std::str::from_utf8(&binary).is_err(), "{binary:?}");
    ensure!(text_of(&p.recv().await?) == "garbage binary sent");

    p.send(call(7, "close_early", json!({}))).await?;
    let answer = p.recv().await?;
    ensure!(answer["result"]["isError"] == true, "{answer}");

    p.send(call(8, "stats", json!({}))).await?;
    let stats: Value = serde_json::from_str(text_of(&p.recv().await?))?;
    ensure!(stats["flood_sent"] == 8, "{stats}");
    ensure!(stats["requests"] == 8, "{stats}");

    drop(p.stdin);
    let status = timeout(Duration::from_secs(3), p.child.wait()).await??;
    ensure!(status.code() == Some(0), "{status}");
    Ok(())
}

/// The `data` of each event of a complete SSE body, and whether any event had an id.
fn sse_data(body: &str) -> (Vec<String>, bool) {
    let mut has_id = false;
    let data = body
        .split("\n\n")
        .filter(|e| !e.trim().is_empty())
        .filter_map(|event| {
            has_id |= event.lines().any(|l| l.starts_with("id:"));
            event
                .lines()
                .find_map(|l| l.strip_prefix("data: "))
                .map(str::to_owned)
        })
        .collect();
    (data, has_id)
}

async fn http_session(server: &HttpServer) -> Result<String> {
    Ok(common::initialize(server, "2025-11-25").await?.0)
}

/// The answer to a request, sent as JSON or as the last event of an SSE stream.
async fn json_answer(server: &HttpServer, sid: &str, msg: Value) -> Result<Value> {
    let resp = send(server, Method::POST, Some(sid), &[], Some(&msg)).await?;
    let sse = resp
        .headers()
        .get("content-type")
        .is_some_and(|v| v == "text/event-stream");
    let body = text(resp).await?;
    if sse {
        let (data, _) = sse_data(&body);
        let last = data
            .iter()
            .rev()
            .find(|d| !d.is_empty())
            .context("no event")?;
        Ok(serde_json::from_str(last)?)
    } else {
        Ok(serde_json::from_str(&body)?)
    }
}

#[tokio::test]
async fn http_flood_goes_to_the_get_stream_paced_and_unlogged() -> Result<()> {
    let server = HttpServer::start(
        SocketAddr::from(([127, 0, 0, 1], 0)),
        HttpOptions::default(),
    )
    .await?;
    let sid = http_session(&server).await?;
    // No GET stream: nobody takes the flood.
    let a = json_answer(&server, &sid, call(1, "flood", json!({"count": 4}))).await?;
    ensure!(text_of(&a) == "flooded 0/4", "{a}");

    let get = send(&server, Method::GET, Some(&sid), &[], None).await?;
    ensure!(get.status() == StatusCode::OK);
    let mut body = get.into_body();
    let a = json_answer(
        &server,
        &sid,
        call(2, "flood", json!({"count": 20, "size": 500})),
    )
    .await?;
    ensure!(text_of(&a) == "flooded 20/20", "{a}");
    let mut buf = String::new();
    let mut seen = 0;
    while seen < 20 {
        let frame = timeout(Duration::from_secs(5), body.frame())
            .await?
            .context("GET stream ended")??;
        if let Ok(data) = frame.into_data() {
            buf.push_str(std::str::from_utf8(&data)?);
        }
        while let Some(end) = buf.find("\n\n") {
            let event: String = buf.drain(..end + 2).collect();
            let (data, has_id) = sse_data(&event);
            let v: Value = serde_json::from_str(&data[0])?;
            ensure!(has_id && v["params"]["data"]["seq"] == seen, "{event}");
            ensure!(data[0].len() == 500);
            seen += 1;
        }
    }
    ensure!(server.stats().flood_sent == 20);
    // Not logged: resuming the standalone stream replays nothing of it.
    drop(body);
    let resumed = send(
        &server,
        Method::GET,
        Some(&sid),
        &[("last-event-id", "0-0")],
        None,
    )
    .await?;
    let mut body = resumed.into_body();
    let replay = timeout(Duration::from_millis(300), body.frame()).await;
    ensure!(replay.is_err(), "nothing to replay: {replay:?}");

    // A reader that does not read holds the flood back: the testkit queues at most a
    // few events beyond what the socket buffers take.
    let background = json!({"count": 100_000, "size": 10_000, "background": true});
    let a = json_answer(&server, &sid, call(3, "flood", background)).await?;
    ensure!(text_of(&a) == "flooding 100000", "{a}");
    tokio::time::sleep(Duration::from_millis(500)).await;
    let held = server.stats().flood_sent;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let later = server.stats().flood_sent;
    ensure!(later < 20 + 5_000, "flood not paced: {later} sent");
    ensure!(
        later == held,
        "flood goes on without a reader: {held} → {later}"
    );
    drop(body);
    server.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn http_close_early_and_garbage() -> Result<()> {
    let opts = HttpOptions {
        priming: true,
        ..HttpOptions::default()
    };
    let server = HttpServer::start(SocketAddr::from(([127, 0, 0, 1], 0)), opts).await?;
    let sid = http_session(&server).await?;
    for events in [0u64, 2] {
        let msg = call(1, "close_early", json!({"events": events}));
        let resp = send(&server, Method::POST, Some(&sid), &[], Some(&msg)).await?;
        ensure!(resp.status() == StatusCode::OK);
        let ct = resp.headers().get("content-type").cloned();
        ensure!(ct.is_some_and(|v| v == "text/event-stream"));
        let body = text(resp).await?;
        let (data, has_id) = sse_data(&body);
        ensure!(!has_id, "no event ids, not even priming: {body}");
        ensure!(data.len() == events as usize, "{body}");
        ensure!(!body.contains("\"result\""), "{body}");
    }
    ensure!(server.stats().closed_early == 2);

    for (kind, check) in [
        ("invalid", "this is not JSON {"),
        ("not_jsonrpc", "{\"hello\""),
    ] {
        let msg = call(2, "garbage", json!({"kind": kind}));
        let resp = send(&server, Method::POST, Some(&sid), &[], Some(&msg)).await?;
        let (data, _) = sse_data(&text(resp).await?);
        let data: Vec<&String> = data.iter().filter(|d| !d.is_empty()).collect();
        ensure!(data.len() == 2 && data[0].starts_with(check), "{data:?}");
        let answer: Value = serde_json::from_str(data[1])?;
        ensure!(
            text_of(&answer) == format!("garbage {kind} sent"),
            "{answer}"
        );
    }
    // Bytes that are not UTF-8 cannot go in an SSE event: a tool error.
    let msg = call(3, "garbage", json!({"kind": "binary"}));
    let resp = send(&server, Method::POST, Some(&sid), &[], Some(&msg)).await?;
    let (data, _) = sse_data(&text(resp).await?);
    let answer: Value = serde_json::from_str(data.last().context("no answer")?)?;
    ensure!(answer["result"]["isError"] == true, "{answer}");
    let stats = json_answer(&server, &sid, call(4, "stats", json!({}))).await?;
    let stats: Value = serde_json::from_str(text_of(&stats))?;
    ensure!(stats["closed_early"] == 2, "{stats}");
    server.shutdown().await;
    Ok(())
}
