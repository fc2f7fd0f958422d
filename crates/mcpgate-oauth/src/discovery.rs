//! Finding a server's authorization server: its protected resource metadata (RFC 9728,
//! at the well-known URI of its MCP endpoint) names the issuer; the issuer's metadata
//! (RFC 8414, then OpenID Connect discovery) names the endpoints. What was found is kept;
//! what failed is asked again next time.

use serde::Deserialize;

use crate::client::AsClient;
use crate::error::{OAuthError, Step};

/// What the gateway uses of an authorization server's metadata.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
pub struct ServerMetadata {
    /// Its issuer identifier.
    pub issuer: String,
    /// Where tokens are asked for.
    pub token_endpoint: Option<String>,
    /// Where users are sent to consent.
    pub authorization_endpoint: Option<String>,
    /// Where clients register (RFC 7591).
    pub registration_endpoint: Option<String>,
    /// The PKCE methods it supports.
    #[serde(default)]
    pub code_challenge_methods_supported: Vec<String>,
}

/// What the gateway uses of a server's protected resource metadata.
#[derive(Debug, Clone, Deserialize)]
struct ResourceMetadata {
    resource: String,
    #[serde(default)]
    authorization_servers: Vec<String>,
    #[serde(default)]
    scopes_supported: Vec<String>,
}

/// What discovery learned about a server.
#[derive(Debug, Clone)]
pub(crate) struct Found {
    /// The authorization server's metadata.
    pub(crate) server: ServerMetadata,
    /// The scopes the resource says it supports (a default for `scope`).
    pub(crate) scopes: Vec<String>,
}

/// `https://host/path` → (`https://host`, `/path` without a trailing slash).
fn split(url: &str) -> Option<(&str, &str)> {
    let after_scheme = url.find("://")? + 3;
    let path_at = url[after_scheme..]
        .find('/')
        .map_or(url.len(), |i| after_scheme + i);
    let path = url[path_at..].split(['?', '#']).next().unwrap_or("");
    Some((&url[..path_at], path.trim_end_matches('/')))
}

/// The well-known URIs of `base` under `suffix`, path-inserted first (RFC 8414 §3.1,
/// RFC 9728 §3.1), then appended (OpenID Connect's form) when the issuer has a path.
fn well_known(base: &str, suffix: &str) -> Vec<String> {
    match split(base) {
        Some((origin, "")) => vec![format!("{origin}/.well-known/{suffix}")],
        Some((origin, path)) => vec![
            format!("{origin}/.well-known/{suffix}{path}"),
            format!("{origin}{path}/.well-known/{suffix}"),
            format!("{origin}/.well-known/{suffix}"),
        ],
        None => Vec::new(),
    }
}

/// The issuer's metadata: RFC 8414's document, else OpenID Connect's; its `issuer` must
/// be the one asked for (RFC 8414 §3.3).
pub(crate) async fn server_metadata(
    client: &AsClient,
    issuer: &str,
) -> Result<ServerMetadata, OAuthError> {
    let mut urls = well_known(issuer, "oauth-authorization-server");
    urls.extend(well_known(issuer, "openid-configuration"));
    for url in urls {
        if let Some(m) = client
            .document::<ServerMetadata>(Step::ServerMetadata, &url)
            .await?
        {
            if m.issuer.trim_end_matches('/') != issuer.trim_end_matches('/') {
                return Err(OAuthError::Mismatch {
                    step: Step::ServerMetadata,
                    found: m.issuer,
                    expected: issuer.to_owned(),
                });
            }
            return Ok(m);
        }
    }
    Err(OAuthError::Undiscovered("authorization server metadata"))
}

/// The server's authorization server, from its protected resource metadata (which must
/// name `resource`), or `issuer` when configured.
pub(crate) async fn discover(
    client: &AsClient,
    server_url: &str,
    resource: &str,
    issuer: Option<&str>,
) -> Result<Found, OAuthError> {
    let mut scopes = Vec::new();
    let issuer = match issuer {
        Some(i) => i.to_owned(),
        None => {
            let mut found = None;
            for url in well_known(server_url, "oauth-protected-resource") {
                if let Some(m) = client
                    .document::<ResourceMetadata>(Step::ResourceMetadata, &url)
                    .await?
                {
                    found = Some(m);
                    break;
                }
            }
            let m = found.ok_or(OAuthError::Undiscovered("protected resource metadata"))?;
            if m.resource.trim_end_matches('/') != resource.trim_end_matches('/') {
                return Err(OAuthError::Mismatch {
                    step: Step::ResourceMetadata,
                    found: m.resource,
                    expected: resource.to_owned(),
                });
            }
            scopes = m.scopes_supported;
            m.authorization_servers
                .into_iter()
                .next()
                .ok_or(OAuthError::Undiscovered("authorization server"))?
        }
    };
    let server = server_metadata(client, &issuer).await?;
    Ok(Found { server, scopes })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn well_known_uris_insert_the_path_first() {
        assert_eq!(
            well_known("https://as.example", "oauth-authorization-server"),
            vec!["https://as.example/.well-known/oauth-authorization-server"]
        );
        assert_eq!(
            well_known("https://h.example/tenant/1/", "openid-configuration"),
            vec![
                "https://h.example/.well-known/openid-configuration/tenant/1",
                "https://h.example/tenant/1/.well-known/openid-configuration",
                "https://h.example/.well-known/openid-configuration",
            ]
        );
        assert_eq!(
            well_known("http://127.0.0.1:9/mcp?x=1", "oauth-protected-resource")[0],
            "http://127.0.0.1:9/.well-known/oauth-protected-resource/mcp"
        );
    }
}
