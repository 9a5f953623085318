//! Wake-ups through Redis pub/sub: one connection and one subscriber thread
//! per client, shared by every local thread that waits for a lock.
//!
//! - [`registry`]: which channels are waited on, and the parked waiters.
//! - [`connection`]: the socket, read by the subscriber, written by waiters.
//! - [`subscriber`]: the thread that reads messages and wakes waiters.
//! - [`resp`]: the reply reader for that socket.

mod connection;
mod registry;
mod resp;
mod subscriber;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::Duration;

use parking_lot::Mutex;
use redis::ConnectionInfo;

use crate::config::{redact_url, Config};
use crate::error::{Error, Result};
use crate::interrupt::Interrupt;

pub(crate) use registry::Wake;
use registry::{Channel, Joined, Registry};

/// What the subscriber thread shares with the waiting threads.
#[derive(Debug)]
struct Shared {
    registry: Registry,
    writer: connection::Writer,
    stopping: AtomicBool,
    info: ConnectionInfo,
    connect_timeout: Duration,
    response_timeout: Duration,
    linger: Duration,
}

/// How often the subscriber thread wakes without traffic, to unsubscribe
/// idle channels and check that the connection is alive.
const TICK: Duration = Duration::from_secs(1);

/// The client's pub/sub service.
#[derive(Debug)]
pub(crate) struct PubSub {
    shared: Arc<Shared>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl PubSub {
    /// Connects the pub/sub socket and starts the subscriber thread.
    pub(crate) fn start(info: ConnectionInfo, config: &Config) -> Result<PubSub> {
        let (reader, writer) =
            connection::connect(&info, config.connect_timeout, config.response_timeout, TICK)
                .map_err(|e| Error::Connect {
                    url: redact_url(&config.url),
                    source: redis::RedisError::from(e),
                })?;
        let shared = Arc::new(Shared {
            registry: Registry::default(),
            writer: connection::Writer::default(),
            stopping: AtomicBool::new(false),
            info,
            connect_timeout: config.connect_timeout,
            response_timeout: config.response_timeout,
            linger: config.subscription_linger,
        });
        shared.writer.attach(writer);
        let thread = {
            let shared = Arc::clone(&shared);
            thread::Builder::new()
                .name("redhold-subscriber".into())
                .spawn(move || subscriber::run(&shared, reader))
                .map_err(|e| Error::Redis(e.into()))?
        };
        Ok(PubSub {
            shared,
            thread: Mutex::new(Some(thread)),
        })
    }

    /// Registers the calling thread as a waiter on `channel` and makes sure
    /// the channel is subscribed. Waits for the server's confirmation at most
    /// the response timeout (or `max_wait` if shorter): without it a release could go unheard, which
    /// costs time (the waiter sleeps until the lock's TTL) but never safety.
    pub(crate) fn subscribe(&self, channel: &str, max_wait: Duration) -> Subscription<'_> {
        let registry = &self.shared.registry;
        let channel = match registry.join(channel) {
            Joined::Ready(channel) => channel,
            Joined::MustSubscribe(channel) => {
                if let Err(e) = self
                    .shared
                    .writer
                    .send(&[b"SUBSCRIBE", channel.name.as_bytes()])
                {
                    // The subscriber resubscribes every waited channel when
                    // it reconnects.
                    log::debug!("SUBSCRIBE {} not sent now: {e}", channel.name);
                }
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

    /// Stops the subscriber thread, waits for it, and wakes every waiter so
    /// that it sees the client is shut down.
    pub(crate) fn shutdown(&self) {
        self.shared.stopping.store(true, Ordering::SeqCst);
        self.shared.writer.detach();
        if let Some(thread) = self.thread.lock().take() {
            if thread.join().is_err() {
                log::error!("the redhold subscriber thread panicked");
            }
        }
        self.shared.registry.wake_everyone();
    }
}

impl Drop for PubSub {
    fn drop(&mut self) {
        self.shutdown();
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
}

impl Drop for Subscription<'_> {
    fn drop(&mut self) {
        self.registry.leave(&self.channel);
    }
}
