//! Hearing classic releases on a cluster that listens sharded
//! (`ClientBuilder::hear_classic_releases`).
//!
//! Redisson before 3.22 (and 3.22 to 3.27 when their start-up probe missed
//! slot 0) announce releases on a cluster with classic `PUBLISH`, which
//! `SSUBSCRIBE` does not hear. A classic message on a cluster reaches every
//! node, so one more connection, to any node, subscribed with `PSUBSCRIBE`
//! to the patterns of every channel redhold waits on, hears them all: no
//! command per wait, whatever the number of channels. Its messages go to
//! the same channels as the sharded ones (`subscriber.rs` reads
//! `pmessage`); a channel nobody here waits on is ignored.
//!
//! The thread, `redhold-classic-watch`, is one of the pub/sub threads:
//! started with the client when asked for, stopped and joined at shutdown.
//! It reconnects (the next seed node, with backoff) when its connection
//! fails; a classic release announced meanwhile reaches a waiter only
//! through the lock's TTL, as any lost message.

use std::io;
use std::sync::Arc;

use super::links::{Shared, MAX_BACKOFF, MIN_BACKOFF};
use super::subscriber::{Event, Subscriber};
use crate::server::PubSubMode;

/// How often the watcher's read wakes up to check the stop flag.
const TICK: std::time::Duration = std::time::Duration::from_secs(1);

/// Every channel a redhold waiter listens on, as `PSUBSCRIBE` patterns:
/// the lock, read-write lock, semaphore and count-down latch channels.
const PATTERNS: [&[u8]; 4] = [
    b"redisson_lock__channel:*",
    b"redisson_rwlock:*",
    b"redisson_sc:*",
    b"redisson_countdownlatch__channel__*",
];

/// Starts the watcher when the client listens sharded and was asked to
/// hear classic releases too.
pub(super) fn start(shared: &Arc<Shared>) -> io::Result<()> {
    if !shared.server.config().hear_classic_releases
        || shared.server.pubsub_mode() != PubSubMode::Sharded
    {
        return Ok(());
    }
    super::router::spawn_thread(shared, "redhold-classic-watch".to_owned(), watch)
}

/// The thread's body: listens on one node after another until the client
/// stops.
fn watch(shared: &Arc<Shared>) {
    let mut backoff = MIN_BACKOFF;
    let mut attempt = 0usize;
    while !shared.threads.is_stopping() {
        match listen(shared, attempt) {
            Ok(()) => backoff = MIN_BACKOFF,
            Err(e) => {
                log::debug!("redhold: classic pub/sub watch: {e}; next try in {backoff:?}");
                shared.threads.pause(backoff);
                backoff = (backoff * 2).min(MAX_BACKOFF);
            }
        }
        attempt = attempt.wrapping_add(1);
    }
}

/// Connects to seed node `attempt`, subscribes the patterns and hands every
/// message to its channel. Returns `Ok` when the client stops, an error
/// when the connection fails or cannot be made.
fn listen(shared: &Shared, attempt: usize) -> io::Result<()> {
    let target = shared
        .server
        .pubsub_target(attempt)
        .map_err(io::Error::other)?;
    let (mut reader, stream) = shared.server.open_pubsub(&target, TICK)?;
    let link = &shared.classic_watch;
    link.writer.attach(stream, &mut reader);
    // Closed on every way out; shutdown closes it too, which ends a read.
    let _detach = Detach(link);
    if shared.threads.is_stopping() {
        return Ok(());
    }
    let mut command: Vec<&[u8]> = vec![b"PSUBSCRIBE"];
    command.extend(PATTERNS);
    link.writer.send(&command)?;
    let mut subscriber = Subscriber::new(reader, shared.server.config().response_timeout);
    while !shared.threads.is_stopping() {
        // Messages are handed to their channels inside `next`; pattern
        // confirmations name no channel; an error reply is logged there.
        if let Event::Lost(reason) = subscriber.next(&shared.registry, link) {
            if shared.threads.is_stopping() {
                break;
            }
            log::warn!("redhold classic pub/sub watch connection lost ({reason})");
            return Err(io::Error::other(reason));
        }
    }
    Ok(())
}

/// Closes the watcher's socket when dropped.
struct Detach<'a>(&'a super::subscriber::Link);

impl Drop for Detach<'_> {
    fn drop(&mut self) {
        self.0.writer.detach();
    }
}
