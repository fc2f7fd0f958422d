//! Floods to a client that never reads (its GET stream, or the flood call's own POST
//! answer) and a slow POST reader: the gateway's memory stays bounded, what cannot be
//! delivered is counted as dropped, and another session keeps working.

use std::time::{Duration, Instant};

use mcpgate_testkit::HttpOptions;
use mcpgate_tests::faults::{
    RssSampler, Setup, Up, assert_echo, assert_up, get_never_read, post_never_read, proc_kib,
    read_until, written_bytes,
};
use mcpgate_tests::wait_until;
use serde_json::json;

/// Notifications per flood and their size: 200 MB in all.
const FLOOD_COUNT: u64 = 2000;
const FLOOD_SIZE: u64 = 100_000;
/// How much the gateway's RSS may grow during a 200 MB flood (its buffers are bounded
/// by `backlog` and `replay_events`, 32 messages of 100 kB each, per stream).
const FLOOD_RSS_LIMIT_KIB: u64 = 48 * 1024;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reader {
    /// The client's GET stream is open and never read.
    Get,
    /// The flood call's own POST answer is never read (and there is no GET stream).
    Post,
}

async fn flood_never_read(up: Up, reader: Reader) {
    let Setup {
        http,
        mut gw,
        client: _,
        s,
        other,
    } = Setup::new(
        up,
        HttpOptions::default(),
        "[session]\nbacklog = 32\nreplay_events = 32\nrequest_timeout = \"120s\"\n",
    )
    .await;
    // Warm up: connections, runtime threads and the allocator's first arenas are not
    // what is measured.
    let warm = s
        .call("flood", json!({"count": 40, "size": FLOOD_SIZE}))
        .await;
    assert_eq!(warm.status, 200, "{warm:?}");
    assert_echo(&other, "warm").await;
    // Over stdio the end of the flood is seen from the child's written bytes: any call
    // on the flooded session would itself be a stream the flood can go to.
    let child: Option<u32> = match up {
        Up::Stdio => Some(s.call("whoami", json!({})).await.text().parse().unwrap()),
        Up::Http => None,
    };
    let child_written = child.map_or(0, written_bytes);

    let pid = gw.pid();
    let rss_before = proc_kib(pid, "VmRSS");
    let sampler = RssSampler::start(pid);
    let t0 = Instant::now();
    let _held = match reader {
        Reader::Get => {
            let tcp = get_never_read(&gw, &s.id).await;
            let r = s
                .call(
                    "flood",
                    json!({"count": FLOOD_COUNT, "size": FLOOD_SIZE, "background": true}),
                )
                .await;
            assert_eq!(r.text(), format!("flooding {FLOOD_COUNT}"));
            tcp
        }
        Reader::Post => {
            let msg = json!({"jsonrpc":"2.0","id":"flood","method":"tools/call","params":{
                "name":"flood","arguments":{"count": FLOOD_COUNT, "size": FLOOD_SIZE}}});
            post_never_read(&gw, &s.id, &msg).await
        }
    };
    // Another session works during the flood.
    let mut slowest = Duration::ZERO;
    let mut flooded = false;
    for i in 0.. {
        let t = Instant::now();
        assert_echo(&other, &format!("during {i}")).await;
        slowest = slowest.max(t.elapsed());
        flooded = match (&http, child) {
            (Some(h), _) => h.stats().flood_sent >= 40 + FLOOD_COUNT,
            (None, Some(child)) => {
                written_bytes(child) - child_written >= FLOOD_COUNT * (FLOOD_SIZE + 1)
            }
            (None, None) => unreachable!(),
        };
        if flooded || t0.elapsed() > Duration::from_secs(90) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        flooded,
        "the flood did not get through in 90 s; log:\n{}",
        gw.log()
    );
    let flood_time = t0.elapsed();
    // Let the gateway take in the last messages.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let peak = sampler.finish().await.max(proc_kib(pid, "VmRSS"));
    let dropped = gw.metric("mcpgate_backlog_dropped_total").await;
    let replay_dropped = gw.metric("mcpgate_replay_dropped_total").await;
    eprintln!(
        "flood {up:?}/{reader:?}: {} MB in {flood_time:?}; gateway RSS before {rss_before} KiB, \
         peak {peak} KiB (+{} KiB); backlog_dropped {dropped}; replay_dropped {replay_dropped}; \
         slowest bystander echo {slowest:?}",
        FLOOD_COUNT * FLOOD_SIZE / 1_000_000,
        peak.saturating_sub(rss_before)
    );
    assert!(
        peak.saturating_sub(rss_before) < FLOOD_RSS_LIMIT_KIB,
        "gateway RSS grew from {rss_before} to {peak} KiB during a {} MB flood",
        FLOOD_COUNT * FLOOD_SIZE / 1_000_000
    );

    match reader {
        Reader::Get => {
            // The GET stream that nobody read was ended; the backlog kept the newest
            // messages and dropped (and counted) the oldest.
            assert!(
                dropped >= (FLOOD_COUNT / 2) as f64,
                "backlog_dropped_total = {dropped}; log:\n{}",
                gw.log()
            );
            assert!(
                gw.log().contains("client GET stream too slow; ended it"),
                "log:\n{}",
                gw.log()
            );
            let mut fresh = s.open_stream().await;
            assert_eq!(fresh.recv().await.unwrap()["status"], 200);
            let mut last = -1;
            while let Ok(Some(m)) =
                tokio::time::timeout(Duration::from_millis(500), fresh.recv()).await
            {
                last = m["params"]["data"]["seq"].as_i64().unwrap_or(last);
            }
            assert_eq!(
                last,
                FLOOD_COUNT as i64 - 1,
                "the backlog ends with the newest message"
            );
        }
        Reader::Post => {
            // The flood went to the session's one stream, the unread POST answer, whose
            // buffers are bounded.
        }
    }
    // The flooded session itself still works, and so does the other one.
    assert_echo(&s, "flooded session").await;
    assert_echo(&other, "after").await;
    assert_eq!(gw.metric("mcpgate_sessions_active").await, 2.0);
    assert_up(&mut gw).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flood_to_a_get_stream_never_read_http() {
    flood_never_read(Up::Http, Reader::Get).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flood_to_a_get_stream_never_read_stdio() {
    flood_never_read(Up::Stdio, Reader::Get).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flood_to_a_post_stream_never_read_http() {
    flood_never_read(Up::Http, Reader::Post).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flood_to_a_post_stream_never_read_stdio() {
    flood_never_read(Up::Stdio, Reader::Post).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_post_reader_loses_nothing_silently() {
    let Setup {
        http,
        mut gw,
        client: _,
        s,
        other,
    } = Setup::new(
        Up::Http,
        HttpOptions::default(),
        "[session]\nbacklog = 32\nreplay_events = 32\n",
    )
    .await;
    let up = http.unwrap();
    const COUNT: u64 = 2000;
    let msg = json!({"jsonrpc":"2.0","id":"slow-reader","method":"tools/call","params":{
        "name":"flood","arguments":{"count": COUNT, "size": 10_000}}});
    let mut tcp = post_never_read(&gw, &s.id, &msg).await;
    // The reader is slow: it reads nothing until the upstream has sent everything.
    let sent = wait_until(Duration::from_secs(60), || async {
        up.stats().flood_sent == COUNT
    })
    .await;
    assert!(sent, "flood_sent = {}", up.stats().flood_sent);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let body = read_until(&mut tcp, br#""id":"slow-reader""#).await;
    let body = String::from_utf8_lossy(&body);
    let mut received = body.matches(r#""logger":"flood""#).count() as u64;
    // Messages that found no stream while the POST stream was full wait in the session's
    // backlog for its next GET stream: buffered, not lost.
    let mut get = s.open_stream().await;
    assert_eq!(get.recv().await.unwrap()["status"], 200);
    while let Ok(Some(m)) = tokio::time::timeout(Duration::from_millis(500), get.recv()).await {
        if m["params"]["logger"] == "flood" {
            received += 1;
        }
    }
    let dropped = gw.metric("mcpgate_backlog_dropped_total").await as u64;
    eprintln!(
        "slow POST reader: {received} of {COUNT} flood notifications received, \
         backlog_dropped_total {dropped}, replay_dropped_total {}, response received: {}",
        gw.metric("mcpgate_replay_dropped_total").await,
        body.contains(r#""id":"slow-reader""#)
    );
    assert!(
        body.contains(r#""id":"slow-reader""#),
        "the response arrives"
    );
    assert_eq!(
        received + dropped,
        COUNT,
        "every notification is delivered or counted as dropped"
    );
    assert_echo(&other, "bystander").await;
    assert_up(&mut gw).await;
}

/// One request whose client never reads its answer does not hold the session's pipe: the
/// stdio child's other messages are still read, so another call on the same session is
/// answered while the flood is still unread (the pipe's reader never waits for a slow
/// request; what that request's client cannot take goes to the session's backlog).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_request_does_not_hold_the_stdio_pipe() {
    let Setup {
        http: _,
        mut gw,
        client: _,
        s,
        other,
    } = Setup::new(
        Up::Stdio,
        HttpOptions::default(),
        "[session]\nbacklog = 32\nreplay_events = 32\nrequest_timeout = \"60s\"\n",
    )
    .await;
    let child: u32 = s.call("whoami", json!({})).await.text().parse().unwrap();
    let before = written_bytes(child);
    // Progress notifications belong to the request (its token): they queue for it.
    const COUNT: u64 = 5000;
    const BYTES: u64 = COUNT * 200;
    let msg = json!({"jsonrpc":"2.0","id":"unread","method":"tools/call","params":{
        "name":"notify","arguments":{"tag": "unread", "count": COUNT},
        "_meta": {"progressToken": "unread"}}});
    let _held = post_never_read(&gw, &s.id, &msg).await;
    // The child gets all of it out: the gateway keeps reading its stdout.
    let out = wait_until(Duration::from_secs(30), || async {
        written_bytes(child) - before >= BYTES
    })
    .await;
    assert!(
        out,
        "the child wrote only {} of {BYTES} bytes: its stdout is not being read",
        written_bytes(child) - before,
    );
    // And the same session answers another call meanwhile.
    assert_echo(&s, "while the flood is unread").await;
    assert!(gw.metric("mcpgate_backlog_dropped_total").await > 0.0);
    assert_echo(&other, "bystander").await;
    assert_up(&mut gw).await;
}
