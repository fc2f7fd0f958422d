//! Unit tests.
use super::*;
use crate::config::{InspectorConfig, InspectorDefaults, ProxyAuth};
use crate::guard::loopback_host;

#[test]
fn hosts() {
    for ok in [
        "localhost",
        "localhost:6277",
        "127.0.0.1",
        "127.0.0.1:6277",
        "127.1.2.3:1",
        "[::1]",
        "[::1]:6277",
        "LOCALHOST:1",
    ] {
        assert!(loopback_host(ok), "{ok}");
    }
    for bad in [
        "evil.example",
        "evil.example:6277",
        "localhost.evil.example",
        "10.0.0.1:6277",
        "[::2]:1",
        "",
    ] {
        assert!(!loopback_host(bad), "{bad}");
    }
}

#[test]
fn endpoints() {
    assert_eq!(endpoint("/mcp"), Some(Endpoint::Mcp));
    assert_eq!(endpoint("/mcp/"), Some(Endpoint::Mcp));
    assert_eq!(endpoint("/stdio"), Some(Endpoint::Stdio));
    assert_eq!(endpoint("/servers/x/mcp"), None);
    assert_eq!(endpoint("/"), None);
}

#[test]
fn config_validation() {
    let mut c = InspectorConfig {
        auth: ProxyAuth::Token("0123456789abcdef".into()),
        ui_origins: vec!["http://localhost:6274".into()],
        stdio: Vec::new(),
        urls: Vec::new(),
        base_env: BTreeMap::new(),
        defaults: InspectorDefaults::default(),
        protocol: crate::config::Protocol::V1,
    };
    assert!(c.validate().is_ok());
    c.ui_origins = vec!["http://localhost:6274/path".into()];
    assert!(c.validate().is_err());
    c.ui_origins = vec!["http://localhost:6274".into()];
    c.auth = ProxyAuth::Token("short".into());
    assert!(c.validate().is_err());
}
