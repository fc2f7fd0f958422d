//! A listener's TLS files (`[listen]` and `[admin]` each have `tls_cert`, `tls_key`,
//! `client_ca`), checked as far as they can be before anything starts: every file is
//! loaded, and an expired certificate, or a key that does not match, is an error with its
//! dates.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, bail};

/// A listener's TLS files, checked.
pub(crate) type ListenerTls = mcpgate_tls::ServerOptions;

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
