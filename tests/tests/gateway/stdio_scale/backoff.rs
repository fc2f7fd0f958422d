//! A server whose children die at start: each client gets the child's own words, and the
//! gateway backs off instead of spawning at the pace of the retries.

use std::time::Duration;

use mcpgate_tests::admin::Admin;
use mcpgate_tests::{Client, Gateway, Launch};
use serde_json::json;

const TOKEN: &str = "backoff-admin-token";

/// Initialize attempts, one every [`PACE`].
const ATTEMPTS: usize = 20;
const PACE: Duration = Duration::from_millis(100);

#[tokio::test]
async fn a_server_that_exits_at_start_twenty_times_spawns_a_bounded_number_of_times() {
    let dir = std::env::temp_dir().join(format!("mcpgate-backoff-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let starts = dir.join("starts");
    let gw = Gateway::launch(
        &format!(
            "[admin]\naddr = \"127.0.0.1:0\"\ntoken = \"{TOKEN}\"\n\
         [[server]]\nname = \"broken\"\ntransport = \"stdio\"\n\
         command = [\"sh\", \"-c\", \"echo start >> \\\"$0\\\"; echo 'Error: API_KEY environment variable is required' >&2; exit 1\", {:?}]\n\
         [[server]]\nname = \"fine\"\ntransport = \"stdio\"\ncommand = [{:?}, \"stdio\"]\n",
            starts.display().to_string(),
            mcpgate_tests::bin("mcpgate-testkit").display().to_string(),
        ),
        Launch {
            stdout_lines: 2,
            ..Launch::default()
        },
    );
    let broken = Client::new(&format!("{}/servers/broken/mcp", gw.base));
    let init = json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{
        "protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"0"}}});
    let mut backed_off = 0;
    for i in 0..ATTEMPTS {
        let r = broken.post(None, &init).await;
        assert_eq!(r.error_code(), Some(-32003), "attempt {i}: {r:?}");
        let msg = r.last()["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        assert!(
            msg.contains("Error: API_KEY environment variable is required"),
            "attempt {i}: the error carries the child's stderr: {r:?}"
        );
        if msg.contains("failed to start") {
            assert!(msg.contains("next start in"), "{msg}");
            backed_off += 1;
        }
        tokio::time::sleep(PACE).await;
    }
    let spawned = std::fs::read_to_string(&starts)
        .unwrap_or_default()
        .lines()
        .count();
    // Backoff 0.5 s doubling over ~2.5 s of attempts: starts at 0, 0.5, 1.5 (and 3.5) s.
    assert!(
        (2..=5).contains(&spawned),
        "{spawned} starts for {ATTEMPTS} attempts; log:\n{}",
        gw.log()
    );
    assert_eq!(
        backed_off + spawned,
        ATTEMPTS,
        "every attempt is a start or a refusal"
    );
    // The admin API shows the failing command, its backoff and the child's last words.
    let (status, failing) = Admin::of(&gw, TOKEN)
        .api(reqwest::Method::GET, "/api/stdio")
        .await;
    assert_eq!(status, 200, "{failing}");
    let rows = failing.as_array().unwrap();
    assert_eq!(rows.len(), 1, "{failing}");
    assert_eq!(rows[0]["command"][0], "sh");
    assert_eq!(
        rows[0]["failures"].as_u64(),
        Some(spawned as u64),
        "{failing}"
    );
    assert!(
        rows[0]["last"]
            .as_str()
            .unwrap()
            .contains("API_KEY environment variable is required"),
        "{failing}"
    );
    // Another server is not held back by this one's record.
    let fine = Client::new(&format!("{}/servers/fine/mcp", gw.base))
        .initialize()
        .await;
    assert_eq!(fine.call("echo", json!({"text": "ok"})).await.text(), "ok");
    let _ = std::fs::remove_dir_all(&dir);
}
