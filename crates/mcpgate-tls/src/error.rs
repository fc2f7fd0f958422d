//! TLS errors, and what a TLS failure on the wire means in words.

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;

/// Why a TLS configuration could not be built.
#[derive(Debug, Clone, thiserror::Error)]
pub enum TlsError {
    /// A file could not be read.
    #[error("cannot read {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: Arc<std::io::Error>,
    },
    /// A file is not what it should be (no PEM certificate, no private key, bad DER).
    #[error("{}: {problem}", path.display())]
    File {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        #[source]
        problem: FileProblem,
    },
    /// The private key does not belong to the certificate.
    #[error("{} does not match the certificate in {}", key.display(), cert.display())]
    KeyMismatch {
        /// The certificate file.
        cert: PathBuf,
        /// The key file.
        key: PathBuf,
    },
    /// A certificate is past its `notAfter` date (or before its `notBefore`).
    #[error("{}: certificate {subject} {state} (valid {not_before} to {not_after})", path.display())]
    Validity {
        /// The file.
        path: PathBuf,
        /// The certificate's subject.
        subject: String,
        /// "expired on …" or "is not valid before …".
        state: String,
        /// Start of validity (RFC 3339).
        not_before: String,
        /// End of validity (RFC 3339).
        not_after: String,
    },
    /// rustls refused the configuration.
    #[error("TLS configuration: {0}")]
    Rustls(#[source] rustls::Error),
    /// The CA that verifies client certificates is unusable.
    #[error("client_ca: {0}")]
    ClientCa(#[source] rustls::server::VerifierBuilderError),
    /// An HTTP client could not take the TLS configuration.
    #[error("the HTTP client cannot use the TLS configuration: {0}")]
    Client(#[source] Arc<dyn std::error::Error + Send + Sync>),
    /// Only one of a certificate and its key was given.
    #[error("TLS configuration: client_cert and client_key go together")]
    HalfIdentity,
}

/// What is wrong with a certificate or key file.
#[derive(Debug, Clone, thiserror::Error)]
pub enum FileProblem {
    /// Not a PEM file of certificates.
    #[error("not a PEM certificate file: {0}")]
    NotPem(#[source] Arc<rustls::pki_types::pem::Error>),
    /// A PEM file without a certificate in it.
    #[error("no PEM certificate (-----BEGIN CERTIFICATE-----) in the file")]
    NoCertificate,
    /// A PEM file without a private key in it.
    #[error("no PEM private key in the file: {0}")]
    NoKey(#[source] Arc<rustls::pki_types::pem::Error>),
    /// A certificate rustls cannot use as a CA.
    #[error("not a usable CA certificate: {0}")]
    NotCa(#[source] rustls::Error),
    /// Not DER-encoded X.509.
    #[error("not an X.509 certificate: {0}")]
    NotX509(#[source] x509_parser::nom::Err<x509_parser::error::X509Error>),
    /// The file holds no certificate.
    #[error("no certificate")]
    Empty,
    /// A private key rustls cannot use.
    #[error("unusable private key: {0}")]
    UnusableKey(#[source] rustls::Error),
}

/// A TLS failure met while talking to a server, said so that a person can act on it: the
/// certificate's issuer is unknown, the name does not match, it expired, the server wants
/// a client certificate, the server does not speak TLS.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{}", Sentence(.0))]
pub struct TlsFailure(#[source] pub rustls::Error);

/// The TLS failure in `e` (or anywhere in its source chain), if there is one.
pub fn describe(e: &(dyn std::error::Error + 'static)) -> Option<TlsFailure> {
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = cur {
        if let Some(r) = err.downcast_ref::<rustls::Error>() {
            return Some(TlsFailure(r.clone()));
        }
        // tokio-rustls reports rustls errors as an io::Error with the rustls error inside
        // (and hyper-rustls wraps that io::Error in another); io::Error's own `source()`
        // skips the error it holds, so step into it directly.
        if let Some(inner) = err
            .downcast_ref::<std::io::Error>()
            .and_then(std::io::Error::get_ref)
        {
            cur = Some(inner as &(dyn std::error::Error + 'static));
            continue;
        }
        cur = err.source();
    }
    None
}

/// A rustls error as a sentence that names the cause and the fix.
struct Sentence<'a>(&'a rustls::Error);

impl fmt::Display for Sentence<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use rustls::{AlertDescription as A, Error as E};
        match self.0 {
            E::InvalidCertificate(c) => certificate(c, f),
            E::AlertReceived(
                a @ (A::CertificateRequired
                | A::HandshakeFailure
                | A::BadCertificate
                | A::UnknownCA
                | A::AccessDenied),
            ) => write!(
                f,
                "TLS handshake failed: the server sent alert {a:?} (it may require a client certificate: set client_cert and client_key)"
            ),
            E::AlertReceived(a) => write!(f, "TLS handshake failed: the server sent alert {a:?}"),
            e @ (E::InvalidMessage(_)
            | E::InappropriateHandshakeMessage { .. }
            | E::InappropriateMessage { .. }) => write!(
                f,
                "TLS handshake failed: the server does not speak TLS here ({e}); is the URL meant to be http://?"
            ),
            E::NoCertificatesPresented => {
                f.write_str("TLS handshake failed: no certificate presented")
            }
            other => write!(f, "TLS handshake failed: {other}"),
        }
    }
}

/// What is wrong with the server's certificate, and what to do about it.
fn certificate(c: &rustls::CertificateError, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    use rustls::CertificateError as C;
    match c {
        C::UnknownIssuer => f.write_str(
            "TLS: the server's certificate has an unknown issuer (not signed by a trusted CA; add the CA with ca_file)",
        ),
        C::NotValidForName | C::NotValidForNameContext { .. } => {
            write!(f, "TLS: hostname mismatch: {c}")
        }
        C::Expired | C::ExpiredContext { .. } => {
            write!(f, "TLS: the server's certificate expired: {c}")
        }
        C::NotValidYet | C::NotValidYetContext { .. } => {
            write!(f, "TLS: the server's certificate is not valid yet: {c}")
        }
        C::BadSignature => f.write_str(
            "TLS: the signature on the server's certificate does not verify (a certificate altered, or signed by another key than its issuer's)",
        ),
        C::Revoked => f.write_str("TLS: the server's certificate has been revoked"),
        C::Other(other) => match other.0.downcast_ref::<webpki::Error>() {
            Some(w) => webpki_problem(w, f),
            None => write!(f, "TLS: the server's certificate is not acceptable: {other}"),
        },
        other => write!(f, "TLS: the server's certificate is not acceptable: {other}"),
    }
}

/// The certificate problems webpki reports that rustls has no variant of.
fn webpki_problem(e: &webpki::Error, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    use webpki::Error as W;
    match e {
        W::CaUsedAsEndEntity => f.write_str(
            "TLS: the server presents a CA certificate as its own certificate; give the server a certificate signed by that CA (a leaf, without the CA flag), and trust the CA with ca_file",
        ),
        W::EndEntityUsedAsCa => f.write_str(
            "TLS: the server's certificate chain uses a leaf certificate as a CA; the chain must be issued by a CA certificate",
        ),
        W::RequiredEkuNotFoundContext(_) => f.write_str(
            "TLS: the server's certificate is not meant for TLS servers (its extended key usage lacks serverAuth)",
        ),
        W::PathLenConstraintViolated | W::MaximumPathDepthExceeded => f.write_str(
            "TLS: the server's certificate chain is longer than its CA allows",
        ),
        other => write!(f, "TLS: the server's certificate is not acceptable: {other}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_a_rustls_error_inside_nested_io_errors() {
        // hyper-rustls: io::Error(io::Error(rustls::Error)), under hyper-util's and
        // reqwest's own errors.
        let tls = rustls::Error::InvalidCertificate(rustls::CertificateError::UnknownIssuer);
        let inner = std::io::Error::new(std::io::ErrorKind::InvalidData, tls);
        let outer = std::io::Error::other(inner);
        let d = describe(&outer).unwrap().to_string();
        assert!(d.contains("unknown issuer"), "{d}");
        let alert = std::io::Error::other(rustls::Error::AlertReceived(
            rustls::AlertDescription::CertificateRequired,
        ));
        assert!(
            describe(&alert)
                .unwrap()
                .to_string()
                .contains("client certificate")
        );
        assert!(describe(&std::io::Error::other("plain")).is_none());
    }

    #[test]
    fn a_ca_certificate_as_the_servers_own_is_named_with_the_fix() {
        let e = rustls::Error::InvalidCertificate(rustls::CertificateError::Other(
            rustls::OtherError(Arc::new(webpki::Error::CaUsedAsEndEntity)),
        ));
        let d = TlsFailure(e).to_string();
        assert!(d.contains("CA certificate as its own"), "{d}");
        assert!(d.contains("ca_file"), "{d}");
        assert!(!d.contains("OtherError"), "{d}");
    }
}
