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
//! So a client of a Sentinel deployment keeps one more connection, to one
//! sentinel, subscribed to `+switch-master`. When the sentinels move this
//! client's master, the client drops its command connections (the idle
//! ones at once, the busy ones when their command is over) and its pub/sub
//! connection; the next ones are looked up through the sentinels again.
//! Each time the watcher connects it first asks where the master is, so a
//! move announced while it was away is not missed. The connection is
//! checked with `PING` when quiet, and replaced (the next sentinel, with
//! backoff) when it fails.
//!
//! The thread, `redhold-sentinel-watch`, is one of the pub/sub threads:
//! started with the client, stopped and joined at shutdown.

use std::io;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::links::{Router, Shared, MAX_BACKOFF, MIN_BACKOFF};
use crate::server::resp::Frame;
use crate::server::Sentinels;

/// How often the watcher's read wakes up to check the stop flag.
const TICK: Duration = Duration::from_secs(1);
/// How long the sentinel connection may stay quiet before a `PING`.
const PING_AFTER: Duration = Duration::from_secs(3);
/// The channel on which sentinels announce a new master.
const SWITCH_CHANNEL: &[u8] = b"+switch-master";

/// Starts the watcher when the client finds its master through sentinels.
pub(super) fn start(shared: &Arc<Shared>) -> io::Result<()> {
    if shared.server.pool().backend().sentinels().is_none() {
        return Ok(());
    }
    super::router::spawn_thread(shared, "redhold-sentinel-watch".to_owned(), watch)
}

/// The thread's body: listens on one sentinel after another until the
/// client stops.
fn watch(shared: &Arc<Shared>) {
    let Some(sentinels) = shared.server.pool().backend().sentinels() else {
        return;
    };
    let mut known = sentinels.last_master();
    let mut backoff = MIN_BACKOFF;
    let mut next = 0usize;
    while !shared.threads.is_stopping() {
        match listen(shared, sentinels, next, &mut known) {
            Ok(()) => backoff = MIN_BACKOFF,
            Err(e) => {
                log::debug!("redhold: sentinel watch: {e}; next try in {backoff:?}");
                shared.threads.pause(backoff);
                backoff = (backoff * 2).min(MAX_BACKOFF);
            }
        }
        next = next.wrapping_add(1);
    }
}

/// Connects to sentinel `index`, catches up with where the master is, and
/// acts on every move it announces. Returns `Ok` when the client stops, an
/// error when the connection fails (it has then been replaced at least
/// once if it ever worked: the caller's backoff starts over).
fn listen(
    shared: &Shared,
    sentinels: &Sentinels,
    index: usize,
    known: &mut Option<String>,
) -> io::Result<()> {
    let config = shared.server.config();
    let timeouts = (config.connect_timeout, config.response_timeout);
    let (mut reader, stream, sentinel) = sentinels.open_watch(index, timeouts, TICK)?;
    let writer = &shared.sentinel_watch;
    writer.attach(stream, &mut reader);
    // Closed on every way out; shutdown closes it too, which ends a read.
    let _detach = Detach(writer);
    if shared.threads.is_stopping() {
        return Ok(());
    }
    let name = sentinels.master_name().as_bytes();
    writer.send(&[b"SENTINEL", b"GET-MASTER-ADDR-BY-NAME", name])?;
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
    if let Some(address) = address_reply(&reply) {
        note(shared, known, address);
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
                    // a failover only when its connections fail.
                    log::warn!(
                        "redhold: sentinel {sentinel} refused the watch: {}",
                        String::from_utf8_lossy(refusal)
                    );
                } else if let Some(address) = switched_to(&frame, name) {
                    note(shared, known, address);
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

/// Closes the watcher's socket when dropped.
struct Detach<'a>(&'a crate::server::socket::Writer);

impl Drop for Detach<'_> {
    fn drop(&mut self) {
        self.0.detach();
    }
}

/// Records `address` (`ip:port`) as the master; when it differs from the
/// one known, the master moved: the connections to the old one go.
fn note(shared: &Shared, known: &mut Option<String>, address: String) {
    if known.as_ref() == Some(&address) {
        return;
    }
    if let Some(old) = known.replace(address.clone()) {
        log::warn!(
            "redhold: the sentinels moved the master from {old} to {address}; \
             reconnecting to the new one"
        );
        // The sentinel a look-up asks first may not know yet, while the
        // old master still answers as one: the new connections go to the
        // announced master.
        if let Some(sentinels) = shared.server.pool().backend().sentinels() {
            sentinels.switched_to(&address);
        }
        master_moved(shared);
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

/// `ip:port` from a `SENTINEL GET-MASTER-ADDR-BY-NAME` reply (nil when the
/// sentinel knows no such master).
fn address_reply(frame: &Frame) -> Option<String> {
    let Frame::Array(Some(items)) = frame else {
        return None;
    };
    match items.as_slice() {
        [Frame::Bulk(Some(ip)), Frame::Bulk(Some(port))] => Some(format!(
            "{}:{}",
            std::str::from_utf8(ip).ok()?,
            std::str::from_utf8(port).ok()?
        )),
        _ => None,
    }
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
    fn the_master_address_reply_is_read() {
        let reply = Frame::Array(Some(vec![bulk("127.0.0.1"), bulk("6380")]));
        assert_eq!(address_reply(&reply), Some("127.0.0.1:6380".to_owned()));
        assert_eq!(address_reply(&Frame::Array(None)), None);
        assert_eq!(address_reply(&Frame::Bulk(None)), None);
    }
}
