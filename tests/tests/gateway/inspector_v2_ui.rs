//! The real MCP Inspector 2.x web UI (npm `@modelcontextprotocol/inspector` 2.12.0) in
//! headless Chromium, served by `mcpgate inspector` itself with a catalogue of two
//! servers: it connects to the built-in demo server over stdio, lists the tools, calls one
//! and shows the result, shows the log notifications of another; its connect switch is
//! turned off and on 20 times; then it connects to a Streamable HTTP server of the
//! catalogue and calls a tool there. Each step leaves exactly the sessions and children
//! the UI holds, and closing the browser leaves none.
//! Screenshots: `target/artifacts/inspector-v2-*.png`.
//!
//! Needs Node >= 22, the npm packages and Chromium (the test fails, naming what is missing):
//! `tests/inspector/setup` and `apt-get install -y chromium`.

use std::time::{Duration, Instant};

use mcpgate_testkit::{HttpOptions, HttpServer};
use mcpgate_tests::browser::{self, Script};
use mcpgate_tests::inspector2::Inspector2;
use mcpgate_tests::{bin, children_of, wait_until};

/// Waits until the backend has `sessions` sessions and `children` child processes.
async fn converges_to(insp: &Inspector2, sessions: usize, children: usize) -> Result<(), String> {
    let ok = wait_until(Duration::from_secs(15), || async {
        insp.metric("mcpgate_sessions_active").await == sessions as f64
            && children_of(insp.gw.pid()).len() == children
    })
    .await;
    if ok {
        Ok(())
    } else {
        Err(format!(
            "expected {sessions} session(s) and {children} child(ren): sessions_active {}, children {:?}",
            insp.metric("mcpgate_sessions_active").await,
            children_of(insp.gw.pid())
        ))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_inspector_2_ui_served_by_mcpgate() {
    let (node, script, chromium) = browser::inspector_prerequisites(
        "the Inspector 2.x UI",
        "node_modules/inspector2/clients/web/dist/index.html",
        "inspector_v2_ui.mjs",
    );
    let started = Instant::now();
    const SHOTS: [&str; 5] = [
        "1-catalogue",
        "2-connected",
        "3-result",
        "4-notification",
        "5-http",
    ];
    let artifacts = browser::artifacts("inspector-v2", &SHOTS);
    let up = HttpServer::start("127.0.0.1:0".parse().unwrap(), HttpOptions::default())
        .await
        .unwrap();
    let toml = format!(
        "[[stdio]]\nname = \"demo\"\ncommand = {:?}\nargs = [\"demo-server\"]\n\
         [[url]]\nname = \"web\"\nprefix = {:?}\ntransports = [\"streamable-http\"]\n",
        bin("mcpgate").display().to_string(),
        up.url()
    );
    let insp = Inspector2::start(&toml, &[]);
    let ui_url = insp.gw.stdout[2]
        .strip_prefix("mcpgate inspector UI: ")
        .unwrap_or_else(|| panic!("no UI URL in {:?}", insp.gw.stdout))
        .to_owned();
    let dir = std::env::temp_dir().join(format!("mcpgate-inspector-v2-ui-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let tag = "note-from-demo-7c1";
    let mut ui = tokio::process::Command::new(&node);
    ui.arg(&script)
        .arg(&ui_url)
        .arg(artifacts.join("inspector-v2"))
        .arg(tag)
        .env("CHROMIUM", &chromium);
    let mut script = Script::spawn(ui, dir.join("browser.log"));
    let fail = |why: String, script: &Script, insp: &Inspector2| -> ! {
        panic!(
            "{}",
            script.report("Inspector 2.x browser test", &why, &insp.gw.log(), 60)
        )
    };

    // 1. Connected to the demo server (one session, one child), a tool called, a
    //    notification seen.
    if let Err(e) = script.expect("CALLED", Duration::from_secs(90)).await {
        fail(e, &script, &insp);
    }
    if let Err(e) = converges_to(&insp, 1, 1).await {
        fail(e, &script, &insp);
    }
    let called_at = started.elapsed();
    // 2. 20 reconnects: still exactly one session and one child.
    if let Err(e) = script
        .expect("RECONNECTED ", Duration::from_secs(150))
        .await
    {
        fail(e, &script, &insp);
    }
    if let Err(e) = converges_to(&insp, 1, 1).await {
        fail(format!("after the reconnects: {e}"), &script, &insp);
    }
    let opened = insp.metric("mcpgate_sessions_opened_total").await;
    assert!(opened >= 21.0, "only {opened} sessions were opened");
    script.send("NEXT").await;
    // 3. The HTTP server: its session, no child left of the demo server.
    if let Err(e) = script.expect("HTTP", Duration::from_secs(60)).await {
        fail(e, &script, &insp);
    }
    if let Err(e) = converges_to(&insp, 1, 0).await {
        fail(format!("connected to the HTTP server: {e}"), &script, &insp);
    }
    assert_eq!(up.stats().sessions_active, 1);
    // 4. The browser closes without disconnecting: nothing is left.
    script.send("CLOSE").await;
    if let Err(e) = script.expect("OK", Duration::from_secs(60)).await {
        fail(e, &script, &insp);
    }
    if let Err(e) = script.finish(Duration::from_secs(20)).await {
        fail(e, &script, &insp);
    }
    if let Err(e) = converges_to(&insp, 0, 0).await {
        fail(format!("after the browser closed: {e}"), &script, &insp);
    }
    assert!(
        wait_until(Duration::from_secs(10), || async {
            up.stats().sessions_active == 0
        })
        .await,
        "the HTTP server's session was not ended"
    );
    browser::assert_screenshots(&artifacts, "inspector-v2", &SHOTS);
    eprintln!(
        "inspector 2.x UI test: called a tool after {called_at:?}, done after {:?} ({opened} sessions); screenshots in {}",
        started.elapsed(),
        artifacts.display()
    );
    let _ = std::fs::remove_dir_all(&dir);
}
