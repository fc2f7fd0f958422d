#![allow(clippy::unwrap_used)]

use super::*;

fn parse(raw: &[u8]) -> Result<Option<RequestHead>, H1Error> {
    parse_request(raw, &Limits::default(), &mut Vec::new())
}

fn head(extra: &str) -> Vec<u8> {
    format!("POST /mcp HTTP/1.1\r\nhost: x\r\n{extra}\r\n").into_bytes()
}

#[test]
fn a_plain_post_has_its_length_fields_and_target() {
    let raw = head("content-length: 12\r\nmcp-session-id: abc\r\n");
    let mut fields = Vec::new();
    let h = parse_request(&raw, &Limits::default(), &mut fields)
        .unwrap()
        .unwrap();
    assert_eq!(h.method, Method::POST);
    assert_eq!(h.version, Version::HTTP_11);
    assert_eq!(h.body, BodyKind::Length(12));
    assert_eq!(h.len, raw.len());
    assert!(!h.close);
    assert_eq!(&raw[h.target.0 as usize..h.target.1 as usize], b"/mcp");
    assert_eq!(fields.len(), 3);
    assert_eq!(fields[2].name(&raw), b"mcp-session-id");
    assert_eq!(fields[2].value(&raw), b"abc");
}

#[test]
fn a_partial_head_asks_for_more() {
    let raw = head("content-length: 12\r\n");
    assert_eq!(parse(&raw[..raw.len() - 2]).unwrap(), None);
    assert_eq!(parse(b"POS").unwrap(), None);
}

#[test]
fn the_smuggling_cases_are_refused() {
    let refused: &[(&str, &str)] = &[
        (
            "content-length with transfer-encoding",
            "content-length: 5\r\ntransfer-encoding: chunked\r\n",
        ),
        (
            "two content-lengths that differ",
            "content-length: 5\r\ncontent-length: 6\r\n",
        ),
        ("a list of lengths that differ", "content-length: 5, 6\r\n"),
        ("a signed length", "content-length: +5\r\n"),
        ("a length that is not a number", "content-length: abc\r\n"),
        ("an empty length", "content-length: \r\n"),
        (
            "a length past u64",
            "content-length: 99999999999999999999\r\n",
        ),
        (
            "chunked, identity",
            "transfer-encoding: chunked, identity\r\n",
        ),
        ("identity", "transfer-encoding: identity\r\n"),
        ("gzip, chunked", "transfer-encoding: gzip, chunked\r\n"),
        (
            "two transfer-encodings",
            "transfer-encoding: chunked\r\ntransfer-encoding: chunked\r\n",
        ),
        ("obs-fold", "x-a: one\r\n two\r\n"),
        ("a space before the colon", "x-a : one\r\n"),
        ("a NUL in a value", "x-a: o\0ne\r\n"),
        ("a CR alone in a value", "x-a: o\rne\r\n"),
        ("an empty name", ": one\r\n"),
    ];
    for (name, extra) in refused {
        let r = parse(&head(extra));
        assert!(r.is_err(), "{name}: {r:?}");
        assert_eq!(r.unwrap_err().status(), 400, "{name}");
    }
    let http10 = b"POST / HTTP/1.0\r\ntransfer-encoding: chunked\r\n\r\n";
    assert!(matches!(
        parse(http10),
        Err(H1Error::Framing(Framing::CodingOnHttp10))
    ));
}

#[test]
fn what_is_unambiguous_is_taken() {
    let same = parse(&head("content-length: 5\r\ncontent-length: 5\r\n"));
    assert_eq!(same.unwrap().unwrap().body, BodyKind::Length(5));
    let list = parse(&head("content-length: 5, 5\r\n"));
    assert_eq!(list.unwrap().unwrap().body, BodyKind::Length(5));
    let chunked = parse(&head("Transfer-Encoding: Chunked\r\n"));
    assert_eq!(chunked.unwrap().unwrap().body, BodyKind::Chunked);
    let none = parse(&head("")).unwrap().unwrap();
    assert_eq!(none.body, BodyKind::Empty);
    let zero = parse(&head("content-length: 0\r\n")).unwrap().unwrap();
    assert_eq!(zero.body, BodyKind::Empty);
}

#[test]
fn heads_over_the_limits_get_431() {
    let big = head(&format!("x-big: {}\r\n", "a".repeat(200 * 1024)));
    assert!(matches!(parse(&big), Err(H1Error::HeadTooLarge)));
    assert_eq!(H1Error::HeadTooLarge.status(), 431);
    // Still incomplete, but already past the limit.
    assert!(matches!(
        parse(&big[..70 * 1024]),
        Err(H1Error::HeadTooLarge)
    ));
    let many: String = (0..150).map(|i| format!("x-h{i}: v\r\n")).collect();
    assert!(matches!(parse(&head(&many)), Err(H1Error::HeadTooLarge)));
}

#[test]
fn connection_persistence_follows_the_version() {
    let close = parse(&head("connection: close\r\n")).unwrap().unwrap();
    assert!(close.close);
    let old = parse(b"GET / HTTP/1.0\r\n\r\n").unwrap().unwrap();
    assert!(old.close);
    let kept = parse(b"GET / HTTP/1.0\r\nconnection: keep-alive\r\n\r\n")
        .unwrap()
        .unwrap();
    assert!(!kept.close);
    let expect = parse(&head("expect: 100-continue\r\ncontent-length: 3\r\n"))
        .unwrap()
        .unwrap();
    assert!(expect.expect_continue);
}

#[test]
fn bad_request_lines_are_refused() {
    for raw in [
        &b"P@ST /mcp HTTP/1.1\r\n\r\n"[..],
        b"POST /mcp HTTP/2.0\r\n\r\n",
        b"POST  HTTP/1.1\r\n\r\n",
        b"\x16\x03\x01\x00",
    ] {
        assert!(parse(raw).is_err(), "{raw:?}");
    }
}
