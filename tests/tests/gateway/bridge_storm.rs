//! A storm through the era bridge: 20 principals × 100 bridged calls (counts, notifying
//! calls, sampling round trips via `input_required`) against the stdio testkit, where
//! every fourth client goes away mid-call or mid-`input_required`. The others see every
//! answer right and their process's counter without a gap; held calls expire, leases
//! come back, and once the principals are idle, every pooled session and child is gone.

use std::time::Duration;

use mcpgate_tests::bridge::Modern;
use mcpgate_tests::{Gateway, children_of, wait_until};
use serde_json::json;

const CLIENTS: usize = 20;
const CALLS: u64 = 100;

fn token(n: usize) -> String {
    format!("storm-principal-{n:02}-0123456789")
}

#[tokio::test]
async fn vanishing_clients_leave_the_bridge_bounded() {
    let tokens: Vec<String> = (0..CLIENTS)
        .map(|i| format!("{{ name = \"s{i}\", token = \"{}\" }}", token(i)))
        .collect();
    let mut gw = Gateway::stdio_testkit(
        &[],
        &format!(
            "[session]\ninput_timeout = \"3s\"\nidle_timeout = \"3s\"\n[auth]\ntokens = [{}]\n",
            tokens.join(", ")
        ),
    );
    let caps = json!({"sampling": {}});
    let mut tasks = Vec::new();
    for p in 0..CLIENTS {
        let url = gw.url();
        let caps = caps.clone();
        tasks.push(tokio::spawn(async move {
            let c = Modern::new(&url, Some(&token(p))).with_capabilities(caps.clone());
            let vanishes = p % 4 == 3;
            let mut counted = 0u64;
            for n in 0..CALLS {
                let id = n * 10;
                if vanishes && n == CALLS / 2 {
                    if p % 8 == 3 {
                        // Mid-call: the client gives up on a slow call.
                        let gone = Modern::impatient(&url, Some(&token(p)), Duration::from_millis(150))
                            .with_capabilities(caps.clone());
                        let r = gone.try_request(id, "tools/call", json!({"name": "slow", "arguments": {"ms": 5000}})).await;
                        assert!(r.is_none() || r.unwrap().messages.is_empty());
                    } else {
                        // Mid-input_required: asked, never comes back.
                        let r = c.call(id, "sample", json!({"prompt": "never answered"})).await;
                        assert_eq!(r.last()["result"]["resultType"], "input_required");
                    }
                    return (p, counted);
                }
                match n % 4 {
                    0 | 1 => {
                        counted += 1;
                        assert_eq!(c.call(id, "count", json!({})).await.text(), counted.to_string());
                    }
                    2 => {
                        let tag = format!("s{p}-{n}");
                        let r = c.call(id, "notify", json!({"tag": tag, "count": 3})).await;
                        assert_eq!(r.text(), format!("{tag}:3"));
                    }
                    _ => {
                        let ask = c.call(id, "sample", json!({"prompt": "x"})).await;
                        let r = &ask.last()["result"];
                        let state = r["requestState"].as_str().unwrap_or_else(|| panic!("{ask:?}")).to_owned();
                        let key = r["inputRequests"].as_object().unwrap().keys().next().unwrap().clone();
                        let answer = json!({key: {"role": "assistant", "model": "m", "stopReason": "endTurn",
                            "content": {"type": "text", "text": format!("a{n}")}}});
                        let done = c.request(id + 1, "tools/call", json!({"name": "sample",
                            "arguments": {"prompt": "x"}, "inputResponses": answer, "requestState": state})).await;
                        assert_eq!(done.text(), format!("a{n}"));
                    }
                }
            }
            (p, counted)
        }));
    }
    for t in tasks {
        let (p, counted) = t.await.unwrap();
        let upto = if p % 4 == 3 { CALLS / 2 } else { CALLS };
        let expected = (0..upto).filter(|n| n % 4 < 2).count() as u64;
        assert_eq!(counted, expected, "principal {p}");
    }
    assert!(gw.is_running(), "the gateway is up");
    // The held calls expire (3 s), the pooled sessions idle out (3 s): nothing is left.
    let drained = wait_until(Duration::from_secs(20), || async {
        gw.metric("mcpgate_sessions_active").await == 0.0 && children_of(gw.pid()).is_empty()
    })
    .await;
    assert!(
        drained,
        "sessions {} children {:?}",
        gw.metric("mcpgate_sessions_active").await,
        children_of(gw.pid())
    );
    let abandoned = gw.log().matches("call abandoned").count();
    let asked = (0..CLIENTS).filter(|p| p % 4 == 3 && p % 8 != 3).count();
    // A client gone mid-call: the call is cancelled upstream and its session ended (never
    // handed to the principal's next request).
    let gone = (0..CLIENTS).filter(|p| p % 8 == 3).count();
    assert_eq!(
        gw.log().matches("a call ended before its answer").count(),
        gone,
        "calls abandoned mid-way"
    );
    assert_eq!(abandoned, asked, "held calls expired");
    // And the bridge serves on.
    let c = Modern::new(&gw.url(), Some(&token(0)));
    assert_eq!(c.call(1, "count", json!({})).await.text(), "1");
}
