//! Who a call and its requests name: a holder's field in a lock's hash,
//! the state a call starts with, and the ids of release requests (the
//! unlock latch's keys).

use std::cell::{Cell, RefCell};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use super::{CallState, Engine, LockRef, RequestIds};
use crate::config::lease_millis;
use crate::error::Result;
use crate::holding::Holder;
use crate::kind::sealed::KindOps;
use crate::names;
use crate::thread_id;

impl Engine {
    /// `holder`'s field in the hash of a lock of kind `kind`.
    pub(crate) fn field<K: KindOps>(&self, holder: Holder, kind: &K) -> Arc<str> {
        kind.holder_field(&self.base_field(holder))
    }

    /// `holder`'s plain field: `<client-uuid>:<thread-id>` for the calling
    /// thread, `<client-uuid>:<owner-id>` for an owner.
    pub(super) fn base_field(&self, holder: Holder) -> Arc<str> {
        match holder {
            Holder::Thread => self.thread_field(),
            Holder::Owner(owner) => Arc::from(format!("{}:{}", self.id_text, owner.id())),
        }
    }

    /// The calling thread's plain field, made once per thread (and again
    /// only when the thread uses another client).
    fn thread_field(&self) -> Arc<str> {
        thread_local! {
            static BASE_FIELD: RefCell<Option<Arc<str>>> = const { RefCell::new(None) };
        }
        BASE_FIELD.with(|cached| {
            let mut cached = cached.borrow_mut();
            match &*cached {
                // The thread's id never changes: the client's id is the rest.
                Some(field) if field.starts_with(self.id_text.as_str()) => Arc::clone(field),
                _ => {
                    let field: Arc<str> =
                        Arc::from(format!("{}:{}", self.id_text, thread_id::current()));
                    *cached = Some(Arc::clone(&field));
                    field
                }
            }
        })
    }

    /// A request id unique across clients, for the unlock latch.
    pub(crate) fn next_request_id(&self) -> String {
        self.requests.next()
    }

    /// Makes request ids, for a release the worker carries on.
    pub(super) fn request_ids(&self) -> Arc<RequestIds> {
        Arc::clone(&self.requests)
    }

    /// What an acquire call of `lock` by `holder` with `lease` starts with,
    /// once its arguments are checked.
    pub(super) fn begin_call<K: KindOps>(
        &self,
        lock: LockRef<'_, K>,
        holder: Holder,
        lease: Option<Duration>,
    ) -> Result<CallState> {
        names::validate(lock.name)?;
        self.server.check_open()?;
        let lease_ms = match lease {
            Some(lease) => lease_millis(lease)?,
            None => crate::config::saturating_millis(self.watchdog_timeout()),
        };
        Ok(CallState {
            id: self.next_call.fetch_add(1, Ordering::Relaxed),
            holder,
            lease,
            lease_ms,
            field: self.field(holder, lock.kind),
            unsure: Cell::new(false),
            unsure_is_late: Cell::new(false),
            late: RefCell::default(),
        })
    }
}
