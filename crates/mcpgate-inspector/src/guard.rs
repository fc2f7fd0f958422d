//! The browser guards of the inspector endpoints: `Host` must be a loopback name, an
//! `Origin` must be one of the UI's, and the token is compared in constant time.
//! Refusals are JSON-RPC error bodies (code -32000).

use http::{HeaderMap, HeaderValue, Response, StatusCode, header};
use mcpgate_jsonrpc::{JsonRpcError, error as code};
use mcpgate_server::body::{Body, json};
use subtle::ConstantTimeEq;
use tracing::{info, warn};

use crate::config::{TOKEN_HEADER, normalize_origin};
use crate::policy::Refusal;

/// A JSON-RPC error body with `status`.
pub(crate) fn refuse(status: StatusCode, msg: impl Into<String>) -> Response<Body> {
    json(
        status,
        JsonRpcError::new(code::BAD_REQUEST, msg).to_body(None),
    )
}

pub(crate) fn refuse_with((status, msg): Refusal) -> Response<Body> {
    refuse(status, msg)
}

/// Whether a `Host` value names this loopback listener.
pub(crate) fn loopback_host(host: &str) -> bool {
    let h = host.trim().to_ascii_lowercase();
    let name = if let Some(rest) = h.strip_prefix('[') {
        rest.split_once(']').map_or(h.as_str(), |(ip, _)| ip)
    } else {
        h.rsplit_once(':').map_or(h.as_str(), |(n, port)| {
            if port.bytes().all(|b| b.is_ascii_digit()) {
                n
            } else {
                h.as_str()
            }
        })
    };
    name == "localhost"
        || name == "::1"
        || name
            .parse::<std::net::Ipv4Addr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// The token and the origins requests are checked against.
pub(crate) struct Guard {
    pub(crate) token: Option<Vec<u8>>,
    pub(crate) origins: Vec<String>,
}

impl std::fmt::Debug for Guard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Guard")
            .field("origins", &self.origins)
            .finish_non_exhaustive()
    }
}

impl Guard {
    /// Whether a request's `Host` (if any) names this loopback listener.
    pub(crate) fn host_ok(h: &HeaderMap) -> bool {
        match h.get(header::HOST) {
            Some(host) => {
                let ok = host.to_str().is_ok_and(loopback_host);
                if !ok {
                    warn!(host = ?host, "inspector: Host not allowed");
                }
                ok
            }
            None => true,
        }
    }

    /// The browser guards: Host, fetch metadata and Origin. `Ok(Some(origin))` is the
    /// allowed origin to answer CORS for.
    pub(crate) fn check_browser(
        &self,
        h: &HeaderMap,
    ) -> Result<Option<HeaderValue>, Box<Response<Body>>> {
        if !Self::host_ok(h) {
            return Err(Box::new(refuse(
                StatusCode::FORBIDDEN,
                "Forbidden: Host not allowed (the inspector proxy answers to loopback names only)",
            )));
        }
        if h.get("sec-fetch-site")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.trim().eq_ignore_ascii_case("same-origin"))
        {
            warn!("inspector: same-origin browser request refused");
            return Err(Box::new(refuse(
                StatusCode::FORBIDDEN,
                "Forbidden: same-origin browser requests are not accepted",
            )));
        }
        match h.get(header::ORIGIN) {
            Some(o) => {
                let ok = o.to_str().is_ok_and(|s| self.origin_allowed(s));
                if ok {
                    Ok(Some(o.clone()))
                } else {
                    warn!(origin = ?o, "inspector: Origin not allowed");
                    Err(Box::new(refuse(
                        StatusCode::FORBIDDEN,
                        "Forbidden: Origin not allowed (not the Inspector UI's origin; see --ui-origin)",
                    )))
                }
            }
            None if self.token.is_none() => {
                warn!("inspector: request without Origin refused (authentication is off)");
                Err(Box::new(refuse(
                    StatusCode::FORBIDDEN,
                    "Forbidden: an Origin header is required while authentication is disabled",
                )))
            }
            None => Ok(None),
        }
    }

    /// Whether `header` carries `Bearer <the token>` (compared in constant time); always
    /// when authentication is off. `Err(present)` says whether a token was given at all.
    pub(crate) fn token_in(&self, h: &HeaderMap, header: &str) -> Result<(), bool> {
        let Some(expected) = &self.token else {
            return Ok(());
        };
        let given = h.get(header).and_then(|v| v.to_str().ok()).and_then(|v| {
            v.split_once(' ')
                .filter(|(s, _)| s.eq_ignore_ascii_case("bearer"))
                .map(|(_, t)| t.trim())
        });
        if given.is_some_and(|t| bool::from(t.as_bytes().ct_eq(expected))) {
            Ok(())
        } else {
            Err(given.is_some())
        }
    }

    /// Whether an `Origin` value is one of the allowed ones.
    pub(crate) fn origin_allowed(&self, o: &str) -> bool {
        self.origins.iter().any(|a| *a == normalize_origin(o))
    }

    /// The token check.
    pub(crate) fn check_token(&self, h: &HeaderMap) -> Result<(), Box<Response<Body>>> {
        let Err(present) = self.token_in(h, TOKEN_HEADER) else {
            return Ok(());
        };
        info!(present, "inspector: missing or wrong proxy token");
        let mut r = refuse(
            StatusCode::UNAUTHORIZED,
            "Authentication required. Use the session token printed by mcpgate inspector at start \
             (header X-MCP-Proxy-Auth: Bearer <token>; in the UI: Configuration → Proxy Session Token)",
        );
        r.headers_mut().insert(
            header::WWW_AUTHENTICATE,
            HeaderValue::from_static("Bearer realm=\"mcpgate-inspector\""),
        );
        Err(Box::new(r))
    }
}
