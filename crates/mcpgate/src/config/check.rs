//! Checks several sections share: a server's name, an `http(s)` URL, a secret given
//! inline, by variable or by file.

use anyhow::{Context, bail};

/// A server's (or virtual server's) name: its mount point and metric label.
pub(super) fn name(at: &str, name: &str) -> anyhow::Result<()> {
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
pub(super) fn url(what: &str, url: &str) -> anyhow::Result<()> {
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

/// A secret given inline, by the environment variable that holds it, or by the file that
/// holds it: at most one of them (`None` when none is given).
pub(super) fn secret(
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
