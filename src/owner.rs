//! Holders that are not threads: an [`Owner`] stands for a job, a pipeline,
//! a task, anything that takes a lock on one thread and may release it on
//! another (Redisson's `threadId` overloads).

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};

/// The first owner id: 2^62. Thread numbers count up from 1 (`thread_id.rs`)
/// and never get near it, so an owner's field can never be a thread's;
/// below 2^63, so that Java reads it as a positive `long` (Redisson's
/// `threadId`).
const FIRST_ID: u64 = 1 << 62;

/// The next owner id to hand out.
static NEXT_ID: AtomicU64 = AtomicU64::new(FIRST_ID);

/// A holder of locks that is not a thread: its holds may be taken on one
/// thread and released on another, and its guards
/// ([`OwnerGuard`](crate::OwnerGuard)) are `Send`.
///
/// Each `Owner::new()` is a new holder with a process-unique id. Copies of
/// one owner are the same holder: a lock it holds is reentrant for it from
/// any thread (Redis counts every hold), and it waits for every other
/// holder, threads of this process included, as Redisson's `threadId`
/// holders do. In Redis an owner's hold looks like any other: the field
/// `<client-uuid>:<id>`, the shape Redisson's `lockAsync(threadId)` writes.
///
/// ```no_run
/// # fn main() -> redhold::Result<()> {
/// let client = redhold::Client::open("redis://127.0.0.1:6379/")?;
/// let job = redhold::Owner::new();
/// let guard = client.lock("orders:42").for_owner(job).lock()?;
/// std::thread::spawn(move || {
///     // ... finish the work here, then release on this thread ...
///     drop(guard);
/// })
/// .join()
/// .unwrap();
/// # Ok(()) }
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Owner {
    id: u64,
}

impl Owner {
    /// A new holder, unlike every other owner and thread of this process.
    pub fn new() -> Owner {
        Owner {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
        }
    }

    /// Its id: the number after the client's id in its holder field, at or
    /// above 2^62 and below 2^63 (a positive Java `long`, as Redisson's
    /// `threadId` is). A Redisson client's `isHeldByThread(id)` answers
    /// false for it: it looks for `<its own client id>:<id>`, a holder of
    /// that Java client; [`Lock::is_held_by`](crate::Lock::is_held_by)
    /// with the whole [`holder_id`](crate::Lock::holder_id) names the
    /// owner to any client.
    pub fn id(&self) -> u64 {
        self.id
    }
}

impl Default for Owner {
    /// A new owner, as [`Owner::new`].
    fn default() -> Owner {
        Owner::new()
    }
}

impl fmt::Debug for Owner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Owner({})", self.id)
    }
}

impl fmt::Display for Owner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "owner {}", self.id)
    }
}

/// Whether `id`, the number after a holder field's client id, names an
/// owner rather than a thread.
pub(crate) fn is_owner_id(id: u64) -> bool {
    id >= FIRST_ID
}

/// The owner a holder field (`<client-uuid>:<id>`, `:write` after it for a
/// writer) stands for, if it is an owner's.
pub(crate) fn owner_in_field(field: &str) -> Option<Owner> {
    let base = field.strip_suffix(":write").unwrap_or(field);
    let (_, id) = base.rsplit_once(':')?;
    let id: u64 = id.parse().ok()?;
    is_owner_id(id).then_some(Owner { id })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owners_are_distinct_and_never_look_like_threads() {
        let a = Owner::new();
        let b = Owner::new();
        assert_ne!(a, b);
        assert_eq!(a, a.clone());
        assert!(is_owner_id(a.id()) && is_owner_id(b.id()));
        assert!(a.id() < 1 << 63, "a positive Java long");
        assert!(!is_owner_id(crate::thread_id::current()));
        assert_eq!(a.to_string(), format!("owner {}", a.id()));
    }

    #[test]
    fn an_owners_field_names_it_and_a_threads_does_not() {
        let a = Owner::new();
        let uuid = "0f0e0d0c-0b0a-4988-8776-655443322110";
        assert_eq!(owner_in_field(&format!("{uuid}:{}", a.id())), Some(a));
        assert_eq!(owner_in_field(&format!("{uuid}:{}:write", a.id())), Some(a));
        assert_eq!(owner_in_field(&format!("{uuid}:7")), None);
        assert_eq!(owner_in_field("no id"), None);
    }
}
