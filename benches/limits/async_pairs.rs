//! The uncontended acquire + release of the async face, against the same
//! pair through the blocking API and the raw EVALSHA pair, in one loop on
//! one executor thread, iteration by iteration (as `interleaved`: all
//! three see the same placement and load).
//!
//! Each iteration runs the raw pair (acquire + release EVALSHA on the
//! loop's own connection), the blocking pair (`lock()` + drop of the
//! guard) and the async pair (`lock_async().await` + the guard's
//! `unlock_async().await`, so that the release is complete when the pair
//! ends, as the blocking drop's is), in an order that rotates from one
//! iteration to the next. The blocking calls run on the executor's thread:
//! the point is the comparison, not a well-behaved service.

use std::time::{Duration, Instant};

use redhold::Client;

use crate::executors::Exec;
use crate::raw::RawLock;
use crate::server::raw_conn;

/// The samples of one executor's loop; index `i` of each is iteration `i`.
#[derive(Default)]
pub(crate) struct Pairs {
    /// Raw acquire + release EVALSHA pair.
    pub(crate) raw: Vec<Duration>,
    /// Blocking `lock()` + guard drop.
    pub(crate) blocking: Vec<Duration>,
    /// The `lock()` of the same iterations.
    pub(crate) blocking_acquire: Vec<Duration>,
    /// The guard drop of the same iterations.
    pub(crate) blocking_release: Vec<Duration>,
    /// `lock_async().await` + `unlock_async().await`.
    pub(crate) async_pair: Vec<Duration>,
    /// The `lock_async().await` of the same iterations.
    pub(crate) async_acquire: Vec<Duration>,
    /// The `unlock_async().await` of the same iterations.
    pub(crate) async_release: Vec<Duration>,
}

impl Pairs {
    pub(crate) fn extend(&mut self, o: Pairs) {
        self.raw.extend(o.raw);
        self.blocking.extend(o.blocking);
        self.blocking_acquire.extend(o.blocking_acquire);
        self.blocking_release.extend(o.blocking_release);
        self.async_pair.extend(o.async_pair);
        self.async_acquire.extend(o.async_acquire);
        self.async_release.extend(o.async_release);
    }
}

/// `n` iterations (after `n / 10` of warm-up) on `exec`.
pub(crate) fn measure(exec: &Exec, url: &str, client: &Client, prefix: &str, n: usize) -> Pairs {
    let (url, client) = (url.to_owned(), client.clone());
    let raw_key = format!("{prefix}:raw:async-pairs:{}", exec.key());
    let blocking_name = format!("{prefix}:lib:async-pairs:blocking:{}", exec.key());
    let async_name = format!("{prefix}:lib:async-pairs:async:{}", exec.key());
    exec.run(move |_| async move {
        let mut con = raw_conn(&url);
        let raw = RawLock::new(raw_key, "raw-client:1".into());
        let blocking = client.lock(blocking_name);
        let asynch = client.lock(async_name);
        let mut out = Pairs::default();
        for i in 0..n + n / 10 {
            let zero = (Duration::ZERO, Duration::ZERO);
            let (mut r, mut b, mut a) = (Duration::ZERO, zero, zero);
            for k in 0..3 {
                match (i + k) % 3 {
                    0 => {
                        let t0 = Instant::now();
                        assert_eq!(raw.try_acquire(&mut con), None, "raw acquire failed");
                        assert_eq!(raw.release(&mut con), Some(1), "raw release failed");
                        r = t0.elapsed();
                    }
                    1 => {
                        let t0 = Instant::now();
                        let g = blocking.lock().expect("lock()");
                        let t1 = Instant::now();
                        drop(g);
                        b = (t1 - t0, t1.elapsed());
                    }
                    _ => {
                        let t0 = Instant::now();
                        let g = asynch.lock_async().await.expect("lock_async()");
                        let t1 = Instant::now();
                        g.unlock_async().await.expect("unlock_async()");
                        a = (t1 - t0, t1.elapsed());
                    }
                }
            }
            if i >= n / 10 {
                out.raw.push(r);
                out.blocking.push(b.0 + b.1);
                out.blocking_acquire.push(b.0);
                out.blocking_release.push(b.1);
                out.async_pair.push(a.0 + a.1);
                out.async_acquire.push(a.0);
                out.async_release.push(a.1);
            }
        }
        out
    })
}
