//! Following a Sentinel failover as soon as the sentinels announce it.
//!
//! Command connections and the pub/sub connection find the master through
//! the sentinels when they open, and then stay where they are. A master
//! that the sentinels replace while it still runs (cut off from them, or
//! stalled past their `down-after-milliseconds`) goes on serving those
//! connections until the sentinels demote it; without `sync_replicas`,
//! every lock taken there meanwhile can have a second holder on the new
//! master, each told `Ok`.
//!
//! So a client of a Sentinel deployment keeps one more connection to each
//! sentinel (to [`MAX_WATCHES`] of them at most), subscribed to
//! `+switch-master`. One sentinel is not enough: the one a look-up asks
//! first may be the one that never learns the switch (cut off from the
//! others and the new master), and it would hide it. When the sentinels
//! move this client's master, the client drops its command connections
//! (the idle ones at once, the busy ones when their command is over) and
//! its pub/sub connection; the next ones are looked up through the
//! sentinels again, the announced master first.
//!
//! Each time a watch connects it first asks where the master is (`SENTINEL
//! MASTER`, with the configuration epoch), so a move announced while it
//! was away is not missed. A stale sentinel answers with the old master and
//! an older epoch: the watches share what they know ([`Known`]), and only a
//! newer epoch, or a `+switch-master`, moves the client. The connection is
//! checked with `PING` when quiet, and replaced (with backoff; with more
//! sentinels than watches, by one to another sentinel) when it fails.
//!
//! The threads, `redhold-sentinel-watch-<k>`, one per watch, are pub/sub
//! threads: started with the client, stopped and joined at shutdown.

use std::io;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use super::links::{Router, Shared, MAX_BACKOFF, MIN_BACKOFF};
use crate::server::resp::Frame;
use crate::server::{Sentinels, Server};

/// The most sentinels watched at once, each with a thread and a socket:
/// every sentinel of a usual deployment (three or five). With more, a
/// watch whose sentinel fails moves on to another.
pub(super) const MAX_WATCHES: usize = 5;
/// How often a watch's read wakes up to check the stop flag.
const TICK: Duration = Duration::from_secs(1);
/// How long a sentinel connection may stay quiet before a `PING`.
const PING_AFTER: Duration = Duration::from_secs(3);
/// The channel on which sentinels announce a new master.
const SWITCH_CHANNEL: &[u8] = b"+switch-master";

/// How many watches `server` needs: one per sentinel, at most
/// [`MAX_WATCHES`]; none without sentinels.
pub(super) fn watches(server: &Server) -> usize {
    server
        .pool()
        .backend()
        .sentinels()
        .map_or(0, |sentinels| sentinels.count().min(MAX_WATCHES))
}

/// Starts one watch per writer of `shared.sentinel_watches` (none when the
/// client does not find its master through sentinels).
pub(super) fn start(shared: &Arc<Shared>) -> io::Result<()> {
    let Some(sentinels) = shared.server.pool().backend().sentinels() else {
        return Ok(());
    };
    let known = Arc::new(Mutex::new(Known {
        address: sentinels.last_master(),
        ..Known::default()
    }));
    for watch in 0..shared.sentinel_watches.len() {
        let known = Arc::clone(&known);
        super::router::spawn_thread(
            shared,
            format!("redhold-sentinel-watch-{watch}"),
            move |shared| run(shared, watch, &known),
        )?;
    }
    Ok(())
}

/// A watch's thread: listens on sentinel `watch` until the client stops;
/// after a failure on the same one again, or, with more sentinels than
/// watches, on the next of `watch + watches`, `watch + 2 * watches`, ...
/// (modulo their number).
fn run(shared: &Arc<Shared>, watch: usize, known: &Mutex<Known>) {
    let Some(sentinels) = shared.server.pool().backend().sentinels() else {
        return;
    };
    let step = shared.sentinel_watches.len();
    let mut backoff = MIN_BACKOFF;
    let mut next = watch;
    while !shared.threads.is_stopping() {
        match listen(shared, sentinels, watch, next, known) {
            Ok(()) => backoff = MIN_BACKOFF,
            Err(e) => {
                log::debug!("redhold: sentinel watch {watch}: {e}; next try in {backoff:?}");
                shared.threads.pause(backoff);
                backoff = (backoff * 2).min(MAX_BACKOFF);
            }
        }
        next = next.wrapping_add(step);
    }
}

/// Connects watch `watch` to sentinel `index`, catches up with where the
/// master is, and acts on every move it announces. Returns `Ok` when the
/// client stops, an error when the connection fails (it has then been
/// replaced at least once if it ever worked: the caller's backoff starts
/// over).
fn listen(
    shared: &Shared,
    sentinels: &Sentinels,
    watch: usize,
    index: usize,
    known: &Mutex<Known>,
) -> io::Result<()> {
    let config = shared.server.config();
    let timeouts = (config.connect_timeout, config.response_timeout);
    let (mut reader, stream, sentinel) = sentinels.open_watch(index, timeouts, TICK)?;
    let writer = &shared.sentinel_watches[watch];
    writer.attach(stream, &mut reader);
    // Closed on every way out; shutdown closes it too, which ends a read.
    let _detach = Detach(writer);
    if shared.threads.is_stopping() {
        return Ok(());
    }
    let name = sentinels.master_name().as_bytes();
    writer.send(&[b"SENTINEL", b"MASTER", name])?;
    let deadline = Instant::now().checked_add(config.response_timeout);
    let reply = loop {
        if let Some(frame) = reader.next()? {
            break frame;
        }
        let late = deadline.is_some_and(|d| Instant::now() >= d);
        if late || shared.threads.is_stopping() {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!("sentinel {sentinel} did not say where the master is in time"),
            ));
        }
    };
    if let Some((address, epoch)) = master_state(&reply) {
        let moved = known.lock().heard_state(address, epoch);
        if let Some(address) = moved {
            follow(shared, &address);
        }
    }
    writer.send(&[b"SUBSCRIBE", SWITCH_CHANNEL])?;
    let mut heard = Instant::now();
    let mut ping_sent: Option<Instant> = None;
    while !shared.threads.is_stopping() {
        match reader.next()? {
            Some(frame) => {
                heard = Instant::now();
                ping_sent = None;
                if let Frame::Error(refusal) = &frame {
                    // An ACL without SUBSCRIBE, say: the client then follows
                    // a failover only through its other watches, or when
                    // its connections fail.
                    log::warn!(
                        "redhold: sentinel {sentinel} refused the watch: {}",
                        String::from_utf8_lossy(refusal)
                    );
                } else if let Some(address) = switched_to(&frame, name) {
                    let moved = known.lock().heard_switch(address);
                    if let Some(address) = moved {
                        follow(shared, &address);
                    }
                }
            }
            None => match ping_sent {
                Some(sent) if sent.elapsed() >= config.response_timeout => {
                    return Err(io::Error::new(
                        io::ErrorKind::TimedOut,
                        format!("sentinel {sentinel} did not answer PING in time"),
                    ));
                }
                Some(_) => {}
                None if heard.elapsed() >= PING_AFTER => {
                    writer.send(&[b"PING"])?;
                    ping_sent = Some(Instant::now());
                }
                None => {}
            },
        }
    }
    Ok(())
}

/// Where the watches believe the master is, shared by them, so that a
/// move is acted on once, and a stale sentinel's word does not undo it.
///
/// | heard                                   | when                                  | effect |
/// |-----------------------------------------|---------------------------------------|--------|
/// | `+switch-master` to another address     | always                                | move; the epoch is at least one more than known |
/// | `SENTINEL MASTER`: address, epoch       | no epoch known, and no switch since   | move if the address differs; epoch learned |
/// | `SENTINEL MASTER`: address, epoch       | epoch newer than known                | move if the address differs; epoch learned |
/// | `SENTINEL MASTER`: the known address    | epoch known or not, not older         | epoch learned |
/// | `SENTINEL MASTER`: anything else        |                                       | ignored: a stale sentinel |
#[derive(Debug, Default)]
struct Known {
    /// `ip:port` of the master, as the last look-up or watch found it.
    address: Option<String>,
    /// The sentinels' configuration epoch of `address`, when known: the
    /// lowest it can be.
    epoch: Option<u64>,
    /// A `+switch-master` moved `address` while no epoch was known: only
    /// a sentinel that names the same address can tell the epoch now.
    switched: bool,
}

impl Known {
    /// A `+switch-master` to `address`: the new master, when it moved.
    fn heard_switch(&mut self, address: String) -> Option<String> {
        if self.address.as_ref() == Some(&address) {
            return None;
        }
        // A switch is a newer configuration than any the watches heard.
        self.epoch = self.epoch.map(|e| e.saturating_add(1));
        self.switched = self.epoch.is_none();
        self.moved_to(address)
    }

    /// A sentinel says the master is at `address` with configuration
    /// `epoch`: the new master, when it moved.
    fn heard_state(&mut self, address: String, epoch: u64) -> Option<String> {
        let same = self.address.as_ref() == Some(&address);
        let believed = match self.epoch {
            Some(known) => epoch > known || (epoch == known && same),
            None => !self.switched || same,
        };
        if !believed {
            log::debug!(
                "redhold: a sentinel names {address} (epoch {epoch}) as the master;                  ignored: the watches know a newer configuration"
            );
            return None;
        }
        self.epoch = Some(self.epoch.map_or(epoch, |known| known.max(epoch)));
        self.switched = false;
        if same {
            return None;
        }
        self.moved_to(address)
    }

    /// Records `address`; the new master when there was an old one.
    fn moved_to(&mut self, address: String) -> Option<String> {
        let old = self.address.replace(address.clone())?;
        log::warn!(
            "redhold: the sentinels moved the master from {old} to {address}; \
             reconnecting to the new one"
        );
        Some(address)
    }
}

/// The master moved to `address`: the connections to the old one go.
fn follow(shared: &Shared, address: &str) {
    // The sentinel a look-up asks first may not know yet, while the old
    // master still answers as one: the new connections go to the announced
    // master.
    if let Some(sentinels) = shared.server.pool().backend().sentinels() {
        sentinels.switched_to(address);
    }
    master_moved(shared);
}

/// Closes the watcher's socket when dropped.
struct Detach<'a>(&'a crate::server::socket::Writer);

impl Drop for Detach<'_> {
    fn drop(&mut self) {
        self.0.detach();
    }
}

/// Drops every connection that leads to the old master: the command
/// connections (through the pool) and the pub/sub connection, whose
/// subscriber reconnects to the new master and subscribes again.
fn master_moved(shared: &Shared) {
    shared.server.pool().master_switched();
    match &shared.router {
        Router::Single { link } => link.writer.detach(),
        #[cfg(feature = "cluster")]
        Router::Sharded { .. } => {}
    }
}

/// `ip:port` and the configuration epoch from a `SENTINEL MASTER` reply
/// (field, value, field, value, ...; an error when the sentinel knows no
/// such master).
fn master_state(frame: &Frame) -> Option<(String, u64)> {
    let Frame::Array(Some(items)) = frame else {
        return None;
    };
    let field = |wanted: &[u8]| {
        items.chunks_exact(2).find_map(|pair| match pair {
            [Frame::Bulk(Some(key)), Frame::Bulk(Some(value))] if key.as_slice() == wanted => {
                std::str::from_utf8(value).ok()
            }
            _ => None,
        })
    };
    let (ip, port) = (field(b"ip")?, field(b"port")?);
    let epoch = field(b"config-epoch")?.parse().ok()?;
    Some((format!("{ip}:{port}"), epoch))
}

/// The new master's `ip:port` when `frame` is a `+switch-master` message
/// about the master called `name`: `<name> <old ip> <old port> <new ip>
/// <new port>`.
fn switched_to(frame: &Frame, name: &[u8]) -> Option<String> {
    let Frame::Array(Some(items)) = frame else {
        return None;
    };
    let [Frame::Bulk(Some(kind)), Frame::Bulk(Some(channel)), Frame::Bulk(Some(payload))] =
        items.as_slice()
    else {
        return None;
    };
    if kind.as_slice() != b"message" || channel.as_slice() != SWITCH_CHANNEL {
        return None;
    }
    // The name may hold spaces: the four addresses are the last words.
    let text = std::str::from_utf8(payload).ok()?;
    let mut words = text.rsplitn(5, ' ');
    let (port, ip) = (words.next()?, words.next()?);
    let (_old_port, _old_ip) = (words.next()?, words.next()?);
    (words.next()?.as_bytes() == name).then(|| format!("{ip}:{port}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bulk(text: &str) -> Frame {
        Frame::Bulk(Some(text.as_bytes().to_vec()))
    }

    fn message(channel: &str, payload: &str) -> Frame {
        Frame::Array(Some(vec![bulk("message"), bulk(channel), bulk(payload)]))
    }

    #[test]
    fn a_switch_of_our_master_names_the_new_address() {
        let frame = message("+switch-master", "mymaster 10.0.0.1 6379 10.0.0.2 6380");
        assert_eq!(
            switched_to(&frame, b"mymaster"),
            Some("10.0.0.2:6380".to_owned())
        );
        let spaced = message("+switch-master", "my master 10.0.0.1 6379 10.0.0.2 6380");
        assert_eq!(
            switched_to(&spaced, b"my master"),
            Some("10.0.0.2:6380".to_owned())
        );
    }

    #[test]
    fn other_masters_channels_and_frames_are_not_switches() {
        let other = message("+switch-master", "other 10.0.0.1 6379 10.0.0.2 6380");
        assert_eq!(switched_to(&other, b"mymaster"), None);
        let channel = message("+sdown", "mymaster 10.0.0.1 6379 10.0.0.2 6380");
        assert_eq!(switched_to(&channel, b"mymaster"), None);
        assert_eq!(
            switched_to(&message("+switch-master", "mymaster"), b"mymaster"),
            None
        );
        assert_eq!(
            switched_to(&Frame::Simple(b"PONG".to_vec()), b"mymaster"),
            None
        );
    }

    #[test]
    fn the_master_state_reply_is_read() {
        let reply = Frame::Array(Some(
            [
                "name",
                "mymaster",
                "ip",
                "127.0.0.1",
                "port",
                "6380",
                "flags",
                "master",
            ]
            .into_iter()
            .chain(["config-epoch", "7", "quorum", "2"])
            .map(bulk)
            .collect(),
        ));
        assert_eq!(master_state(&reply), Some(("127.0.0.1:6380".to_owned(), 7)));
        let no_epoch = Frame::Array(Some(
            ["ip", "127.0.0.1", "port", "6380"]
                .into_iter()
                .map(bulk)
                .collect(),
        ));
        assert_eq!(master_state(&no_epoch), None);
        assert_eq!(master_state(&Frame::Array(None)), None);
        assert_eq!(
            master_state(&Frame::Error(b"ERR No such master with that name".to_vec())),
            None
        );
    }

    fn known(address: &str) -> Known {
        Known {
            address: Some(address.to_owned()),
            ..Known::default()
        }
    }

    #[test]
    fn a_stale_sentinel_does_not_undo_a_switch() {
        let mut k = known("old:1");
        assert_eq!(k.heard_state("old:1".into(), 3), None);
        assert_eq!(k.heard_switch("new:2".into()), Some("new:2".to_owned()));
        // Heard again from another watch: acted on once.
        assert_eq!(k.heard_switch("new:2".into()), None);
        // A stale sentinel's catch-up: the old master, the old epoch.
        assert_eq!(k.heard_state("old:1".into(), 3), None);
        assert_eq!(k.address.as_deref(), Some("new:2"));
        // One that knows: the switch's epoch, the same address.
        assert_eq!(k.heard_state("new:2".into(), 4), None);
        assert_eq!(k.epoch, Some(4));
        assert_eq!(k.heard_state("old:1".into(), 4), None);
        // A later failover back, heard only on a catch-up.
        assert_eq!(k.heard_state("old:1".into(), 5), Some("old:1".to_owned()));
    }

    #[test]
    fn a_switch_before_any_epoch_waits_for_one_of_its_address() {
        let mut k = known("old:1");
        assert_eq!(k.heard_switch("new:2".into()), Some("new:2".to_owned()));
        assert_eq!(k.heard_state("old:1".into(), 3), None);
        assert_eq!(k.heard_state("new:2".into(), 4), None);
        assert_eq!(k.epoch, Some(4));
        assert_eq!(k.heard_state("old:1".into(), 3), None);
        assert_eq!(k.address.as_deref(), Some("new:2"));
    }

    #[test]
    fn a_catch_up_with_a_newer_epoch_moves_the_master() {
        // The look-up asked a stale sentinel; a watch on one that knows
        // catches up.
        let mut k = known("old:1");
        assert_eq!(k.heard_state("old:1".into(), 3), None);
        assert_eq!(k.heard_state("new:2".into(), 4), Some("new:2".to_owned()));
        // The other order: the first word sets the epoch.
        let mut k = known("old:1");
        assert_eq!(k.heard_state("new:2".into(), 4), Some("new:2".to_owned()));
        assert_eq!(k.heard_state("old:1".into(), 3), None);
        // Nothing known yet: recorded, not a move.
        let mut k = Known::default();
        assert_eq!(k.heard_state("old:1".into(), 3), None);
        assert_eq!(k.address.as_deref(), Some("old:1"));
    }
}
