//! The admin API and the dashboard, on the real binary: sessions opened by a client are
//! listed by id prefix and can be ended by an operator through the normal teardown path
//! (the client's next request gets 404, the stdio child is gone); the dashboard shows them
//! in a real headless Chromium and its "End" button ends them.
//!
//! The browser test needs Debian's Chromium and playwright-core:
//! `apt-get install -y chromium` and `npm ci --prefix tests/browser`.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use mcpgate_tests::{Client, bin, children_of, wait_until};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt};

const TOKEN: &str = "0123456789abcdef0123";

/// `mcpgate` with an `[admin]` section; SIGTERM on drop.
struct AdminGateway {
    child: Option<Child>,
    /// Base URL of the main listener.
    base: String,
    /// Base URL of the admin listener.
    admin: String,
    dir: PathBuf,
    _stdout: BufReader<ChildStdout>,
    http: reqwest::Client,
}

impl AdminGateway {
    /// In front of a stdio `mcpgate-testkit`, admin on an ephemeral loopback port.
    fn start() -> AdminGateway {
        static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = N.fetch_add(1, Ordering::Relaxed);
        let dir =
            std::env::temp_dir().join(format!("mcpgate-admin-test-{}-{n}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let toml = format!(
            "[[server]]\nname = \"up\"\ntransport = \"stdio\"\ncommand = [{:?}, \"stdio\"]\n\n\
             [admin]\naddr = \"127.0.0.1:0\"\ntoken = \"{TOKEN}\"\n",
            bin("mcpgate-testkit").display().to_string()
        );
        let cfg = dir.join("mcpgate.toml");
        std::fs::write(&cfg, toml).unwrap();
        let log = dir.join("stderr.log");
        let mut child = Command::new(bin("mcpgate"))
            .arg("--config")
            .arg(&cfg)
            .arg("--listen")
            .arg("127.0.0.1:0")
            .env(
                "RUST_LOG",
                std::env::var("MCPGATE_TEST_LOG").unwrap_or_else(|_| "info".into()),
            )
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .expect("spawn mcpgate");
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut line = || {
            let mut l = String::new();
            stdout.read_line(&mut l).unwrap();
            l.trim().to_owned()
        };
        let first = line();
        let second = line();
        let fail = |what: &str, l: &str| -> ! {
            panic!(
                "unexpected {what} line {l:?}; log:\n{}",
                std::fs::read_to_string(&log).unwrap_or_default()
            )
        };
        let base = match first.strip_prefix("mcpgate listening on ") {
            Some(b) => b.to_owned(),
            None => fail("first", &first),
        };
        let admin = match second.strip_prefix("mcpgate admin listening on ") {
            // A configured token is not printed.
            Some(a) if !a.contains("token=") => a.to_owned(),
            _ => fail("second", &second),
        };
        AdminGateway {
            child: Some(child),
            base,
            admin,
            dir,
            _stdout: stdout,
            http: reqwest::Client::builder()
                .timeout(Duration::from_secs(30))
                .build()
                .unwrap(),
        }
    }

    fn pid(&self) -> u32 {
        self.child.as_ref().map(Child::id).unwrap_or(0)
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("stderr.log")).unwrap_or_default()
    }

    /// An admin API call with the token: status and JSON body.
    async fn api(&self, method: reqwest::Method, path: &str) -> (u16, Value) {
        let r = self
            .http
            .request(method, format!("{}{path}", self.admin))
            .bearer_auth(TOKEN)
            .send()
            .await
            .unwrap();
        let status = r.status().as_u16();
        (status, r.json().await.unwrap_or(Value::Null))
    }

    async fn sessions(&self) -> Vec<Value> {
        let (status, v) = self.api(reqwest::Method::GET, "/api/sessions").await;
        assert_eq!(status, 200, "{v}");
        v.as_array().unwrap().clone()
    }
}

impl Drop for AdminGateway {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = kill(Pid::from_raw(child.id() as i32), Signal::SIGTERM);
            let dir = self.dir.clone();
            std::thread::spawn(move || {
                let until = Instant::now() + Duration::from_secs(30);
                while Instant::now() < until {
                    if let Ok(Some(_)) = child.try_wait() {
                        let _ = std::fs::remove_dir_all(&dir);
                        return;
                    }
                    std::thread::sleep(Duration::from_millis(20));
                }
                let _ = child.kill();
                let _ = child.wait();
                let _ = std::fs::remove_dir_all(&dir);
            });
        }
    }
}

/// The row of the session whose full id is `id`.
fn row_of<'a>(list: &'a [Value], id: &str) -> Option<&'a Value> {
    list.iter()
        .find(|s| s["id_prefix"].as_str().is_some_and(|p| id.starts_with(p)))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_lists_and_ends_sessions() {
    let gw = AdminGateway::start();
    // Without the token: nothing.
    let r = gw
        .http
        .get(format!("{}/api/sessions", gw.admin))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 401);
    assert!(r.headers().contains_key("www-authenticate"));
    let (status, _) = gw.api(reqwest::Method::GET, "/healthz").await;
    assert_eq!(status, 200);

    let client = Client::new(&format!("{}/mcp", gw.base));
    let a = client.initialize().await;
    let b = client.initialize().await;
    assert_eq!(a.call("echo", json!({"text": "a"})).await.text(), "a");

    let list = gw.sessions().await;
    assert_eq!(list.len(), 2, "{list:?}");
    let ra = row_of(&list, &a.id).unwrap_or_else(|| panic!("no row for A in {list:?}"));
    let rb = row_of(&list, &b.id).unwrap_or_else(|| panic!("no row for B in {list:?}"));
    let pa = ra["id_prefix"].as_str().unwrap().to_owned();
    let pb = rb["id_prefix"].as_str().unwrap().to_owned();
    assert_eq!(pa, a.id[..8]);
    assert_eq!(pb, b.id[..8]);
    for r in [ra, rb] {
        assert_eq!(r["server"], "up");
        assert_eq!(r["front"], "streamable-http");
        assert_eq!(r["upstream"], "stdio");
        assert!(r["child_pid"].is_u64(), "{r}");
    }
    assert!(ra["messages_in"].as_u64().unwrap() >= 3, "{ra}");
    let pid_a = ra["child_pid"].as_u64().unwrap() as u32;
    assert!(children_of(gw.pid()).contains(&pid_a));
    // The sampler sees both before A ends (it samples once a second).
    let both = wait_until(Duration::from_secs(5), || async {
        let (_, s) = gw.api(reqwest::Method::GET, "/api/stats").await;
        s["samples"]
            .as_array()
            .and_then(|v| v.last())
            .is_some_and(|x| x["active"]["up"] == 2)
    })
    .await;
    assert!(both, "the stats never showed 2 sessions");
    // The full ids never appear.
    let raw = gw
        .http
        .get(format!("{}/api/sessions", gw.admin))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(!raw.contains(&a.id) && !raw.contains(&b.id));

    // The redacted config: the token is not in it.
    let (status, cfg) = gw.api(reqwest::Method::GET, "/api/config").await;
    assert_eq!(status, 200);
    assert_eq!(cfg["admin"]["token"], "<redacted>");
    assert!(!cfg.to_string().contains(TOKEN));

    // End A by prefix: awaited, so by the answer the child is gone.
    let started = Instant::now();
    let (status, summary) = gw
        .api(reqwest::Method::DELETE, &format!("/api/sessions/{pa}"))
        .await;
    assert_eq!(status, 200, "{summary}; log:\n{}", gw.log());
    assert_eq!(summary["id_prefix"], pa.as_str());
    assert_eq!(summary["child_pid"], pid_a);
    assert!(
        !children_of(gw.pid()).contains(&pid_a),
        "A's child {pid_a} outlived the admin DELETE ({:?})",
        started.elapsed()
    );
    let r = a.call("echo", json!({"text": "again"})).await;
    assert_eq!(
        r.status, 404,
        "A's next request after the admin ended it: {r:?}"
    );
    let list = gw.sessions().await;
    assert_eq!(list.len(), 1, "{list:?}");
    assert!(row_of(&list, &b.id).is_some());
    assert_eq!(b.call("echo", json!({"text": "b"})).await.text(), "b");
    // Again: 404. Too short: 400.
    let (status, _) = gw
        .api(reqwest::Method::DELETE, &format!("/api/sessions/{pa}"))
        .await;
    assert_eq!(status, 404);
    let (status, _) = gw
        .api(
            reqwest::Method::DELETE,
            &format!("/api/sessions/{}", &pb[..7]),
        )
        .await;
    assert_eq!(status, 400);

    // The stats saw two sessions, then one, and A's close.
    let saw = wait_until(Duration::from_secs(5), || async {
        let (_, s) = gw.api(reqwest::Method::GET, "/api/stats").await;
        let samples = s["samples"].as_array().cloned().unwrap_or_default();
        samples.iter().any(|x| x["active"]["up"] == 2)
            && samples.last().is_some_and(|x| x["active"]["up"] == 1)
            && samples
                .iter()
                .map(|x| x["closed"].as_u64().unwrap_or(0))
                .sum::<u64>()
                == 1
    })
    .await;
    assert!(
        saw,
        "stats: {}",
        gw.api(reqwest::Method::GET, "/api/stats").await.1
    );

    // The closing reason is counted as an admin close.
    let metrics = reqwest::get(format!("{}/metrics", gw.base))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        metrics.contains("mcpgate_sessions_closed_total{reason=\"admin\"} 1"),
        "{metrics}"
    );
    assert_eq!(b.delete().await, 200);
}

/// What the browser test needs; a missing piece fails the test with how to install it.
fn browser_prerequisites() -> (PathBuf, PathBuf) {
    let chromium =
        PathBuf::from(std::env::var("CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".into()));
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("browser");
    let mut missing = Vec::new();
    if !chromium.exists() {
        missing.push(format!(
            "{} not found: apt-get update && apt-get install -y chromium",
            chromium.display()
        ));
    }
    if !dir
        .join("node_modules/playwright-core/package.json")
        .exists()
    {
        missing.push("tests/browser/node_modules is missing: npm ci --prefix tests/browser".into());
    }
    if Command::new("node").arg("--version").output().is_err() {
        missing.push("node not found (need Node >= 20)".into());
    }
    assert!(
        missing.is_empty(),
        "the dashboard browser test cannot run:\n  {}",
        missing.join("\n  ")
    );
    (chromium, dir.join("dashboard.mjs"))
}

/// Reads the script's stdout until a line equal to `want` (or starting with `FAIL`).
async fn expect_line<R: tokio::io::AsyncBufRead + Unpin>(
    lines: &mut tokio::io::Lines<R>,
    want: &str,
    limit: Duration,
    seen: &mut Vec<String>,
) -> Result<(), String> {
    let until = tokio::time::Instant::now() + limit;
    loop {
        match tokio::time::timeout_at(until, lines.next_line()).await {
            Err(_) => return Err(format!("no {want:?} within {limit:?}")),
            Ok(Err(e)) => return Err(format!("reading the script's output: {e}")),
            Ok(Ok(None)) => return Err(format!("the script ended before {want:?}")),
            Ok(Ok(Some(l))) => {
                seen.push(l.clone());
                if l == want {
                    return Ok(());
                }
                if l.starts_with("FAIL") {
                    return Err(l);
                }
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dashboard_in_a_real_browser() {
    let (chromium, script) = browser_prerequisites();
    let started = Instant::now();
    let gw = AdminGateway::start();
    let client = Client::new(&format!("{}/mcp", gw.base));
    let a = client.initialize().await;
    let b = client.initialize().await;
    let c = client.initialize().await;
    let list = gw.sessions().await;
    let pid_a = row_of(&list, &a.id).unwrap()["child_pid"].as_u64().unwrap() as u32;

    // Traffic while the page is open: C keeps a request in flight, and short sessions
    // come and go, so the charts have something to show.
    let stop = Arc::new(AtomicBool::new(false));
    let busy = {
        let stop = stop.clone();
        tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                let _ = c.call("slow", json!({"ms": 700})).await;
            }
            c.delete().await
        })
    };
    let churn = {
        let stop = stop.clone();
        let client = client.clone();
        tokio::spawn(async move {
            let mut n = 0u32;
            while !stop.load(Ordering::Relaxed) && n < 60 {
                let s = client.initialize().await;
                let _ = s.call("echo", json!({"text": "hi"})).await;
                tokio::time::sleep(Duration::from_millis(400)).await;
                s.delete().await;
                n += 1;
                tokio::time::sleep(Duration::from_millis(300 + 200 * u64::from(n % 3))).await;
            }
        })
    };

    let target = bin("mcpgate")
        .parent()
        .and_then(Path::parent)
        .unwrap()
        .to_path_buf();
    let artifacts = target.join("artifacts");
    std::fs::create_dir_all(&artifacts).unwrap();
    let shots = artifacts.join("dashboard");
    for old in [
        "1-listed",
        "2-b-gone",
        "3-a-ended",
        "4-wrong-token",
        "failure",
    ] {
        let _ = std::fs::remove_file(artifacts.join(format!("dashboard-{old}.png")));
    }
    let url = format!("{}/#token={TOKEN}", gw.admin);
    let stderr_log = gw.dir.join("browser.log");
    let mut node = tokio::process::Command::new("node")
        .arg(&script)
        .arg(&url)
        .arg(&shots)
        .arg(&a.id[..8])
        .arg(&b.id[..8])
        .env("CHROMIUM", &chromium)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&stderr_log).unwrap())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn node");
    let mut stdin = node.stdin.take().unwrap();
    let mut lines = tokio::io::BufReader::new(node.stdout.take().unwrap()).lines();
    let mut seen = Vec::new();
    let fail = |why: String, seen: &[String]| -> ! {
        panic!(
            "dashboard browser test: {why}\nscript output:\n{}\nscript stderr:\n{}\ngateway log (tail):\n{}",
            seen.join("\n"),
            std::fs::read_to_string(&stderr_log).unwrap_or_default(),
            gw.log()
                .lines()
                .rev()
                .take(40)
                .collect::<Vec<_>>()
                .into_iter()
                .rev()
                .collect::<Vec<_>>()
                .join("\n")
        )
    };

    // 1. The page shows A and B.
    if let Err(e) = expect_line(&mut lines, "ROWS", Duration::from_secs(60), &mut seen).await {
        fail(e, &seen);
    }
    let rows_at = started.elapsed();
    // 2. B's client ends B; the page must drop its row by itself.
    assert_eq!(b.delete().await, 200);
    stdin.write_all(b"B_DELETED\n").await.unwrap();
    stdin.flush().await.unwrap();
    // 3. The script clicks "End" on A's row.
    if let Err(e) = expect_line(&mut lines, "A_ENDED", Duration::from_secs(30), &mut seen).await {
        fail(e, &seen);
    }
    let r = a.call("echo", json!({"text": "after"})).await;
    assert_eq!(
        r.status, 404,
        "A's next request after the dashboard ended it: {r:?}"
    );
    assert!(
        !children_of(gw.pid()).contains(&pid_a),
        "A's child {pid_a} is still running"
    );
    let list = gw.sessions().await;
    assert!(
        row_of(&list, &a.id).is_none() && row_of(&list, &b.id).is_none(),
        "{list:?}"
    );
    if let Err(e) = expect_line(&mut lines, "OK", Duration::from_secs(30), &mut seen).await {
        fail(e, &seen);
    }
    let status = tokio::time::timeout(Duration::from_secs(20), node.wait())
        .await
        .unwrap_or_else(|_| fail("the script did not exit".into(), &seen))
        .unwrap();
    if !status.success() {
        fail(format!("the script exited with {status}"), &seen);
    }
    stop.store(true, Ordering::Relaxed);
    let _ = tokio::time::timeout(Duration::from_secs(10), busy).await;
    churn.abort();
    for shot in ["1-listed", "2-b-gone", "3-a-ended", "4-wrong-token"] {
        let p = artifacts.join(format!("dashboard-{shot}.png"));
        assert!(p.exists(), "no screenshot {}", p.display());
    }
    eprintln!(
        "dashboard browser test: rows shown after {rows_at:?}, done after {:?}; screenshots in {}",
        started.elapsed(),
        artifacts.display()
    );
}
