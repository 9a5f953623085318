//! The one error type of the crate.

mod classify;
mod display;
mod loss;

pub(crate) use classify::{is_not_resp, is_transient, reply_was_read, NOT_RESP};
pub use loss::LossCause;

/// Everything that can go wrong when taking, holding or releasing a lock.
///
/// `Display` says what happened, to which lock, and what the caller can do.
/// `Debug` says the same, followed by the causes (as [`Error::report`]
/// does) and the variant's name, so that a `fn main() -> redhold::Result<()>`
/// that returns an error prints the advice too. Match on the variant for
/// its fields.
#[non_exhaustive]
pub enum Error {
    /// A Redis command failed (connection refused or dropped, timeout, server
    /// error) after the configured retries.
    Redis(redis::RedisError),
    /// The client could not connect to or handshake with the server at `url`
    /// within the connect timeout.
    Connect {
        /// The URL the client tried, with any password hidden.
        url: String,
        /// What the connection attempt reported.
        source: redis::RedisError,
    },
    /// The Redis URL given to the client is malformed or unsupported.
    InvalidUrl {
        /// The URL as given, with any password hidden.
        url: String,
        /// Why it was refused.
        reason: String,
    },
    /// A release was asked of a thread that holds no hold on the lock, like
    /// Java's `IllegalMonitorStateException`.
    NotHeld {
        /// The lock name.
        lock: String,
    },
    /// The lock expired or was deleted while we believed we held it: another
    /// holder may have been inside the critical section meanwhile.
    LockLost {
        /// The lock name.
        lock: String,
        /// Why, as far as the client can tell.
        cause: LossCause,
        /// The owner whose hold it was; `None` for a thread's hold.
        owner: Option<crate::Owner>,
    },
    /// A thread that holds only read holds of a read-write lock asked for
    /// its write lock: that could never be granted while it reads.
    UpgradeNotSupported {
        /// The lock name.
        lock: String,
    },
    /// Fewer replicas than asked with
    /// [`ClientBuilder::sync_replicas`](crate::ClientBuilder::sync_replicas)
    /// acknowledged a change in time. After an acquire, the acquire was
    /// undone; after a release, the release stands on the master.
    ReplicasNotSynced {
        /// The lock name.
        lock: String,
        /// How many replicas had to acknowledge.
        wanted: usize,
        /// How many did.
        acknowledged: usize,
    },
    /// The wait for the lock was cut short by [`Interrupt::trigger`](crate::Interrupt::trigger).
    Interrupted {
        /// The lock name.
        lock: String,
    },
    /// The lock name cannot be used as a Redis key for a lock.
    InvalidName {
        /// The name as given (cut short when very long).
        name: String,
        /// Why it was refused.
        reason: &'static str,
    },
    /// An argument is out of range, such as a zero lease.
    InvalidArgument {
        /// Which argument.
        what: &'static str,
        /// Why it was refused.
        reason: String,
    },
    /// The client was shut down with [`Client::shutdown`](crate::Client::shutdown).
    Shutdown,
    /// The name holds a lock of another kind (or a value that is no lock at
    /// all), e.g. a read-write lock taken on a name held as a plain lock.
    /// Nothing was changed. See `docs/lock-kinds.md` for the mixes that
    /// cannot be detected.
    WrongKind {
        /// The lock name.
        lock: String,
        /// The kind the call was made for.
        expected: &'static str,
        /// What the name holds instead.
        found: String,
    },
    /// The system refused to start one of the client's threads (too many
    /// threads, too little memory).
    Spawn {
        /// The thread's name, e.g. `redhold-watchdog`.
        thread: &'static str,
        /// What the system said.
        source: std::io::Error,
    },
    /// Redis holds a value under one of the lock's keys that no lock
    /// client writes (say, a fencing token counter that is not a positive
    /// number): something else changed it. Nothing was handed out.
    Corrupt {
        /// The lock name.
        lock: String,
        /// The key that holds the value.
        key: String,
        /// What it holds, and what it should hold.
        found: String,
    },
    /// A call that waits for a lock gave up while Redis was unreachable
    /// (refused, dropped or timed-out connections, or a server loading its
    /// data or failing over): after the client's
    /// [outage tolerance](crate::ClientBuilder::outage_tolerance), or at
    /// the call's own deadline. Whether the lock was free meanwhile is
    /// unknown, hence an error rather than `Ok(None)`. The call holds no
    /// hold of it.
    Unreachable {
        /// The lock name.
        lock: String,
        /// How long Redis had been unreachable for this call when it gave
        /// up, from the start of the first attempt that failed.
        unreachable_for: std::time::Duration,
        /// The outage tolerance that ran out; `None` when the call's own
        /// wait time ran out first.
        exceeded_tolerance: Option<std::time::Duration>,
        /// The last error of the connection or the server.
        source: redis::RedisError,
    },
    /// [`LockGuard::unlock`](crate::LockGuard::unlock) gave up waiting for
    /// Redis to confirm the release after the retry rule's bound, `waited`:
    /// (connect + response timeout) × (retries + 1) + the retry delays. The
    /// release goes on in the background until Redis confirms it or the
    /// hold's TTL has run out; the guard is gone either way.
    ReleaseUnconfirmed {
        /// The lock name.
        lock: String,
        /// How long the call waited.
        waited: std::time::Duration,
        /// The last error of the connection or the server.
        source: redis::RedisError,
    },
    /// The client was built in another process and this one is a `fork()`
    /// of it: its holder ids belong to the parent, so using it here would
    /// share the parent's holds. Nothing was sent to Redis.
    ForkedProcess {
        /// The process that built the client.
        parent: u32,
        /// The calling (forked) process.
        child: u32,
    },
}

/// The result type of every fallible call in this crate.
pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    /// The error and each of its causes ([`source`](std::error::Error::source)),
    /// joined by `": "` (a cause whose text is already there is left out),
    /// for logs and messages on one line. `Display` shows only the error
    /// itself, as error chains expect; this shows what the server or the
    /// system said too.
    ///
    /// ```no_run
    /// if let Err(e) = redhold::Client::open("redis://127.0.0.1:6379/") {
    ///     eprintln!("{}", e.report()); // "cannot connect to Redis at …: Connection refused …"
    /// }
    /// ```
    pub fn report(&self) -> String {
        let mut text = self.to_string();
        let mut cause = std::error::Error::source(self);
        while let Some(e) = cause {
            // Some causes (the redis crate's I/O errors) print their own
            // cause too: say each text once.
            let said = e.to_string();
            if !text.contains(&said) {
                text.push_str(": ");
                text.push_str(&said);
            }
            cause = e.source();
        }
        text
    }

    /// True when the error is a Redis timeout: the server is stalled or
    /// unreachable and the call may succeed later.
    pub fn is_timeout(&self) -> bool {
        match self {
            Error::Redis(e)
            | Error::Connect { source: e, .. }
            | Error::Unreachable { source: e, .. }
            | Error::ReleaseUnconfirmed { source: e, .. } => e.is_timeout(),
            _ => false,
        }
    }

    /// True when the error comes from the network (refused, dropped, timed
    /// out), or from sentinels that know no master that is up (a failover
    /// in progress), rather than from a bad request: retrying later may
    /// succeed. A
    /// connection the server refused to set up (a wrong password, a database
    /// out of range) or a peer that does not speak RESP is not one.
    pub fn is_connection_error(&self) -> bool {
        match self {
            Error::Redis(e) => is_transient(e),
            // The server's own refusal (a wrong password, a database out
            // of range) or a peer that is no Redis server stays so.
            Error::Connect { source, .. } => is_transient(source) && !is_not_resp(source),
            Error::Unreachable { .. } | Error::ReleaseUnconfirmed { .. } => true,
            _ => false,
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Redis(e)
            | Error::Connect { source: e, .. }
            | Error::Unreachable { source: e, .. }
            | Error::ReleaseUnconfirmed { source: e, .. } => Some(e),
            Error::Spawn { source, .. } => Some(source),
            _ => None,
        }
    }
}

impl From<redis::RedisError> for Error {
    fn from(e: redis::RedisError) -> Self {
        Error::Redis(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_names_the_lock_and_the_remedy() {
        let e = Error::LockLost {
            lock: "orders:42".into(),
            cause: LossCause::LeaseExpired,
            owner: None,
        };
        let text = e.to_string();
        assert!(text.contains("orders:42"), "{text}");
        assert!(text.contains("longer lease"), "{text}");
        // Lease advice only where a lease was the cause.
        for cause in [LossCause::TakenOver, LossCause::Vanished] {
            let text = Error::LockLost {
                lock: "orders:42".into(),
                cause,
                owner: None,
            }
            .to_string();
            assert!(!text.contains("lease"), "{text}");
            assert!(text.contains("force-unlocked"), "{text}");
        }
        // "See the log" says which log, and how to see it.
        let unknown = Error::LockLost {
            lock: "orders:42".into(),
            cause: LossCause::Unknown,
            owner: None,
        };
        let text = format!("{unknown:?}");
        assert!(text.contains("warn level, target `redhold`"), "{text}");
        assert!(text.contains("RUST_LOG=redhold=warn"), "{text}");
    }

    #[test]
    fn display_leaves_the_cause_to_source() {
        let io = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "refused here");
        let e = Error::Connect {
            url: "redis://h:1/".into(),
            source: redis::RedisError::from(io),
        };
        let own = e.to_string();
        let cause = std::error::Error::source(&e).expect("a source").to_string();
        assert!(cause.contains("refused here"), "{cause}");
        assert!(
            !own.contains("refused here"),
            "printed twice in a chain: {own}"
        );
        assert!(e.report().starts_with(&own), "{}", e.report());
        assert!(e.report().ends_with(&cause), "{}", e.report());
        let spawn = Error::Spawn {
            thread: "redhold-watchdog",
            source: std::io::Error::other("no threads left"),
        };
        assert!(!spawn.is_connection_error());
        assert!(spawn.report().contains("no threads left"));
    }

    #[test]
    fn io_errors_are_connection_errors() {
        let io = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "refused");
        let e = Error::Redis(redis::RedisError::from(io));
        assert!(e.is_connection_error());
        assert!(!Error::Shutdown.is_connection_error());
    }

    #[test]
    fn no_master_up_is_an_outage_an_unknown_master_name_is_not() {
        let failing_over = redis::RedisError::from((
            redis::ErrorKind::MasterNameNotFoundBySentinel,
            "the sentinel knows no master by that name that is up",
        ));
        assert!(Error::Redis(failing_over).is_connection_error());
        let failing_over = redis::RedisError::from((
            redis::ErrorKind::MasterNameNotFoundBySentinel,
            "not a master (yet)",
        ));
        assert!(Error::Redis(failing_over).is_connection_error());
        let unknown =
            redis::RedisError::from((redis::ErrorKind::EmptySentinelList, "no sentinel to ask"));
        assert!(!Error::Redis(unknown).is_connection_error());
    }
}
