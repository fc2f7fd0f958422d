//! Upstream OAuth per user (authorization code with PKCE): each principal consents once
//! per server, through the real OpenID provider's login and consent pages driven by a
//! plain HTTP client; their tokens are kept in the vault (SQLite), used by every session
//! of theirs, refreshed without the client noticing, and survive a restart; a revoked
//! grant leads to consent again; bad callbacks store nothing.

use std::time::Duration;

use mcpgate_tests::admin::Admin;
use mcpgate_tests::oauth::{
    authorization_server, calls, consent, poke, protected_server, token_requests,
};
use mcpgate_tests::virtuals::client_as;
use mcpgate_tests::{Gateway, Launch};
use serde_json::{Value, json};

const ALICE: &str = "alice-token-0d1e-9a8b";
const BOB: &str = "bob-token-77c2-41fe";
const CAROL: &str = "carol-token-5b0a-c3d2";
const ADMIN: &str = "admin-token-91f3-aa07";
const KEY: &str = "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=";

fn config(mcp: &str, vault: &std::path::Path) -> String {
    format!(
        "[[server]]\nname = \"remote\"\ntransport = \"streamable-http\"\nurl = \"{mcp}\"\n\
         [server.oauth]\ngrant = \"authorization_code\"\nrefresh_before = \"1s\"\n\
         [vault]\npath = {vault:?}\n\
         [session]\nseal_keys = [{{ id = \"k1\", secret = \"{KEY}\" }}]\n\
         [admin]\naddr = \"127.0.0.1:0\"\ntoken = \"{ADMIN}\"\n\
         [auth]\ntokens = [{{ name = \"alice\", token = \"{ALICE}\" }}, {{ name = \"bob\", token = \"{BOB}\" }}, {{ name = \"carol\", token = \"{CAROL}\" }}]\n"
    )
}

fn launch(toml: &str) -> Gateway {
    Gateway::launch(
        toml,
        Launch {
            stdout_lines: 2,
            ..Launch::default()
        },
    )
}

fn init() -> Value {
    json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{
        "protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"0"}}})
}

/// The consent an initialize is refused with: -32042 and its URL-mode elicitation.
async fn needs_consent(gw: &Gateway, token: &str) -> Value {
    let r = client_as(&gw.url(), token).post(None, &init()).await;
    let e = &r.last()["error"];
    assert_eq!(e["code"], -32042, "{r:?}");
    let el = e["data"]["elicitations"][0].clone();
    assert_eq!(el["mode"], "url", "{el}");
    assert!(
        el["elicitationId"].as_str().is_some_and(|i| i.len() >= 16),
        "{el}"
    );
    el
}

async fn whoami(gw: &Gateway, token: &str) -> Value {
    let s = client_as(&gw.url(), token).initialize().await;
    let r = s.call("whoami", json!({})).await;
    serde_json::from_str(&r.text()).unwrap_or_else(|e| panic!("{e}: {r:?}"))
}

#[tokio::test]
async fn each_principal_consents_once_and_carries_only_their_own_token() {
    let authority = authorization_server(&json!({
        "clients": [], "access_token_ttl": 3,
        "resources": {"http://127.0.0.1:*/mcp": {"scope": "mcp:tools"}},
    }))
    .await;
    let issuer = authority.get("issuer");
    let up = protected_server(&issuer, "mcp:tools").await;
    let mcp = up.get("url");
    let dir = std::env::temp_dir().join(format!("mcpgate-vault-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let vault = dir.join("vault.db");
    let toml = config(&mcp, &vault);
    let mut gw = launch(&toml);
    let callback = format!("{}/oauth/callback", gw.base);

    // Alice is sent to consent; her consent comes back to the gateway's callback.
    let el = needs_consent(&gw, ALICE).await;
    let url = el["url"].as_str().unwrap();
    assert!(url.starts_with(&issuer), "{url}");
    for p in ["code_challenge_method=S256", "resource=", "state="] {
        assert!(url.contains(p), "{p} missing in {url}");
    }
    let done = consent(url, "alice", &callback, false, true).await;
    assert_eq!(done["status"], 200, "{done}");
    assert_eq!(whoami(&gw, ALICE).await["sub"], "alice");
    // Her consent's link is single use.
    let again = reqwest::get(done["callback"].as_str().unwrap())
        .await
        .unwrap();
    assert_eq!(again.status(), 400);

    // Bob has not consented: his own consent, and then his own token.
    let el = needs_consent(&gw, BOB).await;
    consent(el["url"].as_str().unwrap(), "bob", &callback, false, true).await;
    assert_eq!(whoami(&gw, BOB).await["sub"], "bob");
    assert_eq!(whoami(&gw, ALICE).await["sub"], "alice");

    // Carol refuses: nothing is stored, and she is asked again.
    let el = needs_consent(&gw, CAROL).await;
    let refused = consent(el["url"].as_str().unwrap(), "carol", &callback, true, true).await;
    assert_eq!(refused["status"], 403, "{refused}");
    needs_consent(&gw, CAROL).await;
    // A forged state is refused, nothing stored.
    let forged = reqwest::get(format!("{callback}?state=forged&code=x"))
        .await
        .unwrap();
    assert_eq!(forged.status(), 400);

    // The tokens live 3 s: after 4 s a call refreshes without the client noticing.
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert_eq!(whoami(&gw, ALICE).await["sub"], "alice");
    assert!(!token_requests(&issuer, "refresh_token").await.is_empty());

    // The admin API lists the grants (never a token) and revokes one.
    let admin = Admin::of(&gw, ADMIN);
    let (status, list) = admin.api(reqwest::Method::GET, "/api/grants").await;
    assert_eq!(status, 200, "{list}");
    let mut who: Vec<&str> = list["grants"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["principal"].as_str().unwrap())
        .collect();
    who.sort();
    assert_eq!(who, ["token:alice", "token:bob"]);
    assert!(
        !list.to_string().contains("eyJ"),
        "a token in the admin API: {list}"
    );

    // Revoked at the authorization server: once the access token expires, the refresh
    // is refused and alice is asked to consent again.
    poke(&issuer, "/test/revoke?account=alice").await;
    tokio::time::sleep(Duration::from_secs(4)).await;
    needs_consent(&gw, ALICE).await;

    // A restart keeps bob's consent.
    gw.stop();
    let gw = launch(&toml);
    assert_eq!(whoami(&gw, BOB).await["sub"], "bob");
    // Each call carried its own principal's token, never another's.
    let subs: Vec<String> = calls(&mcp)
        .await
        .iter()
        .map(|c| c["sub"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(subs, ["alice", "bob", "alice", "alice", "bob"]);
    let log = gw.log();
    assert!(!log.contains("eyJ"), "a token in the log");
    let _ = std::fs::remove_dir_all(dir);
}

/// A 2026-07-28 client (through the era bridge: the protected server speaks the session
/// era) is asked to consent with the revision's form: an `input_required` answer whose
/// input request is a URL-mode `elicitation/create`; once consented, its retry completes.
#[tokio::test]
async fn a_2026_client_consents_through_input_required() {
    let authority = authorization_server(&json!({
        "clients": [], "access_token_ttl": 60,
        "resources": {"http://127.0.0.1:*/mcp": {"scope": "mcp:tools"}},
    }))
    .await;
    let up = protected_server(&authority.get("issuer"), "mcp:tools").await;
    let dir = std::env::temp_dir().join(format!("mcpgate-vault26-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let gw = launch(&config(&up.get("url"), &dir.join("vault.db")));
    let modern = mcpgate_tests::bridge::Modern::new(&gw.url(), Some(ALICE));
    let r = modern.call(1, "whoami", json!({})).await;
    let (key, state) = mcpgate_tests::bridge::input_required(&r);
    let ask = &r.last()["result"]["inputRequests"][&key];
    assert_eq!(ask["method"], "elicitation/create", "{r:?}");
    assert_eq!(ask["params"]["mode"], "url", "{r:?}");
    let url = ask["params"]["url"].as_str().unwrap();
    let done = consent(
        url,
        "alice",
        &format!("{}/oauth/callback", gw.base),
        false,
        true,
    )
    .await;
    assert_eq!(done["status"], 200, "{done}");
    let retry = modern
        .request(
            2,
            "tools/call",
            json!({"name": "whoami", "arguments": {},
                   "inputResponses": {key: {"action": "accept"}}, "requestState": state}),
        )
        .await;
    let who: Value =
        serde_json::from_str(&retry.text()).unwrap_or_else(|e| panic!("{e}: {retry:?}"));
    assert_eq!(who["sub"], "alice");
    let _ = std::fs::remove_dir_all(dir);
}
