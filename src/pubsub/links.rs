//! The pub/sub connections a client keeps, in one of two modes, and what
//! its subscriber threads share with the waiting threads. How channels are
//! routed onto these connections, and how lost ones are replaced, is in
//! `router.rs`.
//!
//! | mode      | used for                                        | connections            | commands                  |
//! |-----------|-------------------------------------------------|------------------------|---------------------------|
//! | `Single`  | one server, a sentinel's master, a cluster with classic pub/sub | one, reconnected forever | SUBSCRIBE / PUBLISH |
//! | `Sharded` | a cluster whose masters all run Redis 7+        | one per slot owner     | SSUBSCRIBE / SPUBLISH     |
//!

use std::sync::Arc;
use std::time::Duration;

#[cfg(feature = "cluster")]
use std::collections::HashMap;

#[cfg(feature = "cluster")]
use parking_lot::Mutex;

use super::registry::Registry;
#[cfg(feature = "cluster")]
use super::retries::Retries;
use super::subscriber::Link;
use super::threads::Threads;
use crate::error::Result;
use crate::server::socket::Writer;
#[cfg(feature = "cluster")]
use crate::server::topology::SlotMap;
#[cfg(feature = "cluster")]
use crate::server::PubSubMode;
use crate::server::Server;
use crate::stats::Counters;

/// First pause between two reconnect (or sharded retry) attempts.
pub(super) const MIN_BACKOFF: Duration = Duration::from_millis(50);
/// Longest pause between two reconnect (or sharded retry) attempts.
pub(super) const MAX_BACKOFF: Duration = Duration::from_secs(2);

/// What the subscriber threads share with the waiting threads.
#[derive(Debug)]
pub(super) struct Shared {
    pub(super) registry: Registry,
    pub(super) router: Router,
    pub(super) threads: Threads,
    /// How to reach the deployment, open pub/sub sockets and ask a cluster
    /// for its slots.
    pub(super) server: Arc<Server>,
    /// Where reconnects are counted, for [`Stats`](crate::Stats).
    pub(super) counters: Arc<Counters>,
    /// One connection per watched sentinel, when the master is found
    /// through sentinels (`sentinel_watch.rs`); none otherwise.
    #[cfg(feature = "sentinel")]
    pub(super) sentinel_watches: Vec<Writer>,
    /// The connection that hears classic releases on a cluster that
    /// listens sharded (`classic_watch.rs`); unused otherwise.
    #[cfg(feature = "cluster")]
    pub(super) classic_watch: Link,
}

/// See the module table.
#[derive(Debug)]
pub(super) enum Router {
    Single {
        link: Arc<Link>,
    },
    #[cfg(feature = "cluster")]
    Sharded {
        links: Mutex<HashMap<Arc<str>, Arc<Link>>>,
        slots: Mutex<SlotMap>,
        retries: Mutex<Retries>,
    },
}

impl Router {
    /// The mode the server chose: sharded on a cluster whose masters all
    /// run Redis 7 or later (or when the builder says so), single otherwise.
    pub(super) fn new(server: &Server) -> Result<Router> {
        #[cfg(feature = "cluster")]
        if server.pubsub_mode() == PubSubMode::Sharded {
            return Ok(Router::Sharded {
                links: Mutex::new(HashMap::new()),
                slots: Mutex::new(server.slot_map()?),
                retries: Mutex::new(Retries::new(MIN_BACKOFF, MAX_BACKOFF)),
            });
        }
        let _ = server;
        Ok(Router::Single {
            link: Arc::new(Link {
                id: Arc::from("pubsub"),
                writer: Writer::default(),
            }),
        })
    }

    /// Closes every connection, which ends every subscriber thread's read.
    pub(super) fn close_all(&self) {
        match self {
            Router::Single { link } => link.writer.detach(),
            #[cfg(feature = "cluster")]
            Router::Sharded { links, .. } => {
                for link in links.lock().values() {
                    link.writer.detach();
                }
            }
        }
    }
}
