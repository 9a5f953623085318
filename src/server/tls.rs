//! TLS for the pub/sub socket (`rediss://`), with rustls: one TLS session
//! shared by the two halves of a split TCP socket.
//!
//! The split is what lets a waiter send SUBSCRIBE at once while the
//! subscriber thread is blocked reading (see [`super::socket`]). Each
//! half has its own handle on the socket; the session sits behind a mutex.
//!
//! | half   | waits for the server            | holds the session's lock while                              |
//! |--------|---------------------------------|-------------------------------------------------------------|
//! | reader | in `read`, without the lock     | decrypting what it read, sending any records that calls for (alerts, key updates) |
//! | writer | in `write`, with the lock       | encrypting one command and sending it                       |
//!
//! The reader never holds the session while it waits for the server, so a
//! waiter's SUBSCRIBE never waits for the next message or the next tick.

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use rustls::{ClientConfig, ClientConnection, RootCertStore};

/// The TLS setup shared by a client's pub/sub connections: which roots to
/// trust, made into a rustls configuration on first use and then kept.
pub(crate) struct TlsConnector {
    /// The PEM given to `ClientBuilder::tls_root_cert`; the platform's roots
    /// when `None`.
    root_pem: Option<Vec<u8>>,
    /// Built lazily: a client that never speaks TLS never reads the
    /// platform's certificate store.
    config: Mutex<Option<Arc<ClientConfig>>>,
}

impl std::fmt::Debug for TlsConnector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsConnector")
            .field("custom_root", &self.root_pem.is_some())
            .field("ready", &self.config.lock().is_some())
            .finish()
    }
}

impl TlsConnector {
    /// A connector trusting the certificates in `root_pem`, or the
    /// platform's roots when it is `None` (as the command connections do).
    pub(crate) fn new(root_pem: Option<Vec<u8>>) -> TlsConnector {
        TlsConnector {
            root_pem,
            config: Mutex::new(None),
        }
    }

    /// Runs the TLS handshake with `host` on the connected `tcp`, all of it
    /// within `timeout`, and returns the connection's first half.
    ///
    /// `insecure` (a `rediss://…#insecure` URL) is refused: the command
    /// connections refuse it too in this build, and a pub/sub connection
    /// that trusted anyone could be fed fake releases.
    pub(crate) fn handshake(
        &self,
        mut tcp: TcpStream,
        host: &str,
        insecure: bool,
        timeout: Duration,
    ) -> io::Result<TlsStream> {
        if insecure {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "rediss://…#insecure (no certificate check) is not supported; \
                 give the server's CA with ClientBuilder::tls_root_cert instead",
            ));
        }
        let name = server_name(host)?;
        let mut session = ClientConnection::new(self.config()?, name)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, format!("TLS setup: {e}")))?;
        handshake(&mut session, &mut tcp, host, timeout)?;
        Ok(TlsStream {
            tcp,
            session: Arc::new(Mutex::new(session)),
        })
    }

    /// The rustls configuration, built on first use. A failure is not kept:
    /// the platform's store may be readable on the next attempt.
    fn config(&self) -> io::Result<Arc<ClientConfig>> {
        let mut slot = self.config.lock();
        if let Some(config) = &*slot {
            return Ok(Arc::clone(config));
        }
        let roots = match &self.root_pem {
            Some(pem) => roots_from_pem(pem)?,
            None => platform_roots()?,
        };
        // The program's own provider when it installed one (say, a FIPS
        // one); ring otherwise, which the `tls` feature brings.
        let provider = CryptoProvider::get_default()
            .cloned()
            .unwrap_or_else(|| Arc::new(rustls::crypto::ring::default_provider()));
        let config = ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, format!("TLS setup: {e}")))?
            .with_root_certificates(roots)
            .with_no_client_auth();
        let config = Arc::new(config);
        *slot = Some(Arc::clone(&config));
        Ok(config)
    }
}

/// Parses every certificate in `pem` into a root store. Anything but at
/// least one well-formed certificate is an error, so that a wrong file is
/// reported as such rather than as an untrusted server later.
fn roots_from_pem(pem: &[u8]) -> io::Result<RootCertStore> {
    let bad = |reason: String| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("the root certificate given to tls_root_cert is unusable: {reason}"),
        )
    };
    let mut roots = RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(pem) {
        let cert = cert.map_err(|e| bad(format!("not valid PEM ({e})")))?;
        roots
            .add(cert)
            .map_err(|e| bad(format!("not a usable CA certificate ({e})")))?;
    }
    if roots.is_empty() {
        return Err(bad("it holds no PEM `CERTIFICATE` section".to_owned()));
    }
    Ok(roots)
}

/// The platform's trusted roots. Certificates or files that cannot be read
/// are skipped, as browsers do; only an empty result is an error, since no
/// server could then be trusted.
fn platform_roots() -> io::Result<RootCertStore> {
    let found = rustls_native_certs::load_native_certs();
    for error in &found.errors {
        log::debug!("redhold: skipping part of the platform's certificate store: {error}");
    }
    let mut roots = RootCertStore::empty();
    roots.add_parsable_certificates(found.certs);
    if roots.is_empty() {
        let why = found
            .errors
            .first()
            .map(|e| format!(" ({e})"))
            .unwrap_or_default();
        return Err(io::Error::new(
            io::ErrorKind::NotFound,
            format!(
                "no trusted root certificates found on this system{why}; \
                 give the server's CA with ClientBuilder::tls_root_cert"
            ),
        ));
    }
    Ok(roots)
}

/// The name the server's certificate must carry: the host of the address,
/// a DNS name or an IP address (bracketed IPv6 accepted).
fn server_name(host: &str) -> io::Result<ServerName<'static>> {
    let bare = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    ServerName::try_from(bare.to_owned()).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "{host:?} is neither a DNS name nor an IP address, so no certificate can match it"
            ),
        )
    })
}

/// Drives the handshake to its end, or fails once `timeout` has passed:
/// every blocking step gets only the time that is left.
fn handshake(
    session: &mut ClientConnection,
    tcp: &mut TcpStream,
    host: &str,
    timeout: Duration,
) -> io::Result<()> {
    // A timeout too long to represent is no timeout at all.
    let deadline = Instant::now().checked_add(timeout);
    let timed_out = || {
        io::Error::new(
            io::ErrorKind::TimedOut,
            format!("the TLS handshake with {host} did not finish within {timeout:?}"),
        )
    };
    while session.is_handshaking() {
        let left = match deadline {
            Some(deadline) => Some(
                deadline
                    .checked_duration_since(Instant::now())
                    .filter(|left| !left.is_zero())
                    .ok_or_else(timed_out)?,
            ),
            None => None,
        };
        tcp.set_read_timeout(left)?;
        tcp.set_write_timeout(left)?;
        if session.wants_write() {
            flush(session, tcp).map_err(|e| if is_timeout(&e) { timed_out() } else { e })?;
            continue;
        }
        let read = match session.read_tls(tcp) {
            Ok(read) => read,
            Err(e) if is_timeout(&e) => return Err(timed_out()),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if read == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!(
                    "{host} closed the connection during the TLS handshake; \
                     does it speak TLS on this port?"
                ),
            ));
        }
        if let Err(e) = session.process_new_packets() {
            // Tell the server why we hang up (the alert is queued); the
            // handshake's own error is what matters.
            let _ = flush(session, tcp);
            return Err(handshake_error(host, &e));
        }
    }
    // TLS 1.3 ends with our Finished, queued as the handshake completes.
    flush(session, tcp)
}

/// An I/O error for a failed handshake that says what the user can do.
fn handshake_error(host: &str, e: &rustls::Error) -> io::Error {
    let hint = match e {
        rustls::Error::InvalidCertificate(_) => {
            "; give the CA that signed the server's certificate with \
             ClientBuilder::tls_root_cert, and make sure the certificate names this host"
        }
        rustls::Error::InvalidMessage(_) | rustls::Error::InappropriateMessage { .. } => {
            "; does the server speak TLS on this port?"
        }
        _ => "",
    };
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("TLS handshake with {host} failed: {e}{hint}"),
    )
}

/// Whether a socket error means its timeout passed (which error a timeout
/// gives depends on the platform).
fn is_timeout(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
    )
}

/// Sends every TLS record the session has queued.
fn flush(session: &mut ClientConnection, tcp: &mut TcpStream) -> io::Result<()> {
    while session.wants_write() {
        if session.write_tls(tcp)? == 0 {
            return Err(io::ErrorKind::WriteZero.into());
        }
    }
    Ok(())
}

/// One half of a TLS connection: its own handle on the TCP socket, and the
/// session both halves share (see the module table).
pub(crate) struct TlsStream {
    tcp: TcpStream,
    session: Arc<Mutex<ClientConnection>>,
}

impl std::fmt::Debug for TlsStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsStream")
            .field("peer", &self.tcp.peer_addr().ok())
            .finish_non_exhaustive()
    }
}

impl TlsStream {
    /// The other half: a new handle on the same socket and session.
    pub(crate) fn try_clone(&self) -> io::Result<TlsStream> {
        Ok(TlsStream {
            tcp: self.tcp.try_clone()?,
            session: Arc::clone(&self.session),
        })
    }

    /// The socket, for timeouts and shutdown (which apply to both halves).
    pub(crate) fn tcp(&self) -> &TcpStream {
        &self.tcp
    }

    /// Blocks until the server sends bytes and appends the application
    /// data they complete to `out`; returns how many bytes it appended, 0
    /// when the server closed the connection.
    ///
    /// Errors of the socket's read, a timeout among them, are returned as
    /// they are, for the caller to read as it reads a plain socket's. Bytes
    /// that complete no data (part of a record, a session ticket) give an
    /// `Interrupted` error: the caller checks its deadline and reads on, so
    /// that a peer trickling a record cannot hold it past its deadline.
    pub(crate) fn read_into(&mut self, out: &mut Vec<u8>) -> io::Result<usize> {
        let mut chunk = [0u8; 8192];
        // Unlocked: a waiter may send meanwhile.
        let read = self.tcp.read(&mut chunk)?;
        if read == 0 {
            return Ok(0);
        }
        let mut session = self.session.lock();
        let absorbed = absorb(&mut session, &chunk[..read], out);
        // Send what the records called for (an alert, a key update) even
        // when they also carried an error.
        flush(&mut session, &mut self.tcp)?;
        let Absorbed { added, closed } = absorbed?;
        match (added, closed) {
            (0, true) => Ok(0),
            (0, false) => Err(io::ErrorKind::Interrupted.into()),
            (added, _) => Ok(added),
        }
    }

    /// Encrypts `bytes` and sends them, whole, before any other half may
    /// send: records of two commands never interleave.
    pub(crate) fn write_all(&mut self, bytes: &[u8]) -> io::Result<()> {
        let mut session = self.session.lock();
        let mut rest = bytes;
        while !rest.is_empty() {
            let taken = session.writer().write(rest)?;
            rest = &rest[taken..];
            let queued = session.wants_write();
            flush(&mut session, &mut self.tcp)?;
            // Nothing taken and nothing to send means no progress is possible.
            if taken == 0 && !queued {
                return Err(io::ErrorKind::WriteZero.into());
            }
        }
        Ok(())
    }
}

/// What [`absorb`] got out of some received bytes.
#[derive(Debug)]
struct Absorbed {
    /// Plaintext bytes appended.
    added: usize,
    /// The server sent close_notify: nothing more will come.
    closed: bool,
}

/// Feeds received bytes to the session and appends the plaintext they
/// complete to `out`. Plaintext is taken out after every record batch, so
/// the session's bounded plaintext buffer never fills up.
fn absorb(
    session: &mut ClientConnection,
    mut data: &[u8],
    out: &mut Vec<u8>,
) -> io::Result<Absorbed> {
    let before = out.len();
    let mut closed = false;
    while !data.is_empty() && !closed {
        // 0 only after close_notify: the session takes nothing more.
        if session.read_tls(&mut data)? == 0 {
            break;
        }
        let state = session.process_new_packets().map_err(|e| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("TLS error on the pub/sub connection: {e}"),
            )
        })?;
        if state.plaintext_bytes_to_read() > 0 {
            let start = out.len();
            out.resize(start + state.plaintext_bytes_to_read(), 0);
            session.reader().read_exact(&mut out[start..])?;
        }
        closed = state.peer_has_closed();
    }
    Ok(Absorbed {
        added: out.len() - before,
        closed,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A self-signed CA made with `openssl req -x509` (P-256). Its dates do
    /// not matter: a trust anchor's validity is not checked when it is added.
    const CA_PEM: &str = "-----BEGIN CERTIFICATE-----
MIIBkzCCATmgAwIBAgIURojmo2jIdOYzYq9NyArAOH8l8VcwCgYIKoZIzj0EAwIw
HzEdMBsGA1UEAwwUcmVkaG9sZCB1bml0IHRlc3QgQ0EwHhcNMjYxMTIyMTc0NTM5
WhcNMjYxMTIzMTc0NTM5WjAfMR0wGwYDVQQDDBRyZWRob2xkIHVuaXQgdGVzdCBD
QTBZMBMGByqGSM49AgEGCCqGSM49AwEHA0IABB3S8y/KCt5DLB+bJLASQPTGrXeG
Gi/issWHlIAxJah59Hq1ihN4O0EscEY6NL/st3K86NZdE8afrpEO1y2jiQujUzBR
MB0GA1UdDgQWBBRYBoOH5TFc/tiZvsC0M+xGC+OTrzAfBgNVHSMEGDAWgBRYBoOH
5TFc/tiZvsC0M+xGC+OTrzAPBgNVHRMBAf8EBTADAQH/MAoGCCqGSM49BAMCA0gA
MEUCIQDEfJrn6IbRYp1mH/Yz6Wh2UCU1MYQgi71pYsU6J7nboQIgI+H+I8zJgcqT
n5ht3EJ2YG0j8ToTzWCBeneV03UfYWA=
-----END CERTIFICATE-----
";

    #[test]
    fn every_certificate_of_a_bundle_becomes_a_root() {
        let bundle = format!("{CA_PEM}\n{CA_PEM}");
        assert_eq!(roots_from_pem(bundle.as_bytes()).unwrap().len(), 2);
    }

    #[test]
    fn a_bundle_with_a_key_beside_the_certificate_is_fine() {
        let pem = format!("-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n{CA_PEM}");
        assert_eq!(roots_from_pem(pem.as_bytes()).unwrap().len(), 1);
    }

    #[test]
    fn pem_without_a_certificate_is_refused_with_a_reason() {
        for pem in [
            "",
            "not pem at all",
            "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n",
        ] {
            let e = roots_from_pem(pem.as_bytes()).unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
            assert!(e.to_string().contains("tls_root_cert"), "{e}");
            assert!(e.to_string().contains("no PEM `CERTIFICATE`"), "{e}");
        }
    }

    #[test]
    fn a_broken_certificate_is_refused_with_a_reason() {
        let truncated = "-----BEGIN CERTIFICATE-----\nMIIBkzCCATmgAwIBAgIU\n";
        let e = roots_from_pem(truncated.as_bytes()).unwrap_err();
        assert!(e.to_string().contains("not valid PEM"), "{e}");

        let not_der = "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n";
        let e = roots_from_pem(not_der.as_bytes()).unwrap_err();
        assert!(e.to_string().contains("not a usable CA certificate"), "{e}");
    }

    #[test]
    fn server_names_are_dns_names_or_ip_addresses() {
        assert!(matches!(
            server_name("localhost"),
            Ok(ServerName::DnsName(_))
        ));
        assert!(matches!(
            server_name("redis.example.com"),
            Ok(ServerName::DnsName(_))
        ));
        assert!(matches!(
            server_name("127.0.0.1"),
            Ok(ServerName::IpAddress(_))
        ));
        assert!(matches!(server_name("::1"), Ok(ServerName::IpAddress(_))));
        assert!(matches!(server_name("[::1]"), Ok(ServerName::IpAddress(_))));
        let e = server_name("bad host!").unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
        assert!(e.to_string().contains("bad host!"), "{e}");
    }

    #[test]
    fn insecure_addresses_are_refused_before_any_io() {
        // A listener that is never accepted from: refusing must not need
        // the server at all.
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let tcp = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let connector = TlsConnector::new(Some(CA_PEM.as_bytes().to_vec()));
        let e = connector
            .handshake(tcp, "127.0.0.1", true, Duration::from_secs(1))
            .unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::Unsupported);
        assert!(e.to_string().contains("tls_root_cert"), "{e}");
    }

    #[test]
    fn the_configuration_is_built_once_and_shared() {
        let connector = TlsConnector::new(Some(CA_PEM.as_bytes().to_vec()));
        let first = connector.config().unwrap();
        let second = connector.config().unwrap();
        assert!(Arc::ptr_eq(&first, &second));
    }

    #[test]
    fn a_bad_root_is_reported_on_every_attempt() {
        let connector = TlsConnector::new(Some(b"nothing".to_vec()));
        assert!(connector.config().is_err());
        assert!(connector.config().is_err());
    }

    /// Issue 10: a connect timeout of `Duration::MAX` means no deadline,
    /// not an overflow.
    #[test]
    fn an_endless_handshake_timeout_does_not_overflow() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let tcp = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        // The "server" hangs up at once: the handshake ends with an error.
        drop(listener.accept().unwrap());
        let connector = TlsConnector::new(Some(CA_PEM.as_bytes().to_vec()));
        let e = connector
            .handshake(tcp, "127.0.0.1", false, Duration::MAX)
            .unwrap_err();
        assert_ne!(e.kind(), io::ErrorKind::TimedOut, "{e}");
    }
}
