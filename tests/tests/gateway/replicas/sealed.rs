//! Sealed session ids: three replicas behind a real nginx running
//! `deploy/nginx/mcpgate-sealed.conf` (plain round-robin, no affinity) in front of one HTTP
//! testkit. Every replica serves every session; a replica killed with SIGKILL under load
//! costs the clients nothing but a retry of what was in flight; a GET stream re-opened
//! through another replica gets what followed; keys rotate; forged ids reach nothing.
//!
//! Needs the `nginx` binary, like `shipped_nginx.rs`.

use std::collections::HashSet;
use std::time::Duration;

use futures::future::join_all;
use mcpgate_testkit::{HttpOptions, HttpServer};
use mcpgate_tests::nginx::{Nginx, host_port, repo_file};
use mcpgate_tests::sealed::{IdStream, KEY_1, KEY_2, call_retrying, replica_config};
use mcpgate_tests::{Client, Gateway};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use serde_json::json;

const CONF: &str = "deploy/nginx/mcpgate-sealed.conf";
const SESSIONS: usize = 50;

async fn testkit() -> HttpServer {
    HttpServer::start("127.0.0.1:0".parse().unwrap(), HttpOptions::default())
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sealed_sessions_need_no_affinity_and_outlive_a_killed_replica() {
    let upstream = testkit().await;
    let cfg = replica_config(&[("k1", KEY_1)], "");
    let mut replicas: Vec<Gateway> = (0..3)
        .map(|_| Gateway::http(&upstream.url(), &cfg))
        .collect();
    let replacements: Vec<(String, String)> = ["a", "b", "c"]
        .iter()
        .zip(&replicas)
        .map(|(n, r)| (format!("mcpgate-{n}:8080"), host_port(&r.base)))
        .collect();
    let nginx = Nginx::start(CONF, &repo_file(CONF), &replacements).await;
    let via = Client::new(&format!("{}/mcp", nginx.base));
    let logs = |rs: &[Gateway]| {
        let mut s = format!("--- nginx:\n{}", nginx.error_log());
        for (i, r) in rs.iter().enumerate() {
            s.push_str(&format!("\n--- replica {i}:\n{}", r.log()));
        }
        s
    };

    // 1. 50 sessions through round-robin: each request may land on any replica.
    let sessions = join_all((0..SESSIONS).map(|_| via.initialize())).await;
    let ids: HashSet<&str> = sessions.iter().map(|s| s.id.as_str()).collect();
    assert_eq!(ids.len(), SESSIONS);
    assert!(
        sessions.iter().all(|s| s.id.starts_with("k1.")),
        "sealed ids"
    );
    let upstream_ids = join_all(sessions.iter().enumerate().map(|(i, s)| async move {
        let mut seen = HashSet::new();
        for round in 0..6 {
            let r = s.call("whoami", json!({})).await;
            assert_eq!(r.status, 200, "session {i} round {round}: {r:?}");
            seen.insert(r.text());
            // Notifications of this session's call reach this client, and only its own.
            let tag = format!("<s{i:02}r{round}>");
            let r = s
                .request(
                    "tools/call",
                    json!({"name":"notify","arguments":{"tag":tag,"count":3},
                           "_meta":{"progressToken": format!("p{i}")}}),
                )
                .await;
            assert_eq!(r.status, 200, "{r:?}");
            let notes: Vec<_> = r
                .messages
                .iter()
                .filter(|m| m.get("id").is_none())
                .collect();
            assert_eq!(notes.len(), 6, "3 logs + 3 progress for session {i}: {r:?}");
            for n in notes {
                let text = n.to_string();
                assert!(
                    text.contains(&tag) || text.contains(&format!("\"p{i}\"")),
                    "session {i} got someone else's notification: {text}"
                );
            }
        }
        assert_eq!(
            seen.len(),
            1,
            "session {i} reached one upstream session: {seen:?}"
        );
        seen.into_iter().next().unwrap()
    }))
    .await;
    assert_eq!(
        upstream_ids.iter().collect::<HashSet<_>>().len(),
        SESSIONS,
        "each session has its own upstream session"
    );
    assert_eq!(
        upstream.stats().sessions_created,
        SESSIONS as u64,
        "no upstream session made by a resume\n{}",
        logs(&replicas)
    );
    let mut opened = Vec::new();
    for r in &replicas {
        opened.push(r.metric("mcpgate_sessions_opened_total").await);
    }
    eprintln!("sessions made or resumed per replica: {opened:?}");
    assert!(
        opened.iter().all(|&n| n >= 10.0),
        "every replica served sessions: {opened:?}"
    );

    // 2. A GET stream on replica 1, which is about to die, with one event seen.
    let watched = &sessions[0];
    let on_b = format!("{}/mcp", replicas[1].base);
    let mut get = IdStream::open(&on_b, &watched.id, None).await;
    assert_eq!(get.status, 200);
    // The client's GET is answered before replica 1 has opened the upstream's; what the
    // server sends before then is not on this stream (a sealed session's requests may go
    // through other replicas, which cannot wait for it).
    let open = mcpgate_tests::wait_until(Duration::from_secs(10), || async {
        upstream.stats().get_streams_open == 1
    })
    .await;
    assert!(open, "the upstream GET stream is open");
    let sub = watched
        .request("resources/subscribe", json!({"uri":"test://w"}))
        .await;
    assert_eq!(sub.status, 200, "{sub:?}");
    let touched = watched.call("touch", json!({"uri":"test://w"})).await;
    assert_eq!(touched.text(), "notified 1", "{touched:?}");
    let (first_id, first) = get
        .next(Duration::from_secs(10))
        .await
        .expect("first update");
    assert_eq!(
        first["method"], "notifications/resources/updated",
        "{first}"
    );
    let first_id = first_id.expect("an event id");
    assert!(first_id.starts_with("u:"), "{first_id}");

    // 3. SIGKILL replica 1 while every session has requests in flight.
    const REQUESTS: &str = "mcpgate_requests_total{era=\"2025\"}";
    let before_load = replicas[1].metric(REQUESTS).await;
    let load = join_all(sessions.iter().enumerate().map(|(i, s)| {
        let via = via.clone();
        let want = upstream_ids[i].clone();
        async move {
            let mut retries = 0;
            for n in 0..10 {
                let (r, k) = call_retrying(&via, &s.id, "slow", &json!({"ms": 20})).await;
                retries += k;
                assert_eq!(r.status, 200, "session {i} call {n}: {r:?}");
                assert!(r.error_code().is_none(), "session {i} call {n}: {r:?}");
                assert_eq!(r.text(), "slept 20", "session {i} call {n}: {r:?}");
                let (r, k) = call_retrying(&via, &s.id, "whoami", &json!({})).await;
                retries += k;
                assert_eq!(r.text(), want, "session {i} call {n}");
            }
            retries
        }
    }));
    // The kill comes once the load runs through replica 1 (it has taken 20 of its calls),
    // not after a guessed pause.
    let killer = async {
        let loaded = mcpgate_tests::wait_until(Duration::from_secs(30), || async {
            replicas[1].metric(REQUESTS).await >= before_load + 20.0
        })
        .await;
        let _ = kill(Pid::from_raw(replicas[1].pid() as i32), Signal::SIGKILL);
        loaded
    };
    let (retries, loaded) = tokio::join!(load, killer);
    assert!(
        loaded,
        "the load never reached replica 1\n{}",
        logs(&replicas)
    );
    let retries: u32 = retries.iter().sum();
    eprintln!("1000 calls, a replica killed under them: 0 failed, {retries} retried");
    // SIGKILL is not instant: wait (bounded) for the process to be gone.
    let until = std::time::Instant::now() + Duration::from_secs(5);
    while replicas[1].is_running() && std::time::Instant::now() < until {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(!replicas[1].is_running());
    // Calls were in flight on replica 1 when it died: their clients saw the connection
    // break (the proxy's 502, or an answer cut short) and sent them again.
    assert!(
        retries >= 1,
        "no call was in flight on replica 1 at the kill\n{}",
        logs(&replicas)
    );

    // 4. What the server sent while the stream was down comes when it is re-opened
    //    through another replica, after the last event the client saw.
    drop(get);
    for _ in 0..2 {
        let (t, _) = call_retrying(&via, &watched.id, "touch", &json!({"uri":"test://w"})).await;
        assert_eq!(t.text(), "notified 1", "{t:?}");
    }
    let mut again = IdStream::open(&via_url(&nginx), &watched.id, Some(&first_id)).await;
    assert_eq!(again.status, 200);
    for k in 0..2 {
        let (id, m) = again
            .next(Duration::from_secs(10))
            .await
            .unwrap_or_else(|| panic!("update {k} after the resume\n{}", logs(&replicas)));
        assert_eq!(m["method"], "notifications/resources/updated", "{m}");
        assert_ne!(
            id.as_deref(),
            Some(first_id.as_str()),
            "not the one already seen"
        );
    }
    assert!(
        again.next(Duration::from_millis(500)).await.is_none(),
        "nothing twice"
    );
    assert_eq!(upstream.stats().sessions_created, SESSIONS as u64);

    // 5. DELETE through any replica ends the upstream session; every replica then says 404.
    for s in &sessions[..10] {
        assert_eq!(s.delete().await, 200);
    }
    assert_eq!(upstream.stats().sessions_deleted, 10);
    for s in &sessions[..10] {
        for r in [&replicas[0], &replicas[2]] {
            let c = Client::new(&r.url());
            let gone = c.call_on(&s.id, "whoami", json!({})).await;
            assert_eq!(gone.status, 404, "{gone:?}");
        }
    }
    let live = sessions[10].call("whoami", json!({})).await;
    assert_eq!(live.text(), upstream_ids[10], "other sessions untouched");
}

fn via_url(nginx: &Nginx) -> String {
    format!("{}/mcp", nginx.base)
}

/// Keys rotate without sticky anything: sessions sealed with the old key keep working once a
/// new key seals; once the old key is removed they are unknown (404) and re-initialise.
#[tokio::test]
async fn sealed_ids_survive_adding_a_key_and_end_with_its_removal() {
    let upstream = testkit().await;
    let old = Gateway::http(&upstream.url(), &replica_config(&[("k1", KEY_1)], ""));
    let s = Client::new(&old.url()).initialize().await;
    let me = s.call("whoami", json!({})).await.text();
    // A replica that seals with k2 and still opens k1.
    let both = Gateway::http(
        &upstream.url(),
        &replica_config(&[("k2", KEY_2), ("k1", KEY_1)], ""),
    );
    let c2 = Client::new(&both.url());
    assert_eq!(c2.call_on(&s.id, "whoami", json!({})).await.text(), me);
    let fresh = c2.initialize().await;
    assert!(fresh.id.starts_with("k2."), "{}", fresh.id);
    // A replica that no longer has k1.
    let new = Gateway::http(&upstream.url(), &replica_config(&[("k2", KEY_2)], ""));
    let c3 = Client::new(&new.url());
    let gone = c3.call_on(&s.id, "whoami", json!({})).await;
    assert_eq!(gone.status, 404, "{gone:?}");
    assert_eq!(gone.error_code(), Some(-32001), "{gone:?}");
    assert!(
        new.log()
            .contains("its key is not (or no longer) configured")
    );
    let again = c3.initialize().await;
    assert_eq!(again.call("whoami", json!({})).await.status, 200);
    assert_eq!(
        c3.call_on(&fresh.id, "whoami", json!({}))
            .await
            .error_code(),
        None,
        "k2 sessions work on it"
    );
    assert_eq!(upstream.stats().sessions_created, 3);
}

const ALICE: &str = "alice-token-0123456789";
const BOB: &str = "bob-token-0123456789ab";

/// Tampered, truncated, other-principal and unknown-key ids are unknown sessions (404), and
/// nothing reaches the upstream for them.
#[tokio::test]
async fn forged_sealed_ids_are_unknown_and_reach_nothing_upstream() {
    let upstream = testkit().await;
    let auth = format!(
        "[auth]\ntokens = [{{ name = \"alice\", token = \"{ALICE}\" }}, {{ name = \"bob\", token = \"{BOB}\" }}]\n"
    );
    let gw = Gateway::http(
        &upstream.url(),
        &format!("{}{auth}", replica_config(&[("k1", KEY_1)], "")),
    );
    let post = |token: &'static str, sid: String| {
        let url = gw.url();
        async move {
            let c = Client::new(&url);
            let bearer = format!("Bearer {token}");
            c.post_raw(
                &[
                    ("content-type", "application/json"),
                    ("accept", "application/json, text/event-stream"),
                    ("authorization", &bearer),
                    ("mcp-session-id", &sid),
                ],
                json!({"jsonrpc":"2.0","id":3,"method":"tools/call",
                       "params":{"name":"whoami","arguments":{}}})
                .to_string(),
            )
            .await
        }
    };
    let init = Client::new(&gw.url())
        .post_raw(
            &[
                ("content-type", "application/json"),
                ("accept", "application/json, text/event-stream"),
                ("authorization", &format!("Bearer {ALICE}")),
            ],
            json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{
                "protocolVersion":"2025-11-25","capabilities":{},
                "clientInfo":{"name":"t","version":"0"}}})
            .to_string(),
        )
        .await;
    let sid = init.header("mcp-session-id").unwrap().to_owned();
    assert!(sid.starts_with("k1."), "{sid}");
    assert_eq!(post(ALICE, sid.clone()).await.status, 200);
    let before = upstream.stats().requests;
    let other_key = {
        let ring = mcpgate_seal::KeyRing::new([("k1", KEY_2)]).unwrap();
        let mut claims = ring.open(&ring.seal(&sample_claims()).unwrap()).unwrap();
        claims.principal = Some("alice".into());
        ring.seal(&claims).unwrap()
    };
    let mut flipped = sid.clone().into_bytes();
    let at = flipped.len() - 5;
    flipped[at] = if flipped[at] == b'A' { b'B' } else { b'A' };
    let forged: Vec<(&str, &str, String)> = vec![
        ("tampered", ALICE, String::from_utf8(flipped).unwrap()),
        ("truncated", ALICE, sid[..sid.len() - 4].to_owned()),
        ("another principal's", BOB, sid.clone()),
        ("unknown key", ALICE, format!("k9{}", &sid[2..])),
        ("another secret's", ALICE, other_key),
    ];
    for (what, who, id) in forged {
        let r = post(who, id).await;
        assert_eq!(r.status, 404, "{what}: {r:?}");
        assert_eq!(r.error_code(), Some(-32001), "{what}: {r:?}");
    }
    assert_eq!(
        upstream.stats().requests,
        before,
        "nothing reached the upstream"
    );
    assert_eq!(upstream.stats().sessions_created, 1);
    let log = gw.log();
    assert!(log.contains("does not authenticate"), "{log}");
    assert!(log.contains("another server or principal"), "{log}");
    assert_eq!(
        post(ALICE, sid).await.status,
        200,
        "the real one still works"
    );
}

fn sample_claims() -> mcpgate_seal::Claims {
    mcpgate_seal::Claims {
        sid: "0123456789abcdef0123456789abcdef".into(),
        server: "up".into(),
        upstream_sid: Some("forged".into()),
        version: "2025-11-25".into(),
        capabilities: None,
        principal: None,
        created: 0,
        expires: None,
    }
}

/// A client that resumes its stream on the replica it was on keeps receiving: the old GET's
/// end does not stop the upstream stream the new one re-opened.
#[tokio::test]
async fn a_stream_resumed_on_its_own_replica_keeps_receiving() {
    let upstream = testkit().await;
    let gw = Gateway::http(&upstream.url(), &replica_config(&[("k1", KEY_1)], ""));
    let s = Client::new(&gw.url()).initialize().await;
    let mut first = IdStream::open(&gw.url(), &s.id, None).await;
    assert_eq!(first.status, 200);
    let sub = s
        .request("resources/subscribe", json!({"uri":"test://x"}))
        .await;
    assert_eq!(sub.status, 200, "{sub:?}");
    assert_eq!(
        s.call("touch", json!({"uri":"test://x"})).await.text(),
        "notified 1"
    );
    let (id, _) = first
        .next(Duration::from_secs(10))
        .await
        .expect("first update");
    let mut second = IdStream::open(&gw.url(), &s.id, id.as_deref()).await;
    assert_eq!(second.status, 200);
    drop(first);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        s.call("touch", json!({"uri":"test://x"})).await.text(),
        "notified 1"
    );
    let (_, m) = second
        .next(Duration::from_secs(10))
        .await
        .unwrap_or_else(|| panic!("no update on the resumed stream\n{}", gw.log()));
    assert_eq!(m["method"], "notifications/resources/updated", "{m}");
}

/// The same rotation by SIGHUP on one running replica: add a key in front, then remove the
/// old one; sessions of the removed key are unknown from then on.
#[tokio::test]
async fn seal_keys_rotate_on_sighup() {
    let upstream = testkit().await;
    let file = |keys: &[(&str, &str)]| {
        format!(
            "[[server]]\nname = \"up\"\ntransport = \"streamable-http\"\nurl = \"{}\"\n{}",
            upstream.url(),
            replica_config(keys, "")
        )
    };
    let gw = Gateway::start(&file(&[("k1", KEY_1)]));
    let c = Client::new(&gw.url());
    let old = c.initialize().await;
    assert!(old.id.starts_with("k1."));
    gw.reload_with(
        &file(&[("k2", KEY_2), ("k1", KEY_1)]),
        "configuration reloaded",
    )
    .await;
    assert_eq!(old.call("whoami", json!({})).await.status, 200);
    let new = c.initialize().await;
    assert!(new.id.starts_with("k2."), "{}", new.id);
    gw.reload_with(&file(&[("k2", KEY_2)]), "configuration reloaded")
        .await;
    let gone = old.call("whoami", json!({})).await;
    assert_eq!(gone.status, 404, "{gone:?}");
    assert_eq!(new.call("whoami", json!({})).await.status, 200);
}

/// A stateless upstream (no `Mcp-Session-Id`): its sealed ids serve through any replica,
/// stop opening on the replica that saw their DELETE, and stop opening everywhere once
/// their lifetime (`session.sealed_stateless_lifetime`) is over.
#[tokio::test]
async fn stateless_upstreams_sealed_ids_are_bounded_by_their_lifetime() {
    let upstream = HttpServer::start(
        "127.0.0.1:0".parse().unwrap(),
        HttpOptions {
            stateless: true,
            ..HttpOptions::default()
        },
    )
    .await
    .unwrap();
    let cfg = replica_config(&[("k1", KEY_1)], "sealed_stateless_lifetime = \"3s\"");
    let (a, b) = (
        Gateway::http(&upstream.url(), &cfg),
        Gateway::http(&upstream.url(), &cfg),
    );
    let (ca, cb) = (Client::new(&a.url()), Client::new(&b.url()));
    let s = ca.initialize().await;
    assert!(s.id.starts_with("k1."), "{}", s.id);
    let t = ca.initialize().await;
    for c in [&ca, &cb] {
        let r = c.call_on(&s.id, "echo", json!({"text":"x"})).await;
        assert_eq!(r.text(), "x", "{r:?}");
    }
    // DELETE through a: a refuses the id from now on; b, which cannot know, serves it until
    // it expires (the upstream holds nothing for it).
    assert_eq!(s.delete().await, 200);
    let on_a = ca.call_on(&s.id, "echo", json!({"text":"x"})).await;
    assert_eq!(on_a.status, 404, "{on_a:?}");
    assert_eq!(
        cb.call_on(&s.id, "echo", json!({"text":"x"})).await.text(),
        "x"
    );
    assert_eq!(
        ca.call_on(&t.id, "echo", json!({"text":"y"})).await.text(),
        "y"
    );
    // Past its lifetime no replica opens it.
    tokio::time::sleep(Duration::from_millis(3200)).await;
    for (c, id) in [(&ca, &t.id), (&cb, &t.id), (&cb, &s.id)] {
        let r = c.call_on(id, "echo", json!({"text":"z"})).await;
        assert_eq!(r.status, 404, "{r:?}");
    }
    assert!(
        b.log().contains("has expired or was deleted"),
        "{}",
        b.log()
    );
}
