//! The admin API and the dashboard, on the real binary: sessions opened by a client are
//! listed by id prefix and can be ended by an operator through the normal teardown path
//! (the client's next request gets 404, the stdio child is gone); the dashboard shows them
//! in a real headless Chromium and its "End" button ends them.
//!
//! The browser test needs Debian's Chromium and playwright-core:
//! `apt-get install -y chromium` and `npm ci --prefix tests/browser`.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use mcpgate_tests::admin::Admin;
use mcpgate_tests::browser::{self, Script};
use mcpgate_tests::{Client, Gateway, Launch, bin, children_of, wait_until};
use serde_json::{Value, json};

const TOKEN: &str = "0123456789abcdef0123";

/// `mcpgate` in front of a stdio `mcpgate-testkit`, admin on an ephemeral loopback port.
fn start() -> (Gateway, Admin) {
    let toml = format!(
        "[[server]]\nname = \"up\"\ntransport = \"stdio\"\ncommand = [{:?}, \"stdio\"]\n\n\
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
    (gw, admin)
}

/// The row of the session whose full id is `id`.
fn row_of<'a>(list: &'a [Value], id: &str) -> Option<&'a Value> {
    list.iter()
        .find(|s| s["id_prefix"].as_str().is_some_and(|p| id.starts_with(p)))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_lists_and_ends_sessions() {
    let (gw, admin) = start();
    // Without the token: nothing.
    let r = admin
        .http
        .get(format!("{}/api/sessions", admin.base))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 401);
    assert!(r.headers().contains_key("www-authenticate"));
    let (status, _) = admin.api(reqwest::Method::GET, "/healthz").await;
    assert_eq!(status, 200);

    let client = Client::new(&format!("{}/mcp", gw.base));
    let a = client.initialize().await;
    let b = client.initialize().await;
    assert_eq!(a.call("echo", json!({"text": "a"})).await.text(), "a");

    let list = admin.sessions().await;
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
    // The child's last stderr lines (the testkit writes a line per request there).
    let said = wait_until(Duration::from_secs(5), || async {
        let list = admin.sessions().await;
        row_of(&list, &a.id).is_some_and(|r| {
            r["child_stderr"].as_array().is_some_and(|l| {
                l.iter()
                    .any(|x| x.as_str().is_some_and(|x| x.contains("tools/call echo")))
            })
        })
    })
    .await;
    assert!(said, "no stderr tail for A: {:?}", admin.sessions().await);
    let pid_a = ra["child_pid"].as_u64().unwrap() as u32;
    assert!(children_of(gw.pid()).contains(&pid_a));
    // The sampler sees both before A ends (it samples once a second).
    let both = wait_until(Duration::from_secs(5), || async {
        let (_, s) = admin.api(reqwest::Method::GET, "/api/stats").await;
        s["samples"]
            .as_array()
            .and_then(|v| v.last())
            .is_some_and(|x| x["active"]["up"] == 2)
    })
    .await;
    assert!(both, "the stats never showed 2 sessions");
    // The full ids never appear.
    let raw = admin.text("/api/sessions").await;
    assert!(!raw.contains(&a.id) && !raw.contains(&b.id));

    // The redacted config: the token is not in it.
    let (status, cfg) = admin.api(reqwest::Method::GET, "/api/config").await;
    assert_eq!(status, 200);
    assert_eq!(cfg["admin"]["token"], "<redacted>");
    assert!(!cfg.to_string().contains(TOKEN));

    // End A by prefix: awaited, so by the answer the child is gone.
    let started = Instant::now();
    let (status, summary) = admin
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
    let list = admin.sessions().await;
    assert_eq!(list.len(), 1, "{list:?}");
    assert!(row_of(&list, &b.id).is_some());
    assert_eq!(b.call("echo", json!({"text": "b"})).await.text(), "b");
    // Again: 404. Too short: 400.
    let (status, _) = admin
        .api(reqwest::Method::DELETE, &format!("/api/sessions/{pa}"))
        .await;
    assert_eq!(status, 404);
    let (status, _) = admin
        .api(
            reqwest::Method::DELETE,
            &format!("/api/sessions/{}", &pb[..7]),
        )
        .await;
    assert_eq!(status, 400);

    // The stats saw two sessions, then one, and A's close.
    let saw = wait_until(Duration::from_secs(5), || async {
        let (_, s) = admin.api(reqwest::Method::GET, "/api/stats").await;
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
        admin.api(reqwest::Method::GET, "/api/stats").await.1
    );

    // The closing reason is counted as an admin close.
    let metrics = gw.metrics_text().await;
    assert!(
        metrics.contains("mcpgate_sessions_closed_total{reason=\"admin\"} 1"),
        "{metrics}"
    );
    assert_eq!(b.delete().await, 200);
}

/// What the browser test needs; a missing piece fails the test with how to install it.
fn browser_prerequisites() -> (PathBuf, PathBuf) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("browser");
    let mut missing = Vec::new();
    let chromium = browser::chromium(&mut missing);
    if !dir
        .join("node_modules/playwright-core/package.json")
        .exists()
    {
        missing.push("tests/browser/node_modules is missing: npm ci --prefix tests/browser".into());
    }
    if std::process::Command::new("node")
        .arg("--version")
        .output()
        .is_err()
    {
        missing.push("node not found (need Node >= 20)".into());
    }
    assert!(
        missing.is_empty(),
        "the dashboard browser test cannot run:\n  {}",
        missing.join("\n  ")
    );
    (chromium, dir.join("dashboard.mjs"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dashboard_in_a_real_browser() {
    let (chromium, script) = browser_prerequisites();
    let started = Instant::now();
    let (gw, admin) = start();
    let client = Client::new(&format!("{}/mcp", gw.base));
    let a = client.initialize().await;
    let b = client.initialize().await;
    let c = client.initialize().await;
    let list = admin.sessions().await;
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

    const SHOTS: [&str; 4] = ["1-listed", "2-b-gone", "3-a-ended", "4-wrong-token"];
    let artifacts = browser::artifacts("dashboard", &SHOTS);
    let url = format!("{}/#token={TOKEN}", admin.base);
    let mut node = tokio::process::Command::new("node");
    node.arg(&script)
        .arg(&url)
        .arg(artifacts.join("dashboard"))
        .arg(&a.id[..8])
        .arg(&b.id[..8])
        .env("CHROMIUM", &chromium);
    let mut script = Script::spawn(node, gw.config.with_file_name("browser.log"));
    let fail = |why: String, script: &Script| -> ! {
        panic!(
            "{}",
            script.report("dashboard browser test", &why, &gw.log(), 40)
        )
    };

    // 1. The page shows A and B.
    if let Err(e) = script.expect("ROWS", Duration::from_secs(60)).await {
        fail(e, &script);
    }
    let rows_at = started.elapsed();
    // 2. B's client ends B; the page must drop its row by itself.
    assert_eq!(b.delete().await, 200);
    script.send("B_DELETED").await;
    // 3. The script clicks "End" on A's row.
    if let Err(e) = script.expect("A_ENDED", Duration::from_secs(30)).await {
        fail(e, &script);
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
    let list = admin.sessions().await;
    assert!(
        row_of(&list, &a.id).is_none() && row_of(&list, &b.id).is_none(),
        "{list:?}"
    );
    if let Err(e) = script.expect("OK", Duration::from_secs(30)).await {
        fail(e, &script);
    }
    if let Err(e) = script.finish(Duration::from_secs(20)).await {
        fail(e, &script);
    }
    stop.store(true, Ordering::Relaxed);
    let _ = tokio::time::timeout(Duration::from_secs(10), busy).await;
    churn.abort();
    browser::assert_screenshots(&artifacts, "dashboard", &SHOTS);
    eprintln!(
        "dashboard browser test: rows shown after {rows_at:?}, done after {:?}; screenshots in {}",
        started.elapsed(),
        artifacts.display()
    );
}
