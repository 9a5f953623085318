//! How a [`Semaphore`] takes permits: the acquire calls, their one path,
//! and the give-back of permits an acquire took without returning them.

use std::time::Duration;

use super::end_call;
use super::permit::Permit;
use super::semaphore::{Semaphore, SEMAPHORE};
use super::wait::{Look, WaitCall, WaitOn};
use super::{check_permits, wrong_kind};
use crate::engine::CountedCall;
use crate::error::{Error, Result};
use crate::interrupt::Interrupt;
use crate::names;
use crate::scripts;
use crate::server::{Request, Resends};

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

    /// The acquire calls' one path (see [`Take`]).
    fn take(
        &self,
        permits: u32,
        wait: Option<Duration>,
        interrupt: Option<&Interrupt>,
    ) -> Result<Option<Permit>> {
        let call = self.begin_take(permits)?;
        if interrupt.is_some_and(Interrupt::is_triggered) {
            return Err(Error::Interrupted {
                lock: names::shorten(&self.name),
            });
        }
        WaitOn {
            engine: self.client.engine(),
            name: &self.name,
            channel: &self.channel,
        }
        .run(call, wait, interrupt)
    }

    /// One acquire call of `permits` permits, its arguments checked.
    pub(super) fn begin_take(&self, permits: u32) -> Result<Take> {
        check_permits(permits)?;
        self.check_name()?;
        let engine = self.client.engine();
        let server = engine.server();
        server.check_open()?;
        Ok(Take {
            semaphore: self.clone(),
            permits,
            // One request for the whole call: every attempt is numbered
            // and shares the latch, which outlives the call's outage
            // ride-through.
            request: server.request(&self.name, &engine.next_request_id(), Resends::RideThrough),
            // Shutdown waits for this call to give back what it took as
            // the client shut down.
            _counted: engine.count_call(),
            taken_async: false,
        })
    }
}

/// One acquire call of a semaphore. All its attempts are one
/// [`Request`](crate::server::Request): they share one request latch and
/// are numbered, so an attempt whose reply was lost is never counted twice
/// and one that reaches Redis after a later one takes nothing; a call that
/// ends without permits after such an attempt closes the latch and gives
/// back what it took, right behind the unanswered attempt when its
/// connection is open.
#[derive(Debug)]
pub(super) struct Take {
    semaphore: Semaphore,
    permits: u32,
    request: Request,
    _counted: CountedCall,
    /// The permits go to an async caller: their drop queues the give-back.
    taken_async: bool,
}

impl Take {
    /// The same call for an async caller.
    pub(super) fn for_async(mut self) -> Take {
        self.taken_async = true;
        self
    }
}

impl WaitCall for Take {
    type Found = ();
    type Output = Permit;

    fn attempt(&mut self) -> Result<Look<()>> {
        let Take {
            semaphore,
            permits,
            request,
            ..
        } = self;
        let server = semaphore.client.engine().server();
        let taken: i64 = server
            .run_request(
                &semaphore.name,
                request,
                |conn, latch, latch_ttl, attempt| {
                    scripts::SEMAPHORE_ACQUIRE
                        .key(&*semaphore.name)
                        .key(latch)
                        .arg(*permits)
                        .arg(latch_ttl)
                        .arg(attempt)
                        .invoke(conn)
                },
                |taken: &i64| *taken == 1,
            )
            .map_err(|e| wrong_kind(&semaphore.name, SEMAPHORE, e))?;
        Ok(match taken {
            1 => Look::Done(()),
            _ => Look::Again { within: None },
        })
    }

    fn end(mut self, outcome: Result<Option<()>>, abandoned: bool) -> Result<Option<Permit>> {
        let semaphore = &self.semaphore;
        let engine = semaphore.client.engine();
        let server = engine.server();
        match outcome {
            Ok(Some(())) if server.is_closed() || abandoned => {
                // Taken as the client shut down, or for nobody: no permit
                // comes out.
                let _back = server.giving_back();
                if let Err(e) = semaphore.give(self.permits) {
                    log::warn!(
                        "redhold: semaphore {:?}: permits taken for nobody (shutdown, or a \
                         dropped future) were not given back: {e}",
                        names::shorten(&semaphore.name)
                    );
                }
                if abandoned {
                    Ok(None)
                } else {
                    Err(Error::Shutdown)
                }
            }
            Ok(Some(())) => Ok(Some(if self.taken_async {
                Permit::taken_async(semaphore.clone(), self.permits)
            } else {
                Permit::new(semaphore.clone(), self.permits)
            })),
            outcome => {
                // No permit comes out: close the call in Redis, giving back
                // what an unanswered request took (or will take, late).
                let mut undo = scripts::eval(scripts::SEMAPHORE_GIVE_BACK_LUA);
                undo.arg(3)
                    .arg(&*semaphore.name)
                    .arg(&*semaphore.channel)
                    .arg(self.request.latch())
                    .arg(self.permits)
                    .arg(server.publish_command())
                    .arg(self.request.latch_ttl_ms());
                end_call(engine, &semaphore.name, SEMAPHORE, &mut self.request, undo);
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
