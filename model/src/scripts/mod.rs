//! The Redis side: one function per Lua file in `lua/`, each one atomic
//! step on a [`Keyspace`] that takes the script's keys and arguments (a
//! [`Call`]) and gives its reply, its exit and what it published.
//!
//! Each function follows its file statement by statement, so that a reader
//! can hold one beside the other; a comment names the file's line where an
//! exit is. What the files say and why is in the files themselves.

mod branches;
mod counters;
mod expirable;
mod fair;
mod inspect;
mod plain;
mod read_write;

pub use branches::{branches, helper_returns, Branch};

use crate::call::{Call, Publish};
use crate::keyspace::{Cmd, Keyspace};
use crate::names::Channel;
use crate::reply::{Outcome, Publication, Reply};

/// A deliberate fault in the model's scripts (never in `lua/`), for
/// showing that the checks find what they should.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Mutation {
    /// `release.lua` without its latch read: a retry of a release that ran
    /// releases again.
    ReleaseSkipsLatch,
    /// `acquire.lua` without its `PEXPIRE` on a new lock.
    AcquireWithoutTtl,
    /// `release.lua` reading the latch only on a retry (before issue 33's
    /// notes: a first attempt held back past its retry releases again).
    FirstAttemptSkipsLatch,
    /// `release.lua`'s retry that finds the field gone replying 3 without
    /// latching it (the fair, read and write releases once did): an
    /// earlier attempt still on its way then acts as a new release.
    RetryGoneNotLatched,
    /// `fair_release.lua`'s retry that finds the lock free or the field
    /// gone replying 3 without latching it (`latch_gone`).
    FairRetryGoneNotLatched,
    /// `write_release.lua`'s retry that finds no write hold of the caller
    /// replying 3 without latching it.
    WriteRetryGoneNotLatched,
    /// `read_release.lua`'s retry that finds no read hold of the caller
    /// replying 3 without latching it.
    ReadRetryGoneNotLatched,
    /// `release.lua` handing the lock to a successor with a shorter lease
    /// without the wake-up publish: other clients' waiters sleep on the
    /// old, longer TTL.
    HandOverWithoutPublish,
    /// `read_acquire.lua` keeping a caller's field none of whose hold keys
    /// is left (before model defect 12): the field counts those dead
    /// holds, and an undo's `above:N` gives back a dead hold instead of a
    /// live one.
    ReadAcquireKeepsExpiredHolds,
}

/// What a call's environment decides: who hears a publish, and any
/// [`Mutation`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Env {
    /// How many receive a classic `PUBLISH` (on any channel).
    pub classic_listeners: i64,
    /// How many receive an `SPUBLISH`.
    pub sharded_listeners: i64,
    /// The model's deliberate fault, if any.
    pub mutation: Option<Mutation>,
}

/// One script run: the keyspace it changes and what it published so far.
pub(crate) struct Exec<'a> {
    pub(crate) ks: &'a mut Keyspace,
    env: Env,
    published: Vec<Publication>,
}

/// What a script function gives: its reply and its exit (a branch id), or
/// the error a command raised.
pub(crate) type Exit = Cmd<(Reply, &'static str)>;

impl Exec<'_> {
    /// `redis.call(publish-command, channel, message)`: the receivers.
    pub(crate) fn publish(&mut self, command: Publish, channel: Channel, message: i64) -> i64 {
        let mut heard = 0;
        if matches!(command, Publish::Classic | Publish::Both) {
            self.published.push(Publication {
                channel,
                message,
                sharded: false,
            });
            heard += self.env.classic_listeners;
        }
        if matches!(command, Publish::Sharded | Publish::Both) {
            self.published.push(Publication {
                channel,
                message,
                sharded: true,
            });
            heard += self.env.sharded_listeners;
        }
        heard
    }

    pub(crate) fn mutated(&self, mutation: Mutation) -> bool {
        self.env.mutation == Some(mutation)
    }
}

/// Runs one call atomically on `ks`.
pub fn run(ks: &mut Keyspace, call: &Call, env: Env) -> Outcome {
    let mut x = Exec {
        ks,
        env,
        published: Vec::new(),
    };
    let script = Script::of(call);
    let exit = match call {
        Call::Acquire { .. } | Call::FencedAcquire { .. } => plain::acquire(&mut x, call),
        Call::Release { .. } => plain::release(&mut x, call),
        Call::ForceRelease { .. } => plain::force_release(&mut x, call),
        Call::Renew { .. } => plain::renew(&mut x, call),
        Call::FairAcquire { .. } => fair::acquire(&mut x, call),
        Call::FairRelease { .. } => fair::release(&mut x, call),
        Call::FairGiveUp { .. } => fair::give_up(&mut x, call),
        Call::FairForceRelease { .. } => fair::force_release(&mut x, call),
        Call::ReadAcquire { .. } => read_write::read_acquire(&mut x, call),
        Call::ReadRelease { .. } => read_write::read_release(&mut x, call),
        Call::WriteAcquire { .. } => read_write::write_acquire(&mut x, call),
        Call::WriteRelease { .. } => read_write::write_release(&mut x, call),
        Call::RwForceRelease { .. } => read_write::force_release(&mut x, call),
        Call::SemaphoreAcquire { .. }
        | Call::SemaphoreRelease { .. }
        | Call::SemaphoreSet { .. }
        | Call::SemaphoreGiveBack { .. } => counters::semaphore(&mut x, call),
        Call::LatchTrySet { .. } | Call::LatchCountDown { .. } | Call::LatchDelete { .. } => {
            counters::latch(&mut x, call)
        }
        Call::LatchCountDownUndo { .. } => counters::latch_undo(&mut x, call),
        Call::ExpirableAcquire { .. }
        | Call::ExpirableRelease { .. }
        | Call::ExpirableLease { .. }
        | Call::ExpirableGiveBack { .. } => expirable::run(&mut x, call),
        Call::Inspect { .. } | Call::InspectCounter { .. } => inspect::run(&mut x, call),
    };
    let (reply, branch) = match exit {
        Ok(done) => done,
        Err(e) => (Reply::Raised(e.code), "raised"),
    };
    debug_assert!(
        branch == "raised" || branches(script).iter().any(|b| b.id == branch),
        "{branch} is not in {}'s branch table",
        script.file()
    );
    Outcome {
        reply,
        branch,
        published: x.published,
    }
}

macro_rules! scripts {
    ($($(#[doc = $doc:literal])* $variant:ident => $file:literal, $sha:literal;)*) => {
        /// One Lua file in `lua/`.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum Script {
            $($(#[doc = $doc])* $variant,)*
        }

        impl Script {
            /// Every script.
            pub const ALL: &'static [Script] = &[$(Script::$variant),*];

            /// Its file name in `lua/`.
            pub fn file(self) -> &'static str {
                match self { $(Script::$variant => $file,)* }
            }

            /// The SHA-1 of the file's text this model was written from:
            /// the conformance test fails when the file's changes.
            pub fn pinned_sha1(self) -> &'static str {
                match self { $(Script::$variant => $sha,)* }
            }
        }
    };
}

scripts! {
    /// `acquire.lua`.
    Acquire => "acquire.lua", "ede358a4a5f4b84ec2dae59e157693716ba97001";
    /// `fenced_acquire.lua`.
    FencedAcquire => "fenced_acquire.lua", "55c3677c448144388e882860f685abd2d6f91d29";
    /// `release.lua`.
    Release => "release.lua", "7e213005b97f8d20dc564571616da1bc1099a16e";
    /// `force_release.lua`.
    ForceRelease => "force_release.lua", "9445572d12bb9f6d24a5e4a51a5f3c864d636559";
    /// `renew.lua`.
    Renew => "renew.lua", "f1410951780235cf4c67d239f6b5c81cd4cf9485";
    /// `fair_acquire.lua`.
    FairAcquire => "fair_acquire.lua", "e308f5f21cbe0fbbd772b407355cbaf69653e2ed";
    /// `fair_release.lua`.
    FairRelease => "fair_release.lua", "55d4eb35f377c0468eda6d5588e76829b131701c";
    /// `fair_give_up.lua`.
    FairGiveUp => "fair_give_up.lua", "0ecba44209ec9fce7a9f0499f04a3e9788b67abc";
    /// `fair_force_release.lua`.
    FairForceRelease => "fair_force_release.lua", "75ee0762a9e5b509fa6c43110476217c32435ff5";
    /// `read_acquire.lua`.
    ReadAcquire => "read_acquire.lua", "44312d1d0f2dc87ffe4a486331de119dfc862292";
    /// `read_release.lua`.
    ReadRelease => "read_release.lua", "03ebfb0382e53a57a04a05b309739e0f5b79bbb2";
    /// `write_acquire.lua`.
    WriteAcquire => "write_acquire.lua", "5eee869dfdd3c08d55ea5e8c52fa109a3f58caae";
    /// `write_release.lua`.
    WriteRelease => "write_release.lua", "fc8e5b5ec7b21df55c1daba25ad691d71264b713";
    /// `rw_force_release.lua`.
    RwForceRelease => "rw_force_release.lua", "d52e53745aee7765b4c4f485288bcefab2de93f6";
    /// `semaphore_acquire.lua`.
    SemaphoreAcquire => "semaphore_acquire.lua", "4410c6a4aaa65ebb3b3cb65dce367b18048a5239";
    /// `semaphore_release.lua`.
    SemaphoreRelease => "semaphore_release.lua", "50b14114f8fe17fb112f6b6576b4c995a81c9d01";
    /// `semaphore_set.lua`.
    SemaphoreSet => "semaphore_set.lua", "8cbb3655f2b94e297dbde55d9ffab9935accbc83";
    /// `semaphore_give_back.lua`.
    SemaphoreGiveBack => "semaphore_give_back.lua", "d3bfc0aaf40d8c8e85947a0d5a4fad5f2016b733";
    /// `expirable_acquire.lua`.
    ExpirableAcquire => "expirable_acquire.lua", "5c6767937f75211866f6279eb7f79c897af21802";
    /// `expirable_release.lua`.
    ExpirableRelease => "expirable_release.lua", "2fea79e3e32def73d2a728a0e04036eaf648f7c8";
    /// `expirable_lease.lua`.
    ExpirableLease => "expirable_lease.lua", "961ce9eb17c6eae401e4deadd4d32ec919727999";
    /// `expirable_give_back.lua`.
    ExpirableGiveBack => "expirable_give_back.lua", "3e974a491ff39e3ac37a36c597e3b494cd075807";
    /// `latch_try_set.lua`.
    LatchTrySet => "latch_try_set.lua", "6347d4abec53527222bf41cf14ecff6f13322592";
    /// `latch_count_down.lua`.
    LatchCountDown => "latch_count_down.lua", "19eae5b73bc518287d7b98603faa4cc7f0776957";
    /// `latch_count_down_undo.lua`.
    LatchCountDownUndo => "latch_count_down_undo.lua", "8a392ab249ac74556435677a62ebcae4505d6381";
    /// `latch_delete.lua`.
    LatchDelete => "latch_delete.lua", "909dc3d1ea35970117f66d869da5f6485c15c03e";
    /// `inspect.lua`.
    Inspect => "inspect.lua", "94f96ad005094cb7f0653bb185e442ccc179731e";
    /// `inspect_counter.lua`.
    InspectCounter => "inspect_counter.lua", "8be1878ba18eb1da75479b09e5917b3ce23f9f26";
}

impl Script {
    /// The script a call runs.
    pub fn of(call: &Call) -> Script {
        match call {
            Call::Acquire { .. } => Script::Acquire,
            Call::FencedAcquire { .. } => Script::FencedAcquire,
            Call::Release { .. } => Script::Release,
            Call::ForceRelease { .. } => Script::ForceRelease,
            Call::Renew { .. } => Script::Renew,
            Call::FairAcquire { .. } => Script::FairAcquire,
            Call::FairRelease { .. } => Script::FairRelease,
            Call::FairGiveUp { .. } => Script::FairGiveUp,
            Call::FairForceRelease { .. } => Script::FairForceRelease,
            Call::ReadAcquire { .. } => Script::ReadAcquire,
            Call::ReadRelease { .. } => Script::ReadRelease,
            Call::WriteAcquire { .. } => Script::WriteAcquire,
            Call::WriteRelease { .. } => Script::WriteRelease,
            Call::RwForceRelease { .. } => Script::RwForceRelease,
            Call::SemaphoreAcquire { .. } => Script::SemaphoreAcquire,
            Call::SemaphoreRelease { .. } => Script::SemaphoreRelease,
            Call::SemaphoreSet { .. } => Script::SemaphoreSet,
            Call::SemaphoreGiveBack { .. } => Script::SemaphoreGiveBack,
            Call::ExpirableAcquire { .. } => Script::ExpirableAcquire,
            Call::ExpirableRelease { .. } => Script::ExpirableRelease,
            Call::ExpirableLease { .. } => Script::ExpirableLease,
            Call::ExpirableGiveBack { .. } => Script::ExpirableGiveBack,
            Call::LatchTrySet { .. } => Script::LatchTrySet,
            Call::LatchCountDown { .. } => Script::LatchCountDown,
            Call::LatchCountDownUndo { .. } => Script::LatchCountDownUndo,
            Call::LatchDelete { .. } => Script::LatchDelete,
            Call::Inspect { .. } => Script::Inspect,
            Call::InspectCounter { .. } => Script::InspectCounter,
        }
    }
}
