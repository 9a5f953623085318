//! Which connection a channel is subscribed on, and how connections are
//! opened, lost and replaced.
//!
//! The connections themselves, and what the threads share, are in
//! `links.rs`.
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
use std::sync::Arc;
use std::time::{Duration, Instant};

#[cfg(feature = "cluster")]
use parking_lot::Mutex;
use redis::{ConnectionInfo, RedisResult};

use super::channel::Channel;
use super::links::{Router, Shared, MAX_BACKOFF, MIN_BACKOFF};
use super::subscriber::{Event, Link, Subscriber};
use crate::server::socket::Reader;
#[cfg(feature = "cluster")]
use crate::server::socket::Writer;
#[cfg(feature = "cluster")]
use crate::server::topology::SlotMap;
use crate::stats::Counters;

/// How often a subscriber thread wakes without traffic, to unsubscribe idle
/// channels and check that its connection is alive.
const TICK: Duration = Duration::from_secs(1);
/// Channels per SUBSCRIBE when resubscribing after a reconnect.
const RESUBSCRIBE_BATCH: usize = 100;

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
    let (mut reader, writer) = shared.server.open_pubsub(target, TICK)?;
    link.writer.attach(writer, &mut reader);
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
    let subscriber = Subscriber::new(reader, shared.server.config().response_timeout);
    spawn_thread(shared, name, move |shared| serve(shared, &link, subscriber))
}

/// Starts a background thread that sees `shared`.
pub(super) fn spawn_thread(
    shared: &Arc<Shared>,
    name: String,
    run: impl FnOnce(&Arc<Shared>) + Send + 'static,
) -> io::Result<()> {
    let for_thread = Arc::clone(shared);
    shared.threads.spawn(name, move || run(&for_thread))
}

/// The body of a subscriber thread: reads `link` until the client shuts
/// down or (sharded mode) the link is lost and its channels have moved
/// elsewhere, and acts on what the reads report.
fn serve(shared: &Arc<Shared>, link: &Arc<Link>, mut subscriber: Subscriber) {
    let mut last_housekeeping = Instant::now();
    while !shared.threads.is_stopping() {
        match subscriber.next(&shared.registry, link) {
            Event::Quiet => {}
            Event::Confirmed => confirmed(shared),
            Event::Moved => moved(shared),
            Event::Refused => refused(shared, link),
            Event::Resubscribe(channel) => resubscribe(shared, channel),
            Event::Lost(reason) => {
                if shared.threads.is_stopping() {
                    break;
                }
                log::warn!("redhold pub/sub connection {} lost ({reason})", link.id);
                match link_lost(shared, link) {
                    Some(fresh) => subscriber.reconnected(fresh),
                    None => break,
                }
            }
        }
        if last_housekeeping.elapsed() >= TICK {
            last_housekeeping = Instant::now();
            unsubscribe_idle(shared, link);
        }
    }
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
    let (subscribe, _) = shared.server.subscribe_commands();
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
            if shared.threads.is_stopping() {
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
fn unsubscribe_idle(shared: &Shared, link: &Link) {
    let (_, unsubscribe) = shared.server.subscribe_commands();
    for channel in shared
        .registry
        .take_idle(shared.server.config().subscription_linger, &link.id)
    {
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
fn link_lost(shared: &Arc<Shared>, link: &Arc<Link>) -> Option<Reader> {
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
    let (subscribe, _) = shared.server.subscribe_commands();
    let mut backoff = MIN_BACKOFF;
    let mut attempt = 0usize;
    loop {
        if shared.threads.is_stopping() {
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
                shared.threads.pause(backoff);
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
    if shared.threads.is_stopping() || !retries.lock().add(channels) {
        return;
    }
    let started = spawn_thread(shared, "redhold-resubscribe".to_owned(), |shared| {
        retry_loop(shared)
    });
    if let Err(e) = started {
        // Waiters wait by TTL; the next failure or lost connection tries
        // to start the thread again.
        log::warn!("redhold: cannot start the pub/sub retry thread: {e}");
        retries.lock().stopped();
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
        let stopping = shared.threads.is_stopping();
        let Some(due) = retries.lock().take(stopping) else {
            return;
        };
        let failed = relocate(shared, slots, due);
        let pause = retries.lock().after_pass(failed);
        shared.threads.pause(pause);
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
fn confirmed(shared: &Shared) {
    #[cfg(feature = "cluster")]
    if let Router::Sharded { retries, .. } = &shared.router {
        retries.lock().confirmed();
    }
    #[cfg(not(feature = "cluster"))]
    let _ = shared;
}

/// A node answered MOVED to a subscription: the slots changed. Every
/// unconfirmed subscription is sent again where it belongs.
fn moved(shared: &Arc<Shared>) {
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
fn refused(shared: &Arc<Shared>, link: &Link) {
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
fn resubscribe(shared: &Arc<Shared>, channel: Arc<Channel>) {
    #[cfg(feature = "cluster")]
    if let Router::Sharded { .. } = &shared.router {
        retry_later(shared, vec![channel]);
        return;
    }
    subscribe(shared, &channel);
}
