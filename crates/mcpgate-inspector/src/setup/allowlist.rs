//! What the command line adds to the allowlist (`-- CMD ARGS…`, `--allow-url`), and the
//! UI's defaults when no `[defaults]` names them.

use std::collections::BTreeMap;
use std::path::Path;

use crate::args::quote_args;
use crate::config::InspectorDefaults;
use crate::policy::{StdioRule, UrlRule, literal_pattern};

/// A short name for logs from a command: its file name, letters, digits, `-`, `_` only.
pub(super) fn name_of(command: &str) -> String {
    let base = Path::new(command)
        .file_name()
        .map_or_else(|| command.to_owned(), |n| n.to_string_lossy().into_owned());
    let s: String = base
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if s.is_empty() { "stdio".into() } else { s }
}

/// `-- CMD ARGS…`: exactly this command with exactly these arguments.
pub(super) fn command_rule(cmd: &str, args: &[String]) -> StdioRule {
    StdioRule {
        name: name_of(cmd),
        command: cmd.to_owned(),
        args: args.iter().map(|a| literal_pattern(a)).collect(),
        env: BTreeMap::new(),
        allow_env: Vec::new(),
        cwd: None,
    }
}

/// The UI's defaults for `-- CMD ARGS…`.
pub(super) fn command_defaults(cmd: &str, args: &[String]) -> InspectorDefaults {
    InspectorDefaults {
        transport: Some("stdio".into()),
        command: Some(cmd.to_owned()),
        args: Some(quote_args(args)),
        server_url: None,
    }
}

/// `--allow-url PREFIX…`: both HTTP transports, the UI's headers forwarded.
pub(super) fn cli_url_rules(prefixes: &[String]) -> impl Iterator<Item = UrlRule> + '_ {
    prefixes.iter().enumerate().map(|(i, p)| UrlRule {
        name: format!("cli{i}"),
        prefix: p.clone(),
        streamable_http: true,
        sse: true,
        headers: Vec::new(),
        forward_headers: true,
    })
}

/// The UI's defaults without explicit ones: the first stdio rule whose arguments are all
/// literal, else the first URL rule, else none.
pub(super) fn implied_defaults(stdio: &[StdioRule], urls: &[UrlRule]) -> InspectorDefaults {
    let literal = stdio
        .iter()
        .find(|r| r.args.iter().all(|a| !a.contains(['*', '?', '\\'])));
    match (literal, urls.first()) {
        (Some(r), _) => InspectorDefaults {
            transport: Some("stdio".into()),
            command: Some(r.command.clone()),
            args: Some(quote_args(&r.args)),
            server_url: None,
        },
        (None, Some(u)) => InspectorDefaults {
            transport: Some(
                if u.streamable_http {
                    "streamable-http"
                } else {
                    "sse"
                }
                .into(),
            ),
            command: None,
            args: None,
            server_url: Some(u.prefix.clone()),
        },
        (None, None) => InspectorDefaults::default(),
    }
}
