//! `/oauth/callback`: where a user's browser comes back after consenting (or refusing) to
//! let the gateway use an upstream server on their behalf. The consent's state decides
//! everything (single use, bound to the principal who was asked); the page says what
//! happened, never a token or code.

use bytes::Bytes;
use http::{Request, Response, StatusCode, header};

use crate::body::{Body, ReqBody, full};
use crate::front::Front;

impl Front {
    /// Completes the consent the callback's query names and tells the user.
    pub(crate) async fn oauth_callback(&self, req: &Request<ReqBody>) -> Response<Body> {
        let Some(grants) = &self.cfg.oauth else {
            return crate::error::FrontError::NoRoute.into_response(None);
        };
        let answer = grants.callback(req.uri().query().unwrap_or("")).await;
        page(
            StatusCode::from_u16(answer.status).unwrap_or(StatusCode::BAD_REQUEST),
            &answer.message,
        )
    }
}

/// A small HTML page saying `message`.
fn page(status: StatusCode, message: &str) -> Response<Body> {
    let title = if status.is_success() {
        "Authorized"
    } else {
        "Not authorized"
    };
    let body = format!(
        "<!doctype html><meta charset=utf-8><title>mcpgate: {title}</title>\
         <h1>{title}</h1><p>{}</p>\n",
        escape(message)
    );
    let mut r = Response::new(full(Bytes::from(body)));
    *r.status_mut() = status;
    let h = r.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        http::HeaderValue::from_static("text/html; charset=utf-8"),
    );
    h.insert(
        header::CACHE_CONTROL,
        http::HeaderValue::from_static("no-store"),
    );
    h.insert(
        header::REFERRER_POLICY,
        http::HeaderValue::from_static("no-referrer"),
    );
    r
}

/// `s` safe inside HTML text.
fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '&' => out.push_str("&amp;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn messages_are_escaped() {
        assert_eq!(super::escape("<b>&'\""), "&lt;b&gt;&amp;&#39;&quot;");
    }
}
