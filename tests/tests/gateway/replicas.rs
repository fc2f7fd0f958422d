//! Several replicas behind a real nginx running `deploy/nginx/mcpgate.conf` as shipped (only
//! the replicas' addresses and the listen port are replaced by loopback ones): every session
//! lands on a replica that names itself in the session id, every later request reaches that
//! replica and no other, a replica never serves a session it does not own, and when a
//! replica dies only its own sessions notice — their clients are told to re-initialise and
//! land on a live replica.
//!
//! Needs the `nginx` binary (Debian: `apt-get install -y nginx`; or set
//! `MCPGATE_TEST_NGINX=/path/to/nginx`). Without it this test fails; it never skips.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use futures::StreamExt;
use futures::future::join_all;
use mcpgate_testkit::{HttpOptions, HttpServer};
use mcpgate_tests::{Client, Gateway, Reply, children_of, wait_until};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use serde_json::{Value, json};
use tokio::sync::{Mutex, mpsc};

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
        let at_owner = whoami_raw(&direct[own], &s.id).await;
        assert_eq!(
            at_owner.text(),
            upstream_of[&s.id],
            "{} directly at its owner {own}",
            s.id
        );
        let at_other = whoami_raw(&direct[other], &s.id).await;
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
                    let r = whoami_raw(&via, id).await;
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
        assert_eq!(whoami_raw(&direct["r2"], &s.id).await.text(), who.text());
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

/// The Kubernetes router config (`deploy/kubernetes/gateway/router-config.yaml`) routes the
/// same way with the StatefulSet's replica ids (`mcpgate_0`, `mcpgate_1`, `mcpgate_2`): its
/// pod DNS names are replaced by loopback replicas, and `resolve` (nginx >= 1.27.3, only
/// useful with DNS names) is dropped.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn kubernetes_router_config_routes_to_the_statefulset_replicas() {
    const IDS: [&str; 3] = ["mcpgate_0", "mcpgate_1", "mcpgate_2"];
    let upstream = HttpServer::start("127.0.0.1:0".parse().unwrap(), HttpOptions::default())
        .await
        .unwrap();
    let mut replicas: Vec<Gateway> = IDS
        .iter()
        .map(|id| {
            Gateway::http(
                &upstream.url(),
                &format!("[listen]\nreplica_id = \"{id}\"\ndrain = \"2s\"\n"),
            )
        })
        .collect();
    let mut replacements: Vec<(String, String)> = vec![
        (" resolve;".into(), ";".into()),
        (" resolve max_fails".into(), " max_fails".into()),
        (
            "resolver kube-dns.kube-system.svc.cluster.local".into(),
            "resolver 127.0.0.1".into(),
        ),
    ];
    for (i, r) in replicas.iter().enumerate() {
        replacements.push((
            format!("mcpgate-{i}.mcpgate-replicas.mcpgate.svc.cluster.local:8080"),
            host_port(&r.base),
        ));
    }
    let source = "deploy/kubernetes/gateway/router-config.yaml";
    let nginx = Nginx::start(
        source,
        &configmap_entry(&repo_file(source), "mcpgate.conf"),
        &replacements,
    )
    .await;
    let via = Client::new(&format!("{}/mcp", nginx.base));
    let index = |id: &str| {
        IDS.iter()
            .position(|r| id.strip_prefix(r).is_some_and(|rest| rest.starts_with('-')))
            .unwrap_or_else(|| panic!("session id {id} names no replica of {IDS:?}"))
    };

    let sessions = join_all((0..30).map(|_| via.initialize())).await;
    let mut counts = [0usize; 3];
    for s in &sessions {
        counts[index(&s.id)] += 1;
        let through = s.call("whoami", json!({})).await;
        let at_owner = whoami_raw(&Client::new(&replicas[index(&s.id)].url()), &s.id).await;
        assert_eq!(
            through.text(),
            at_owner.text(),
            "{} through the router reaches its owner",
            s.id
        );
    }
    eprintln!("30 sessions through the Kubernetes router config: {counts:?}");
    assert!(counts.iter().all(|&n| n >= 5), "round-robin: {counts:?}");

    // mcpgate-1 dies: its sessions are told to re-initialise and land on 0 or 2; the others
    // keep working.
    kill(Pid::from_raw(replicas[1].pid() as i32), Signal::SIGKILL).unwrap();
    assert!(
        wait_until(Duration::from_secs(5), || {
            let running = replicas[1].is_running();
            async move { !running }
        })
        .await
    );
    for s in &sessions {
        let r = s.call("whoami", json!({})).await;
        if index(&s.id) == 1 {
            assert_eq!((r.status, r.error_code()), (404, Some(-32001)), "{r:?}");
            let again = via.initialize().await;
            assert_ne!(index(&again.id), 1, "{}", again.id);
            assert!(again.call("whoami", json!({})).await.error_code().is_none());
        } else {
            assert!(
                r.status == 200 && r.error_code().is_none(),
                "{}: {r:?}\n{}",
                s.id,
                nginx.error_log()
            );
        }
    }
    drop(nginx);
}

/// The text of a `key: |` block scalar in a ConfigMap manifest (no YAML parser needed for
/// the one shape the manifests use).
fn configmap_entry(manifest: &str, key: &str) -> String {
    let mut lines = manifest
        .lines()
        .skip_while(|l| l.trim() != format!("{key}: |"));
    let header = lines
        .next()
        .unwrap_or_else(|| panic!("no `{key}: |` in the manifest"));
    let indent = header.len() - header.trim_start().len() + 2;
    let mut out = String::new();
    for l in lines {
        if !l.trim().is_empty() && l.len() - l.trim_start().len() < indent {
            break;
        }
        out.push_str(l.get(indent..).unwrap_or(""));
        out.push('\n');
    }
    out
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

/// A file of the repository, by its path from the workspace root.
fn repo_file(path: &str) -> String {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    std::fs::read_to_string(root.join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// `http://127.0.0.1:1234` → `127.0.0.1:1234`.
fn host_port(base: &str) -> String {
    base.strip_prefix("http://").unwrap_or(base).to_owned()
}

/// `tools/call whoami` on session `id` through `client` (whatever its URL).
async fn whoami_raw(client: &Client, id: &str) -> Reply {
    client
        .post(
            Some(id),
            &json!({"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"whoami","arguments":{}}}),
        )
        .await
}

/// A legacy HTTP+SSE session: the `GET /sse` stream and the POST path it announced.
struct Legacy {
    http: reqwest::Client,
    /// `/message?sessionId=…`, relative to whichever base the POST goes to.
    endpoint: String,
    id: String,
    rx: mpsc::UnboundedReceiver<Value>,
    task: tokio::task::JoinHandle<()>,
}

impl Legacy {
    async fn open(base: &str) -> Legacy {
        let http = reqwest::Client::new();
        let resp = http
            .get(format!("{base}/sse"))
            .header("accept", "text/event-stream")
            .send()
            .await
            .expect("GET /sse");
        assert_eq!(resp.status().as_u16(), 200, "GET /sse through nginx");
        let mut events = sse_stream::SseStream::from_bytes_stream(resp.bytes_stream());
        let first = tokio::time::timeout(Duration::from_secs(10), events.next())
            .await
            .expect("endpoint event in time")
            .expect("stream open")
            .expect("valid SSE");
        assert_eq!(first.event.as_deref(), Some("endpoint"), "{first:?}");
        let endpoint = first.data.unwrap_or_default();
        let id = endpoint
            .split_once("sessionId=")
            .map(|(_, id)| id.to_owned())
            .unwrap_or_else(|| panic!("endpoint without sessionId: {endpoint}"));
        owner(&id);
        let (tx, rx) = mpsc::unbounded_channel();
        let task = tokio::spawn(async move {
            while let Some(Ok(ev)) = events.next().await {
                if let Some(v) = ev
                    .data
                    .as_deref()
                    .and_then(|d| serde_json::from_str(d).ok())
                    && tx.send(v).is_err()
                {
                    return;
                }
            }
        });
        Legacy {
            http,
            endpoint,
            id,
            rx,
            task,
        }
    }

    /// POSTs `msg` to `{base}{endpoint}`; returns the HTTP status.
    async fn post(&self, base: &str, msg: Value) -> u16 {
        self.http
            .post(format!("{base}{}", self.endpoint))
            .header("content-type", "application/json")
            .body(msg.to_string())
            .send()
            .await
            .expect("legacy POST")
            .status()
            .as_u16()
    }

    /// POSTs a request and waits for its response on the stream.
    async fn request(&mut self, base: &str, msg: Value) -> Value {
        let id = msg["id"].clone();
        let status = self.post(base, msg).await;
        assert_eq!(status, 202, "legacy POST to {base}{}", self.endpoint);
        tokio::time::timeout(Duration::from_secs(10), async {
            loop {
                let m = self.rx.recv().await.expect("legacy stream ended");
                if m.get("id") == Some(&id) && m.get("method").is_none() {
                    return m;
                }
            }
        })
        .await
        .unwrap_or_else(|_| panic!("no response to request {id} on the legacy stream"))
    }
}

impl Drop for Legacy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A real nginx, a child of this test, running `deploy/nginx/mcpgate.conf`.
struct Nginx {
    child: Option<Child>,
    /// `http://127.0.0.1:PORT`.
    base: String,
    dir: PathBuf,
}

impl Nginx {
    /// Starts nginx with `shipped` (an http-context config, from the file `source`) with
    /// `replacements` applied (each must occur) and `listen 8080;` moved to a free loopback
    /// port; waits until it answers `/nginx-health`.
    async fn start(source: &str, shipped: &str, replacements: &[(String, String)]) -> Nginx {
        let bin = nginx_binary();
        static N: AtomicUsize = AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!(
            "mcpgate-nginx-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::SeqCst)
        ));
        let mut last_log = String::new();
        for _attempt in 0..5 {
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir).unwrap();
            let port = free_port();
            let mut conf = shipped.to_owned();
            for (from, to) in replacements.iter().cloned().chain([(
                "listen 8080;".to_string(),
                format!("listen 127.0.0.1:{port};"),
            )]) {
                assert!(
                    conf.contains(&from),
                    "{source} no longer contains `{from}`: keep tests/tests/gateway/replicas.rs in step"
                );
                conf = conf.replace(&from, &to);
            }
            std::fs::write(dir.join("mcpgate.conf"), conf).unwrap();
            let d = dir.display();
            std::fs::write(
                dir.join("nginx.conf"),
                format!(
                    "worker_processes 1;\npid {d}/nginx.pid;\nerror_log {d}/error.log info;\n\
                     events {{ worker_connections 1024; }}\n\
                     http {{\n\
                       client_body_temp_path {d}/client_body;\n  proxy_temp_path {d}/proxy;\n\
                       fastcgi_temp_path {d}/fastcgi;\n  uwsgi_temp_path {d}/uwsgi;\n  scgi_temp_path {d}/scgi;\n\
                       include {d}/mcpgate.conf;\n\
                       log_format routed '$request_method $request_uri $status session=$mcpgate_session upstream=$upstream_addr';\n\
                       access_log {d}/access.log routed;\n\
                     }}\n"
                ),
            )
            .unwrap();
            let mut child = Command::new(&bin)
                .arg("-e")
                .arg(dir.join("error.log"))
                .arg("-p")
                .arg(&dir)
                .arg("-c")
                .arg(dir.join("nginx.conf"))
                .args(["-g", "daemon off;"])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(std::fs::File::create(dir.join("stderr.log")).unwrap())
                .spawn()
                .unwrap_or_else(|e| panic!("spawn {}: {e}", bin.display()));
            let base = format!("http://127.0.0.1:{port}");
            let health = format!("{base}/nginx-health");
            let until = Instant::now() + Duration::from_secs(10);
            loop {
                if let Ok(Some(status)) = child.try_wait() {
                    last_log = format!(
                        "nginx exited with {status}:\n{}{}",
                        std::fs::read_to_string(dir.join("stderr.log")).unwrap_or_default(),
                        std::fs::read_to_string(dir.join("error.log")).unwrap_or_default()
                    );
                    break;
                }
                if let Ok(r) = reqwest::get(&health).await
                    && r.status().as_u16() == 200
                {
                    return Nginx {
                        child: Some(child),
                        base,
                        dir,
                    };
                }
                if Instant::now() > until {
                    let _ = child.kill();
                    let _ = child.wait();
                    last_log = format!(
                        "nginx did not answer on {health}:\n{}",
                        std::fs::read_to_string(dir.join("error.log")).unwrap_or_default()
                    );
                    break;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            if !last_log.contains("Address already in use") {
                break;
            }
        }
        panic!("could not start nginx: {last_log}");
    }

    fn error_log(&self) -> String {
        std::fs::read_to_string(self.dir.join("error.log")).unwrap_or_default()
    }

    fn access_log(&self) -> String {
        std::fs::read_to_string(self.dir.join("access.log")).unwrap_or_default()
    }
}

impl Drop for Nginx {
    /// Fast shutdown (SIGTERM) of the master, which stops its workers; SIGKILL for both
    /// if that takes more than 5 s.
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let workers = children_of(child.id());
            let _ = kill(Pid::from_raw(child.id() as i32), Signal::SIGTERM);
            let until = Instant::now() + Duration::from_secs(5);
            loop {
                if let Ok(Some(_)) = child.try_wait() {
                    break;
                }
                if Instant::now() > until {
                    let _ = child.kill();
                    let _ = child.wait();
                    for w in workers {
                        let _ = kill(Pid::from_raw(w as i32), Signal::SIGKILL);
                    }
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The nginx binary: `$MCPGATE_TEST_NGINX`, else `nginx` on `PATH` or in the sbin folders.
fn nginx_binary() -> PathBuf {
    let candidates: Vec<PathBuf> = match std::env::var_os("MCPGATE_TEST_NGINX") {
        Some(p) => vec![p.into()],
        None => std::env::var_os("PATH")
            .map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
            .unwrap_or_default()
            .into_iter()
            .chain(["/usr/sbin", "/usr/local/sbin", "/sbin"].map(PathBuf::from))
            .map(|d| d.join("nginx"))
            .collect(),
    };
    candidates
        .into_iter()
        .find(|p| p.is_file())
        .unwrap_or_else(|| {
            panic!(
                "nginx not found: this test runs mcpgate replicas behind a real nginx. \
                 Install it (Debian/Ubuntu: `apt-get install -y nginx`) or set \
                 MCPGATE_TEST_NGINX to the nginx binary."
            )
        })
}

/// A loopback port that was free a moment ago.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .unwrap()
}
