//! The client: connections, pub/sub and watchdog shared by every lock.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use uuid::Uuid;

use crate::config::Config;
use crate::engine::Engine;
use crate::error::Result;
use crate::identity::ClientIdentity;
use crate::lock::{FairLock, FencedLock, Lock, SpinLock};
use crate::lost_callbacks::LostCallbacks;
use crate::pubsub::PubSub;
use crate::renewals::RenewalMap;
use crate::server::Server;
use crate::stats::{Counters, Stats};
use crate::tasks::offloaded::Offloaded;
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
    identity: ClientIdentity,
    /// What every lock of this client acquires, waits and releases with
    /// (shared with the async calls under way, which run on its threads).
    engine: Arc<Engine>,
    watchdog: Watchdog,
    lost_callbacks: LostCallbacks,
}

impl Client {
    /// Connects and starts the client's threads; the builder has checked
    /// `config`.
    pub(crate) fn start(mut config: Config) -> Result<Client> {
        let id = Uuid::new_v4();
        let identity = ClientIdentity::of_this_process(config.client_name.as_deref());
        config.connection_name = Some(identity.connection_name(id));
        let server = Arc::new(Server::open(&config)?);
        let counters = Arc::new(Counters::default());
        let pubsub = PubSub::start(Arc::clone(&server), Arc::clone(&counters))?;
        let renewals = Arc::new(RenewalMap::new(Arc::clone(&counters)));
        let (lost_callbacks, on_lost) = LostCallbacks::start(config.on_lock_lost.clone())?;
        let watchdog = Watchdog::start(Renewer {
            server: Arc::clone(&server),
            renewals: Arc::clone(&renewals),
            timeout: config.watchdog_timeout,
            counters: Arc::clone(&counters),
            on_lost,
        })?;
        let async_threads = config.async_threads;
        let engine = Arc::new(Engine::new(
            server,
            pubsub,
            renewals,
            counters,
            id.hyphenated().to_string(),
            async_threads,
        ));
        Ok(Client {
            inner: Arc::new(Inner {
                id,
                identity,
                engine,
                watchdog,
                lost_callbacks,
            }),
        })
    }

    /// The client's random UUID, the first half of its holder fields.
    pub fn id(&self) -> Uuid {
        self.inner.id
    }

    /// Who the client is for operators: its name
    /// ([`ClientBuilder::name`](crate::ClientBuilder::name)), host and
    /// process id, also given to each of its connections (`CLIENT
    /// SETNAME`), where `redhold show` and [`Client::inspect`] find them.
    pub fn identity(&self) -> &ClientIdentity {
        &self.inner.identity
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
        let engine = &self.inner.engine;
        engine.counters().snapshot(
            engine.renewals().held(),
            engine.pubsub().subscribed_channels(),
            (engine.pending_releases(), engine.tasks().threads()),
        )
    }

    /// How long a lock taken without a lease survives without renewal.
    pub fn watchdog_timeout(&self) -> Duration {
        self.inner.engine.watchdog_timeout()
    }

    /// A handle on the reentrant lock called `name`. No I/O happens until
    /// the handle is used; an invalid name is reported then
    /// ([`Error::InvalidName`](crate::Error::InvalidName)): only the empty
    /// one. A blank name (`"   "`) is a name, as in Redisson.
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

    /// Stops the subscriber and watchdog threads and waits for them to end,
    /// then closes the connections. Threads waiting for a lock wake up with
    /// [`Error::Shutdown`](crate::Error::Shutdown), and so does every later call; locks still held
    /// stop being renewed and expire after the watchdog timeout.
    ///
    /// No call returns a guard once shutdown has begun: an acquire that
    /// gets the lock in Redis meanwhile (its request was sent before, or
    /// a release of another thread of this client handed it the lock)
    /// gives the hold back and fails with [`Error::Shutdown`](crate::Error::Shutdown); shutdown
    /// waits for that (within the connect plus the response timeout).
    ///
    /// `on_lock_lost` callbacks already due still run; shutdown waits at
    /// most one second for them, then leaves a callback still running to
    /// finish on its own thread. A callback may call `shutdown` itself.
    ///
    /// It returns within about twice the connect plus the response timeout,
    /// plus one second for callbacks, whatever the server does: waiters get
    /// one request's time, and a subscriber thread caught reconnecting
    /// gives its connect timeout and its handshake one response timeout
    /// before it sees the shutdown (a reply trickled one byte at a time
    /// included: every reply has one deadline, not one per read).
    ///
    /// Calling it again does nothing. Dropping the last clone of a client
    /// stops its threads too, without waiting.
    ///
    /// # Errors
    ///
    /// [`Error::ForkedProcess`](crate::Error::ForkedProcess) in a `fork()`ed
    /// child: the client, its threads and its connections are the
    /// parent's, and the child leaves them alone.
    pub fn shutdown(&self) -> Result<()> {
        let server = self.inner.engine.server();
        // Before anything else: the child has none of the parent's threads
        // to join, and shares its sockets.
        server.check_process()?;
        if !server.close() {
            return Ok(());
        }
        self.inner.watchdog.shutdown();
        // Wakes every parked waiter with `Error::Shutdown`; waiters leave
        // the queues they joined (a fair lock's) on their way out, and an
        // acquire that got the lock as shutdown began gives it back: they
        // get one request's time to do so.
        let config = server.config();
        let grace = config
            .connect_timeout
            .saturating_add(config.response_timeout);
        if !self.inner.engine.shutdown(grace) {
            log::warn!("redhold: shutdown went on while threads were still leaving lock queues");
        }
        server.close_idle();
        self.inner.lost_callbacks.shutdown();
        Ok(())
    }

    /// [`shutdown`](Self::shutdown) for async callers: it runs on a thread
    /// of its own, so that the executor's thread never waits for it, and
    /// the future reports how it went. Async calls under way end with
    /// [`Error::Shutdown`](crate::Error::Shutdown) (what they took given
    /// back first), as threads' calls do.
    ///
    /// # Errors
    ///
    /// As [`shutdown`](Self::shutdown).
    pub fn shutdown_async(&self) -> ShutdownFuture {
        let client = self.clone();
        ShutdownFuture {
            call: Offloaded::on_thread("redhold-shutdown", move || client.shutdown()),
        }
    }

    /// Whether [`shutdown`](Self::shutdown) was called.
    pub fn is_shut_down(&self) -> bool {
        self.inner.engine.server().is_closed()
    }

    /// The settings the client was built with.
    pub(crate) fn config(&self) -> &Config {
        self.inner.engine.server().config()
    }

    /// The acquire / wait / release machinery of every lock handle.
    pub(crate) fn engine(&self) -> &Arc<Engine> {
        &self.inner.engine
    }
}

impl Drop for Client {
    /// In a `fork()`ed child, the last clone leaves the client to the
    /// parent: its connections are the parent's sockets, which closing for
    /// both processes (`shutdown(2)`, a TLS close_notify) would break, and
    /// its threads, mutexes and channels are the parent's too. Leaked
    /// instead: the child's copies of the sockets close when it exits.
    fn drop(&mut self) {
        // Only the last clone's drop could end the client; a getpid per
        // handle dropped would cost every lock call a syscall.
        if Arc::strong_count(&self.inner) == 1
            && self.inner.engine.server().check_process().is_err()
        {
            std::mem::forget(Arc::clone(&self.inner));
        }
    }
}

impl fmt::Debug for Client {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Client")
            .field("id", &self.inner.id)
            .field("config", self.config())
            .field("held_with_watchdog", &self.inner.engine.renewals().len())
            .field("shut_down", &self.is_shut_down())
            .finish()
    }
}

/// The future of [`Client::shutdown_async`]: the shutdown runs on a thread
/// of its own; dropping the future does not stop it.
#[must_use = "futures do nothing unless `.await`ed or polled"]
#[derive(Debug)]
pub struct ShutdownFuture {
    call: Offloaded<()>,
}

impl Future for ShutdownFuture {
    type Output = Result<()>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<()>> {
        Pin::new(&mut self.call).poll(cx)
    }
}
