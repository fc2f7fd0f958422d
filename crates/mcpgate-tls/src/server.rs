//! TLS on mcpgate's own listeners: a certificate chain and key (PEM), optionally a CA whose
//! client certificates are required (mutual TLS), ALPN `http/1.1`. The files are re-read
//! when they change (checked every `reload_every`) or when [`ServerTls::reload`] is called
//! (SIGHUP), so a renewal by cert-manager or an ACME client is served to the next
//! connection without dropping open ones; a renewal that does not load (unreadable,
//! expired, key mismatch) is refused with a log line and the previous certificate stays.

use std::path::PathBuf;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use rustls::ServerConfig;
use rustls::server::{ClientHello, ResolvesServerCert, WebPkiClientVerifier};
use rustls::sign::CertifiedKey;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tokio_rustls::server::TlsStream;
use tokio_util::sync::CancellationToken;
use tracing::{error, info};

use crate::error::TlsError;
use crate::inspect::{self, CertInfo};
use crate::pem;
use crate::pem::Stamp;
use crate::provider::provider;

/// A listener's TLS files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerOptions {
    /// The certificate chain (PEM; the server certificate first, then intermediates).
    pub cert: PathBuf,
    /// Its private key (PEM).
    pub key: PathBuf,
    /// When set, clients must present a certificate issued by one of these CAs (PEM).
    pub client_ca: Option<PathBuf>,
    /// How often the files are checked for changes.
    pub reload_every: Duration,
}

impl ServerOptions {
    /// Loads and checks the files (what `--check-config` and every reload do).
    pub fn load(&self) -> Result<(Arc<ServerConfig>, CertInfo), TlsError> {
        let (certified, info) = inspect::load_pair(&self.cert, &self.key)?;
        let provider = Arc::new(provider());
        let builder = ServerConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(TlsError::Rustls)?;
        let builder = match &self.client_ca {
            Some(ca) => {
                inspect::check_certs(ca)?;
                let verifier = WebPkiClientVerifier::builder_with_provider(
                    Arc::new(pem::ca_bundle(ca)?),
                    provider,
                )
                .build()
                .map_err(TlsError::ClientCa)?;
                builder.with_client_cert_verifier(verifier)
            }
            None => builder.with_no_client_auth(),
        };
        let mut config = builder.with_cert_resolver(Arc::new(Single(certified)));
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok((Arc::new(config), info))
    }

    fn stamp(&self) -> Stamp {
        let mut paths = vec![&self.cert, &self.key];
        if let Some(ca) = &self.client_ca {
            paths.push(ca);
        }
        Stamp::of(&paths)
    }
}

#[derive(Debug)]
struct Single(Arc<CertifiedKey>);

impl ResolvesServerCert for Single {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.0.clone())
    }
}

/// A listener's live TLS configuration. Each new connection takes the current one; a
/// reload swaps it (connections already open keep theirs).
#[derive(Debug)]
pub struct ServerTls {
    opts: ServerOptions,
    /// Plain locks, held only to clone or swap an `Arc`, never across an `.await`.
    current: RwLock<Arc<ServerConfig>>,
    stamp: Mutex<Stamp>,
    name: &'static str,
}

/// Why a TLS connection was not established.
#[derive(Debug, thiserror::Error)]
pub enum AcceptError {
    /// The client spoke plain HTTP to the TLS port; it was answered 400 and closed.
    #[error("plain HTTP on the TLS port (answered 400)")]
    PlainHttp,
    /// The handshake failed (bad client certificate, unsupported versions, garbage).
    #[error("TLS handshake failed: {0}")]
    Handshake(#[source] std::io::Error),
    /// The configuration lock was poisoned (a reload panicked).
    #[error("TLS handshake refused: the certificate configuration is unavailable")]
    Unavailable,
    /// The handshake did not finish in time.
    #[error("TLS handshake timed out")]
    Timeout,
}

impl ServerTls {
    /// Loads the files; `name` labels log lines (`listen`, `admin`).
    pub fn new(opts: ServerOptions, name: &'static str) -> Result<Arc<ServerTls>, TlsError> {
        let stamp = opts.stamp();
        let (config, info) = opts.load()?;
        info!(listener = name, subject = %info.subject, not_after = %info.not_after, "TLS certificate loaded");
        Ok(Arc::new(ServerTls {
            opts,
            current: RwLock::new(config),
            stamp: Mutex::new(stamp),
            name,
        }))
    }

    /// Re-reads the files if they changed since the last load (or always, with `force`).
    /// Returns whether a new certificate is now served; a failed reload keeps the old one.
    pub fn reload(&self, force: bool) -> Result<bool, TlsError> {
        let stamp = self.opts.stamp();
        let changed = self.stamp.lock().map_or(true, |s| *s != stamp);
        if !changed && !force {
            return Ok(false);
        }
        // Record the stamp first: a broken file is reported once, not at every check.
        if let Ok(mut s) = self.stamp.lock() {
            *s = stamp;
        }
        let (config, info) = self.opts.load()?;
        if let Ok(mut c) = self.current.write() {
            *c = config;
        }
        info!(listener = self.name, subject = %info.subject, not_after = %info.not_after, "TLS certificate reloaded");
        Ok(true)
    }

    /// Checks the files every `reload_every` until `stop` is cancelled.
    pub async fn watch(self: Arc<Self>, stop: CancellationToken) {
        let mut every = tokio::time::interval(self.opts.reload_every);
        every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        every.tick().await;
        loop {
            tokio::select! {
                () = stop.cancelled() => return,
                _ = every.tick() => {}
            }
            if let Err(e) = self.reload(false) {
                error!(listener = self.name, error = %e, "new TLS files refused; still serving the previous certificate");
            }
        }
    }

    /// Runs the TLS handshake on a new connection (bounded by `timeout`). A client that
    /// speaks plain HTTP gets a `400` naming the problem instead of a TLS alert.
    pub async fn accept(
        &self,
        stream: TcpStream,
        timeout: Duration,
    ) -> Result<TlsStream<TcpStream>, AcceptError> {
        let config = self
            .current
            .read()
            .map_err(|_| AcceptError::Unavailable)?
            .clone();
        let work = async {
            let mut first = [0u8; 1];
            let n = stream
                .peek(&mut first)
                .await
                .map_err(AcceptError::Handshake)?;
            // A TLS record starts with its content type (22: handshake); an HTTP request
            // starts with a method in capital letters.
            if n == 1 && first[0].is_ascii_uppercase() {
                let mut s = stream;
                let body = "This port speaks HTTPS: use an https:// URL.\n";
                let resp = format!(
                    "HTTP/1.1 400 Bad Request\r\ncontent-type: text/plain\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = s.write_all(resp.as_bytes()).await;
                let _ = s.shutdown().await;
                return Err(AcceptError::PlainHttp);
            }
            tokio_rustls::TlsAcceptor::from(config)
                .accept(stream)
                .await
                .map_err(AcceptError::Handshake)
        };
        tokio::time::timeout(timeout, work)
            .await
            .map_err(|_| AcceptError::Timeout)?
    }
}
