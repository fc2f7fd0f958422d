//! Upstream OAuth with the gateway's own identity (client credentials) and with each
//! principal's token exchanged (RFC 8693): a real OpenID provider (`oidc-provider`) as the
//! authorization server, protected TypeScript SDK servers (Streamable HTTP and legacy
//! SSE) validating audience and scope, the real binary between.

use std::time::Duration;

use mcpgate_tests::jwt::{jwks_server, mint, now};
use mcpgate_tests::oauth::{authorization_server, calls, poke, protected_server, token_requests};
use mcpgate_tests::virtuals::client_as;
use mcpgate_tests::{Client, Gateway, Pki};
use serde_json::{Value, json};

const SECRET: &str = "gw-secret-4f9c";

/// An authorization server knowing the gateway as a confidential client of `grant`.
fn as_config(grant: &str, ttl: u64) -> Value {
    json!({
        "clients": [{"client_id": "gateway", "client_secret": SECRET,
                     "grant_types": [grant], "scope": "mcp:tools"}],
        "access_token_ttl": ttl,
        "resources": {
            "http://127.0.0.1:*/mcp": {"scope": "mcp:tools"},
            "http://127.0.0.1:*/sse": {"scope": "mcp:tools"},
        },
        "sts": {
            "subject_jwks_file": mcpgate_tests::clients::repo_root().join("tests/fixtures/jwks.json"),
            "subject_issuer": "https://idp.test",
        },
    })
}

fn server(name: &str, transport: &str, url: &str, oauth: &str) -> String {
    format!(
        "[[server]]\nname = \"{name}\"\ntransport = \"{transport}\"\nurl = \"{url}\"\n\
         [server.oauth]\nclient_id = \"gateway\"\nclient_secret = \"{SECRET}\"\n{oauth}\n"
    )
}

/// What the protected server said a `whoami` call's token was.
fn whoami(r: &mcpgate_tests::Reply) -> Value {
    serde_json::from_str(&r.text()).unwrap_or_else(|e| panic!("{e}: {r:?}"))
}

/// Eight sessions at once, one token request; a token renewed before it expires without
/// any client noticing; the legacy SSE transport with a token of its own audience; no
/// secret or token in the log.
#[tokio::test]
async fn client_credentials_end_to_end() {
    let authority = authorization_server(&as_config("client_credentials", 4)).await;
    let issuer = authority.get("issuer");
    let up = protected_server(&issuer, "mcp:tools").await;
    let (mcp, sse) = (up.get("url"), up.get("sse"));
    let grant = "grant = \"client_credentials\"\nrefresh_before = \"2s\"";
    let gw = Gateway::start(&format!(
        "{}{}",
        server("remote", "streamable-http", &mcp, grant),
        server("legacy", "sse", &sse, grant),
    ));
    let remote = Client::new(&format!("{}/servers/remote/mcp", gw.base));
    let mut all = Vec::new();
    for _ in 0..8 {
        let c = remote.clone();
        all.push(tokio::spawn(async move {
            let s = c.initialize().await;
            let r = s.call("whoami", json!({})).await;
            (s, whoami(&r))
        }));
    }
    let mut sessions = Vec::new();
    for h in all {
        let (s, who) = h.await.unwrap();
        assert_eq!(who["sub"], "gateway", "{who}");
        assert_eq!(who["aud"], mcp.as_str(), "{who}");
        sessions.push(s);
    }
    let asked = token_requests(&issuer, "client_credentials").await;
    assert_eq!(asked.len(), 1, "one flight for eight sessions: {asked:?}");
    assert_eq!(asked[0]["resource"], mcp.as_str());
    // The token lives 4 s and is renewed 2 s before it ends: after 3 s the next call
    // carries a new one, and the server never refused anything.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(
        whoami(&sessions[0].call("whoami", json!({})).await)["sub"],
        "gateway"
    );
    assert_eq!(token_requests(&issuer, "client_credentials").await.len(), 2);
    let refused = mcpgate_tests::oauth::hook(&mcp, "/test/rejections").await;
    assert_eq!(
        refused,
        json!([]),
        "the upstream refused a request: {refused}"
    );
    // Legacy SSE: its own audience.
    let legacy = Client::new(&format!("{}/servers/legacy/mcp", gw.base));
    let s = legacy.initialize().await;
    let who = whoami(&s.call("whoami", json!({})).await);
    assert_eq!(who["aud"], sse.as_str(), "{who}");
    assert!(calls(&mcp).await.len() >= 9);
    for s in sessions {
        assert_eq!(s.delete().await, 200);
    }
    let log = gw.log();
    assert!(!log.contains(SECRET), "the client secret is in the log");
    assert!(!log.contains("eyJ"), "a token is in the log");
}

/// Each principal's verified JWT is exchanged for its own upstream token: alice's
/// sessions carry alice, bob's carry bob; one exchange per principal, not per session.
#[tokio::test]
async fn token_exchange_per_principal() {
    let authority = authorization_server(&as_config(
        "urn:ietf:params:oauth:grant-type:token-exchange",
        60,
    ))
    .await;
    let issuer = authority.get("issuer");
    let up = protected_server(&issuer, "mcp:tools").await;
    let mcp = up.get("url");
    let pki = Pki::new();
    let (jwks, _jwks_task) = jwks_server(&pki).await;
    let aud = "https://gateway.test/mcp";
    let gw = Gateway::start(&format!(
        "{}[auth.jwt]\nissuer = \"https://idp.test\"\naudience = \"{aud}\"\njwks_url = \"{jwks}\"\nca_file = {:?}\n",
        server(
            "remote",
            "streamable-http",
            &mcp,
            "grant = \"token_exchange\""
        ),
        pki.ca
    ));
    let url = format!("{}/servers/remote/mcp", gw.base);
    let token = |sub: &str| {
        mint(json!({"iss": "https://idp.test", "aud": aud, "sub": sub, "exp": now() + 600}))
    };
    let (alice, bob) = (token("alice"), token("bob"));
    for _ in 0..2 {
        for (who, t) in [("alice", &alice), ("bob", &bob)] {
            let s = client_as(&url, t).initialize().await;
            let seen = whoami(&s.call("whoami", json!({})).await);
            assert_eq!(seen["sub"], who, "{seen}");
            assert_eq!(seen["client_id"], "gateway", "{seen}");
            assert_eq!(seen["aud"], mcp.as_str(), "{seen}");
            assert_eq!(s.delete().await, 200);
        }
    }
    let exchanges =
        token_requests(&issuer, "urn:ietf:params:oauth:grant-type:token-exchange").await;
    assert_eq!(
        exchanges.len(),
        2,
        "one exchange per principal: {exchanges:?}"
    );
    // The upstream saw each principal's token, never the client's own.
    let subs: Vec<Value> = calls(&mcp).await.iter().map(|c| c["sub"].clone()).collect();
    assert_eq!(subs, ["alice", "bob", "alice", "bob"]);
    assert!(!gw.log().contains(&alice), "a client token is in the log");
}

/// The authorization server refusing, slow, and down: each a precise JSON-RPC error
/// (`-32006`, naming the step), the gateway up, another server untouched.
#[tokio::test]
async fn authorization_server_failures_are_precise() {
    let mut authority = authorization_server(&as_config("client_credentials", 60)).await;
    let issuer = authority.get("issuer");
    let up = protected_server(&issuer, "mcp:tools").await;
    let mcp = up.get("url");
    let slow = "grant = \"client_credentials\"\ntimeout = \"1s\"";
    let wrong = format!(
        "[[server]]\nname = \"wrong\"\ntransport = \"streamable-http\"\nurl = \"{mcp}\"\n\
         [server.oauth]\ngrant = \"client_credentials\"\nclient_id = \"gateway\"\nclient_secret = \"not-it\"\n"
    );
    // Tokens for another resource (the SSE endpoint's audience) meant for /mcp: with the
    // issuer discovered, the server's own metadata names its resource and the gateway
    // refuses at once; with the issuer configured, the server refuses the token.
    let sse = up.get("sse");
    let elsewhere = format!("grant = \"client_credentials\"\nresource = \"{sse}\"");
    // (Its era configured: no era probe follows the refused initialize.)
    let configured = format!("{elsewhere}\nissuer = \"{issuer}\"");
    let gw = Gateway::start(&format!(
        "{}{wrong}{}{}",
        server("remote", "streamable-http", &mcp, slow),
        server("elsewhere", "streamable-http", &mcp, &elsewhere),
        server("configured", "streamable-http", &mcp, &configured).replace(
            "[server.oauth]",
            "protocol = \"2025-11-25\"\n[server.oauth]"
        ),
    ));
    let init = json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{
        "protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"0"}}});
    let error_of = |r: mcpgate_tests::Reply| r.last()["error"].clone();
    // A wrong client secret: the authorization server's own refusal, named.
    let r = Client::new(&format!("{}/servers/wrong/mcp", gw.base))
        .post(None, &init)
        .await;
    let e = error_of(r);
    assert_eq!(e["code"], -32006, "{e}");
    assert!(
        e["message"].as_str().unwrap().contains("invalid_client"),
        "{e}"
    );
    let at = |name: &str| Client::new(&format!("{}/servers/{name}/mcp", gw.base));
    let e = error_of(at("elsewhere").post(None, &init).await);
    assert_eq!(e["code"], -32006, "{e}");
    assert!(
        e["message"]
            .as_str()
            .unwrap()
            .contains("protected resource metadata names"),
        "{e}"
    );
    // Refused by the server: the gateway renews the token once, tries once more, then
    // says what the server answered.
    let e = error_of(at("configured").post(None, &init).await);
    assert_eq!(e["code"], -32003, "{e}");
    assert!(e["message"].as_str().unwrap().contains("401"), "{e}");
    let asked = token_requests(&issuer, "client_credentials").await;
    let for_sse = asked
        .iter()
        .filter(|r| r["resource"] == sse.as_str())
        .count();
    assert_eq!(for_sse, 2, "one token and one renewal: {asked:?}");
    // Slow: bounded by oauth.timeout.
    poke(&issuer, "/test/delay?ms=3000").await;
    let remote = Client::new(&format!("{}/servers/remote/mcp", gw.base));
    let e = error_of(remote.post(None, &init).await);
    assert_eq!(e["code"], -32006, "{e}");
    assert!(
        e["message"].as_str().unwrap().contains("no answer within"),
        "{e}"
    );
    // Back to normal: served.
    poke(&issuer, "/test/delay?ms=0").await;
    let s = remote.initialize().await;
    assert_eq!(whoami(&s.call("whoami", json!({})).await)["sub"], "gateway");
    // Down: the session that has its token goes on until it expires; a new server's
    // first token cannot be had, and says where it failed.
    authority.kill().await;
    assert_eq!(whoami(&s.call("whoami", json!({})).await)["sub"], "gateway");
    let e = error_of(
        Client::new(&format!("{}/servers/wrong/mcp", gw.base))
            .post(None, &init)
            .await,
    );
    assert_eq!(e["code"], -32006, "{e}");
    assert!(
        e["message"].as_str().unwrap().contains("token endpoint"),
        "{e}"
    );
    assert!(!gw.log().contains(SECRET));
}
