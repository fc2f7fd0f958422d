//! Unit tests.
use super::*;
use crate::args::{parse_env, quote_args, split_args};

#[test]
fn globs() {
    assert!(glob_match("demo-server", "demo-server"));
    assert!(!glob_match("demo-server", "demo-server2"));
    assert!(glob_match("*", ""));
    assert!(glob_match("*", "anything at all"));
    assert!(glob_match("--port=*", "--port=80"));
    assert!(!glob_match("--port=*", "--host=x"));
    assert!(glob_match("/tmp/*/x-?.txt", "/tmp/a/b/x-1.txt"));
    assert!(!glob_match("/tmp/*/x-?.txt", "/tmp/a/x-12.txt"));
    assert!(glob_match("a*b*c", "aXXbYYc"));
    assert!(!glob_match("a*b*c", "aXXbYY"));
    assert!(glob_match(r"a\*", "a*"));
    assert!(!glob_match(r"a\*", "ab"));
    for lit in ["x*y?z", r"back\slash", "plain", ""] {
        assert!(glob_match(&literal_pattern(lit), lit), "{lit}");
    }
    assert!(!glob_match(&literal_pattern("x*"), "xy"));
}

#[test]
fn splitting() {
    assert_eq!(split_args("").unwrap(), Vec::<String>::new());
    assert_eq!(split_args("  a  b ").unwrap(), vec!["a", "b"]);
    assert_eq!(
        split_args(r#"-y 'a b' "c \"d\" $x" e\ f"#).unwrap(),
        vec!["-y", "a b", r#"c "d" $x"#, "e f"]
    );
    assert_eq!(split_args("''").unwrap(), vec![""]);
    assert_eq!(split_args("a;b | c").unwrap(), vec!["a;b", "|", "c"]);
    assert!(split_args("'x").is_err());
    assert!(split_args("\"x").is_err());
    let args: Vec<String> = vec!["a b".into(), "it's".into(), "".into(), "--x=1".into()];
    assert_eq!(split_args(&quote_args(&args)).unwrap(), args);
}

#[test]
fn url_prefixes() {
    let p = |s: &str| Url::parse(s).unwrap();
    assert!(under(
        &p("http://127.0.0.1:3001/"),
        &p("http://127.0.0.1:3001/mcp")
    ));
    assert!(!under(
        &p("http://127.0.0.1:3001/"),
        &p("http://127.0.0.1:30011/mcp")
    ));
    assert!(!under(
        &p("http://127.0.0.1:3001/"),
        &p("https://127.0.0.1:3001/mcp")
    ));
    assert!(!under(
        &p("http://127.0.0.1:3001/"),
        &p("http://127.0.0.1:3001@evil.example/")
    ));
    assert!(under(&p("http://h/mcp"), &p("http://h/mcp")));
    assert!(under(&p("http://h/mcp"), &p("http://h/mcp/x")));
    assert!(!under(&p("http://h/mcp"), &p("http://h/mcpx")));
    assert!(!under(&p("http://h/a/"), &p("http://h/a/../b")));
    assert!(!under(&p("http://h/a/"), &p("http://h/a/%2e%2e/b")));
    assert!(under(&p("http://h:80/a/"), &p("http://H/a/b")));
}

#[test]
fn env_values() {
    assert!(parse_env(None).unwrap().is_empty());
    assert!(parse_env(Some("{}")).unwrap().is_empty());
    assert_eq!(parse_env(Some(r#"{"A":"1"}"#)).unwrap()["A"], "1");
    assert!(parse_env(Some(r#"{"A":1}"#)).is_err());
    assert!(parse_env(Some(r#"{"A=B":"1"}"#)).is_err());
    assert!(parse_env(Some("[]")).is_err());
    assert!(parse_env(Some("nope")).is_err());
}

#[test]
fn an_invalid_rule_is_named_with_its_problem() {
    let rule = StdioRule {
        name: "bad".into(),
        command: "A=B".into(),
        args: Vec::new(),
        env: BTreeMap::new(),
        allow_env: Vec::new(),
        cwd: None,
    };
    let e = validate(&[rule], &[], &BTreeMap::new()).unwrap_err();
    assert_eq!(
        crate::error::chain(&e),
        "stdio rule 0 (\"bad\") is not valid: command must not contain '=' or NUL, nor start with '-'"
    );
}
