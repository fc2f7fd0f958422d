//! The admin API over real HTTP, against an in-process session table.
//!
//! Sessions point at a Streamable HTTP upstream that is never contacted: opening one sends
//! nothing, and closing one that never initialised has nothing to DELETE upstream.

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::sync::Arc;
use std::time::Duration;

use mcpgate_admin::{AdminConfig, serve};
use mcpgate_session::{CloseReason, FrontKind, ServerSpec, SessionConfig, SessionTable};
use mcpgate_upstream::{Connector, Target, Timeouts};
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

const TOKEN: &str = "0123456789abcdef0123";

struct Admin {
    base: String,
    table: SessionTable,
    http: reqwest::Client,
    shutdown: CancellationToken,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl Admin {
    async fn start(id_prefix: &str, config: Value) -> Admin {
        let connector = Connector::new(Timeouts::default(), 1 << 20);
        let table = SessionTable::new(connector, SessionConfig::default(), id_prefix, &[]);
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let shutdown = CancellationToken::new();
        let cfg = AdminConfig {
            token: TOKEN.into(),
            redacted_config: config,
            tls: None,
            grants: None,
        };
        let task = tokio::spawn(serve(listener, table.clone(), cfg, shutdown.clone()));
        Admin {
            base,
            table,
            http: reqwest::Client::builder()
                .timeout(Duration::from_secs(10))
                .build()
                .unwrap(),
            shutdown,
            task: Some(task),
        }
    }

    async fn open(&self, server: &str, principal: Option<&str>) -> Arc<mcpgate_session::Session> {
        let spec = ServerSpec::new(
            server,
            Target::Http {
                url: "http://127.0.0.1:9/mcp".into(),
                headers: vec![],
                http: Default::default(),
                auth: None,
            },
        );
        self.table
            .create(
                &spec,
                FrontKind::StreamableHttp,
                principal.map(Arc::from),
                mcpgate_session::Holder::Server,
            )
            .await
            .unwrap()
    }

    async fn req(
        &self,
        method: reqwest::Method,
        path: &str,
        token: Option<&str>,
    ) -> (u16, reqwest::header::HeaderMap, String) {
        let mut r = self.http.request(method, format!("{}{path}", self.base));
        if let Some(t) = token {
            r = r.header("authorization", format!("Bearer {t}"));
        }
        let resp = r.send().await.unwrap();
        let status = resp.status().as_u16();
        let headers = resp.headers().clone();
        (status, headers, resp.text().await.unwrap())
    }

    async fn get_json(&self, path: &str) -> Value {
        let (status, _, body) = self.req(reqwest::Method::GET, path, Some(TOKEN)).await;
        assert_eq!(status, 200, "GET {path}: {body}");
        serde_json::from_str(&body).unwrap()
    }

    async fn delete(&self, prefix: &str) -> (u16, Value) {
        let (status, _, body) = self
            .req(
                reqwest::Method::DELETE,
                &format!("/api/sessions/{prefix}"),
                Some(TOKEN),
            )
            .await;
        (status, serde_json::from_str(&body).unwrap_or(Value::Null))
    }

    async fn stop(mut self) {
        self.shutdown.cancel();
        let task = self.task.take().unwrap();
        tokio::time::timeout(Duration::from_secs(5), task)
            .await
            .expect("serve returns after shutdown")
            .unwrap();
    }
}

#[tokio::test]
async fn every_api_path_needs_the_token() {
    let a = Admin::start("", json!({})).await;
    for (method, path) in [
        (reqwest::Method::GET, "/api/sessions"),
        (reqwest::Method::GET, "/api/config"),
        (reqwest::Method::GET, "/api/stats"),
        (reqwest::Method::DELETE, "/api/sessions/0123456789"),
        (reqwest::Method::GET, "/api/nothing-here"),
    ] {
        let (status, headers, _) = a.req(method.clone(), path, None).await;
        assert_eq!(status, 401, "{method} {path} without a token");
        let challenge = headers["www-authenticate"].to_str().unwrap();
        assert!(challenge.starts_with("Bearer"), "{challenge}");
        for wrong in ["0123456789abcdef0124", "0123456789abcdef012", "x"] {
            let (status, headers, _) = a.req(method.clone(), path, Some(wrong)).await;
            assert_eq!(status, 401, "{method} {path} with a wrong token");
            let challenge = headers["www-authenticate"].to_str().unwrap();
            assert!(challenge.contains("invalid_token"), "{challenge}");
        }
    }
    // A wrong scheme is no token at all.
    let resp = a
        .http
        .get(format!("{}/api/sessions", a.base))
        .header("authorization", format!("Basic {TOKEN}"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 401);
    // The page and the health check carry no data and need no token.
    let (status, headers, _) = a.req(reqwest::Method::GET, "/", None).await;
    assert_eq!(status, 200);
    assert!(
        headers["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/html")
    );
    let csp = headers["content-security-policy"].to_str().unwrap();
    assert!(csp.contains("default-src 'none'") && csp.contains("connect-src 'self'"));
    let (status, _, _) = a.req(reqwest::Method::GET, "/healthz", None).await;
    assert_eq!(status, 200);
    let (status, _, _) = a
        .req(reqwest::Method::GET, "/api/sessions", Some(TOKEN))
        .await;
    assert_eq!(status, 200);
    let (status, _, _) = a
        .req(reqwest::Method::GET, "/api/nothing-here", Some(TOKEN))
        .await;
    assert_eq!(status, 404);
    let (status, headers, _) = a
        .req(reqwest::Method::POST, "/api/sessions", Some(TOKEN))
        .await;
    assert_eq!(status, 405);
    assert_eq!(headers["allow"], "GET");
    a.stop().await;
}

#[tokio::test]
async fn the_dashboard_is_self_contained() {
    let a = Admin::start("", json!({})).await;
    let (_, _, body) = a.req(reqwest::Method::GET, "/", None).await;
    // Nothing is loaded from elsewhere: no external scripts, styles, fonts or images.
    for needle in [
        "<script src",
        "<link",
        "@import",
        "url(",
        "https://",
        "src=\"http",
    ] {
        assert!(
            !body.contains(needle),
            "the dashboard must not contain {needle:?}"
        );
    }
    for hook in [
        "id=\"sessions\"",
        "dataset.session",
        "dataset.end",
        "id=\"chart-sessions\"",
        "id=\"chart-churn\"",
        "id=\"chart-inflight\"",
        "params.get(\"token\")",
    ] {
        assert!(body.contains(hook), "missing {hook}");
    }
    a.stop().await;
}

#[tokio::test]
async fn lists_sessions_by_prefix_only() {
    let a = Admin::start("", json!({})).await;
    let s1 = a.open("alpha", Some("alice")).await;
    tokio::time::sleep(Duration::from_millis(5)).await;
    let s2 = a.open("beta", None).await;
    let list = a.get_json("/api/sessions").await;
    let list = list.as_array().unwrap();
    assert_eq!(list.len(), 2);
    // Oldest first.
    assert_eq!(list[0]["id_prefix"], &s1.id()[..8]);
    assert_eq!(list[1]["id_prefix"], &s2.id()[..8]);
    assert_eq!(list[0]["server"], "alpha");
    assert_eq!(list[0]["principal"], "alice");
    assert_eq!(list[1]["principal"], Value::Null);
    assert_eq!(list[0]["front"], "streamable-http");
    assert_eq!(list[0]["upstream"], s1.upstream_kind());
    assert_eq!(list[0]["child_pid"], Value::Null);
    for s in list {
        for key in [
            "age_ms",
            "idle_ms",
            "inflight",
            "messages_in",
            "messages_out",
        ] {
            assert!(s[key].is_u64(), "{key} in {s}");
        }
    }
    // The full ids appear nowhere.
    let (_, _, raw) = a
        .req(reqwest::Method::GET, "/api/sessions", Some(TOKEN))
        .await;
    assert!(!raw.contains(s1.id()) && !raw.contains(s2.id()));
    assert!(!raw.contains(&s1.id()[..9]) && !raw.contains(&s2.id()[..9]));
    a.stop().await;
}

#[tokio::test]
async fn ends_a_session_by_prefix() {
    let a = Admin::start("", json!({})).await;
    let s1 = a.open("alpha", None).await;
    let s2 = a.open("alpha", None).await;
    // Too short, not an id, unknown.
    assert_eq!(a.delete(&s1.id()[..7]).await.0, 400);
    assert_eq!(a.delete("zzzzzzzz!").await.0, 400);
    let unknown = if s1.id().starts_with("ffffffff") || s2.id().starts_with("ffffffff") {
        "eeeeeeee"
    } else {
        "ffffffff"
    };
    let (status, body) = a.delete(unknown).await;
    assert_eq!(status, 404, "{body}");
    assert_eq!(a.table.len(), 2);
    // The one session with that prefix ends through the teardown path, awaited.
    let (status, body) = a.delete(&s1.id()[..8]).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["id_prefix"], &s1.id()[..8]);
    assert_eq!(body["server"], "alpha");
    assert!(s1.is_closing());
    assert_eq!(s1.close_reason(), Some(CloseReason::Admin));
    assert!(a.table.get(s1.id()).is_none());
    assert!(a.table.get(s2.id()).is_some());
    let list = a.get_json("/api/sessions").await;
    assert_eq!(list.as_array().unwrap().len(), 1);
    assert_eq!(list[0]["id_prefix"], &s2.id()[..8]);
    // Again: it is gone. A longer prefix (the full id) works too.
    assert_eq!(a.delete(&s1.id()[..8]).await.0, 404);
    assert_eq!(a.delete(s2.id()).await.0, 200);
    assert!(a.table.is_empty());
    a.stop().await;
}

#[tokio::test]
async fn an_ambiguous_prefix_ends_nothing() {
    // With a replica id every id shares its first characters.
    let a = Admin::start(
        "replica-one-",
        json!({"listen": {"replica_id": "replica-one"}}),
    )
    .await;
    let s1 = a.open("alpha", None).await;
    let s2 = a.open("alpha", None).await;
    let (status, body) = a.delete("replica-").await;
    assert_eq!(status, 409, "{body}");
    assert_eq!(body["matches"], 2);
    assert_eq!(a.table.len(), 2);
    assert!(!s1.is_closing() && !s2.is_closing());
    // The API shows the replica prefix and 8 characters after it, which tell them apart.
    let list = a.get_json("/api/sessions").await;
    let shown: Vec<&str> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["id_prefix"].as_str().unwrap())
        .collect();
    assert!(
        shown.contains(&&s1.id()[..20]) && shown.contains(&&s2.id()[..20]),
        "{shown:?}"
    );
    let (status, _) = a.delete(&s1.id()[..20]).await;
    assert_eq!(status, 200);
    assert!(s1.is_closing() && !s2.is_closing());
    a.stop().await;
}

#[tokio::test]
async fn config_is_passed_through_as_given() {
    let config = json!({
        "listen": {"addr": "127.0.0.1:8080", "replica_id": ""},
        "server": [{"name": "up", "transport": "streamable-http", "url": "http://127.0.0.1:3001/mcp",
                    "headers": {"Authorization": "<redacted>"}}],
        "admin": {"addr": "127.0.0.1:8081", "token": "<redacted>", "token_env": null},
    });
    let a = Admin::start("", config.clone()).await;
    assert_eq!(a.get_json("/api/config").await, config);
    let (_, _, raw) = a
        .req(reqwest::Method::GET, "/api/config", Some(TOKEN))
        .await;
    assert!(!raw.contains(TOKEN));
    // Configured servers are listed in the stats even with no session.
    let stats = a.get_json("/api/stats").await;
    assert_eq!(stats["servers"], json!(["up"]));
    a.stop().await;
}

#[tokio::test]
async fn stats_follow_the_table() {
    let a = Admin::start("", json!({"server": [{"name": "alpha"}, {"name": "beta"}]})).await;
    let s1 = a.open("alpha", None).await;
    let _s2 = a.open("alpha", None).await;
    let _s3 = a.open("beta", None).await;
    // Wait until a sample shows all three.
    let mut seen = Value::Null;
    for _ in 0..50 {
        let stats = a.get_json("/api/stats").await;
        if let Some(last) = stats["samples"].as_array().and_then(|s| s.last())
            && last["active"]["alpha"] == 2
            && last["active"]["beta"] == 1
        {
            seen = stats;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(seen["interval_ms"], 1000);
    assert_eq!(seen["window"], 300);
    assert_eq!(seen["servers"], json!(["alpha", "beta"]));
    let before = seen["samples"].as_array().unwrap().len();
    s1.close(CloseReason::Admin).await;
    let mut closed = 0;
    for _ in 0..50 {
        let stats = a.get_json("/api/stats").await;
        let samples = stats["samples"].as_array().unwrap();
        closed = samples
            .iter()
            .map(|s| s["closed"].as_u64().unwrap())
            .sum::<u64>();
        let opened: u64 = samples.iter().map(|s| s["opened"].as_u64().unwrap()).sum();
        if closed == 1 {
            assert!(samples.len() > before);
            assert_eq!(samples.last().unwrap()["active"]["alpha"], 1);
            assert!(opened <= 3);
            assert_eq!(
                samples
                    .iter()
                    .map(|s| s["closed_upstream"].as_u64().unwrap())
                    .sum::<u64>(),
                0
            );
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(closed, 1);
    a.stop().await;
}

#[tokio::test]
async fn shutdown_stops_the_listener() {
    let a = Admin::start("", json!({})).await;
    let base = a.base.clone();
    // An idle keep-alive connection must not hold shutdown up.
    let http = a.http.clone();
    assert_eq!(
        http.get(format!("{base}/healthz"))
            .send()
            .await
            .unwrap()
            .status(),
        200
    );
    a.stop().await;
    assert!(reqwest::get(format!("{base}/healthz")).await.is_err());
}

#[tokio::test]
async fn servers_show_their_protocol_era() {
    let a = Admin::start(
        "",
        json!({"server": [
            {"name": "modern", "transport": "stdio", "protocol": "2026-07-28"},
            {"name": "old", "transport": "stdio", "protocol": "2025-11-25"},
            {"name": "probed", "transport": "streamable-http"},
            {"name": "unasked", "transport": "streamable-http"},
        ]}),
    )
    .await;
    a.table.learned("probed", mcpgate_session::Era::Modern);
    let list = a.get_json("/api/servers").await;
    let era = |name: &str| {
        list.as_array()
            .unwrap()
            .iter()
            .find(|s| s["name"] == name)
            .map(|s| s["era"].clone())
    };
    assert_eq!(era("modern"), Some(json!("2026")));
    assert_eq!(era("old"), Some(json!("2025")));
    assert_eq!(era("probed"), Some(json!("2026")));
    assert_eq!(era("unasked"), Some(json!("unknown")));
    assert_eq!(list[0]["pooled"], json!([]));
    a.stop().await;
}
