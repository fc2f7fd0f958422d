//! HTTPS for the test server: a rustls configuration from PEM files, optionally requiring
//! client certificates (mutual TLS). Validity dates are not checked here, on purpose: the
//! tests serve expired certificates to see what the gateway says about them.

use std::path::Path;
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

fn invalid(what: &Path, e: impl std::fmt::Display) -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::InvalidData,
        format!("{}: {e}", what.display()),
    )
}

/// A server configuration: `cert` (chain) and `key` (PEM); with `client_ca`, clients must
/// present a certificate issued by it.
pub fn tls_config(
    cert: &Path,
    key: &Path,
    client_ca: Option<&Path>,
) -> std::io::Result<Arc<rustls::ServerConfig>> {
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
        .map_err(|e| invalid(cert, e))?
        .collect::<Result<_, _>>()
        .map_err(|e| invalid(cert, e))?;
    let key_der = PrivateKeyDer::from_pem_file(key).map_err(|e| invalid(key, e))?;
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| invalid(cert, e))?;
    let builder = match client_ca {
        Some(ca) => {
            let mut roots = rustls::RootCertStore::empty();
            for c in CertificateDer::pem_file_iter(ca).map_err(|e| invalid(ca, e))? {
                roots
                    .add(c.map_err(|e| invalid(ca, e))?)
                    .map_err(|e| invalid(ca, e))?;
            }
            let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
                Arc::new(roots),
                provider,
            )
            .build()
            .map_err(|e| invalid(ca, e))?;
            builder.with_client_cert_verifier(verifier)
        }
        None => builder.with_no_client_auth(),
    };
    let mut config = builder
        .with_single_cert(chain, key_der)
        .map_err(|e| invalid(key, e))?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}
