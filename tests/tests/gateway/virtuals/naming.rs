//! `prefix = "on_collision"`: only names two members show get their prefix; a call by a
//! bare name before any listing still finds its member.

use mcpgate_testkit::{HttpOptions, HttpServer};
use mcpgate_tests::virtuals::{assert_two_testkits, http_kit, names, stdio_kit};
use mcpgate_tests::{Client, Gateway};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn names_are_prefixed_only_where_members_collide() {
    let kit = HttpServer::start("127.0.0.1:0".parse().unwrap(), HttpOptions::default())
        .await
        .unwrap();
    let gw = Gateway::start(&format!(
        "{}{}[[virtual]]\nname = \"v\"\ndefault = true\nprefix = \"on_collision\"\n[[virtual.member]]\nserver = \"kit\"\nprefix = \"a\"\ntools = {{ deny = [\"count\"] }}\n[[virtual.member]]\nserver = \"kitstdio\"\nprefix = \"b\"\ntools = {{ allow = [\"echo\", \"count\"] }}\n",
        http_kit("kit", &kit.url()),
        stdio_kit("kitstdio"),
    ));
    // No listing first: the bare name is resolved by listing every member once.
    let s = Client::new(&gw.url()).initialize().await;
    assert_eq!(
        s.call("count", json!({})).await.text(),
        "1",
        "count is b's alone"
    );
    let tools = names(&s.request("tools/list", json!({})).await, "tools");
    assert!(
        tools.contains(&"a__echo".to_owned()) && tools.contains(&"b__echo".to_owned()),
        "{tools:?}"
    );
    assert!(
        tools.contains(&"count".to_owned()) && tools.contains(&"whoami".to_owned()),
        "{tools:?}"
    );
    assert!(
        !tools.contains(&"echo".to_owned()) && !tools.contains(&"a__count".to_owned()),
        "{tools:?}"
    );
    assert_eq!(s.call("count", json!({})).await.text(), "2");
    assert_eq!(s.call("b__echo", json!({"text": "b"})).await.text(), "b");
    assert_eq!(s.call("a__echo", json!({"text": "a"})).await.text(), "a");
    assert!(!s.call("whoami", json!({})).await.text().is_empty());
    assert_eq!(
        s.call("echo", json!({"text": "x"})).await.error_code(),
        Some(-32602)
    );
    assert_eq!(s.delete().await, 200);
}

/// A client's `notifications/cancelled` reaches the member that has the call, over HTTP
/// and over stdio, also when it comes before the call's answer has started.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancellation_reaches_the_member_that_has_the_call() {
    let kit = HttpServer::start("127.0.0.1:0".parse().unwrap(), HttpOptions::default())
        .await
        .unwrap();
    let gw = Gateway::start(&format!(
        "{}{}[[virtual]]\nname = \"v\"\ndefault = true\n[[virtual.member]]\nserver = \"kit\"\nprefix = \"a\"\n[[virtual.member]]\nserver = \"kitstdio\"\nprefix = \"b\"\n",
        http_kit("kit", &kit.url()),
        stdio_kit("kitstdio"),
    ));
    let s = std::sync::Arc::new(Client::new(&gw.url()).initialize().await);
    let listed = names(&s.request("tools/list", json!({})).await, "tools");
    assert_eq!(listed.len() % 2, 0);
    assert_two_testkits(&listed, "a", "b");
    for member in ["a", "b"] {
        let id = format!("hang-{member}");
        let call = {
            let (s, id) = (s.clone(), id.clone());
            tokio::spawn(async move {
                s.request_with_id(
                    json!(id),
                    "tools/call",
                    json!({"name": format!("{member}__hang"), "arguments": {}}),
                )
                .await
            })
        };
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        let n = s
            .notify(
                "notifications/cancelled",
                json!({"requestId": id, "reason": "test"}),
            )
            .await;
        assert_eq!(n.status, 202, "{n:?}");
        let counted = mcpgate_tests::wait_until(std::time::Duration::from_secs(5), || async {
            let stats = match member {
                "a" => kit.stats().cancelled,
                _ => {
                    let t = s.call("b__stats", json!({})).await.text();
                    serde_json::from_str::<serde_json::Value>(&t).unwrap()["cancelled"]
                        .as_u64()
                        .unwrap()
                }
            };
            stats == 1
        })
        .await;
        assert!(counted, "{member}: the member saw the cancellation");
        call.abort();
    }
}
