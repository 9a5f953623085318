//! The warm hand-over of the async face: a task parked in `lock_async()`
//! gets the lock a task of the same client (same-client) or of a second
//! client (cross-client) releases, as `handoff::warm` measures it for
//! threads.
//!
//! The holder task takes the lock (`lock_async`), tells the waiter task to
//! go, sleeps `idle` (the waiter's call fails its first attempt and parks;
//! on tokio with tokio's timer, whose granularity is 1 ms, under the plain
//! `block_on` with `thread::sleep`), stores `Instant::now()` just before
//! dropping its guard (which queues the release on the client's threads,
//! as an async guard's drop does), and the sample is the time from that
//! instant to the waiter's `lock_async().await` returning. The waiter then
//! awaits `unlock_async()`, so each round starts from a free lock. Under
//! the plain `block_on` the waiter is a thread of its own with its own
//! `block_on`; on tokio it is a task of the same runtime.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use redhold::Client;
use tokio::sync::mpsc::unbounded_channel;

use crate::common::take_release_instant;
use crate::executors::Exec;

/// The samples, and in how many of them the waiter was not parked yet when
/// the holder released (counted by the waiter's client's `parked_waiters`
/// just before the release): those are not warm hand-overs.
#[derive(Default)]
pub(crate) struct Handoffs {
    pub(crate) samples: Vec<Duration>,
    pub(crate) not_parked: usize,
}

impl Handoffs {
    pub(crate) fn extend(&mut self, o: Handoffs) {
        self.samples.extend(o.samples);
        self.not_parked += o.not_parked;
    }
}

/// `n` hand-overs (after `n / 10` unmeasured) on `exec`, from a task of
/// `holder` to a task of `waiter` (the same client or another).
pub(crate) fn warm(
    exec: &Exec,
    holder: &Client,
    waiter: &Client,
    name: &str,
    n: usize,
    idle: Duration,
) -> Handoffs {
    let (holder, waiter, name) = (holder.clone(), waiter.clone(), name.to_owned());
    exec.run(move |sp| async move {
        let released_at: Arc<Mutex<Option<Instant>>> = Arc::new(Mutex::new(None));
        let (go_tx, mut go_rx) = unbounded_channel::<bool>();
        let (done_tx, mut done_rx) = unbounded_channel::<Duration>();
        let waiting = {
            let lock = waiter.lock(name.as_str());
            let released_at = Arc::clone(&released_at);
            sp.spawn(async move {
                while go_rx.recv().await == Some(true) {
                    let g = lock.lock_async().await.expect("waiter lock_async()");
                    let now = Instant::now();
                    let t0 = take_release_instant(&released_at);
                    g.unlock_async().await.expect("waiter unlock_async()");
                    done_tx.send(now - t0).expect("the holder is gone");
                }
            })
        };
        let lock = holder.lock(name.as_str());
        let mut out = Handoffs {
            samples: Vec::with_capacity(n),
            not_parked: 0,
        };
        for i in 0..n + n / 10 {
            let g = lock.lock_async().await.expect("holder lock_async()");
            go_tx.send(true).expect("the waiter is gone");
            sp.sleep(idle).await;
            let parked = waiter.stats().parked_waiters > 0;
            let t0 = Instant::now();
            *released_at.lock().unwrap() = Some(t0);
            drop(g);
            let lat = done_rx.recv().await.expect("the waiter is gone");
            if i >= n / 10 {
                out.samples.push(lat);
                out.not_parked += usize::from(!parked);
            }
        }
        go_tx.send(false).expect("the waiter is gone");
        waiting.await.expect("the waiter panicked");
        out
    })
}
