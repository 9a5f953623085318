//! Who holds the locks a handle takes: the calling thread ([`ThisThread`],
//! the default) or an [`Owner`]. The choice is a type parameter of
//! [`Lock`](crate::Lock) and its guard, so that a thread's guard stays
//! `!Send` and an owner's is `Send`, with one implementation of both.

use std::fmt;
use std::marker::PhantomData;

use crate::owner::Owner;

/// The holder of a handle's locks: [`ThisThread`] or [`Owner`].
///
/// Sealed: no other holders exist.
pub trait Holding: sealed::HoldingOps {}

impl<H: sealed::HoldingOps> Holding for H {}

/// The calling thread as a holder: a hold belongs to the thread that took
/// it, and its guard cannot leave that thread. The default of
/// [`Lock`](crate::Lock) and [`LockGuard`](crate::LockGuard).
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct ThisThread;

impl fmt::Debug for ThisThread {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ThisThread")
    }
}

/// Who holds, as the engine sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Holder {
    /// The calling thread.
    Thread,
    /// An owner, whichever thread calls.
    Owner(Owner),
}

pub(crate) mod sealed {
    //! What a [`Holding`](super::Holding) does, out of users' reach.
    // `HoldingOps` is public only to seal `Holding`: no one outside the
    // crate can name it, so it may speak of the crate's own `Holder`.
    #![allow(unreachable_pub, private_interfaces)]

    use super::*;

    /// A holder kind: how the engine names it, and whether its guards
    /// may leave the thread that took them.
    pub trait HoldingOps:
        Copy + Send + Sync + fmt::Debug + PartialEq + Eq + std::hash::Hash + 'static
    {
        /// Carried by the guards: `!Send` for a thread's.
        type GuardMarker: fmt::Debug + Default;

        /// The holder the engine acts for.
        fn holder(&self) -> Holder;

        /// The owner an async call of this holder's handle takes for: a
        /// task may move between threads, so it is never a thread. A
        /// thread's handle takes a fresh owner each call (not reentrant),
        /// an owner's handle that owner (reentrant for it).
        fn async_owner(&self) -> Owner;
    }

    impl HoldingOps for ThisThread {
        type GuardMarker = PhantomData<std::sync::MutexGuard<'static, ()>>;

        fn holder(&self) -> Holder {
            Holder::Thread
        }

        fn async_owner(&self) -> Owner {
            Owner::new()
        }
    }

    impl HoldingOps for Owner {
        type GuardMarker = PhantomData<()>;

        fn holder(&self) -> Holder {
            Holder::Owner(*self)
        }

        fn async_owner(&self) -> Owner {
            *self
        }
    }
}
