//! How long the polls of redhold's futures take: [`Watch`] polls a
//! future through a wrapper that times each poll and its drop.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

/// How the polls of watched futures went, added up: how many, and the
/// longest (a poll that waited on Redis would take a round trip at least,
/// a stalled server's whole stall).
#[derive(Debug, Default)]
pub(crate) struct Watch {
    polls: AtomicU64,
    drops: AtomicU64,
    slowest_ns: AtomicU64,
}

impl Watch {
    pub(crate) fn new() -> Arc<Watch> {
        Arc::default()
    }

    /// Polls the future `make` builds (built in its first poll, so that
    /// building it is watched too), timing every poll and its drop.
    pub(crate) fn watch<F, M>(self: &Arc<Self>, make: M) -> Watched<F, M>
    where
        M: FnOnce() -> F + Unpin,
        F: Future,
    {
        Watched {
            make: Some(make),
            future: None,
            watch: Arc::clone(self),
        }
    }

    /// Drops `guard` (its drop queues the release), timed like a poll.
    pub(crate) fn drop_guard<T>(&self, guard: T) {
        self.time(|| drop(guard));
        self.drops.fetch_add(1, Ordering::Relaxed);
    }

    fn time<R>(&self, run: impl FnOnce() -> R) -> R {
        let started = Instant::now();
        let out = run();
        self.slowest_ns
            .fetch_max(started.elapsed().as_nanos() as u64, Ordering::Relaxed);
        out
    }

    /// How many polls were watched.
    pub(crate) fn polls(&self) -> u64 {
        self.polls.load(Ordering::Relaxed)
    }

    /// The longest poll or drop.
    pub(crate) fn slowest(&self) -> Duration {
        Duration::from_nanos(self.slowest_ns.load(Ordering::Relaxed))
    }

    /// A line for the report.
    pub(crate) fn report(&self) -> String {
        format!(
            "{} polls and {} guard drops watched, the slowest {:?}",
            self.polls(),
            self.drops.load(Ordering::Relaxed),
            self.slowest()
        )
    }
}

/// A redhold future under a [`Watch`].
pub(crate) struct Watched<F, M> {
    make: Option<M>,
    future: Option<Pin<Box<F>>>,
    watch: Arc<Watch>,
}

impl<F: Future, M: FnOnce() -> F + Unpin> Future for Watched<F, M> {
    type Output = F::Output;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = &mut *self;
        this.watch.polls.fetch_add(1, Ordering::Relaxed);
        let (make, future) = (&mut this.make, &mut this.future);
        this.watch.time(|| {
            let future = future.get_or_insert_with(|| {
                let make = make.take().expect("polled after it returned");
                Box::pin(make())
            });
            future.as_mut().poll(cx)
        })
    }
}

impl<F, M> Drop for Watched<F, M> {
    fn drop(&mut self) {
        // A future dropped before its end cancels its call: timed too.
        let future = self.future.take();
        self.watch.time(|| drop(future));
    }
}
