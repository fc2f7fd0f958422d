//! [`Source`]: one server's credentials, as the transports ask for them — the gateway's
//! own token shared by every session (client credentials), or one token per principal
//! (token exchange), each kept and renewed under one flight.

use std::sync::Arc;

use mcpgate_upstream::{Credential, CredentialError, Credentials};

use crate::authority::Authority;
use crate::cached::{Cached, Fetch, Principals, TokenFuture};
use crate::client::Token;
use crate::delegated::Delegated;
use crate::error::OAuthError;
use crate::grants::Grants;
use crate::settings::{Grant, Settings};
use crate::subjects::Subjects;

/// RFC 8693's grant type.
const TOKEN_EXCHANGE: &str = "urn:ietf:params:oauth:grant-type:token-exchange";
/// RFC 8693's token types.
const JWT_TYPE: &str = "urn:ietf:params:oauth:token-type:jwt";
const ACCESS_TOKEN_TYPE: &str = "urn:ietf:params:oauth:token-type:access_token";

/// The gateway's own token (client credentials).
#[derive(Debug)]
struct Own(Arc<Authority>);

impl Fetch for Own {
    fn fetch<'a>(&'a self, _: Option<&'a Token>) -> TokenFuture<'a> {
        Box::pin(async move { Ok(self.0.token("client_credentials", &[]).await?) })
    }
}

/// A principal's verified client token exchanged for the server's audience.
#[derive(Debug)]
struct Exchanged {
    authority: Arc<Authority>,
    subjects: Arc<Subjects>,
    principal: Arc<str>,
    audience: Option<String>,
}

impl Fetch for Exchanged {
    fn fetch<'a>(&'a self, _: Option<&'a Token>) -> TokenFuture<'a> {
        Box::pin(async move {
            let subject = self
                .subjects
                .get(&self.principal)
                .ok_or(OAuthError::NoSubject)?;
            let mut fields = vec![
                ("subject_token", subject.expose()),
                ("subject_token_type", JWT_TYPE),
                ("requested_token_type", ACCESS_TOKEN_TYPE),
            ];
            if let Some(a) = &self.audience {
                fields.push(("audience", a));
            }
            Ok(self.authority.token(TOKEN_EXCHANGE, &fields).await?)
        })
    }
}

/// How a server's tokens are had.
#[derive(Debug)]
enum Kind {
    Own(Arc<Cached<Own>>),
    Delegated(Arc<Delegated>),
    Exchange {
        subjects: Arc<Subjects>,
        audience: Option<String>,
        principals: Principals<Exchanged>,
    },
}

/// One server's credentials.
#[derive(Debug)]
pub struct Source {
    authority: Arc<Authority>,
    kind: Kind,
}

/// Why a source cannot be built.
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    /// Its TLS files are unusable.
    #[error(transparent)]
    Tls(#[from] mcpgate_tls::TlsError),
    /// The grant needs something this gateway was not given.
    #[error("oauth grant {0} needs {1}")]
    Needs(&'static str, &'static str),
}

impl Source {
    /// The source of `settings`; `subjects` are the principals' verified client tokens
    /// (token exchange needs them), `grants` the users' consents (the authorization code
    /// grant keeps them there).
    pub fn new(
        settings: Settings,
        subjects: Option<Arc<Subjects>>,
        grants: Option<Arc<Grants>>,
    ) -> Result<Self, SourceError> {
        let margin = settings.refresh_before;
        let label = format!("{}:{}", settings.server, settings.grant.as_str());
        let grant = settings.grant.clone();
        let authority = Arc::new(Authority::new(Arc::new(settings))?);
        let kind = match grant {
            Grant::ClientCredentials => {
                Kind::Own(Arc::new(Cached::new(Own(authority.clone()), margin, label)))
            }
            Grant::TokenExchange { audience } => Kind::Exchange {
                subjects: subjects.ok_or(SourceError::Needs(
                    "token_exchange",
                    "[auth.jwt]: clients' verified tokens to exchange",
                ))?,
                audience,
                principals: Principals::new(margin),
            },
            Grant::AuthorizationCode => {
                let grants = grants.ok_or(SourceError::Needs(
                    "authorization_code",
                    "the token vault ([vault])",
                ))?;
                let d = Arc::new(Delegated {
                    authority: authority.clone(),
                    grants: grants.clone(),
                    principals: Principals::new(margin),
                });
                let weak: std::sync::Weak<dyn crate::grants::Delegate> =
                    Arc::downgrade(&(d.clone() as Arc<dyn crate::grants::Delegate>));
                grants.register(&authority.settings.server, weak);
                Kind::Delegated(d)
            }
        };
        Ok(Source { authority, kind })
    }
}

impl Credentials for Source {
    fn for_principal(
        &self,
        principal: Option<&str>,
    ) -> Result<Arc<dyn Credential>, CredentialError> {
        match &self.kind {
            Kind::Own(c) => Ok(c.clone()),
            Kind::Delegated(d) => Ok(d.user(principal.ok_or(CredentialError::Anonymous)?)),
            Kind::Exchange {
                subjects,
                audience,
                principals,
            } => {
                let p = principal.ok_or(CredentialError::Anonymous)?;
                Ok(principals.get(p, |principal| Exchanged {
                    authority: self.authority.clone(),
                    subjects: subjects.clone(),
                    principal,
                    audience: audience.clone(),
                }))
            }
        }
    }
}
