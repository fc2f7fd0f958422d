//! Drives the Streamable HTTP server with a raw hyper client on a real socket.

use std::time::Duration;

use anyhow::{Context, Result, bail, ensure};
use http::{Method, Response, StatusCode};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use mcpgate_testkit::{HttpOptions, HttpServer};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::timeout;

mod common;
use common::{call, request, send, start, text};

async fn post(
    server: &HttpServer,
    session: Option<&str>,
    body: Value,
) -> Result<Response<Incoming>> {
    send(server, Method::POST, session, &[], Some(&body)).await
}

fn content_type(resp: &Response<Incoming>) -> &str {
    resp.headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
}

/// The JSON messages of a complete SSE body.
fn sse_messages(body: &str) -> Result<Vec<Value>> {
    body.split("\n\n")
        .filter(|e| !e.trim().is_empty())
        .map(|event| {
            let data = event
                .lines()
                .find_map(|l| l.strip_prefix("data: "))
                .context("event without data")?;
            Ok(serde_json::from_str(data)?)
        })
        .collect()
}

/// Reads body frames until one holds a complete SSE event; returns its message.
async fn next_event(body: &mut Incoming, buf: &mut String) -> Result<Option<Value>> {
    loop {
        if let Some(end) = buf.find("\n\n") {
            let event: String = buf.drain(..end + 2).collect();
            return Ok(sse_messages(&event)?.into_iter().next());
        }
        match timeout(Duration::from_secs(3), body.frame()).await? {
            Some(frame) => {
                if let Ok(data) = frame?.into_data() {
                    buf.push_str(std::str::from_utf8(&data)?);
                }
            }
            None => return Ok(None),
        }
    }
}

async fn initialize(server: &HttpServer) -> Result<String> {
    let (sid, body) = common::initialize(server, "2025-06-18").await?;
    let body: Value = serde_json::from_str(&body)?;
    ensure!(body["result"]["protocolVersion"] == "2025-06-18", "{body}");
    Ok(sid)
}

#[tokio::test]
async fn initialize_mints_session_and_validates_it() -> Result<()> {
    let server = start(HttpOptions::default()).await?;
    let sid = initialize(&server).await?;
    ensure!(sid.len() == 32 && sid.chars().all(|c| c.is_ascii_hexdigit()));

    let ping = json!({"jsonrpc": "2.0", "id": 1, "method": "ping"});
    let resp = post(&server, None, ping.clone()).await?;
    ensure!(resp.status() == StatusCode::BAD_REQUEST);
    let resp = post(&server, Some("ffff"), ping.clone()).await?;
    ensure!(resp.status() == StatusCode::NOT_FOUND);
    ensure!(text(resp).await?.contains("\"error\""));

    let resp = post(&server, Some(&sid), call(2, "echo", json!({"text": "hi"}))).await?;
    ensure!(content_type(&resp) == "application/json");
    let body: Value = serde_json::from_str(&text(resp).await?)?;
    ensure!(
        body["id"] == 2 && body["result"]["content"][0]["text"] == "hi",
        "{body}"
    );

    let resp = post(&server, Some(&sid), call(3, "whoami", json!({}))).await?;
    let body: Value = serde_json::from_str(&text(resp).await?)?;
    ensure!(body["result"]["content"][0]["text"] == sid.as_str());

    let note = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let resp = post(&server, Some(&sid), note).await?;
    ensure!(resp.status() == StatusCode::ACCEPTED);
    ensure!(text(resp).await?.is_empty());

    let resp = request(
        &server,
        Method::POST,
        Some(&sid),
        &[("accept", "application/json")],
        Some(&ping),
    )
    .await?;
    ensure!(resp.status() == StatusCode::NOT_ACCEPTABLE);

    let stats = server.stats();
    ensure!(stats.sessions_created == 1 && stats.sessions_active == 1);
    ensure!(
        stats.requests == 3 && stats.notifications_received == 1,
        "{stats:?}"
    );
    ensure!(
        stats
            .last_headers
            .iter()
            .any(|(k, v)| k == "mcp-session-id" && *v == sid)
    );
    server.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn notify_streams_messages_and_progress_before_result() -> Result<()> {
    let server = start(HttpOptions::default()).await?;
    let sid = initialize(&server).await?;
    let mut req = call(7, "notify", json!({"tag": "t", "count": 3}));
    req["params"]["_meta"] = json!({"progressToken": "tok"});
    let resp = post(&server, Some(&sid), req).await?;
    ensure!(content_type(&resp) == "text/event-stream");
    let msgs = sse_messages(&text(resp).await?)?;
    ensure!(msgs.len() == 7, "{msgs:?}");
    let logs: Vec<_> = msgs
        .iter()
        .filter(|m| m["method"] == "notifications/message")
        .collect();
    let progress: Vec<_> = msgs
        .iter()
        .filter(|m| m["method"] == "notifications/progress")
        .collect();
    ensure!(logs.len() == 3 && progress.len() == 3);
    ensure!(logs[2]["params"]["data"] == json!({"tag": "t", "seq": 2}));
    ensure!(progress[0]["params"] == json!({"progressToken": "tok", "progress": 1, "total": 3}));
    let last = &msgs[6];
    ensure!(
        last["id"] == 7 && last["result"]["content"][0]["text"] == "t:3",
        "{last}"
    );
    server.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn sample_round_trips_through_the_client() -> Result<()> {
    let server = start(HttpOptions::default()).await?;
    let sid = initialize(&server).await?;
    let resp = post(
        &server,
        Some(&sid),
        call(9, "sample", json!({"prompt": "p?"})),
    )
    .await?;
    let mut body = resp.into_body();
    let mut buf = String::new();
    let request = next_event(&mut body, &mut buf)
        .await?
        .context("no request")?;
    ensure!(request["method"] == "sampling/createMessage", "{request}");
    ensure!(request["params"]["messages"][0]["content"]["text"] == "p?");
    let answer = json!({"jsonrpc": "2.0", "id": request["id"],
        "result": {"role": "assistant", "model": "m",
                   "content": {"type": "text", "text": "sampled!"}}});
    let resp = post(&server, Some(&sid), answer).await?;
    ensure!(resp.status() == StatusCode::ACCEPTED);
    let result = next_event(&mut body, &mut buf)
        .await?
        .context("no result")?;
    ensure!(result["id"] == 9 && result["result"]["content"][0]["text"] == "sampled!");
    ensure!(server.stats().responses_received == 1);
    server.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn cancelled_hang_ends_without_answer() -> Result<()> {
    let server = start(HttpOptions::default()).await?;
    let sid = initialize(&server).await?;
    let resp = post(&server, Some(&sid), call(11, "hang", json!({}))).await?;
    ensure!(resp.status() == StatusCode::OK);
    let cancel = json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                        "params": {"requestId": 11, "reason": "test"}});
    let ack = post(&server, Some(&sid), cancel).await?;
    ensure!(ack.status() == StatusCode::ACCEPTED);
    ensure!(text(resp).await?.is_empty());
    ensure!(server.stats().cancelled == 1);
    server.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn delete_ends_session() -> Result<()> {
    let server = start(HttpOptions::default()).await?;
    let sid = initialize(&server).await?;
    let resp = send(&server, Method::DELETE, Some(&sid), &[], None).await?;
    ensure!(resp.status() == StatusCode::OK);
    let ping = json!({"jsonrpc": "2.0", "id": 1, "method": "ping"});
    let resp = post(&server, Some(&sid), ping).await?;
    ensure!(resp.status() == StatusCode::NOT_FOUND);
    let stats = server.stats();
    ensure!(stats.sessions_deleted == 1 && stats.sessions_active == 0);
    server.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn reset_on_delete_resets_the_connection() -> Result<()> {
    let server = start(HttpOptions {
        reset_on_delete: true,
        ..HttpOptions::default()
    })
    .await?;
    let sid = initialize(&server).await?;
    let mut raw = TcpStream::connect(server.addr()).await?;
    let req = format!("DELETE /mcp HTTP/1.1\r\nhost: x\r\nmcp-session-id: {sid}\r\n\r\n");
    raw.write_all(req.as_bytes()).await?;
    let mut buf = Vec::new();
    match timeout(Duration::from_secs(3), raw.read_to_end(&mut buf)).await? {
        Err(e) => ensure!(e.kind() == std::io::ErrorKind::ConnectionReset, "{e}"),
        Ok(_) => ensure!(buf.is_empty(), "got an answer"),
    }
    ensure!(server.stats().sessions_deleted == 1);
    server.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn die_drops_the_connection() -> Result<()> {
    let server = start(HttpOptions::default()).await?;
    let sid = initialize(&server).await?;
    if post(&server, Some(&sid), call(5, "die", json!({})))
        .await
        .is_ok()
    {
        bail!("die answered");
    }
    server.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn timer_goes_to_get_stream_or_is_dropped() -> Result<()> {
    let server = start(HttpOptions {
        timer_ms: Some(150),
        ..HttpOptions::default()
    })
    .await?;
    let with_get = initialize(&server).await?;
    let resp = send(&server, Method::GET, Some(&with_get), &[], None).await?;
    ensure!(resp.status() == StatusCode::OK && content_type(&resp) == "text/event-stream");
    let _without_get = initialize(&server).await?;
    let deleted = initialize(&server).await?;
    let resp_del = send(&server, Method::DELETE, Some(&deleted), &[], None).await?;
    ensure!(resp_del.status() == StatusCode::OK);

    let mut body = resp.into_body();
    let mut buf = String::new();
    let msg = next_event(&mut body, &mut buf)
        .await?
        .context("stream ended")?;
    ensure!(msg["params"]["logger"] == "timer");
    ensure!(msg["params"]["data"] == json!({"timer": true, "session": with_get}));
    ensure!(server.stats().get_streams_open == 1);

    tokio::time::sleep(Duration::from_millis(100)).await;
    let stats = server.stats();
    ensure!(
        stats.timer_sent == 1 && stats.timer_dropped == 2,
        "{stats:?}"
    );
    server.shutdown().await;
    // Shutdown aborts the open GET stream.
    let end = timeout(Duration::from_secs(2), body.frame()).await?;
    ensure!(matches!(end, None | Some(Err(_))));
    Ok(())
}

#[tokio::test]
async fn no_get_and_always_sse() -> Result<()> {
    let server = start(HttpOptions {
        no_get: true,
        always_sse: true,
        ..HttpOptions::default()
    })
    .await?;
    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {}});
    let resp = post(&server, None, init).await?;
    ensure!(content_type(&resp) == "text/event-stream");
    let sid = resp
        .headers()
        .get("mcp-session-id")
        .context("no session")?
        .to_str()?
        .to_owned();
    let msgs = sse_messages(&text(resp).await?)?;
    ensure!(msgs.len() == 1 && msgs[0]["result"]["protocolVersion"] == "2025-11-25");
    let resp = send(&server, Method::GET, Some(&sid), &[], None).await?;
    ensure!(resp.status() == StatusCode::METHOD_NOT_ALLOWED);
    server.shutdown().await;
    Ok(())
}
