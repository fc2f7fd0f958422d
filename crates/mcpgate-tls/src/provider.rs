//! The one crypto provider of the process.

/// The crypto provider every configuration of the process uses.
pub(crate) fn provider() -> rustls::crypto::CryptoProvider {
    rustls::crypto::aws_lc_rs::default_provider()
}
