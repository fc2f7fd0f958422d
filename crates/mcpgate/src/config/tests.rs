//! Config validation tests (every file in config/ is checked here).

use std::path::Path;
use std::time::Duration;

use super::*;

fn parse(s: &str) -> anyhow::Result<Config> {
    toml::from_str::<RawConfig>(s)?.validate()
}

#[test]
fn every_example_config_is_valid() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../config");
    let mut n = 0;
    for e in std::fs::read_dir(&dir).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "toml") {
            RawConfig::load(&p)
                .and_then(RawConfig::validate)
                .unwrap_or_else(|e| panic!("{}: {e:#}", p.display()));
            n += 1;
        }
    }
    assert!(n > 0, "no example configs found in {}", dir.display());
}

#[test]
fn rejects_unknown_keys_and_bad_values() {
    let ok = "[[server]]\nname='a'\ntransport='stdio'\ncommand=['x']\n";
    assert!(parse(ok).is_ok());
    assert!(parse(&format!("{ok}bogus=1\n")).is_err());
    assert!(parse("[[server]]\nname='a'\ntransport='stdio'\n").is_err());
    assert!(parse("[[server]]\nname='a'\ntransport='streamable-http'\nurl='ftp://x'\n").is_err());
    assert!(parse(&format!("{ok}[session]\nidle_timeout='0s'\n")).is_err());
    assert!(parse(&format!("[listen]\naddr='nope'\n{ok}")).is_err());
    assert!(parse("").is_err());
    let c = parse(&format!("{ok}[session]\nidle_timeout='90s'\n")).unwrap();
    assert_eq!(c.session.idle_timeout, Duration::from_secs(90));
    assert_eq!(c.listen.to_string(), "127.0.0.1:8080");
}

#[test]
fn virtual_servers_are_checked_against_their_members() {
    let servers = "[[server]]\nname='a'\ntransport='stdio'\ncommand=['x']\n[[server]]\nname='b'\ntransport='streamable-http'\nurl='http://127.0.0.1:1/mcp'\n";
    let member = |m: &str| format!("[[virtual.member]]\nserver='{m}'\n");
    let v = |body: &str| format!("{servers}[[virtual]]\nname='v'\n{body}");
    let err = |toml: String| format!("{:#}", parse(&toml).unwrap_err());
    let ok = parse(&v(&format!("{}{}", member("a"), member("b")))).unwrap();
    assert_eq!(ok.servers.len(), 3);
    assert!(err(v(&member("nope"))).contains("no [[server]] has this name"));
    assert!(err(v("")).contains("at least one member"));
    assert!(
        err(v(&format!(
            "{}prefix='x'\n{}prefix='x'\n",
            member("a"),
            member("b")
        )))
        .contains("used by two members")
    );
    assert!(err(v(&format!("{}prefix='f_s'\n", member("a")))).contains("must start with a letter"));
    assert!(
        err(v(&format!(
            "{}tools = {{ allow = ['[oops'] }}\n",
            member("a")
        )))
        .contains("pattern")
    );
    assert!(
        err(v(&format!(
            "{}[[virtual.rule]]\neffect='deny'\n",
            member("a")
        )))
        .contains("names nothing")
    );
    assert!(err(v(&format!("{}bogus=1\n", member("a")))).contains("unknown field"));
    assert!(
        err(format!("{servers}[[virtual]]\nname='a'\n{}", member("b")))
            .contains("already has this name")
    );
    let modern_stdio = servers.replace("command=['x']\n", "command=['x']\nprotocol='2026-07-28'\n");
    assert!(
        err(format!(
            "{modern_stdio}[[virtual]]\nname='v'\n{}",
            member("a")
        ))
        .contains("Streamable HTTP")
    );
}
