//! The client: connections, pub/sub and watchdog shared by every lock.

use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use redis::{ConnectionLike, RedisResult};
use uuid::Uuid;

use crate::config::{ClientBuilder, Config};
use crate::connections::Connections;
use crate::error::{Error, Result};
use crate::kind::ReadWriteLock;
use crate::lock::{FairLock, FencedLock, Lock, SpinLock};
use crate::lost_callbacks::LostCallbacks;
use crate::pubsub::PubSub;
use crate::renewals::RenewalMap;
use crate::stats::{Counters, ParkedThread, Stats};
use crate::thread_id;
use crate::waiting::{Waiting, WaitingCall};
use crate::watchdog::{Renewer, Watchdog};

/// A connection manager for Redis locks, shared by the whole program.
///
/// It owns one random UUID (the `<client-uuid>` in every holder field), a
/// small pool of command connections, one pub/sub connection with its
/// subscriber thread, and one watchdog thread. Two more threads run only
/// when needed: one that runs the
/// [`on_lock_lost`](crate::ClientBuilder::on_lock_lost) callback (so that a
/// slow callback never delays a renewal), and, with sharded pub/sub on a
/// cluster, one that retries failed subscriptions. Cloning is cheap: clones
/// share all of it. Build one per process and pass clones around, or use
/// [`global`](crate::global).
///
/// ```no_run
/// # fn main() -> redhold::Result<()> {
/// use std::time::Duration;
/// let client = redhold::Client::builder()
///     .url("redis://127.0.0.1:6379/")
///     .watchdog_timeout(Duration::from_secs(30))
///     .build()?;
/// let _guard = client.lock("orders:42").lock()?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Client {
    inner: Arc<Inner>,
}

struct Inner {
    id: Uuid,
    /// The id as it appears in holder fields: lowercase, hyphenated.
    id_text: String,
    config: Config,
    connections: Arc<Connections>,
    renewals: Arc<RenewalMap>,
    pubsub: PubSub,
    watchdog: Watchdog,
    lost_callbacks: LostCallbacks,
    /// What [`Client::stats`] reports, counted as it happens.
    counters: Arc<Counters>,
    shut_down: AtomicBool,
    /// Acquire calls that may wait: shutdown lets them leave their queues.
    waiting: Waiting,
    /// The process that built the client: a `fork()` child must not use it,
    /// since its holder fields would be the parent's.
    pid: u32,
    /// Numbers release requests, for the unlock latch.
    next_request: AtomicU64,
}

impl Client {
    /// Connects to the server at `url` with default settings.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidUrl`] for a malformed URL; [`Error::Connect`] when the
    /// server does not answer within the connect timeout (5 s) or refuses the
    /// credentials.
    pub fn open(url: &str) -> Result<Client> {
        Client::builder().url(url).build()
    }

    /// A builder for a client with settings other than the defaults.
    pub fn builder() -> ClientBuilder {
        ClientBuilder::default()
    }

    pub(crate) fn start(config: Config) -> Result<Client> {
        let connections = Arc::new(Connections::open(&config)?);
        let counters = Arc::new(Counters::default());
        let pubsub = PubSub::start(Arc::clone(&connections), &config, Arc::clone(&counters))?;
        let renewals = Arc::new(RenewalMap::new(Arc::clone(&counters)));
        let (lost_callbacks, on_lost) = LostCallbacks::start(config.on_lock_lost.clone())?;
        let watchdog = Watchdog::start(Renewer {
            connections: Arc::clone(&connections),
            renewals: Arc::clone(&renewals),
            timeout: config.watchdog_timeout,
            counters: Arc::clone(&counters),
            on_lost,
        })?;
        let id = Uuid::new_v4();
        Ok(Client {
            inner: Arc::new(Inner {
                id,
                id_text: id.hyphenated().to_string(),
                config,
                connections,
                renewals,
                pubsub,
                watchdog,
                lost_callbacks,
                counters,
                shut_down: AtomicBool::new(false),
                waiting: Waiting::default(),
                pid: std::process::id(),
                next_request: AtomicU64::new(1),
            }),
        })
    }

    /// The client's random UUID, the first half of its holder fields.
    pub fn id(&self) -> Uuid {
        self.inner.id
    }

    /// What the client is doing now and has done so far: held locks,
    /// waiting threads, renewals, losses, reconnects. Reads counters kept in
    /// memory; no Redis round trip.
    ///
    /// ```no_run
    /// # fn main() -> redhold::Result<()> {
    /// let client = redhold::Client::open("redis://127.0.0.1:6379/")?;
    /// let stats = client.stats();
    /// println!("{} held, {} waiting", stats.held_locks, stats.parked_waiters);
    /// # Ok(()) }
    /// ```
    pub fn stats(&self) -> Stats {
        self.inner.counters.snapshot(
            self.inner.renewals.held(),
            self.inner.pubsub.subscribed_channels(),
        )
    }

    /// Counts a lock taken by a waiter that a release's message woke.
    pub(crate) fn count_handoff(&self) {
        Counters::bump(&self.inner.counters.local_handoffs);
    }

    /// Counts the calling thread as parked, waiting for a lock, until the
    /// value drops.
    pub(crate) fn parked_thread(&self) -> ParkedThread<'_> {
        self.inner.counters.parked()
    }

    /// How long a lock taken without a lease survives without renewal.
    pub fn watchdog_timeout(&self) -> Duration {
        self.inner.config.watchdog_timeout
    }

    /// A handle on the reentrant lock called `name`. No I/O happens until
    /// the handle is used; an invalid name is reported then.
    pub fn lock(&self, name: impl Into<String>) -> Lock {
        Lock::new(self.clone(), name.into())
    }

    /// A handle on the fair (first-come, first-served) lock called `name`.
    /// No I/O happens until the handle is used.
    pub fn fair_lock(&self, name: impl Into<String>) -> FairLock {
        Lock::new(self.clone(), name.into())
    }

    /// A handle on the fenced lock called `name`, whose every acquire returns
    /// a fencing token. It shares the plain lock's hash: a plain and a fenced
    /// lock on the same name exclude each other.
    pub fn fenced_lock(&self, name: impl Into<String>) -> FencedLock {
        Lock::new(self.clone(), name.into())
    }

    /// A handle on the spin lock called `name`: the plain lock's layout, with
    /// waiters that poll with exponential backoff instead of using pub/sub.
    pub fn spin_lock(&self, name: impl Into<String>) -> SpinLock {
        Lock::new(self.clone(), name.into())
    }

    /// A handle on the read-write lock called `name`.
    pub fn read_write_lock(&self, name: impl Into<String>) -> ReadWriteLock {
        ReadWriteLock::new(self, name.into())
    }

    /// Stops the subscriber and watchdog threads and waits for them to end,
    /// then closes the connections. Threads waiting for a lock wake up with
    /// [`Error::Shutdown`], and so does every later call; locks still held
    /// stop being renewed and expire after the watchdog timeout.
    ///
    /// `on_lock_lost` callbacks already due still run; shutdown waits at
    /// most one second for them, then leaves a callback still running to
    /// finish on its own thread. A callback may call `shutdown` itself.
    ///
    /// Calling it again does nothing. Dropping the last clone of a client
    /// stops its threads too, without waiting.
    ///
    /// # Errors
    ///
    /// None today; the `Result` leaves room for reporting a failed close.
    pub fn shutdown(&self) -> Result<()> {
        if self.inner.shut_down.swap(true, Ordering::SeqCst) {
            return Ok(());
        }
        self.inner.watchdog.shutdown();
        // Wakes every parked waiter with `Error::Shutdown`.
        self.inner.pubsub.shutdown();
        // Waiters leave the queues they joined (a fair lock's) on their way
        // out; give them one request's time to do so, then go on.
        let config = &self.inner.config;
        let grace = config
            .connect_timeout
            .saturating_add(config.response_timeout);
        if let Some(deadline) = std::time::Instant::now().checked_add(grace) {
            if !self.inner.waiting.wait_until_none(deadline) {
                log::warn!(
                    "redhold: shutdown went on while threads were still leaving lock queues"
                );
            }
        }
        self.inner.connections.close_idle();
        self.inner.lost_callbacks.shutdown();
        Ok(())
    }

    /// Whether [`shutdown`](Self::shutdown) was called.
    pub fn is_shut_down(&self) -> bool {
        self.inner.shut_down.load(Ordering::SeqCst)
    }

    // ---- for the lock kinds ----

    pub(crate) fn config(&self) -> &Config {
        &self.inner.config
    }

    pub(crate) fn pubsub(&self) -> &PubSub {
        &self.inner.pubsub
    }

    pub(crate) fn renewals(&self) -> &RenewalMap {
        &self.inner.renewals
    }

    /// The command releases are announced with (`publish`, or `spublish`
    /// with sharded pub/sub on a cluster).
    pub(crate) fn publish_command(&self) -> &'static str {
        self.inner.pubsub.publish_command()
    }

    /// The calling thread's holder field, `<client-uuid>:<thread-id>`.
    pub(crate) fn current_field(&self) -> String {
        format!("{}:{}", self.inner.id_text, thread_id::current())
    }

    /// A request id unique across clients, for the unlock latch.
    pub(crate) fn next_request_id(&self) -> String {
        let n = self.inner.next_request.fetch_add(1, Ordering::Relaxed);
        format!("{}:{n}", self.inner.id_text)
    }

    /// Fails with [`Error::Shutdown`] once the client is shut down, and
    /// with [`Error::ForkedProcess`] in a forked child.
    pub(crate) fn check_open(&self) -> Result<()> {
        self.check_process()?;
        if self.is_shut_down() {
            return Err(Error::Shutdown);
        }
        Ok(())
    }

    /// Fails with [`Error::ForkedProcess`] unless called in the process
    /// that built the client.
    fn check_process(&self) -> Result<()> {
        let pid = std::process::id();
        if pid != self.inner.pid {
            return Err(Error::ForkedProcess {
                parent: self.inner.pid,
                child: pid,
            });
        }
        Ok(())
    }

    /// Counts an acquire call that may wait, until the value drops.
    pub(crate) fn waiting(&self) -> WaitingCall<'_> {
        self.inner.waiting.enter()
    }

    /// Runs a command that takes back this client's own traces in Redis (a
    /// waiter leaving a fair queue), with the retry rule, also while the
    /// client shuts down: shutdown waits for it.
    pub(crate) fn run_cleanup<T>(
        &self,
        op: impl FnMut(&mut dyn ConnectionLike) -> RedisResult<T>,
    ) -> Result<T> {
        self.check_process()?;
        self.inner.connections.run(op)
    }

    /// Runs a command with the client's retry rule.
    pub(crate) fn run<T>(
        &self,
        op: impl FnMut(&mut dyn ConnectionLike) -> RedisResult<T>,
    ) -> Result<T> {
        self.check_open()?;
        self.inner.connections.run(op)
    }
}

impl Client {
    /// Runs a write script with the retry rule and, when the client syncs
    /// replicas and `wrote` says the script changed something, checks that
    /// enough replicas have it: [`Error::ReplicasNotSynced`] otherwise (the
    /// write stands on the master; the caller decides whether to undo it).
    pub(crate) fn run_write<T>(
        &self,
        lock: &str,
        op: impl FnMut(&mut dyn ConnectionLike) -> RedisResult<T>,
        wrote: impl Fn(&T) -> bool,
    ) -> Result<T> {
        self.check_open()?;
        let (value, acknowledged) = self.inner.connections.run_write(None, op, wrote)?;
        match (acknowledged, self.inner.connections.replicas_wanted()) {
            (Some(acknowledged), Some(wanted)) if acknowledged < wanted => {
                Err(Error::ReplicasNotSynced {
                    lock: crate::names::shorten(lock),
                    wanted,
                    acknowledged,
                })
            }
            _ => Ok(value),
        }
    }
}

impl fmt::Debug for Client {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Client")
            .field("id", &self.inner.id)
            .field("config", &self.inner.config)
            .field("held_with_watchdog", &self.inner.renewals.len())
            .field("shut_down", &self.is_shut_down())
            .finish()
    }
}
