//! TLS toward servers (upstreams, identity providers): rustls with certificate and hostname
//! verification, the platform's trust store plus optional extra CAs, and an optional
//! client certificate for mutual TLS. SNI is taken from the URL by the HTTP client.
//!
//! Trust store: the platform's (`rustls-native-certs`: the distribution's CA bundle, or
//! `SSL_CERT_FILE` / `SSL_CERT_DIR`), because that is what operators manage — a corporate
//! CA installed on the host or in the image is trusted without mcpgate-specific steps.
//! Only when the platform has no CA bundle at all (a `scratch` or distroless image without
//! `ca-certificates`) the Mozilla roots compiled into mcpgate (`webpki-roots`) are used,
//! with a warning, so such an image still reaches public servers.

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};
use tracing::{debug, warn};

use crate::error::TlsError;
use crate::provider::provider;
use crate::{inspect, pem};

/// How to verify servers and identify to them. Paths come from configuration.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct ClientOptions {
    /// Extra CA certificates (PEM bundle) trusted besides the platform's.
    pub ca_file: Option<PathBuf>,
    /// A client certificate chain (PEM) for servers that require mutual TLS.
    pub client_cert: Option<PathBuf>,
    /// The client certificate's private key (PEM).
    pub client_key: Option<PathBuf>,
    /// Accept any server certificate. Only for tests against throwaway servers: the
    /// connection is then open to interception. Logged at every start.
    pub dangerously_accept_invalid_certs: bool,
}

impl ClientOptions {
    /// Checks every file the options name (readable, parses, within validity, the key
    /// matches the certificate) without building anything.
    pub fn check(&self) -> Result<(), TlsError> {
        self.build().map(drop)
    }

    /// The rustls configuration for these options.
    pub fn build(&self) -> Result<Arc<ClientConfig>, TlsError> {
        let builder = ClientConfig::builder_with_provider(Arc::new(provider()))
            .with_safe_default_protocol_versions()
            .map_err(TlsError::Rustls)?;
        let builder = if self.dangerously_accept_invalid_certs {
            builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(AcceptAny))
        } else {
            let mut roots = platform_roots().clone();
            if let Some(ca) = &self.ca_file {
                inspect::check_certs(ca)?;
                for c in pem::ca_bundle(ca)?.roots {
                    roots.roots.push(c);
                }
            }
            builder.with_root_certificates(roots)
        };
        let config = match (&self.client_cert, &self.client_key) {
            (Some(cert), Some(key)) => {
                let (certified, _) = inspect::load_pair(cert, key)?;
                builder
                    .with_client_auth_cert(certified.cert.clone(), pem::key(key)?)
                    .map_err(TlsError::Rustls)?
            }
            (None, None) => builder.with_no_client_auth(),
            _ => {
                return Err(TlsError::HalfIdentity);
            }
        };
        Ok(Arc::new(config))
    }
}

/// The platform's CA certificates, loaded once per process (see the module docs).
pub fn platform_roots() -> &'static RootCertStore {
    static ROOTS: OnceLock<RootCertStore> = OnceLock::new();
    ROOTS.get_or_init(|| {
        let found = rustls_native_certs::load_native_certs();
        for e in &found.errors {
            debug!(error = %e, "a platform CA certificate could not be loaded");
        }
        let mut store = RootCertStore::empty();
        let (added, _) = store.add_parsable_certificates(found.certs);
        if added == 0 {
            warn!(
                "no CA certificates found on this system (install ca-certificates, or set SSL_CERT_FILE); using the Mozilla roots built into mcpgate"
            );
            store.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
        } else {
            debug!(certificates = added, "loaded the platform's CA certificates");
        }
        store
    })
}

/// The `dangerously_accept_invalid_certs` verifier: any certificate is accepted, but the
/// handshake signatures are still checked (so the peer holds the key of what it sent).
#[derive(Debug)]
struct AcceptAny;

impl ServerCertVerifier for AcceptAny {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &provider().signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &provider().signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        provider()
            .signature_verification_algorithms
            .supported_schemes()
    }
}
