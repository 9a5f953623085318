//! Undos written behind late acquires (see `engine/attempt.rs`), awaited
//! by the thread's next acquire and next release of the same lock.
//!
//! An undo behind a late acquire releases one hold only while the holder
//! field counts more than its guards stood for when it was written. That
//! check tells the late hold apart only while no later acquire or release
//! of the same field runs before the undo: so the thread's next acquire or
//! release of the lock (the release worker's tries included) first reads
//! the undo's reply (the server has run it), and fails like an outage
//! while the server is still away.

use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use crate::error::{Error, Result};
use crate::names;
use crate::server::Trailing;

/// The most undos awaited at once (as many as releases may be pending):
/// past it the oldest is no longer awaited.
const MAX_UNDOS: usize = 1024;

/// An undo written behind a late acquire, until its reply is read.
#[derive(Debug)]
struct Undo {
    name: Arc<str>,
    field: Arc<str>,
    trailing: Trailing,
}

/// The undos of one client's late acquires.
#[derive(Debug)]
pub(crate) struct LateUndos {
    undos: Mutex<Vec<Undo>>,
    /// How long a settle waits without a deadline of its caller's.
    response_timeout: Duration,
}

impl LateUndos {
    /// No undos yet; a settle waits `response_timeout` at most by itself.
    pub(crate) fn new(response_timeout: Duration) -> LateUndos {
        LateUndos {
            undos: Mutex::default(),
            response_timeout,
        }
    }

    /// Keeps `trailing`, an undo of a late acquire of `field` on `name`
    /// written behind it, until its reply is read: the thread's next
    /// acquire of that lock waits for it (see [`settle`](Self::settle)).
    pub(crate) fn push(&self, name: &Arc<str>, field: &Arc<str>, trailing: Trailing) {
        let mut undos = self.undos.lock();
        let now = Instant::now();
        undos.retain(|undo| !undo.trailing.expired(now));
        if undos.len() >= MAX_UNDOS {
            // Its connection closes; the server still runs what it got,
            // but the next acquire of that lock no longer waits for it.
            log::warn!(
                "redhold: too many undos of late acquires pending; one of {:?} is no longer \
                 awaited",
                names::shorten(&undos[0].name)
            );
            undos.remove(0);
        }
        undos.push(Undo {
            name: Arc::clone(name),
            field: Arc::clone(field),
            trailing,
        });
    }

    /// Waits for the undos behind this pair's late acquires: their count
    /// check ("release one hold above the guards' count") holds only while
    /// no later acquire of the same field runs before them.
    pub(crate) fn settle(&self, name: &str, field: &str, deadline: Option<Instant>) -> Result<()> {
        let mine: Vec<Undo> = {
            let mut undos = self.undos.lock();
            if undos.is_empty() {
                return Ok(());
            }
            let now = Instant::now();
            undos.retain(|undo| !undo.trailing.expired(now));
            let (mine, others) = std::mem::take(&mut *undos)
                .into_iter()
                .partition(|undo| &*undo.name == name && &*undo.field == field);
            *undos = others;
            mine
        };
        // One response timeout at most without a deadline of the caller's.
        let deadline = deadline.or_else(|| Instant::now().checked_add(self.response_timeout));
        // Read outside the list's lock: other locks' acquires go on.
        let mut waiting = Vec::new();
        let mut outcome = Ok(());
        for mut undo in mine {
            if outcome.is_err() {
                waiting.push(undo);
                continue;
            }
            match undo.trailing.confirm(deadline) {
                Ok(_) => {}
                // Not yet run: the server is still away.
                Err(e) if e.is_timeout() => {
                    outcome = Err(Error::Redis(e));
                    waiting.push(undo);
                }
                // The connection failed: what reached the server ran, and
                // nothing of ours is on its way any more. A hold the undo
                // did not give back is one Redis counts beyond the guards,
                // which the acquire's count check gives back.
                Err(_) => {}
            }
        }
        self.undos.lock().extend(waiting);
        outcome
    }
}
