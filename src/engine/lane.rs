//! One ordered lane per (lock, holder): the one place where the requests
//! that name a holder's field in a lock are ordered, whoever sends them
//! (the holder's own calls, a guard's drop, the release worker).
//!
//! Redis cannot tell one hold of a field from another, so every rule about
//! a holder's field rests on order: an undo behind a late acquire counts
//! the holds above the guards' and must run before the holder's next
//! request; a release still on its way must run before the next acquire,
//! or it takes the new hold away. Before the lane each path kept these
//! rules itself, and each could act on a stale view of the others (issue
//! 39). Now one lane keeps, for its (lock, holder):
//!
//! - **the turn**: one sender at a time. A step (an acquire attempt, a
//!   release, a give-back, a settle) takes it, within its own deadline;
//! - **what is not confirmed**: every request sent whose reply never came
//!   ([`Entry`]), in the order sent. An entry leaves only once the server
//!   answered, or once no copy of its request can still run (its latch's
//!   life is over); never while a copy may still run;
//! - **the order**: a step sends only once every entry is settled (it
//!   settles them itself, one attempt each, within its deadline, or fails
//!   like an outage). A call whose attempts' replies never came keeps the
//!   lane for its own steps until it has written their undos.
//!
//! | who | takes the turn | settles entries | sends its own |
//! |---|---|---|---|
//! | an acquire attempt, a release, `hold_count` | waits within its deadline | all, in order | once all are settled |
//! | a guard's drop | waits within the drop's deadline | all, in order | or leaves it to the worker, unsent, in its place |
//! | the end of an acquire call with late attempts | waits for it | what it can | always writes its undos |
//! | the release worker | only when free | in order, until one is not ready | never |

mod entry;
mod one;
mod pending;
mod registry;
mod turn;
mod worker;

pub(crate) use entry::Entry;
pub(crate) use pending::{PendingRelease, ReleaseFn, Unconfirmed};
pub(crate) use registry::{Lanes, Turn};
