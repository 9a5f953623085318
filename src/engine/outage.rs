//! A waiting acquire's view of an outage: since when Redis has been
//! unreachable for it, the last error, and how long to sleep before the
//! next look. A waiter rides an outage out (see
//! [`ClientBuilder::outage_tolerance`](crate::ClientBuilder::outage_tolerance))
//! instead of failing at the first refused connection: restarts and
//! failovers take seconds by design.

use std::collections::hash_map::RandomState;
use std::hash::BuildHasher;
use std::time::{Duration, Instant};

use super::Call;
use crate::error::{is_not_resp, is_transient, Error};
use crate::kind::sealed::KindOps;
use crate::names;

/// The first pause after a failed attempt: the pool has already retried
/// the command (`retry_attempts`), so Redis is likely away for a while.
const FIRST_PAUSE: Duration = Duration::from_millis(100);
/// The longest pause: how late a waiter may notice that Redis is back.
const MAX_PAUSE: Duration = Duration::from_secs(1);

impl<K: KindOps> Call<'_, K> {
    /// Whether Redis answers a cheap read on the lock's key (routed like
    /// the lock's scripts): looked at before an attempt during an outage,
    /// so that a stalled server queues reads, not acquires that would run
    /// late, each one more hold of ours to give back. `Err` only when
    /// Redis is still unreachable; any other failure is left to the
    /// attempt itself.
    ///
    /// The probe ends at `deadline` (the call's own, or where the outage
    /// tolerance runs out), so that the last look of a waiting call does
    /// not overrun it by the retry rule's whole bound.
    pub(super) fn answers(
        &self,
        deadline: Option<Instant>,
    ) -> std::result::Result<(), redis::RedisError> {
        let server = &self.engine.server;
        let probe = server.check_open().and_then(|()| {
            server.pool().run_until(deadline, |conn| {
                redis::cmd("EXISTS")
                    .arg(&**self.lock.name)
                    .query::<i64>(conn)
            })
        });
        match probe.map_err(outage_cause) {
            Ok(_) | Err(Err(_)) => Ok(()),
            Err(Ok(cause)) => Err(cause),
        }
    }
}

/// An outage as one waiting call sees it.
#[derive(Debug)]
pub(crate) struct Outage {
    /// When the first attempt that failed was sent.
    since: Instant,
    /// What the last failed attempt reported.
    last: redis::RedisError,
    /// The next pause, before jitter.
    pause: Duration,
}

impl Outage {
    /// An outage whose first failed attempt was sent at `since`.
    pub(crate) fn began(since: Instant, cause: redis::RedisError) -> Outage {
        log::debug!("redhold: Redis unreachable for a waiting acquire ({cause}); waiting it out");
        Outage {
            since,
            last: cause,
            pause: FIRST_PAUSE,
        }
    }

    /// Another attempt failed with `cause`.
    pub(crate) fn failed_again(&mut self, cause: redis::RedisError) {
        log::debug!(
            "redhold: Redis still unreachable after {:?} ({cause})",
            self.since.elapsed()
        );
        self.last = cause;
    }

    /// What the last failed attempt reported.
    pub(crate) fn last_cause(&self) -> redis::RedisError {
        self.last.clone()
    }

    /// How long Redis has been unreachable for this call.
    pub(crate) fn lasted(&self) -> Duration {
        self.since.elapsed()
    }

    /// The pause before the next look, doubling up to [`MAX_PAUSE`], and
    /// cut so that the last look comes when `tolerance` runs out.
    pub(crate) fn next_pause(&mut self, tolerance: Option<Duration>) -> Duration {
        let pause = jittered(self.pause);
        self.pause = self.pause.saturating_mul(2).min(MAX_PAUSE);
        match tolerance {
            Some(tolerance) => pause.min(tolerance.saturating_sub(self.lasted())),
            None => pause,
        }
    }

    /// When the outage will have lasted `tolerance` (when there is one).
    pub(crate) fn gives_up_at(&self, tolerance: Option<Duration>) -> Option<Instant> {
        tolerance.and_then(|tolerance| self.since.checked_add(tolerance))
    }

    /// Whether the outage has lasted `tolerance` (when there is one).
    pub(crate) fn exceeds(&self, tolerance: Option<Duration>) -> bool {
        tolerance.is_some_and(|tolerance| self.lasted() >= tolerance)
    }

    /// The error a waiting call on `lock` ends with: the outage tolerance
    /// ran out (`exceeded_tolerance`), or else its own wait time.
    pub(crate) fn give_up(self, lock: &str, exceeded_tolerance: Option<Duration>) -> Error {
        Error::Unreachable {
            lock: names::shorten(lock),
            unreachable_for: self.lasted(),
            exceeded_tolerance,
            source: self.last,
        }
    }
}

/// The Redis error behind `e` when `e` says that Redis cannot serve for
/// now, which a waiting call rides out: the network failed (refused,
/// dropped, timed out), the sentinels know no master that is up (they are
/// failing over), or the server is loading its data, failing over or
/// cannot take writes yet (`LOADING`, `TRYAGAIN`, `CLUSTERDOWN`,
/// `MASTERDOWN`, `READONLY`: none ran the script). Any other error (a
/// script error, `NOPERM`, `WrongKind`, refused credentials, a peer that
/// does not speak RESP) is given back as it is.
pub(crate) fn outage_cause(e: Error) -> std::result::Result<redis::RedisError, Error> {
    use redis::{ErrorKind, ServerErrorKind};
    match e {
        Error::Redis(cause) | Error::Connect { source: cause, .. }
            if (is_transient(&cause) && !is_not_resp(&cause))
                || matches!(
                    cause.kind(),
                    ErrorKind::Server(
                        ServerErrorKind::BusyLoading
                            | ServerErrorKind::TryAgain
                            | ServerErrorKind::ClusterDown
                            | ServerErrorKind::MasterDown
                            | ServerErrorKind::ReadOnly
                    )
                ) =>
        {
            Ok(cause)
        }
        e => Err(e),
    }
}

/// Between half of `pause` and all of it, at random: waiters of many
/// processes that lost Redis at once do not all come back at one instant.
fn jittered(pause: Duration) -> Duration {
    let half = pause / 2;
    let span = u64::try_from(half.as_nanos()).unwrap_or(u64::MAX);
    // Each `RandomState` is keyed afresh: a cheap random number.
    let random = RandomState::new().hash_one(Instant::now());
    half + Duration::from_nanos(random % span.saturating_add(1))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused() -> redis::RedisError {
        std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "refused").into()
    }

    #[test]
    fn pauses_double_up_to_the_cap_with_jitter() {
        let mut outage = Outage::began(Instant::now(), refused());
        let mut cap = FIRST_PAUSE;
        for _ in 0..10 {
            let pause = outage.next_pause(None);
            assert!(pause >= cap / 2 && pause <= cap, "{pause:?} for {cap:?}");
            cap = (cap * 2).min(MAX_PAUSE);
        }
    }

    #[test]
    fn sentinels_failing_over_are_an_outage() {
        let failing_over = redis::RedisError::from((
            redis::ErrorKind::MasterNameNotFoundBySentinel,
            "not a master (yet)",
        ));
        assert!(outage_cause(Error::Redis(failing_over)).is_ok());
    }

    #[test]
    fn the_last_pause_ends_with_the_tolerance() {
        let mut outage = Outage::began(Instant::now(), refused());
        assert!(outage.next_pause(Some(Duration::from_millis(1))) <= Duration::from_millis(1));
        assert!(!outage.exceeds(None));
        assert!(outage.exceeds(Some(Duration::ZERO)));
        match outage.give_up("x", Some(Duration::ZERO)) {
            Error::Unreachable {
                lock,
                exceeded_tolerance: Some(Duration::ZERO),
                ..
            } => assert_eq!(lock, "x"),
            other => panic!("{other:?}"),
        }
    }
}
