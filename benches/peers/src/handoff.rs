//! The warm hand-over between two clients of each async lock library, on
//! one current-thread tokio runtime, in alternating rounds: redhold's
//! async face (`redhold_async`), rslock and rlock's async API
//! (`rlock_async`).
//!
//! As `benches/limits/async_handoff.rs`: the holder (one client) takes the
//! lock, tells the waiter (another client, a task) to go, sleeps `IDLE`
//! (the waiter fails its first attempt and waits: redhold parks until the
//! release, the others sleep their retry interval), notes the instant and
//! releases; the sample is the time from there to the waiter's acquire
//! returning. The waiter then releases, and the next round starts from a
//! free lock. The peers poll (rslock every 0–200 ms at random, rlock every
//! 100 ms), so a sample is tens of milliseconds: few samples.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::mpsc::unbounded_channel;

use crate::async_peers::{runtime, Locker, RedholdLocker, RlockLocker, RslockLocker};

const ROUNDS: usize = 5;
/// The waiter's idle time before the release (as `limits`' warm hand-over).
const IDLE: Duration = Duration::from_millis(1);

/// Measures the three, `samples` hand-overs each (after a tenth as many
/// unmeasured ones), and appends `<key>_handoff_<p50|p90|p99|max|mean>_us`
/// and `<key>_handoff_n` to `out` (a JSON object's inside).
pub(crate) fn measure(url: &str, prefix: &str, samples: usize, out: &mut String) {
    let rt = runtime();
    let per_round = samples.div_ceil(ROUNDS).max(1);
    let keys = ["redhold_async", "rslock", "rlock_async"];
    eprintln!(
        "peers: {ROUNDS} rounds x {per_round} cross-client hand-overs of {}",
        keys.join(", ")
    );
    let mut of: Vec<Vec<Duration>> = keys.iter().map(|_| Vec::new()).collect();
    rt.block_on(async {
        let redhold = (RedholdLocker::open(url), RedholdLocker::open(url));
        let rslock = (RslockLocker::open(url), RslockLocker::open(url));
        let rlock = (RlockLocker::open(url).await, RlockLocker::open(url).await);
        let (redhold, rslock, rlock) = (pair(redhold), pair(rslock), pair(rlock));
        for round in 0..ROUNDS {
            for k in 0..keys.len() {
                let i = (round + k) % keys.len();
                let name = format!("{prefix}:handoff:{}", keys[i]);
                let v = match i {
                    0 => run(&redhold, name, per_round).await,
                    1 => run(&rslock, name, per_round).await,
                    _ => run(&rlock, name, per_round).await,
                };
                of[i].extend(v);
            }
        }
        let (h, w) = rlock;
        for l in [h, w] {
            if let Ok(l) = Arc::try_unwrap(l) {
                l.shutdown().await;
            }
        }
    });
    for (key, v) in keys.iter().zip(of.iter_mut()) {
        crate::figures(out, &format!("{key}_handoff"), v);
    }
}

type Pair<L> = (Arc<L>, Arc<L>);

fn pair<L>((h, w): (L, L)) -> Pair<L> {
    (Arc::new(h), Arc::new(w))
}

/// `n` hand-overs from `holder` to `waiter` (after `n / 10` unmeasured).
async fn run<L: Locker>((holder, waiter): &Pair<L>, name: String, n: usize) -> Vec<Duration> {
    let released_at: Arc<Mutex<Option<Instant>>> = Arc::new(Mutex::new(None));
    let (go_tx, mut go_rx) = unbounded_channel::<bool>();
    let (done_tx, mut done_rx) = unbounded_channel::<Duration>();
    let waiting = {
        let (waiter, name, released_at) = (Arc::clone(waiter), name.clone(), released_at.clone());
        tokio::spawn(async move {
            while go_rx.recv().await == Some(true) {
                let g = waiter.acquire(&name).await;
                let now = Instant::now();
                let t0 = released_at
                    .lock()
                    .unwrap()
                    .take()
                    .expect("the waiter acquired while the holder held the lock");
                waiter.release(g).await;
                done_tx.send(now - t0).expect("the holder is gone");
            }
        })
    };
    let mut out = Vec::with_capacity(n);
    for i in 0..n + n / 10 {
        let g = holder.acquire(&name).await;
        go_tx.send(true).expect("the waiter is gone");
        tokio::time::sleep(IDLE).await;
        *released_at.lock().unwrap() = Some(Instant::now());
        holder.release(g).await;
        let lat = done_rx.recv().await.expect("the waiter is gone");
        if i >= n / 10 {
            out.push(lat);
        }
    }
    go_tx.send(false).expect("the waiter is gone");
    waiting.await.expect("the waiter panicked");
    out
}
