//! A `redis-server` that speaks TLS only, with a certificate authority and a
//! server certificate made by the `openssl` command at test time, and a
//! second, unrelated authority for tests that expect a certificate to be
//! refused.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use super::cli::{run_bounded, Output};
use super::{fresh_dir, RedisServer};

/// How long one `openssl` or `redis-cli` run may take.
const TOOL_TIMEOUT: Duration = Duration::from_secs(20);

/// A TLS-only server and the authorities around it.
///
/// Dropping it kills the server and removes the certificates.
#[derive(Debug)]
pub(crate) struct TlsServer {
    /// The server; its [`url`](RedisServer::url) is `rediss://127.0.0.1:<port>/`.
    pub(crate) server: RedisServer,
    certs: PathBuf,
}

impl TlsServer {
    /// Makes the certificates and starts a server that listens for TLS only
    /// and does not ask clients for certificates (`--tls-auth-clients no`).
    /// `extra` is appended to its arguments.
    ///
    /// # Panics
    ///
    /// If `openssl` is missing or fails, or the server does not start.
    pub(crate) fn start_with_args(extra: &[&str]) -> TlsServer {
        let certs = fresh_dir();
        make_certificates(&certs);
        let path = |name: &str| certs.join(name).to_string_lossy().into_owned();
        let (cert, key, ca) = (path("server.crt"), path("server.key"), path("ca.crt"));
        let mut args = vec![
            "--tls-cert-file",
            &cert,
            "--tls-key-file",
            &key,
            "--tls-ca-cert-file",
            &ca,
            "--tls-auth-clients",
            "no",
        ];
        args.extend_from_slice(extra);
        let server = RedisServer::start_tls_with_args(&args);
        TlsServer { server, certs }
    }

    /// As [`start_with_args`](Self::start_with_args) with no extra arguments.
    pub(crate) fn start() -> TlsServer {
        TlsServer::start_with_args(&[])
    }

    /// The TLS port.
    pub(crate) fn port(&self) -> u16 {
        self.server.port()
    }

    /// `rediss://<user>:<password>@127.0.0.1:<port>/`.
    pub(crate) fn url_as(&self, user: &str, password: &str) -> String {
        format!("rediss://{user}:{password}@127.0.0.1:{}/", self.port())
    }

    /// The certificate authority that signed the server's certificate, PEM.
    pub(crate) fn ca_pem(&self) -> Vec<u8> {
        self.read("ca.crt")
    }

    /// An authority that signed nothing the server has, PEM: trusting only
    /// it must make the handshake fail.
    pub(crate) fn untrusted_ca_pem(&self) -> Vec<u8> {
        self.read("other-ca.crt")
    }

    /// The directory with the certificates and keys.
    pub(crate) fn certs_dir(&self) -> &Path {
        &self.certs
    }

    fn read(&self, name: &str) -> Vec<u8> {
        let path = self.certs.join(name);
        fs::read(&path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
    }

    /// Runs `redis-cli` over TLS as the default user with `args`, e.g.
    /// `&["EXISTS", "k"]`, and returns what it printed.
    ///
    /// # Panics
    ///
    /// If `redis-cli` cannot be run or takes longer than 20 s.
    pub(crate) fn cli(&self, args: &[&str]) -> Output {
        let ca = self.certs.join("ca.crt");
        let mut command = Command::new("redis-cli");
        command
            .args(["--tls", "--cacert"])
            .arg(&ca)
            .args(["-h", "127.0.0.1", "-p", &self.port().to_string()])
            .args(args);
        run_bounded(command, TOOL_TIMEOUT, &format!("redis-cli --tls {args:?}"))
    }

    /// Runs `args` through [`cli`](Self::cli) and returns the reply, trimmed.
    ///
    /// # Panics
    ///
    /// If `redis-cli` fails or the server answers with an error.
    pub(crate) fn cmd(&self, args: &[&str]) -> String {
        let out = self.cli(args);
        let reply = out.stdout.trim().to_owned();
        let is_error = ["ERR", "WRONGPASS", "NOPERM", "NOAUTH", "WRONGTYPE"]
            .iter()
            .any(|p| reply.starts_with(p));
        assert!(
            out.status_ok && !is_error && !reply.contains("Could not connect"),
            "redis-cli --tls {args:?} failed\n--- stdout ---\n{}\n--- stderr ---\n{}",
            out.stdout,
            out.stderr
        );
        reply
    }

    /// Adds (or replaces) an ACL user `name` with password `password` and
    /// every right on every key and channel.
    pub(crate) fn add_user(&self, name: &str, password: &str) {
        let pass = format!(">{password}");
        let reply = self.cmd(&[
            "ACL", "SETUSER", name, "reset", "on", &pass, "~*", "&*", "+@all",
        ]);
        assert_eq!(reply, "OK", "ACL SETUSER {name}");
    }
}

impl Drop for TlsServer {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.certs);
    }
}

/// Writes into `dir`: `ca.crt`/`ca.key` (an authority), `server.crt`/
/// `server.key` (signed by it, for 127.0.0.1 and localhost) and
/// `other-ca.crt` (an unrelated authority). Elliptic-curve keys, because they
/// are made in milliseconds.
fn make_certificates(dir: &Path) {
    let write = |name: &str, text: &str| {
        let path = dir.join(name);
        fs::write(&path, text).unwrap_or_else(|e| panic!("cannot write {}: {e}", path.display()));
    };
    // Our own configs, so the machine's openssl.cnf plays no part. webpki
    // (rustls) wants a CA flagged as such and a leaf with a SAN.
    let ca_config = |cn: &str| {
        format!(
            "[req]\nprompt = no\ndistinguished_name = dn\nx509_extensions = v3_ca\n\
             [dn]\nCN = {cn}\n\
             [v3_ca]\nbasicConstraints = critical, CA:TRUE\n\
             keyUsage = critical, keyCertSign, cRLSign\n\
             subjectKeyIdentifier = hash\n"
        )
    };
    write("ca.cnf", &ca_config("redhold test CA"));
    write("other-ca.cnf", &ca_config("redhold untrusted CA"));
    write(
        "server.cnf",
        "[req]\nprompt = no\ndistinguished_name = dn\n[dn]\nCN = 127.0.0.1\n",
    );
    write(
        "server-ext.cnf",
        "basicConstraints = critical, CA:FALSE\n\
         keyUsage = critical, digitalSignature, keyEncipherment\n\
         extendedKeyUsage = serverAuth\n\
         subjectAltName = IP:127.0.0.1, DNS:localhost\n\
         subjectKeyIdentifier = hash\n\
         authorityKeyIdentifier = keyid\n",
    );
    let new_key = [
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
    ];
    for ca in ["ca", "other-ca"] {
        let (cnf, key, crt) = (
            format!("{ca}.cnf"),
            format!("{ca}.key"),
            format!("{ca}.crt"),
        );
        openssl(
            dir,
            &["req", "-x509", "-new"],
            &new_key,
            &["-config", &cnf, "-keyout", &key, "-out", &crt, "-days", "2"],
        );
    }
    openssl(
        dir,
        &["req", "-new"],
        &new_key,
        &[
            "-config",
            "server.cnf",
            "-keyout",
            "server.key",
            "-out",
            "server.csr",
        ],
    );
    openssl(
        dir,
        &["x509", "-req"],
        &[],
        &[
            "-in",
            "server.csr",
            "-CA",
            "ca.crt",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-out",
            "server.crt",
            "-days",
            "2",
            "-extfile",
            "server-ext.cnf",
        ],
    );
}

/// Runs `openssl` in `dir` with the three groups of arguments.
fn openssl(dir: &Path, first: &[&str], second: &[&str], third: &[&str]) {
    let mut command = Command::new("openssl");
    command
        .current_dir(dir)
        .args(first)
        .args(second)
        .args(third);
    let what = format!("openssl {}", first.join(" "));
    let out = run_bounded(command, TOOL_TIMEOUT, &what);
    assert!(
        out.status_ok,
        "{what} failed\n--- stdout ---\n{}\n--- stderr ---\n{}",
        out.stdout, out.stderr
    );
}
