//! The virtual-server error type.

/// What can go wrong with a virtual server's plan or its messages.
#[derive(Debug, thiserror::Error)]
pub enum VirtualError {
    /// A virtual server without members.
    #[error("virtual {name:?}: needs at least one member")]
    NoMembers {
        /// The virtual server.
        name: String,
    },
    /// An empty separator (names would not be reversible).
    #[error("virtual {name:?}: separator must not be empty")]
    EmptySeparator {
        /// The virtual server.
        name: String,
    },
    /// A prefix that cannot start a URI scheme.
    #[error(
        "virtual {name:?}: member {server:?}: prefix {prefix:?} must start with a letter and use only letters, digits and '-' (it also prefixes URIs as a scheme)"
    )]
    BadPrefix {
        /// The virtual server.
        name: String,
        /// The member's server.
        server: String,
        /// The prefix.
        prefix: String,
    },
    /// A prefix that contains the separator.
    #[error(
        "virtual {name:?}: member {server:?}: prefix {prefix:?} contains the separator {separator:?}"
    )]
    PrefixHasSeparator {
        /// The virtual server.
        name: String,
        /// The member's server.
        server: String,
        /// The prefix.
        prefix: String,
        /// The separator.
        separator: String,
    },
    /// Two members with one prefix.
    #[error("virtual {name:?}: prefix {prefix:?} is used by two members")]
    SharedPrefix {
        /// The virtual server.
        name: String,
        /// The prefix.
        prefix: String,
    },
    /// A filter or rule pattern that is not a glob.
    #[error("{at}: pattern {pattern:?}: {source}")]
    Glob {
        /// The setting it is in.
        at: String,
        /// The pattern.
        pattern: String,
        /// Why it does not compile.
        source: globset::Error,
    },
    /// A set of patterns that does not compile together.
    #[error("{at}: {source}")]
    Globs {
        /// The setting they are in.
        at: String,
        /// Why they do not compile.
        source: globset::Error,
    },
    /// A message is not the JSON its method promises.
    #[error("cannot read the message: {0}")]
    Json(#[from] serde_json::Error),
    /// A rewritten message is not a JSON-RPC message.
    #[error("cannot rewrite the message: {0}")]
    Message(#[from] mcpgate_jsonrpc::ParseError),
    /// A response where a request or notification was expected.
    #[error("cannot rewrite the message: it is not a request or notification")]
    NotARequest,
    /// A cursor the gateway did not make (or made for another list).
    #[error("invalid cursor")]
    Cursor,
}
