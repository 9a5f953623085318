//! What a subscriber thread reads: one pub/sub connection, whose messages
//! and confirmations it hands to the waiters' channels, and whose other
//! news (a lost connection, a refusal, a moved slot) it returns to the
//! router as an [`Event`]. It never calls back into the router.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::channel::Channel;
use super::registry::Registry;
use crate::server::resp::Frame;
use crate::server::socket::{Reader, Writer};

/// Silence after which the thread checks the connection with a PING.
const PING_AFTER: Duration = Duration::from_secs(5);

/// One pub/sub connection: its name and its writing half, shared by the
/// waiters (who write SUBSCRIBE on it themselves).
#[derive(Debug)]
pub(super) struct Link {
    /// Names the connection: `pubsub` in single mode, `host:port` of the
    /// node in sharded mode.
    pub(super) id: Arc<str>,
    pub(super) writer: Writer,
}

/// What the router must act on after one read.
#[derive(Debug)]
pub(super) enum Event {
    /// Nothing for the router: a message was delivered, a frame ignored, or
    /// the read timed out quietly.
    Quiet,
    /// A subscription was confirmed.
    Confirmed,
    /// A node answered MOVED to a subscription: the slots changed.
    Moved,
    /// The server answered a command with an error.
    Refused,
    /// The server dropped the subscription of a channel that waiters still
    /// need.
    Resubscribe(Arc<Channel>),
    /// The connection is lost, for this reason.
    Lost(String),
}

/// The reading half of one link, and when it last heard from the server.
#[derive(Debug)]
pub(super) struct Subscriber {
    reader: Reader,
    last_read: Instant,
    ping_sent: Option<Instant>,
    response_timeout: Duration,
}

impl Subscriber {
    /// Reads from `reader`; a PING unanswered for `response_timeout` means
    /// the connection is lost.
    pub(super) fn new(reader: Reader, response_timeout: Duration) -> Subscriber {
        Subscriber {
            reader,
            last_read: Instant::now(),
            ping_sent: None,
            response_timeout,
        }
    }

    /// Reads from a new connection after the old one was lost.
    pub(super) fn reconnected(&mut self, reader: Reader) {
        self.reader = reader;
        self.last_read = Instant::now();
        self.ping_sent = None;
    }

    /// Waits for the next frame, at most one read timeout (the router's
    /// tick), and acts on what concerns the waiters.
    pub(super) fn next(&mut self, registry: &Registry, link: &Link) -> Event {
        match self.reader.next() {
            Ok(Some(frame)) => {
                self.last_read = Instant::now();
                self.ping_sent = None;
                dispatch(registry, link, frame)
            }
            Ok(None) => match self.ping_sent {
                Some(sent) if sent.elapsed() > self.response_timeout => {
                    Event::Lost("the server did not answer a PING in time".to_owned())
                }
                None if self.last_read.elapsed() > PING_AFTER => {
                    self.ping_sent = Some(Instant::now());
                    match link.writer.send(&[b"PING"]) {
                        Ok(()) => Event::Quiet,
                        Err(e) => Event::Lost(e.to_string()),
                    }
                }
                _ => Event::Quiet,
            },
            Err(e) => Event::Lost(e.to_string()),
        }
    }
}

/// Acts on one frame from the server. Unknown frames and payloads are logged
/// and ignored: nothing a peer publishes can stop the thread.
fn dispatch(registry: &Registry, link: &Link, frame: Frame) -> Event {
    let items = match frame {
        Frame::Array(Some(items)) => items,
        Frame::Error(e) if e.starts_with(b"MOVED") => {
            log::debug!("redhold pub/sub: {}", String::from_utf8_lossy(&e));
            return Event::Moved;
        }
        Frame::Error(e) => {
            log::warn!(
                "redhold pub/sub: server error {}",
                String::from_utf8_lossy(&e)
            );
            return Event::Refused;
        }
        other => {
            log::debug!("redhold pub/sub: ignoring {other:?}");
            return Event::Quiet;
        }
    };
    // A pattern's message names its pattern first: `pmessage PATTERN
    // CHANNEL PAYLOAD` (classic_watch.rs); treated as `message CHANNEL
    // PAYLOAD`.
    let items = match items.first() {
        Some(Frame::Bulk(Some(kind))) if kind.as_slice() == b"pmessage" => {
            let mut items = items;
            items.remove(1);
            items
        }
        _ => items,
    };
    let (Some(Frame::Bulk(Some(kind))), Some(Frame::Bulk(Some(channel)))) =
        (items.first(), items.get(1))
    else {
        log::debug!("redhold pub/sub: ignoring {items:?}");
        return Event::Quiet;
    };
    let Some(channel) = registry.get(channel) else {
        return Event::Quiet;
    };
    match kind.as_slice() {
        b"message" | b"smessage" | b"pmessage" => {
            match items.get(2) {
                // A semaphore's message is the number of permits now
                // available, a latch's "0" (open) or "1" (a new count):
                // every waiter of the name looks again, once.
                Some(_) if crate::names::is_synchronizer_channel(channel.name.as_bytes()) => {
                    channel.wake_each_once()
                }
                // The message names the channel, not the lock: with locks
                // that share it, one wake-up each.
                Some(Frame::Bulk(Some(payload))) if payload.as_slice() == b"0" => {
                    channel.wake_one_each()
                }
                Some(Frame::Bulk(Some(payload))) if payload.as_slice() == b"1" => {
                    channel.wake_all()
                }
                other => log::warn!(
                    "redhold pub/sub: ignoring unexpected payload {other:?} on {}",
                    channel.name
                ),
            }
            Event::Quiet
        }
        b"subscribe" | b"ssubscribe" => {
            channel.confirm();
            Event::Confirmed
        }
        // Our own UNSUBSCRIBE after the linger (possibly overtaken by a
        // waiter's SUBSCRIBE), or a node giving up a slot that moved away:
        // either way the subscription is gone on this connection.
        b"unsubscribe" | b"sunsubscribe" if registry.unsubscribed(&channel, &link.id) => {
            Event::Resubscribe(channel)
        }
        b"unsubscribe" | b"sunsubscribe" => Event::Quiet,
        _ => {
            log::debug!("redhold pub/sub: ignoring {items:?}");
            Event::Quiet
        }
    }
}
