//! Two replicas behind a real nginx running `deploy/nginx/mcpgate.conf` as shipped (only
//! the replicas' addresses and the listen port are replaced by loopback ones): every session
//! lands on a replica that names itself in the session id, every later request reaches that
//! replica and no other, a replica never serves a session it does not own, and when a
//! replica dies only its own sessions notice — their clients are told to re-initialise and
//! land on a live replica.
//!
//! Needs the `nginx` binary (Debian: `apt-get install -y nginx`; or set
//! `MCPGATE_TEST_NGINX=/path/to/nginx`). Without it this test fails; it never skips.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use futures::future::join_all;
use mcpgate_testkit::{HttpOptions, HttpServer};
use mcpgate_tests::legacy::Legacy;
use mcpgate_tests::nginx::{Nginx, host_port, repo_file};
use mcpgate_tests::{Client, Gateway, wait_until};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use serde_json::json;
use tokio::sync::Mutex;

/// Sessions opened through nginx.
const SESSIONS: usize = 40;

/// The nginx config under test, relative to the workspace root.
const NGINX_CONF: &str = "deploy/nginx/mcpgate.conf";

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sessions_stay_on_their_replica_behind_nginx() {
    let started = Instant::now();
    let upstream = HttpServer::start("127.0.0.1:0".parse().unwrap(), HttpOptions::default())
        .await
        .unwrap();
    let mut r1 = Gateway::http(
        &upstream.url(),
        "[listen]\nreplica_id = \"r1\"\ndrain = \"2s\"\n",
    );
    let mut r2 = Gateway::http(
        &upstream.url(),
        "[listen]\nreplica_id = \"r2\"\ndrain = \"2s\"\n",
    );
    let nginx = Nginx::start(
        NGINX_CONF,
        &repo_file(NGINX_CONF),
        &[
            ("mcpgate-r1:8080".into(), host_port(&r1.base)),
            ("mcpgate-r2:8080".into(), host_port(&r2.base)),
        ],
    )
    .await;
    let via = Client::new(&format!("{}/mcp", nginx.base));
    let bases: HashMap<&str, String> =
        HashMap::from([("r1", r1.base.clone()), ("r2", r2.base.clone())]);
    let direct: HashMap<&str, Client> = HashMap::from([
        ("r1", Client::new(&r1.url())),
        ("r2", Client::new(&r2.url())),
    ]);
    let logs = |r1: &Gateway, r2: &Gateway| {
        format!(
            "\n--- nginx error log:\n{}\n--- nginx access log:\n{}\n--- r1 log:\n{}\n--- r2 log:\n{}",
            nginx.error_log(),
            nginx.access_log(),
            r1.log(),
            r2.log()
        )
    };

    // 1. New sessions go round-robin and each id names the replica that minted it.
    let sessions = join_all((0..SESSIONS).map(|_| via.initialize())).await;
    let mut per_replica: HashMap<&str, usize> = HashMap::new();
    for s in &sessions {
        *per_replica.entry(owner(&s.id)).or_default() += 1;
    }
    let count = |r: &str| per_replica.get(r).copied().unwrap_or(0);
    let (n1, n2) = (count("r1"), count("r2"));
    eprintln!("{SESSIONS} sessions through nginx: r1 {n1}, r2 {n2}");
    assert!(
        n1 >= SESSIONS / 4 && n2 >= SESSIONS / 4,
        "new sessions must be spread over both replicas: r1 {n1}, r2 {n2}{}",
        logs(&r1, &r2)
    );
    assert_eq!(r1.metric("mcpgate_sessions_active").await, n1 as f64);
    assert_eq!(r2.metric("mcpgate_sessions_active").await, n2 as f64);

    // 2. Every later request reaches the owner: the upstream session behind a gateway
    //    session (`whoami`) is the same on every call, and differs between sessions.
    let answers = join_all(sessions.iter().map(|s| async move {
        let mut seen = Vec::new();
        for i in 0..3 {
            let r = s.call("whoami", json!({})).await;
            assert!(
                r.status == 200 && r.error_code().is_none(),
                "whoami #{i} of {} through nginx: {r:?}",
                s.id
            );
            seen.push(r.text());
            let e = s.call("echo", json!({"text": s.id})).await;
            assert_eq!(e.text(), s.id, "{e:?}");
        }
        (s.id.clone(), seen)
    }))
    .await;
    let mut upstream_of: HashMap<String, String> = HashMap::new();
    for (id, seen) in answers {
        assert!(
            seen.iter().all(|w| *w == seen[0]),
            "session {id} reached different upstream sessions: {seen:?}{}",
            logs(&r1, &r2)
        );
        upstream_of.insert(id, seen[0].clone());
    }
    let distinct: HashSet<&String> = upstream_of.values().collect();
    assert_eq!(
        distinct.len(),
        SESSIONS,
        "every gateway session has its own upstream session"
    );

    // 3. Directly at the owner: the same upstream session. Directly at the other replica:
    //    404 (-32001), never served, and the owner's session is untouched by it.
    for s in &sessions {
        let own = owner(&s.id);
        let other = if own == "r1" { "r2" } else { "r1" };
        let at_owner = direct[own].call_on(&s.id, "whoami", json!({})).await;
        assert_eq!(
            at_owner.text(),
            upstream_of[&s.id],
            "{} directly at its owner {own}",
            s.id
        );
        let at_other = direct[other].call_on(&s.id, "whoami", json!({})).await;
        assert_eq!(
            (at_other.status, at_other.error_code()),
            (404, Some(-32001)),
            "{own}'s session {} sent to {other} must be refused: {at_other:?}",
            s.id
        );
        assert!(!at_other.body.contains(&upstream_of[&s.id]), "{at_other:?}");
    }
    for s in &sessions {
        assert_eq!(s.call("whoami", json!({})).await.text(), upstream_of[&s.id]);
    }

    // 4. Legacy HTTP+SSE through nginx: GET /sse lands on some replica; the POSTs to the
    //    announced /message?sessionId=… reach that replica (answers come back on the stream
    //    it holds), and the other replica refuses them.
    let mut legacy_owners = HashSet::new();
    for n in 0..2 {
        let mut legacy = Legacy::open(&nginx.base).await;
        let own = owner(&legacy.id);
        legacy_owners.insert(own);
        let other = if own == "r1" { "r2" } else { "r1" };
        let init = legacy
            .request(
                &nginx.base,
                json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{
                    "protocolVersion":"2024-11-05","capabilities":{},
                    "clientInfo":{"name":"replicas-legacy","version":"0"}}}),
            )
            .await;
        assert!(init.get("result").is_some(), "legacy initialize: {init}");
        let accepted = legacy
            .post(
                &nginx.base,
                json!({"jsonrpc":"2.0","method":"notifications/initialized"}),
            )
            .await;
        assert_eq!(accepted, 202);
        let who = legacy
            .request(
                &nginx.base,
                json!({"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"whoami","arguments":{}}}),
            )
            .await;
        let upstream_id = who["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or_else(|| panic!("legacy whoami: {who}"))
            .to_owned();
        // The stream opened through nginx is held by the owner: a POST sent straight to the
        // owner is answered on it.
        let straight = legacy
            .request(
                &bases[own],
                json!({"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"whoami","arguments":{}}}),
            )
            .await;
        assert_eq!(
            straight["result"]["content"][0]["text"], upstream_id,
            "{straight}"
        );
        let refused = legacy
            .post(
                &bases[other],
                json!({"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"whoami","arguments":{}}}),
            )
            .await;
        assert_eq!(
            refused, 404,
            "legacy session {} of {own} POSTed to {other}",
            legacy.id
        );
        eprintln!(
            "legacy SSE session #{n} through nginx: {} on {own}",
            legacy.id
        );
    }
    assert_eq!(
        legacy_owners.len(),
        2,
        "two GET /sse in a row go round-robin to both replicas"
    );

    // 5. r1 dies (SIGKILL). Meanwhile every r2 session keeps working through nginx without
    //    a single error; r1's sessions get 404 + -32001 from nginx (the client's cue to
    //    re-initialise), and re-initialising lands them on r2, where they work.
    let (on_r1, on_r2): (Vec<_>, Vec<_>) = sessions.iter().partition(|s| owner(&s.id) == "r1");
    let stop = Arc::new(AtomicBool::new(false));
    let killed = Arc::new(AtomicBool::new(false));
    let after_kill = Arc::new(AtomicUsize::new(0));
    let failures = Arc::new(Mutex::new(Vec::<String>::new()));
    let bystanders = {
        let sessions: Vec<(String, String)> = on_r2
            .iter()
            .map(|s| (s.id.clone(), upstream_of[&s.id].clone()))
            .collect();
        let (via, stop, killed, after_kill, failures) = (
            via.clone(),
            stop.clone(),
            killed.clone(),
            after_kill.clone(),
            failures.clone(),
        );
        tokio::spawn(async move {
            let until = Instant::now() + Duration::from_secs(30);
            while !stop.load(Ordering::SeqCst) && Instant::now() < until {
                for (id, expected) in &sessions {
                    let r = via.call_on(id, "whoami", json!({})).await;
                    let ok = r.status == 200
                        && r.error_code().is_none()
                        && r.messages
                            .last()
                            .and_then(|m| m["result"]["content"][0]["text"].as_str())
                            == Some(expected.as_str());
                    if !ok {
                        failures.lock().await.push(format!("{id}: {r:?}"));
                    }
                    if killed.load(Ordering::SeqCst) {
                        after_kill.fetch_add(1, Ordering::SeqCst);
                    }
                }
            }
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    kill(Pid::from_raw(r1.pid() as i32), Signal::SIGKILL).unwrap();
    killed.store(true, Ordering::SeqCst);
    assert!(
        wait_until(Duration::from_secs(5), || {
            let running = r1.is_running();
            async move { !running }
        })
        .await,
        "r1 did not die"
    );
    for s in &on_r1 {
        let r = s.call("whoami", json!({})).await;
        assert_eq!(
            (r.status, r.error_code()),
            (404, Some(-32001)),
            "a session of the dead r1 through nginx: {r:?}{}",
            logs(&r1, &r2)
        );
        assert_eq!(r.header("x-mcpgate-proxy"), Some("owner-unreachable"));
    }
    let again = join_all(on_r1.iter().map(|_| via.initialize())).await;
    let mut new_upstreams = HashSet::new();
    for s in &again {
        assert_eq!(
            owner(&s.id),
            "r2",
            "re-initialised after r1 died: {}{}",
            s.id,
            logs(&r1, &r2)
        );
        let who = s.call("whoami", json!({})).await;
        assert!(who.status == 200 && who.error_code().is_none(), "{who:?}");
        assert!(
            !distinct.contains(&who.text()),
            "a new session gets a new upstream session"
        );
        new_upstreams.insert(who.text());
        assert_eq!(
            direct["r2"]
                .call_on(&s.id, "whoami", json!({}))
                .await
                .text(),
            who.text()
        );
    }
    assert_eq!(new_upstreams.len(), on_r1.len());
    // Let the bystanders run a little longer on the surviving replica, then stop them.
    let target = after_kill.load(Ordering::SeqCst) + 2 * on_r2.len();
    wait_until(Duration::from_secs(10), || {
        let n = after_kill.load(Ordering::SeqCst);
        async move { n >= target }
    })
    .await;
    stop.store(true, Ordering::SeqCst);
    bystanders.await.unwrap();
    let failures = failures.lock().await;
    assert!(
        failures.is_empty(),
        "r2's sessions must not notice r1's death; {} failed requests, first: {:?}{}",
        failures.len(),
        failures.first(),
        logs(&r1, &r2)
    );
    let checked = after_kill.load(Ordering::SeqCst);
    assert!(
        checked >= on_r2.len(),
        "bystander requests after the kill: {checked}"
    );
    // r2 holds its own sessions and the re-initialised ones (its legacy session ended when
    // its stream was dropped).
    assert!(
        wait_until(Duration::from_secs(5), || async {
            r2.metric("mcpgate_sessions_active").await == (n2 + n1) as f64
        })
        .await,
        "r2 has {} sessions, expected {}",
        r2.metric("mcpgate_sessions_active").await,
        n1 + n2
    );
    eprintln!(
        "r1 killed: {} sessions told to re-initialise (404 -32001) and moved to r2; \
         {checked} requests on r2's {} sessions after the kill, none failed",
        on_r1.len(),
        on_r2.len(),
    );

    // 6. No replica left: a new session gets 503 + -32002 + Retry-After (like an overloaded
    //    mcpgate), an existing one 404 + -32001.
    kill(Pid::from_raw(r2.pid() as i32), Signal::SIGKILL).unwrap();
    assert!(
        wait_until(Duration::from_secs(5), || {
            let running = r2.is_running();
            async move { !running }
        })
        .await,
        "r2 did not die"
    );
    let refused = via
        .post(
            None,
            &json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{
                "protocolVersion":"2025-11-25","capabilities":{},
                "clientInfo":{"name":"replicas","version":"0"}}}),
        )
        .await;
    assert_eq!(
        (refused.status, refused.error_code()),
        (503, Some(-32002)),
        "initialize with every replica down: {refused:?}{}",
        logs(&r1, &r2)
    );
    assert_eq!(
        refused.header("x-mcpgate-proxy"),
        Some("no-replica-available")
    );
    assert!(refused.header("retry-after").is_some(), "{refused:?}");
    let gone = again[0].call("whoami", json!({})).await;
    assert_eq!(
        (gone.status, gone.error_code()),
        (404, Some(-32001)),
        "{gone:?}"
    );
    assert_eq!(gone.header("x-mcpgate-proxy"), Some("owner-unreachable"));
    eprintln!("replicas test done in {:?}", started.elapsed());
    drop(nginx);
}

/// The replica named by a session id (`r1-<32 hex>`), after checking the id's shape.
fn owner(id: &str) -> &'static str {
    let (replica, rest) = id
        .split_once('-')
        .unwrap_or_else(|| panic!("session id without a replica prefix: {id}"));
    assert!(
        (replica == "r1" || replica == "r2")
            && rest.len() == 32
            && rest
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)),
        "session id {id:?} is not r1-/r2- followed by 32 hex characters"
    );
    if replica == "r1" { "r1" } else { "r2" }
}
