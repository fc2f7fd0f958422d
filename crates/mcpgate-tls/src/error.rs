//! TLS errors, and what a TLS failure on the wire means in words.

use std::path::PathBuf;

/// Why a TLS configuration could not be built.
#[derive(Debug, Clone, thiserror::Error)]
pub enum TlsError {
    /// A file could not be read.
    #[error("cannot read {path}: {reason}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        reason: String,
    },
    /// A file is not what it should be (no PEM certificate, no private key, bad DER).
    #[error("{path}: {reason}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// The private key does not belong to the certificate.
    #[error("{key} does not match the certificate in {cert}")]
    KeyMismatch {
        /// The certificate file.
        cert: PathBuf,
        /// The key file.
        key: PathBuf,
    },
    /// A certificate is past its `notAfter` date (or before its `notBefore`).
    #[error("{path}: certificate {subject} {state} (valid {not_before} to {not_after})")]
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
    Config(String),
}

/// What a TLS failure met while talking to a server means, for an error message a person
/// can act on: the certificate's issuer is unknown, the name does not match, it expired,
/// the server wants a client certificate, the server does not speak TLS. `None` when `e`
/// (or anything in its source chain) is not a TLS failure.
pub fn describe(e: &(dyn std::error::Error + 'static)) -> Option<String> {
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = cur {
        if let Some(r) = err.downcast_ref::<rustls::Error>() {
            return Some(describe_rustls(r));
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

fn describe_rustls(e: &rustls::Error) -> String {
    use rustls::{AlertDescription as A, CertificateError as C, Error as E};
    match e {
        E::InvalidCertificate(c) => match c {
            C::UnknownIssuer => "TLS: the server's certificate has an unknown issuer (not signed by a trusted CA; add the CA with ca_file)".into(),
            C::NotValidForName | C::NotValidForNameContext { .. } => {
                format!("TLS: hostname mismatch: {c}")
            }
            C::Expired | C::ExpiredContext { .. } => format!("TLS: the server's certificate expired: {c}"),
            C::NotValidYet | C::NotValidYetContext { .. } => {
                format!("TLS: the server's certificate is not valid yet: {c}")
            }
            other => format!("TLS: invalid server certificate: {other}"),
        },
        E::AlertReceived(a @ (A::CertificateRequired | A::HandshakeFailure | A::BadCertificate | A::UnknownCA | A::AccessDenied)) => {
            format!("TLS handshake failed: the server sent alert {a:?} (it may require a client certificate: set client_cert and client_key)")
        }
        E::AlertReceived(a) => format!("TLS handshake failed: the server sent alert {a:?}"),
        E::InvalidMessage(_) | E::InappropriateHandshakeMessage { .. } | E::InappropriateMessage { .. } => {
            format!("TLS handshake failed: the server does not speak TLS here ({e}); is the URL meant to be http://?")
        }
        E::NoCertificatesPresented => "TLS handshake failed: no certificate presented".into(),
        other => format!("TLS handshake failed: {other}"),
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
        let d = describe(&outer).unwrap();
        assert!(d.contains("unknown issuer"), "{d}");
        let alert = std::io::Error::other(rustls::Error::AlertReceived(
            rustls::AlertDescription::CertificateRequired,
        ));
        assert!(describe(&alert).unwrap().contains("client certificate"));
        assert!(describe(&std::io::Error::other("plain")).is_none());
    }
}
