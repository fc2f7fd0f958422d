//! The HTTP side: a JSON-RPC POST to the gateway and its answer (JSON or SSE), and the
//! gateway's `/metrics`.

use anyhow::{Context, Result};
use serde_json::Value;

/// The protocol version the workers speak.
pub(crate) const VERSION: &str = "2025-11-25";

/// A JSON answer or the messages of an SSE answer.
pub(crate) struct Answer {
    pub(crate) status: u16,
    pub(crate) session: Option<String>,
    pub(crate) messages: Vec<Value>,
}

/// POSTs `body` to `url` (with the session `sid`, if any).
pub(crate) async fn post(
    http: &reqwest::Client,
    url: &str,
    sid: Option<&str>,
    body: &Value,
) -> Result<Answer> {
    let mut req = http
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(body.to_string());
    if let Some(s) = sid {
        req = req
            .header("mcp-session-id", s)
            .header("mcp-protocol-version", VERSION);
    }
    let resp = req.send().await?;
    let status = resp.status().as_u16();
    let session = resp
        .headers()
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let sse = resp
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/event-stream"));
    let text = resp.text().await?;
    let messages = if sse {
        text.split("\n\n")
            .filter_map(|ev| {
                let data: Vec<&str> = ev
                    .lines()
                    .filter_map(|l| l.strip_prefix("data:"))
                    .map(str::trim_start)
                    .collect();
                serde_json::from_str(&data.join("\n")).ok()
            })
            .collect()
    } else if text.is_empty() {
        Vec::new()
    } else {
        vec![serde_json::from_str(&text).context("answer is not JSON")?]
    };
    Ok(Answer {
        status,
        session,
        messages,
    })
}

/// One sample of the gateway's `/metrics` (0 when absent); `None` when it does not answer.
pub(crate) async fn metric(http: &reqwest::Client, base: &str, name: &str) -> Option<f64> {
    let text = http
        .get(format!("{base}/metrics"))
        .send()
        .await
        .ok()?
        .text()
        .await
        .ok()?;
    Some(
        text.lines()
            .filter_map(|l| l.rsplit_once(' '))
            .find(|(k, _)| *k == name)
            .and_then(|(_, v)| v.parse().ok())
            .unwrap_or(0.0),
    )
}

/// The gateway's whole `/metrics` text (empty when it does not answer).
pub(crate) async fn metrics_text(http: &reqwest::Client, base: &str) -> String {
    match http.get(format!("{base}/metrics")).send().await {
        Ok(r) => r.text().await.unwrap_or_default(),
        Err(_) => String::new(),
    }
}
