//! The requests the client sends, as the modelled scripts take them
//! (`kind/hash.rs`, `kind/fenced.rs`): one lock, each thread's field, the
//! latch of a release, its attempt word (`kind/target.rs`,
//! `ReleaseAttempts`), and a hand-over's successor.

use super::config::{Config, Kind, TICK_MS};
use super::job::Send;
use super::state::{ReqId, Request, State};
use crate::call::{Attempt, Call, Publish, Successor};
use crate::names::{Field, Holder, Name, Request as Latch};

/// The lock every thread takes (`x`), unless the configuration puts it on
/// the second lock that shares its channel (`{x}`: [`name`]).
pub const LOCK: Name = Name(0);

/// The lock thread `(c, t)` acts on: [`LOCK`], or `Name(1)` for a thread
/// on `{x}` ([`Config::braced`]). The model delivers every publish to
/// every subscribed client: both names are on one channel.
pub fn name(cfg: &Config, c: u8, t: u8) -> Name {
    Name(cfg.lock(c, t))
}

/// Thread `t` of client `c`'s holder field: `<uuid>:<thread>`, with
/// `:write` for the write lock (`read_write.rs`, `holder_field`).
pub fn field(kind: Kind, c: u8, t: u8) -> Field {
    let h = holder(c, t);
    match kind {
        Kind::Write => Field::Writer(h),
        _ => Field::Reader(h),
    }
}

fn holder(c: u8, t: u8) -> Holder {
    Holder {
        client: c,
        thread: t,
    }
}

/// The thread a field belongs to.
pub fn owner(field: Field) -> Option<(u8, u8)> {
    match field {
        Field::Reader(h) | Field::Writer(h) => Some((h.client, h.thread)),
        Field::Mode => None,
    }
}

/// An acquire of thread `(c, t)` (for its owner's field, if it acts for
/// one), a re-entry only when `holds_here`.
pub fn acquire_call(cfg: &Config, c: u8, t: u8, holds_here: bool) -> Request {
    let h = cfg.holder(c, t);
    let (name, field) = (name(cfg, c, t), field(cfg.kind, c, h));
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
        // `fair.rs`, `try_acquire`: a try joins no queue; `now` and the
        // wait timeout are read only with a queue.
        Kind::Fair => Call::FairAcquire {
            name,
            field,
            lease,
            wait: 0,
            now: 0,
            join: false,
            reentry_only: holds_here,
        },
        Kind::Write => Call::WriteAcquire {
            name,
            holder: holder(c, h),
            lease,
            reentry_only: holds_here,
        },
        Kind::Read => Call::ReadAcquire {
            name,
            holder: holder(c, h),
            lease,
            reentry_only: holds_here,
        },
    })
}

/// A release of one hold of the field of thread `(c, t)` with request id
/// `id`, handing a freed lock to thread `successor` of the same client if
/// named (the field it acts for, and its lease).
pub fn release_call(
    cfg: &Config,
    c: u8,
    t: u8,
    id: ReqId,
    attempt: Attempt,
    successor: Option<u8>,
) -> Request {
    let successor = successor.map(|s| Successor {
        field: field(cfg.kind, c, cfg.holder(c, s)),
        lease: cfg.lease_ms(cfg.clients[usize::from(c)][usize::from(s)]),
        fenced: cfg.kind == Kind::Fenced,
    });
    let (name, latch, publish) = (name(cfg, c, t), Latch(id), Publish::Classic);
    let latch_ttl = i64::from(cfg.latch_ticks()) * TICK_MS;
    Request::Script(match cfg.kind {
        Kind::Plain | Kind::Fenced | Kind::Spin => Call::Release {
            name,
            field: field(cfg.kind, c, t),
            latch,
            latch_ttl,
            publish,
            attempt,
            successor,
        },
        // `fair.rs`, `release`: `now` is read only with a queue.
        Kind::Fair => Call::FairRelease {
            name,
            field: field(cfg.kind, c, t),
            now: 0,
            latch,
            latch_ttl,
            publish,
            attempt,
        },
        Kind::Write => Call::WriteRelease {
            name,
            holder: holder(c, t),
            latch,
            latch_ttl,
            publish,
            attempt,
        },
        Kind::Read => Call::ReadRelease {
            name,
            holder: holder(c, t),
            latch,
            latch_ttl,
            publish,
            attempt,
        },
    })
}

/// The pool's retry of a release attempt whose connection failed (or
/// whose reply timed out, within its deadline): the same request id, and
/// successor, on a new connection, as a retry (`attempt`: `retry`, or an
/// undo's `above:N` again).
pub fn resend(
    cfg: &Config,
    s: &mut State,
    (c, t): (u8, u8),
    id: ReqId,
    successor: Option<u8>,
    attempt: Attempt,
    out: Send,
) -> Send {
    let wire = s.open(c, release_call(cfg, c, t, id, attempt, successor));
    Send::on(wire, out.tries_left.saturating_sub(1))
}
