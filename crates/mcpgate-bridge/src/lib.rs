//! # mcpgate-bridge
//!
//! The translation between the two MCP eras, and nothing else: no sockets, no sessions,
//! no pools (the session core owns those). A 2026-07-28 client reaching a session-era
//! server runs each request on an upstream session the gateway holds for it; this crate
//! says what that session is opened with and how each message crosses:
//!
//! - [`Request`]: a 2026-07-28 request parsed once — its [`ClientMeta`] (what it declares
//!   per request: capabilities, client info, log level — the state a session-era
//!   `initialize` and `logging/setLevel` carry), whether it is a retry, its fingerprint,
//!   and its session-era form (the reserved `_meta` keys removed).
//! - [`initialize`], [`initialized`], [`set_level`]: the session-era messages the gateway
//!   sends on the client's behalf.
//! - [`discover`]: `server/discover` answered from the upstream's `InitializeResult`.
//! - [`to_modern_answer`]: an upstream response as 2026-07-28 expects it (`resultType`,
//!   `serverInfo` in `_meta`, error codes the revision renamed).
//! - [`input_required`], [`input_answer`]: a server-to-client request as a 2026-07-28
//!   `input_required` result, and the client's answer from its retry back upstream.
//! - [`ListenFilter`], [`acknowledged`], [`for_listener`]: a listen stream on a
//!   session-era session's GET stream and `resources/subscribe`.
//! - [`disposition`]: what happens to a message the upstream sends while it serves a
//!   bridged request (forwarded, dropped, answered by the gateway, or a request for the
//!   client).
//!
//! ## Layout
//! - `meta.rs`: [`Request`], [`ClientMeta`] and the requests the gateway builds from them.
//! - `answer.rs`: discover synthesis and the translation of answers.
//! - `reverse.rs`: the other way round — a session-era client of a 2026-07-28-only
//!   server ([`SessionState`], [`initialize_result`], [`to_modern_request`], [`asked`]).
//! - `params.rs`: `Mcp-Param-*` headers from a tool's `x-mcp-header` annotations.
//! - `route.rs`: [`disposition`] of upstream messages.
//! - `listen.rs`: `subscriptions/listen` on a session-era session ([`ListenFilter`]).
//! - `input.rs`: [`input_required`] from server requests, [`input_answer`] back.
//! - `error.rs`: [`BridgeError`].

mod answer;
mod error;
mod input;
mod listen;
mod meta;
mod params;
mod reverse;
mod route;
#[cfg(test)]
mod test_support;

pub use answer::{discover, server_info, to_modern_answer};
pub use error::BridgeError;
pub use input::{CONSENT_STATE, input_answer, input_required, is_consent_state, may_ask_client};
pub use listen::{ListenFilter, acknowledged, for_listener, listen_ended, subscribe};
pub use meta::{ClientMeta, Request, initialize, initialized, set_level};
pub use params::{Annotations, annotations, param_headers};
pub use reverse::{
    Asked, SessionState, asked, discover_request, initialize_result, retry, server_request,
    to_modern_request,
};
pub use route::{Disposition, disposition};
