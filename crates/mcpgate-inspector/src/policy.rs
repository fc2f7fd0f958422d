//! What a caller of the Inspector proxy may ask for: the allowlist of stdio commands
//! (exact program, one pattern per argument) and of upstream URL prefixes, the environment
//! a spawned command gets, and the parsing of the UI's query values (`args` as a shell-like
//! string, `env` as a JSON object).

use std::collections::BTreeMap;

use http::StatusCode;
use mcpgate_upstream::Target;
use reqwest::Url;

use crate::error::{AllowlistError, StdioProblem, UrlProblem};

/// An upstream transport a caller can choose.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum UpstreamTransport {
    /// A program on stdio (`transportType=stdio`).
    Stdio,
    /// A legacy HTTP+SSE server (`transportType=sse`).
    Sse,
    /// A Streamable HTTP server (`transportType=streamable-http`).
    StreamableHttp,
}

impl UpstreamTransport {
    /// From the UI's `transportType` value.
    pub(crate) fn parse(s: &str) -> Option<Self> {
        match s {
            "stdio" => Some(UpstreamTransport::Stdio),
            "sse" => Some(UpstreamTransport::Sse),
            "streamable-http" => Some(UpstreamTransport::StreamableHttp),
            _ => None,
        }
    }

    /// The transport a UI named in `field` (`fallback` when it named none), or a 400 that
    /// says what was wrong.
    pub(crate) fn from_ui(
        value: Option<&str>,
        field: &str,
        fallback: Option<Self>,
    ) -> Result<Self, Refusal> {
        match value {
            Some(t) => Self::parse(t).ok_or_else(|| {
                bad_request(format!(
                    "{field} {t:?} is not one of stdio, sse, streamable-http"
                ))
            }),
            None => fallback.ok_or_else(|| {
                bad_request(format!(
                    "{field} is required (stdio, sse or streamable-http)"
                ))
            }),
        }
    }

    /// The UI's `transportType` value.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            UpstreamTransport::Stdio => "stdio",
            UpstreamTransport::Sse => "sse",
            UpstreamTransport::StreamableHttp => "streamable-http",
        }
    }
}

/// A stdio command callers may start: the program exactly as the UI sends it, and one
/// pattern per argument.
#[derive(Debug, Clone)]
pub struct StdioRule {
    /// A short name for logs (`inspector-{name}` is the session's server label).
    pub name: String,
    /// The program, compared exactly with the UI's `command` (after trimming).
    pub command: String,
    /// One pattern per argument; the argument count must match. In a pattern `*` matches
    /// any run of characters, `?` any one character and `\\` makes the next character
    /// literal (see `literal_pattern`); everything else is literal.
    pub args: Vec<String>,
    /// Environment variables always set for this command (on top of the base environment).
    pub env: BTreeMap<String, String>,
    /// Names of environment variables the caller may set (the UI's `env`); any other name
    /// is refused.
    pub allow_env: Vec<String>,
    /// Working directory (default: the gateway's).
    pub cwd: Option<String>,
}

/// Upstream URLs callers may open: every URL under a prefix.
#[derive(Debug, Clone)]
pub struct UrlRule {
    /// A short name for logs.
    pub name: String,
    /// `scheme://host[:port]/path`: a URL matches when scheme, host and port are equal and
    /// its path is the prefix's path or continues it (a prefix path that does not end in
    /// `/` only matches at a `/` boundary). No user info, query or fragment.
    pub prefix: String,
    /// Whether `transportType=streamable-http` may use it.
    pub streamable_http: bool,
    /// Whether `transportType=sse` may use it.
    pub sse: bool,
    /// Headers sent on every upstream request (upstream credentials from config).
    pub headers: Vec<(String, String)>,
    /// Whether the UI's own upstream headers (`Authorization` and the headers named in
    /// `x-custom-auth-headers`) are sent upstream, as the Inspector's proxy does. They are
    /// taken when the session opens and kept for its lifetime.
    pub forward_headers: bool,
}

/// A refusal: the HTTP status and a message for the caller.
pub(crate) type Refusal = (StatusCode, String);

pub(crate) fn forbidden(msg: String) -> Refusal {
    (StatusCode::FORBIDDEN, msg)
}

pub(crate) fn bad_request(msg: String) -> Refusal {
    (StatusCode::BAD_REQUEST, msg)
}

/// Whether `name` is a portable environment variable name.
pub(crate) fn valid_env_name(name: &str) -> bool {
    let mut b = name.bytes();
    b.next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == b'_')
        && b.all(|c| c.is_ascii_alphanumeric() || c == b'_')
}

/// One element of a parsed argument pattern.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tok {
    Any,
    One,
    Lit(char),
}

/// `*` matches any run of characters, `?` any one character, `\` makes the next character
/// literal; the rest is literal.
pub(crate) fn glob_match(pattern: &str, text: &str) -> bool {
    let mut p: Vec<Tok> = Vec::new();
    let mut chars = pattern.chars();
    while let Some(c) = chars.next() {
        p.push(match c {
            '*' => Tok::Any,
            '?' => Tok::One,
            '\\' => Tok::Lit(chars.next().unwrap_or('\\')),
            c => Tok::Lit(c),
        });
    }
    let t: Vec<char> = text.chars().collect();
    let (mut pi, mut ti) = (0usize, 0usize);
    // The last `*` seen and the text position it was tried at.
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        match p.get(pi) {
            Some(Tok::Any) => {
                star = Some((pi, ti));
                pi += 1;
            }
            Some(Tok::One) => {
                pi += 1;
                ti += 1;
            }
            Some(Tok::Lit(c)) if *c == t[ti] => {
                pi += 1;
                ti += 1;
            }
            _ => match star {
                Some((sp, st)) => {
                    pi = sp + 1;
                    ti = st + 1;
                    star = Some((sp, st + 1));
                }
                None => return false,
            },
        }
    }
    p[pi..].iter().all(|c| *c == Tok::Any)
}

/// A pattern that matches exactly `arg` (its `*`, `?` and `\\` escaped).
pub(crate) fn literal_pattern(arg: &str) -> String {
    let mut out = String::with_capacity(arg.len());
    for c in arg.chars() {
        if matches!(c, '*' | '?' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// The allowlist and what a spawned command's environment is made of.
#[derive(Debug, Clone)]
pub(crate) struct Policy {
    pub(crate) stdio: Vec<StdioRule>,
    pub(crate) urls: Vec<(UrlRule, Url)>,
    pub(crate) base_env: BTreeMap<String, String>,
}

/// What a caller asked for, once allowed: the session's label and its target.
#[derive(Debug)]
pub(crate) struct Allowed {
    pub(crate) label: String,
    pub(crate) target: Target,
    /// What to log about it (no environment values, no header values).
    pub(crate) summary: String,
}

/// The allowlist's decision about what a caller asked for, logged (a refusal with its
/// status; an allowed target with what it is, as a warning when nobody authenticated),
/// and the session spec of an allowed target.
pub(crate) fn decided(
    r: Result<Allowed, Refusal>,
    authenticated: bool,
) -> Result<mcpgate_session::ServerSpec, Refusal> {
    let allowed = r.inspect_err(|(status, msg)| {
        tracing::warn!(status = status.as_u16(), "inspector: target refused: {msg}");
    })?;
    if authenticated {
        tracing::info!(server = %allowed.label, "inspector: target allowed: {}", allowed.summary);
    } else {
        tracing::warn!(server = %allowed.label, "inspector: opening a session without authentication (--dangerously-omit-auth): {}", allowed.summary);
    }
    Ok(mcpgate_session::ServerSpec::new(
        allowed.label,
        allowed.target,
    ))
}

/// Checks the stdio rules, the URL rules and the base environment; the URL rules come
/// back with their parsed prefixes.
pub(crate) fn validate(
    stdio: &[StdioRule],
    urls: &[UrlRule],
    base_env: &BTreeMap<String, String>,
) -> Result<Vec<(UrlRule, Url)>, AllowlistError> {
    for (index, r) in stdio.iter().enumerate() {
        check_stdio(r).map_err(|problem| AllowlistError::Stdio {
            index,
            name: r.name.clone(),
            problem,
        })?;
    }
    if let Some(name) = base_env.keys().find(|n| !valid_env_name(n)) {
        return Err(AllowlistError::InheritEnv { name: name.clone() });
    }
    urls.iter()
        .enumerate()
        .map(|(index, r)| {
            let prefix = check_url(r).map_err(|problem| AllowlistError::Url {
                index,
                name: r.name.clone(),
                problem,
            })?;
            Ok((r.clone(), prefix))
        })
        .collect()
}

/// One stdio rule: a plain command, portable variable names, no NUL.
fn check_stdio(r: &StdioRule) -> Result<(), StdioProblem> {
    let c = r.command.trim();
    if c.is_empty() || c != r.command {
        return Err(StdioProblem::Blank);
    }
    if c.contains('=') || c.starts_with('-') || c.contains('\0') {
        return Err(StdioProblem::CommandChars);
    }
    if let Some(name) = r
        .env
        .keys()
        .chain(r.allow_env.iter())
        .find(|n| !valid_env_name(n))
    {
        return Err(StdioProblem::EnvName { name: name.clone() });
    }
    if r.env
        .values()
        .chain(r.args.iter())
        .any(|v| v.contains('\0'))
    {
        return Err(StdioProblem::Nul);
    }
    Ok(())
}

/// One URL rule: its prefix parsed, `http(s)` with a host, nothing but scheme, host, port
/// and path; and at least one transport.
fn check_url(r: &UrlRule) -> Result<Url, UrlProblem> {
    let u = Url::parse(&r.prefix).map_err(UrlProblem::Parse)?;
    if !matches!(u.scheme(), "http" | "https") {
        return Err(UrlProblem::Scheme);
    }
    if u.host_str().is_none() {
        return Err(UrlProblem::NoHost);
    }
    if !u.username().is_empty() || u.password().is_some() {
        return Err(UrlProblem::UserInfo);
    }
    if u.query().is_some() || u.fragment().is_some() {
        return Err(UrlProblem::QueryOrFragment);
    }
    if !r.streamable_http && !r.sse {
        return Err(UrlProblem::NoTransport);
    }
    Ok(u)
}

/// Whether `url` lies under `prefix` (both parsed, so both normalised: dot segments
/// resolved, default ports dropped, host lower-cased).
fn under(prefix: &Url, url: &Url) -> bool {
    if prefix.scheme() != url.scheme()
        || prefix.host_str() != url.host_str()
        || prefix.port_or_known_default() != url.port_or_known_default()
    {
        return false;
    }
    let pp = prefix.path();
    let up = url.path();
    if pp.ends_with('/') {
        up.starts_with(pp)
    } else {
        up == pp
            || up
                .strip_prefix(pp)
                .is_some_and(|rest| rest.starts_with('/'))
    }
}

/// Headers of the UI's request that must never be sent upstream.
pub(crate) const NEVER_FORWARD: &[&str] = &[
    "host",
    "origin",
    "referer",
    "cookie",
    "connection",
    "content-length",
    "content-type",
    "accept",
    "accept-encoding",
    "transfer-encoding",
    "te",
    "upgrade",
    "keep-alive",
    "proxy-authorization",
    "x-mcp-proxy-auth",
    "x-custom-auth-headers",
    "mcp-session-id",
    "mcp-protocol-version",
    "last-event-id",
];

impl Policy {
    /// The stdio target for `command` + `args` + `env` as lists (the v2 UI's form).
    pub(crate) fn stdio_parsed(
        &self,
        command: &str,
        args: &[String],
        env: &BTreeMap<String, String>,
    ) -> Result<Allowed, Refusal> {
        let command = command.trim();
        if command.is_empty() {
            return Err(bad_request("command is required".into()));
        }
        let rules: Vec<&StdioRule> = self.stdio.iter().filter(|r| r.command == command).collect();
        if rules.is_empty() {
            let allowed: Vec<&str> = self.stdio.iter().map(|r| r.command.as_str()).collect();
            return Err(forbidden(format!(
                "command not allowed: {command:?} is not in the inspector allowlist (allowed: {})",
                if allowed.is_empty() {
                    "none".to_owned()
                } else {
                    allowed.join(", ")
                }
            )));
        }
        let Some(rule) = rules.iter().find(|r| {
            r.args.len() == args.len() && r.args.iter().zip(args).all(|(p, a)| glob_match(p, a))
        }) else {
            return Err(forbidden(format!(
                "arguments not allowed: {args:?} match no allowed argument pattern of {command:?} (allowed: {})",
                rules
                    .iter()
                    .map(|r| format!("{:?}", r.args))
                    .collect::<Vec<_>>()
                    .join(" or ")
            )));
        };
        let refused: Vec<&str> = env
            .keys()
            .filter(|k| !rule.allow_env.iter().any(|a| a == *k))
            .map(String::as_str)
            .collect();
        if !refused.is_empty() {
            return Err(forbidden(format!(
                "environment variable(s) not allowed for {command:?}: {} (allowed: {})",
                refused.join(", "),
                if rule.allow_env.is_empty() {
                    "none".to_owned()
                } else {
                    rule.allow_env.join(", ")
                }
            )));
        }
        // Scrubbed: the base environment, the rule's fixed variables, then the caller's.
        let mut full = self.base_env.clone();
        full.extend(rule.env.iter().map(|(k, v)| (k.clone(), v.clone())));
        full.extend(env.iter().map(|(k, v)| (k.clone(), v.clone())));
        // The child starts with exactly these variables (`env_clear`): nothing of the
        // gateway's own environment is passed on.
        let mut cmd = vec![command.to_owned()];
        cmd.extend(args.iter().cloned());
        Ok(Allowed {
            label: format!("inspector-{}", rule.name),
            summary: format!(
                "stdio {command:?} with {} argument(s), environment {:?}",
                args.len(),
                full.keys().collect::<Vec<_>>()
            ),
            target: Target::Stdio {
                command: cmd,
                env: full.clone(),
                cwd: rule.cwd.clone(),
                env_clear: true,
                contain: Default::default(),
                warm: 0,
            },
        })
    }

    /// The HTTP target for `url`, if the allowlist has it for `transport`, with the
    /// caller's upstream headers given as a list (taken
    /// only where the rule forwards them; never the ones that are not the caller's).
    pub(crate) fn url_with(
        &self,
        transport: UpstreamTransport,
        url: Option<&str>,
        callers: Vec<(String, String)>,
    ) -> Result<Allowed, Refusal> {
        let u = caller_url(url)?;
        let rule = self.url_rule(transport, &u)?;
        let hs = upstream_headers(rule, callers);
        let summary = format!(
            "{} {} (headers {:?})",
            transport.as_str(),
            u.as_str(),
            hs.iter().map(|(k, _)| k.as_str()).collect::<Vec<_>>()
        );
        // The normalised URL is what was checked, and what is connected to.
        let url = u.as_str().to_owned();
        let target = match transport {
            UpstreamTransport::Sse => Target::LegacySse {
                url,
                headers: hs,
                http: Default::default(),
                auth: None,
            },
            _ => Target::Http {
                url,
                headers: hs,
                http: Default::default(),
                auth: None,
            },
        };
        Ok(Allowed {
            label: format!("inspector-{}", rule.name),
            target,
            summary,
        })
    }

    /// The first URL rule that has `u` under its prefix for `transport`, or a 403 that
    /// lists the allowed prefixes.
    fn url_rule(&self, transport: UpstreamTransport, u: &Url) -> Result<&UrlRule, Refusal> {
        let found = self.urls.iter().find(|(r, p)| {
            under(p, u)
                && match transport {
                    UpstreamTransport::Sse => r.sse,
                    UpstreamTransport::StreamableHttp => r.streamable_http,
                    UpstreamTransport::Stdio => false,
                }
        });
        if let Some((rule, _)) = found {
            return Ok(rule);
        }
        let allowed: Vec<&str> = self.urls.iter().map(|(r, _)| r.prefix.as_str()).collect();
        Err(forbidden(format!(
            "URL not allowed: {} is under no allowed prefix for transport {} (allowed: {})",
            u.as_str(),
            transport.as_str(),
            if allowed.is_empty() {
                "none".to_owned()
            } else {
                allowed.join(", ")
            }
        )))
    }
}

/// The caller's `url`: present, parsed (so normalised), `http(s)`, without user info.
fn caller_url(url: Option<&str>) -> Result<Url, Refusal> {
    let raw = url
        .map(str::trim)
        .filter(|u| !u.is_empty())
        .ok_or_else(|| bad_request("url query parameter is required".into()))?;
    let u = Url::parse(raw).map_err(|e| bad_request(format!("url {raw:?}: {e}")))?;
    if !matches!(u.scheme(), "http" | "https") {
        return Err(forbidden(format!(
            "URL not allowed: {raw:?} is not http:// or https://"
        )));
    }
    if !u.username().is_empty() || u.password().is_some() {
        return Err(forbidden(
            "URL not allowed: user info in the URL is not accepted".into(),
        ));
    }
    Ok(u)
}

/// The headers sent upstream: the rule's own, then (where the rule forwards them) the
/// caller's valid ones that are neither hop-by-hop nor the backend's, and not already set.
fn upstream_headers(rule: &UrlRule, callers: Vec<(String, String)>) -> Vec<(String, String)> {
    let mut hs = rule.headers.clone();
    if !rule.forward_headers {
        return hs;
    }
    for (k, v) in callers {
        let k = k.trim().to_ascii_lowercase();
        if k.is_empty()
            || NEVER_FORWARD.contains(&k.as_str())
            || k.starts_with("sec-")
            || k.starts_with("proxy-")
            || http::HeaderName::from_bytes(k.as_bytes()).is_err()
            || http::HeaderValue::from_str(&v).is_err()
        {
            continue;
        }
        if !hs.iter().any(|(c, _)| c.eq_ignore_ascii_case(&k)) {
            hs.push((k, v));
        }
    }
    hs
}

#[cfg(test)]
mod tests;
