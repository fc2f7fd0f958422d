//! Client authentication. Every MCP request is authenticated (a session id is not a
//! credential); the identity it proves is the request's *principal*, and a session can
//! only be used by the principal that opened it.
//!
//! Two kinds of credential, either or both:
//! - static bearer tokens (API keys) from config or the environment, compared in
//!   constant time;
//! - JWT access tokens of an OAuth 2.1 authorization server, as an OAuth resource server:
//!   signature by a key of the issuer's JWKS (fetched and cached), issuer, audience (this
//!   gateway — tokens minted for anything else are refused), expiry, and required scopes.
//!
//! The client's `Authorization` header is consumed here and never forwarded upstream.

use std::collections::HashSet;
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use http::HeaderMap;
use jsonwebtoken::jwk::JwkSet;
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde::Deserialize;
use subtle::ConstantTimeEq;
use tracing::{debug, warn};

/// A static bearer token and the principal it stands for.
#[derive(Clone)]
pub struct StaticToken {
    /// The principal's name (shown in logs and the admin API as `token:{name}`).
    pub name: String,
    /// The secret.
    pub token: String,
}

impl std::fmt::Debug for StaticToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StaticToken")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

/// JWT validation as an OAuth 2.1 resource server.
#[derive(Debug, Clone)]
pub struct JwtConfig {
    /// Expected `iss`; also listed as the authorization server in the metadata document.
    pub issuer: String,
    /// Expected `aud`: this gateway's resource identifier.
    pub audience: String,
    /// Where the issuer's signing keys are published.
    pub jwks_url: String,
    /// Scopes every token must carry (403 `insufficient_scope` otherwise).
    pub required_scopes: Vec<String>,
    /// How long fetched keys are used before they are fetched again.
    pub jwks_refresh: Duration,
    /// The canonical URL of the protected resource (e.g. `https://mcp.example.com/mcp`),
    /// used for the RFC 9728 metadata document and the `WWW-Authenticate` hint.
    pub resource: String,
    /// TLS toward the JWKS endpoint (an extra CA for a private issuer).
    pub tls: mcpgate_tls::ClientOptions,
}

/// The authentication configuration; both parts empty means authentication is off.
#[derive(Debug, Clone, Default)]
pub struct AuthConfig {
    /// Static bearer tokens.
    pub tokens: Vec<StaticToken>,
    /// JWT validation.
    pub jwt: Option<JwtConfig>,
    /// Told each JWT that verifies (upstream token exchange needs the client's token).
    pub verified: Option<TokenSink>,
}

/// Told each client JWT that verifies: its principal, the token, its expiry (seconds
/// since the epoch). The one place a client's token leaves the authenticator; it is
/// never forwarded upstream as it is.
#[derive(Clone)]
pub struct TokenSink(pub Arc<VerifiedFn>);

/// What a [`TokenSink`] calls: principal, token, expiry.
pub type VerifiedFn = dyn Fn(&str, &str, Option<u64>) + Send + Sync;

impl std::fmt::Debug for TokenSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TokenSink")
    }
}

impl AuthConfig {
    /// Whether any credential is required.
    pub fn is_enabled(&self) -> bool {
        !self.tokens.is_empty() || self.jwt.is_some()
    }
}

/// Why a request was not authenticated.
#[derive(Debug, Clone, thiserror::Error)]
pub enum AuthError {
    /// No bearer token.
    #[error("authentication required")]
    Missing,
    /// A token that is not valid here (bad signature, expired, wrong issuer or audience,
    /// unknown static token).
    #[error("invalid token: {0}")]
    Invalid(#[from] InvalidToken),
    /// A valid token without the scopes this gateway requires (all of them, space
    /// separated).
    #[error("insufficient scope")]
    InsufficientScope(String),
}

/// Why a token is not valid here.
#[derive(Debug, Clone, thiserror::Error)]
pub enum InvalidToken {
    /// Neither a static token nor a JWT.
    #[error("unknown token")]
    Unknown,
    /// A JWT that does not decode or verify (signature, expiry, issuer, audience).
    #[error("{0}")]
    Jwt(#[from] jsonwebtoken::errors::Error),
    /// A JWT signed with an algorithm the gateway does not take.
    #[error("algorithm {0:?} is not accepted")]
    Algorithm(Algorithm),
    /// A JWT naming neither `sub` nor `client_id`.
    #[error("token has no sub")]
    NoSubject,
    /// A JWT signed by a key the issuer does not list.
    #[error("unknown key id")]
    UnknownKey,
    /// The issuer's keys could not be fetched, and none known matches.
    #[error("signing keys unavailable")]
    NoKeys,
}

/// Why the issuer's keys could not be fetched.
#[derive(Debug, thiserror::Error)]
enum JwksError {
    /// The request failed on a TLS problem.
    #[error(transparent)]
    Tls(#[from] mcpgate_tls::TlsFailure),
    /// The request failed otherwise.
    #[error("{}", chain(.0))]
    Request(#[source] reqwest::Error),
    /// The issuer answered with a failure status.
    #[error("HTTP {0}")]
    Status(u16),
    /// The answer is not a JWK set.
    #[error("not a JWK set: {0}")]
    Json(#[from] serde_json::Error),
}

struct Keys {
    set: JwkSet,
    fetched: Instant,
}

/// Authenticates requests. One per front; cheap to share.
pub struct Authenticator {
    cfg: AuthConfig,
    http: reqwest::Client,
    /// Cached JWKS. Plain lock: held to read or swap the set, never across an `.await`.
    keys: RwLock<Option<Keys>>,
    /// Serialises refetches triggered by unknown key ids.
    last_forced_fetch: RwLock<Option<Instant>>,
    /// Each static token's principal (`token:{name}`), built once.
    principals: Vec<Arc<str>>,
    /// JWTs that verified, by token.
    verified: crate::token_cache::TokenCache,
    /// Told each verified JWT's principal and groups.
    groups_sink: Option<mcpgate_session::GroupsSink>,
}

impl std::fmt::Debug for Authenticator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Authenticator")
            .field("cfg", &self.cfg)
            .finish_non_exhaustive()
    }
}

#[derive(Debug, Deserialize)]
struct Claims {
    exp: Option<u64>,
    sub: Option<String>,
    client_id: Option<String>,
    scope: Option<String>,
    scp: Option<Vec<String>>,
    /// The subject's groups and roles (an array of strings, or one space-separated
    /// string), for virtual servers' access rules.
    groups: Option<serde_json::Value>,
    roles: Option<serde_json::Value>,
}

/// The strings of a claim: an array of strings or a space-separated string.
fn claim_strings(v: Option<&serde_json::Value>) -> Vec<String> {
    match v {
        Some(serde_json::Value::Array(a)) => a
            .iter()
            .filter_map(|x| x.as_str().map(str::to_owned))
            .collect(),
        Some(serde_json::Value::String(s)) => s.split_whitespace().map(str::to_owned).collect(),
        _ => Vec::new(),
    }
}

impl Authenticator {
    /// An authenticator for `cfg`. Fails when the JWKS endpoint's TLS files are unusable.
    pub fn new(cfg: AuthConfig) -> Result<Self, mcpgate_tls::TlsError> {
        let mut b = reqwest::Client::builder()
            .timeout(Duration::from_secs(5))
            .redirect(reqwest::redirect::Policy::limited(3));
        if let Some(jwt) = &cfg.jwt {
            b = b.tls_backend_preconfigured((*jwt.tls.build()?).clone());
        }
        let http = b
            .build()
            .map_err(|e| mcpgate_tls::TlsError::Client(Arc::new(e)))?;
        let principals = cfg
            .tokens
            .iter()
            .map(|t| Arc::from(format!("token:{}", t.name)))
            .collect();
        Ok(Authenticator {
            cfg,
            http,
            keys: RwLock::new(None),
            last_forced_fetch: RwLock::new(None),
            principals,
            verified: crate::token_cache::TokenCache::default(),
            groups_sink: None,
        })
    }

    /// Tells `sink` the principal and groups of every JWT that verifies.
    pub fn with_groups_sink(mut self, sink: mcpgate_session::GroupsSink) -> Self {
        self.groups_sink = Some(sink);
        self
    }

    /// The principal of a request: `Ok(None)` when authentication is off.
    pub async fn authenticate(&self, h: &HeaderMap) -> Result<Option<Arc<str>>, AuthError> {
        if !self.cfg.is_enabled() {
            return Ok(None);
        }
        let token = bearer(h).ok_or(AuthError::Missing)?;
        // Every static token is compared, in constant time, whatever matches first.
        let mut found: Option<&Arc<str>> = None;
        for (t, who) in self.cfg.tokens.iter().zip(&self.principals) {
            if bool::from(t.token.as_bytes().ct_eq(token.as_bytes())) {
                found = Some(who);
            }
        }
        if let Some(who) = found {
            return Ok(Some(who.clone()));
        }
        match &self.cfg.jwt {
            Some(jwt) if token.matches('.').count() == 2 => {
                if let Some(who) = self.verified.get(token) {
                    return Ok(Some(who));
                }
                self.verify_jwt(jwt, token).await.map(Some)
            }
            _ => Err(InvalidToken::Unknown.into()),
        }
    }

    async fn verify_jwt(&self, jwt: &JwtConfig, token: &str) -> Result<Arc<str>, AuthError> {
        let header = jsonwebtoken::decode_header(token).map_err(InvalidToken::Jwt)?;
        if !matches!(
            header.alg,
            Algorithm::RS256
                | Algorithm::RS384
                | Algorithm::RS512
                | Algorithm::PS256
                | Algorithm::PS384
                | Algorithm::PS512
                | Algorithm::ES256
                | Algorithm::ES384
                | Algorithm::EdDSA
        ) {
            return Err(InvalidToken::Algorithm(header.alg).into());
        }
        let key = self.key_for(jwt, header.kid.as_deref()).await?;
        let mut v = Validation::new(header.alg);
        v.set_issuer(&[&jwt.issuer]);
        v.set_audience(&[&jwt.audience]);
        v.leeway = 30;
        v.validate_nbf = true;
        v.set_required_spec_claims(&["exp", "iss", "aud"]);
        let data = jsonwebtoken::decode::<Claims>(token, &key, &v).map_err(InvalidToken::Jwt)?;
        let c = data.claims;
        let scopes: HashSet<String> = match (c.scope, c.scp) {
            (Some(s), _) => s.split_whitespace().map(str::to_owned).collect(),
            (None, Some(v)) => v.into_iter().collect(),
            (None, None) => HashSet::new(),
        };
        let missing: Vec<&str> = jwt
            .required_scopes
            .iter()
            .filter(|s| !scopes.contains(*s))
            .map(String::as_str)
            .collect();
        if !missing.is_empty() {
            return Err(AuthError::InsufficientScope(jwt.required_scopes.join(" ")));
        }
        let who = c.sub.or(c.client_id).ok_or(InvalidToken::NoSubject)?;
        let who: Arc<str> = Arc::from(format!("jwt:{who}"));
        if let Some(sink) = &self.groups_sink {
            let mut groups = claim_strings(c.groups.as_ref());
            groups.extend(claim_strings(c.roles.as_ref()));
            sink(&who, groups);
        }
        if let Some(sink) = &self.cfg.verified {
            (sink.0)(&who, token, c.exp);
        }
        self.verified.put(token, who.clone(), c.exp);
        Ok(who)
    }

    /// The decoding key for `kid`, from the cached JWKS; fetched when missing or stale,
    /// and refetched (at most every 30 s) when the kid is unknown (key rotation).
    async fn key_for(&self, jwt: &JwtConfig, kid: Option<&str>) -> Result<DecodingKey, AuthError> {
        let lookup = |keys: &Keys| -> Option<DecodingKey> {
            let jwk = match kid {
                Some(k) => keys.set.find(k)?,
                None if keys.set.keys.len() == 1 => keys.set.keys.first()?,
                None => return None,
            };
            DecodingKey::from_jwk(jwk).ok()
        };
        let (fresh, key) = match self.keys.read() {
            Ok(g) => match g.as_ref() {
                Some(k) => (k.fetched.elapsed() < jwt.jwks_refresh, lookup(k)),
                None => (false, None),
            },
            Err(_) => (false, None),
        };
        if let (true, Some(key)) = (fresh, &key) {
            return Ok(key.clone());
        }
        let may_force = self
            .last_forced_fetch
            .read()
            .ok()
            .and_then(|g| *g)
            .is_none_or(|t| t.elapsed() > Duration::from_secs(30));
        if fresh && !may_force {
            return Err(InvalidToken::UnknownKey.into());
        }
        if fresh && let Ok(mut g) = self.last_forced_fetch.write() {
            *g = Some(Instant::now());
        }
        match self.fetch(jwt).await {
            Ok(set) => {
                let keys = Keys {
                    set,
                    fetched: Instant::now(),
                };
                let key = lookup(&keys);
                if let Ok(mut g) = self.keys.write() {
                    *g = Some(keys);
                }
                key.ok_or(InvalidToken::UnknownKey.into())
            }
            // The issuer is unreachable: keep using keys we have, if one matches.
            Err(e) => {
                warn!(error = %e, url = %jwt.jwks_url, "cannot fetch JWKS");
                key.ok_or(InvalidToken::NoKeys.into())
            }
        }
    }

    async fn fetch(&self, jwt: &JwtConfig) -> Result<JwkSet, JwksError> {
        debug!(url = %jwt.jwks_url, "fetching JWKS");
        let failed = |e: reqwest::Error| match mcpgate_tls::describe(&e) {
            Some(tls) => JwksError::Tls(tls),
            None => JwksError::Request(e),
        };
        let resp = self.http.get(&jwt.jwks_url).send().await.map_err(failed)?;
        if !resp.status().is_success() {
            return Err(JwksError::Status(resp.status().as_u16()));
        }
        let body = resp.bytes().await.map_err(failed)?;
        Ok(serde_json::from_slice::<JwkSet>(&body)?)
    }

    /// The RFC 9728 protected resource metadata document, when JWT validation is on.
    pub fn resource_metadata(&self) -> Option<serde_json::Value> {
        let jwt = self.cfg.jwt.as_ref()?;
        let mut doc = serde_json::json!({
            "resource": jwt.resource,
            "authorization_servers": [jwt.issuer],
            "bearer_methods_supported": ["header"],
        });
        if !jwt.required_scopes.is_empty() {
            doc["scopes_supported"] = serde_json::json!(jwt.required_scopes);
        }
        Some(doc)
    }

    /// The message of a refusal's JSON-RPC error body: what is wrong, and, when only
    /// static tokens are configured, that this endpoint takes one (an OAuth-capable client
    /// that sees a 401 would otherwise try an authorization flow the gateway does not
    /// offer).
    pub fn refusal_message(&self, e: &AuthError) -> String {
        if self.cfg.jwt.is_some() {
            return e.to_string();
        }
        format!(
            "{e}: this endpoint takes a static bearer token (send `Authorization: Bearer <token>`); it offers no OAuth authorization"
        )
    }

    /// The `WWW-Authenticate` value for a refusal.
    pub fn challenge(&self, e: &AuthError) -> String {
        let mut parts = vec![match &self.cfg.jwt {
            Some(jwt) => format!(
                "Bearer resource_metadata=\"{}\"",
                metadata_url(&jwt.resource)
            ),
            None => "Bearer realm=\"mcpgate\"".to_owned(),
        }];
        match e {
            AuthError::Missing => {}
            AuthError::Invalid(_) => parts.push("error=\"invalid_token\"".into()),
            AuthError::InsufficientScope(scope) => {
                parts.push("error=\"insufficient_scope\"".into());
                parts.push(format!("scope=\"{scope}\""));
            }
        }
        parts.join(", ")
    }
}

/// An error and its sources in one line.
fn chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        s.push_str(": ");
        s.push_str(&c.to_string());
        cur = c.source();
    }
    s
}

/// `https://host/mcp` → `https://host/.well-known/oauth-protected-resource/mcp` (RFC 9728 §3).
pub fn metadata_url(resource: &str) -> String {
    let (scheme, rest) = resource.split_once("://").unwrap_or(("https", resource));
    let (host, path) = rest
        .find('/')
        .map_or((rest, ""), |i| (&rest[..i], &rest[i..]));
    format!(
        "{scheme}://{host}/.well-known/oauth-protected-resource{}",
        path.trim_end_matches('/')
    )
}

/// The bearer token of a request, if it carries one.
fn bearer(h: &HeaderMap) -> Option<&str> {
    let v = h.get(http::header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = v.split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| token.trim())
        .filter(|t| !t.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    fn h(auth: &str) -> HeaderMap {
        let mut m = HeaderMap::new();
        m.insert(
            http::header::AUTHORIZATION,
            HeaderValue::from_str(auth).unwrap(),
        );
        m
    }

    #[tokio::test]
    async fn static_tokens() {
        let a = Authenticator::new(AuthConfig {
            tokens: vec![StaticToken {
                name: "alice".into(),
                token: "s3cret-token-alice".into(),
            }],
            jwt: None,
            verified: None,
        })
        .unwrap();
        assert_eq!(
            a.authenticate(&h("Bearer s3cret-token-alice"))
                .await
                .unwrap()
                .as_deref(),
            Some("token:alice")
        );
        assert_eq!(
            a.authenticate(&h("bearer s3cret-token-alice"))
                .await
                .unwrap()
                .as_deref(),
            Some("token:alice")
        );
        assert!(matches!(
            a.authenticate(&h("Bearer nope")).await,
            Err(AuthError::Invalid(_))
        ));
        assert!(matches!(
            a.authenticate(&HeaderMap::new()).await,
            Err(AuthError::Missing)
        ));
        assert!(matches!(
            a.authenticate(&h("Basic abc")).await,
            Err(AuthError::Missing)
        ));
        let off = Authenticator::new(AuthConfig::default()).unwrap();
        assert_eq!(off.authenticate(&HeaderMap::new()).await.unwrap(), None);
    }

    #[test]
    fn metadata_urls() {
        assert_eq!(
            metadata_url("https://mcp.example.com/mcp"),
            "https://mcp.example.com/.well-known/oauth-protected-resource/mcp"
        );
        assert_eq!(
            metadata_url("http://127.0.0.1:8080"),
            "http://127.0.0.1:8080/.well-known/oauth-protected-resource"
        );
    }
}
