//! Sharded mode's book of subscriptions still to send: which channels are
//! due, whether the retry thread runs, and how long it pauses between
//! passes.

#![cfg(feature = "cluster")]

use std::sync::Arc;
use std::time::Duration;

use super::channel::Channel;

/// The channels whose SSUBSCRIBE must be sent (again), for the retry thread.
#[derive(Debug)]
pub(super) struct Retries {
    /// Channels to send; duplicates are dropped when a pass takes them.
    due: Vec<Arc<Channel>>,
    /// Whether the retry thread runs; it ends once a pass leaves nothing due.
    running: bool,
    /// The pause after the next pass: doubles after every pass, back to the
    /// minimum when a subscription is confirmed (so a node that keeps
    /// refusing is not asked in a tight loop).
    backoff: Duration,
    min_backoff: Duration,
    max_backoff: Duration,
}

impl Retries {
    /// Nothing due; pauses from `min_backoff`, doubling up to `max_backoff`.
    pub(super) fn new(min_backoff: Duration, max_backoff: Duration) -> Retries {
        Retries {
            due: Vec::new(),
            running: false,
            backoff: min_backoff,
            min_backoff,
            max_backoff,
        }
    }

    /// Makes `channels` due. Returns whether the caller must start the retry
    /// thread (it is not running and something is due); it counts as
    /// running from now on.
    pub(super) fn add(&mut self, channels: Vec<Arc<Channel>>) -> bool {
        self.due.extend(channels);
        if self.running || self.due.is_empty() {
            return false;
        }
        self.running = true;
        true
    }

    /// The retry thread could not be started after all.
    pub(super) fn stopped(&mut self) {
        self.running = false;
    }

    /// The channels for the next pass; `None` ends the thread (nothing due,
    /// or the client stops).
    pub(super) fn take(&mut self, stopping: bool) -> Option<Vec<Arc<Channel>>> {
        if self.due.is_empty() || stopping {
            self.running = false;
            return None;
        }
        Some(std::mem::take(&mut self.due))
    }

    /// A pass ended with `failed` still to send: they are due again. Returns
    /// the pause before the next pass.
    pub(super) fn after_pass(&mut self, failed: Vec<Arc<Channel>>) -> Duration {
        self.due.extend(failed);
        let pause = self.backoff;
        self.backoff = (pause * 2).min(self.max_backoff);
        pause
    }

    /// A subscription was confirmed: the next pause is the shortest again.
    pub(super) fn confirmed(&mut self) {
        self.backoff = self.min_backoff;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn channel() -> Arc<Channel> {
        Arc::new(Channel::new("c", "lock"))
    }

    #[test]
    fn one_thread_runs_until_nothing_is_due() {
        let ms = Duration::from_millis;
        let mut retries = Retries::new(ms(50), ms(200));
        assert!(!retries.add(Vec::new()), "nothing due, no thread");
        assert!(
            retries.add(vec![channel()]),
            "the first due channel starts it"
        );
        assert!(!retries.add(vec![channel()]), "already running");
        assert_eq!(retries.take(false).map(|d| d.len()), Some(2));
        assert_eq!(retries.after_pass(vec![channel()]), ms(50));
        assert_eq!(retries.after_pass(Vec::new()), ms(100));
        assert_eq!(retries.after_pass(Vec::new()), ms(200));
        assert_eq!(retries.after_pass(Vec::new()), ms(200));
        retries.confirmed();
        assert_eq!(retries.after_pass(Vec::new()), ms(50));
        assert_eq!(retries.take(false).map(|d| d.len()), Some(1));
        assert!(
            retries.take(false).is_none(),
            "nothing left: the thread ends"
        );
        assert!(
            retries.add(vec![channel()]),
            "and the next one starts it again"
        );
        assert!(retries.take(true).is_none(), "the client stops");
    }
}
