//! Who a request names: a holder's field in a lock's hash, and the ids of
//! release requests (the unlock latch's keys).

use std::cell::RefCell;
use std::sync::Arc;

use super::Engine;
use super::RequestIds;
use crate::holding::Holder;
use crate::kind::sealed::KindOps;
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
}
