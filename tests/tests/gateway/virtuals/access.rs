//! Filters and access rules: two principals see different catalogues of one virtual
//! server; a hidden entry is refused exactly like an unknown one, a forbidden one with
//! its own code, counted and logged — and neither reaches the member.

use mcpgate_testkit::{HttpOptions, HttpServer};
use mcpgate_tests::Gateway;
use mcpgate_tests::virtuals::{client_as, http_kit, names, stdio_kit};
use serde_json::json;

const ALICE: &str = "alice-token-0123456789";
const BOB: &str = "bob-token-0123456789ab";

fn config(kit_url: &str) -> String {
    format!(
        r#"[auth]
[[auth.tokens]]
name = "alice"
token = "{ALICE}"
groups = ["ops"]
[[auth.tokens]]
name = "bob"
token = "{BOB}"
{}{}
[[virtual]]
name = "guarded"
default = true
[[virtual.member]]
server = "kit"
prefix = "a"
tools = {{ deny = ["die", "garbage", "flood"] }}
[[virtual.member]]
server = "kitstdio"
prefix = "b"
tools = {{ allow = ["echo", "add", "stats"] }}
prompts = {{ deny = ["*"] }}
[[virtual.rule]]
effect = "allow"
groups = ["ops"]
tools = ["*__stats"]
[[virtual.rule]]
effect = "deny"
tools = ["*__stats"]
[[virtual.rule]]
effect = "deny"
principals = ["token:bob"]
tools = ["*__add"]
resources = ["a+*"]
"#,
        http_kit("kit", kit_url),
        stdio_kit("kitstdio"),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn principals_see_and_call_only_what_the_rules_give_them() {
    let kit = HttpServer::start("127.0.0.1:0".parse().unwrap(), HttpOptions::default())
        .await
        .unwrap();
    let gw = Gateway::start(&config(&kit.url()));
    let alice = client_as(&gw.url(), ALICE).initialize().await;
    let bob = client_as(&gw.url(), BOB).initialize().await;

    let alice_tools = names(&alice.request("tools/list", json!({})).await, "tools");
    let bob_tools = names(&bob.request("tools/list", json!({})).await, "tools");
    for t in [
        "a__stats", "b__stats", "a__add", "b__add", "a__echo", "b__echo",
    ] {
        assert!(
            alice_tools.contains(&t.to_owned()),
            "alice lacks {t}: {alice_tools:?}"
        );
    }
    for t in ["a__echo", "b__echo", "a__notify"] {
        assert!(
            bob_tools.contains(&t.to_owned()),
            "bob lacks {t}: {bob_tools:?}"
        );
    }
    for t in ["a__stats", "b__stats", "a__add", "b__add"] {
        assert!(
            !bob_tools.contains(&t.to_owned()),
            "bob sees {t}: {bob_tools:?}"
        );
    }
    for hidden in ["a__die", "a__garbage", "a__flood", "b__notify", "b__die"] {
        assert!(
            !alice_tools.contains(&hidden.to_owned()),
            "{hidden} is filtered out"
        );
        assert!(
            !bob_tools.contains(&hidden.to_owned()),
            "{hidden} is filtered out"
        );
    }

    // Allowed calls work for alice; bob's forbidden call is refused before the member.
    assert_eq!(
        alice.call("a__add", json!({"a": 1, "b": 2})).await.text(),
        "3"
    );
    let before = kit.stats().requests;
    let refused = bob.call("a__add", json!({"a": 1, "b": 2})).await;
    assert_eq!(refused.error_code(), Some(-32006), "{refused:?}");
    assert!(
        refused.last()["error"]["message"]
            .as_str()
            .unwrap()
            .contains("a__add"),
        "{refused:?}"
    );
    // A hidden tool is refused exactly like one that does not exist.
    let hidden = bob.call("a__die", json!({})).await;
    let unknown = bob.call("a__nope", json!({})).await;
    assert_eq!(hidden.error_code(), Some(-32602), "{hidden:?}");
    assert_eq!(unknown.error_code(), Some(-32602), "{unknown:?}");
    assert_eq!(
        hidden.last()["error"]["message"]
            .as_str()
            .unwrap()
            .replace("a__die", "X"),
        unknown.last()["error"]["message"]
            .as_str()
            .unwrap()
            .replace("a__nope", "X"),
    );
    assert_eq!(
        kit.stats().requests,
        before,
        "no refused call reached the member"
    );
    let stats = alice.call("a__stats", json!({})).await;
    assert!(stats.text().contains("sessions_created"), "{stats:?}");

    // Resources: bob neither lists nor reads a's.
    let listed = |r: &mcpgate_tests::Reply| -> Vec<String> {
        r.last()["result"]["resources"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x["uri"].as_str().unwrap().to_owned())
            .collect()
    };
    let alice_res = listed(&alice.request("resources/list", json!({})).await);
    let bob_res = listed(&bob.request("resources/list", json!({})).await);
    assert!(
        alice_res.contains(&"a+test://static".to_owned()),
        "{alice_res:?}"
    );
    assert!(
        bob_res.contains(&"b+test://static".to_owned()),
        "{bob_res:?}"
    );
    assert!(
        !bob_res.contains(&"a+test://static".to_owned()),
        "{bob_res:?}"
    );
    let read = bob
        .request("resources/read", json!({"uri": "a+test://static"}))
        .await;
    assert_eq!(read.error_code(), Some(-32006), "{read:?}");
    let read = alice
        .request("resources/read", json!({"uri": "a+test://static"}))
        .await;
    assert_eq!(
        read.last()["result"]["contents"][0]["uri"],
        "a+test://static",
        "{read:?}"
    );

    // Prompts: b's are filtered out for everyone.
    let prompts = names(&alice.request("prompts/list", json!({})).await, "prompts");
    assert_eq!(prompts, ["a__greet"]);
    let got = alice
        .request(
            "prompts/get",
            json!({"name": "b__greet", "arguments": {"name": "x"}}),
        )
        .await;
    assert_eq!(got.error_code(), Some(-32602), "{got:?}");

    assert_eq!(
        gw.metric(r#"mcpgate_virtual_denied_total{server="guarded",kind="tool"}"#)
            .await,
        1.0
    );
    assert_eq!(
        gw.metric(r#"mcpgate_virtual_denied_total{server="guarded",kind="resource"}"#)
            .await,
        1.0
    );
    let log = gw.log();
    assert!(
        log.lines()
            .any(|l| l.contains("refused by the access rules")
                && l.contains("token:bob")
                && l.contains("a__add")),
        "the refusal is logged with the principal: {log}"
    );
    assert_eq!(alice.delete().await, 200);
    assert_eq!(bob.delete().await, 200);
}

/// JWT principals: rules by `jwt:{sub}` and by the token's `groups` / `roles` claims.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jwt_groups_and_roles_claims_decide_the_rules() {
    use mcpgate_tests::Pki;
    use mcpgate_tests::jwt::{jwks_server, mint, now};
    let kit = HttpServer::start("127.0.0.1:0".parse().unwrap(), HttpOptions::default())
        .await
        .unwrap();
    let pki = Pki::new();
    let (jwks, _server) = jwks_server(&pki).await;
    let (iss, aud) = ("https://issuer.test", "https://mcpgate.test/mcp");
    let gw = Gateway::start(&format!(
        r#"[auth.jwt]
issuer = "{iss}"
audience = "{aud}"
jwks_url = "{jwks}"
ca_file = {:?}
{}
[[virtual]]
name = "guarded"
default = true
[[virtual.member]]
server = "kit"
prefix = "a"
[[virtual.rule]]
effect = "deny"
groups = ["interns"]
tools = ["a__add"]
[[virtual.rule]]
effect = "allow"
groups = ["staff"]
tools = ["a__stats"]
[[virtual.rule]]
effect = "deny"
principals = ["jwt:*"]
tools = ["a__stats"]
"#,
        pki.ca,
        http_kit("kit", &kit.url()),
    ));
    let token = |sub: &str, extra: serde_json::Value| {
        let mut c = json!({"iss": iss, "aud": aud, "sub": sub, "exp": now() + 300});
        c.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        mint(c)
    };
    let intern = client_as(&gw.url(), &token("u1", json!({"groups": ["interns"]})))
        .initialize()
        .await;
    let staff = client_as(&gw.url(), &token("u2", json!({"roles": "staff admins"})))
        .initialize()
        .await;
    let intern_tools = names(&intern.request("tools/list", json!({})).await, "tools");
    let staff_tools = names(&staff.request("tools/list", json!({})).await, "tools");
    assert!(
        !intern_tools.contains(&"a__add".to_owned()),
        "{intern_tools:?}"
    );
    assert!(
        !intern_tools.contains(&"a__stats".to_owned()),
        "{intern_tools:?}"
    );
    assert!(
        staff_tools.contains(&"a__add".to_owned()),
        "{staff_tools:?}"
    );
    assert!(
        staff_tools.contains(&"a__stats".to_owned()),
        "{staff_tools:?}"
    );
    assert_eq!(
        intern
            .call("a__add", json!({"a": 1, "b": 1}))
            .await
            .error_code(),
        Some(-32006)
    );
    assert_eq!(
        staff.call("a__add", json!({"a": 1, "b": 1})).await.text(),
        "2"
    );
    assert!(
        staff
            .call("a__stats", json!({}))
            .await
            .text()
            .contains("sessions_created")
    );
    assert!(
        gw.log().contains("jwt:u1"),
        "the refusal names the JWT principal"
    );
}
