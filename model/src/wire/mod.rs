//! A [`Call`]'s real spelling: the script's `KEYS` and `ARGV` as the
//! library sends them (`src/kind/`, `src/synchronizer/`), so that the
//! conformance test runs the real file on the same input as the model.

mod parts;

pub use parts::{cmd, hold_prefix, permit};

use crate::call::{Call, LeaseOp, SetOp};
use crate::names::{Channel, Field, Key};
use parts::{attempt_arg, flag, s, Wire};

/// The `KEYS` and `ARGV` of `call`.
pub fn keys_and_args(call: &Call) -> (Vec<String>, Vec<String>) {
    let mut w = Wire::default();
    match call {
        Call::Acquire {
            name,
            field,
            lease,
            reentry_only,
        } => {
            w.key(Key::Name(*name))
                .args([s(lease), s(field), flag(*reentry_only)]);
        }
        Call::FencedAcquire {
            name,
            field,
            lease,
            reentry_only,
        } => {
            w.key(Key::Name(*name)).key(Key::Token(*name));
            w.args([s(lease), s(field), flag(*reentry_only)]);
        }
        Call::Release {
            name,
            field,
            latch,
            latch_ttl,
            publish,
            attempt,
            successor,
        } => {
            w.key(Key::Name(*name))
                .chan(Channel::Lock(*name))
                .latch(*name, *latch);
            w.args([
                "0".into(),
                s(field),
                s(latch_ttl),
                cmd(*publish),
                attempt_arg(*attempt),
            ]);
            if let Some(next) = successor {
                if next.fenced {
                    w.key(Key::Token(*name));
                }
                w.args([s(next.field), s(next.lease)]);
            }
        }
        Call::ForceRelease { name, publish } => {
            w.key(Key::Name(*name)).chan(Channel::Lock(*name));
            w.args(["0".into(), cmd(*publish)]);
        }
        Call::Renew { ttl, locks } => {
            w.args([s(ttl)]);
            for lock in locks {
                w.key(Key::Name(lock.name));
                w.args([if lock.read { "r" } else { "h" }.into(), s(lock.field)]);
            }
        }
        Call::FairAcquire {
            name,
            field,
            lease,
            wait,
            now,
            join,
            reentry_only,
        } => {
            w.fair(*name, false);
            w.args([
                s(lease),
                s(field),
                s(wait),
                s(now),
                flag(*join),
                flag(*reentry_only),
            ]);
        }
        Call::FairRelease {
            name,
            field,
            now,
            latch,
            latch_ttl,
            publish,
            attempt,
        } => {
            w.fair(*name, true).latch(*name, *latch);
            w.args([
                "0".into(),
                s(field),
                s(now),
                s(latch_ttl),
                cmd(*publish),
                attempt_arg(*attempt),
            ]);
        }
        Call::FairGiveUp {
            name,
            field,
            wait,
            publish,
        } => {
            w.fair(*name, true)
                .args([s(field), s(wait), "0".into(), cmd(*publish)]);
        }
        Call::FairForceRelease { name, now, publish } => {
            w.fair(*name, true)
                .args(["0".into(), s(now), cmd(*publish)]);
        }
        Call::ReadAcquire {
            name,
            holder,
            lease,
            reentry_only,
        } => {
            w.key(Key::Name(*name)).raw(hold_prefix(*name, *holder));
            let (reader, writer) = (Field::Reader(*holder), Field::Writer(*holder));
            w.args([s(lease), s(reader), s(writer), flag(*reentry_only)]);
        }
        Call::ReadRelease {
            name,
            holder,
            latch,
            latch_ttl,
            publish,
            attempt,
        } => {
            w.key(Key::Name(*name)).chan(Channel::ReadWrite(*name));
            w.raw(hold_prefix(*name, *holder))
                .raw(name.base())
                .latch(*name, *latch);
            let reader = Field::Reader(*holder);
            w.args([
                "0".into(),
                s(reader),
                s(latch_ttl),
                cmd(*publish),
                attempt_arg(*attempt),
            ]);
        }
        Call::WriteAcquire {
            name,
            holder,
            lease,
            reentry_only,
        } => {
            w.key(Key::Name(*name));
            let (reader, writer) = (Field::Reader(*holder), Field::Writer(*holder));
            w.args([s(lease), s(writer), s(reader), flag(*reentry_only)]);
        }
        Call::WriteRelease {
            name,
            holder,
            latch,
            latch_ttl,
            publish,
            attempt,
        } => {
            w.key(Key::Name(*name))
                .chan(Channel::ReadWrite(*name))
                .latch(*name, *latch);
            let writer = Field::Writer(*holder);
            w.args([
                "1".into(),
                s(writer),
                s(latch_ttl),
                cmd(*publish),
                attempt_arg(*attempt),
            ]);
        }
        Call::RwForceRelease {
            name,
            write,
            publish,
        } => {
            w.key(Key::Name(*name)).chan(Channel::ReadWrite(*name));
            let (mode, message) = if *write {
                ("write", "1")
            } else {
                ("read", "0")
            };
            w.args([mode.into(), message.into(), cmd(*publish)]);
        }
        Call::SemaphoreAcquire {
            name,
            permits,
            latch,
            latch_ttl,
            attempt,
        } => {
            w.key(Key::Name(*name)).latch(*name, *latch);
            w.args([s(permits), s(latch_ttl), s(attempt)]);
        }
        Call::SemaphoreRelease {
            name,
            permits,
            latch,
            latch_ttl,
            publish,
        }
        | Call::SemaphoreGiveBack {
            name,
            permits,
            latch,
            latch_ttl,
            publish,
        } => {
            w.key(Key::Name(*name))
                .chan(Channel::Semaphore(*name))
                .latch(*name, *latch);
            w.args([s(permits), cmd(*publish), s(latch_ttl)]);
        }
        Call::SemaphoreSet {
            name,
            op,
            latch,
            latch_ttl,
            publish,
        } => {
            w.key(Key::Name(*name))
                .chan(Channel::Semaphore(*name))
                .latch(*name, *latch);
            let (op, n) = match op {
                SetOp::TrySet(n) => ("try_set", *n),
                SetOp::Set(n) => ("set", *n),
                SetOp::Remove(n) => ("remove", *n),
                SetOp::Drain => ("drain", 0),
                SetOp::Unknown => ("bogus", 0),
            };
            w.args([op.into(), s(n), cmd(*publish), s(latch_ttl)]);
        }
        Call::ExpirableAcquire {
            name,
            lease_end,
            now,
            publish,
            latch,
            latch_ttl,
            attempt,
            ids,
        } => {
            w.expirable(*name).latch(*name, *latch);
            w.args([
                s(ids.len()),
                s(lease_end),
                s(now),
                cmd(*publish),
                s(latch_ttl),
                s(attempt),
            ]);
            w.args(ids.iter().map(|id| permit(*id)));
        }
        Call::ExpirableRelease {
            name,
            id,
            now,
            publish,
            latch,
            latch_ttl,
        } => {
            w.expirable(*name).latch(*name, *latch);
            w.args([permit(*id), s(now), cmd(*publish), s(latch_ttl)]);
        }
        Call::ExpirableLease {
            name,
            now,
            publish,
            op,
        } => {
            w.expirable(*name).args([s(now), cmd(*publish)]);
            match op {
                LeaseOp::Available => w.args(["available".into()]),
                LeaseOp::Update(id, end) => w.args(["update".into(), permit(*id), s(end)]),
                LeaseOp::Unknown => w.args(["bogus".into()]),
            };
        }
        Call::ExpirableGiveBack {
            name,
            publish,
            latch,
            latch_ttl,
            ids,
        } => {
            w.expirable(*name)
                .latch(*name, *latch)
                .args([cmd(*publish), s(latch_ttl)]);
            w.args(ids.iter().map(|id| permit(*id)));
        }
        Call::LatchTrySet {
            name,
            count,
            latch,
            latch_ttl,
            publish,
        } => {
            w.key(Key::Name(*name))
                .chan(Channel::CountDown(*name))
                .latch(*name, *latch);
            w.args([s(count), cmd(*publish), s(latch_ttl)]);
        }
        Call::LatchCountDown {
            name,
            latch,
            latch_ttl,
            publish,
        }
        | Call::LatchDelete {
            name,
            latch,
            latch_ttl,
            publish,
        } => {
            w.key(Key::Name(*name))
                .chan(Channel::CountDown(*name))
                .latch(*name, *latch);
            w.args([cmd(*publish), s(latch_ttl)]);
        }
        Call::LatchCountDownUndo {
            name,
            latch,
            latch_ttl,
        } => {
            w.key(Key::Name(*name)).latch(*name, *latch);
            w.args([s(latch_ttl)]);
        }
        Call::Inspect { name } => {
            w.key(Key::Name(*name))
                .key(Key::Queue(*name))
                .key(Key::Deadlines(*name));
            w.key(Key::Token(*name));
        }
        Call::InspectCounter { name } => {
            w.key(Key::Name(*name)).key(Key::Leases(*name));
        }
    }
    (w.keys, w.args)
}
