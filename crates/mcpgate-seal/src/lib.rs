//! Sealed session ids: the `Mcp-Session-Id` a client holds for a session whose upstream is
//! Streamable HTTP, encrypted and authenticated (XChaCha20-Poly1305) so that **any** replica
//! holding the key can resume the session, and nobody else can read or forge one.
//!
//! This crate owns the token format and the key ring, nothing else: what goes in a token
//! ([`Claims`]) is decided by the session layer, which also decides what a token that does
//! not open means (a 404, exactly like an unknown id).
//!
//! A token is `{key id}.{base64url(nonce ‖ ciphertext ‖ tag)}`: the key id is in the clear
//! so the ring picks the key without trial decryption; it is also authenticated (it is the
//! AEAD's associated data), so a token cannot be moved to another key id. The nonce is 24
//! random bytes from the OS, so keys never need a counter and replicas never coordinate.
//! The plaintext is the claims as JSON (small: a session's tokens are sealed once, at
//! initialize, and opened once per request).
//!
//! Rotation: a [`KeyRing`] holds several keys; the first seals, every one opens. Adding a
//! key in front keeps every token working; removing a key makes its tokens unopenable.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use chacha20poly1305::aead::{Aead, KeyInit, Payload};
use chacha20poly1305::{XChaCha20Poly1305, XNonce};
use serde::{Deserialize, Serialize};

/// Bytes of a key.
pub const KEY_LEN: usize = 32;
const NONCE_LEN: usize = 24;
const TAG_LEN: usize = 16;
/// Longest token accepted for opening (a header of a few KiB at most is read anyway).
pub const MAX_TOKEN: usize = 4096;
/// What is authenticated with every token besides its key id: a token of another format
/// version (or of another use of the same key) does not open as this one.
const CONTEXT: &[u8] = b"mcpgate-session-v1\0";
/// What bytes sealed by [`KeyRing::seal_bytes`] are bound to, before their own context.
const BYTES_CONTEXT: &[u8] = b"mcpgate-bytes-v1\0";

/// Why a key ring could not be built or a token not opened.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SealError {
    /// A key id is empty, too long, repeated, or uses a character outside `[A-Za-z0-9_-]`.
    #[error(
        "seal key id {0:?}: use 1 to 32 characters of A-Z, a-z, 0-9, '_' and '-', each id once"
    )]
    BadKeyId(String),
    /// A key is not 32 bytes of standard base64.
    #[error(
        "seal key {0:?}: the secret must be 32 bytes, base64-encoded (e.g. `openssl rand -base64 32`)"
    )]
    BadKey(String),
    /// The ring has no key.
    #[error("no seal key")]
    NoKey,
    /// Not a sealed token (no key id, not base64, too short or too long).
    #[error("not a sealed session id")]
    Malformed,
    /// Sealed with a key the ring does not hold (never had, or removed by rotation).
    #[error("sealed with an unknown key")]
    UnknownKey,
    /// The token does not authenticate: tampered with, truncated, or forged.
    #[error("the sealed session id does not authenticate")]
    Forged,
}

/// What a sealed session id carries: everything a replica needs to serve a session it has
/// never seen, and what binds it to its owner.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Claims {
    /// The gateway's own id of the session (the key of a replica's session table; the
    /// same on every replica that serves it).
    #[serde(rename = "i")]
    pub sid: String,
    /// The configured server's name.
    #[serde(rename = "s")]
    pub server: String,
    /// The upstream's `Mcp-Session-Id`; `None` for an upstream that keeps no session.
    #[serde(rename = "u", default, skip_serializing_if = "Option::is_none")]
    pub upstream_sid: Option<String>,
    /// The negotiated protocol version.
    #[serde(rename = "v")]
    pub version: String,
    /// The client's `initialize` capabilities, as JSON.
    #[serde(rename = "c", default, skip_serializing_if = "Option::is_none")]
    pub capabilities: Option<String>,
    /// The principal the session is bound to (`None` without authentication).
    #[serde(rename = "p", default, skip_serializing_if = "Option::is_none")]
    pub principal: Option<String>,
    /// When the session was created, in seconds since the Unix epoch.
    #[serde(rename = "t")]
    pub created: u64,
    /// When the token stops opening, in seconds since the Unix epoch (a session whose
    /// upstream keeps no session of its own has no other bound).
    #[serde(rename = "x", default, skip_serializing_if = "Option::is_none")]
    pub expires: Option<u64>,
}

/// One key of the ring.
struct Key {
    id: String,
    cipher: XChaCha20Poly1305,
}

/// The keys a replica seals and opens tokens with: the first seals, all open.
pub struct KeyRing {
    keys: Vec<Key>,
}

impl std::fmt::Debug for KeyRing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Key ids only: never the key material.
        let ids: Vec<&str> = self.keys.iter().map(|k| k.id.as_str()).collect();
        f.debug_struct("KeyRing").field("keys", &ids).finish()
    }
}

fn valid_id(id: &str) -> bool {
    (1..=32).contains(&id.len())
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

impl KeyRing {
    /// A ring of `(id, base64 secret)` pairs, the sealing key first.
    pub fn new<I, S>(keys: I) -> Result<Self, SealError>
    where
        I: IntoIterator<Item = (S, S)>,
        S: AsRef<str>,
    {
        let mut ring = Vec::new();
        for (id, secret) in keys {
            let (id, secret) = (id.as_ref(), secret.as_ref());
            if !valid_id(id) || ring.iter().any(|k: &Key| k.id == id) {
                return Err(SealError::BadKeyId(id.to_owned()));
            }
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(secret.trim())
                .map_err(|_| SealError::BadKey(id.to_owned()))?;
            let cipher = XChaCha20Poly1305::new_from_slice(&bytes)
                .ok()
                .filter(|_| bytes.len() == KEY_LEN)
                .ok_or_else(|| SealError::BadKey(id.to_owned()))?;
            ring.push(Key {
                id: id.to_owned(),
                cipher,
            });
        }
        if ring.is_empty() {
            return Err(SealError::NoKey);
        }
        Ok(KeyRing { keys: ring })
    }

    /// The id of the key that seals.
    pub fn sealing_key(&self) -> &str {
        self.keys.first().map_or("", |k| k.id.as_str())
    }

    /// The ids of every key, the sealing one first.
    pub fn key_ids(&self) -> impl Iterator<Item = &str> {
        self.keys.iter().map(|k| k.id.as_str())
    }

    /// Seals `claims` with the first key.
    pub fn seal(&self, claims: &Claims) -> Result<String, SealError> {
        let plain = serde_json::to_vec(claims).map_err(|_| SealError::Malformed)?;
        self.seal_with(CONTEXT, &plain)
    }

    /// Opens a token sealed with any key of the ring.
    pub fn open(&self, token: &str) -> Result<Claims, SealError> {
        if token.len() > MAX_TOKEN {
            return Err(SealError::Malformed);
        }
        let plain = self.open_with(CONTEXT, token)?;
        serde_json::from_slice(&plain).map_err(|_| SealError::Forged)
    }

    /// Seals `plain` (any bytes: a secret at rest) bound to `context` — what it is and
    /// where it is kept, so that it opens nowhere else — in the token format of session
    /// ids.
    pub fn seal_bytes(&self, context: &[u8], plain: &[u8]) -> Result<String, SealError> {
        self.seal_with(&bound(context), plain)
    }

    /// Opens what [`KeyRing::seal_bytes`] sealed for the same `context`, with any key of
    /// the ring.
    pub fn open_bytes(&self, context: &[u8], token: &str) -> Result<Vec<u8>, SealError> {
        self.open_with(&bound(context), token)
    }

    fn seal_with(&self, context: &[u8], plain: &[u8]) -> Result<String, SealError> {
        let key = self.keys.first().ok_or(SealError::NoKey)?;
        let mut nonce = [0u8; NONCE_LEN];
        if getrandom::fill(&mut nonce).is_err() {
            // A predictable nonce would be worse than no gateway.
            std::process::abort();
        }
        let aad = aad(context, &key.id);
        let sealed = key
            .cipher
            .encrypt(
                XNonce::from_slice(&nonce),
                Payload {
                    msg: plain,
                    aad: &aad,
                },
            )
            .map_err(|_| SealError::Forged)?;
        let mut raw = Vec::with_capacity(NONCE_LEN + sealed.len());
        raw.extend_from_slice(&nonce);
        raw.extend_from_slice(&sealed);
        let mut out = String::with_capacity(key.id.len() + 1 + raw.len().div_ceil(3) * 4);
        out.push_str(&key.id);
        out.push('.');
        URL_SAFE_NO_PAD.encode_string(&raw, &mut out);
        Ok(out)
    }

    fn open_with(&self, context: &[u8], token: &str) -> Result<Vec<u8>, SealError> {
        let (kid, body) = token
            .split_once('.')
            .filter(|(kid, body)| valid_id(kid) && !body.is_empty())
            .ok_or(SealError::Malformed)?;
        let key = self
            .keys
            .iter()
            .find(|k| k.id == kid)
            .ok_or(SealError::UnknownKey)?;
        let raw = URL_SAFE_NO_PAD
            .decode(body)
            .map_err(|_| SealError::Malformed)?;
        if raw.len() < NONCE_LEN + TAG_LEN {
            return Err(SealError::Malformed);
        }
        let (nonce, sealed) = raw.split_at(NONCE_LEN);
        let aad = aad(context, kid);
        key.cipher
            .decrypt(
                XNonce::from_slice(nonce),
                Payload {
                    msg: sealed,
                    aad: &aad,
                },
            )
            .map_err(|_| SealError::Forged)
    }
}

/// The associated data of bytes sealed for `context`: never the same as a session id's.
fn bound(context: &[u8]) -> Vec<u8> {
    let mut c = Vec::with_capacity(BYTES_CONTEXT.len() + context.len());
    c.extend_from_slice(BYTES_CONTEXT);
    c.extend_from_slice(context);
    c
}

fn aad(context: &[u8], kid: &str) -> Vec<u8> {
    let mut a = Vec::with_capacity(context.len() + kid.len() + 1);
    a.extend_from_slice(context);
    a.extend_from_slice(kid.as_bytes());
    a
}

/// `(key id, body)` of something shaped like a sealed token.
fn split(token: &str) -> Option<(&str, &str)> {
    if token.len() > MAX_TOKEN {
        return None;
    }
    let (kid, body) = token.split_once('.')?;
    (valid_id(kid) && !body.is_empty()).then_some((kid, body))
}

/// Whether `id` is shaped like a sealed token (a key id, a dot, a body); plain session ids
/// have no dot. Says nothing about whether it opens.
pub fn looks_sealed(id: &str) -> bool {
    split(id).is_some()
}

/// The part of a token that tells sessions apart in logs without being usable: the key id
/// and the first characters of the (random) nonce.
pub fn tag(token: &str) -> &str {
    match token.find('.') {
        Some(dot) => token.get(..dot + 1 + 8).unwrap_or(token),
        None => token,
    }
}

#[cfg(test)]
mod tests;
