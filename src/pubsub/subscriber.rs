//! The subscriber thread: reads the pub/sub socket, wakes waiters, keeps the
//! connection alive and reconnects when it dies.

use std::sync::atomic::Ordering;
use std::thread;
use std::time::{Duration, Instant};

use super::connection::{self, Reader};
use super::resp::Frame;
use super::{Shared, TICK};

/// Silence after which the thread checks the connection with a PING.
const PING_AFTER: Duration = Duration::from_secs(5);
/// Longest pause between two reconnect attempts.
const MAX_BACKOFF: Duration = Duration::from_secs(2);
/// Channels per SUBSCRIBE when resubscribing after a reconnect.
const RESUBSCRIBE_BATCH: usize = 100;

/// Runs until the client shuts down.
pub(super) fn run(shared: &Shared, mut reader: Reader) {
    let mut last_read = Instant::now();
    let mut ping_sent: Option<Instant> = None;
    let mut last_housekeeping = Instant::now();
    while !shared.stopping.load(Ordering::SeqCst) {
        let failure = match reader.next() {
            Ok(Some(frame)) => {
                last_read = Instant::now();
                ping_sent = None;
                dispatch(shared, frame);
                None
            }
            Ok(None) => match ping_sent {
                Some(sent) if sent.elapsed() > shared.response_timeout => {
                    Some("the server did not answer a PING in time".to_owned())
                }
                None if last_read.elapsed() > PING_AFTER => {
                    ping_sent = Some(Instant::now());
                    shared.writer.send(&[b"PING"]).err().map(|e| e.to_string())
                }
                _ => None,
            },
            Err(e) => Some(e.to_string()),
        };
        if let Some(reason) = failure {
            if shared.stopping.load(Ordering::SeqCst) {
                break;
            }
            log::warn!("redhold pub/sub connection lost ({reason}); reconnecting");
            shared.writer.detach();
            for channel in shared.registry.all() {
                channel.connection_lost();
            }
            match reconnect(shared) {
                Some(fresh) => reader = fresh,
                None => break,
            }
            last_read = Instant::now();
            ping_sent = None;
        }
        if last_housekeeping.elapsed() >= TICK {
            last_housekeeping = Instant::now();
            unsubscribe_idle(shared);
        }
    }
}

/// Acts on one frame from the server. Unknown frames and payloads are logged
/// and ignored: nothing a peer publishes can stop this thread.
fn dispatch(shared: &Shared, frame: Frame) {
    let items = match frame {
        Frame::Array(Some(items)) => items,
        Frame::Error(e) => {
            log::warn!(
                "redhold pub/sub: server error {}",
                String::from_utf8_lossy(&e)
            );
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
            }
        }
        b"unsubscribe" | b"sunsubscribe" => {
            if let Some(channel) = shared.registry.get(channel) {
                shared.registry.unsubscribed(&channel);
            }
        }
        _ => log::debug!("redhold pub/sub: ignoring {items:?}"),
    }
}

/// Unsubscribes the channels nobody has waited on for the linger.
fn unsubscribe_idle(shared: &Shared) {
    for channel in shared.registry.take_idle(shared.linger) {
        if let Err(e) = shared
            .writer
            .send(&[b"UNSUBSCRIBE", channel.name.as_bytes()])
        {
            log::debug!("UNSUBSCRIBE {} not sent: {e}", channel.name);
        }
    }
}

/// Connects again with backoff until it works or the client shuts down, then
/// subscribes every channel that still has waiters.
fn reconnect(shared: &Shared) -> Option<Reader> {
    let mut backoff = Duration::from_millis(50);
    loop {
        if shared.stopping.load(Ordering::SeqCst) {
            return None;
        }
        match connection::connect(
            &shared.info,
            shared.connect_timeout,
            shared.response_timeout,
            TICK,
        ) {
            Ok((reader, writer)) => {
                shared.writer.attach(writer);
                let channels = shared.registry.still_waited();
                for batch in channels.chunks(RESUBSCRIBE_BATCH) {
                    let mut args: Vec<&[u8]> = vec![b"SUBSCRIBE"];
                    args.extend(batch.iter().map(|c| c.name.as_bytes()));
                    if let Err(e) = shared.writer.send(&args) {
                        log::debug!("resubscribe failed: {e}");
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
                thread::sleep(backoff);
                backoff = (backoff * 2).min(MAX_BACKOFF);
            }
        }
    }
}
