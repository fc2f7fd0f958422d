//! A throwaway PKI made at test time (rcgen): a test CA; server certificates for
//! `localhost`/`127.0.0.1` (valid, expired, for another name); a client certificate; all
//! written as PEM files into a temporary folder.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose, SanType,
};

/// A certificate and key as PEM files.
#[derive(Debug, Clone)]
pub struct CertFiles {
    /// The certificate (chain) file.
    pub cert: PathBuf,
    /// The private key file.
    pub key: PathBuf,
}

/// The test CA and the certificates the TLS tests use.
pub struct Pki {
    dir: PathBuf,
    issuer: Issuer<'static, KeyPair>,
    /// The CA certificate (PEM), what `ca_file` and `NODE_EXTRA_CA_CERTS` name.
    pub ca: PathBuf,
    /// `localhost`, `127.0.0.1`, valid now.
    pub server: CertFiles,
    /// `localhost`, `127.0.0.1`, expired yesterday.
    pub expired: CertFiles,
    /// Valid, but for `other.invalid` only.
    pub other_name: CertFiles,
    /// A client certificate issued by the CA (for mutual TLS).
    pub client: CertFiles,
}

impl std::fmt::Debug for Pki {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pki").field("dir", &self.dir).finish()
    }
}

impl Drop for Pki {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn days(n: i64) -> time::OffsetDateTime {
    time::OffsetDateTime::now_utc() + time::Duration::days(n)
}

impl Pki {
    /// Makes the CA and every certificate in a new temporary folder.
    pub fn new() -> Pki {
        static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("mcpgate-pki-{}-{n}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
        ca.distinguished_name
            .push(DnType::CommonName, "mcpgate test CA");
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        ca.not_before = days(-30);
        ca.not_after = days(365);
        let ca_key = KeyPair::generate().unwrap();
        let ca_cert = ca.self_signed(&ca_key).unwrap();
        let ca_path = dir.join("ca.pem");
        std::fs::write(&ca_path, ca_cert.pem()).unwrap();
        let issuer = Issuer::new(ca, ca_key);
        let mut pki = Pki {
            dir: dir.clone(),
            issuer,
            ca: ca_path,
            server: CertFiles {
                cert: PathBuf::new(),
                key: PathBuf::new(),
            },
            expired: CertFiles {
                cert: PathBuf::new(),
                key: PathBuf::new(),
            },
            other_name: CertFiles {
                cert: PathBuf::new(),
                key: PathBuf::new(),
            },
            client: CertFiles {
                cert: PathBuf::new(),
                key: PathBuf::new(),
            },
        };
        pki.server = pki.issue("server", &["localhost", "127.0.0.1"], -1, 30);
        pki.expired = pki.issue("expired", &["localhost", "127.0.0.1"], -30, -1);
        pki.other_name = pki.issue("other", &["other.invalid"], -1, 30);
        pki.client = pki.issue_client("client", "test-client");
        pki
    }

    /// The folder holding the files.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// A server certificate for `names` (DNS names or IP addresses), valid from
    /// `from_days` to `to_days` relative to now, signed by the CA, as files `{name}.pem`
    /// and `{name}-key.pem`.
    pub fn issue(&self, name: &str, names: &[&str], from_days: i64, to_days: i64) -> CertFiles {
        let mut p = CertificateParams::new(Vec::<String>::new()).unwrap();
        p.distinguished_name.push(DnType::CommonName, names[0]);
        p.subject_alt_names = names
            .iter()
            .map(|n| match n.parse::<std::net::IpAddr>() {
                Ok(ip) => SanType::IpAddress(ip),
                Err(_) => SanType::DnsName((*n).try_into().unwrap()),
            })
            .collect();
        p.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        p.not_before = days(from_days);
        p.not_after = days(to_days);
        self.write(name, p)
    }

    fn issue_client(&self, name: &str, cn: &str) -> CertFiles {
        let mut p = CertificateParams::new(Vec::<String>::new()).unwrap();
        p.distinguished_name.push(DnType::CommonName, cn);
        p.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        p.not_before = days(-1);
        p.not_after = days(30);
        self.write(name, p)
    }

    fn write(&self, name: &str, p: CertificateParams) -> CertFiles {
        let key = KeyPair::generate().unwrap();
        let cert = p.signed_by(&key, &self.issuer).unwrap();
        let files = CertFiles {
            cert: self.dir.join(format!("{name}.pem")),
            key: self.dir.join(format!("{name}-key.pem")),
        };
        std::fs::write(&files.cert, cert.pem()).unwrap();
        std::fs::write(&files.key, key.serialize_pem()).unwrap();
        files
    }

    /// A rustls server configuration serving `files` (optionally requiring client
    /// certificates from this CA), for the testkit's HTTPS mode.
    pub fn server_config(&self, files: &CertFiles, mtls: bool) -> Arc<rustls::ServerConfig> {
        mcpgate_testkit::tls_config(&files.cert, &files.key, mtls.then_some(self.ca.as_path()))
            .unwrap()
    }

    /// A reqwest client that trusts this CA only.
    pub fn client(&self) -> reqwest::Client {
        let ca = reqwest::Certificate::from_pem(&std::fs::read(&self.ca).unwrap()).unwrap();
        reqwest::Client::builder()
            .tls_certs_only([ca])
            .build()
            .unwrap()
    }
}

impl Default for Pki {
    fn default() -> Self {
        Pki::new()
    }
}
