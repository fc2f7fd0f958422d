//! The gateway's HTTP client toward authorization servers: documents fetched as JSON,
//! token requests as forms. Redirects are not followed (a token endpoint that redirects
//! would carry the client's secret elsewhere); every request is bounded.

use std::time::{Duration, Instant};

use http::HeaderValue;
use mcpgate_upstream::Cause;
use serde::Deserialize;
use serde::de::DeserializeOwned;

use crate::error::{OAuthError, Step};
use crate::settings::{Client, ClientAuth, Secret};

/// A token as the authorization server gave it.
#[derive(Clone)]
pub(crate) struct Token {
    /// `Bearer {access_token}`, marked sensitive.
    pub(crate) header: HeaderValue,
    /// When it expires and how long it lived (`None`: the server did not say).
    pub(crate) expires: Option<(Instant, Duration)>,
    /// Its refresh token, when one was given.
    pub(crate) refresh: Option<Secret>,
    /// The scope granted, when the server said.
    pub(crate) scope: Option<String>,
}

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Token")
            .field("expires", &self.expires)
            .field("refresh", &self.refresh.is_some())
            .field("scope", &self.scope)
            .finish_non_exhaustive()
    }
}

impl Token {
    /// Whether it is good for at least `margin` more (at most half its lifetime, so a
    /// short-lived token is still used for a while).
    pub(crate) fn fresh(&self, margin: Duration) -> bool {
        self.expires.is_none_or(|(at, life)| {
            at.checked_sub(margin.min(life / 2))
                .is_some_and(|t| Instant::now() < t)
        })
    }
}

/// A token endpoint's success (RFC 6749 §5.1).
#[derive(Deserialize)]
struct Granted {
    access_token: String,
    token_type: String,
    expires_in: Option<u64>,
    refresh_token: Option<String>,
    scope: Option<String>,
}

/// A token endpoint's refusal (RFC 6749 §5.2).
#[derive(Deserialize)]
struct Refusal {
    error: String,
    error_description: Option<String>,
}

/// The HTTP client toward one server's authorization server.
#[derive(Debug, Clone)]
pub(crate) struct AsClient {
    http: reqwest::Client,
    timeout: Duration,
}

impl AsClient {
    /// A client with `tls`, each request bounded by `timeout`.
    pub(crate) fn new(
        tls: &mcpgate_tls::ClientOptions,
        timeout: Duration,
    ) -> Result<Self, mcpgate_tls::TlsError> {
        let tls = tls.build()?;
        let http = reqwest::Client::builder()
            .connect_timeout(timeout)
            .tls_backend_preconfigured((*tls).clone())
            .redirect(reqwest::redirect::Policy::none())
            .retry(reqwest::retry::never())
            .build()
            .map_err(|e| mcpgate_tls::TlsError::Client(std::sync::Arc::new(e)))?;
        Ok(AsClient { http, timeout })
    }

    /// Sends `req` (for `step` at `url`) under the bound.
    async fn send(
        &self,
        step: Step,
        url: &str,
        req: reqwest::RequestBuilder,
    ) -> Result<reqwest::Response, OAuthError> {
        match tokio::time::timeout(self.timeout, req.send()).await {
            Err(_) => Err(OAuthError::Timeout {
                step,
                url: url.to_owned(),
                after: self.timeout,
            }),
            Ok(Err(e)) => Err(OAuthError::Unreachable {
                step,
                url: url.to_owned(),
                source: Cause::new(e),
            }),
            Ok(Ok(r)) => Ok(r),
        }
    }

    /// The body of `resp` read (bounded) as JSON.
    async fn json<T: DeserializeOwned>(
        &self,
        step: Step,
        url: &str,
        resp: reqwest::Response,
    ) -> Result<T, OAuthError> {
        let doc = |source| OAuthError::Document {
            step,
            url: url.to_owned(),
            source,
        };
        let bytes = tokio::time::timeout(self.timeout, resp.bytes())
            .await
            .map_err(|_| OAuthError::Timeout {
                step,
                url: url.to_owned(),
                after: self.timeout,
            })?
            .map_err(|e| doc(Cause::new(e)))?;
        serde_json::from_slice(&bytes).map_err(|e| doc(Cause::new(e)))
    }

    /// A JSON document (`None`: the server has none there, 404).
    pub(crate) async fn document<T: DeserializeOwned>(
        &self,
        step: Step,
        url: &str,
    ) -> Result<Option<T>, OAuthError> {
        let req = self
            .http
            .get(url)
            .header(http::header::ACCEPT, "application/json");
        let resp = self.send(step, url, req).await?;
        match resp.status().as_u16() {
            200 => self.json(step, url, resp).await.map(Some),
            404 => Ok(None),
            status => Err(OAuthError::Status {
                step,
                url: url.to_owned(),
                status,
            }),
        }
    }

    /// A JSON POST (dynamic client registration): the answer's document.
    pub(crate) async fn post_json<T: DeserializeOwned>(
        &self,
        step: Step,
        url: &str,
        body: &serde_json::Value,
    ) -> Result<T, OAuthError> {
        let resp = self.send(step, url, self.http.post(url).json(body)).await?;
        let status = resp.status().as_u16();
        if (200..300).contains(&status) {
            return self.json(step, url, resp).await;
        }
        Err(self.refusal(step, url, resp).await)
    }

    /// A token request: `form` plus the client's authentication, at `endpoint`.
    pub(crate) async fn token(
        &self,
        endpoint: &str,
        client: &Client,
        form: &[(&str, &str)],
    ) -> Result<Token, OAuthError> {
        let step = Step::Token;
        let mut fields: Vec<(&str, &str)> = form.to_vec();
        let mut req = self.http.post(endpoint);
        match (client.auth, client.id.as_deref(), client.secret.as_ref()) {
            (ClientAuth::Basic, Some(id), Some(secret)) => {
                req = req.basic_auth(form_encode(id), Some(form_encode(secret.expose())));
            }
            (ClientAuth::Post, Some(id), Some(secret)) => {
                fields.push(("client_id", id));
                fields.push(("client_secret", secret.expose()));
            }
            (_, Some(id), _) => fields.push(("client_id", id)),
            (_, None, _) => {}
        }
        let req = req
            .header(http::header::ACCEPT, "application/json")
            .form(&fields);
        let resp = self.send(step, endpoint, req).await?;
        if !resp.status().is_success() {
            return Err(self.refusal(step, endpoint, resp).await);
        }
        let g: Granted = self.json(step, endpoint, resp).await?;
        granted(g, endpoint)
    }

    /// The error of a failure answer: the OAuth error it carries, or its status.
    async fn refusal(&self, step: Step, url: &str, resp: reqwest::Response) -> OAuthError {
        let status = resp.status().as_u16();
        match self.json::<Refusal>(step, url, resp).await {
            Ok(r) => OAuthError::Refused {
                code: r.error,
                description: r.error_description,
            },
            Err(_) => OAuthError::Status {
                step,
                url: url.to_owned(),
                status,
            },
        }
    }
}

/// A token endpoint's answer as a [`Token`]: a bearer token whose value fits a header.
fn granted(g: Granted, url: &str) -> Result<Token, OAuthError> {
    let doc = |why: &'static str| OAuthError::Document {
        step: Step::Token,
        url: url.to_owned(),
        source: Cause::new(std::io::Error::other(why)),
    };
    if !g.token_type.eq_ignore_ascii_case("bearer") {
        return Err(doc("token_type is not Bearer"));
    }
    let mut header = HeaderValue::try_from(format!("Bearer {}", g.access_token))
        .map_err(|_| doc("access_token is not a valid header value"))?;
    header.set_sensitive(true);
    Ok(Token {
        header,
        expires: g.expires_in.map(|s| {
            let life = Duration::from_secs(s);
            (Instant::now() + life, life)
        }),
        refresh: g.refresh_token.map(Secret::new),
        scope: g.scope,
    })
}

/// RFC 6749 §2.3.1: the client id and secret are form-encoded before Basic encoding.
fn form_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'*' => {
                out.push(b as char)
            }
            b' ' => out.push('+'),
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn basic_credentials_are_form_encoded_first() {
        assert_eq!(form_encode("my client:1"), "my+client%3A1");
        assert_eq!(form_encode("a-b.c_d*"), "a-b.c_d*");
    }

    #[test]
    fn a_token_that_is_not_bearer_is_refused() {
        let g = Granted {
            access_token: "x".into(),
            token_type: "mac".into(),
            expires_in: None,
            refresh_token: None,
            scope: None,
        };
        assert!(matches!(granted(g, "u"), Err(OAuthError::Document { .. })));
    }

    #[test]
    fn freshness_keeps_a_margin() {
        let t = |secs| Token {
            header: HeaderValue::from_static("Bearer x"),
            expires: Some((
                Instant::now() + Duration::from_secs(secs),
                Duration::from_secs(100),
            )),
            refresh: None,
            scope: None,
        };
        assert!(t(60).fresh(Duration::from_secs(30)));
        assert!(!t(20).fresh(Duration::from_secs(30)));
        // A margin over half the lifetime is cut to half of it.
        assert!(t(60).fresh(Duration::from_secs(80)));
        assert!(!t(40).fresh(Duration::from_secs(80)));
        let forever = Token {
            expires: None,
            ..t(1)
        };
        assert!(forever.fresh(Duration::from_secs(3600)));
    }
}
