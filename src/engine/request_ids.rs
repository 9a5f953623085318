//! The ids of a client's release requests, which name their unlock
//! latches.

use std::sync::atomic::{AtomicU64, Ordering};

/// Numbers a client's release requests, for the unlock latch: ids unique
/// across clients (`<client-uuid>:<n>`).
#[derive(Debug)]
pub(crate) struct RequestIds {
    prefix: String,
    next: AtomicU64,
}

impl RequestIds {
    /// Ids of the client whose id is `id_text`.
    pub(crate) fn new(id_text: &str) -> RequestIds {
        RequestIds {
            prefix: id_text.to_owned(),
            next: AtomicU64::new(1),
        }
    }

    /// The next id.
    pub(crate) fn next(&self) -> String {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        format!("{}:{n}", self.prefix)
    }
}
