//! Checking certificate files before they are used: every certificate parses and is within
//! its validity period, and a private key belongs to its certificate. `--check-config`,
//! the start of the gateway and every reload run these checks, so an expired or mismatched
//! file is reported with its path and dates instead of failing handshakes later.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use rustls::pki_types::CertificateDer;
use rustls::sign::CertifiedKey;

use crate::error::TlsError;
use crate::pem;
use crate::provider::provider;

/// What a certificate file holds, for logs and `--check-config`.
#[derive(Debug, Clone)]
pub struct CertInfo {
    /// The first certificate's subject (`CN=…`).
    pub subject: String,
    /// The first certificate's `notAfter`.
    pub not_after: String,
    /// Time left until the earliest `notAfter` in the file.
    pub remaining: Duration,
}

/// Checks every certificate in `certs` (from `path`) for its validity period at `now`.
fn check_validity(
    path: &Path,
    certs: &[CertificateDer<'_>],
    now: SystemTime,
) -> Result<CertInfo, TlsError> {
    let now_s = now
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX));
    let mut first: Option<CertInfo> = None;
    let mut remaining = i64::MAX;
    for der in certs {
        let (_, cert) = x509_parser::parse_x509_certificate(der).map_err(|e| TlsError::File {
            path: path.to_owned(),
            problem: crate::error::FileProblem::NotX509(e),
        })?;
        let v = cert.validity();
        let subject = cert.subject().to_string();
        let (nb, na) = (v.not_before.timestamp(), v.not_after.timestamp());
        let state = if now_s > na {
            Some(format!("expired on {}", v.not_after))
        } else if now_s < nb {
            Some(format!("is not valid before {}", v.not_before))
        } else {
            None
        };
        if let Some(state) = state {
            return Err(TlsError::Validity {
                path: path.to_owned(),
                subject,
                state,
                not_before: v.not_before.to_string(),
                not_after: v.not_after.to_string(),
            });
        }
        remaining = remaining.min(na - now_s);
        if first.is_none() {
            first = Some(CertInfo {
                subject,
                not_after: v.not_after.to_string(),
                remaining: Duration::ZERO,
            });
        }
    }
    let mut info = first.ok_or_else(|| TlsError::File {
        path: path.to_owned(),
        problem: crate::error::FileProblem::Empty,
    })?;
    info.remaining = Duration::from_secs(u64::try_from(remaining).unwrap_or(0));
    Ok(info)
}

/// Checks a certificate file (a chain or a CA bundle): readable, PEM, X.509, every
/// certificate within its validity period now.
pub fn check_certs(path: &Path) -> Result<CertInfo, TlsError> {
    let certs = pem::certs(path)?;
    check_validity(path, &certs, SystemTime::now())
}

/// A certificate chain and its private key, loaded and checked: both parse, the chain is
/// valid now, and the key belongs to the first certificate.
pub fn load_pair(cert: &Path, key: &Path) -> Result<(Arc<CertifiedKey>, CertInfo), TlsError> {
    let chain = pem::certs(cert)?;
    let info = check_validity(cert, &chain, SystemTime::now())?;
    let key_der = pem::key(key)?;
    let certified = CertifiedKey::from_der(chain, key_der, &provider()).map_err(|e| match e {
        rustls::Error::InconsistentKeys(_) => TlsError::KeyMismatch {
            cert: cert.to_owned(),
            key: key.to_owned(),
        },
        other => TlsError::File {
            path: key.to_owned(),
            problem: crate::error::FileProblem::UnusableKey(other),
        },
    })?;
    Ok((Arc::new(certified), info))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, name: &str, text: &str) -> std::path::PathBuf {
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        p
    }

    fn dir() -> std::path::PathBuf {
        static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let d = std::env::temp_dir().join(format!("mcpgate-tls-{}-{n}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    fn cert(days_from: i64, days_to: i64) -> rcgen::CertifiedKey<rcgen::KeyPair> {
        let mut p = rcgen::CertificateParams::new(vec!["localhost".into()]).unwrap();
        let base = time::OffsetDateTime::now_utc();
        p.not_before = base + time::Duration::days(days_from);
        p.not_after = base + time::Duration::days(days_to);
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = p.self_signed(&key).unwrap();
        rcgen::CertifiedKey {
            cert,
            signing_key: key,
        }
    }

    #[test]
    fn valid_pair_loads() {
        let d = dir();
        let c = cert(-1, 30);
        let cp = write(&d, "c.pem", &c.cert.pem());
        let kp = write(&d, "k.pem", &c.signing_key.serialize_pem());
        let (_, info) = load_pair(&cp, &kp).unwrap();
        assert!(!info.subject.is_empty());
        assert!(info.remaining > Duration::from_secs(29 * 86400));
    }

    #[test]
    fn expired_mismatched_and_garbage_are_refused_with_the_reason() {
        let d = dir();
        let old = cert(-30, -1);
        let cp = write(&d, "old.pem", &old.cert.pem());
        let kp = write(&d, "oldk.pem", &old.signing_key.serialize_pem());
        let e = load_pair(&cp, &kp).unwrap_err().to_string();
        assert!(e.contains("expired on"), "{e}");
        let a = cert(-1, 30);
        let b = cert(-1, 30);
        let ap = write(&d, "a.pem", &a.cert.pem());
        let bk = write(&d, "bk.pem", &b.signing_key.serialize_pem());
        assert!(matches!(
            load_pair(&ap, &bk),
            Err(TlsError::KeyMismatch { .. })
        ));
        let junk = write(&d, "junk.pem", "hello\n");
        assert!(matches!(check_certs(&junk), Err(TlsError::File { .. })));
        let missing = d.join("nope.pem");
        assert!(matches!(check_certs(&missing), Err(TlsError::Read { .. })));
        let future = cert(2, 30);
        let fp = write(&d, "future.pem", &future.cert.pem());
        let e = check_certs(&fp).unwrap_err().to_string();
        assert!(e.contains("not valid before"), "{e}");
    }
}
