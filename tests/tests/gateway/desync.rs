//! Request smuggling on both of the gateway's HTTP/1.1 codecs: the classic desync cases
//! written raw to the front are answered as hyper answered them (400, or 431 for a huge
//! head) and the connection is closed, so no second request hidden in the bytes is ever
//! read; the same ambiguities in an upstream's answer fail that call precisely, and what
//! was hidden behind them never reaches any client.

use mcpgate_tests::raw::{RawUpstream, exchange};
use mcpgate_tests::{Client, Gateway};
use serde_json::json;

const INIT: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}"#;

/// A POST of `INIT` with `fields` (each ending in CRLF) and `body` after the head.
fn post(fields: &str, body: &str) -> Vec<u8> {
    format!(
        "POST /mcp HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\naccept: application/json, text/event-stream\r\n{fields}\r\n{body}"
    )
    .into_bytes()
}

/// A request hidden behind the first, which a lenient parser would answer too.
const HIDDEN: &str = "GET /healthz HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n";

fn addr(gw: &Gateway) -> String {
    gw.base.trim_start_matches("http://").to_owned()
}

#[tokio::test]
async fn the_front_refuses_every_classic_desync_and_closes() {
    let gw = Gateway::stdio_testkit(&[], "");
    let addr = addr(&gw);
    let len = INIT.len();
    let big = format!("x-big: {}\r\n", "a".repeat(200_000));
    let cases: Vec<(&str, Vec<u8>, u16)> = vec![
        (
            "content-length with transfer-encoding",
            post(
                "content-length: 5\r\ntransfer-encoding: chunked\r\n",
                &format!("0\r\n\r\n{HIDDEN}"),
            ),
            400,
        ),
        (
            "two content-lengths",
            post(
                &format!("content-length: {len}\r\ncontent-length: 5\r\n"),
                &format!("{INIT}{HIDDEN}"),
            ),
            400,
        ),
        (
            "obs-fold",
            post(
                &format!("content-length: {len}\r\nx-folded: a\r\n b\r\n"),
                &format!("{INIT}{HIDDEN}"),
            ),
            400,
        ),
        (
            "transfer-encoding: chunked, identity",
            post(
                "transfer-encoding: chunked, identity\r\n",
                &format!("0\r\n\r\n{HIDDEN}"),
            ),
            400,
        ),
        (
            "a space before the colon",
            post(
                &format!("content-length : {len}\r\n"),
                &format!("{INIT}{HIDDEN}"),
            ),
            400,
        ),
        (
            "a NUL in a field",
            post(
                &format!("content-length: {len}\r\nx-nul: a\0b\r\n"),
                &format!("{INIT}{HIDDEN}"),
            ),
            400,
        ),
        (
            "a 200 KB head",
            post(&format!("content-length: {len}\r\n{big}"), INIT),
            431,
        ),
    ];
    for (name, bytes, status) in cases {
        let a = exchange(&addr, &bytes).await;
        let shown = String::from_utf8_lossy(&a.bytes[..a.bytes.len().min(200)]).into_owned();
        assert_eq!(a.status(), status, "{name}: {shown}");
        assert!(
            a.closed,
            "{name}: the connection is closed after the refusal"
        );
        assert_eq!(
            a.answers(),
            1,
            "{name}: the hidden request is never answered: {shown}"
        );
    }
    // The control: the same request, well framed, is served and the connection kept.
    let a = exchange(
        &addr,
        &post(
            &format!("content-length: {len}\r\n"),
            &format!("{INIT}{HIDDEN}"),
        ),
    )
    .await;
    assert_eq!(a.status(), 200, "{}", String::from_utf8_lossy(&a.bytes));
    assert_eq!(a.answers(), 2, "a well-framed second request is served too");
}

/// A JSON-RPC answer to the test's second call, as a lenient client would read it out
/// of the bytes that follow an ambiguous head.
const SMUGGLED: &str =
    r#"{"jsonrpc":"2.0","id":3,"result":{"content":[{"type":"text","text":"SMUGGLED"}]}}"#;

fn answer(fields: &str, body: &str) -> Vec<u8> {
    format!("HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n{fields}\r\n{body}").into_bytes()
}

#[tokio::test]
async fn an_upstream_s_ambiguous_answer_fails_the_call_and_smuggles_nothing() {
    let good = r#"{"jsonrpc":"2.0","id":2,"result":{"content":[{"type":"text","text":"ok"}]}}"#;
    let n = good.len();
    let hidden = format!(
        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{SMUGGLED}",
        SMUGGLED.len()
    );
    let big = format!("x-big: {}\r\n", "a".repeat(200_000));
    let cases: Vec<(&str, Vec<u8>)> = vec![
        (
            "content-length with transfer-encoding",
            answer(
                &format!("content-length: {n}\r\ntransfer-encoding: chunked\r\n"),
                &format!("{good}{hidden}"),
            ),
        ),
        (
            "two content-lengths",
            answer(
                &format!("content-length: {n}\r\ncontent-length: 3\r\n"),
                &format!("{good}{hidden}"),
            ),
        ),
        (
            "obs-fold",
            answer(
                &format!("content-length: {n}\r\nx-folded: a\r\n b\r\n"),
                &format!("{good}{hidden}"),
            ),
        ),
        (
            "a space before the colon",
            answer(
                &format!("content-length : {n}\r\n"),
                &format!("{good}{hidden}"),
            ),
        ),
        (
            "a NUL in a field",
            answer(
                &format!("content-length: {n}\r\nx-nul: a\0b\r\n"),
                &format!("{good}{hidden}"),
            ),
        ),
        (
            "a 200 KB head",
            answer(&format!("content-length: {n}\r\n{big}"), good),
        ),
    ];
    for (name, bytes) in cases {
        let up = RawUpstream::start(bytes).await;
        let gw = Gateway::http(&up.url, "");
        let c = Client::new(&gw.url());
        let s = c.initialize().await;
        let first = s.call("anything", json!({})).await;
        let after = s.call("anything", json!({})).await;
        // An upstream that cannot be read ends its session: the next call on it is 404.
        assert_eq!(after.status, 404, "{name}: {after:?}");
        // A new session, on a new connection, meets the same refusal.
        let again = c.initialize().await.call("anything", json!({})).await;
        for (which, r) in [("first", &first), ("after", &after), ("again", &again)] {
            assert!(
                !r.body.contains("SMUGGLED") && !r.body.contains("\"ok\""),
                "{name}: the {which} call got what the ambiguous answer held: {r:?}"
            );
        }
        for r in [&first, &again] {
            assert_eq!(r.last()["error"]["code"], -32003, "{name}: {r:?}");
            let said = r.last()["error"]["message"].as_str().unwrap_or_default();
            assert!(
                said.contains("framing refused") || said.contains("head"),
                "{name}: the error names what was wrong: {said}"
            );
        }
    }
    // The control: the same answer, well framed, is the call's result.
    let up = RawUpstream::start(answer(&format!("content-length: {n}\r\n"), good)).await;
    let gw = Gateway::http(&up.url, "");
    let s = Client::new(&gw.url()).initialize().await;
    let r = s.call("anything", json!({})).await;
    assert_eq!(r.text(), "ok", "{r:?}");
}
