//! Listener TLS (`[listen]`, `[admin]`), client authentication (`[auth]`) and the admin
//! listener: each checked as far as it can be before anything starts — every certificate
//! file is loaded, and an expired one, or a key that does not match, is an error with its
//! dates.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, bail};

use super::raw::{RawAdmin, RawAuth};
use super::servers::check_url;

/// A listener's TLS files, checked.
pub(crate) type ListenerTls = mcpgate_tls::ServerOptions;

/// The admin listener.
#[derive(Debug)]
pub(crate) struct AdminListener {
    pub(crate) addr: SocketAddr,
    /// The bearer token (`None`: generate one at start).
    pub(crate) token: Option<String>,
    pub(crate) tls: Option<ListenerTls>,
}

/// A certificate that expires within this is reported as a warning.
const EXPIRY_WARNING: Duration = Duration::from_secs(14 * 86_400);

/// TLS for a listener from its three keys; `what` names the section in errors.
pub(super) fn listener_tls(
    what: &str,
    cert: Option<PathBuf>,
    key: Option<PathBuf>,
    client_ca: Option<PathBuf>,
    reload_every: Duration,
    warnings: &mut Vec<String>,
) -> anyhow::Result<Option<ListenerTls>> {
    let (cert, key) = match (cert, key) {
        (Some(c), Some(k)) => (c, k),
        (None, None) if client_ca.is_none() => return Ok(None),
        (None, None) => bail!("{what}.client_ca needs tls_cert and tls_key"),
        _ => bail!("{what}.tls_cert and {what}.tls_key go together"),
    };
    if reload_every < Duration::from_millis(100) {
        bail!("{what}.tls_reload_interval must be at least 100ms");
    }
    let opts = mcpgate_tls::ServerOptions {
        cert,
        key,
        client_ca,
        reload_every,
    };
    let (_, info) = opts.load().with_context(|| format!("{what} TLS"))?;
    if info.remaining < EXPIRY_WARNING {
        warnings.push(format!(
            "{what}.tls_cert {} expires soon (not after {})",
            opts.cert.display(),
            info.not_after
        ));
    }
    Ok(Some(opts))
}

/// `[admin]`.
pub(super) fn admin(
    a: Option<RawAdmin>,
    reload_every: Duration,
    warnings: &mut Vec<String>,
) -> anyhow::Result<Option<AdminListener>> {
    let Some(a) = a else { return Ok(None) };
    let addr: SocketAddr = a
        .addr
        .parse()
        .with_context(|| format!("admin.addr: {:?} is not an IP:port address", a.addr))?;
    let token = match (&a.token, &a.token_env) {
        (Some(t), _) => Some(t.clone()),
        (None, Some(var)) => {
            Some(std::env::var(var).with_context(|| format!("admin.token_env: {var} is not set"))?)
        }
        (None, None) => None,
    };
    if token.as_ref().is_some_and(|t| t.len() < 16) {
        bail!("admin token must be at least 16 characters");
    }
    let tls = listener_tls(
        "admin",
        a.tls_cert,
        a.tls_key,
        a.client_ca,
        reload_every,
        warnings,
    )?;
    Ok(Some(AdminListener { addr, token, tls }))
}

/// `[auth]`.
pub(super) fn auth(a: Option<RawAuth>) -> anyhow::Result<mcpgate_server::AuthConfig> {
    let Some(a) = a else {
        return Ok(mcpgate_server::AuthConfig::default());
    };
    let mut tokens = Vec::new();
    for t in a.tokens {
        let what = format!("auth.tokens {:?}", t.name);
        let token = secret(&what, t.token.as_deref(), t.token_env.as_deref(), None)?
            .with_context(|| format!("{what}: give one of token and token_env"))?;
        if token.len() < 16 {
            bail!(
                "auth.tokens {:?}: a token must be at least 16 characters",
                t.name
            );
        }
        tokens.push(mcpgate_server::StaticToken {
            name: t.name,
            token,
        });
    }
    let jwt = match a.jwt {
        None => None,
        Some(j) => {
            check_url("auth.jwt.jwks_url", &j.jwks_url)?;
            let tls = mcpgate_tls::ClientOptions {
                ca_file: j.ca_file,
                ..Default::default()
            };
            tls.check().context("auth.jwt.ca_file")?;
            Some(mcpgate_server::JwtConfig {
                resource: j.resource.unwrap_or_else(|| j.audience.clone()),
                issuer: j.issuer,
                audience: j.audience,
                jwks_url: j.jwks_url,
                required_scopes: j.required_scopes,
                jwks_refresh: j.jwks_refresh,
                tls,
            })
        }
    };
    let cfg = mcpgate_server::AuthConfig { tokens, jwt };
    if !cfg.is_enabled() {
        bail!("[auth] is present but configures neither tokens nor jwt");
    }
    Ok(cfg)
}

/// A secret given inline, by the environment variable that holds it, or by the file that
/// holds it: at most one of them (`None` when none is given).
fn secret(
    what: &str,
    inline: Option<&str>,
    env: Option<&str>,
    file: Option<&std::path::Path>,
) -> anyhow::Result<Option<String>> {
    Ok(match (inline, env, file) {
        (None, None, None) => None,
        (Some(v), None, None) => Some(v.to_owned()),
        (None, Some(var), None) => {
            Some(std::env::var(var).with_context(|| format!("{what}: {var} is not set"))?)
        }
        (None, None, Some(path)) => Some(
            std::fs::read_to_string(path)
                .with_context(|| format!("{what}: cannot read {}", path.display()))?,
        ),
        _ => bail!("{what}: give only one of the value, its variable and its file"),
    })
}

/// `session.seal_keys`: the key ring (`None` when no key is configured).
pub(super) fn seal_keys(
    keys: &[super::raw::RawSealKey],
) -> anyhow::Result<Option<mcpgate_seal::KeyRing>> {
    if keys.is_empty() {
        return Ok(None);
    }
    let mut pairs = Vec::with_capacity(keys.len());
    for k in keys {
        let what = format!("session.seal_keys {:?}", k.id);
        let secret = secret(
            &what,
            k.secret.as_deref(),
            k.secret_env.as_deref(),
            k.secret_file.as_deref(),
        )?
        .with_context(|| format!("{what}: give one of secret, secret_env and secret_file"))?;
        pairs.push((k.id.clone(), secret));
    }
    mcpgate_seal::KeyRing::new(pairs)
        .map(Some)
        .context("session.seal_keys")
}
