//! Which connection a channel is subscribed on, and how connections are
//! opened, lost and replaced.
//!
//! | mode      | used for                                        | connections            | commands                  |
//! |-----------|-------------------------------------------------|------------------------|---------------------------|
//! | `Single`  | one server, a sentinel's master, a cluster with classic pub/sub | one, reconnected forever | SUBSCRIBE / PUBLISH |
//! | `Sharded` | a cluster whose masters all run Redis 7+        | one per slot owner     | SSUBSCRIBE / SPUBLISH     |
//!
//! Classic PUBLISH on a cluster reaches subscribers on every node, so one
//! connection to any node hears every lock. Sharded messages are delivered
//! only by the node that owns the channel's slot, so each channel is
//! subscribed on its owner; when that node dies or the slot moves, the
//! channel is subscribed again where the slot lives now.
//!
//! A subscription that fails is retried until it works or nobody waits on
//! the channel any more. In single mode the connection itself is what fails,
//! and the reconnect subscribes every waited channel again. In sharded mode
//! one retry thread (`redhold-resubscribe`, started on demand, ending when
//! nothing is due) reads the slots again and sends the channels due where
//! they live now, pausing longer after each pass until a subscription is
//! confirmed; waiters meanwhile wait by TTL and are woken once it is.

use std::io;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread;
use std::time::Duration;

#[cfg(feature = "cluster")]
use std::collections::HashMap;

#[cfg(feature = "cluster")]
use parking_lot::Mutex;
use redis::{ConnectionInfo, RedisResult};

use super::registry::Channel;
use super::{subscriber, Shared, TICK};
use crate::error::Result;
use crate::server::socket::{Reader, Writer};
#[cfg(feature = "cluster")]
use crate::server::topology::SlotMap;
#[cfg(feature = "cluster")]
use crate::server::PubSubMode;
use crate::server::Server;
use crate::stats::Counters;

/// First pause between two reconnect (or sharded retry) attempts.
const MIN_BACKOFF: Duration = Duration::from_millis(50);
/// Longest pause between two reconnect (or sharded retry) attempts.
const MAX_BACKOFF: Duration = Duration::from_secs(2);
/// Channels per SUBSCRIBE when resubscribing after a reconnect.
const RESUBSCRIBE_BATCH: usize = 100;

/// One pub/sub connection: its writing half, shared by the waiters.
#[derive(Debug)]
pub(super) struct Link {
    /// Names the connection: `pubsub` in single mode, `host:port` of the
    /// node in sharded mode.
    pub(super) id: Arc<str>,
    pub(super) writer: Writer,
}

/// See the module table.
#[derive(Debug)]
pub(super) enum Router {
    Single {
        link: Arc<Link>,
    },
    #[cfg(feature = "cluster")]
    Sharded {
        links: Mutex<HashMap<Arc<str>, Arc<Link>>>,
        slots: Mutex<SlotMap>,
        retries: Mutex<Retries>,
    },
}

/// Sharded mode: the channels whose SSUBSCRIBE must be sent (again), for
/// the retry thread.
#[cfg(feature = "cluster")]
#[derive(Debug)]
pub(super) struct Retries {
    /// Channels to send; duplicates are dropped when a pass takes them.
    due: Vec<Arc<Channel>>,
    /// Whether the retry thread runs; it ends once a pass leaves nothing due.
    running: bool,
    /// The pause after the next pass: doubles after every pass, back to the
    /// minimum when a subscription is confirmed (so a node that keeps
    /// refusing is not asked in a tight loop).
    backoff: Duration,
}

impl Router {
    /// The mode the server chose: sharded on a cluster whose masters all
    /// run Redis 7 or later (or when the builder says so), single otherwise.
    pub(super) fn new(server: &Server) -> Result<Router> {
        #[cfg(feature = "cluster")]
        if server.pubsub_mode() == PubSubMode::Sharded {
            return Ok(Router::Sharded {
                links: Mutex::new(HashMap::new()),
                slots: Mutex::new(server.slot_map()?),
                retries: Mutex::new(Retries {
                    due: Vec::new(),
                    running: false,
                    backoff: MIN_BACKOFF,
                }),
            });
        }
        let _ = server;
        Ok(Router::Single {
            link: Arc::new(Link {
                id: Arc::from("pubsub"),
                writer: Writer::default(),
            }),
        })
    }

    /// SUBSCRIBE and UNSUBSCRIBE, or their sharded forms.
    fn commands(&self) -> (&'static [u8], &'static [u8]) {
        match self {
            Router::Single { .. } => (b"SUBSCRIBE", b"UNSUBSCRIBE"),
            #[cfg(feature = "cluster")]
            Router::Sharded { .. } => (b"SSUBSCRIBE", b"SUNSUBSCRIBE"),
        }
    }

    /// Closes every connection, which ends every subscriber thread's read.
    pub(super) fn close_all(&self) {
        match self {
            Router::Single { link } => link.writer.detach(),
            #[cfg(feature = "cluster")]
            Router::Sharded { links, .. } => {
                for link in links.lock().values() {
                    link.writer.detach();
                }
            }
        }
    }
}

/// Opens the first connection (single mode); sharded connections open when
/// a channel first needs one.
pub(super) fn start(shared: &Arc<Shared>) -> RedisResult<()> {
    match &shared.router {
        Router::Single { link } => {
            let target = shared.server.pubsub_target(0)?;
            let reader = open(shared, link, &target)?;
            spawn(shared, link, reader)?;
            Ok(())
        }
        #[cfg(feature = "cluster")]
        Router::Sharded { .. } => Ok(()),
    }
}

/// Connects `link` to `target` and makes it the link's socket.
fn open(shared: &Shared, link: &Link, target: &ConnectionInfo) -> RedisResult<Reader> {
    let (reader, writer) = shared.server.open_pubsub(target, TICK)?;
    link.writer.attach(writer);
    Ok(reader)
}

/// Starts the subscriber thread of `link`.
fn spawn(shared: &Arc<Shared>, link: &Arc<Link>, reader: Reader) -> io::Result<()> {
    let name = match &shared.router {
        Router::Single { .. } => "redhold-subscriber".to_owned(),
        #[cfg(feature = "cluster")]
        Router::Sharded { .. } => format!("redhold-subscriber-{}", link.id),
    };
    let link = Arc::clone(link);
    spawn_thread(shared, name, move |shared| {
        subscriber::run(shared, &link, reader)
    })
}

/// Starts a background thread, which [`PubSub::shutdown`](super::PubSub::shutdown)
/// joins; refused once the client stops, so that none is left behind.
fn spawn_thread(
    shared: &Arc<Shared>,
    name: String,
    run: impl FnOnce(&Arc<Shared>) + Send + 'static,
) -> io::Result<()> {
    // Checked under the lock that shutdown takes the threads with.
    let mut threads = shared.threads.lock();
    if shared.stopping.load(Ordering::SeqCst) {
        return Err(io::Error::other("the client is shutting down"));
    }
    let thread = {
        let shared = Arc::clone(shared);
        thread::Builder::new()
            .name(name)
            .spawn(move || run(&shared))?
    };
    threads.retain(|t| !t.is_finished());
    threads.push(thread);
    Ok(())
}

/// Sends SUBSCRIBE for `channel` on the connection it belongs on. When that
/// fails the waiter waits by TTL meanwhile, and the channel is subscribed
/// later: in single mode when the connection comes back, in sharded mode by
/// the retry thread.
pub(super) fn subscribe(shared: &Arc<Shared>, channel: &Arc<Channel>) {
    if let Err(e) = try_subscribe(shared, channel) {
        log::debug!("redhold: SUBSCRIBE {} not sent now: {e}", channel.name);
        #[cfg(feature = "cluster")]
        retry_later(shared, vec![Arc::clone(channel)]);
    }
}

fn try_subscribe(shared: &Arc<Shared>, channel: &Arc<Channel>) -> RedisResult<()> {
    let (subscribe, _) = shared.router.commands();
    let before = channel.last_send();
    let link = link_for(shared, channel).inspect_err(|_| channel.send_failed(before))?;
    let token = channel.assign(&link.id);
    if let Err(e) = link.writer.send(&[subscribe, channel.name.as_bytes()]) {
        channel.send_failed(token);
        return Err(e.into());
    }
    Ok(())
}

/// The connection `channel` belongs on, opened if need be.
fn link_for(shared: &Arc<Shared>, channel: &Channel) -> RedisResult<Arc<Link>> {
    let _ = channel; // only sharded pub/sub routes by channel
    match &shared.router {
        Router::Single { link } => Ok(Arc::clone(link)),
        #[cfg(feature = "cluster")]
        Router::Sharded { links, slots, .. } => {
            if shared.stopping.load(Ordering::SeqCst) {
                return Err(io::Error::other("the client is shutting down").into());
            }
            let slot = crate::server::slot::of(channel.name.as_bytes());
            let seed = shared.server.cluster_seed()?;
            let (id, target) = slots.lock().owner(slot, &seed)?;
            // Held while connecting, so that two waiters do not open two
            // connections to one node.
            let mut links = links.lock();
            if let Some(link) = links.get(&id) {
                return Ok(Arc::clone(link));
            }
            let link = Arc::new(Link {
                id: Arc::clone(&id),
                writer: Writer::default(),
            });
            let reader = open(shared, &link, &target)?;
            spawn(shared, &link, reader)?;
            links.insert(id, Arc::clone(&link));
            Ok(link)
        }
    }
}

/// Sends UNSUBSCRIBE for channels nobody has waited on for the linger.
pub(super) fn unsubscribe_idle(shared: &Shared, link: &Link) {
    let (_, unsubscribe) = shared.router.commands();
    for channel in shared.registry.take_idle(shared.linger, &link.id) {
        if let Err(e) = link.writer.send(&[unsubscribe, channel.name.as_bytes()]) {
            log::debug!("redhold: UNSUBSCRIBE {} not sent: {e}", channel.name);
        }
    }
}

/// The connection of `link` died. Every waiter on it is woken (a release may
/// have gone unheard). In single mode the connection is opened again, with
/// backoff, until that works or the client shuts down; in sharded mode the
/// link is dropped and its channels move to wherever their slots live now.
/// Returns the new reader, or `None` when the thread should end.
pub(super) fn link_lost(shared: &Arc<Shared>, link: &Arc<Link>) -> Option<Reader> {
    link.writer.detach();
    let channels = shared.registry.on_link(&link.id);
    for channel in &channels {
        channel.connection_lost();
    }
    match &shared.router {
        Router::Single { .. } => reconnect(shared, link),
        #[cfg(feature = "cluster")]
        Router::Sharded { links, .. } => {
            {
                let mut links = links.lock();
                if links.get(&link.id).is_some_and(|l| Arc::ptr_eq(l, link)) {
                    links.remove(&link.id);
                }
            }
            // Its channels are subscribed again wherever their slots live.
            Counters::bump(&shared.counters.pubsub_reconnects);
            retry_later(shared, channels);
            None
        }
    }
}

/// Single mode: connects again with backoff and subscribes every channel
/// that still has waiters.
fn reconnect(shared: &Shared, link: &Link) -> Option<Reader> {
    let (subscribe, _) = shared.router.commands();
    let mut backoff = MIN_BACKOFF;
    let mut attempt = 0usize;
    loop {
        if shared.stopping.load(Ordering::SeqCst) {
            return None;
        }
        attempt += 1;
        let opened = shared
            .server
            .pubsub_target(attempt)
            .and_then(|target| open(shared, link, &target));
        match opened {
            Ok(reader) => {
                let channels = shared.registry.still_waited();
                for batch in channels.chunks(RESUBSCRIBE_BATCH) {
                    let mut args: Vec<&[u8]> = vec![subscribe];
                    args.extend(batch.iter().map(|c| c.name.as_bytes()));
                    let tokens: Vec<u64> = batch.iter().map(|c| c.assign(&link.id)).collect();
                    if let Err(e) = link.writer.send(&args) {
                        // The connection is gone again; the next reconnect
                        // sends them.
                        log::debug!("redhold: resubscribe failed: {e}");
                        for (channel, token) in batch.iter().zip(tokens) {
                            channel.send_failed(token);
                        }
                    }
                }
                log::info!(
                    "redhold pub/sub connection re-established; {} channel(s) resubscribed",
                    channels.len()
                );
                Counters::bump(&shared.counters.pubsub_reconnects);
                return Some(reader);
            }
            Err(e) => {
                log::debug!("redhold pub/sub reconnect failed: {e}; next try in {backoff:?}");
                shared.pause(backoff);
                backoff = (backoff * 2).min(MAX_BACKOFF);
            }
        }
    }
}

/// Sharded mode: hands `channels` to the retry thread, which subscribes them
/// where their slots live now; starts that thread if it is not running.
#[cfg(feature = "cluster")]
fn retry_later(shared: &Arc<Shared>, channels: Vec<Arc<Channel>>) {
    let Router::Sharded { retries, .. } = &shared.router else {
        return;
    };
    if shared.stopping.load(Ordering::SeqCst) {
        return;
    }
    let mut state = retries.lock();
    state.due.extend(channels);
    if state.running || state.due.is_empty() {
        return;
    }
    state.running = true;
    drop(state);
    let started = spawn_thread(shared, "redhold-resubscribe".to_owned(), |shared| {
        retry_loop(shared)
    });
    if let Err(e) = started {
        // Waiters wait by TTL; the next failure or lost connection tries
        // to start the thread again.
        log::warn!("redhold: cannot start the pub/sub retry thread: {e}");
        retries.lock().running = false;
    }
}

/// The retry thread: one pass over the due channels, a pause, and again,
/// until a pass leaves nothing due or the client stops.
#[cfg(feature = "cluster")]
fn retry_loop(shared: &Arc<Shared>) {
    let Router::Sharded { retries, slots, .. } = &shared.router else {
        return;
    };
    loop {
        let due = {
            let mut state = retries.lock();
            if state.due.is_empty() || shared.stopping.load(Ordering::SeqCst) {
                state.running = false;
                return;
            }
            std::mem::take(&mut state.due)
        };
        let failed = relocate(shared, slots, due);
        let pause = {
            let mut state = retries.lock();
            state.due.extend(failed);
            let pause = state.backoff;
            state.backoff = (pause * 2).min(MAX_BACKOFF);
            pause
        };
        shared.pause(pause);
    }
}

/// Sharded mode: learns the slots again and sends SSUBSCRIBE for those of
/// `channels` that a waiter still needs, where their slots live now; the
/// others are forgotten. Returns the channels whose SSUBSCRIBE could not be
/// sent.
#[cfg(feature = "cluster")]
fn relocate(
    shared: &Arc<Shared>,
    slots: &Mutex<SlotMap>,
    mut channels: Vec<Arc<Channel>>,
) -> Vec<Arc<Channel>> {
    let mut seen: Vec<*const Channel> = Vec::with_capacity(channels.len());
    channels.retain(|channel| {
        let fresh = !seen.contains(&Arc::as_ptr(channel));
        seen.push(Arc::as_ptr(channel));
        fresh && !shared.registry.forget_if_unwanted(channel) && channel.wants_subscription()
    });
    if channels.is_empty() {
        return channels;
    }
    match shared.server.slot_map() {
        Ok(fresh) => *slots.lock() = fresh,
        Err(e) => log::debug!("redhold: cannot read the cluster's slots: {e}"),
    }
    channels.retain(|channel| match try_subscribe(shared, channel) {
        Ok(()) => false,
        Err(e) => {
            log::debug!("redhold: SSUBSCRIBE {} failed: {e}", channel.name);
            true
        }
    });
    channels
}

/// A subscription was confirmed: in sharded mode the retry thread's pause
/// starts from the minimum again.
pub(super) fn confirmed(shared: &Shared) {
    #[cfg(feature = "cluster")]
    if let Router::Sharded { retries, .. } = &shared.router {
        retries.lock().backoff = MIN_BACKOFF;
    }
    #[cfg(not(feature = "cluster"))]
    let _ = shared;
}

/// A node answered MOVED to a subscription: the slots changed. Every
/// unconfirmed subscription is sent again where it belongs.
pub(super) fn moved(shared: &Arc<Shared>) {
    #[cfg(feature = "cluster")]
    if let Router::Sharded { .. } = &shared.router {
        retry_later(shared, shared.registry.unconfirmed());
    }
    #[cfg(not(feature = "cluster"))]
    let _ = shared;
}

/// `link` answered with an error (say, CLUSTERDOWN). Only subscriptions get
/// replies that can fail, so in sharded mode those still unconfirmed on
/// `link` are retried; in single mode the error is only logged.
pub(super) fn refused(shared: &Arc<Shared>, link: &Link) {
    #[cfg(feature = "cluster")]
    if let Router::Sharded { .. } = &shared.router {
        let unconfirmed = shared
            .registry
            .unconfirmed()
            .into_iter()
            .filter(|channel| channel.unconfirmed_on(&link.id))
            .collect();
        retry_later(shared, unconfirmed);
    }
    #[cfg(not(feature = "cluster"))]
    let _ = (shared, link);
}

/// `channel` was unsubscribed on the server while waiters need it (see
/// [`Registry::unsubscribed`](super::registry::Registry::unsubscribed)):
/// subscribe it again, in sharded mode wherever its slot lives now.
pub(super) fn resubscribe(shared: &Arc<Shared>, channel: Arc<Channel>) {
    #[cfg(feature = "cluster")]
    if let Router::Sharded { .. } = &shared.router {
        retry_later(shared, vec![channel]);
        return;
    }
    subscribe(shared, &channel);
}
