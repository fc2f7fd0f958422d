//! Strict routing across a virtual server's sessions: 30 concurrent client sessions of a
//! virtual server of the testkit over HTTP (`a`), the testkit over stdio (`b`) and the
//! everything server (`ev`), each receiving notifications and server requests from every
//! member — none misrouted, none lost, and each with member sessions of its own.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use mcpgate_testkit::{HttpOptions, HttpServer};
use mcpgate_tests::virtuals::{call_answering, everything, http_kit, stdio_kit};
use mcpgate_tests::{Client, Gateway, children_of, wait_until};
use serde_json::{Value, json};

const SESSIONS: usize = 30;
const COUNT: u64 = 20;
const STEPS: u64 = 3;

#[derive(Debug, Default)]
struct Seen {
    misrouted: Vec<String>,
    /// Log lines by member (`a`, `b`) and sequence number.
    logs: BTreeMap<&'static str, BTreeSet<u64>>,
    /// Progress by token.
    progress: BTreeMap<String, BTreeSet<String>>,
}

impl Seen {
    fn account(&mut self, me: &str, m: &Value) {
        match m["method"].as_str() {
            Some("notifications/message") => {
                let Some(tag) = m["params"]["data"]["tag"].as_str() else {
                    return; // the everything server's own log lines carry no tag
                };
                let member = match tag.strip_prefix(me) {
                    Some("-a") => "a",
                    Some("-b") => "b",
                    _ => {
                        self.misrouted.push(m.to_string());
                        return;
                    }
                };
                let seq = m["params"]["data"]["seq"].as_u64().unwrap();
                self.logs.entry(member).or_default().insert(seq);
            }
            Some("notifications/progress") => {
                let token = m["params"]["progressToken"]
                    .as_str()
                    .unwrap_or("")
                    .to_owned();
                if !token.starts_with(&format!("{me}-")) {
                    self.misrouted.push(m.to_string());
                    return;
                }
                self.progress
                    .entry(token)
                    .or_default()
                    .insert(m["params"]["progress"].to_string());
            }
            _ => {}
        }
    }

    fn complete(&self) -> bool {
        self.logs.get("a").map_or(0, BTreeSet::len) as u64 == COUNT
            && self.logs.get("b").map_or(0, BTreeSet::len) as u64 == COUNT
    }
}

/// What one client session saw and which member sessions it had.
struct Outcome {
    seen: Seen,
    whoami_a: String,
    count_b: String,
}

async fn one_session(url: String, i: usize) -> Outcome {
    let c = Client::new(&url);
    let s = c.initialize().await;
    let mut get = s.open_stream().await;
    assert_eq!(get.recv().await.unwrap()["status"], 200);
    let me = format!("s{i}");
    let notify = |member: &str| {
        let tag = format!("{me}-{member}");
        s.request(
            "tools/call",
            json!({"name": format!("{member}__notify"), "arguments": {"tag": tag, "count": COUNT}, "_meta": {"progressToken": tag}}),
        )
    };
    let ev_tag = format!("{me}-ev");
    let (ra, rb, rev) = tokio::join!(
        notify("a"),
        notify("b"),
        s.request(
            "tools/call",
            json!({"name": "ev__trigger-long-running-operation", "arguments": {"duration": 1, "steps": STEPS}, "_meta": {"progressToken": ev_tag}}),
        )
    );
    assert_eq!(ra.text(), format!("{me}-a:{COUNT}"), "{ra:?}");
    assert_eq!(rb.text(), format!("{me}-b:{COUNT}"), "{rb:?}");
    assert!(rev.text().contains("completed"), "{rev:?}");
    let mut seen = Seen::default();
    for m in ra.messages.iter().chain(&rb.messages).chain(&rev.messages) {
        seen.account(&me, m);
    }
    // Both testkits' members answer their sampling request with this session's tag: an
    // answer that reached another session's member would come back with another tag.
    for member in ["a", "b"] {
        let (msgs, beside) = call_answering(
            &s,
            Some(&mut get),
            &format!("{member}__sample"),
            json!({"prompt": me}),
            &me,
        )
        .await;
        let last = msgs.last().unwrap();
        assert_eq!(
            last["result"]["content"][0]["text"],
            me.as_str(),
            "{member}: {msgs:?}"
        );
        for m in msgs.iter().chain(&beside) {
            seen.account(&me, m);
        }
    }
    // What a pipe member sent outside its request arrives on the GET stream.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while !seen.complete() {
        match tokio::time::timeout_at(deadline, get.recv()).await {
            Ok(Some(m)) => seen.account(&me, &m),
            _ => break,
        }
    }
    while let Ok(Some(m)) = tokio::time::timeout(Duration::from_millis(100), get.recv()).await {
        seen.account(&me, &m);
    }
    let whoami_a = s.call("a__whoami", json!({})).await.text();
    let count_b = s.call("b__count", json!({})).await.text();
    assert_eq!(s.delete().await, 200);
    Outcome {
        seen,
        whoami_a,
        count_b,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thirty_sessions_each_get_only_their_members_messages() {
    let kit = HttpServer::start("127.0.0.1:0".parse().unwrap(), HttpOptions::default())
        .await
        .unwrap();
    let gw = Gateway::start(&format!(
        "[session]\nrequest_timeout = \"30s\"\n{}{}{}[[virtual]]\nname = \"mix\"\ndefault = true\n[[virtual.member]]\nserver = \"kit\"\nprefix = \"a\"\n[[virtual.member]]\nserver = \"kitstdio\"\nprefix = \"b\"\n[[virtual.member]]\nserver = \"everything\"\nprefix = \"ev\"\n",
        http_kit("kit", &kit.url()),
        stdio_kit("kitstdio"),
        everything("everything"),
    ));
    let tasks: Vec<_> = (0..SESSIONS)
        .map(|i| tokio::spawn(one_session(gw.url(), i)))
        .collect();
    let mut misrouted = Vec::new();
    let mut lost = 0;
    let mut whoami = BTreeSet::new();
    for (i, t) in tasks.into_iter().enumerate() {
        let o = t.await.unwrap();
        misrouted.extend(o.seen.misrouted.iter().cloned());
        for member in ["a", "b"] {
            lost += COUNT as usize - o.seen.logs.get(member).map_or(0, BTreeSet::len);
        }
        for (member, n) in [("a", COUNT), ("b", COUNT), ("ev", STEPS)] {
            let got = o
                .seen
                .progress
                .get(&format!("s{i}-{member}"))
                .map_or(0, BTreeSet::len);
            assert_eq!(got as u64, n, "session {i}: progress of its {member} call");
        }
        whoami.insert(o.whoami_a);
        assert_eq!(
            o.count_b, "1",
            "session {i}: its stdio member is a child of its own"
        );
    }
    assert!(misrouted.is_empty(), "misrouted: {misrouted:?}");
    assert_eq!(lost, 0, "lost log lines");
    assert_eq!(
        whoami.len(),
        SESSIONS,
        "each session had an upstream session of its own"
    );
    let st = kit.stats();
    assert_eq!(
        (st.sessions_created, st.sessions_deleted),
        (SESSIONS as u64, SESSIONS as u64),
        "one HTTP member session per client session, each ended by its DELETE"
    );
    let pid = gw.pid();
    assert!(
        wait_until(Duration::from_secs(15), || async {
            children_of(pid).is_empty()
        })
        .await,
        "every stdio member ended: {:?}",
        children_of(pid)
    );
    let metrics = gw.metrics_text().await;
    let up: Vec<&str> = metrics
        .lines()
        .filter(|l| l.starts_with("mcpgate_virtual_members_up{"))
        .collect();
    assert_eq!(up.len(), 3, "a gauge per member: {up:?}");
    assert!(
        up.iter().all(|l| l.ends_with(" 0")),
        "no member session is left: {up:?}"
    );
}
