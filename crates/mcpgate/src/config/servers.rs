//! `[[server]]` entries → [`ServerSpec`]s: names, transports, URLs, TLS files, proxies.

use anyhow::{Context, bail};
use mcpgate_session::ServerSpec;
use mcpgate_upstream::{HttpOptions, ProxyMode, Target};

use super::raw::{RawServer, Transport};

/// Validates one server; `at` names it in errors; warnings go to `warnings`.
pub(super) fn server(
    at: &str,
    s: RawServer,
    warnings: &mut Vec<String>,
) -> anyhow::Result<ServerSpec> {
    check_name(at, &s.name)?;
    let http_only = s.ca_file.is_some()
        || s.client_cert.is_some()
        || s.client_key.is_some()
        || s.dangerously_accept_invalid_certs
        || s.proxy.is_some();
    let target = match s.transport {
        Transport::StreamableHttp | Transport::Sse => {
            let Some(url) = s.url else {
                bail!("{at}: transport \"streamable-http\" and \"sse\" need url")
            };
            check_url(&format!("{at}: url"), &url)?;
            if !s.command.is_empty() || !s.env.is_empty() || s.cwd.is_some() {
                bail!("{at}: command, env and cwd are for transport \"stdio\"");
            }
            let mut headers: Vec<(String, String)> = s.headers.into_iter().collect();
            for (name, var) in s.headers_env {
                let value = std::env::var(&var)
                    .with_context(|| format!("{at}: headers_env.{name}: {var} is not set"))?;
                headers.push((name, value));
            }
            let tls = mcpgate_tls::ClientOptions {
                ca_file: s.ca_file,
                client_cert: s.client_cert,
                client_key: s.client_key,
                dangerously_accept_invalid_certs: s.dangerously_accept_invalid_certs,
            };
            tls.check().with_context(|| format!("{at}: TLS"))?;
            if tls.dangerously_accept_invalid_certs {
                warnings.push(format!(
                    "{at}: dangerously_accept_invalid_certs = true: the server's certificate is NOT verified; anyone on the path can read and change this traffic"
                ));
                if url.starts_with("http://") {
                    warnings.push(format!(
                        "{at}: dangerously_accept_invalid_certs has no effect on an http:// url"
                    ));
                }
            }
            let proxy = match s.proxy.as_deref() {
                None | Some("env") => ProxyMode::Env,
                Some("none") => ProxyMode::Off,
                Some(u) => {
                    check_url(&format!("{at}: proxy"), u)?;
                    ProxyMode::Url(u.to_owned())
                }
            };
            let http = HttpOptions { tls, proxy };
            if s.transport == Transport::Sse {
                Target::LegacySse { url, headers, http }
            } else {
                Target::Http { url, headers, http }
            }
        }
        Transport::Stdio => {
            if s.command.is_empty() || s.command[0].is_empty() {
                bail!("{at}: transport \"stdio\" needs command = [\"program\", \"arg\", …]");
            }
            if s.url.is_some() || !s.headers.is_empty() || !s.headers_env.is_empty() || http_only {
                bail!(
                    "{at}: url, headers, ca_file, client_cert, client_key, proxy and dangerously_accept_invalid_certs are for the HTTP transports"
                );
            }
            Target::Stdio {
                command: s.command,
                env: s.env,
                cwd: s.cwd,
                env_clear: false,
            }
        }
    };
    if s.idle_timeout.is_some_and(|d| d.is_zero()) {
        bail!("{at}: idle_timeout must be above zero");
    }
    let protocol = match s.protocol.as_deref() {
        None | Some("auto") => mcpgate_session::Protocol::Auto,
        Some(v) if mcpgate_jsonrpc::mcp::is_session_version(v) => {
            mcpgate_session::Protocol::Session
        }
        Some(v)
            if mcpgate_jsonrpc::mcp::is_modern_version(v)
                && mcpgate_jsonrpc::mcp::is_supported_version(v) =>
        {
            mcpgate_session::Protocol::Modern
        }
        Some(v) => bail!("{at}: protocol {v:?} is not \"auto\", \"2025-11-25\" or \"2026-07-28\""),
    };
    let mut spec = ServerSpec::new(s.name, target);
    spec.protocol = protocol;
    spec.bridge = s.bridge.unwrap_or(true);
    spec.idle_timeout = s.idle_timeout;
    if let Some(e) = s.evict_idle {
        spec.evict_idle = e;
    }
    Ok(spec)
}

/// A server's (or virtual server's) name: its mount point and metric label.
pub(super) fn check_name(at: &str, name: &str) -> anyhow::Result<()> {
    if name.is_empty()
        || !name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    {
        bail!("{at}: name must be non-empty and use only letters, digits, '-' and '_'");
    }
    Ok(())
}

/// An `http://` or `https://` URL with a host.
pub(super) fn check_url(what: &str, url: &str) -> anyhow::Result<()> {
    let Some((scheme, rest)) = url.split_once("://") else {
        bail!("{what}: {url:?} is not a URL (expected http:// or https://)");
    };
    if scheme != "http" && scheme != "https" {
        bail!("{what}: scheme {scheme:?} is not supported (use http:// or https://)");
    }
    let host = rest.split(['/', '?', '#']).next().unwrap_or("");
    if host.is_empty() || host.starts_with(':') {
        bail!("{what}: {url:?} has no host");
    }
    Ok(())
}
