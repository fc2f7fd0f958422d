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

use std::path::PathBuf;
use std::time::{Duration, Instant};

use mcpgate_tests::browser::{self, Script};
use mcpgate_tests::inspector::Inspector;
use mcpgate_tests::{bin, children_of, wait_until};

/// Node >= 22, the 1.x UI, playwright-core and Chromium.
fn prerequisites() -> (PathBuf, PathBuf, PathBuf) {
    browser::inspector_prerequisites(
        "the Inspector 1.x UI",
        "node_modules/@modelcontextprotocol/inspector/client/dist/index.html",
        "inspector_ui.mjs",
    )
}

/// `mcpgate inspector` for a UI served from `ui_origin`, allowing the built-in demo server
/// (`-- mcpgate demo-server`), with a generated token; its ready URL.
fn start_proxy(ui_origin: &str) -> (Inspector, String) {
    let mcpgate = bin("mcpgate").display().to_string();
    let proxy = Inspector::launch("", ui_origin, &["--", &mcpgate, "demo-server"], None);
    let ready = proxy.banner[1]
        .strip_prefix("mcpgate inspector UI: ")
        .unwrap_or_else(|| panic!("no ready URL in {:?}", proxy.banner))
        .to_owned();
    assert!(
        proxy.token.is_some() && ready.contains("MCP_PROXY_AUTH_TOKEN="),
        "{:?}",
        proxy.banner
    );
    (proxy, ready)
}

/// Waits until the gateway has exactly `n` sessions and `n` children.
async fn converges_to(proxy: &Inspector, n: usize) -> Result<(), String> {
    let ok = wait_until(Duration::from_secs(15), || async {
        proxy.metric("mcpgate_sessions_active").await == n as f64
            && proxy.metric("mcpgate_stdio_children").await == n as f64
            && children_of(proxy.pid()).len() == n
    })
    .await;
    if ok {
        Ok(())
    } else {
        Err(format!(
            "expected {n} session(s) and child(ren): sessions_active {}, stdio_children {}, children {:?}",
            proxy.metric("mcpgate_sessions_active").await,
            proxy.metric("mcpgate_stdio_children").await,
            children_of(proxy.pid())
        ))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_inspector_ui_uses_mcpgate_as_its_proxy() {
    let (node, script, chromium) = prerequisites();
    let started = Instant::now();
    const SHOTS: [&str; 6] = [
        "1-connected",
        "2-tools",
        "3-result",
        "4-after-restarts",
        "5-after-burst",
        "6-after-reload",
    ];
    let artifacts = browser::artifacts("inspector", &SHOTS);
    let dir = std::env::temp_dir().join(format!("mcpgate-inspector-ui-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mcpgate = bin("mcpgate").display().to_string();
    let mut ui = tokio::process::Command::new(&node);
    ui.arg(&script)
        .arg(artifacts.join("inspector"))
        .arg(&mcpgate)
        .arg("demo-server")
        .env("CHROMIUM", &chromium);
    let mut script = Script::spawn(ui, dir.join("browser.log"));

    // 1. The UI is served; mcpgate starts with its origin and prints the ready URL.
    let origin = match script.expect("UI ", Duration::from_secs(30)).await {
        Ok(l) => l["UI ".len()..].to_owned(),
        Err(e) => panic!("{e}; script output: {:?}", script.seen),
    };
    let (mut proxy, ready) = start_proxy(&origin);
    let fail = |why: String, script: &Script, proxy: &Inspector| -> ! {
        panic!(
            "{}",
            script.report("Inspector browser test", &why, &proxy.log(), 60)
        )
    };
    script.send(&format!("OPEN {ready}")).await;

    // 2. Connected, tools listed, echo called, its result shown.
    if let Err(e) = script.expect("CALLED", Duration::from_secs(90)).await {
        fail(e, &script, &proxy);
    }
    if let Err(e) = converges_to(&proxy, 1).await {
        fail(e, &script, &proxy);
    }
    let called_at = started.elapsed();

    // 3. Restart clicked 20 times, each as soon as it can be; then a burst of 20 clicks;
    //    then the page reloaded. Each time: exactly the streams the browser holds.
    for stage in ["after the clicks", "after the burst", "after the reload"] {
        let live = match script.expect("LIVE ", Duration::from_secs(120)).await {
            Ok(l) => l["LIVE ".len()..].trim().parse::<usize>().unwrap(),
            Err(e) => fail(e, &script, &proxy),
        };
        if !proxy.is_running() {
            fail(format!("mcpgate exited {stage}"), &script, &proxy);
        }
        if let Err(e) = converges_to(&proxy, live).await {
            fail(
                format!("{stage}, the browser holds {live} stream(s): {e}"),
                &script,
                &proxy,
            );
        }
        eprintln!("inspector UI {stage}: {live} open stream(s), as many sessions and children");
        script
            .send(if stage == "after the reload" {
                "CLOSE"
            } else {
                "NEXT"
            })
            .await;
    }
    if let Err(e) = script.expect("OK", Duration::from_secs(60)).await {
        fail(e, &script, &proxy);
    }
    if let Err(e) = script.finish(Duration::from_secs(20)).await {
        fail(e, &script, &proxy);
    }
    // 4. The browser is gone: so is every session and child; mcpgate is still up.
    if let Err(e) = converges_to(&proxy, 0).await {
        fail(format!("after the browser closed: {e}"), &script, &proxy);
    }
    assert!(proxy.is_running(), "mcpgate exited");
    let opened = proxy.metric("mcpgate_sessions_opened_total").await;
    assert!(opened >= 22.0, "only {opened} sessions were opened");
    browser::assert_screenshots(&artifacts, "inspector", &SHOTS);
    eprintln!(
        "inspector UI test: called a tool after {called_at:?}, done after {:?} ({opened} sessions); screenshots in {}",
        started.elapsed(),
        artifacts.display()
    );
    for l in script
        .seen
        .iter()
        .filter(|l| l.starts_with("STORM") || l.starts_with("status"))
    {
        eprintln!("  {l}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
