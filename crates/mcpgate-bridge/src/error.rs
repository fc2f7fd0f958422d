//! The bridge's error type.

/// What can go wrong translating a message between the eras.
#[derive(Debug, thiserror::Error)]
pub enum BridgeError {
    /// The message is not the JSON object its envelope promised.
    #[error("cannot translate the message: {0}")]
    Json(String),
    /// The upstream's `initialize` answer is not a result.
    #[error("the upstream refused initialize: {0}")]
    Refused(String),
}
