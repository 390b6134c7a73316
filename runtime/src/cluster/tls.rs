//! TLS between the head and its nodes, with certificates from files: every peer shows a certificate the cluster's
//! CA signed (mutual TLS), so a peer without one is refused in the TLS handshake, before the cookie is checked; and
//! what crosses the link — the run's grant key among it — is encrypted.
//!
//! A node serves TLS on its `--listen` address ([`Tls::acceptor`]); the head connects to it with its own certificate
//! ([`Tls::connector`]), checking the node's against the CA and the node's address (an IP address or a DNS name in
//! the certificate's subject alternative names).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use tokio_rustls::{TlsAcceptor, TlsConnector};

/// Where a process's TLS material is: its certificate chain and key, and the CA certificate(s) its peers' must chain
/// to (PEM files; `lessrt node`/`lessrt run --tls-cert --tls-key --tls-ca`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    /// This process's certificate (chain), PEM.
    pub cert: PathBuf,
    /// Its private key, PEM (PKCS#8, PKCS#1 or SEC1).
    pub key: PathBuf,
    /// The cluster's CA certificate(s), PEM: a peer's certificate must chain to one.
    pub ca: PathBuf,
}

/// A process's TLS configuration for the cluster link, both ends (a node accepts, the head connects).
#[derive(Clone)]
pub struct Tls {
    acceptor: TlsAcceptor,
    connector: TlsConnector,
}

impl std::fmt::Debug for Tls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Tls { .. }")
    }
}

fn read(path: &Path, what: &str) -> Result<Vec<u8>, String> {
    std::fs::read(path).map_err(|e| format!("cannot read the TLS {what} {}: {e}", path.display()))
}

fn certificates(path: &Path, what: &str) -> Result<Vec<CertificateDer<'static>>, String> {
    let pem = read(path, what)?;
    let certs = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("the TLS {what} {} is not PEM certificates: {e}", path.display()))?;
    if certs.is_empty() {
        return Err(format!("the TLS {what} {} holds no certificate", path.display()));
    }
    Ok(certs)
}

impl Tls {
    /// Loads `files` into the acceptor and connector; the error names the file and what is wrong with it.
    pub fn load(files: &TlsFiles) -> Result<Tls, String> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let chain = certificates(&files.cert, "certificate")?;
        let key = PrivateKeyDer::from_pem_slice(&read(&files.key, "key")?)
            .map_err(|e| format!("the TLS key {} is not a PEM private key: {e}", files.key.display()))?;
        let mut roots = rustls::RootCertStore::empty();
        for ca in certificates(&files.ca, "CA")? {
            roots.add(ca).map_err(|e| format!("the TLS CA {}: {e}", files.ca.display()))?;
        }
        let roots = Arc::new(roots);
        let clients = rustls::server::WebPkiClientVerifier::builder_with_provider(roots.clone(), provider.clone())
            .build()
            .map_err(|e| format!("the TLS CA {}: {e}", files.ca.display()))?;
        let server = rustls::ServerConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(|e| e.to_string())?
            .with_client_cert_verifier(clients)
            .with_single_cert(chain.clone(), key.clone_key())
            .map_err(|e| {
                format!("the TLS certificate {} and key {}: {e}", files.cert.display(), files.key.display())
            })?;
        let client = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| e.to_string())?
            .with_root_certificates(roots)
            .with_client_auth_cert(chain, key)
            .map_err(|e| {
                format!("the TLS certificate {} and key {}: {e}", files.cert.display(), files.key.display())
            })?;
        Ok(Tls { acceptor: TlsAcceptor::from(Arc::new(server)), connector: TlsConnector::from(Arc::new(client)) })
    }

    /// What a node's server accepts connections with.
    pub(crate) fn acceptor(&self) -> TlsAcceptor {
        self.acceptor.clone()
    }

    /// What the head connects to a node with.
    pub(crate) fn connector(&self) -> TlsConnector {
        self.connector.clone()
    }
}

/// Why a connection to a node was not made.
#[derive(Debug)]
pub(crate) enum ConnectError {
    /// The node is not on loopback and there is no TLS: not tried (what to do instead).
    NeedsTls(String),
    /// Tried, and it failed.
    Failed(String),
}

impl std::fmt::Display for ConnectError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ConnectError::NeedsTls(why) | ConnectError::Failed(why) => f.write_str(why),
        }
    }
}

/// Connects `server` to the node at `addr`: over TLS with `tls`, else in the clear, which only a node on loopback is
/// allowed (the run's grant key crosses the link).
pub(crate) async fn connect(
    server: &ractor::ActorRef<ractor_cluster::NodeServerMessage>,
    addr: &str,
    tls: Option<&Tls>,
) -> Result<(), ConnectError> {
    let failed = |e: &dyn std::fmt::Display| ConnectError::Failed(e.to_string());
    match tls {
        Some(tls) => {
            let name = server_name(addr).map_err(ConnectError::Failed)?;
            ractor_cluster::client_connect_enc(server, addr, tls.connector(), name).await.map_err(|e| failed(&e))
        }
        None if !on_loopback(addr) => Err(ConnectError::NeedsTls(format!(
            "{addr} is not on loopback: the run's grant key crosses the link to its nodes, so a run places agents on \
             another machine only over TLS (lessrt run --tls-cert FILE --tls-key FILE --tls-ca FILE, and the same on \
             the node)"
        ))),
        None => ractor_cluster::client_connect(server, addr).await.map_err(|e| failed(&e)),
    }
}

/// Whether a node's address (`host:port`) is on loopback (`127.0.0.0/8`, `::1` or `localhost`).
fn on_loopback(addr: &str) -> bool {
    match addr.parse::<std::net::SocketAddr>() {
        Ok(addr) => addr.ip().is_loopback(),
        Err(_) => addr.rsplit_once(':').is_some_and(|(host, _)| host == "localhost"),
    }
}

/// The name a node's certificate must carry to be the node at `addr` (`host:port`): its IP address or DNS name.
pub(crate) fn server_name(addr: &str) -> Result<ServerName<'static>, String> {
    let host = match addr.rsplit_once(':') {
        Some((host, _port)) => host.trim_start_matches('[').trim_end_matches(']'),
        None => addr,
    };
    ServerName::try_from(host.to_owned()).map_err(|e| format!("{host} is not a name a certificate can carry: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_node_is_named_by_the_host_of_its_address() {
        assert!(matches!(server_name("127.0.0.1:7000"), Ok(ServerName::IpAddress(_))));
        assert!(matches!(server_name("[::1]:7000"), Ok(ServerName::IpAddress(_))));
        assert!(matches!(server_name("node-1.internal:7000"), Ok(ServerName::DnsName(_))));
        assert!(server_name("bad name:7000").is_err());
        assert!(on_loopback("127.0.0.1:7000") && on_loopback("[::1]:7000") && on_loopback("localhost:7000"));
        assert!(!on_loopback("192.0.2.10:7000") && !on_loopback("node-1.internal:7000"));
    }

    #[test]
    fn missing_or_malformed_files_are_named() {
        let dir = tempfile::tempdir().expect("tempdir");
        let junk = dir.path().join("junk.pem");
        std::fs::write(&junk, "not pem").expect("write");
        let files = TlsFiles { cert: junk.clone(), key: junk.clone(), ca: dir.path().join("missing.pem") };
        let err = Tls::load(&files).expect_err("junk");
        assert!(err.contains("junk.pem"), "{err}");
        let files = TlsFiles { ca: junk.clone(), ..files };
        assert!(Tls::load(&files).expect_err("junk").contains("junk.pem"));
    }
}
