//! # mcpgate-virtual
//!
//! Virtual servers, as data and pure functions: one MCP server the client sees, made of
//! several configured member servers. This crate owns what that means for the messages —
//! no sockets, no sessions (the upstream crate's `members.rs` does the fan-out, the
//! session crate owns the member sessions):
//!
//! - [`Plan`]: a virtual server's members (each a configured server, its prefix and its
//!   filters), the naming rule, the failure policy and the access rules; built once from
//!   the configuration.
//! - [`View`]: one principal's view of a plan — the rules that apply to it, chosen once
//!   per session, so a request is judged by matching compiled globs only.
//! - Names ([`Plan::expose`], [`Plan::route`]): a member's tool or prompt `name` is
//!   exposed as `{prefix}{separator}{name}`, a resource URI as `{prefix}+{uri}` (always:
//!   whether a URI is unique cannot be known from a page of a list; an MCP App's
//!   `ui://{rest}` as `ui://{prefix}+{rest}`, keeping its scheme), server requests'
//!   ids as `"mcpgate:{member}:{id}"`, list cursors as the members still to page and
//!   their own cursors ([`Cursor`]).
//! - [`catalogue`]: `initialize` and the list methods merged from the members' answers.
//! - [`apps`]: the URIs a tool names beyond its listing's own field (an MCP App's
//!   resource in `_meta`, a result's resource links and embedded resources).
//! - [`rewrite`]: the one-field edits of requests and notifications that carry a name,
//!   URI or id across the boundary.
//!
//! ## Layout
//! - `plan.rs`: [`Plan`], [`MemberPlan`], [`Filter`], [`Patterns`], [`Naming`], [`Failure`],
//!   [`Rule`], [`Effect`].
//! - `access.rs`: how rules apply: [`Who`], [`View`], [`Access`].
//! - `names.rs`: names, URIs, ids and cursors across the boundary.
//! - `catalogue.rs`: merged `initialize` and lists.
//! - `apps.rs`: MCP Apps' and results' URIs.
//! - `rewrite.rs`: edits of a message's params; what a member's message becomes.
//! - `error.rs`: [`VirtualError`].

mod access;
pub mod apps;
pub mod catalogue;
mod error;
mod names;
mod plan;
pub mod rewrite;

pub use access::{Access, View, Who};
pub use error::VirtualError;
pub use names::Cursor;
pub use plan::{Effect, Failure, Filter, Item, MemberPlan, Naming, Patterns, Plan, Rule};

#[cfg(test)]
mod tests;
