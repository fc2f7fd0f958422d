//! 2026-07-28 streams through mcpgate: `subscriptions/listen` (acknowledged, tagged, and
//! seen only by the principal whose server changed), and crosstalk: 50 principals making
//! stateless calls with progress and log notifications at once, over an HTTP and a stdio
//! upstream — every notification reaches its own request, none is lost.

use std::collections::BTreeSet;
use std::time::Duration;

use mcpgate_tests::modern::{self, Sdk};
use mcpgate_tests::{Gateway, parse_sse};
use serde_json::{Value, json};

const PRINCIPALS: usize = 50;
const COUNT: u64 = 10;

fn token(i: usize) -> String {
    format!("principal-{i:02}-token-0123456789")
}

fn auth(n: usize) -> String {
    let tokens: Vec<String> = (0..n)
        .map(|i| format!("{{ name = \"p{i}\", token = \"{}\" }}", token(i)))
        .collect();
    format!("[auth]\ntokens = [{}]\n", tokens.join(", "))
}

fn stdio_server(cmd: &[String]) -> String {
    let quoted: Vec<String> = cmd.iter().map(|c| format!("{c:?}")).collect();
    format!(
        "[[server]]\nname = \"up\"\ntransport = \"stdio\"\ncommand = [{}]\n",
        quoted.join(", ")
    )
}

#[tokio::test]
async fn listen_through_an_http_upstream() {
    let up = modern::start_http(Sdk::Ts, &[]).await;
    let gw = Gateway::http(&up.url, "");
    let v = modern::listen(&gw.url(), &[]).await;
    assert_eq!(v["ok"], true, "{v}");
    let n = v["notifications"].as_array().unwrap();
    let methods: BTreeSet<&str> = n.iter().filter_map(|x| x["method"].as_str()).collect();
    assert_eq!(
        methods,
        BTreeSet::from([
            "notifications/resources/updated",
            "notifications/tools/list_changed"
        ])
    );
    assert!(
        n.iter()
            .all(|x| x["subscriptionId"] == n[0]["subscriptionId"])
    );
}

/// Over stdio each principal has its own child: a change A makes reaches A's listen
/// stream (tagged with A's listen request id, which the gateway rewrote toward the child
/// and maps back) and never B's; B's own changes do reach B's.
#[tokio::test]
async fn listen_through_a_stdio_upstream_reaches_only_its_principal() {
    let gw = Gateway::start(&format!(
        "{}{}",
        stdio_server(&modern::server_command(Sdk::Ts, "stdio", &[])),
        auth(2)
    ));
    let url = gw.url();
    let b_header = format!("Authorization: Bearer {}", token(1));
    let a_header = format!("Authorization: Bearer {}", token(0));
    // B listens (its subscription acknowledged) before A changes anything.
    let passive = modern::Passive::start(&url, &["--header", &b_header]).await;
    let a = modern::listen(&url, &["--header", &a_header]).await;
    assert_eq!(a["ok"], true, "{a}");
    assert_eq!(a["notifications"].as_array().map(Vec::len), Some(2), "{a}");
    assert!(
        a["notifications"]
            .as_array()
            .unwrap()
            .iter()
            .all(|n| n["subscriptionId"]
                .as_str()
                .is_some_and(|s| s.starts_with("listen:"))),
        "tagged with the client's own listen id: {a}"
    );
    // A's listen has seen both its changes (and waited 200 ms for duplicates): none of
    // them is B's.
    assert_eq!(
        passive.notified(),
        Vec::<String>::new(),
        "B saw A's changes"
    );
    // The control: B's own changes (made by B's listen helper) reach B's passive stream,
    // which must then hold exactly those two: none of A's came late either.
    let b_own = modern::listen(&url, &["--header", &b_header]).await;
    assert_eq!(b_own["ok"], true, "{b_own}");
    assert!(
        passive.wait_notified(2, Duration::from_secs(10)).await,
        "B's own changes did not reach B's passive listen: {:?}",
        passive.notified()
    );
    let b = passive.finish().await;
    assert_eq!(b["ok"], true, "{b}");
    let methods: BTreeSet<&str> = b["notifications"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|x| x["method"].as_str())
        .collect();
    assert_eq!(
        b["notifications"].as_array().map(Vec::len),
        Some(2),
        "B saw A's changes: {b}"
    );
    assert_eq!(
        methods,
        BTreeSet::from([
            "notifications/resources/updated",
            "notifications/tools/list_changed"
        ]),
        "{b}"
    );
}

/// What one principal's call saw.
#[derive(Debug, Default)]
struct Seen {
    misrouted: usize,
    progress: BTreeSet<u64>,
    logs: BTreeSet<u64>,
    duplicates: usize,
}

async fn one_call(http: reqwest::Client, url: String, i: usize) -> Seen {
    let tag = format!("p{i}");
    let body = json!({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{
        "name":"notify","arguments":{"tag":tag,"count":COUNT},
        "_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",
                 "io.modelcontextprotocol/clientCapabilities":{},
                 "io.modelcontextprotocol/logLevel":"debug",
                 "progressToken":tag}}});
    let r = http
        .post(&url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "tools/call")
        .header("mcp-name", "notify")
        .header("authorization", format!("Bearer {}", token(i)))
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let text = r.text().await.unwrap();
    let events: Vec<Value> = if text.trim_start().starts_with('{') {
        vec![serde_json::from_str(&text).unwrap()]
    } else {
        parse_sse(&text)
    };
    let mut seen = Seen::default();
    for m in &events {
        match m["method"].as_str() {
            Some("notifications/progress") => {
                if m["params"]["progressToken"] != tag {
                    seen.misrouted += 1;
                } else if !seen
                    .progress
                    .insert(m["params"]["progress"].as_f64().unwrap() as u64)
                {
                    seen.duplicates += 1;
                }
            }
            Some("notifications/message") => {
                let data = &m["params"]["data"];
                if data["tag"] != tag {
                    seen.misrouted += 1;
                } else if !seen.logs.insert(data["seq"].as_u64().unwrap()) {
                    seen.duplicates += 1;
                }
            }
            _ => {}
        }
    }
    let last = events.last().unwrap();
    assert_eq!(
        last["result"]["content"][0]["text"],
        format!("{tag}:{COUNT}"),
        "{text}"
    );
    seen
}

/// One client for every call (each principal's own `Authorization`): building a client
/// loads the system's root certificates, and 50 of them at once on a loaded machine once
/// held the calls' connection tasks past the gateway's 10 s request-head timeout.
async fn crosstalk(gw: &Gateway) {
    let http = reqwest::Client::new();
    let calls: Vec<_> = (0..PRINCIPALS)
        .map(|i| tokio::spawn(one_call(http.clone(), gw.url(), i)))
        .collect();
    let (mut misrouted, mut lost, mut dup) = (0, 0, 0);
    for c in calls {
        let s = c.await.unwrap();
        misrouted += s.misrouted;
        dup += s.duplicates;
        lost += 2 * COUNT as usize - s.progress.len() - s.logs.len();
    }
    assert_eq!(
        (misrouted, lost, dup),
        (0, 0, 0),
        "misrouted, lost, duplicated"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_crosstalk_between_principals_http_upstream() {
    let up = modern::start_http(Sdk::Ts, &[]).await;
    let gw = Gateway::http(&up.url, &auth(PRINCIPALS));
    crosstalk(&gw).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_crosstalk_between_principals_stdio_upstream() {
    let gw = Gateway::start(&format!(
        "{}{}",
        stdio_server(&modern::server_command(Sdk::Ts, "stdio", &[])),
        auth(PRINCIPALS)
    ));
    crosstalk(&gw).await;
    // One child per principal, no more.
    assert_eq!(gw.metric("mcpgate_stdio_children").await, PRINCIPALS as f64);
}

async fn open_hang(url: &str) -> reqwest::Response {
    let body = json!({"jsonrpc":"2.0","id":"h1","method":"tools/call","params":{"name":"hang","arguments":{},
        "_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}});
    let r = reqwest::Client::new()
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "tools/call")
        .header("mcp-name", "hang")
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert!(
        r.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/event-stream")
    );
    r
}

/// In 2026-07-28 a client cancels by closing its stream: the gateway's upstream exchange
/// closes with it. And a drain ends open streams, then the process exits 0.
#[tokio::test]
async fn closing_the_stream_cancels_upstream_and_a_drain_ends_streams() {
    use futures::StreamExt;
    use mcpgate_testkit::{HttpOptions, HttpServer};
    let up = HttpServer::start("127.0.0.1:0".parse().unwrap(), HttpOptions::default())
        .await
        .unwrap();
    let mut gw = Gateway::http(
        &up.url(),
        "protocol = \"2026-07-28\"\n[listen]\ndrain = \"1s\"\n",
    );
    let r = open_hang(&gw.url()).await;
    let mut body = r.bytes_stream();
    let first = body.next().await.unwrap().unwrap();
    assert!(String::from_utf8_lossy(&first).contains("notifications/progress"));
    assert_eq!(up.stats().modern_streams_open, 1);
    drop(body);
    assert!(
        mcpgate_tests::wait_until(Duration::from_secs(5), || async {
            up.stats().modern_streams_open == 0
        })
        .await,
        "the upstream exchange ended with the client's stream"
    );
    let r = open_hang(&gw.url()).await;
    let mut body = r.bytes_stream();
    let _ = body.next().await;
    assert_eq!(up.stats().modern_streams_open, 1);
    assert_eq!(gw.stop(), Some(0), "a drain with an open stream still ends");
    let rest = tokio::time::timeout(Duration::from_secs(5), async {
        while let Some(Ok(_)) = body.next().await {}
    })
    .await;
    assert!(rest.is_ok(), "the client's stream ended with the drain");
    assert!(
        mcpgate_tests::wait_until(Duration::from_secs(5), || async {
            up.stats().modern_streams_open == 0
        })
        .await
    );
}

/// A principal's stdio child serves all of that principal's requests: one whose client
/// never reads its answer (thousands of progress notifications) must not hold the child's
/// pipe, so the principal's next request is answered meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unread_call_does_not_hold_the_principals_child() {
    use tokio::io::AsyncWriteExt;
    let gw = Gateway::start(&format!(
        "{}{}",
        stdio_server(&modern::server_command(Sdk::Py, "stdio", &[])),
        auth(1)
    ));
    // Warm: the child exists and answers.
    let first = one_call(reqwest::Client::new(), gw.url(), 0).await;
    assert_eq!(first.misrouted + first.duplicates, 0);
    let body = json!({"jsonrpc":"2.0","id":"unread","method":"tools/call","params":{
        "name":"notify","arguments":{"tag":"unread","count":3000},
        "_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",
                 "io.modelcontextprotocol/clientCapabilities":{},
                 "progressToken":"unread"}}})
    .to_string();
    let addr = gw.base.trim_start_matches("http://").to_owned();
    let mut tcp = tokio::net::TcpStream::connect(&addr).await.unwrap();
    let head = format!(
        "POST /mcp HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/json\r\n\
         accept: application/json, text/event-stream\r\nmcp-protocol-version: 2026-07-28\r\n\
         mcp-method: tools/call\r\nmcp-name: notify\r\nauthorization: Bearer {}\r\n\
         content-length: {}\r\n\r\n",
        token(0),
        body.len()
    );
    tcp.write_all(head.as_bytes()).await.unwrap();
    tcp.write_all(body.as_bytes()).await.unwrap();
    // Let the flood fill whatever it can.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let next = tokio::time::timeout(
        Duration::from_secs(10),
        one_call(reqwest::Client::new(), gw.url(), 0),
    )
    .await;
    let seen = next.expect("the principal's next call was answered while the other is unread");
    assert_eq!(seen.misrouted + seen.duplicates, 0);
    drop(tcp);
}
