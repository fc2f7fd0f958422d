//! The official TypeScript and Python SDK clients on a virtual server of the everything
//! server (stdio), the filesystem server (stdio) and the testkit (HTTP): the merged
//! catalogue with prefixes, a call, read and prompt of each member, progress and logs on
//! the right call, sampling and roots requests the members raise answered by the client.

use std::time::Duration;

use mcpgate_testkit::{HttpOptions, HttpServer};
use mcpgate_tests::clients::Sdk;
use mcpgate_tests::virtuals::{FsDir, everything, filesystem, http_kit, run_sdk};
use mcpgate_tests::{Gateway, children_of, wait_until};
use serde_json::Value;

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .unwrap_or_else(|| panic!("not an array: {v}"))
        .iter()
        .map(|s| s.as_str().unwrap().to_owned())
        .collect()
}

async fn sdk_client_sees_one_server(sdk: Sdk) {
    let kit = HttpServer::start("127.0.0.1:0".parse().unwrap(), HttpOptions::default())
        .await
        .unwrap();
    let fs = FsDir::new();
    let gw = Gateway::start(&format!(
        "{}{}{}[[virtual]]\nname = \"all\"\n[[virtual.member]]\nserver = \"everything\"\nprefix = \"ev\"\n[[virtual.member]]\nserver = \"fs\"\n[[virtual.member]]\nserver = \"kit\"\n",
        everything("everything"),
        filesystem("fs", &fs.0),
        http_kit("kit", &kit.url()),
    ));
    let url = gw.url().replace("/mcp", "/servers/all/mcp");
    let v = run_sdk(sdk, &url, &fs.0).await;
    let ctx = format!("{sdk:?}: {v}");

    assert_eq!(v["serverInfo"]["name"], "all", "{ctx}");
    let tools = strings(&v["tools"]);
    for t in ["ev__echo", "fs__read_text_file", "kit__echo", "kit__notify"] {
        assert!(tools.iter().any(|x| x == t), "{t} missing: {ctx}");
    }
    assert!(
        tools
            .iter()
            .all(|t| ["ev__", "fs__", "kit__"].iter().any(|p| t.starts_with(p))),
        "every tool carries its member's prefix: {tools:?}"
    );
    let prompts = strings(&v["prompts"]);
    assert!(prompts.contains(&"ev__simple-prompt".to_owned()), "{ctx}");
    assert!(prompts.contains(&"kit__greet".to_owned()), "{ctx}");
    let resources = strings(&v["resources"]);
    assert!(resources.contains(&"kit+test://static".to_owned()), "{ctx}");
    assert!(
        resources.iter().any(|r| r.starts_with("ev+demo://")),
        "{ctx}"
    );
    assert!(
        resources
            .iter()
            .all(|r| r.starts_with("ev+") || r.starts_with("kit+") || r.starts_with("fs+")),
        "{ctx}"
    );
    assert!(
        strings(&v["templates"])
            .iter()
            .all(|t| t.starts_with("ev+")),
        "{ctx}"
    );

    let calls = &v["calls"];
    assert_eq!(calls["ev__echo"], "Echo: to ev", "{ctx}");
    assert_eq!(calls["fs__read_text_file"], "hello fs\n", "{ctx}");
    assert_eq!(calls["kit__echo"], "to kit", "{ctx}");
    assert_eq!(calls["kit__notify"], "kit-logs:3", "{ctx}");
    // Progress reached the call that asked for it, from each member that sends any.
    assert_eq!(v["progress"]["kit__notify"], 3, "{ctx}");
    assert_eq!(
        v["progress"]["ev__trigger-long-running-operation"], 4,
        "{ctx}"
    );
    assert_eq!(v["progress"]["kit__echo"], 0, "{ctx}");
    let kit_logs = v["logs"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|l| l["data"]["tag"] == "kit-logs")
        .count();
    assert_eq!(kit_logs, 3, "the testkit's logs of its call: {ctx}");
    assert!(
        v["logs"]
            .as_array()
            .unwrap()
            .iter()
            .any(|l| l["logger"] == "everything-server"),
        "the everything server's log reached the client: {ctx}"
    );

    // Members' requests reached the client and its answers went back to the one asking.
    let sampled = strings(&v["sampled"]);
    assert!(sampled.iter().any(|s| s == "kit asks"), "{ctx}");
    assert!(sampled.iter().any(|s| s.contains("ev asks")), "{ctx}");
    let answer = if matches!(sdk, Sdk::Ts) {
        "sampled by ts"
    } else {
        "sampled by py"
    };
    assert_eq!(calls["kit__sample"], answer, "{ctx}");
    assert!(
        calls["ev__trigger-sampling-request"]
            .as_str()
            .unwrap()
            .contains(answer),
        "{ctx}"
    );
    let root = format!("file://{}", fs.0.display());
    assert_eq!(calls["kit__roots"], root.as_str(), "{ctx}");
    assert!(
        calls["ev__get-roots-list"]
            .as_str()
            .unwrap()
            .contains(&root),
        "{ctx}"
    );
    assert!(
        v["rootsAsked"].as_u64().unwrap() >= 3,
        "the filesystem and everything servers ask for roots after initialized, the testkit in its call: {ctx}"
    );

    let reads = &v["reads"];
    let kit_read = &reads["kit+test://static"];
    assert_eq!(kit_read["uri"], "kit+test://static", "{ctx}");
    assert_eq!(kit_read["text"], "hello", "{ctx}");
    let ev_read = &reads["ev+demo://resource/static/document/architecture.md"];
    assert_eq!(
        ev_read["uri"], "ev+demo://resource/static/document/architecture.md",
        "{ctx}"
    );
    assert!(
        ev_read["text"].as_str().unwrap().contains("Architecture"),
        "{ctx}"
    );
    assert_eq!(
        v["prompted"]["ev__simple-prompt"], "This is a simple prompt without arguments.",
        "{ctx}"
    );
    assert!(
        v["prompted"]["kit__greet"]
            .as_str()
            .unwrap()
            .starts_with("Hello, "),
        "{ctx}"
    );

    assert_eq!(v["deleted"], true, "{ctx}");
    let pid = gw.pid();
    assert!(
        wait_until(Duration::from_secs(10), || async {
            children_of(pid).is_empty()
        })
        .await,
        "the DELETE ended both stdio members: {:?}",
        children_of(pid)
    );
    let st = kit.stats();
    assert_eq!((st.sessions_created, st.sessions_deleted), (1, 1), "{st:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn typescript_sdk_client_sees_one_server() {
    sdk_client_sees_one_server(Sdk::Ts).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_sdk_client_sees_one_server() {
    sdk_client_sees_one_server(Sdk::Py).await;
}
