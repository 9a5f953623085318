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

use super::connection::{self, Reader, Writer};
use super::registry::Channel;
use super::{subscriber, Shared, TICK};
use crate::config::Config;
use crate::connections::Connections;
use crate::error::Result;

/// Longest pause between two reconnect attempts.
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
        slots: Mutex<cluster::SlotMap>,
    },
}

impl Router {
    /// Chooses the mode: sharded on a cluster whose masters all run Redis 7
    /// or later (or when the builder says so), single otherwise.
    pub(super) fn new(connections: &Connections, config: &Config) -> Result<Router> {
        let single = || Router::Single {
            link: Arc::new(Link {
                id: Arc::from("pubsub"),
                writer: Writer::default(),
            }),
        };
        if !connections.backend().is_cluster() {
            return Ok(single());
        }
        #[cfg(feature = "cluster")]
        {
            let slots = cluster::SlotMap::load(connections)?;
            let sharded = match config.sharded_pubsub {
                Some(choice) => choice,
                None => slots.all_masters_at_least(connections, config, 7),
            };
            log::debug!(
                "redhold: cluster pub/sub is {}",
                if sharded { "sharded" } else { "classic" }
            );
            if sharded {
                return Ok(Router::Sharded {
                    links: Mutex::new(HashMap::new()),
                    slots: Mutex::new(slots),
                });
            }
        }
        let _ = config;
        Ok(single())
    }

    /// The command a release is announced with.
    pub(super) fn publish_command(&self) -> &'static str {
        match self {
            Router::Single { .. } => "publish",
            #[cfg(feature = "cluster")]
            Router::Sharded { .. } => "spublish",
        }
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
            let target = shared.connections.backend().pubsub_target(0)?;
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
    let (reader, writer) = connection::connect(
        target,
        &shared.tls,
        shared.connect_timeout,
        shared.response_timeout,
        TICK,
    )?;
    link.writer.attach(writer);
    Ok(reader)
}

/// Starts the subscriber thread of `link`, which [`PubSub::shutdown`](super::PubSub::shutdown)
/// joins; refused once the client stops, so that none is left behind.
fn spawn(shared: &Arc<Shared>, link: &Arc<Link>, reader: Reader) -> io::Result<()> {
    let name = match &shared.router {
        Router::Single { .. } => "redhold-subscriber".to_owned(),
        #[cfg(feature = "cluster")]
        Router::Sharded { .. } => format!("redhold-subscriber-{}", link.id),
    };
    // Checked under the lock that shutdown takes the threads with.
    let mut threads = shared.threads.lock();
    if shared.stopping.load(Ordering::SeqCst) {
        return Err(io::Error::other("the client is shutting down"));
    }
    let thread = {
        let shared = Arc::clone(shared);
        let link = Arc::clone(link);
        thread::Builder::new()
            .name(name)
            .spawn(move || subscriber::run(&shared, &link, reader))?
    };
    threads.retain(|t| !t.is_finished());
    threads.push(thread);
    Ok(())
}

/// Sends SUBSCRIBE for `channel` on the connection it belongs on. A failure
/// is only logged: the waiter then waits by TTL, and the channel is
/// subscribed again when its connection comes back.
pub(super) fn subscribe(shared: &Arc<Shared>, channel: &Arc<Channel>) {
    if let Err(e) = try_subscribe(shared, channel) {
        log::debug!("redhold: SUBSCRIBE {} not sent now: {e}", channel.name);
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
        Router::Sharded { links, slots } => {
            let slot = crate::slot::of(channel.name.as_bytes());
            let (id, target) = slots.lock().owner(slot, &shared.connections)?;
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
        Router::Sharded { links, slots } => {
            links.lock().remove(&link.id);
            relocate(shared, slots, channels);
            None
        }
    }
}

/// Single mode: connects again with backoff and subscribes every channel
/// that still has waiters.
fn reconnect(shared: &Shared, link: &Link) -> Option<Reader> {
    let (subscribe, _) = shared.router.commands();
    let mut backoff = Duration::from_millis(50);
    let mut attempt = 0usize;
    loop {
        if shared.stopping.load(Ordering::SeqCst) {
            return None;
        }
        attempt += 1;
        let opened = shared
            .connections
            .backend()
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

/// Sharded mode: learns the slots again and subscribes `channels` where
/// they live now, retrying with backoff until every waited channel is sent
/// or the client shuts down.
#[cfg(feature = "cluster")]
fn relocate(
    shared: &Arc<Shared>,
    slots: &Mutex<cluster::SlotMap>,
    mut channels: Vec<Arc<Channel>>,
) {
    let mut backoff = Duration::from_millis(50);
    while !shared.stopping.load(Ordering::SeqCst) {
        channels.retain(|c| c.has_waiters());
        if channels.is_empty() {
            return;
        }
        match cluster::SlotMap::load(&shared.connections) {
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
        if !channels.is_empty() {
            shared.pause(backoff);
            backoff = (backoff * 2).min(MAX_BACKOFF);
        }
    }
}

/// A node answered MOVED to a subscription: the slots changed. Learn them
/// again and send every unconfirmed subscription where it belongs.
pub(super) fn moved(shared: &Arc<Shared>) {
    #[cfg(feature = "cluster")]
    if let Router::Sharded { slots, .. } = &shared.router {
        relocate(shared, slots, shared.registry.unconfirmed());
    }
    #[cfg(not(feature = "cluster"))]
    let _ = shared;
}

/// `channel` was unsubscribed on the server while waiters need it (see
/// [`Registry::unsubscribed`](super::registry::Registry::unsubscribed)):
/// subscribe it again, in sharded mode wherever its slot lives now.
pub(super) fn resubscribe(shared: &Arc<Shared>, channel: Arc<Channel>) {
    #[cfg(feature = "cluster")]
    if let Router::Sharded { slots, .. } = &shared.router {
        relocate(shared, slots, vec![channel]);
        return;
    }
    subscribe(shared, &channel);
}

#[cfg(feature = "cluster")]
mod cluster {
    //! The cluster's slot map, read with `CLUSTER SLOTS`.

    use std::sync::Arc;

    use redis::{ConnectionAddr, ConnectionInfo, RedisResult, Value};

    use crate::backend::Backend;
    use crate::config::Config;
    use crate::connections::Connections;
    use crate::error::Result;

    /// Slot ranges and the master that serves each.
    #[derive(Debug, Default)]
    pub(in crate::pubsub) struct SlotMap {
        ranges: Vec<(u16, u16, String, u16)>,
    }

    impl SlotMap {
        /// Asks any node for the current slots.
        pub(in crate::pubsub) fn load(connections: &Connections) -> Result<SlotMap> {
            let reply: Value =
                connections.run(|conn| redis::cmd("CLUSTER").arg("SLOTS").query(conn))?;
            let mut ranges = Vec::new();
            if let Value::Array(entries) = reply {
                for entry in entries {
                    if let Some(range) = parse_range(&entry) {
                        ranges.push(range);
                    }
                }
            }
            Ok(SlotMap { ranges })
        }

        /// The connection id (`host:port`) and address of the master of `slot`.
        pub(in crate::pubsub) fn owner(
            &self,
            slot: u16,
            connections: &Connections,
        ) -> RedisResult<(Arc<str>, ConnectionInfo)> {
            let (_, _, host, port) = self
                .ranges
                .iter()
                .find(|(start, end, _, _)| (*start..=*end).contains(&slot))
                .ok_or_else(|| {
                    redis::RedisError::from(std::io::Error::new(
                        std::io::ErrorKind::NotFound,
                        format!("no cluster node serves slot {slot}"),
                    ))
                })?;
            let info = node_info(connections.backend(), host, *port);
            Ok((Arc::from(format!("{host}:{port}")), info))
        }

        /// Whether every master runs at least Redis `major` (sharded pub/sub
        /// needs 7). A master that cannot be asked counts as too old.
        pub(in crate::pubsub) fn all_masters_at_least(
            &self,
            connections: &Connections,
            config: &Config,
            major: u32,
        ) -> bool {
            let mut seen = std::collections::HashSet::new();
            self.ranges
                .iter()
                .filter(|(_, _, host, port)| seen.insert((host.clone(), *port)))
                .all(|(_, _, host, port)| {
                    let info = node_info(connections.backend(), host, *port);
                    major_version(info, config).is_some_and(|v| v >= major)
                })
        }
    }

    fn parse_range(entry: &Value) -> Option<(u16, u16, String, u16)> {
        let Value::Array(parts) = entry else {
            return None;
        };
        let (Value::Int(start), Value::Int(end), Value::Array(master)) =
            (parts.first()?, parts.get(1)?, parts.get(2)?)
        else {
            return None;
        };
        let host = match master.first()? {
            Value::BulkString(b) => String::from_utf8(b.clone()).ok()?,
            Value::SimpleString(s) => s.clone(),
            _ => return None,
        };
        let Value::Int(port) = master.get(1)? else {
            return None;
        };
        Some((
            u16::try_from(*start).ok()?,
            u16::try_from(*end).ok()?,
            host,
            u16::try_from(*port).ok()?,
        ))
    }

    /// The connection settings of a seed node, pointed at `host:port`.
    fn node_info(backend: &Backend, host: &str, port: u16) -> ConnectionInfo {
        // A cluster backend always has a seed; the fallback is never used.
        let seed = backend
            .pubsub_target(0)
            .or_else(|_| redis::IntoConnectionInfo::into_connection_info("redis://127.0.0.1/"))
            .unwrap_or_else(|_| unreachable!("a constant, valid URL"));
        // A node that reports no host lives where we asked.
        let host = if host.is_empty() {
            match seed.addr() {
                ConnectionAddr::Tcp(h, _) | ConnectionAddr::TcpTls { host: h, .. } => h.clone(),
                _ => host.to_owned(),
            }
        } else {
            host.to_owned()
        };
        let addr = match seed.addr() {
            ConnectionAddr::TcpTls {
                insecure,
                tls_params,
                ..
            } => ConnectionAddr::TcpTls {
                host,
                port,
                insecure: *insecure,
                tls_params: tls_params.clone(),
            },
            _ => ConnectionAddr::Tcp(host, port),
        };
        seed.set_addr(addr)
    }

    fn major_version(info: ConnectionInfo, config: &Config) -> Option<u32> {
        let client = redis::Client::open(info).ok()?;
        let mut conn = client
            .get_connection_with_timeout(config.connect_timeout)
            .ok()?;
        conn.set_read_timeout(Some(config.response_timeout)).ok()?;
        let text: String = redis::cmd("INFO").arg("server").query(&mut conn).ok()?;
        let version = text
            .lines()
            .find_map(|line| line.strip_prefix("redis_version:"))?;
        version.split('.').next()?.trim().parse().ok()
    }
}
