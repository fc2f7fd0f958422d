//! The bubblewrap sandbox: a child sees the system read-only, only the configured paths,
//! its own `/tmp` (gone after DELETE), no `/etc/shadow`, no network unless allowed. The
//! same probes without the sandbox succeed, so each refusal is the sandbox's.

use std::time::Duration;

use mcpgate_tests::{Client, Gateway, Launch, Session, bin, wait_until};
use serde_json::json;

/// A stdio testkit server named `name`, sandboxed with `sandbox` (TOML lines), or not.
fn server(name: &str, sandbox: Option<&str>) -> String {
    let tk = bin("mcpgate-testkit");
    let dir = tk.parent().unwrap().display().to_string();
    let mut s = format!(
        "[[server]]\nname = \"{name}\"\ntransport = \"stdio\"\ncommand = [{:?}, \"stdio\"]\n",
        tk.display().to_string()
    );
    if let Some(extra) = sandbox {
        s.push_str(&format!("[server.sandbox]\npaths = [{dir:?}]\n{extra}\n"));
    }
    s
}

async fn probe(s: &Session, tool: &str, args: serde_json::Value) -> (bool, String) {
    let r = s.call(tool, args).await;
    let res = &r.last()["result"];
    let text = res["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    (res["isError"] != true && !text.is_empty(), text)
}

/// The host directories the gateway made for private `/tmp`s that hold `file`.
fn tmp_dirs_holding(base: &std::path::Path, file: &str) -> Vec<std::path::PathBuf> {
    std::fs::read_dir(base)
        .map(|d| {
            d.flatten()
                .map(|e| e.path())
                .filter(|p| p.join(file).exists())
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test]
async fn a_sandboxed_child_sees_only_its_own_tmp_and_no_network() {
    let base = std::env::temp_dir().join(format!("mcpgate-sandbox-{}", std::process::id()));
    std::fs::create_dir_all(&base).unwrap();
    let toml = [
        server("boxed", Some("")),
        server("boxed-net", Some("network = \"host\"")),
        server("open", None),
    ]
    .concat();
    let gw = Gateway::launch(
        &toml,
        Launch {
            env: vec![("TMPDIR".into(), base.display().to_string())],
            ..Launch::default()
        },
    );
    let boxed = Client::new(&format!("{}/servers/boxed/mcp", gw.base));
    let (a, b) = (boxed.initialize().await, boxed.initialize().await);
    let open = Client::new(&format!("{}/servers/open/mcp", gw.base))
        .initialize()
        .await;

    // Each session's /tmp is its own.
    let file = "/tmp/mine.txt";
    let (ok, said) = probe(
        &a,
        "write_file",
        json!({"path": file, "text": "a's secret"}),
    )
    .await;
    assert!(ok, "a writes its /tmp: {said}");
    assert_eq!(
        probe(&a, "read_file", json!({"path": file})).await,
        (true, "a's secret".into())
    );
    let (ok, said) = probe(&b, "read_file", json!({"path": file})).await;
    assert!(
        !ok && said.contains("No such file"),
        "b cannot see a's file: {said}"
    );
    let holding = tmp_dirs_holding(&base, "mine.txt");
    assert_eq!(
        holding.len(),
        1,
        "one host directory holds a's /tmp: {holding:?}"
    );

    // The system is there read-only, the secrets are not.
    assert!(
        probe(&a, "read_file", json!({"path": "/etc/passwd"}))
            .await
            .0
    );
    let (ok, said) = probe(&a, "read_file", json!({"path": "/etc/shadow"})).await;
    assert!(!ok, "/etc/shadow is not visible: {said}");
    let (ok, said) = probe(
        &a,
        "write_file",
        json!({"path": "/usr/mcpgate-was-here", "text": "x"}),
    )
    .await;
    assert!(!ok, "/usr is read-only: {said}");
    if std::fs::read_to_string("/etc/shadow").is_ok() {
        let (ok, said) = probe(&open, "read_file", json!({"path": "/etc/shadow"})).await;
        assert!(
            ok,
            "unsandboxed, the same probe reads it (the control): {said}"
        );
    }

    // No network, not even the host's loopback; allowed, it connects.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let (ok, said) = probe(&a, "connect", json!({"addr": addr})).await;
    assert!(!ok, "network off: {said}");
    let net = Client::new(&format!("{}/servers/boxed-net/mcp", gw.base))
        .initialize()
        .await;
    let (ok, said) = probe(&net, "connect", json!({"addr": addr})).await;
    assert!(ok, "network = \"host\": {said}");
    assert!(probe(&open, "connect", json!({"addr": addr})).await.0);

    // DELETE removes the private /tmp from the host; b's stays until its own end.
    assert_eq!(a.delete().await, 200);
    let removed = wait_until(Duration::from_secs(10), || async { !holding[0].exists() }).await;
    assert!(
        removed,
        "{} still exists after DELETE",
        holding[0].display()
    );
    assert_eq!(
        probe(&b, "echo", json!({"text": "b lives"})).await,
        (true, "b lives".into())
    );
    drop(gw);
    let _ = std::fs::remove_dir_all(&base);
}

#[tokio::test]
async fn the_filesystem_server_in_a_sandbox_cannot_read_another_session_s_files() {
    let modules = mcpgate_tests::clients::dir().join("node_modules");
    // The server may serve the whole filesystem: only the sandbox stands in the way.
    let gw = Gateway::start(&format!(
        "{}[server.sandbox]\npaths = [{:?}]\n",
        mcpgate_tests::virtuals::filesystem("fs", std::path::Path::new("/")),
        modules.display().to_string()
    ));
    let c = Client::new(&format!("{}/servers/fs/mcp", gw.base));
    let (a, b) = (c.initialize().await, c.initialize().await);
    let w = a
        .call(
            "write_file",
            json!({"path": "/tmp/a.txt", "content": "a's notes"}),
        )
        .await;
    assert_ne!(w.last()["result"]["isError"], true, "{w:?}");
    let mine = a
        .call("read_text_file", json!({"path": "/tmp/a.txt"}))
        .await;
    assert_eq!(mine.text(), "a's notes");
    let theirs = b
        .call("read_text_file", json!({"path": "/tmp/a.txt"}))
        .await;
    assert_eq!(theirs.last()["result"]["isError"], true, "{theirs:?}");
    let shadow = a
        .call("read_text_file", json!({"path": "/etc/shadow"}))
        .await;
    assert_eq!(shadow.last()["result"]["isError"], true, "{shadow:?}");
}

#[tokio::test]
async fn private_tmp_directories_left_by_a_dead_gateway_are_removed_at_start() {
    let base = std::env::temp_dir().join(format!("mcpgate-sweep-{}", std::process::id()));
    // A pid above any pid_max (2^22) is no running process; this test's own pid is.
    let dead = base.join("mcpgate-tmp-999999999-3");
    let live = base.join(format!("mcpgate-tmp-{}-0", std::process::id()));
    let other = base.join("mcpgate-tmp-notes");
    for d in [&dead, &live, &other] {
        std::fs::create_dir_all(d).unwrap();
    }
    std::fs::write(dead.join("left.txt"), "a session's data").unwrap();
    let gw = Gateway::launch(
        &server("boxed", Some("")),
        Launch {
            env: vec![("TMPDIR".into(), base.display().to_string())],
            ..Launch::default()
        },
    );
    assert!(
        !dead.exists(),
        "a dead gateway's directory is removed; log:\n{}",
        gw.log()
    );
    assert!(live.exists(), "a running process's directory is kept");
    assert!(other.exists(), "a name that is not a private /tmp is kept");
    assert!(
        gw.log()
            .contains("removed sandboxed sessions' private /tmp directories")
    );
    drop(gw);
    let _ = std::fs::remove_dir_all(&base);
}
