//! `mcpgate --check-config` on stdio containment: what cannot work on this host is an
//! error naming the server and the key, before any session.

use mcpgate_tests::check_config;

fn server(extra: &str) -> String {
    format!("[[server]]\nname = \"s\"\ntransport = \"stdio\"\ncommand = [\"x\"]\n{extra}\n")
}

#[test]
fn sandbox_and_limits_that_cannot_work_are_errors() {
    let (code, out) = check_config(&server(
        "[server.sandbox]\npaths = [\"/usr/share\"]\nnetwork = \"host\"\n[server.limits]\nmemory_mib = 256\ncpu = \"30s\"\nprocesses = 64\nopen_files = 256",
    ));
    assert_eq!(code, 0, "a sandbox this host can build, and limits: {out}");
    let cases = [
        (
            "[server.sandbox]\npaths = [\"/no/such/dir\"]",
            "sandbox path /no/such/dir does not exist",
        ),
        (
            "[server.sandbox]\nwritable = [\"relative/dir\"]",
            "sandbox path relative/dir is not absolute",
        ),
        (
            "[server.sandbox]\nnetwork = \"some\"",
            "sandbox.network \"some\" is not \"off\" or \"host\"",
        ),
        (
            "[server.sandbox]\nbwrap = \"/nonexistent/bwrap\"",
            "cannot run /nonexistent/bwrap",
        ),
        ("[server.sandbox]\nmounts = []", "unknown field `mounts`"),
        (
            "[server.limits]\nmemory_mib = 0",
            "limits.memory must be above zero",
        ),
        (
            "[server.limits]\ncpu = \"500ms\"",
            "limits.cpu must be above zero",
        ),
        (
            "[server.limits]\nopen_files = 3",
            "limits.open_files = 3 leaves no room",
        ),
        ("[server.limits]\nswap = 1", "unknown field `swap`"),
    ];
    for (extra, want) in cases {
        let (code, out) = check_config(&server(extra));
        assert_eq!(code, 64, "{extra}: {out}");
        assert!(out.contains(want), "{extra}: want {want:?} in {out}");
    }
    let (code, out) = check_config(&format!(
        "{}[upstream]\nmax_stdio_children = 3\n",
        server("warm = 4")
    ));
    assert_eq!(code, 64);
    assert!(
        out.contains("warm stdio children (4: s: 4) exceed upstream.max_stdio_children = 3"),
        "{out}"
    );
    let http = "[[server]]\nname = \"h\"\ntransport = \"streamable-http\"\nurl = \"http://127.0.0.1:9/mcp\"\n[server.limits]\nprocesses = 5\n";
    let (code, out) = check_config(http);
    assert_eq!(code, 64);
    assert!(
        out.contains("sandbox, limits and warm are for transport \"stdio\""),
        "{out}"
    );
}
