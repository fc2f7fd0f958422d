//! The virtual-server error type.

/// What can go wrong with a virtual server's plan or its messages.
#[derive(Debug, Clone, thiserror::Error)]
pub enum VirtualError {
    /// The configuration of a virtual server is unusable.
    #[error("{0}")]
    Config(String),
    /// A message is not the JSON its method promises.
    #[error("cannot read the message: {0}")]
    Json(String),
    /// A cursor the gateway did not make (or made for another list).
    #[error("invalid cursor")]
    Cursor,
}
