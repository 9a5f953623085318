//! How a [`Semaphore`] takes permits: the acquire calls, their one path,
//! and the give-back of permits an acquire took without returning them.

use std::time::Duration;

use super::end_call;
use super::permit::Permit;
use super::semaphore::{Semaphore, SEMAPHORE};
use super::wait::{Look, WaitOn};
use super::{check_permits, wrong_kind};
use crate::error::{Error, Result};
use crate::interrupt::Interrupt;
use crate::names;
use crate::scripts;
use crate::server::Resends;

impl Semaphore {
    /// Takes one permit, waiting as long as it takes.
    ///
    /// # Errors
    ///
    /// [`Error::WrongKind`]; [`Error::Shutdown`]; [`Error::Unreachable`]
    /// after the outage tolerance; other Redis errors.
    pub fn acquire(&self) -> Result<Permit> {
        self.acquire_many(1)
    }

    /// Takes `permits` permits at once, waiting as long as it takes.
    ///
    /// # Errors
    ///
    /// As [`acquire`](Self::acquire), and [`Error::InvalidArgument`] for 0
    /// or more than `i32::MAX` permits.
    pub fn acquire_many(&self, permits: u32) -> Result<Permit> {
        self.take(permits, None, None)?
            .ok_or_else(|| unreachable_none(&self.name))
    }

    /// Takes one permit if one is available now, without waiting.
    ///
    /// # Errors
    ///
    /// As [`acquire`](Self::acquire), without waiting out an outage.
    pub fn try_acquire(&self) -> Result<Option<Permit>> {
        self.take(1, Some(Duration::ZERO), None)
    }

    /// Takes `permits` permits if that many are available now.
    ///
    /// # Errors
    ///
    /// As [`acquire_many`](Self::acquire_many), without waiting.
    pub fn try_acquire_many(&self, permits: u32) -> Result<Option<Permit>> {
        self.take(permits, Some(Duration::ZERO), None)
    }

    /// Takes one permit, waiting at most `wait`; `Ok(None)` when none came.
    ///
    /// # Errors
    ///
    /// As [`acquire`](Self::acquire); [`Error::Unreachable`] when `wait`
    /// ran out while Redis was away.
    pub fn try_acquire_for(&self, wait: Duration) -> Result<Option<Permit>> {
        self.take(1, Some(wait), None)
    }

    /// Takes `permits` permits at once, waiting at most `wait`.
    ///
    /// # Errors
    ///
    /// As [`try_acquire_for`](Self::try_acquire_for) and
    /// [`acquire_many`](Self::acquire_many).
    pub fn try_acquire_many_for(&self, permits: u32, wait: Duration) -> Result<Option<Permit>> {
        self.take(permits, Some(wait), None)
    }

    /// Takes one permit, waiting until one comes or `interrupt` is
    /// triggered ([`Error::Interrupted`]).
    ///
    /// # Errors
    ///
    /// As [`acquire`](Self::acquire), and [`Error::Interrupted`].
    pub fn acquire_interruptibly(&self, interrupt: &Interrupt) -> Result<Permit> {
        self.acquire_many_interruptibly(1, interrupt)
    }

    /// Takes `permits` permits, waiting until they come or `interrupt` is
    /// triggered.
    ///
    /// # Errors
    ///
    /// As [`acquire_many`](Self::acquire_many), and [`Error::Interrupted`].
    pub fn acquire_many_interruptibly(
        &self,
        permits: u32,
        interrupt: &Interrupt,
    ) -> Result<Permit> {
        self.take(permits, None, Some(interrupt))?
            .ok_or_else(|| unreachable_none(&self.name))
    }

    /// The acquire calls' one path. All attempts of one call are one
    /// [`Request`](crate::server::Request): they share one request latch
    /// and are numbered, so an attempt whose reply was lost is never
    /// counted twice and one that reaches Redis after a later one takes
    /// nothing; a call that ends without permits after such an attempt
    /// closes the latch and gives back what it took, right behind the
    /// unanswered attempt when its connection is open.
    fn take(
        &self,
        permits: u32,
        wait: Option<Duration>,
        interrupt: Option<&Interrupt>,
    ) -> Result<Option<Permit>> {
        check_permits(permits)?;
        self.check_name()?;
        let engine = self.client.engine();
        let server = engine.server();
        server.check_open()?;
        if interrupt.is_some_and(Interrupt::is_triggered) {
            return Err(Error::Interrupted {
                lock: names::shorten(&self.name),
            });
        }
        // Shutdown waits for this call to give back what it took as the
        // client shut down.
        let _call = engine.enter_call();
        // One request for the whole call: every attempt is numbered and
        // shares the latch, which outlives the call's outage ride-through.
        let mut request =
            server.request(&self.name, &engine.next_request_id(), Resends::RideThrough);
        let outcome = WaitOn {
            engine,
            name: &self.name,
            channel: &self.channel,
        }
        .until(wait, interrupt, || {
            let taken: Result<i64> = server
                .run_request(
                    &self.name,
                    &mut request,
                    |conn, latch, latch_ttl, attempt| {
                        scripts::SEMAPHORE_ACQUIRE
                            .key(&*self.name)
                            .key(latch)
                            .arg(permits)
                            .arg(latch_ttl)
                            .arg(attempt)
                            .invoke(conn)
                    },
                    |taken: &i64| *taken == 1,
                )
                .map_err(|e| wrong_kind(&self.name, SEMAPHORE, e));
            match taken? {
                1 => Ok(Look::Done(())),
                _ => Ok(Look::Again { within: None }),
            }
        });
        match outcome {
            Ok(Some(())) if server.is_closed() => {
                // Taken as the client shut down: no permit comes out.
                let _back = server.giving_back();
                if let Err(e) = self.give(permits) {
                    log::warn!(
                        "redhold: semaphore {:?}: permits taken as the client shut down \
                         were not given back: {e}",
                        names::shorten(&self.name)
                    );
                }
                Err(Error::Shutdown)
            }
            Ok(Some(())) => Ok(Some(Permit::new(self.clone(), permits))),
            outcome => {
                // No permit comes out: close the call in Redis, giving back
                // what an unanswered request took (or will take, late).
                let mut undo = scripts::eval(scripts::SEMAPHORE_GIVE_BACK_LUA);
                undo.arg(3)
                    .arg(&*self.name)
                    .arg(&*self.channel)
                    .arg(request.latch())
                    .arg(permits)
                    .arg(server.publish_command())
                    .arg(request.latch_ttl_ms());
                end_call(engine, &self.name, &mut request, undo);
                outcome.map(|_| None)
            }
        }
    }
}

/// A wait without a limit came back without permits, which the waiting
/// loop never does; an error rather than a panic all the same.
fn unreachable_none(name: &str) -> Error {
    crate::kind::sealed::unexpected_reply(name, "no permits after an unbounded wait")
}
