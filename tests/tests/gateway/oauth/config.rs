//! `[server.oauth]`, `[vault]` and `[oauth]` as `--check-config` (the real binary) and a
//! start see them: what cannot work is refused at once, naming the key; a vault file that
//! is not a database refuses the start, naming the file.

use mcpgate_tests::{bin, check_config};

const KEY: &str = "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=";

fn server(oauth: &str) -> String {
    format!(
        "[[server]]\nname = \"r\"\ntransport = \"streamable-http\"\nurl = \"http://127.0.0.1:9/mcp\"\n{oauth}"
    )
}

#[test]
fn what_cannot_work_is_refused_naming_the_key() {
    let cases = [
        // Per-user grants need somewhere to keep them.
        (
            "[server.oauth]\ngrant = \"authorization_code\"\n",
            "[vault]",
        ),
        // Exchanging clients' tokens needs clients' tokens.
        (
            "[server.oauth]\ngrant = \"token_exchange\"\nclient_id = \"g\"\nclient_secret = \"s\"\n",
            "[auth.jwt]",
        ),
        (
            "[server.oauth]\ngrant = \"password\"\n",
            "oauth.grant \"password\"",
        ),
        (
            "[server.oauth]\ngrant = \"client_credentials\"\nclient_id = \"g\"\n",
            "client_secret",
        ),
        (
            "headers = { Authorization = \"Bearer x\" }\n[server.oauth]\ngrant = \"client_credentials\"\nclient_id = \"g\"\nclient_secret = \"s\"\n",
            "headers set Authorization",
        ),
        (
            "[server.oauth]\ngrant = \"client_credentials\"\nclient_id = \"g\"\nclient_secret = \"s\"\ntoken_endpoint = \"ftp://x\"\n",
            "oauth.token_endpoint",
        ),
        (
            "[server.oauth]\ngrant = \"authorization_code\"\n[vault]\npath = \"/tmp/v.db\"\n",
            "vault: give keys (or session.seal_keys)",
        ),
    ];
    for (extra, says) in cases {
        let (code, text) = check_config(&server(extra));
        assert_eq!(code, 64, "{extra}: {text}");
        assert!(text.contains(says), "{extra}: expected {says:?} in {text}");
        assert!(
            !text.contains("Bearer x"),
            "a header value in an error: {text}"
        );
    }
    let ok = format!(
        "{}[vault]\npath = \"/tmp/v.db\"\n[session]\nseal_keys = [{{ id = \"k1\", secret = \"{KEY}\" }}]\n",
        server("[server.oauth]\ngrant = \"authorization_code\"\n")
    );
    let (code, text) = check_config(&ok);
    assert_eq!(code, 0, "{text}");
}

#[test]
fn a_vault_file_that_is_not_a_database_refuses_the_start() {
    let file = std::env::temp_dir().join(format!("mcpgate-notdb-{}.db", std::process::id()));
    std::fs::write(&file, vec![0x42u8; 8192]).unwrap();
    let toml = format!(
        "{}[vault]\npath = {file:?}\n[session]\nseal_keys = [{{ id = \"k1\", secret = \"{KEY}\" }}]\n",
        server("[server.oauth]\ngrant = \"authorization_code\"\n")
    );
    let cfg = file.with_extension("toml");
    std::fs::write(&cfg, toml).unwrap();
    let out = std::process::Command::new(bin("mcpgate"))
        .arg("--config")
        .arg(&cfg)
        .args(["--listen", "127.0.0.1:0"])
        .output()
        .unwrap();
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{log}");
    assert!(log.contains("cannot open the token vault"), "{log}");
    assert!(log.contains(&file.display().to_string()), "{log}");
    let _ = std::fs::remove_file(cfg);
    let _ = std::fs::remove_file(file);
}
