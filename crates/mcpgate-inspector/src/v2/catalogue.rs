//! The allowlist as the v2 UI's server list.

use crate::policy::Policy;

/// The argument a pattern matches when it matches exactly one (no unescaped `*` or `?`).
fn literal_of(pattern: &str) -> Option<String> {
    let mut out = String::with_capacity(pattern.len());
    let mut chars = pattern.chars();
    while let Some(c) = chars.next() {
        match c {
            '*' | '?' => return None,
            '\\' => out.push(chars.next()?),
            c => out.push(c),
        }
    }
    Some(out)
}

impl Policy {
    /// The allowlist as the v2 UI's server list (`mcpServers`, by rule name): each stdio
    /// rule whose arguments are all literal (a rule with wildcards can be used, by a
    /// caller who fills them in, but not listed), and each URL rule with its prefix as
    /// the URL.
    pub(crate) fn catalogue(&self) -> serde_json::Map<String, serde_json::Value> {
        let mut out = serde_json::Map::new();
        for r in &self.stdio {
            let Some(args) = r
                .args
                .iter()
                .map(|p| literal_of(p))
                .collect::<Option<Vec<_>>>()
            else {
                continue;
            };
            let mut e = serde_json::json!({ "type": "stdio", "command": r.command, "args": args });
            if let Some(cwd) = &r.cwd {
                e["cwd"] = serde_json::json!(cwd);
            }
            out.insert(r.name.clone(), e);
        }
        for (r, u) in &self.urls {
            let kind = if r.streamable_http {
                "streamable-http"
            } else {
                "sse"
            };
            out.insert(
                r.name.clone(),
                serde_json::json!({ "type": kind, "url": u.as_str() }),
            );
        }
        out
    }
}
