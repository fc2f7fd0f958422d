//! The crate's errors: what is wrong with a configuration ([`InspectorError`], with the
//! allowlist's [`AllowlistError`]), with the UI's files ([`UiError`]), with a
//! `fetch_allow` entry ([`FetchAllowError`]); and why the command line and config file do
//! not make a [`Setup`](crate::Setup) ([`SetupError`]).
//!
//! Each variant is a kind carrying what it is about (the entry, the value, the path); a
//! cause (an I/O error, a URL or TOML parse error) is its `#[source]` and never part of its
//! message, so that printing an error with its causes ([`chain`], or anyhow's `{:#}` at
//! the binary's edge) says each thing once.

use std::net::SocketAddr;
use std::path::PathBuf;

/// What is wrong with an [`InspectorConfig`](crate::InspectorConfig), or what stops it
/// from being served.
#[derive(Debug, thiserror::Error)]
pub enum InspectorError {
    /// No UI origin is configured.
    #[error(
        "at least one UI origin is needed (--ui-origin ORIGIN, or ui_origins in the config file)"
    )]
    NoUiOrigin,
    /// A UI origin that does not parse as a URL.
    #[error("UI origin {origin:?} is not a URL (write it as http(s)://host[:port])")]
    UiOriginUrl {
        /// The origin as configured.
        origin: String,
        /// Why it does not parse.
        #[source]
        source: url::ParseError,
    },
    /// A UI origin that is not `http(s)` with a host.
    #[error("UI origin {origin:?} must be http(s)://host[:port]")]
    UiOriginScheme {
        /// The origin as configured.
        origin: String,
    },
    /// A UI origin with more than scheme, host and port (a path, a query, user info).
    #[error("UI origin {origin:?} must be just scheme://host[:port] (e.g. {expected})")]
    UiOriginNotBare {
        /// The origin as configured.
        origin: String,
        /// The origin it names.
        expected: String,
    },
    /// A configured proxy token shorter than 16 characters.
    #[error(
        "the proxy token must be at least 16 characters (give a longer one, or none to have one generated)"
    )]
    ShortToken,
    /// An allowlist entry that is not valid.
    #[error(transparent)]
    Allowlist(#[from] AllowlistError),
    /// The v2 UI's files could not be read.
    #[error("the Inspector UI cannot be loaded")]
    Ui(#[from] UiError),
    /// The HTTP client of `/api/fetch` could not be built.
    #[error("the HTTP client of the /api/fetch relay cannot be built")]
    FetchClient(#[source] reqwest::Error),
}

/// An allowlist entry that is not valid.
#[derive(Debug, thiserror::Error)]
pub enum AllowlistError {
    /// A stdio rule.
    #[error("stdio rule {index} ({name:?}) is not valid")]
    Stdio {
        /// Its position among the stdio rules.
        index: usize,
        /// Its name.
        name: String,
        /// What is wrong with it.
        #[source]
        problem: StdioProblem,
    },
    /// A URL rule.
    #[error("url rule {index} ({name:?}) is not valid")]
    Url {
        /// Its position among the URL rules.
        index: usize,
        /// Its name.
        name: String,
        /// What is wrong with it.
        #[source]
        problem: UrlProblem,
    },
    /// A variable of the base environment with a name no shell can set.
    #[error(
        "inherit_env: {name:?} is not a valid variable name (letters, digits and '_', not starting with a digit)"
    )]
    InheritEnv {
        /// The name.
        name: String,
    },
}

/// What is wrong with a stdio rule.
#[derive(Debug, thiserror::Error)]
pub enum StdioProblem {
    /// An empty command, or one with surrounding spaces.
    #[error("command must be non-empty, without surrounding spaces")]
    Blank,
    /// A command a shell or `env` would read as something else.
    #[error("command must not contain '=' or NUL, nor start with '-'")]
    CommandChars,
    /// An `env` or `allow_env` name no shell can set.
    #[error(
        "{name:?} is not a valid variable name (letters, digits and '_', not starting with a digit)"
    )]
    EnvName {
        /// The name.
        name: String,
    },
    /// A NUL byte, which no argument or variable can carry.
    #[error("env values and args must not contain NUL")]
    Nul,
}

/// What is wrong with a URL rule's prefix.
#[derive(Debug, thiserror::Error)]
pub enum UrlProblem {
    /// The prefix does not parse.
    #[error("prefix is not a URL")]
    Parse(#[source] url::ParseError),
    /// Not `http` or `https`.
    #[error("prefix must be http:// or https://")]
    Scheme,
    /// No host.
    #[error("prefix needs a host")]
    NoHost,
    /// User info (`user:password@`).
    #[error("prefix must not contain user info (give credentials as headers)")]
    UserInfo,
    /// A query or a fragment.
    #[error("prefix must not have a query or fragment")]
    QueryOrFragment,
    /// Neither Streamable HTTP nor SSE allowed.
    #[error("no transport allowed")]
    NoTransport,
}

/// Why the v2 UI's files could not be read.
#[derive(Debug, thiserror::Error)]
pub enum UiError {
    /// A file or directory could not be read.
    #[error("cannot read {}", path.display())]
    Read {
        /// The file or directory.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// More than the backend keeps in memory.
    #[error(
        "{} holds more than 64 MB of UI files: point --ui at the Inspector's clients/web/dist",
        dir.display()
    )]
    TooLarge {
        /// The UI's directory.
        dir: PathBuf,
    },
}

/// A `fetch_allow` entry that is neither an address nor a CIDR.
#[derive(Debug, thiserror::Error)]
#[error("fetch_allow entry {entry:?} is not an address or CIDR (e.g. 10.1.0.0/16 or ::1)")]
pub struct FetchAllowError {
    /// The entry as given.
    pub entry: String,
    /// Why it does not parse as a CIDR.
    #[source]
    pub source: ipnet::AddrParseError,
}

/// The OS random number generator failed (no token can be generated).
#[derive(Debug, thiserror::Error)]
#[error("the OS random number generator failed")]
pub struct RandomError(#[source] pub getrandom::Error);

/// Why `mcpgate inspector`'s command line and config file do not make a
/// [`Setup`](crate::Setup).
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    /// The config file could not be read.
    #[error("cannot read {}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The config file is not valid TOML, or has an unknown key or a wrong type.
    #[error("invalid config {}", path.display())]
    Parse {
        /// The file.
        path: PathBuf,
        /// What the parser says, with the line.
        #[source]
        source: toml::de::Error,
    },
    /// A protocol other than `v1` and `v2`.
    #[error("protocol: {given:?} is not v1 or v2")]
    Protocol {
        /// The protocol as given.
        given: String,
    },
    /// A listen address that does not parse.
    #[error("listen: {given:?} is not an IP:port address")]
    ListenAddr {
        /// The address as given.
        given: String,
        /// Why it does not parse.
        #[source]
        source: std::net::AddrParseError,
    },
    /// A listen address that is not loopback.
    #[error(
        "listen: {listen} is not a loopback address; the inspector proxy starts processes for its callers and only listens on loopback (127.0.0.1, [::1])"
    )]
    NotLoopback {
        /// The address.
        listen: SocketAddr,
    },
    /// The v2 UI's files are not where they were looked for.
    #[error(
        "the Inspector 2.x UI was not found in {}: pass --ui DIR (the clients/web/dist of npm @modelcontextprotocol/inspector 2.x, or a directory where it is installed: npm install @modelcontextprotocol/inspector), or --protocol v1",
        dir.display()
    )]
    UiNotFound {
        /// Where it was looked for.
        dir: PathBuf,
    },
    /// A `fetch_allow` entry (or `--fetch-allow`) that does not parse.
    #[error(transparent)]
    FetchAllow(#[from] FetchAllowError),
    /// Both `token` and `token_env`.
    #[error("give at most one of token and token_env")]
    TokenTwice,
    /// `token_env` names a variable that is not set.
    #[error("token_env: {var} is not set")]
    TokenEnv {
        /// The variable.
        var: String,
        /// Why it could not be read.
        #[source]
        source: std::env::VarError,
    },
    /// No token could be generated.
    #[error(transparent)]
    Random(#[from] RandomError),
    /// A `[[stdio]]` entry with an empty name.
    #[error("stdio[{index}]: name must not be empty (leave it out to use the command's)")]
    StdioName {
        /// Its position.
        index: usize,
    },
    /// A `[[url]]` entry with an unknown transport.
    #[error("url[{index}]: transport {transport:?} is not \"streamable-http\" or \"sse\"")]
    UrlTransport {
        /// Its position.
        index: usize,
        /// The transport as given.
        transport: String,
    },
    /// A `[[url]]` entry's `headers_env` names a variable that is not set.
    #[error("url[{index}]: headers_env.{header}: {var} is not set")]
    HeaderEnv {
        /// Its position.
        index: usize,
        /// The header.
        header: String,
        /// The variable.
        var: String,
        /// Why it could not be read.
        #[source]
        source: std::env::VarError,
    },
    /// An `inherit_env` name no shell can set.
    #[error("inherit_env: {name:?} is not a valid variable name (letters, digits and '_')")]
    InheritEnv {
        /// The name.
        name: String,
    },
    /// A zero session limit or timeout.
    #[error("max_sessions, idle_timeout and request_timeout must be above zero")]
    ZeroLimit,
    /// A zero keep-alive interval.
    #[error("keep_alive must be above zero")]
    ZeroKeepAlive,
    /// The configuration it makes does not validate.
    #[error(transparent)]
    Invalid(#[from] InspectorError),
}

/// An error and its causes on one line, `: `-separated (what logs and answers show).
pub(crate) fn chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut out = e.to_string();
    let mut src = e.source();
    while let Some(s) = src {
        out.push_str(": ");
        out.push_str(&s.to_string());
        src = s.source();
    }
    out
}
