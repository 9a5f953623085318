//! How an [`Error`] reads: `Display`, one sentence that says what happened
//! and what to do, and `Debug`, the same sentence with its causes and the
//! variant's name, so that an error returned from `main` reads well too.

use std::fmt;

use super::classify::{
    is_not_resp, is_transient, password_missing, refused_credentials, wrong_host_name,
};
use super::Error;

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            // The Redis error itself is the `source()`: not repeated here.
            Error::Redis(e) if is_transient(e) => write!(
                f,
                "Redis is unreachable or too slow; the call was retried and gave up: \
                 check that the server is up, or raise the client's response timeout"
            ),
            Error::Redis(e)
                if e.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::NoPerm) =>
            {
                write!(
                    f,
                    "Redis refused a lock command for lack of permission; the ACL user needs \
                     +@scripting +@pubsub +ping +exists +hget +pttl and access to the lock's keys and channels"
                )
            }
            Error::Redis(_) => write!(f, "a Redis command failed"),
            // A CA would not help here: the certificate is trusted but
            // names another host.
            Error::Connect { url, source } if wrong_host_name(source) => write!(
                f,
                "cannot connect to Redis at {url}; the server's certificate is not valid for \
                 the host name in the URL: connect with a name or address the certificate \
                 lists (its subjectAltName)"
            ),
            Error::Connect { url, source } if source.to_string().contains("certificate") => {
                write!(
                    f,
                    "cannot connect to Redis at {url}; if the server's certificate is signed \
                     by your own CA, give that CA with ClientBuilder::tls_root_cert"
                )
            }
            Error::Connect { url, source } if password_missing(source) => write!(
                f,
                "Redis at {url} requires a password and the URL gives none; put it in the \
                 URL: redis://:password@host:port/ (or redis://user:password@host:port/ \
                 for an ACL user)"
            ),
            Error::Connect { url, source } if refused_credentials(source) => write!(
                f,
                "Redis at {url} refused the user name or password; check the credentials \
                 in the URL (and the ACL user, if one is named)"
            ),
            Error::Connect { url, source } if source.is_timeout() => write!(
                f,
                "Redis at {url} did not answer in time; check that the server runs there and \
                 is not stalled, or raise the connect timeout"
            ),
            // Refused or dropped: nobody serves there, or the network broke.
            Error::Connect { url, source } if is_transient(source) && !is_not_resp(source) => {
                write!(
                    f,
                    "cannot connect to Redis at {url}; check that the server runs there and \
                     that the credentials are right"
                )
            }
            // The server answered: its own error, or a reply that is not
            // RESP, is the `source()`.
            Error::Connect { url, .. } => write!(f, "cannot set up a connection to Redis at {url}"),
            Error::InvalidUrl { url, reason } => {
                write!(f, "invalid Redis URL {url:?}: {reason}")
            }
            Error::NotHeld { lock } => write!(
                f,
                "lock {lock:?} is not held by the current thread (or the handle's owner) in a \
                 way that may be released here, so it cannot be released"
            ),
            Error::LockLost { lock, cause, owner } => write!(
                f,
                "lock {lock:?} was lost while held{}, so another holder may have entered the \
                 critical section: {}",
                owner.map_or_else(String::new, |owner| format!(" by {owner}")),
                cause.explained()
            ),
            Error::UpgradeNotSupported { lock } => write!(
                f,
                "the current thread holds read locks on {lock:?} and asked for its write lock, \
                 which can never be granted while it reads: release the read holds first"
            ),
            Error::ReplicasNotSynced {
                lock,
                wanted,
                acknowledged,
            } => write!(
                f,
                "only {acknowledged} of the {wanted} replicas required acknowledged the change \
                 to lock {lock:?} in time (a failover now could lose it); check the replicas' \
                 health or lower sync_replicas"
            ),
            Error::Interrupted { lock } => {
                write!(f, "the wait for lock {lock:?} was interrupted")
            }
            Error::InvalidName { name, reason } => {
                write!(f, "invalid lock name {name:?}: {reason}")
            }
            Error::InvalidArgument { what, reason } => write!(f, "invalid {what}: {reason}"),
            Error::Shutdown => write!(
                f,
                "the redhold client was shut down; build a new client to take locks again"
            ),
            Error::WrongKind {
                lock,
                expected,
                found,
            } => write!(
                f,
                "lock {lock:?} was used as a {expected} but holds {found}: one name must be \
                 used with one kind of lock; pick another name or release the other lock first"
            ),
            Error::Spawn { thread, .. } => write!(
                f,
                "the system refused to start redhold's {thread} thread; the process may have \
                 too many threads or too little memory"
            ),
            Error::Corrupt { lock, key, found } => write!(
                f,
                "lock {lock:?}: key {key:?} holds {found}, which no lock client writes; \
                 something else changed it: delete the key or use another lock name"
            ),
            Error::Unreachable {
                lock,
                unreachable_for,
                exceeded_tolerance: Some(tolerance),
                ..
            } => write!(
                f,
                "Redis was unreachable for {:.1} s while this thread waited for lock {lock:?}, \
                 longer than the client's outage tolerance ({:.1} s), so the wait gave up: \
                 check that the server is up, or raise ClientBuilder::outage_tolerance",
                unreachable_for.as_secs_f64(),
                tolerance.as_secs_f64()
            ),
            Error::Unreachable {
                lock,
                unreachable_for,
                exceeded_tolerance: None,
                ..
            } => write!(
                f,
                "the wait for lock {lock:?} ran out while Redis was unreachable (for the last \
                 {:.1} s), so whether the lock was free is unknown: check that the server is up, \
                 or wait longer",
                unreachable_for.as_secs_f64()
            ),
            Error::ReleaseUnconfirmed { lock, waited, .. } => write!(
                f,
                "Redis did not confirm the release of lock {lock:?} within {:.1} s (the retry \
                 bound: (connect + response timeout) x (retries + 1) + retry delays); it goes \
                 on in the background until confirmed or until the lock's TTL has run out",
                waited.as_secs_f64()
            ),
            Error::ForkedProcess { parent, child } => write!(
                f,
                "this redhold client was built in process {parent} and cannot be used in its \
                 forked child {child} (it would share the parent's holds); build a new client \
                 in the child"
            ),
        }
    }
}

impl fmt::Debug for Error {
    /// The sentence and its causes ([`Error::report`]), then the variant:
    /// `fn main() -> redhold::Result<()>` prints `Debug`, and the advice
    /// must reach the user there too.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} [redhold::Error::{}]", self.report(), self.variant())
    }
}

impl Error {
    /// The variant's name, for `Debug`.
    fn variant(&self) -> &'static str {
        match self {
            Error::Redis(_) => "Redis",
            Error::Connect { .. } => "Connect",
            Error::InvalidUrl { .. } => "InvalidUrl",
            Error::NotHeld { .. } => "NotHeld",
            Error::LockLost { .. } => "LockLost",
            Error::UpgradeNotSupported { .. } => "UpgradeNotSupported",
            Error::ReplicasNotSynced { .. } => "ReplicasNotSynced",
            Error::Interrupted { .. } => "Interrupted",
            Error::InvalidName { .. } => "InvalidName",
            Error::InvalidArgument { .. } => "InvalidArgument",
            Error::Shutdown => "Shutdown",
            Error::WrongKind { .. } => "WrongKind",
            Error::Spawn { .. } => "Spawn",
            Error::Corrupt { .. } => "Corrupt",
            Error::Unreachable { .. } => "Unreachable",
            Error::ReleaseUnconfirmed { .. } => "ReleaseUnconfirmed",
            Error::ForkedProcess { .. } => "ForkedProcess",
        }
    }
}
