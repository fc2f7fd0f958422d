//! Unit tests of the `mcpgate inspector` command line.
use super::*;
use clap::Parser;

fn build(args: &Args) -> Result<Setup, SetupError> {
    Setup::from_args(args)
}

#[derive(Debug, Parser)]
struct T {
    #[command(flatten)]
    args: Args,
}

fn args(a: &[&str]) -> Args {
    T::parse_from(std::iter::once("x").chain(a.iter().copied())).args
}

#[test]
fn command_line_only() {
    let s = build(&args(&[
        "--protocol",
        "v1",
        "--",
        "/bin/prog",
        "serve",
        "*",
    ]))
    .unwrap();
    assert_eq!(s.listen.to_string(), DEFAULT_LISTEN);
    assert!(matches!(s.inspector.protocol, Protocol::V1));
    assert!(s.generated);
    let r = &s.inspector.stdio[0];
    assert_eq!(r.command, "/bin/prog");
    assert_eq!(r.args, vec!["serve".to_owned(), "\\*".to_owned()]);
    assert_eq!(s.inspector.defaults.args.as_deref(), Some("serve '*'"));
    assert_eq!(s.ui_url, "http://localhost:6274");
}

#[test]
fn refusals() {
    assert!(build(&args(&["--listen", "0.0.0.0:6277"])).is_err());
    assert!(build(&args(&["--listen", "10.1.2.3:6277"])).is_err());
    assert!(build(&args(&["--ui-origin", "http://x:1/path"])).is_err());
    assert!(build(&args(&["--allow-url", "ftp://x/"])).is_err());
    assert!(build(&args(&["--allow-url", "http://u:p@x/"])).is_err());
}

#[test]
fn ready_urls() {
    assert_eq!(
        ready_url(
            "http://localhost:6274/",
            "http://127.0.0.1:6277",
            Some("ab12")
        ),
        "http://localhost:6274/?MCP_PROXY_FULL_ADDRESS=http%3A%2F%2F127.0.0.1%3A6277&MCP_PROXY_AUTH_TOKEN=ab12"
    );
}

#[test]
fn v2_needs_the_ui_and_serves_its_own_origin() {
    let dir = std::env::temp_dir().join(format!("mcpgate-ui-test-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("clients/web/dist")).unwrap();
    std::fs::write(dir.join("clients/web/dist/index.html"), "<html></html>").unwrap();
    let missing = dir.join("nothing-here");
    let e = build(&args(&["--ui", missing.to_str().unwrap()])).unwrap_err();
    assert!(format!("{e:#}").contains("--ui"), "{e:#}");
    let s = build(&args(&[
        "--ui",
        dir.to_str().unwrap(),
        "--listen",
        "127.0.0.1:7001",
    ]))
    .unwrap();
    assert_eq!(
        s.inspector.ui_origins,
        vec!["http://127.0.0.1:7001", "http://localhost:7001"]
    );
    match &s.inspector.protocol {
        Protocol::V2 { ui, .. } => assert!(ui.ends_with("clients/web/dist")),
        Protocol::V1 => panic!("v2 is the default"),
    }
    assert_eq!(s.ui_url, "http://127.0.0.1:7001/");
    let _ = std::fs::remove_dir_all(&dir);
}
