//! One request that may be sent more than once, with everything that keeps
//! its resends safe: its id (the latch key in Redis that makes a resend
//! harmless), how long that latch lives, the moment after which no path may
//! send it again, and the connection its undo must follow.
//!
//! Every path that resends a request id goes through a [`Request`]: the
//! pool's retries, a waiting call's outage ride-through, the background
//! release worker and a call's give-back. So the rules hold by
//! construction, not path by path:
//!
//! - **the latch outlives every resend**: the latch's lifetime is derived
//!   from the longest way the request may be resent ([`Resends`]), and
//!   [`Request::may_send`] refuses a resend that could reach Redis after
//!   the latch may have expired (the caller settles the outcome by reading
//!   the state instead);
//! - **the undo follows the late request**: when the last attempt's reply
//!   never came (a stalled server still holds it and runs it later), its
//!   connection is kept, and the call's undo is written on it, right behind
//!   the request: Redis runs one connection's commands in order, so the
//!   undo runs after the request, whenever the server wakes. An undo on a
//!   new connection could run before it, or not be sent at all (a stalled
//!   server does not answer the new connection's handshake).
//!
//! | latch state | meaning |
//! |---|---|
//! | never sent | nothing in Redis; any attempt may go |
//! | sent, unanswered | the latch may exist from the send on; it lives at least `ttl` from then |
//! | answered | the script wrote (or refreshed) the latch: it lives `ttl` from that send at least |

use std::time::{Duration, Instant};

use redis::{ConnectionLike, RedisResult};

use super::late::LateRequests;
use super::pool::Pool;
use crate::config::Config;
use crate::error::{Error, Result};

/// How long a request id may be resent: what its latch must outlive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Resends {
    /// Within one call of the retry rule (a release, a give-back): its
    /// attempts, each a connect and a reply, and the pauses between them.
    Retries,
    /// A waiting call that rides out outages (a semaphore's acquire): the
    /// retry rule's bound after every failed look for as long as the
    /// outage tolerance. Every answered look writes the latch afresh.
    RideThrough,
}

impl Resends {
    /// The latch's lifetime for requests resent this way under `config`.
    ///
    /// Saturating and capped at a day, so that absurd settings give a long
    /// latch instead of a panic or a TTL Redis refuses; a request resent
    /// longer than that (no outage tolerance at all) is stopped by
    /// [`Request::may_send`].
    pub(crate) fn latch_ttl(self, config: &Config) -> Duration {
        let retries = retry_bound(config);
        let ttl = match self {
            Resends::Retries => retries,
            // The last look starts when the tolerance runs out, and takes
            // the retry rule's bound; the give-back that ends the call one
            // more.
            Resends::RideThrough => config.outage_tolerance.map_or(LONGEST, |tolerance| {
                tolerance.saturating_add(retries.saturating_mul(2))
            }),
        };
        ttl.saturating_add(Duration::from_secs(1)).min(LONGEST)
    }
}

/// The longest latch: a day.
const LONGEST: Duration = Duration::from_secs(24 * 3600);

/// How long one command may take under the retry rule: every attempt a
/// slow connect and a slow reply, and the pauses between them.
pub(crate) fn retry_bound(config: &Config) -> Duration {
    let attempts = config.retry_attempts.saturating_add(1);
    config
        .connect_timeout
        .saturating_add(config.response_timeout)
        .saturating_mul(attempts)
        .saturating_add(config.retry_delay.saturating_mul(config.retry_attempts))
}

/// A request id and its latch, as one call (or one background release)
/// sends it.
pub(crate) struct Request {
    latch: String,
    ttl: Duration,
    /// The latch, once any attempt may have written it, lives at least
    /// until this moment: `ttl` after the earliest send that may have
    /// written it last (the first send, moved on by each answer).
    alive_until: Option<Instant>,
    /// Attempts sent, and the number of the last one answered: a value
    /// answers the last request (the scripts record its number).
    sent: u64,
    answered: u64,
    /// An answer came that the call does not keep (replicas not synced).
    unkept: bool,
    /// The connections of the attempts whose reply never came, kept open
    /// for the undo.
    late: LateRequests,
}

impl std::fmt::Debug for Request {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Request")
            .field("latch", &self.latch)
            .field("ttl", &self.ttl)
            .field("sent", &self.sent)
            .field("answered", &self.answered)
            .field("late", &self.late.len())
            .finish()
    }
}

impl Request {
    /// A request whose latch is `latch`, resent as `resends` says.
    pub(crate) fn new(latch: String, resends: Resends, config: &Config) -> Request {
        Request {
            latch,
            ttl: resends.latch_ttl(config),
            alive_until: None,
            sent: 0,
            answered: 0,
            unkept: false,
            late: LateRequests::default(),
        }
    }

    /// Until when the latch lives for sure, once any attempt was sent.
    pub(crate) fn latch_alive_until(&self) -> Option<Instant> {
        self.alive_until
    }

    /// The latch key.
    pub(crate) fn latch(&self) -> &str {
        &self.latch
    }

    /// The latch's TTL in ms, for the scripts.
    pub(crate) fn latch_ttl_ms(&self) -> u64 {
        crate::config::saturating_millis(self.ttl)
    }

    /// Whether an attempt that may take `bound` to reach Redis may still be
    /// sent: never once it could arrive after the latch may have expired
    /// (it would find no latch and act as a new request).
    pub(crate) fn may_send(&self, bound: Duration) -> bool {
        self.alive_until.is_none_or(|until| {
            Instant::now()
                .checked_add(bound)
                .is_some_and(|arrives_by| arrives_by < until)
        })
    }

    /// The last attempt sent (at `sent_at`) was answered, and its script
    /// wrote the latch: it lives `ttl` from that send at least.
    pub(crate) fn answered(&mut self, sent_at: Instant) {
        self.answered = self.sent;
        self.late.clear();
        if let Some(until) = sent_at.checked_add(self.ttl) {
            self.alive_until = Some(self.alive_until.map_or(until, |u| u.max(until)));
        }
    }

    /// The last answer came, but the call will not keep what it took.
    pub(crate) fn unkept(&mut self) {
        self.unkept = true;
    }

    /// Whether a request of this call may have taken something the call
    /// does not return: one went unanswered (it may have run, or may still
    /// run late), or an answer is not kept.
    pub(crate) fn unsure(&self) -> bool {
        self.sent > self.answered || self.unkept
    }
}

impl Request {
    /// Sends one look of the call on `name` under the retry rule: `op`
    /// gets the latch key, its TTL in ms and the attempt's number. Refused
    /// (not sent) once an attempt could reach Redis after the latch may
    /// have expired. An answered look moves the latch's life on; the
    /// connection of an unanswered last attempt is kept for the undo.
    ///
    /// Returns the value and, when the client syncs replicas, how many
    /// acknowledged the write (see [`Pool::run_write`]).
    pub(crate) fn run<T>(
        &mut self,
        pool: &Pool,
        name: &str,
        mut op: impl FnMut(&mut dyn ConnectionLike, &str, u64, u64) -> RedisResult<T>,
        wrote: impl Fn(&T) -> bool,
    ) -> Result<(T, Option<usize>)> {
        if !self.may_send(retry_bound(pool.config())) {
            return Err(latch_may_have_expired(name));
        }
        let ttl_ms = self.latch_ttl_ms();
        let mut sent_at = Instant::now();
        let Request {
            latch,
            ttl,
            alive_until,
            sent,
            late,
            ..
        } = self;
        let result = pool.run_write(
            None,
            Some(late),
            |conn| {
                sent_at = Instant::now();
                if alive_until.is_none() {
                    *alive_until = sent_at.checked_add(*ttl);
                }
                *sent += 1;
                op(conn, latch, ttl_ms, *sent)
            },
            wrote,
        );
        if result.is_ok() {
            self.answered(sent_at);
        }
        result
    }

    /// Ends a call that returns without what its requests may have taken:
    /// runs `undo` (a script that reads the latch, gives back what the
    /// call took and closes the latch, so that a late attempt takes
    /// nothing) right behind the last unanswered attempt when its
    /// connection is still open, else on a connection of its own. Nothing
    /// to do when every attempt was answered and kept.
    ///
    /// `Ok(true)` when a reply confirmed the undo ran (or nothing needed
    /// undoing), `Ok(false)` when it was only written behind late attempts:
    /// a connection cut since may have lost it, so the caller sends it
    /// again later too (harmless: the first to run closes the latch).
    pub(crate) fn undo(&mut self, pool: &Pool, undo: &redis::Cmd) -> Result<bool> {
        if !self.unsure() {
            return Ok(true);
        }
        let keep_until = self
            .alive_until
            .unwrap_or_else(|| Instant::now() + self.ttl);
        if Instant::now() >= keep_until {
            // Whatever was taken, the latch that says so is gone.
            return Err(latch_may_have_expired(&self.latch));
        }
        let late = self.late.take();
        if late.is_empty() {
            return pool
                .run(|conn| undo.query::<redis::Value>(conn))
                .map(|_| true);
        }
        // Behind every late attempt: each runs after its own, whenever the
        // server gets to it; the first to run gives back and closes the
        // latch, the others find it closed.
        let packed = undo.get_packed_command();
        for conn in late {
            // A connection that cannot take it is as good as cut.
            let _ = pool.follow(conn, &packed, keep_until);
        }
        Ok(false)
    }
}

/// The error of a request that is no longer sent: its latch may have
/// expired, so a resend could act as a new request.
fn latch_may_have_expired(name: &str) -> Error {
    Error::Redis(redis::RedisError::from((
        redis::ErrorKind::Client,
        "not sent again: the request's latch may have expired",
        format!("for {:?}", crate::names::shorten(name)),
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_latch_outlives_every_retry_and_the_ride_through() {
        let c = Config {
            connect_timeout: Duration::from_secs(5),
            response_timeout: Duration::from_secs(3),
            retry_attempts: 3,
            retry_delay: Duration::from_millis(50),
            outage_tolerance: Some(Duration::from_secs(60)),
            ..Config::default()
        };
        // Four attempts, each a slow connect and a slow reply, three pauses.
        let last_retry_by = Duration::from_millis(4 * 8000 + 3 * 50);
        assert!(Resends::Retries.latch_ttl(&c) > last_retry_by);
        assert!(Resends::RideThrough.latch_ttl(&c) > Duration::from_secs(60) + last_retry_by * 2);
        let absurd = Config {
            response_timeout: Duration::MAX,
            retry_attempts: u32::MAX,
            ..c.clone()
        };
        assert_eq!(Resends::Retries.latch_ttl(&absurd), LONGEST);
        let forever = Config {
            outage_tolerance: None,
            ..c
        };
        assert_eq!(Resends::RideThrough.latch_ttl(&forever), LONGEST);
    }

    #[test]
    fn no_resend_may_arrive_after_the_latch_may_have_expired() {
        let c = Config {
            connect_timeout: Duration::from_millis(10),
            response_timeout: Duration::from_millis(10),
            retry_attempts: 0,
            retry_delay: Duration::ZERO,
            ..Config::default()
        };
        let mut request = Request::new("l".into(), Resends::Retries, &c);
        // Nothing sent: nothing in Redis to outlive.
        assert!(request.may_send(Duration::from_secs(3600)));
        request.sent = 1;
        assert!(request.unsure());
        request.answered(Instant::now());
        assert!(!request.unsure());
        assert!(request.may_send(Duration::ZERO));
        // The latch lives 1.02 s from the answered send.
        assert!(!request.may_send(Duration::from_secs(2)));
    }
}
