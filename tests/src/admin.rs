//! The admin API of a running gateway (its `[admin]` listener), called with its token.

use std::time::Duration;

use serde_json::Value;

use crate::gateway::Gateway;

/// A client of a gateway's admin listener.
#[derive(Debug, Clone)]
pub struct Admin {
    /// Base URL of the admin listener, from the gateway's second stdout line.
    pub base: String,
    token: String,
    /// A plain client with a 30 s timeout (no token attached).
    pub http: reqwest::Client,
}

impl Admin {
    /// The admin listener `gw` printed on its second stdout line (launch it with
    /// `stdout_lines: 2`); a configured token must not be printed there.
    pub fn of(gw: &Gateway, token: &str) -> Admin {
        let line = gw.stdout.get(1).map(String::as_str).unwrap_or_default();
        let base = match line.strip_prefix("mcpgate admin listening on ") {
            Some(a) if !a.contains("token=") => a.to_owned(),
            _ => panic!("unexpected second line {line:?}; log:\n{}", gw.log()),
        };
        Admin {
            base,
            token: token.to_owned(),
            http: reqwest::Client::builder()
                .timeout(Duration::from_secs(30))
                .build()
                .unwrap(),
        }
    }

    /// An admin API request with the token.
    async fn send(&self, method: reqwest::Method, path: &str) -> reqwest::Response {
        self.http
            .request(method, format!("{}{path}", self.base))
            .bearer_auth(&self.token)
            .send()
            .await
            .unwrap()
    }

    /// An admin API call with the token: status and JSON body (`Null` if not JSON).
    pub async fn api(&self, method: reqwest::Method, path: &str) -> (u16, Value) {
        let r = self.send(method, path).await;
        let status = r.status().as_u16();
        (status, r.json().await.unwrap_or(Value::Null))
    }

    /// `GET path` with the token: the body as it is.
    pub async fn text(&self, path: &str) -> String {
        self.send(reqwest::Method::GET, path)
            .await
            .text()
            .await
            .unwrap()
    }

    /// `GET /api/sessions` (200 expected): the session rows.
    pub async fn sessions(&self) -> Vec<Value> {
        let (status, v) = self.api(reqwest::Method::GET, "/api/sessions").await;
        assert_eq!(status, 200, "{v}");
        v.as_array().unwrap().clone()
    }
}
