//! The Inspector UI's stdio connection (`/stdio?command=…&args=…&env=…`): an allowed
//! command is started for the UI's SSE connection and ends with it, with a scrubbed
//! environment (only what the config and the allowlist let through).

use std::collections::BTreeMap;
use std::time::Duration;

use mcpgate_tests::children_of;
use mcpgate_tests::inspector::{
    CANARY, Inspector, TOKEN, open_sse, stdio_query, testkit, testkit_toml, text,
};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdio_through_the_sse_endpoint() {
    let insp = Inspector::start(&testkit_toml(""), &[], Some(TOKEN));
    assert_eq!(insp.token.as_deref(), Some(TOKEN));
    let cmd = testkit();
    let url = insp.url(
        "/stdio",
        &stdio_query(&insp, &cmd, "stdio", r#"{"TESTKIT_OK":"1"}"#),
    );
    let mut s = open_sse(&insp, &url).await.unwrap();
    let init = s.initialize(&insp).await;
    assert_eq!(init["id"], 0);
    let tools = s.request(&insp, 1, "tools/list", json!({})).await;
    let names: Vec<&str> = tools["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert!(names.contains(&"echo"), "{names:?}");
    let r = s
        .call(&insp, 2, "echo", json!({"text":"hello inspector"}))
        .await;
    assert_eq!(text(&r), "hello inspector");
    let kids = children_of(insp.pid());
    assert_eq!(kids.len(), 1, "{kids:?}");
    assert_eq!(insp.metric("mcpgate_sessions_active").await, 1.0);
    // The UI disconnects by closing its EventSource: the session and its child end.
    drop(s);
    insp.assert_empty(Duration::from_secs(10)).await;
    assert_eq!(
        insp.metric("mcpgate_sessions_closed_total{reason=\"client_gone\"}")
            .await,
        1.0
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spawned_commands_get_a_scrubbed_environment() {
    let insp_dir =
        std::env::temp_dir().join(format!("mcpgate-inspector-env-{}", std::process::id()));
    std::fs::create_dir_all(&insp_dir).unwrap();
    let script = insp_dir.join("envdump.sh");
    std::fs::write(&script, "#!/bin/sh\nenv > \"$1\"\nexec \"$2\" stdio\n").unwrap();
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let dump = insp_dir.join("env-1.txt");
    let toml = format!(
        "inherit_env = [\"PATH\", \"HOME\"]\n\
         [[stdio]]\nname = \"envdump\"\ncommand = {:?}\nargs = [{:?}, {:?}]\n\
         env = {{ FIXED_BY_CONFIG = \"yes\" }}\nallow_env = [\"CALLER_MAY_SET\"]\n",
        script.display().to_string(),
        format!("{}/env-?.txt", insp_dir.display()),
        testkit(),
    );
    let insp = Inspector::start(&toml, &[], Some(TOKEN));
    let script_s = script.display().to_string();
    let args = format!("{} {}", dump.display(), testkit());
    let url = insp.url(
        "/stdio",
        &stdio_query(
            &insp,
            &script_s,
            &args,
            r#"{"CALLER_MAY_SET":"from the UI"}"#,
        ),
    );
    let mut s = open_sse(&insp, &url).await.unwrap();
    s.initialize(&insp).await;
    let env: BTreeMap<String, String> = std::fs::read_to_string(&dump)
        .unwrap()
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
    assert_eq!(env.get("FIXED_BY_CONFIG").map(String::as_str), Some("yes"));
    assert_eq!(
        env.get("CALLER_MAY_SET").map(String::as_str),
        Some("from the UI")
    );
    assert_eq!(env.get("PATH"), std::env::var("PATH").ok().as_ref());
    // Only what was allowed (plus what sh itself sets).
    let allowed = [
        "PATH",
        "HOME",
        "FIXED_BY_CONFIG",
        "CALLER_MAY_SET",
        "PWD",
        "SHLVL",
        "OLDPWD",
        "_",
    ];
    let extra: Vec<&String> = env
        .keys()
        .filter(|k| !allowed.contains(&k.as_str()))
        .collect();
    assert!(extra.is_empty(), "leaked into the child: {extra:?}");
    assert!(!env.contains_key(CANARY) && !env.contains_key("RUST_LOG"));
    drop(s);
    insp.assert_empty(Duration::from_secs(10)).await;
    // The dump path must match its pattern: another file name is refused.
    let bad_args = format!("{}/elsewhere.txt {}", insp_dir.display(), testkit());
    let url = insp.url("/stdio", &stdio_query(&insp, &script_s, &bad_args, "{}"));
    assert_eq!(open_sse(&insp, &url).await.err().map(|e| e.0), Some(403));
    let _ = std::fs::remove_dir_all(&insp_dir);
}
