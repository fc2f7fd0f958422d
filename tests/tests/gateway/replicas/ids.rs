//! A replica's session ids and their short form: ids start with `{replica_id}-`, and the
//! short form in log lines and the admin API keeps the replica prefix *and* 8 characters
//! of the random part, so two sessions of one replica are told apart (it used to be the
//! first 8 characters: `gateway_` for every session of `gateway_a`).

use mcpgate_tests::admin::Admin;
use mcpgate_tests::{Client, Gateway, Launch, bin};

const TOKEN: &str = "admin-token-0123456789";

#[tokio::test]
async fn a_replicas_sessions_are_told_apart_in_logs_and_the_admin_api() {
    let toml = format!(
        "[listen]\nreplica_id = \"gateway_a\"\n\
         [[server]]\nname = \"kit\"\ntransport = \"stdio\"\ncommand = [{:?}, \"stdio\"]\n\
         [admin]\naddr = \"127.0.0.1:0\"\ntoken = \"{TOKEN}\"\n",
        bin("mcpgate-testkit").display().to_string()
    );
    let gw = Gateway::launch(
        &toml,
        Launch {
            stdout_lines: 2,
            ..Launch::default()
        },
    );
    let admin = Admin::of(&gw, TOKEN);
    let c = Client::new(&format!("{}/servers/kit/mcp", gw.base));
    let a = c.initialize().await;
    let b = c.initialize().await;
    for s in [&a, &b] {
        assert!(s.id.starts_with("gateway_a-"), "{}", s.id);
    }
    let short = |id: &str| id[..18].to_owned();
    let (sa, sb) = (short(&a.id), short(&b.id));
    assert_ne!(sa, sb);
    // Each session's lines carry its own tag.
    let log = gw.log();
    for tag in [&sa, &sb] {
        assert!(
            log.lines().any(|l| l.contains(&format!("session={tag}"))
                || l.contains(&format!("session=\"{tag}\""))),
            "no line tagged {tag}:\n{log}"
        );
    }
    assert!(!log.contains("session=gateway_ "), "{log}");
    // The admin API shows the same short form and ends a session by it.
    let mut shown: Vec<String> = admin
        .sessions()
        .await
        .iter()
        .map(|s| s["id_prefix"].as_str().unwrap().to_owned())
        .collect();
    shown.sort();
    let mut want = vec![sa.clone(), sb.clone()];
    want.sort();
    assert_eq!(shown, want);
    let (status, _) = admin
        .api(reqwest::Method::DELETE, "/api/sessions/gateway_a-")
        .await;
    assert_eq!(status, 409, "the replica prefix alone names both sessions");
    let (status, body) = admin
        .api(reqwest::Method::DELETE, &format!("/api/sessions/{sa}"))
        .await;
    assert_eq!(status, 200, "{body}");
    let left = admin.sessions().await;
    assert_eq!(left.len(), 1);
    assert_eq!(left[0]["id_prefix"], sb.as_str());
}
