//! Both protocol eras on a virtual server: a 2026-07-28 client reaches it through the era
//! bridge, a session-era client reaches a 2026-07-28-only member through the bridge's
//! upstream, and the member gets its own tool name in `Mcp-Name`.

use mcpgate_testkit::{HttpOptions, HttpServer};
use mcpgate_tests::bridge::Modern;
use mcpgate_tests::virtuals::stdio_kit;
use mcpgate_tests::{Client, Gateway};
use serde_json::json;

/// The headers of the member's most recent POST of `method` (a background request, such
/// as the bridge's `subscriptions/listen`, may have come after it).
fn headers_of(kit: &HttpServer, method: &str) -> Vec<(String, String)> {
    kit.stats()
        .method_headers
        .get(method)
        .cloned()
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn both_eras_reach_members_by_their_own_names() {
    let kit = HttpServer::start("127.0.0.1:0".parse().unwrap(), HttpOptions::default())
        .await
        .unwrap();
    let gw = Gateway::start(&format!(
        "[[server]]\nname = \"kit\"\ntransport = \"streamable-http\"\nurl = {:?}\nprotocol = \"2026-07-28\"\n{}[[virtual]]\nname = \"v\"\ndefault = true\n[[virtual.member]]\nserver = \"kit\"\nprefix = \"a\"\n[[virtual.member]]\nserver = \"kitstdio\"\nprefix = \"b\"\n",
        kit.url(),
        stdio_kit("kitstdio"),
    ));

    // A session-era client; member `a` speaks only 2026-07-28.
    let s = Client::new(&gw.url()).initialize().await;
    assert_eq!(
        s.call("a__echo", json!({"text": "old"})).await.text(),
        "old"
    );
    assert_eq!(
        s.call("b__echo", json!({"text": "old"})).await.text(),
        "old"
    );
    // The call's own headers: the bridge's background `subscriptions/listen` may reach
    // the member after it.
    let stats = kit.stats();
    let headers = headers_of(&kit, "tools/call");
    let h = |n: &str| headers.iter().find(|(k, _)| k == n).map(|(_, v)| v.clone());
    assert_eq!(
        h("mcp-method").as_deref(),
        Some("tools/call"),
        "{:?}",
        stats.method_headers
    );
    assert_eq!(
        h("mcp-name").as_deref(),
        Some("echo"),
        "the member's own name: {headers:?}"
    );
    assert_eq!(s.delete().await, 200);

    // A 2026-07-28 client: no session of its own; the bridge holds one of the virtual server.
    let m = Modern::new(&gw.url(), None);
    let r = m.call(1, "a__echo", json!({"text": "new"})).await;
    assert_eq!(r.text(), "new", "{r:?}");
    let r = m.call(2, "b__echo", json!({"text": "new"})).await;
    assert_eq!(r.text(), "new", "{r:?}");
    let listed = m.request(3, "tools/list", json!({})).await;
    let names: Vec<&str> = listed.last()["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(
        names.contains(&"a__echo") && names.contains(&"b__echo"),
        "{names:?}"
    );
    let headers = headers_of(&kit, "tools/list");
    let h = |n: &str| headers.iter().find(|(k, _)| k == n).map(|(_, v)| v.clone());
    assert_eq!(
        h("mcp-method").as_deref(),
        Some("tools/list"),
        "{headers:?}"
    );
    assert_eq!(h("mcp-name"), None, "a list names no tool: {headers:?}");
}
