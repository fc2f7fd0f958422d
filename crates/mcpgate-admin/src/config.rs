//! What the admin listener is configured with.

/// What the admin listener needs besides the session table.
#[derive(Debug, Clone)]
pub struct AdminConfig {
    /// The bearer token every admin request must carry.
    pub token: String,
    /// The effective configuration, secrets already redacted.
    pub redacted_config: serde_json::Value,
    /// TLS on the admin listener (`None`: plain HTTP).
    pub tls: Option<std::sync::Arc<mcpgate_tls::ServerTls>>,
    /// The users' upstream consents (`None`: no vault), listed and revoked here.
    pub grants: Option<std::sync::Arc<mcpgate_oauth::Grants>>,
}
