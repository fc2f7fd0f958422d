//! What a configured server is backed by: one server reached over a transport, or a
//! virtual server's members.

use std::sync::Arc;

use mcpgate_upstream::Target;

/// What serves a configured server's sessions. Comes from configuration, never from a
/// request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Backend {
    /// One server.
    Server(Target),
    /// A virtual server: several configured servers behind one.
    Virtual(Arc<VirtualTarget>),
}

impl Backend {
    /// The one server's target (`None` for a virtual server).
    pub fn target(&self) -> Option<&Target> {
        match self {
            Backend::Server(t) => Some(t),
            Backend::Virtual(_) => None,
        }
    }

    /// Whether this is one Streamable HTTP server.
    pub fn is_http(&self) -> bool {
        matches!(self, Backend::Server(Target::Http { .. }))
    }

    /// Whether this is one stdio server (a process per session).
    pub fn is_stdio(&self) -> bool {
        matches!(self, Backend::Server(Target::Stdio { .. }))
    }
}

impl From<Target> for Backend {
    fn from(t: Target) -> Self {
        Backend::Server(t)
    }
}

/// A virtual server's members, as [`crate::Connector::open`] opens them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VirtualTarget {
    /// Names, filters, rules, failure policy.
    pub plan: Arc<mcpgate_virtual::Plan>,
    /// Where each member lives, in the plan's order.
    pub members: Vec<MemberTarget>,
}

/// One member of a virtual server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberTarget {
    /// Where it lives.
    pub target: Target,
    /// Whether it speaks only MCP 2026-07-28 (reached through the era bridge).
    pub modern: bool,
}
