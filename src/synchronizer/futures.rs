//! The async forms of the synchronizers' waiting calls: a semaphore's
//! acquires (plain and expirable) and a count-down latch's waits. Each
//! returns a [`WaitFuture`], `Send + 'static`, driven by any executor;
//! the calls' Redis I/O runs on the client's threads and a waiting call is
//! an entry in the client's waiter registry (`wait_async.rs`).
//!
//! # Cancel safety
//!
//! Dropping a future at any point takes nothing away for good: a call
//! with a request in flight (or already answered, but not polled) ends on
//! the client's threads and gives back what it took, closing its request
//! latch so that a late request takes nothing, as a thread's call that
//! ends without permits does; a parked call leaves the line.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use super::expirable::PermitExpirableSemaphore;
use super::expirable_permit::ExpirablePermit;
use super::latch::CountDownLatch;
use super::permit::Permit;
use super::semaphore::Semaphore;
use super::wait::{Look, WaitCall};
use super::wait_async::AsyncWait;
use crate::error::{Error, Result};

/// The future of a synchronizer's async call: resolves to `T` (a
/// [`Permit`], an `Option` of one, whether a latch opened...). Dropping it
/// is cancel-safe (see the methods that return it).
#[must_use = "futures do nothing unless `.await`ed or polled"]
pub struct WaitFuture<T> {
    call: std::result::Result<Box<dyn Polled<T>>, Option<Error>>,
}

impl<T> std::fmt::Debug for WaitFuture<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WaitFuture").finish_non_exhaustive()
    }
}

/// One call under way, its outcome mapped to what the future returns.
trait Polled<T>: Send + Sync {
    fn poll(&mut self, cx: &mut Context<'_>) -> Poll<Result<T>>;
}

struct Mapped<C: WaitCall, T> {
    call: Arc<AsyncWait<C>>,
    map: fn(Option<C::Output>) -> T,
    finished: bool,
}

impl<C: WaitCall, T: Send + Sync> Polled<T> for Mapped<C, T> {
    fn poll(&mut self, cx: &mut Context<'_>) -> Poll<Result<T>> {
        let outcome = std::task::ready!(self.call.poll(cx));
        self.finished = true;
        Poll::Ready(outcome.map(self.map))
    }
}

impl<C: WaitCall, T> Drop for Mapped<C, T> {
    fn drop(&mut self) {
        if !self.finished {
            self.call.cancel();
        }
    }
}

impl<T: Send + Sync + 'static> WaitFuture<T> {
    /// Starts `call` (or reports the error that kept it from starting)
    /// on the synchronizer `name` announced on `channel`.
    fn start<C: WaitCall>(
        engine: &Arc<crate::engine::Engine>,
        name: &Arc<str>,
        channel: &str,
        call: Result<C>,
        wait: Option<Duration>,
        map: fn(Option<C::Output>) -> T,
    ) -> Self {
        let call = call.map(|call| {
            let started = AsyncWait::start(engine, name, channel, call, wait);
            Box::new(Mapped {
                call: started,
                map,
                finished: false,
            }) as Box<dyn Polled<T>>
        });
        WaitFuture {
            call: call.map_err(Some),
        }
    }
}

impl<T> Future for WaitFuture<T> {
    type Output = Result<T>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<T>> {
        match &mut self.call {
            Ok(call) => call.poll(cx),
            Err(error) => Poll::Ready(Err(error.take().unwrap_or(Error::Shutdown))),
        }
    }
}

/// What an unbounded wait gives: always something.
fn expect<T>(found: Option<T>) -> T {
    match found {
        Some(found) => found,
        None => unreachable!("an unbounded wait ended with nothing"),
    }
}

impl Semaphore {
    /// Takes `permits` permits at once, waiting at most `wait` (forever
    /// when `None`): the async form of the acquires. The permit gives them
    /// back when dropped, on the client's threads (its drop never waits).
    fn take_async<T: Send + Sync + 'static>(
        &self,
        permits: u32,
        wait: Option<Duration>,
        map: fn(Option<Permit>) -> T,
    ) -> WaitFuture<T> {
        let call = self
            .begin_take(permits)
            .map(super::acquire::Take::for_async);
        let engine = self.client.engine();
        WaitFuture::start(engine, &self.name, &self.channel, call, wait, map)
    }

    /// Takes one permit, waiting as long as it takes, without blocking
    /// the task's executor: the async form of [`acquire`](Self::acquire).
    /// Cancel-safe: a dropped future takes no permit for good.
    ///
    /// # Errors
    ///
    /// As [`acquire`](Self::acquire).
    pub fn acquire_async(&self) -> WaitFuture<Permit> {
        self.take_async(1, None, expect)
    }

    /// The async form of [`acquire_many`](Self::acquire_many).
    ///
    /// # Errors
    ///
    /// As [`acquire_many`](Self::acquire_many).
    pub fn acquire_many_async(&self, permits: u32) -> WaitFuture<Permit> {
        self.take_async(permits, None, expect)
    }

    /// The async form of [`try_acquire`](Self::try_acquire).
    ///
    /// # Errors
    ///
    /// As [`try_acquire`](Self::try_acquire).
    pub fn try_acquire_async(&self) -> WaitFuture<Option<Permit>> {
        self.take_async(1, Some(Duration::ZERO), |found| found)
    }

    /// The async form of [`try_acquire_many`](Self::try_acquire_many).
    ///
    /// # Errors
    ///
    /// As [`try_acquire_many`](Self::try_acquire_many).
    pub fn try_acquire_many_async(&self, permits: u32) -> WaitFuture<Option<Permit>> {
        self.take_async(permits, Some(Duration::ZERO), |found| found)
    }

    /// The async form of [`try_acquire_for`](Self::try_acquire_for).
    ///
    /// # Errors
    ///
    /// As [`try_acquire_for`](Self::try_acquire_for).
    pub fn try_acquire_for_async(&self, wait: Duration) -> WaitFuture<Option<Permit>> {
        self.take_async(1, Some(wait), |found| found)
    }

    /// The async form of [`try_acquire_many_for`](Self::try_acquire_many_for).
    ///
    /// # Errors
    ///
    /// As [`try_acquire_many_for`](Self::try_acquire_many_for).
    pub fn try_acquire_many_for_async(
        &self,
        permits: u32,
        wait: Duration,
    ) -> WaitFuture<Option<Permit>> {
        self.take_async(permits, Some(wait), |found| found)
    }
}

impl PermitExpirableSemaphore {
    fn take_async<T: Send + Sync + 'static>(
        &self,
        lease: Duration,
        wait: Option<Duration>,
        map: fn(Option<ExpirablePermit>) -> T,
    ) -> WaitFuture<T> {
        let call = self
            .begin_take(lease)
            .map(super::expirable_acquire::TakeExpirable::for_async);
        let engine = self.client.engine();
        WaitFuture::start(engine, &self.name, &self.channel, call, wait, map)
    }

    /// Takes one permit for `lease`, waiting as long as it takes, without
    /// blocking the task's executor: the async form of
    /// [`acquire`](Self::acquire). Cancel-safe.
    ///
    /// # Errors
    ///
    /// As [`acquire`](Self::acquire).
    pub fn acquire_async(&self, lease: Duration) -> WaitFuture<ExpirablePermit> {
        self.take_async(lease, None, expect)
    }

    /// The async form of [`try_acquire`](Self::try_acquire).
    ///
    /// # Errors
    ///
    /// As [`try_acquire`](Self::try_acquire).
    pub fn try_acquire_async(&self, lease: Duration) -> WaitFuture<Option<ExpirablePermit>> {
        self.take_async(lease, Some(Duration::ZERO), |found| found)
    }

    /// The async form of [`try_acquire_for`](Self::try_acquire_for).
    ///
    /// # Errors
    ///
    /// As [`try_acquire_for`](Self::try_acquire_for).
    pub fn try_acquire_for_async(
        &self,
        wait: Duration,
        lease: Duration,
    ) -> WaitFuture<Option<ExpirablePermit>> {
        self.take_async(lease, Some(wait), |found| found)
    }
}

/// A latch's wait: done once its count is zero.
struct LatchWait {
    latch: CountDownLatch,
}

impl WaitCall for LatchWait {
    type Found = ();
    type Output = ();

    fn attempt(&mut self) -> Result<Look<()>> {
        Ok(Look::from_option((self.latch.count()? == 0).then_some(())))
    }

    fn end(self, outcome: Result<Option<()>>, _abandoned: bool) -> Result<Option<()>> {
        outcome
    }
}

impl CountDownLatch {
    fn wait_async_for(&self, wait: Option<Duration>) -> WaitFuture<bool> {
        let call = self.check_wait().map(|()| LatchWait {
            latch: self.clone(),
        });
        let engine = self.client.engine();
        WaitFuture::start(engine, &self.name, &self.channel, call, wait, |opened| {
            opened.is_some()
        })
    }

    /// Waits until the count reaches zero, without blocking the task's
    /// executor: the async form of [`wait`](Self::wait). Cancel-safe.
    ///
    /// # Errors
    ///
    /// As [`wait`](Self::wait).
    pub fn wait_async(&self) -> WaitFuture<bool> {
        self.wait_async_for(None)
    }

    /// The async form of [`wait_for`](Self::wait_for): whether the count
    /// reached zero within `timeout`.
    ///
    /// # Errors
    ///
    /// As [`wait_for`](Self::wait_for).
    pub fn wait_for_async(&self, timeout: Duration) -> WaitFuture<bool> {
        self.wait_async_for(Some(timeout))
    }
}
