//! The waiting loop of the semaphore and the latch: try, subscribe to the
//! name's channel, try again, park until a message (or the safety net's
//! re-check), and repeat. While Redis is unreachable it sleeps the
//! outage's backoff instead, up to the client's outage tolerance, like a
//! lock waiter.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::engine::outage::{outage_cause, Outage};
use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::interrupt::Interrupt;
use crate::names;
use crate::pubsub::Wake;

/// The longest a waiter parks without a message before it looks again: a
/// safety net only, for a message lost with a connection (whose
/// re-subscription wakes every waiter anyway) or published by a client
/// that does not announce. Never a poll: a woken waiter looks once.
pub(super) const RECHECK: Duration = Duration::from_secs(5);

/// What one attempt of a waiting call found.
#[derive(Debug)]
pub(super) enum Look<T> {
    /// It may go on, with this.
    Done(T),
    /// Not yet; look again when a message comes, or after `within` at the
    /// latest when something changes then that nobody announces (an
    /// expirable permit's lease runs out).
    Again { within: Option<Duration> },
}

impl<T> Look<T> {
    /// `Done(value)` when there is one, else `Again` with no deadline.
    pub(super) fn from_option(value: Option<T>) -> Look<T> {
        match value {
            Some(value) => Look::Done(value),
            None => Look::Again { within: None },
        }
    }
}

/// One waiting call of a synchronizer: what each attempt does, and how
/// the call ends. A thread runs it with [`WaitOn::run`]; an async caller
/// with `AsyncWait` (`wait_async.rs`), one step at a time on the client's
/// threads.
pub(super) trait WaitCall: Send + 'static {
    /// What an attempt that lets the call go on found.
    type Found: Send + 'static;
    /// What the call returns.
    type Output: Send + 'static;

    /// One attempt.
    fn attempt(&mut self) -> Result<Look<Self::Found>>;

    /// Ends the call with what the waiting gave (`Ok(None)`: its wait ran
    /// out). `abandoned`: nobody takes what it returns (an async call's
    /// future is gone), so what it took is given back.
    fn end(
        self,
        outcome: Result<Option<Self::Found>>,
        abandoned: bool,
    ) -> Result<Option<Self::Output>>;
}

/// What one waiting call waits on: the synchronizer's name and channel.
#[derive(Debug, Clone, Copy)]
pub(super) struct WaitOn<'a> {
    pub(super) engine: &'a Engine,
    pub(super) name: &'a Arc<str>,
    pub(super) channel: &'a str,
}

impl WaitOn<'_> {
    /// Runs `call` on this thread: its attempts until one lets it go on,
    /// `wait` passes or `interrupt` is triggered (see
    /// [`until`](Self::until)), then its end.
    pub(super) fn run<C: WaitCall>(
        self,
        mut call: C,
        wait: Option<Duration>,
        interrupt: Option<&Interrupt>,
    ) -> Result<Option<C::Output>> {
        let outcome = self.until(wait, interrupt, || call.attempt());
        call.end(outcome, false)
    }

    /// Repeats `attempt` until it gives a value, `wait` passes (`Ok(None)`;
    /// never when `None`), `interrupt` is triggered
    /// ([`Error::Interrupted`]), or it fails with an error that is not an
    /// outage. With `wait` zero it makes one attempt and subscribes to
    /// nothing.
    pub(super) fn until<T>(
        self,
        wait: Option<Duration>,
        interrupt: Option<&Interrupt>,
        mut attempt: impl FnMut() -> Result<Look<T>>,
    ) -> Result<Option<T>> {
        // A wait too long to represent is no wait limit at all.
        let deadline = wait.and_then(|w| Instant::now().checked_add(w));
        let left = || deadline.map(|d| d.saturating_duration_since(Instant::now()));
        let tolerance = self.engine.server().config().outage_tolerance;
        let mut outage: Option<Outage> = None;
        let mut subscription = None;
        loop {
            if interrupt.is_some_and(Interrupt::is_triggered) {
                return Err(self.interrupted());
            }
            let started = Instant::now();
            let mut look_within = None;
            match attempt() {
                Ok(Look::Done(value)) => return Ok(Some(value)),
                Ok(Look::Again { within }) => {
                    outage = None;
                    look_within = within;
                }
                Err(e) => {
                    let cause = outage_cause(e)?;
                    let going_on = match outage.take() {
                        Some(mut going_on) => {
                            going_on.failed_again(cause);
                            going_on
                        }
                        None => Outage::began(started, cause),
                    };
                    if going_on.exceeds(tolerance) {
                        return Err(going_on.give_up(self.name, tolerance));
                    }
                    outage = Some(going_on);
                }
            }
            let mut pause = match &mut outage {
                Some(outage) => outage.next_pause(tolerance),
                None => look_within.map_or(RECHECK, |within| within.min(RECHECK)),
            };
            if let Some(left) = left() {
                if left.is_zero() {
                    return match outage {
                        // Its own wait ran out while Redis was away: the
                        // state is unknown, so an error, not `None`.
                        Some(outage) => Err(outage.give_up(self.name, None)),
                        None => Ok(None),
                    };
                }
                pause = pause.min(left);
            }
            if subscription.is_none() {
                let confirm_for = left().unwrap_or(Duration::MAX);
                subscription = Some(self.engine.pubsub().subscribe(
                    self.channel,
                    self.name,
                    confirm_for,
                ));
                if outage.is_none() {
                    // A message sent before the subscription went unheard:
                    // look again before parking.
                    continue;
                }
            }
            let woke = match &subscription {
                Some(subscription) => {
                    let _parked = self.engine.counters().parked();
                    subscription.park(pause, None, interrupt, None)
                }
                None => Wake::TimedOut,
            };
            if woke == Wake::Interrupted {
                return Err(self.interrupted());
            }
        }
    }

    /// The error of a wait cut short by its [`Interrupt`].
    fn interrupted(&self) -> Error {
        Error::Interrupted {
            lock: names::shorten(self.name),
        }
    }
}
