//! An upstream that dies during initialize (exits, answers garbage and exits, cannot be
//! spawned): a quick JSON-RPC upstream error, no session, no process left behind.

use std::time::{Duration, Instant};

use mcpgate_tests::faults::{assert_echo, assert_up};
use mcpgate_tests::{Client, Gateway, children_of, wait_until};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upstream_dies_during_initialize() {
    let testkit = format!(
        "{:?}",
        mcpgate_tests::bin("mcpgate-testkit").display().to_string()
    );
    let mut gw = Gateway::start(&format!(
        "[[server]]\nname = \"exits\"\ntransport = \"stdio\"\ncommand = [\"sh\", \"-c\", \"exit 3\"]\n\
         [[server]]\nname = \"reads-then-exits\"\ntransport = \"stdio\"\ncommand = [\"sh\", \"-c\", \"read line; echo not-json; exit 3\"]\n\
         [[server]]\nname = \"missing\"\ntransport = \"stdio\"\ncommand = [\"/nonexistent/mcp-server\"]\n\
         [[server]]\nname = \"ok\"\ntransport = \"stdio\"\ncommand = [{testkit}, \"stdio\"]\n"
    ));
    let ok = Client::new(&format!("{}/servers/ok/mcp", gw.base))
        .initialize()
        .await;
    for name in ["exits", "reads-then-exits", "missing"] {
        let c = Client::new(&format!("{}/servers/{name}/mcp", gw.base));
        let t0 = Instant::now();
        // Answered, not left waiting for the request timeout (300 s): the bound is only
        // "not stuck", generous so that a loaded machine does not fail it.
        let r = tokio::time::timeout(
            Duration::from_secs(30),
            c.post(
                None,
                &json!({"jsonrpc":"2.0","id":"init-1","method":"initialize","params":{
                    "protocolVersion":"2025-11-25","capabilities":{},
                    "clientInfo":{"name":"faults","version":"0"}}}),
            ),
        )
        .await
        .unwrap_or_else(|_| panic!("{name}: no answer"));
        eprintln!(
            "{name}: HTTP {} after {:?}: {}",
            r.status,
            t0.elapsed(),
            r.body
        );
        assert!(
            r.last()["error"]["code"].is_i64(),
            "{name}: a JSON-RPC error: {r:?}"
        );
        assert!(
            r.header("mcp-session-id").is_none(),
            "{name}: no session: {r:?}"
        );
        assert_echo(&ok, &format!("after {name}")).await;
    }
    let exited = gw
        .metric("mcpgate_upstream_errors_total{kind=\"exited\"}")
        .await;
    let spawn = gw
        .metric("mcpgate_upstream_errors_total{kind=\"spawn\"}")
        .await;
    assert!(exited >= 2.0, "exited = {exited}; log:\n{}", gw.log());
    assert_eq!(spawn, 1.0, "log:\n{}", gw.log());
    assert_eq!(gw.metric("mcpgate_sessions_active").await, 1.0);
    // No process is left of the failed sessions: only the ok session's child.
    let pid = gw.pid();
    let settled = wait_until(Duration::from_secs(5), || async {
        children_of(pid).len() == 1
    })
    .await;
    assert!(settled, "children: {:?}", children_of(pid));
    assert_eq!(gw.metric("mcpgate_stdio_children").await, 1.0);
    assert_echo(&ok, "bystander").await;
    assert_up(&mut gw).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn initialize_against_a_dying_upstream_is_always_an_upstream_error() {
    let mut gw = Gateway::start(
        "[[server]]\nname = \"exits\"\ntransport = \"stdio\"\ncommand = [\"sh\", \"-c\", \"exit 3\"]\n\
         [[server]]\nname = \"missing\"\ntransport = \"stdio\"\ncommand = [\"/nonexistent/mcp-server\"]\n",
    );
    for name in ["exits", "missing"] {
        let c = Client::new(&format!("{}/servers/{name}/mcp", gw.base));
        for i in 0..20 {
            let r = c
                .post(
                    None,
                    &json!({"jsonrpc":"2.0","id":i,"method":"initialize","params":{
                        "protocolVersion":"2025-11-25","capabilities":{},
                        "clientInfo":{"name":"faults","version":"0"}}}),
                )
                .await;
            assert_eq!(r.status, 200, "{name} #{i}: {r:?}");
            assert_eq!(r.error_code(), Some(-32003), "{name} #{i}: {r:?}");
            assert_eq!(r.last()["id"], i, "{name} #{i}: {r:?}");
        }
    }
    assert_up(&mut gw).await;
}
