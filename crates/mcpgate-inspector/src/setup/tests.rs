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

/// `build(a)` fails, and for the reason `why` (a part of its message): without a reason,
/// an error from an earlier step (v2's UI not found) passes for any check.
fn refused(a: &[&str], why: &str) {
    let text = match build(&args(a)) {
        Ok(_) => panic!("{a:?} was accepted; it must be refused: {why}"),
        Err(e) => crate::error::chain(&e),
    };
    assert!(text.contains(why), "{a:?}: {text:?} does not say {why:?}");
}

/// A directory holding a v2 UI build (`clients/web/dist/index.html`).
fn fake_ui(tag: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("mcpgate-ui-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("clients/web/dist")).unwrap();
    std::fs::write(dir.join("clients/web/dist/index.html"), "<html></html>").unwrap();
    dir
}

#[test]
fn refusals() {
    assert!(build(&args(&["--listen", "0.0.0.0:6277"])).is_err());
    assert!(build(&args(&["--listen", "10.1.2.3:6277"])).is_err());
    assert!(build(&args(&["--ui-origin", "http://x:1/path"])).is_err());
    assert!(build(&args(&["--allow-url", "ftp://x/"])).is_err());
    assert!(build(&args(&["--allow-url", "http://u:p@x/"])).is_err());
    // Each for its own reason, under both protocols (v2 with a UI to serve, so that its
    // absence is not what fails).
    let ui = fake_ui("refusals");
    let ui = ui.to_str().unwrap();
    for protocol in [&["--protocol", "v1"][..], &["--ui", ui]] {
        let with = |more: &[&'static str]| [protocol, more].concat();
        refused(
            &with(&["--listen", "0.0.0.0:6277"]),
            "is not a loopback address",
        );
        refused(
            &with(&["--listen", "10.1.2.3:6277"]),
            "is not a loopback address",
        );
        refused(
            &with(&["--ui-origin", "http://x:1/path"]),
            "must be just scheme://host[:port]",
        );
        refused(
            &with(&["--allow-url", "ftp://x/"]),
            "prefix must be http:// or https://",
        );
        refused(
            &with(&["--allow-url", "http://u:p@x/"]),
            "prefix must not contain user info",
        );
        // And what they refuse is accepted put right.
        build(&args(&with(&[
            "--listen",
            "127.0.0.1:6277",
            "--ui-origin",
            "http://x:1",
            "--allow-url",
            "https://x/",
        ])))
        .unwrap();
    }
    let _ = std::fs::remove_dir_all(ui);
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
