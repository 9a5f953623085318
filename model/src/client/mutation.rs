//! Past defects of the client, switched back on in the model only (never
//! in `src/`), each to show that the model finds its class: a test per
//! class asks for a counterexample and prints it.
//!
//! The scripts' own past defects are [`crate::scripts::Mutation`]s.

/// One past defect class of the client side.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ClientMutation {
    /// The unlock latch lives only as long as the retry window
    /// (`Resends::latch_ttl` without its extra second): the last resend
    /// may reach Redis after the latch expired.
    LatchWithinRetryWindow,
    /// With `sync_replicas`, the `WAIT`'s count is ignored
    /// (`Server::synced` always `Ok`): an acquire the replica has not
    /// acknowledged is told `Ok`, and a failover may lose it.
    WaitCountIgnored,
    /// The worker resends a release without asking whether its latch
    /// outlives the attempt (`pending.rs`, `attempt_once`'s two checks).
    WorkerIgnoresLatch,
    /// An acquire call writes no undo behind its late attempts
    /// (`attempt.rs`, `undo_late` returning at once).
    NoUndoBehindLate,
    /// A release is sent without settling the lane first: it does not
    /// wait for the undos behind the thread's late acquires (`release.rs`,
    /// the turn taken without `settle`).
    ReleaseSkipsUndos,
    /// The re-entry-only flag is never sent (`attempt.rs`, `holds_here`
    /// always false): a lost lock is taken anew under its old guards.
    NoReentryFlag,
    /// A release's nil ("not held") reply is taken as `Ok`
    /// (`release.rs`, `released`).
    NotHeldIsOk,
    /// Safety IV, first class: a step treats a release still on its way
    /// as settled before its latch's life is over (`pending.rs`, the
    /// entry settled when it may not be resent, instead of `NotYet`).
    SettleTakesReleaseOnItsWay,
    /// Safety IV, second class: an undo taken out of the lane before its
    /// reply, so that the worker's release overtakes it (`one.rs`,
    /// `settle`: the worker skips an unconfirmed undo).
    UndoTakenBeforeReply,
    /// A waiter skips its second try whenever its client is subscribed,
    /// even when a release was announced in between (`first_busy.rs`,
    /// `quiet_since` ignored).
    FirstBusySkipAlways,
    /// The last late attempt's undo gives back one hold only, whatever
    /// attempts were cut before their reply since the call's last answer
    /// (`attempt.rs`, `undo_behind` without `cut`; `pool.rs` not counting
    /// them): a hold taken by an attempt whose reply a cut lost stays with
    /// no guard (found by this model in the library as built, fixed in
    /// 42393ed).
    UndoIgnoresCutAttempts,
    /// A local call that takes the lock after waiting leaves the other
    /// waiters parked on the TTLs they read before (`wait.rs`,
    /// `bound_waiters_left` not called): when its hold expires
    /// unannounced, they sleep on past a free lock (found by this model
    /// in the library as built, fixed in 0d18fa5).
    NoBoundOnLocalTake,
    /// A waiter marks no count of its client's takings before its
    /// attempts, and a taking does not disturb the channel (`wait.rs`
    /// before 2bbaed6: no `take_mark`, `bound_parked` without
    /// `disturbed`): a waiter whose attempt read the TTL before another
    /// waiter of its client took the lock parks on that stale TTL,
    /// unbounded (`Known::TtlReadBeforeLocalTake`, found by this model in
    /// the library as built, fixed in 2bbaed6).
    NoTakeMark,
    /// An undo whose connection fails before its reply is settled, as
    /// before 2bbaed6 (`entry.rs`, `settle_undo` without `resend`): what
    /// reached the server ran, and a hold the undo did not give back (the
    /// late attempt's, the cut attempts') stays with no guard
    /// (`Known::CutAttemptsUndoLost`, found by this model in the library
    /// as built, fixed in 2bbaed6).
    NoUndoResend,
    /// An undo that cannot be written behind its late attempt (the
    /// connection failed first: `Trailing::follow` fails) is not kept, as
    /// before 3fc6f44 (`attempt.rs`, `undo_behind` without
    /// `Trailing::unwritten`): when the late attempt ran, or when the undo
    /// carried the give-back of attempts cut before their reply, a hold
    /// with no guard stays until it expires (`Known::UndoCannotFollowCut`,
    /// found by this model in the library as built, fixed in 3fc6f44).
    UndoNotWrittenLost,
    /// A hold handed over by a local release is recorded by the woken
    /// waiter, without a turn, as before a148de8 (`park_end.rs`,
    /// `handed_over` recording a new generation of one hold; no
    /// `RenewalMap::add_handed` in `release.rs`): another thread of the
    /// same owner re-entering before the waiter wakes finds Redis counting
    /// one hold more than the map and gives it back as counted twice, then
    /// the waiter's record marks the re-entry's lost: Redis counts one hold
    /// for two guards (found by the library's seeded checker with owners).
    WaiterRecordsHandedHold,
    /// A copy of an undo sent again whose reply did not come in time is
    /// dropped instead of kept (`late.rs`, `resend` without keeping the
    /// late copy), so that the next settle sends another while it may
    /// still run: the undo settles on the later copy, the thread's next
    /// acquire goes on, and the earlier copy's release whose "nothing
    /// above N" was not latched gives back a guarded hold.
    UndoCopiesOverlap,
    /// A release forgets its hold as it begins, before it has the lane's
    /// turn (`release.rs` before b67e84d: `release_one` ahead of
    /// `lanes.enter`): another thread of the owner, whose step holds the
    /// turn, sees fewer guards than Redis counts and gives back the hold
    /// the release is about to give back too.
    ReleaseForgetsBeforeTurn,
    /// With `sync_replicas`, an acquire the replicas did not confirm is
    /// undone by plain releases of one hold each, as before d847eb6
    /// (`attempt.rs`, `undo_unreplicated` recording releases without
    /// `undo_above`): a copy sent again across a failover to a replica
    /// that never had the acquire frees a hold a guard stands for (found
    /// by this model in the library as built,
    /// `Known::GiveBackAcrossFailover`).
    UnreplicatedUndoUnconditional,
    /// With `sync_replicas`, the undo of an unreplicated acquire is one
    /// release `above:N`, not one per attempt the pool may have made
    /// (`undo_unreplicated` recording a single release): an acquire the
    /// pool ran twice (its first reply cut before `WAIT`) leaves a hold
    /// with no guard (found by this model in the library as built, defect
    /// 8).
    UnreplicatedUndoOnce,
    /// With `sync_replicas`, the undo of an unreplicated acquire is not
    /// kept on the lane once its step's settle did not confirm it in time,
    /// as before 08de4f2 (`Engine::undo_unreplicated`, a loop on the pool
    /// whose release that timed out ended the undo): a copy held back past
    /// a failover runs after the thread's next `try_lock` took the lock,
    /// and frees the guarded hold (found by this model in the library as
    /// built, defect 9).
    UnreplicatedUndoOffLane,
    /// An acquire leaves a generation whose leases all ran out to the
    /// reply's judgement (`RenewalMap::add`) instead of ending it before
    /// it sends (`attempt.rs`, `RenewalMap::before_acquire`): when the call
    /// fails with the hold it took still in Redis (undone on a master a
    /// failover replaced, or left by a failed settling look), a stale
    /// guard's unlock releases that hold and says `Ok` (found by this
    /// model in the library as built, defect 10).
    ExpiredGenerationOutlivesAcquire,
    /// A re-entry sent on a live generation without a watched hold leaves
    /// the generation's lease end as it was (`RenewalMap::before_acquire`
    /// not extending it): when the call does not keep the hold (undone as
    /// unreplicated, or late), Redis keeps the key for the re-entry's
    /// lease while the client takes the holds for expired earlier, and a
    /// later acquire's undo leaves one hold no guard stands for (found by
    /// this model in the library as built, defect 11).
    ReentryLeaseNotExtended,
    /// A call that ends with late attempts leaves the generation's lease
    /// end as it was (`RenewalMap::late_attempts_may_reach` left out): a
    /// late attempt that re-enters the hold the call's retry took sets
    /// the key's TTL anew when it runs, the client takes the holds for
    /// expired earlier, and a later acquire's undo leaves one hold no
    /// guard stands for (found by this model's three-fault
    /// configuration, the second shape of defect 11).
    LateAttemptLeaseNotCounted,
    /// With two locks on one channel (`x` and `{x}`), a local release
    /// reserves the oldest parked waiter of the channel whatever its lock
    /// (`PubSub::reserve_successor` without `Channel::with_lock`): the
    /// release of `x` hands `x` to a waiter of `{x}`, whose guard then
    /// stands for a hold in the other lock's hash while `{x}` may be held
    /// by another.
    HandOverToOtherLock,
    /// With two locks on one channel, a release message wakes the waiters
    /// of one lock only (as if the channel were one lock's, `wake_one`
    /// instead of `Locks::wake_one_each`): when it was the other lock that
    /// was released, its waiter sleeps on past the free lock.
    MessageWakesOneLock,
}

impl ClientMutation {
    /// Every client mutation.
    pub const ALL: &'static [ClientMutation] = &[
        ClientMutation::LatchWithinRetryWindow,
        ClientMutation::WorkerIgnoresLatch,
        ClientMutation::NoUndoBehindLate,
        ClientMutation::ReleaseSkipsUndos,
        ClientMutation::NoReentryFlag,
        ClientMutation::NotHeldIsOk,
        ClientMutation::SettleTakesReleaseOnItsWay,
        ClientMutation::UndoTakenBeforeReply,
        ClientMutation::FirstBusySkipAlways,
        ClientMutation::UndoIgnoresCutAttempts,
        ClientMutation::NoBoundOnLocalTake,
        ClientMutation::ReleaseForgetsBeforeTurn,
        ClientMutation::NoTakeMark,
        ClientMutation::NoUndoResend,
        ClientMutation::UndoCopiesOverlap,
        ClientMutation::UndoNotWrittenLost,
        ClientMutation::WaiterRecordsHandedHold,
        ClientMutation::UnreplicatedUndoUnconditional,
        ClientMutation::UnreplicatedUndoOnce,
        ClientMutation::UnreplicatedUndoOffLane,
        ClientMutation::ExpiredGenerationOutlivesAcquire,
        ClientMutation::ReentryLeaseNotExtended,
        ClientMutation::LateAttemptLeaseNotCounted,
        ClientMutation::HandOverToOtherLock,
        ClientMutation::MessageWakesOneLock,
    ];
}
