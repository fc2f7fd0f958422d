//! The 2.x UI's MCP relay: each connection an ordinary session with its own upstream
//! session (a child per stdio connection), messages both ways on the relay, and every way
//! a connection ends — disconnect, the event stream dropping, the upstream dying — ends
//! its session and child. A command not in the catalogue starts nothing.

use std::time::Duration;

use mcpgate_testkit::{HttpOptions, HttpServer};
use mcpgate_tests::inspector::{testkit, testkit_toml};
use mcpgate_tests::inspector2::Inspector2;
use mcpgate_tests::{children_of, wait_until};
use reqwest::Method;
use serde_json::{Value, json};

fn stdio_config() -> Value {
    json!({"type":"stdio","command":testkit(),"args":["stdio"],"env":{}})
}

async fn empty(insp: &Inspector2) -> bool {
    wait_until(Duration::from_secs(10), || async {
        insp.metric("mcpgate_sessions_active").await == 0.0 && children_of(insp.gw.pid()).is_empty()
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stdio_server_from_the_catalogue_through_the_relay() {
    let insp = Inspector2::start(&testkit_toml(""), &[]);
    let mut a = insp.open(stdio_config()).await;
    let tools = a.request(1, "tools/list", json!({})).await;
    let names: Vec<&str> = tools["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert!(names.contains(&"echo"), "{names:?}");
    let r = a
        .request(
            2,
            "tools/call",
            json!({"name":"echo","arguments":{"text":"through v2"}}),
        )
        .await;
    assert_eq!(r["result"]["content"][0]["text"], "through v2");
    // Notifications of a call reach the event stream before its answer.
    let mut seen = Vec::new();
    let r = a
        .request_seeing(
            3,
            "tools/call",
            json!({"name":"notify","arguments":{"tag":"t","count":3},
            "_meta":{"progressToken":"pt"}}),
            &mut seen,
        )
        .await;
    assert!(r["result"].is_object(), "{r}");
    let progress = seen
        .iter()
        .filter(|m| m["method"] == "notifications/progress" && m["params"]["progressToken"] == "pt")
        .count();
    let logs = seen
        .iter()
        .filter(|m| m["method"] == "notifications/message")
        .count();
    assert_eq!((progress, logs), (3, 3), "{seen:?}");
    // A server request (sampling) comes on the event stream; the UI's answer goes back
    // through send and completes the call.
    let call = json!({"sessionId": a.id, "message": {"jsonrpc":"2.0","id":4,"method":"tools/call",
        "params":{"name":"sample","arguments":{"prompt":"hi"}}}});
    let send = insp.api(Method::POST, "/api/mcp/send", Some(call));
    let events = &mut a.events;
    let answer = async {
        let (kind, q) = events.next().await.unwrap();
        assert_eq!(
            (kind.as_str(), q["method"].as_str()),
            ("message", Some("sampling/createMessage")),
            "{q}"
        );
        let reply = json!({"sessionId": a.id, "message": {"jsonrpc":"2.0","id":q["id"],"result":{
            "role":"assistant","model":"m","content":{"type":"text","text":"sampled by the UI"}}}});
        let sent = insp.api(Method::POST, "/api/mcp/send", Some(reply)).await;
        assert_eq!(sent, (200, json!({"ok": true})));
        let (_, done) = events.next().await.unwrap();
        done
    };
    let ((s, v), done) = tokio::join!(send, answer);
    // The call's send was answered once its response was on the event stream.
    assert_eq!((s, v), (200, json!({"ok": true})));
    assert_eq!(done["id"], 4);
    assert!(done.to_string().contains("sampled by the UI"), "{done}");
    // One event stream per connection.
    let again = insp
        .request(
            Method::GET,
            &format!("/api/mcp/events?sessionId={}", a.id),
            &[],
        )
        .send()
        .await
        .unwrap();
    assert_eq!(again.status(), 409);
    // Two connections: two sessions, two children.
    let b = insp.open(stdio_config()).await;
    assert_eq!(insp.metric("mcpgate_sessions_active").await, 2.0);
    assert_eq!(children_of(insp.gw.pid()).len(), 2);
    assert_eq!(a.disconnect().await, (200, json!({"ok": true})));
    assert!(
        wait_until(Duration::from_secs(10), || async {
            insp.metric("mcpgate_sessions_active").await == 1.0
        })
        .await
    );
    assert_eq!(children_of(insp.gw.pid()).len(), 1);
    // Closing the event stream is the UI going away.
    drop(b);
    assert!(empty(&insp).await, "a session or child is left");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http_server_from_the_catalogue_through_the_relay() {
    let up = HttpServer::start("127.0.0.1:0".parse().unwrap(), HttpOptions::default())
        .await
        .unwrap();
    let toml = format!(
        "[[url]]\nname = \"testkit-http\"\nprefix = \"http://{}/\"\ntransports = [\"streamable-http\"]\n",
        up.addr()
    );
    let insp = Inspector2::start(&toml, &[]);
    let (s, v) = insp.api(Method::GET, "/api/servers", None).await;
    assert_eq!(s, 200);
    let url = v["mcpServers"]["testkit-http"]["url"]
        .as_str()
        .unwrap()
        .to_owned();
    let mut c = insp
        .open(json!({"type":"streamable-http","url": up.url()}))
        .await;
    assert!(up.url().starts_with(&url));
    let r = c
        .request(
            1,
            "tools/call",
            json!({"name":"echo","arguments":{"text":"over http"}}),
        )
        .await;
    assert_eq!(r["result"]["content"][0]["text"], "over http");
    assert_eq!(up.stats().sessions_created, 1);
    // A URL outside the allowlist is refused before anything is opened.
    let (s, v) = insp
        .connect(json!({"type":"streamable-http","url":"http://127.0.0.1:9/mcp"}))
        .await;
    assert_eq!(s, 403, "{v}");
    assert_eq!(c.disconnect().await.0, 200);
    assert!(empty(&insp).await);
    assert!(
        wait_until(Duration::from_secs(10), || async {
            up.stats().sessions_deleted == 1
        })
        .await,
        "the upstream session was not deleted"
    );
}

/// A command line sent by hand that is not in the catalogue is refused and nothing runs:
/// the command would create a file.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_not_in_the_catalogue_runs_nothing() {
    let insp = Inspector2::start(&testkit_toml(""), &[]);
    let dir = std::env::temp_dir().join(format!("mcpgate-v2-canary-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let canary = dir.join("ran");
    let touch = format!("touch {}", canary.display());
    for config in [
        json!({"type":"stdio","command":"/bin/sh","args":["-c", touch]}),
        json!({"command":"/bin/sh","args":["-c", touch]}),
        // The allowed program with other arguments, or with an environment it may not set.
        json!({"type":"stdio","command":testkit(),"args":["stdio","--evil"]}),
        json!({"type":"stdio","command":testkit(),"args":["stdio"],"env":{"LD_PRELOAD":"/tmp/x.so"}}),
        json!({"type":"bogus","command":"/bin/sh"}),
    ] {
        let (s, v) = insp.connect(config.clone()).await;
        assert!(s == 403 || s == 400, "{config}: {s} {v}");
        assert!(v["error"].is_string(), "{v}");
    }
    let (s, _) = insp
        .api(Method::POST, "/api/mcp/connect", Some(json!({"nope":1})))
        .await;
    assert_eq!(s, 400);
    // A started command is logged as it is spawned, before the connect is answered.
    assert!(
        !insp.gw.log().contains("started stdio upstream"),
        "a refused command was started:\n{}",
        insp.gw.log()
    );
    assert!(!canary.exists(), "a refused command ran");
    assert!(children_of(insp.gw.pid()).is_empty());
    assert_eq!(insp.metric("mcpgate_sessions_active").await, 0.0);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A server that dies says why on the event stream (its exit and last stderr line), and
/// its session ends; unknown sessions are 404.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dying_server_is_a_transport_error_event() {
    let insp = Inspector2::start(&testkit_toml(""), &[]);
    let mut c = insp.open(stdio_config()).await;
    let _ = c
        .send(json!({"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"die","arguments":{}}}))
        .await;
    let mut got = None;
    while let Some((kind, data)) = c.events.next().await {
        if kind == "transport_error" {
            got = Some(data);
            break;
        }
    }
    let data = got.expect("no transport_error event");
    assert_eq!(data["code"], -32000);
    assert!(
        data["error"].as_str().is_some_and(|e| !e.is_empty()),
        "{data}"
    );
    assert!(empty(&insp).await);
    let (s, _) = c
        .send(json!({"jsonrpc":"2.0","id":10,"method":"ping"}))
        .await;
    assert_eq!(s, 404);
    let (s, _) = insp
        .api(Method::GET, "/api/mcp/events?sessionId=nope", None)
        .await;
    assert_eq!(s, 404);
}

/// SIGTERM with a UI connected (its event stream and the catalogue's stream open): the
/// drain ends both, the child with its session, and the process exits 0 well before the
/// drain deadline.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drain_ends_the_ui_connections() {
    let mut insp = Inspector2::start(&testkit_toml(""), &[]);
    let mut events = insp.open(stdio_config()).await.events;
    let catalogue = insp
        .request(Method::GET, "/api/servers/events", &[])
        .send()
        .await
        .unwrap();
    assert_eq!(catalogue.status(), 200);
    let child = children_of(insp.gw.pid());
    assert_eq!(child.len(), 1);
    // The log line a spawn writes (which `a_command_not_in_the_catalogue_runs_nothing` looks for, to see none).
    assert!(
        insp.gw.log().contains("started stdio upstream"),
        "{}",
        insp.gw.log()
    );
    let started = std::time::Instant::now();
    let code = tokio::task::block_in_place(|| insp.gw.stop());
    assert_eq!(code, Some(0), "{}", insp.gw.log());
    // Before the drain deadline (25 s): the UI's open streams did not hold the drain
    // until it ran out. (That bound is the behaviour; how fast a drain is, is not.)
    assert!(
        started.elapsed() < Duration::from_secs(25),
        "drain took {:?}",
        started.elapsed()
    );
    assert!(
        !insp.gw.log().contains("did not close in time"),
        "{}",
        insp.gw.log()
    );
    assert!(
        !std::path::Path::new(&format!("/proc/{}", child[0])).exists(),
        "the child outlived the drain"
    );
    // The UI was told: its event stream ended with the reason.
    let mut last = None;
    while let Some(e) = events.next().await {
        last = Some(e);
    }
    let (kind, data) = last.expect("no event");
    assert_eq!(kind, "transport_error");
    assert!(
        data["error"].as_str().unwrap().contains("shutdown"),
        "{data}"
    );
}

/// A connection whose UI never opened its event stream (the tab closed at once) ends by
/// idle expiry like any session: its child goes, and the relay forgets it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_abandoned_connection_ends_by_idle_expiry() {
    let insp = Inspector2::start(&format!("idle_timeout = \"1s\"\n{}", testkit_toml("")), &[]);
    let (s, v) = insp.connect(stdio_config()).await;
    assert_eq!(s, 200, "{v}");
    let id = v["sessionId"].as_str().unwrap().to_owned();
    assert_eq!(children_of(insp.gw.pid()).len(), 1);
    assert!(
        empty(&insp).await,
        "the abandoned connection was not reaped"
    );
    assert_eq!(
        insp.metric("mcpgate_sessions_closed_total{reason=\"idle\"}")
            .await,
        1.0
    );
    let (s, _) = insp
        .api(
            Method::POST,
            "/api/mcp/send",
            Some(json!({"sessionId": id, "message": {"jsonrpc":"2.0","id":1,"method":"ping"}})),
        )
        .await;
    assert_eq!(s, 404);
}
