//! The Inspector 1.x UI's formats for a command line: `args` as one shell-like string and
//! `env` as a JSON object, both in the query of its `/stdio` and `/mcp` requests; and the
//! headers of its own request it forwards upstream.

use std::collections::BTreeMap;

use crate::policy::{NEVER_FORWARD, Refusal, bad_request, valid_env_name};

/// Splits the UI's `args` string the way a POSIX shell splits words, without any
/// expansion: whitespace separates, `'…'` is literal, `"…"` allows `\"`, `\\`, `\$` and
/// `` \` `` escapes, and `\` escapes the next character outside quotes. Nothing is ever
/// run through a shell.
pub(crate) fn split_args(s: &str) -> Result<Vec<String>, &'static str> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut in_word = false;
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        match c {
            c if c.is_whitespace() => {
                if in_word {
                    out.push(std::mem::take(&mut cur));
                    in_word = false;
                }
            }
            '\'' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(c) => cur.push(c),
                        None => return Err("unterminated ' in args"),
                    }
                }
            }
            '"' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') => match chars.next() {
                            Some(c @ ('"' | '\\' | '$' | '`')) => cur.push(c),
                            Some('\n') => {}
                            Some(c) => {
                                cur.push('\\');
                                cur.push(c);
                            }
                            None => return Err("unterminated \" in args"),
                        },
                        Some(c) => cur.push(c),
                        None => return Err("unterminated \" in args"),
                    }
                }
            }
            '\\' => {
                in_word = true;
                match chars.next() {
                    Some('\n') => {}
                    Some(c) => cur.push(c),
                    None => return Err("args end with a lone \\"),
                }
            }
            c => {
                in_word = true;
                cur.push(c);
            }
        }
    }
    if in_word {
        out.push(cur);
    }
    Ok(out)
}

/// Quotes arguments so that [`split_args`] gives them back (for the UI's default args).
pub(crate) fn quote_args(args: &[String]) -> String {
    args.iter()
        .map(|a| {
            let plain = !a.is_empty()
                && a.bytes().all(|b| {
                    b.is_ascii_alphanumeric()
                        || matches!(
                            b,
                            b'_' | b'@' | b'%' | b'+' | b'=' | b':' | b',' | b'.' | b'/' | b'-'
                        )
                });
            if plain {
                a.clone()
            } else {
                format!("'{}'", a.replace('\'', r"'\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// Parses the UI's `env` value: a JSON object of strings (absent or empty: none).
pub(crate) fn parse_env(s: Option<&str>) -> Result<BTreeMap<String, String>, Refusal> {
    let Some(s) = s.map(str::trim).filter(|s| !s.is_empty()) else {
        return Ok(BTreeMap::new());
    };
    let v: serde_json::Value = serde_json::from_str(s)
        .map_err(|e| bad_request(format!("env must be a JSON object of strings: {e}")))?;
    let obj = v
        .as_object()
        .ok_or_else(|| bad_request("env must be a JSON object of strings".into()))?;
    let mut out = BTreeMap::new();
    for (k, v) in obj {
        let v = v
            .as_str()
            .ok_or_else(|| bad_request(format!("env: the value of {k:?} must be a string")))?;
        if !valid_env_name(k) {
            return Err(bad_request(format!(
                "env: {k:?} is not a valid variable name"
            )));
        }
        if v.contains('\0') {
            return Err(bad_request(format!("env: the value of {k} contains NUL")));
        }
        out.insert(k.clone(), v.to_owned());
    }
    Ok(out)
}

/// The UI's upstream headers: `Authorization` and those named by `x-custom-auth-headers`.
pub(crate) fn forwarded_headers(h: &http::HeaderMap) -> Vec<(String, String)> {
    let mut names: Vec<String> = vec!["authorization".into()];
    if let Some(list) = h
        .get("x-custom-auth-headers")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| serde_json::from_str::<Vec<String>>(v).ok())
    {
        names.extend(list.into_iter().map(|n| n.trim().to_ascii_lowercase()));
    }
    let mut out: Vec<(String, String)> = Vec::new();
    for n in names {
        if NEVER_FORWARD.contains(&n.as_str())
            || n.starts_with("sec-")
            || n.starts_with("proxy-")
            || out.iter().any(|(k, _)| *k == n)
        {
            continue;
        }
        if let Some(v) = h.get(n.as_str()).and_then(|v| v.to_str().ok()) {
            out.push((n, v.to_owned()));
        }
    }
    out
}
