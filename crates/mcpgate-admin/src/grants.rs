//! `/api/grants`: the users' upstream consents kept in the vault — listed (who, which
//! server, scope, when; never a token) and revoked per principal and server.

use std::sync::Arc;

use http::StatusCode;
use mcpgate_oauth::Grants;
use serde_json::{Value, json};

/// `GET /api/grants`: the status and the document.
pub(crate) async fn list(grants: Option<&Arc<Grants>>) -> (StatusCode, Value) {
    let Some(grants) = grants else {
        return (StatusCode::OK, json!({"grants": []}));
    };
    match grants.list().await {
        Ok(all) => (StatusCode::OK, json!({"grants": all})),
        Err(e) => {
            tracing::warn!(error = %e, "admin: the token vault is unavailable");
            failed(
                StatusCode::SERVICE_UNAVAILABLE,
                &format!("token vault: {e}"),
            )
        }
    }
}

/// `DELETE /api/grants/{server}/{principal}` (the principal percent-encoded when it
/// holds a `/`): the status and the document.
pub(crate) async fn revoke(grants: Option<&Arc<Grants>>, rest: &str) -> (StatusCode, Value) {
    let Some((server, principal)) = rest.split_once('/') else {
        return failed(
            StatusCode::NOT_FOUND,
            "use /api/grants/{server}/{principal}",
        );
    };
    let principal = decode(principal);
    let Some(grants) = grants else {
        return failed(StatusCode::NOT_FOUND, "no token vault is configured");
    };
    match grants.revoke(server, &principal).await {
        Ok(true) => {
            tracing::info!(server, principal, "admin: upstream grant revoked");
            (StatusCode::OK, json!({"revoked": true}))
        }
        Ok(false) => failed(
            StatusCode::NOT_FOUND,
            "no grant of that principal for that server",
        ),
        Err(e) => failed(
            StatusCode::SERVICE_UNAVAILABLE,
            &format!("token vault: {e}"),
        ),
    }
}

/// An error answer, as the rest of the API gives them.
fn failed(status: StatusCode, msg: &str) -> (StatusCode, Value) {
    (status, json!({ "error": msg }))
}

/// `%XX` sequences decoded (principals such as `jwt:user@example.com` pass as they are).
fn decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = |c: u8| (c as char).to_digit(16);
        match (
            b[i],
            b.get(i + 1).copied().and_then(hex),
            b.get(i + 2).copied().and_then(hex),
        ) {
            (b'%', Some(h), Some(l)) => {
                out.push((h * 16 + l) as u8);
                i += 3;
            }
            (c, _, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}
