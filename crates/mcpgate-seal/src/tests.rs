#![allow(clippy::unwrap_used)]

use super::*;

const K1: &str = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=";
const K2: &str = "ICEiIyQlJicoKSorLC0uLzAxMjM0NTY3ODk6Ozw9Pj8=";

fn claims() -> Claims {
    Claims {
        sid: "0123456789abcdef0123456789abcdef".into(),
        server: "kit".into(),
        upstream_sid: Some("up-1".into()),
        version: "2025-11-25".into(),
        capabilities: Some(r#"{"roots":{}}"#.into()),
        principal: Some("alice".into()),
        created: 1_780_000_000,
        expires: None,
    }
}

#[test]
fn a_token_opens_to_what_was_sealed_and_reveals_nothing() {
    let ring = KeyRing::new([("k1", K1)]).unwrap();
    let t = ring.seal(&claims()).unwrap();
    assert!(t.starts_with("k1."), "{t}");
    assert!(looks_sealed(&t));
    assert!(!t.contains("alice") && !t.contains("up-1") && !t.contains("kit"));
    assert_eq!(ring.open(&t).unwrap(), claims());
    // Two seals of the same claims differ (random nonce).
    assert_ne!(t, ring.seal(&claims()).unwrap());
    assert_eq!(tag(&t).len(), 3 + 8);
}

#[test]
fn rotation_seals_with_the_first_key_and_opens_with_any() {
    let old = KeyRing::new([("k1", K1)]).unwrap();
    let t1 = old.seal(&claims()).unwrap();
    let both = KeyRing::new([("k2", K2), ("k1", K1)]).unwrap();
    assert_eq!(both.sealing_key(), "k2");
    assert_eq!(both.open(&t1).unwrap(), claims());
    let t2 = both.seal(&claims()).unwrap();
    assert!(t2.starts_with("k2."));
    let new = KeyRing::new([("k2", K2)]).unwrap();
    assert_eq!(new.open(&t2).unwrap(), claims());
    assert_eq!(new.open(&t1), Err(SealError::UnknownKey));
}

#[test]
fn tampered_truncated_and_relabelled_tokens_do_not_open() {
    let ring = KeyRing::new([("k1", K1), ("k2", K2)]).unwrap();
    let t = ring.seal(&claims()).unwrap();
    // Every single-character change in the body.
    for i in "k1.".len()..t.len() {
        let mut b = t.clone().into_bytes();
        b[i] = if b[i] == b'A' { b'B' } else { b'A' };
        let forged = String::from_utf8(b).unwrap();
        if forged != t {
            assert!(ring.open(&forged).is_err(), "changed at {i}");
        }
    }
    for n in [t.len() - 1, t.len() - 10, 10, 3] {
        assert!(ring.open(&t[..n]).is_err(), "truncated to {n}");
    }
    // The same body under the other key id.
    let moved = format!("k2{}", &t[2..]);
    assert_eq!(ring.open(&moved), Err(SealError::Forged));
    // Sealed under another secret with the same key id.
    let other = KeyRing::new([("k1", K2)]).unwrap().seal(&claims()).unwrap();
    assert_eq!(ring.open(&other), Err(SealError::Forged));
    for junk in ["", ".", "k1.", "plainhexid0123", "k1.!!!!", "k 1.abcd"] {
        assert!(ring.open(junk).is_err(), "{junk:?}");
    }
    assert!(!looks_sealed("0123456789abcdef"));
    assert!(!looks_sealed("replica_a-0123456789abcdef"));
}

#[test]
fn bad_keys_are_refused_with_their_id() {
    assert_eq!(
        KeyRing::new([("k1", "c2hvcnQ=")]).unwrap_err(),
        SealError::BadKey("k1".into())
    );
    assert_eq!(
        KeyRing::new([("k1", "not base64!")]).unwrap_err(),
        SealError::BadKey("k1".into())
    );
    assert_eq!(
        KeyRing::new([("k.1", K1)]).unwrap_err(),
        SealError::BadKeyId("k.1".into())
    );
    assert_eq!(
        KeyRing::new([("k1", K1), ("k1", K2)]).unwrap_err(),
        SealError::BadKeyId("k1".into())
    );
    assert_eq!(
        KeyRing::new(Vec::<(&str, &str)>::new()).unwrap_err(),
        SealError::NoKey
    );
    assert!(!format!("{:?}", KeyRing::new([("k1", K1)]).unwrap()).contains(K1));
}

#[test]
fn bytes_open_only_in_their_own_context_and_never_as_a_session() {
    let old = KeyRing::new([("k1", K1)]).unwrap();
    let sealed = old
        .seal_bytes(b"grant/srv/alice", b"refresh-token-1")
        .unwrap();
    assert!(!sealed.contains("refresh-token-1"));
    assert_eq!(
        old.open_bytes(b"grant/srv/alice", &sealed).unwrap(),
        b"refresh-token-1"
    );
    // Moved to another row, or read as a session id: it does not open.
    assert_eq!(
        old.open_bytes(b"grant/srv/bob", &sealed).unwrap_err(),
        SealError::Forged
    );
    assert!(old.open(&sealed).is_err());
    let session = old.seal(&claims()).unwrap();
    assert!(old.open_bytes(b"", &session).is_err());
    // Rotation: a newer key in front still opens what the older one sealed.
    let rotated = KeyRing::new([("k2", K2), ("k1", K1)]).unwrap();
    assert_eq!(
        rotated.open_bytes(b"grant/srv/alice", &sealed).unwrap(),
        b"refresh-token-1"
    );
    assert!(rotated.seal_bytes(b"x", b"y").unwrap().starts_with("k2."));
}
