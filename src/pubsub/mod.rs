//! Wake-ups through Redis pub/sub, shared by every local thread that waits
//! for a lock.
//!
//! - [`registry`]: which channels are waited on, and the parked waiters.
//! - [`router`]: which connection a channel is subscribed on: the one
//!   connection of a client, or (sharded pub/sub on a cluster) the
//!   connection to the node that owns the channel's slot.
//! - [`connection`]: a socket, read by its subscriber thread, written by
//!   waiters.
//! - [`subscriber`]: the thread that reads one connection and wakes waiters.
//! - `tls` (with the `tls` feature): the same socket over TLS.
//! - [`resp`]: the reply reader for those sockets.
//!
//! A client has one pub/sub connection and one subscriber thread, except
//! with sharded pub/sub on a cluster, where it has one of each per node that
//! owns a waited channel.

mod connection;
mod registry;
mod resp;
mod router;
mod subscriber;
#[cfg(feature = "tls")]
mod tls;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use crate::config::Config;
use crate::connections::Connections;
use crate::error::Result;
use crate::interrupt::Interrupt;
use crate::stats::Counters;

pub(crate) use registry::Wake;
use registry::{Channel, Joined, Registry};
use router::Router;

/// What the subscriber threads share with the waiting threads.
#[derive(Debug)]
struct Shared {
    registry: Registry,
    router: Router,
    stopping: AtomicBool,
    /// The command connections: how to reach the deployment, and where to
    /// ask a cluster for its slots.
    connections: Arc<Connections>,
    /// The trusted roots for `rediss://` connections, prepared once.
    tls: connection::TlsConnector,
    connect_timeout: Duration,
    response_timeout: Duration,
    linger: Duration,
    /// Every background thread started (subscribers, and the sharded
    /// retry thread), unparked when the client stops and joined by
    /// [`PubSub::shutdown`].
    threads: Mutex<Vec<JoinHandle<()>>>,
    /// Where reconnects are counted, for [`Stats`](crate::Stats).
    counters: Arc<Counters>,
}

impl Shared {
    /// Sleeps for `duration`, or less if the client stops meanwhile
    /// ([`PubSub::stop`] unparks every background thread).
    fn pause(&self, duration: Duration) {
        let deadline = Instant::now().checked_add(duration);
        while !self.stopping.load(Ordering::SeqCst) {
            match deadline {
                Some(deadline) => {
                    let now = Instant::now();
                    if now >= deadline {
                        return;
                    }
                    thread::park_timeout(deadline - now);
                }
                None => thread::park(),
            }
        }
    }
}

/// How often a subscriber thread wakes without traffic, to unsubscribe idle
/// channels and check that its connection is alive.
const TICK: Duration = Duration::from_secs(1);

/// The client's pub/sub service.
#[derive(Debug)]
pub(crate) struct PubSub {
    shared: Arc<Shared>,
}

impl PubSub {
    /// Connects (or, for sharded pub/sub, learns the cluster's slots) and
    /// starts the subscriber thread.
    pub(crate) fn start(
        connections: Arc<Connections>,
        config: &Config,
        counters: Arc<Counters>,
    ) -> Result<PubSub> {
        let router = Router::new(&connections, config)?;
        let shared = Arc::new(Shared {
            registry: Registry::default(),
            router,
            stopping: AtomicBool::new(false),
            connections,
            tls: connection::TlsConnector::new(config.tls_root_cert.clone()),
            connect_timeout: config.connect_timeout,
            response_timeout: config.response_timeout,
            linger: config.subscription_linger,
            threads: Mutex::new(Vec::new()),
            counters,
        });
        router::start(&shared).map_err(|source| crate::error::Error::Connect {
            url: config.target(),
            source,
        })?;
        Ok(PubSub { shared })
    }

    /// The command a release announces itself with: `spublish` with sharded
    /// pub/sub, else `publish`.
    pub(crate) fn publish_command(&self) -> &'static str {
        self.shared.router.publish_command()
    }

    /// Registers the calling thread as a waiter on `channel` and makes sure
    /// the channel is subscribed. Waits for the server's confirmation at most
    /// the response timeout (or `max_wait` if shorter), and only while a
    /// SUBSCRIBE is on its way: without it a release could go unheard, which
    /// costs time (the waiter sleeps until the lock's TTL, or until the
    /// subscription is confirmed later) but never safety.
    pub(crate) fn subscribe(&self, channel: &str, max_wait: Duration) -> Subscription<'_> {
        let registry = &self.shared.registry;
        let channel = match registry.join(channel) {
            Joined::Ready(channel) => channel,
            Joined::MustSubscribe(channel) => {
                router::subscribe(&self.shared, &channel);
                channel
            }
        };
        let stopping = self.shared.stopping.load(Ordering::SeqCst);
        if !stopping
            && !channel.is_subscribed()
            && !channel.wait_subscribed(self.shared.response_timeout.min(max_wait))
        {
            log::debug!(
                "subscription to {} not confirmed in time; waiting by TTL",
                channel.name
            );
        }
        Subscription { registry, channel }
    }

    /// A local thread fully released the lock announced on `channel`; see
    /// [`Channel::expect_handoff`].
    pub(crate) fn released(&self, channel: &str, grace: Duration) {
        if let Some(channel) = self.shared.registry.get(channel.as_bytes()) {
            channel.expect_handoff(grace);
        }
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

    /// Whether a thread about to take the lock announced on `channel` should
    /// stand back for a local waiter that is being woken.
    pub(crate) fn handoff_pending(&self, channel: &str) -> bool {
        self.shared
            .registry
            .get(channel.as_bytes())
            .is_some_and(|channel| channel.handoff_pending())
    }

    /// Stops the background threads, wakes every waiter so that it sees the
    /// client is shut down, and waits for the threads to end.
    pub(crate) fn shutdown(&self) {
        self.stop();
        let threads = std::mem::take(&mut *self.shared.threads.lock());
        for thread in threads {
            if thread.join().is_err() {
                log::error!("a redhold pub/sub thread panicked");
            }
        }
    }

    /// Tells the background threads to stop, without waiting for them: the
    /// connections are closed (which ends every blocking read) and their
    /// pauses cut short. Waiters are woken first, so that none waits for a
    /// thread: a thread in the middle of a connection attempt ends only
    /// once that attempt does (within the connect and response timeouts).
    fn stop(&self) {
        self.shared.stopping.store(true, Ordering::SeqCst);
        self.shared.registry.wake_everyone();
        self.shared.router.close_all();
        for thread in self.shared.threads.lock().iter() {
            thread.thread().unpark();
        }
    }
}

impl Drop for PubSub {
    /// Stops the threads without joining them: dropping the last `Client`
    /// never blocks (see [`PubSub::stop`]).
    fn drop(&mut self) {
        self.stop();
    }
}

/// A thread's membership of a channel's waiters; leaving is automatic on drop.
#[derive(Debug)]
pub(crate) struct Subscription<'a> {
    registry: &'a Registry,
    channel: Arc<Channel>,
}

impl Subscription<'_> {
    /// Parks until a release is announced, `timeout` passes, or `interrupt`
    /// is triggered.
    pub(crate) fn park(&self, timeout: Duration, interrupt: Option<&Interrupt>) -> Wake {
        self.channel.park(timeout, interrupt)
    }

    /// Hands a wake-up this waiter received but will not use to the next one.
    pub(crate) fn pass_on(&self) {
        self.channel.wake_one();
    }

    /// This waiter, woken by a release, has made its attempt on the lock.
    pub(crate) fn handoff_done(&self) {
        self.channel.handoff_done();
    }
}

impl Drop for Subscription<'_> {
    fn drop(&mut self) {
        self.registry.leave(&self.channel);
    }
}
