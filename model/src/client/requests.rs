//! The requests the client sends, as the modelled scripts take them
//! (`kind/hash.rs`, `kind/fenced.rs`): one lock, each thread's field, the
//! latch of a release, its attempt word (`kind/target.rs`,
//! `ReleaseAttempts`), and a hand-over's successor.

use super::config::{Config, Kind, TICK_MS};
use super::job::Send;
use super::state::{ReqId, Request, State};
use crate::call::{Attempt, Call, Publish, Successor};
use crate::names::{Field, Holder, Name, Request as Latch};

/// The one lock every thread takes.
pub const LOCK: Name = Name(0);

/// Thread `t` of client `c`'s holder field.
pub fn field(c: u8, t: u8) -> Field {
    Field::Reader(Holder {
        client: c,
        thread: t,
    })
}

/// The thread a field belongs to.
pub fn owner(field: Field) -> Option<(u8, u8)> {
    match field {
        Field::Reader(h) | Field::Writer(h) => Some((h.client, h.thread)),
        Field::Mode => None,
    }
}

/// An acquire of thread `(c, t)`, a re-entry only when `holds_here`.
pub fn acquire_call(cfg: &Config, c: u8, t: u8, holds_here: bool) -> Request {
    let (name, field) = (LOCK, field(c, t));
    let lease = cfg.lease_ms(cfg.clients[usize::from(c)][usize::from(t)]);
    Request::Script(match cfg.kind {
        Kind::Plain | Kind::Spin => Call::Acquire {
            name,
            field,
            lease,
            reentry_only: holds_here,
        },
        Kind::Fenced => Call::FencedAcquire {
            name,
            field,
            lease,
            reentry_only: holds_here,
        },
    })
}

/// A release of one hold of thread `(c, t)` with request id `id`, handing
/// a freed lock to thread `successor` of the same client if named.
pub fn release_call(
    cfg: &Config,
    c: u8,
    t: u8,
    id: ReqId,
    attempt: Attempt,
    successor: Option<u8>,
) -> Request {
    let successor = successor.map(|s| Successor {
        field: field(c, s),
        lease: cfg.lease_ms(cfg.clients[usize::from(c)][usize::from(s)]),
        fenced: cfg.kind == Kind::Fenced,
    });
    Request::Script(Call::Release {
        name: LOCK,
        field: field(c, t),
        latch: Latch(id),
        latch_ttl: i64::from(cfg.latch_ticks()) * TICK_MS,
        publish: Publish::Classic,
        attempt,
        successor,
    })
}

/// The pool's retry of a release attempt whose connection failed (or
/// whose reply timed out, within its deadline): the same request id, and
/// successor, on a new connection, as a retry.
pub fn resend(
    cfg: &Config,
    s: &mut State,
    (c, t): (u8, u8),
    id: ReqId,
    successor: Option<u8>,
    out: Send,
) -> Send {
    let wire = s.open(c, release_call(cfg, c, t, id, Attempt::Retry, successor));
    Send::on(wire, out.tries_left.saturating_sub(1))
}
