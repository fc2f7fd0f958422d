use super::*;

const K1: &str = "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=";
const K2: &str = "ZmVkY2JhOTg3NjU0MzIxMGZlZGNiYTk4NzY1NDMyMTA=";

fn ring(keys: &[(&str, &str)]) -> Arc<KeyRing> {
    Arc::new(KeyRing::new(keys.iter().copied()).unwrap())
}

fn tmp() -> PathBuf {
    static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    std::env::temp_dir().join(format!("mcpgate-store-{}-{n}.db", std::process::id()))
}

#[tokio::test]
async fn values_are_sealed_at_rest_and_survive_a_reopen() {
    let path = tmp();
    let at = Location::Sqlite(path.clone());
    let s = Store::open(&at, ring(&[("k1", K1)])).await.unwrap();
    let meta = serde_json::json!({"scope": "mcp:tools"});
    s.put("grant", "srv/alice", b"refresh-abc", &meta, None)
        .await
        .unwrap();
    drop(s);
    let on_disk = std::fs::read(&path).unwrap();
    let wal = std::fs::read(path.with_extension("db-wal")).unwrap_or_default();
    for bytes in [&on_disk, &wal] {
        assert!(!bytes.windows(11).any(|w| w == b"refresh-abc"));
    }
    // A rotated ring (new key first) still opens it.
    let s = Store::open(&at, ring(&[("k2", K2), ("k1", K1)]))
        .await
        .unwrap();
    let e = s.get("grant", "srv/alice").await.unwrap().unwrap();
    assert_eq!(e.value, b"refresh-abc");
    assert_eq!(e.meta, meta);
    assert_eq!(s.list("grant").await.unwrap()[0].key, "srv/alice");
    // Without the key that sealed it, it does not open: an error, not a silent miss.
    let s = Store::open(&at, ring(&[("k2", K2)])).await.unwrap();
    assert!(matches!(
        s.get("grant", "srv/alice").await,
        Err(StoreError::Sealed { .. })
    ));
    let _ = std::fs::remove_file(path);
}

#[tokio::test]
async fn take_is_single_use_and_expiry_hides() {
    let path = tmp();
    let s = Store::open(&Location::Sqlite(path.clone()), ring(&[("k1", K1)]))
        .await
        .unwrap();
    let m = serde_json::Value::Null;
    s.put("state", "a", b"1", &m, Some(now() + 60))
        .await
        .unwrap();
    s.put("state", "old", b"2", &m, Some(now() - 1))
        .await
        .unwrap();
    let (x, y) = tokio::join!(s.take("state", "a"), s.take("state", "a"));
    assert_eq!(
        [x.unwrap().is_some(), y.unwrap().is_some()]
            .iter()
            .filter(|b| **b)
            .count(),
        1
    );
    assert!(s.get("state", "old").await.unwrap().is_none());
    // Taking an expired entry gets nothing (and removes it).
    assert!(s.take("state", "old").await.unwrap().is_none());
    s.put("state", "old2", b"3", &m, Some(now() - 1))
        .await
        .unwrap();
    assert_eq!(s.purge().await.unwrap(), 1);
    assert!(!s.delete("state", "a").await.unwrap());
    let _ = std::fs::remove_file(path);
}

#[tokio::test]
async fn a_file_that_is_not_a_database_is_refused() {
    let path = tmp();
    std::fs::write(&path, vec![0x42u8; 8192]).unwrap();
    let e = Store::open(&Location::Sqlite(path.clone()), ring(&[("k1", K1)]))
        .await
        .unwrap_err();
    assert!(matches!(e, StoreError::Sqlite { .. }), "{e}");
    assert!(e.to_string().contains(&path.display().to_string()), "{e}");
    let _ = std::fs::remove_file(path);
}

#[test]
fn database_urls_are_logged_without_password() {
    assert_eq!(
        without_password("postgres://gw:s3cret@127.0.0.1:5432/vault"),
        "postgres://gw:***@127.0.0.1:5432/vault"
    );
}
