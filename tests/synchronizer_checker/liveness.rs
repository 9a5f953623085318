//! Liveness of the semaphore's waiters: a watch thread reads the permits
//! available straight from Redis (not through the proxy) every few tens
//! of milliseconds and flags a schedule where, with no fault on, some
//! waiter still waits for no more permits than are free, [`BOUND`] after
//! they became free (or after the last fault ended, whichever is later).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use crate::storm::Weather;

/// How long a waiter may take to notice free permits: the outage backoff
/// after a partition (at most 1 s) plus an attempt through a connection
/// the partition held silent (2.3 s at most), with room for a busy
/// machine.
pub(crate) const BOUND: Duration = Duration::from_secs(4);
/// How often the watch looks.
const TICK: Duration = Duration::from_millis(50);

/// The waiting calls under way: how many permits each wants and until
/// when it waits.
#[derive(Debug, Default)]
pub(crate) struct Waiters {
    next: AtomicU64,
    waiting: Mutex<HashMap<u64, (u64, Instant)>>,
}

impl Waiters {
    /// A call waiting for `want` permits until `deadline` begins; give the
    /// token to [`leave`](Self::leave) when it returns.
    pub(crate) fn enter(&self, want: u64, deadline: Instant) -> u64 {
        let token = self.next.fetch_add(1, Ordering::Relaxed);
        self.waiting.lock().insert(token, (want, deadline));
        token
    }

    pub(crate) fn leave(&self, token: u64) {
        self.waiting.lock().remove(&token);
    }

    /// The fewest permits a waiter that will still wait a while wants.
    fn least_wanted(&self, now: Instant) -> Option<u64> {
        self.waiting
            .lock()
            .values()
            .filter(|(_, deadline)| *deadline > now + Duration::from_millis(500))
            .map(|(want, _)| *want)
            .min()
    }
}

/// Watches semaphore `name` at `url` until `stop`; the first starvation
/// seen, described.
pub(crate) fn watch(
    url: &str,
    name: &str,
    waiters: &Waiters,
    weather: &Weather,
    stop: &AtomicBool,
) -> Option<String> {
    let client = redis::Client::open(url).expect("the watch's client");
    let mut conn = client.get_connection().expect("the watch's connection");
    let mut starved: Option<Instant> = None;
    while !stop.load(Ordering::SeqCst) {
        thread::sleep(TICK);
        let Some(calm) = weather.calm_since() else {
            starved = None;
            continue;
        };
        let now = Instant::now();
        let free: Option<i64> = redis::cmd("GET").arg(name).query(&mut conn).ok().flatten();
        let free = free.unwrap_or(0).max(0) as u64;
        match waiters.least_wanted(now) {
            Some(want) if want <= free => {
                let since = *starved.get_or_insert(now);
                let from = since.max(calm);
                if now.duration_since(from) > BOUND {
                    return Some(format!(
                        "{free} permit(s) free and a waiter for {want} still waiting {:.1} s \
                         after they became free ({:.1} s after the last fault ended)",
                        now.duration_since(since).as_secs_f64(),
                        now.duration_since(calm).as_secs_f64()
                    ));
                }
            }
            _ => starved = None,
        }
    }
    None
}
