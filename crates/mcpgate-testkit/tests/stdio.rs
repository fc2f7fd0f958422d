//! Spawns the built binary in stdio mode and talks newline-delimited JSON-RPC.

use std::process::Stdio;
use std::time::Duration;

use anyhow::{Context, Result, ensure};
use serde_json::json;
use tokio::io::AsyncReadExt;
use tokio::time::timeout;

mod common;
use common::{Proc, call};

#[tokio::test]
async fn initialize_echo_and_concurrency() -> Result<()> {
    let mut p = Proc::spawn(&["--timer-ms", "100"], Stdio::piped())?;
    p.send(json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                  "params": {"protocolVersion": "2024-11-05", "capabilities": {}}}))
        .await?;
    let init = p.recv().await?;
    ensure!(init["id"] == 1 && init["result"]["protocolVersion"] == "2024-11-05");
    p.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        .await?;
    p.send(call(2, "echo", json!({"text": "hello"}))).await?;
    let echo = p.recv().await?;
    ensure!(echo["id"] == 2 && echo["result"]["content"][0]["text"] == "hello");

    p.send(call(3, "slow", json!({"ms": 300}))).await?;
    p.send(call(4, "echo", json!({"text": "fast"}))).await?;
    let first = p.recv().await?;
    ensure!(first["id"] == 4, "echo waited for slow: {first}");
    let timer = p.recv().await?;
    ensure!(timer["params"]["logger"] == "timer", "{timer}");
    let pid = p.child.id().context("pid")?.to_string();
    ensure!(timer["params"]["data"]["session"] == pid.as_str());
    let second = p.recv().await?;
    ensure!(second["id"] == 3 && second["result"]["content"][0]["text"] == "slept 300");

    p.send(call(5, "whoami", json!({}))).await?;
    ensure!(p.recv().await?["result"]["content"][0]["text"] == pid.as_str());
    p.send(json!({"jsonrpc": "2.0", "id": 6, "method": "bogus"}))
        .await?;
    ensure!(p.recv().await?["error"]["code"] == -32601);

    drop(p.stdin);
    let status = timeout(Duration::from_secs(3), p.child.wait()).await??;
    ensure!(status.code() == Some(0), "{status}");
    let mut stderr = String::new();
    p.child
        .stderr
        .take()
        .context("stderr")?
        .read_to_string(&mut stderr)
        .await?;
    ensure!(stderr.contains("testkit: tools/call echo"), "{stderr}");
    Ok(())
}

#[tokio::test]
async fn sample_over_stdio_and_die() -> Result<()> {
    let mut p = Proc::spawn(&[], Stdio::piped())?;
    p.send(call(1, "sample", json!({"prompt": "q"}))).await?;
    let req = p.recv().await?;
    ensure!(req["method"] == "sampling/createMessage", "{req}");
    p.send(json!({"jsonrpc": "2.0", "id": req["id"],
                  "result": {"content": {"type": "text", "text": "a"}}}))
        .await?;
    ensure!(p.recv().await?["result"]["content"][0]["text"] == "a");

    p.send(call(2, "hang", json!({}))).await?;
    p.send(
        json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                  "params": {"requestId": 2}}),
    )
    .await?;
    p.send(call(3, "die", json!({}))).await?;
    let status = timeout(Duration::from_secs(3), p.child.wait()).await??;
    ensure!(status.code() == Some(3), "{status}");
    let rest = p.next_line().await?;
    ensure!(rest.is_none(), "unexpected output {rest:?}");
    Ok(())
}

#[tokio::test]
async fn standalone_messages_follow_the_answer_over_stdio() -> Result<()> {
    let mut p = Proc::spawn(&[], Stdio::piped())?;
    p.send(call(1, "sample_async", json!({"prompt": "later"})))
        .await?;
    let queued = p.recv().await?;
    ensure!(
        queued["id"] == 1 && queued["result"]["content"][0]["text"] == "queued",
        "{queued}"
    );
    let req = p.recv().await?;
    ensure!(req["method"] == "sampling/createMessage", "{req}");
    ensure!(req["params"]["messages"][0]["content"]["text"] == "later");
    p.send(json!({"jsonrpc": "2.0", "id": req["id"],
                  "result": {"content": {"type": "text", "text": "done"}}}))
        .await?;

    p.send(
        json!({"jsonrpc": "2.0", "id": 2, "method": "resources/subscribe",
                  "params": {"uri": "test://static"}}),
    )
    .await?;
    ensure!(p.recv().await?["id"] == 2);
    p.send(call(3, "touch", json!({"uri": "test://static"})))
        .await?;
    let touched = p.recv().await?;
    ensure!(
        touched["result"]["content"][0]["text"] == "notified 1",
        "{touched}"
    );
    let note = p.recv().await?;
    ensure!(
        note["method"] == "notifications/resources/updated",
        "{note}"
    );
    ensure!(note["params"]["uri"] == "test://static");

    p.send(call(4, "roots", json!({}))).await?;
    let req = p.recv().await?;
    ensure!(req["method"] == "roots/list", "{req}");
    p.send(json!({"jsonrpc": "2.0", "id": req["id"],
                  "result": {"roots": [{"uri": "file:///x"}]}}))
        .await?;
    let roots = p.recv().await?;
    ensure!(
        roots["id"] == 4 && roots["result"]["content"][0]["text"] == "file:///x",
        "{roots}"
    );

    drop(p.stdin);
    let status = timeout(Duration::from_secs(3), p.child.wait()).await??;
    ensure!(status.code() == Some(0), "{status}");
    Ok(())
}
