//! The bridge's error type.

/// What can go wrong translating a message between the eras.
#[derive(Debug, thiserror::Error)]
pub enum BridgeError {
    /// The message is not the JSON its envelope promised.
    #[error("cannot translate the message: it is not valid JSON: {0}")]
    Json(#[from] serde_json::Error),
    /// The message (or its `params`) is not a JSON object.
    #[error("cannot translate the message: its {0} is not a JSON object")]
    NotAnObject(&'static str),
    /// The translated message is not a JSON-RPC message.
    #[error("cannot translate the message: {0}")]
    Message(#[from] mcpgate_jsonrpc::ParseError),
    /// The upstream answered with an error where a result was needed.
    #[error("the upstream refused: {message}")]
    Refused {
        /// The upstream's error message.
        message: String,
    },
}
