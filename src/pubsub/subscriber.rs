//! A subscriber thread: reads one pub/sub connection, wakes waiters, keeps
//! the connection alive and hands it to the router when it dies.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::router::{self, Link};
use super::{Shared, TICK};
use crate::server::resp::Frame;
use crate::server::socket::Reader;

/// Silence after which the thread checks the connection with a PING.
const PING_AFTER: Duration = Duration::from_secs(5);

/// Runs until the client shuts down, or (sharded mode) until its node's
/// connection is lost and its channels have moved elsewhere.
pub(super) fn run(shared: &Arc<Shared>, link: &Arc<Link>, mut reader: Reader) {
    let mut last_read = Instant::now();
    let mut ping_sent: Option<Instant> = None;
    let mut last_housekeeping = Instant::now();
    while !shared.stopping.load(Ordering::SeqCst) {
        let failure = match reader.next() {
            Ok(Some(frame)) => {
                last_read = Instant::now();
                ping_sent = None;
                dispatch(shared, link, frame);
                None
            }
            Ok(None) => match ping_sent {
                Some(sent) if sent.elapsed() > shared.response_timeout => {
                    Some("the server did not answer a PING in time".to_owned())
                }
                None if last_read.elapsed() > PING_AFTER => {
                    ping_sent = Some(Instant::now());
                    link.writer.send(&[b"PING"]).err().map(|e| e.to_string())
                }
                _ => None,
            },
            Err(e) => Some(e.to_string()),
        };
        if let Some(reason) = failure {
            if shared.stopping.load(Ordering::SeqCst) {
                break;
            }
            log::warn!("redhold pub/sub connection {} lost ({reason})", link.id);
            match router::link_lost(shared, link) {
                Some(fresh) => reader = fresh,
                None => break,
            }
            last_read = Instant::now();
            ping_sent = None;
        }
        if last_housekeeping.elapsed() >= TICK {
            last_housekeeping = Instant::now();
            router::unsubscribe_idle(shared, link);
        }
    }
}

/// Acts on one frame from the server. Unknown frames and payloads are logged
/// and ignored: nothing a peer publishes can stop this thread.
fn dispatch(shared: &Arc<Shared>, link: &Link, frame: Frame) {
    let items = match frame {
        Frame::Array(Some(items)) => items,
        Frame::Error(e) if e.starts_with(b"MOVED") => {
            log::debug!("redhold pub/sub: {}", String::from_utf8_lossy(&e));
            router::moved(shared);
            return;
        }
        Frame::Error(e) => {
            log::warn!(
                "redhold pub/sub: server error {}",
                String::from_utf8_lossy(&e)
            );
            router::refused(shared, link);
            return;
        }
        other => {
            log::debug!("redhold pub/sub: ignoring {other:?}");
            return;
        }
    };
    let (Some(Frame::Bulk(Some(kind))), Some(Frame::Bulk(Some(channel)))) =
        (items.first(), items.get(1))
    else {
        log::debug!("redhold pub/sub: ignoring {items:?}");
        return;
    };
    match kind.as_slice() {
        b"message" | b"smessage" => {
            let Some(channel) = shared.registry.get(channel) else {
                return;
            };
            match items.get(2) {
                Some(Frame::Bulk(Some(payload))) if payload.as_slice() == b"0" => {
                    channel.wake_one()
                }
                Some(Frame::Bulk(Some(payload))) if payload.as_slice() == b"1" => {
                    channel.wake_all()
                }
                other => log::warn!(
                    "redhold pub/sub: ignoring unexpected payload {other:?} on {}",
                    channel.name
                ),
            }
        }
        b"subscribe" | b"ssubscribe" => {
            if let Some(channel) = shared.registry.get(channel) {
                channel.confirm();
                router::confirmed(shared);
            }
        }
        b"unsubscribe" | b"sunsubscribe" => {
            // Our own UNSUBSCRIBE after the linger (possibly overtaken by a
            // waiter's SUBSCRIBE), or a node giving up a slot that moved
            // away: either way the subscription is gone on this connection.
            if let Some(channel) = shared.registry.get(channel) {
                if shared.registry.unsubscribed(&channel, &link.id) {
                    router::resubscribe(shared, channel);
                }
            }
        }
        _ => log::debug!("redhold pub/sub: ignoring {items:?}"),
    }
}
