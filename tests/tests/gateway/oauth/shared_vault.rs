//! Two replicas sharing one vault on a real PostgreSQL (started by the test on a temporary
//! directory): a consent given through one replica serves the principal on the other; the
//! database going away mid-run fails what needs it with a precise error and nothing else,
//! and its return heals it.

use mcpgate_tests::oauth::{authorization_server, calls, consent, protected_server};
use mcpgate_tests::postgres::Postgres;
use mcpgate_tests::virtuals::client_as;
use mcpgate_tests::{Gateway, Launch};
use serde_json::{Value, json};

const ALICE: &str = "alice-token-0d1e-9a8b";
const BOB: &str = "bob-token-77c2-41fe";
const KEY: &str = "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=";

fn replica(mcp: &str, db: &str) -> Gateway {
    Gateway::launch(
        &format!(
            "[[server]]\nname = \"remote\"\ntransport = \"streamable-http\"\nurl = \"{mcp}\"\n\
             [server.oauth]\ngrant = \"authorization_code\"\n\
             [vault]\npostgres_url_env = \"MCPGATE_TEST_VAULT\"\n\
             [session]\nseal_keys = [{{ id = \"k1\", secret = \"{KEY}\" }}]\n\
             [auth]\ntokens = [{{ name = \"alice\", token = \"{ALICE}\" }}, {{ name = \"bob\", token = \"{BOB}\" }}]\n"
        ),
        Launch {
            env: vec![("MCPGATE_TEST_VAULT".into(), db.into())],
            ..Launch::default()
        },
    )
}

fn init() -> Value {
    json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{
        "protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"0"}}})
}

async fn first_error(gw: &Gateway, token: &str) -> Value {
    let r = client_as(&gw.url(), token).post(None, &init()).await;
    r.last()["error"].clone()
}

#[tokio::test]
async fn replicas_share_consents_and_survive_the_database_going_away() {
    let pg = Postgres::start();
    let authority = authorization_server(&json!({
        "clients": [], "access_token_ttl": 60,
        "resources": {"http://127.0.0.1:*/mcp": {"scope": "mcp:tools"}},
    }))
    .await;
    let up = protected_server(&authority.get("issuer"), "mcp:tools").await;
    let mcp = up.get("url");
    let (mut a, mut b) = (replica(&mcp, &pg.url()), replica(&mcp, &pg.url()));

    // Alice consents through replica A; replica B serves her with that grant.
    let e = first_error(&a, ALICE).await;
    assert_eq!(e["code"], -32042, "{e}");
    let url = e["data"]["elicitations"][0]["url"].as_str().unwrap();
    let done = consent(
        url,
        "alice",
        &format!("{}/oauth/callback", a.base),
        false,
        true,
    )
    .await;
    assert_eq!(done["status"], 200, "{done}");
    let s = client_as(&b.url(), ALICE).initialize().await;
    let who: Value = serde_json::from_str(&s.call("whoami", json!({})).await.text()).unwrap();
    assert_eq!(who["sub"], "alice");

    // The database goes away: what needs it fails precisely; a session holding its token
    // goes on.
    pg.down();
    let e = first_error(&b, BOB).await;
    assert_eq!(e["code"], -32006, "{e}");
    assert!(e["message"].as_str().unwrap().contains("vault"), "{e}");
    let who: Value = serde_json::from_str(&s.call("whoami", json!({})).await.text()).unwrap();
    assert_eq!(who["sub"], "alice");
    // It comes back: bob is asked to consent, as he should be.
    pg.up();
    let e = first_error(&b, BOB).await;
    assert_eq!(e["code"], -32042, "{e}");
    assert_eq!(calls(&mcp).await.len(), 2);
    assert!(a.is_running() && b.is_running());
}
