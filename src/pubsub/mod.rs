//! Wake-ups through Redis pub/sub, shared by every local thread that waits
//! for a lock.
//!
//! - [`registry`]: which channels are waited on, and the parked waiters.
//! - [`router`]: which connection a channel is subscribed on: the one
//!   connection of a client, or (sharded pub/sub on a cluster) the
//!   connection to the node that owns the channel's slot.
//! - [`subscriber`]: the thread that reads one connection and wakes waiters.
//!
//! The sockets themselves, their TLS and their reply reader belong to the
//! server layer (`crate::server::socket`).
//!
//! A client has one pub/sub connection and one subscriber thread, except
//! with sharded pub/sub on a cluster, where it has one of each per node that
//! owns a waited channel.

mod channel;
#[cfg(feature = "cluster")]
mod classic_watch;
mod handover;
mod links;
mod locks;
mod registry;
mod reserved;
#[cfg(feature = "cluster")]
mod retries;
mod router;
#[cfg(feature = "sentinel")]
mod sentinel_watch;
mod subscriber;
mod threads;
mod waiter;
mod waiters;

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::error::Result;
use crate::interrupt::Interrupt;
use crate::server::Server;
use crate::stats::Counters;

use channel::Channel;
pub(crate) use handover::Offer;
use links::{Router, Shared};
use registry::{Joined, Registry};
pub(crate) use reserved::Reserved;
pub(crate) use waiter::{Waiter, Wake};
use waiters::Waiters;

/// The client's pub/sub service.
#[derive(Debug)]
pub(crate) struct PubSub {
    shared: Arc<Shared>,
}

impl PubSub {
    /// Connects (or, for sharded pub/sub, learns the cluster's slots) and
    /// starts the subscriber thread.
    pub(crate) fn start(server: Arc<Server>, counters: Arc<Counters>) -> Result<PubSub> {
        let router = Router::new(&server)?;
        let target = server.config().target();
        #[cfg(feature = "sentinel")]
        let sentinel_watches = (0..sentinel_watch::watches(&server))
            .map(|_| Default::default())
            .collect();
        let shared = Arc::new(Shared {
            registry: Registry::default(),
            router,
            threads: Default::default(),
            server,
            counters,
            #[cfg(feature = "sentinel")]
            sentinel_watches,
            #[cfg(feature = "cluster")]
            classic_watch: subscriber::Link {
                id: Arc::from("classic-watch"),
                writer: Default::default(),
            },
        });
        router::start(&shared).map_err(|source| crate::error::Error::Connect {
            url: target,
            source,
        })?;
        // Without it the client still works, and follows a failover when
        // its connections to the old master fail.
        #[cfg(feature = "sentinel")]
        if let Err(e) = sentinel_watch::start(&shared) {
            log::warn!("redhold: cannot start every sentinel watch thread: {e}");
        }
        // Without it the client still works; classic releases then reach
        // its waiters only through the lock's TTL.
        #[cfg(feature = "cluster")]
        if let Err(e) = classic_watch::start(&shared) {
            log::warn!("redhold: cannot start the classic pub/sub watch thread: {e}");
        }
        Ok(PubSub { shared })
    }

    /// Marks where `channel` stands now, when this client is subscribed to
    /// it, so that a waiter that tried the lock after the mark and then
    /// joined can ask [`Subscription::quiet_since`] whether a release may
    /// have been announced before it joined.
    pub(crate) fn quiet_mark(&self, channel: &str) -> Option<QuietMark> {
        let channel = self.shared.registry.get(channel.as_bytes())?;
        let mark = channel.quiet_mark()?;
        Some(QuietMark { channel, mark })
    }

    /// Registers the calling thread as a waiter for `lock` on `channel` (the
    /// channel `lock`'s releases are announced on) and makes sure the
    /// channel is subscribed. Waits for the server's confirmation at most
    /// the response timeout (or `max_wait` if shorter), and only while a
    /// SUBSCRIBE is on its way: without it a release could go unheard, which
    /// costs time (the waiter sleeps until the lock's TTL, or until the
    /// subscription is confirmed later) but never safety.
    pub(crate) fn subscribe(
        &self,
        channel: &str,
        lock: &Arc<str>,
        max_wait: Duration,
    ) -> Subscription {
        let registry = &self.shared.registry;
        let channel = match registry.join(channel, lock) {
            Joined::Ready(channel) => channel,
            Joined::MustSubscribe(channel) => {
                router::subscribe(&self.shared, &channel);
                channel
            }
        };
        let stopping = self.shared.threads.is_stopping();
        if !stopping
            && !channel.is_subscribed()
            && !channel.wait_subscribed(self.shared.server.config().response_timeout.min(max_wait))
        {
            log::debug!(
                "subscription to {} not confirmed in time; waiting by TTL",
                channel.name
            );
        }
        Subscription {
            shared: Arc::clone(&self.shared),
            channel,
            lock: Arc::clone(lock),
        }
    }

    /// A local thread fully released `lock`, announced on `channel`, and
    /// `heard` subscribers heard it (when the script says); see
    /// [`Channel::expect_handoff`].
    pub(crate) fn released(&self, channel: &str, lock: &str, grace: Duration, heard: Option<u64>) {
        if let Some(channel) = self.shared.registry.get(channel.as_bytes()) {
            channel.expect_handoff(lock, grace, heard);
        }
    }

    /// Reserves a thread parked for `lock` on `channel` that a release
    /// about to free `lock` may hand it to directly (see `handover.rs`).
    /// Threads parked on the same channel for another lock (`x` and `{x}`
    /// share one) are never chosen.
    pub(crate) fn reserve_successor(&self, channel: &str, lock: &Arc<str>) -> Option<Reserved> {
        let channel = self.shared.registry.get(channel.as_bytes())?;
        let (waiter, offer) = channel.with_lock(lock, Waiters::reserve)??;
        Some(Reserved::new(channel, Arc::clone(lock), waiter, offer))
    }

    /// How many channels the server has confirmed a subscription to.
    pub(crate) fn subscribed_channels(&self) -> usize {
        self.shared
            .registry
            .all()
            .iter()
            .filter(|channel| channel.is_subscribed())
            .count()
    }

    /// Whether a thread about to take `lock`, announced on `channel`,
    /// should stand back for a local waiter of it that is being woken.
    pub(crate) fn handoff_pending(&self, channel: &str, lock: &str) -> bool {
        self.shared
            .registry
            .get(channel.as_bytes())
            .and_then(|channel| channel.with_lock(lock, |waiters| waiters.handoff_pending()))
            .unwrap_or(false)
    }

    /// Stops the background threads, wakes every waiter so that it sees the
    /// client is shut down, and waits for the threads to end.
    pub(crate) fn shutdown(&self) {
        self.stop();
        self.shared.threads.join_all();
    }

    /// Tells the background threads to stop, without waiting for them: the
    /// connections are closed (which ends every blocking read) and their
    /// pauses cut short. Waiters are woken first, so that none waits for a
    /// thread: a thread in the middle of a connection attempt ends only
    /// once that attempt does (within the connect and response timeouts).
    fn stop(&self) {
        self.shared.threads.stop();
        self.shared.registry.wake_everyone();
        self.shared.router.close_all();
        #[cfg(feature = "sentinel")]
        for watch in &self.shared.sentinel_watches {
            watch.detach();
        }
        #[cfg(feature = "cluster")]
        self.shared.classic_watch.writer.detach();
        self.shared.threads.unpark_all();
    }
}

impl Drop for PubSub {
    /// Stops the threads without joining them: dropping the last `Client`
    /// never blocks (see [`PubSub::stop`]). In a `fork()`ed child (which
    /// `Client`'s drop keeps from getting here) it does nothing: the
    /// connections are the parent's too.
    fn drop(&mut self) {
        if self.shared.server.check_process().is_ok() {
            self.stop();
        }
    }
}

/// A waiter's membership of a channel's waiters for one lock (a thread's,
/// or an async call's, which may move between the client's threads);
/// leaving is automatic on drop.
#[derive(Debug)]
pub(crate) struct Subscription {
    shared: Arc<Shared>,
    channel: Arc<Channel>,
    /// The lock waited for (other locks may share the channel).
    lock: Arc<str>,
}

/// Where a subscribed channel stood: see [`PubSub::quiet_mark`].
#[derive(Debug)]
pub(crate) struct QuietMark {
    channel: Arc<Channel>,
    mark: u64,
}

impl Subscription {
    /// Whether the channel has stayed subscribed, and heard nothing, since
    /// `mark` was taken (the same channel: not one forgotten and made
    /// again): no release was announced before this waiter joined, so a
    /// lock found busy after the mark is still busy, or its release wakes
    /// this waiter.
    pub(crate) fn quiet_since(&self, mark: &QuietMark) -> bool {
        Arc::ptr_eq(&self.channel, &mark.channel) && self.channel.quiet_mark() == Some(mark.mark)
    }

    /// Parks until a release is announced, a local release hands the lock
    /// over (only with an `offer`), `timeout` passes, or `interrupt` is
    /// triggered.
    pub(crate) fn park(
        &self,
        timeout: Duration,
        interrupt: Option<&Interrupt>,
        offer: Option<Offer>,
    ) -> Wake {
        self.channel.park(&self.lock, timeout, interrupt, offer)
    }

    /// Puts this waiter, an async call's, in the line until `until` at the
    /// latest (see [`Channel::park_async`]).
    pub(crate) fn park_async(
        &self,
        offer: Option<Offer>,
        until: Option<Instant>,
        callback: Arc<dyn Fn() + Send + Sync>,
    ) -> std::result::Result<Arc<Waiter>, Wake> {
        self.channel.park_async(&self.lock, offer, until, callback)
    }

    /// This async call's `waiter` stops waiting (see
    /// [`Channel::leave_async`]).
    pub(crate) fn leave_async(&self, waiter: &Arc<Waiter>) -> Option<Wake> {
        self.channel.leave_async(&self.lock, waiter)
    }

    /// Hands a wake-up this waiter received but will not use to the next
    /// waiter of the same lock.
    pub(crate) fn pass_on(&self) {
        self.channel.with_lock(&self.lock, Waiters::wake_one);
    }

    /// This call took the lock with a TTL ending at `expires`: the local
    /// waiters still parked for it sleep no later (see
    /// [`Waiters::bound_parked`]).
    pub(crate) fn bound_parked(&self, expires: Instant) {
        self.channel
            .with_lock(&self.lock, |waiters| waiters.bound_parked(expires));
    }

    /// This waiter, woken by a release, has made its attempt on the lock.
    pub(crate) fn handoff_done(&self) {
        self.channel.with_lock(&self.lock, Waiters::handoff_done);
    }

    /// How long this waiter, woken by an announcement another process
    /// heard too, should still stand back for it (see `handover.rs`).
    pub(crate) fn courtesy_left(&self) -> Option<Duration> {
        self.channel
            .with_lock(&self.lock, |waiters| waiters.courtesy_left())
            .flatten()
    }

    /// This waiter stood back and then tried the lock: `used` when it found
    /// the lock taken.
    pub(crate) fn courtesy_ended(&self, used: bool) {
        self.channel
            .with_lock(&self.lock, |waiters| waiters.courtesy_ended(used));
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        self.shared.registry.leave(&self.channel, &self.lock);
    }
}
