//! PEM files: certificate chains, private keys, CA bundles; and the file facts that tell
//! a reloader a file changed.

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

use crate::error::{FileProblem, TlsError};

fn read(path: &Path) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path).map_err(|e| TlsError::Read {
        path: path.to_owned(),
        source: std::sync::Arc::new(e),
    })
}

/// Every certificate in a PEM file, in order (a chain: the end-entity certificate first).
pub(crate) fn certs(path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let bytes = read(path)?;
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(&bytes)
        .collect::<Result<_, _>>()
        .map_err(|e| TlsError::File {
            path: path.to_owned(),
            problem: FileProblem::NotPem(std::sync::Arc::new(e)),
        })?;
    if certs.is_empty() {
        return Err(TlsError::File {
            path: path.to_owned(),
            problem: FileProblem::NoCertificate,
        });
    }
    Ok(certs)
}

/// The private key in a PEM file (PKCS#8, PKCS#1 or SEC1).
pub(crate) fn key(path: &Path) -> Result<PrivateKeyDer<'static>, TlsError> {
    let bytes = read(path)?;
    PrivateKeyDer::from_pem_slice(&bytes).map_err(|e| TlsError::File {
        path: path.to_owned(),
        problem: FileProblem::NoKey(std::sync::Arc::new(e)),
    })
}

/// A root store with every certificate of a PEM bundle.
pub(crate) fn ca_bundle(path: &Path) -> Result<rustls::RootCertStore, TlsError> {
    let mut store = rustls::RootCertStore::empty();
    for c in certs(path)? {
        store.add(c).map_err(|e| TlsError::File {
            path: path.to_owned(),
            problem: FileProblem::NotCa(e),
        })?;
    }
    Ok(store)
}

/// What a reloader compares to notice that a file changed: modification time, size and
/// inode (a Kubernetes secret volume swaps a symlink; the target's inode changes).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Stamp(Vec<Option<(SystemTime, u64, u64)>>);

impl Stamp {
    pub(crate) fn of(paths: &[&PathBuf]) -> Stamp {
        use std::os::unix::fs::MetadataExt;
        Stamp(
            paths
                .iter()
                .map(|p| {
                    let m = std::fs::metadata(p).ok()?;
                    Some((m.modified().ok()?, m.len(), m.ino()))
                })
                .collect(),
        )
    }
}
