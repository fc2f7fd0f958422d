//! # mcpgate-jsonrpc
//!
//! The wire vocabulary every other mcpgate crate speaks, and nothing else: no sockets,
//! no sessions.
//!
//! - [`Message`]: a JSON-RPC 2.0 message of which only the *envelope* (`id`, `method`,
//!   and whether it is a request, notification or response) is parsed. The original bytes
//!   are kept and forwarded verbatim; `params`, `result` and `error` are never
//!   re-serialised on the fast path.
//! - [`Id`]: a request id, kept as its raw JSON text so it round-trips exactly.
//! - [`error`]: JSON-RPC error codes (standard and gateway-defined) and error bodies.
//! - [`mcp`]: MCP header names and protocol versions (both eras).
//! - [`modern`]: the MCP 2026-07-28 per-request envelope and the check of its mirrored
//!   headers.
//! - [`sse`]: Server-Sent Events framing of messages for the client side.
//!
//! ## Layout
//! - `message.rs`: envelope parsing, id rewriting, `_meta.progressToken` lookup.
//! - `method.rs`: [`Method`], every method name the gateway treats in a way of its own.
//! - `error.rs`: error codes, [`JsonRpcError`], error body builder.
//! - `mcp.rs`: header names, supported protocol versions.
//! - `modern.rs`: 2026-07-28 `_meta` fields, `Mcp-Method`/`Mcp-Name` checks, `-32022`.
//! - `sse.rs`: SSE event encoding (decoding is done with the `sse-stream` crate where bytes
//!   arrive).

pub mod error;
mod id;
pub mod mcp;
mod message;
mod method;
pub mod modern;
mod rpc_error;
pub mod sse;

pub use error::ParseError;
pub use id::Id;
pub use message::{Incoming, Kind, Message};
pub use method::Method;
pub use rpc_error::{JsonRpcError, cancelled, result_body};
