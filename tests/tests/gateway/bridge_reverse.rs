//! The era bridge the other way round: session-era clients of a server that speaks only
//! MCP 2026-07-28 (the TypeScript SDK 2.4 server with the session era switched off). They
//! fail directly; through mcpgate, which answers `initialize` from `server/discover` and
//! holds the session, the official clients in session mode get the full flow —
//! progress, a resource, a prompt, an `input_required` tool turned into an elicitation
//! request the client answers; the TypeScript SDK 1.32 client also its subscription's
//! update on its GET stream and DELETE — and a raw session shows the same on the wire.

use std::time::Duration;

use mcpgate_tests::modern::{self, Mode, Sdk, Target};
use mcpgate_tests::{Client, Gateway, wait_until};
use serde_json::json;

#[tokio::test]
async fn session_era_clients_reach_a_modern_only_server() {
    let up = modern::start_http(Sdk::Ts, &["--modern-only"]).await;
    let gw = Gateway::http(&up.url, "");
    for sdk in [Sdk::Ts, Sdk::Py] {
        let extra = ["--elicit", "42", "--sample"];
        let d = modern::client(sdk, Mode::Legacy, &Target::Url(up.url.clone()), &extra).await;
        assert_eq!(d["ok"], false, "directly a session-era client cannot: {d}");
        let g = modern::client(sdk, Mode::Legacy, &Target::Url(gw.url()), &extra).await;
        let cell = format!("{sdk:?} in session mode through mcpgate: {g}");
        assert_eq!(g["ok"], true, "{cell}");
        assert_eq!(g["protocolVersion"], "2025-11-25", "{cell}");
        assert_eq!(g["notify"]["progress"], 5, "{cell}");
        assert_eq!(g["notify"]["duplicates"], 0, "{cell}");
        assert_eq!(
            g["elicit"], "42",
            "an input_required tool, answered by elicitation: {cell}"
        );
        assert_eq!(
            g["sample"], "sampled: say hi",
            "and one answered by sampling: {cell}"
        );
    }
    // The TypeScript SDK 1.32 client: the full session flow, a subscription's update on
    // its GET stream, DELETE.
    let d = mcpgate_tests::clients::run_bridge_client(&up.url).await;
    assert_eq!(d["ok"], false, "directly the SDK 1.32 client cannot: {d}");
    let g = mcpgate_tests::clients::run_bridge_client(&gw.url()).await;
    assert_eq!(g["ok"], true, "SDK 1.32 through mcpgate: {g}");
    assert!(
        gw.log()
            .contains("bridging the session-era client to 2026-07-28")
    );
}

#[tokio::test]
async fn a_bridged_sessions_subscription_arrives_on_its_get_stream() {
    let up = modern::start_http(Sdk::Ts, &["--modern-only"]).await;
    let gw = Gateway::http(&up.url, "");
    let c = Client::new(&gw.url());
    let s = c.initialize().await;
    let mut get = s.open_stream().await;
    assert_eq!(get.recv().await.unwrap()["status"], 200);
    let sub = s
        .request("resources/subscribe", json!({"uri": "test://counter"}))
        .await;
    assert!(sub.last()["result"].is_object(), "{sub:?}");
    // Session state answered by the gateway: a level that is none is refused (it would go
    // on every later request), a ping answered.
    let bad = s
        .request("logging/setLevel", json!({"level": "verbose"}))
        .await;
    assert_eq!(bad.error_code(), Some(-32602), "{bad:?}");
    let ping = s.request("ping", json!({})).await;
    assert_eq!(
        ping.last()["result"],
        json!({}),
        "answered by the gateway: {ping:?}"
    );
    let level = s
        .request("logging/setLevel", json!({"level": "debug"}))
        .await;
    assert!(level.last()["result"].is_object(), "{level:?}");
    // The listen stream upstream is (re)opened with the subscription: touch until the
    // update arrives (the first touch may precede the new stream's acknowledgement).
    let mut got = None;
    for _ in 0..20 {
        let t = s.call("touch", json!({"uri": "test://counter"})).await;
        assert_eq!(t.text(), "touched test://counter");
        if let Ok(Some(m)) = tokio::time::timeout(Duration::from_millis(250), get.recv()).await {
            got = Some(m);
            break;
        }
    }
    let m = got.expect("the resource update on the GET stream");
    assert_eq!(m["method"], "notifications/resources/updated", "{m}");
    assert_eq!(m["params"]["uri"], "test://counter");
    // A tool whose argument the server wants mirrored in Mcp-Param-Region (the server
    // refuses the call without it); a non-ASCII value travels base64-wrapped.
    let r = s.call("region", json!({"region": "ü-1"})).await;
    assert_eq!(r.text(), "region ü-1", "{r:?}");
    // Logs come once asked for with logging/setLevel.
    let n = s.call("notify", json!({"tag": "t", "count": 3})).await;
    let logs = n
        .messages
        .iter()
        .filter(|m| m["method"] == "notifications/message")
        .count();
    assert_eq!(logs, 3, "{n:?}");
    assert!(matches!(s.delete().await, 200 | 204));
    assert!(
        wait_until(Duration::from_secs(5), || async {
            gw.metric("mcpgate_sessions_active").await == 0.0
        })
        .await
    );
}
