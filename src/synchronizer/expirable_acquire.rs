//! How a [`PermitExpirableSemaphore`] hands out permits: the acquire calls
//! and their one path (numbered requests and a request latch, as for the
//! plain semaphore: see `acquire.rs`).

use std::time::Duration;

use uuid::Uuid;

use super::end_call;
use super::expirable::{now_ms, PermitExpirableSemaphore, EXPIRABLE};
use super::expirable_permit::ExpirablePermit;
use super::wait::{Look, WaitCall, WaitOn};
use super::wrong_kind;
use crate::config::lease_millis;
use crate::engine::CountedCall;
use crate::error::{Error, Result};
use crate::interrupt::Interrupt;
use crate::kind::sealed::unexpected_reply;
use crate::names;
use crate::scripts;
use crate::server::{Request, Resends};

impl PermitExpirableSemaphore {
    /// Takes one permit for `lease`, waiting as long as it takes.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] for a zero lease; [`Error::WrongKind`];
    /// [`Error::Shutdown`]; [`Error::Unreachable`] after the outage
    /// tolerance; other Redis errors.
    pub fn acquire(&self, lease: Duration) -> Result<ExpirablePermit> {
        self.take(lease, None, None)?
            .ok_or_else(|| unexpected_reply(&self.name, "no permit after an unbounded wait"))
    }

    /// Takes one permit for `lease` if one is available now.
    ///
    /// # Errors
    ///
    /// As [`acquire`](Self::acquire), without waiting.
    pub fn try_acquire(&self, lease: Duration) -> Result<Option<ExpirablePermit>> {
        self.take(lease, Some(Duration::ZERO), None)
    }

    /// Takes one permit for `lease`, waiting at most `wait`.
    ///
    /// # Errors
    ///
    /// As [`acquire`](Self::acquire); [`Error::Unreachable`] when `wait`
    /// ran out while Redis was away.
    pub fn try_acquire_for(
        &self,
        wait: Duration,
        lease: Duration,
    ) -> Result<Option<ExpirablePermit>> {
        self.take(lease, Some(wait), None)
    }

    /// Takes one permit for `lease`, waiting until one comes or
    /// `interrupt` is triggered ([`Error::Interrupted`]).
    ///
    /// # Errors
    ///
    /// As [`acquire`](Self::acquire), and [`Error::Interrupted`].
    pub fn acquire_interruptibly(
        &self,
        lease: Duration,
        interrupt: &Interrupt,
    ) -> Result<ExpirablePermit> {
        self.take(lease, None, Some(interrupt))?
            .ok_or_else(|| unexpected_reply(&self.name, "no permit after an unbounded wait"))
    }

    /// The acquire calls' one path (see [`TakeExpirable`]).
    fn take(
        &self,
        lease: Duration,
        wait: Option<Duration>,
        interrupt: Option<&Interrupt>,
    ) -> Result<Option<ExpirablePermit>> {
        let call = self.begin_take(lease)?;
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

    /// One acquire call of a permit for `lease`, its arguments checked.
    pub(super) fn begin_take(&self, lease: Duration) -> Result<TakeExpirable> {
        let lease_ms = lease_millis(lease)?;
        self.check_name()?;
        let engine = self.client.engine();
        let server = engine.server();
        server.check_open()?;
        Ok(TakeExpirable {
            semaphore: self.clone(),
            lease_ms,
            id: *Uuid::new_v4().as_bytes(),
            request: server.request(&self.name, &engine.next_request_id(), Resends::RideThrough),
            _counted: engine.count_call(),
            taken_async: false,
        })
    }
}

/// One acquire call of an expirable semaphore: one permit id and one
/// request latch per call, every request numbered. A waiter parks until a
/// message or the earliest lease end, whichever comes first.
#[derive(Debug)]
pub(super) struct TakeExpirable {
    semaphore: PermitExpirableSemaphore,
    lease_ms: u64,
    id: [u8; 16],
    request: Request,
    _counted: CountedCall,
    /// The permit goes to an async caller: its drop queues the give-back.
    taken_async: bool,
}

impl TakeExpirable {
    /// The same call for an async caller.
    pub(super) fn for_async(mut self) -> TakeExpirable {
        self.taken_async = true;
        self
    }
}

impl WaitCall for TakeExpirable {
    type Found = ();
    type Output = ExpirablePermit;

    fn attempt(&mut self) -> Result<Look<()>> {
        let TakeExpirable {
            semaphore,
            lease_ms,
            id,
            request,
            ..
        } = self;
        let server = semaphore.client.engine().server();
        let now = now_ms();
        let reply: Vec<i64> = server
            .run_request(
                &semaphore.name,
                request,
                |conn, latch, latch_ttl, attempt| {
                    scripts::EXPIRABLE_ACQUIRE
                        .key(&*semaphore.name)
                        .key(&*semaphore.leases)
                        .key(&*semaphore.channel)
                        .key(latch)
                        .arg(1)
                        .arg(now.saturating_add(*lease_ms))
                        .arg(now)
                        .arg(server.publish_command())
                        .arg(latch_ttl)
                        .arg(attempt)
                        .arg(&id[..])
                        .invoke(conn)
                },
                |reply: &Vec<i64>| reply.first() == Some(&1),
            )
            .map_err(|e| wrong_kind(&semaphore.name, EXPIRABLE, e))?;
        match reply[..] {
            [1, ..] => Ok(Look::Done(())),
            // Look again when the earliest lease ends: nobody announces
            // that.
            [0, ends] if ends > 0 => Ok(Look::Again {
                within: Some(Duration::from_millis(
                    u64::try_from(ends)
                        .unwrap_or(0)
                        .saturating_sub(now_ms())
                        .max(1),
                )),
            }),
            [0, ..] => Ok(Look::Again { within: None }),
            _ => Err(unexpected_reply(&semaphore.name, &reply)),
        }
    }

    fn end(
        mut self,
        outcome: Result<Option<()>>,
        abandoned: bool,
    ) -> Result<Option<ExpirablePermit>> {
        let semaphore = &self.semaphore;
        let engine = semaphore.client.engine();
        let server = engine.server();
        match outcome {
            Ok(Some(())) if server.is_closed() || abandoned => {
                let _back = server.giving_back();
                if let Err(e) = semaphore.give(&self.id) {
                    log::warn!(
                        "redhold: semaphore {:?}: a permit taken for nobody (shutdown, or a \
                         dropped future) was not given back (its lease will end): {e}",
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
                ExpirablePermit::taken_async(semaphore.clone(), self.id)
            } else {
                ExpirablePermit::new(semaphore.clone(), self.id)
            })),
            outcome => {
                // Ends the call in Redis: gives back what an unanswered
                // request took (or will take, late), closes the latch.
                let mut undo = scripts::eval(scripts::EXPIRABLE_GIVE_BACK_LUA);
                undo.arg(4)
                    .arg(&*semaphore.name)
                    .arg(&*semaphore.leases)
                    .arg(&*semaphore.channel)
                    .arg(self.request.latch())
                    .arg(server.publish_command())
                    .arg(self.request.latch_ttl_ms())
                    .arg(&self.id[..]);
                end_call(engine, &semaphore.name, EXPIRABLE, &mut self.request, undo);
                outcome.map(|_| None)
            }
        }
    }
}
