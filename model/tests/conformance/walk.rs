//! The walks: seeded random sequences of script calls, ticks of the clock
//! and a user's own writes, each walk on one theme (a lock kind or a
//! synchronizer) with a few calls of the others mixed in, over two names
//! and four holders, so that the scripts' deeper branches come up.
//!
//! Every time is a multiple of [`UNIT`] (10 s): the server's clock moves a
//! few ms during a step, which can then never turn a comparison the
//! scripts make (see `compare.rs`).

mod themes;

use super::rng::Rng;
use redhold_model::call::{Attempt, Call, Publish};
use redhold_model::keyspace::{Keyspace, Str, Value};
use redhold_model::names::{Field, Holder, Key, Name, Request};

/// The walks' unit of time, in ms.
pub(crate) const UNIT: i64 = 10_000;

/// The client clock at the keyspace's time 0 (ms since the epoch).
pub(crate) const EPOCH: i64 = 1_700_000_000_000;

/// One step of a walk.
#[derive(Clone, Debug)]
pub(crate) enum Step {
    /// A script call.
    Call(Call),
    /// The clock moves on, by this many ms.
    Tick(i64),
    /// A user writes a key directly (left without a TTL).
    Poke(Key, Value),
    /// A user deletes a key.
    Delete(Key),
    /// A user, or another client, leaves a key without expiry (PTTL -1):
    /// `PERSIST`.
    Persist(Key),
}

#[derive(Clone, Copy, Debug)]
enum Theme {
    Plain,
    Fair,
    ReadWrite,
    Semaphore,
    Expirable,
    Latch,
}

/// An acquire call of a semaphore that may go on: its latch, how many
/// permits (or which ids), and its last attempt.
#[derive(Clone, Debug)]
struct Pending {
    latch: Request,
    ids: Vec<u8>,
    attempt: i64,
}

/// Generates one walk's steps.
pub(crate) struct Walker {
    rng: Rng,
    theme: Theme,
    next_request: u16,
    next_permit: u8,
    recent: Vec<Call>,
    pending: Vec<Pending>,
    permits_out: Vec<u8>,
}

const THEMES: [Theme; 6] = [
    Theme::Plain,
    Theme::Fair,
    Theme::ReadWrite,
    Theme::Semaphore,
    Theme::Expirable,
    Theme::Latch,
];

const HOLDERS: [Holder; 4] = [
    Holder {
        client: 0,
        thread: 0,
    },
    Holder {
        client: 0,
        thread: 1,
    },
    Holder {
        client: 1,
        thread: 0,
    },
    Holder {
        client: 1,
        thread: 1,
    },
];

impl Walker {
    pub(crate) fn new(seed: u64) -> Walker {
        // Consecutive seeds take the themes in turn.
        let theme = THEMES[(seed % THEMES.len() as u64) as usize];
        let rng = Rng::new(seed);
        Walker {
            rng,
            theme,
            next_request: 0,
            next_permit: 0,
            recent: Vec::new(),
            pending: Vec::new(),
            permits_out: Vec::new(),
        }
    }

    /// The next step, given the model's keyspace as it is now.
    pub(crate) fn next(&mut self, ks: &Keyspace) -> Step {
        let roll = self.rng.below(100);
        if roll < 9 {
            return Step::Tick(UNIT * self.rng.pick(&[1, 1, 2, 3]) as i64);
        }
        if roll < 13 {
            return self.poke();
        }
        if roll < 16 {
            if let Some(step) = self.persist(ks) {
                return step;
            }
        }
        if roll < 19 {
            let name = self.name();
            return Step::Call(if self.rng.chance(50) {
                Call::Inspect { name }
            } else {
                Call::InspectCounter { name }
            });
        }
        if roll < 33 && !self.recent.is_empty() {
            return Step::Call(self.resend());
        }
        let theme = if self.rng.chance(8) {
            self.rng.pick(&[
                Theme::Plain,
                Theme::Fair,
                Theme::ReadWrite,
                Theme::Semaphore,
                Theme::Expirable,
                Theme::Latch,
            ])
        } else {
            self.theme
        };
        let now = EPOCH + ks.now;
        let call = match theme {
            Theme::Plain => self.plain(),
            Theme::Fair => self.fair(now),
            Theme::ReadWrite => self.read_write(),
            Theme::Semaphore => self.semaphore(),
            Theme::Expirable => self.expirable(now),
            Theme::Latch => self.count_down(),
        };
        self.recent.push(call.clone());
        if self.recent.len() > 8 {
            self.recent.remove(0);
        }
        Step::Call(call)
    }

    /// Mostly the first name, so that calls meet.
    fn name(&mut self) -> Name {
        Name(u8::from(self.rng.chance(25)))
    }

    fn holder(&mut self) -> Holder {
        self.rng.pick(&HOLDERS)
    }

    fn field(&mut self) -> Field {
        Field::Reader(self.holder())
    }

    fn lease(&mut self) -> i64 {
        UNIT * self.rng.pick(&[1, 2, 3, 5]) as i64
    }

    fn latch(&mut self) -> Request {
        self.next_request += 1;
        Request(self.next_request)
    }

    fn latch_ttl(&mut self) -> i64 {
        UNIT * self.rng.pick(&[2, 4]) as i64
    }

    fn publish(&mut self) -> Publish {
        self.rng.pick(&[
            Publish::Classic,
            Publish::Classic,
            Publish::Both,
            Publish::Sharded,
        ])
    }

    fn attempt(&mut self) -> Attempt {
        match self.rng.below(100) {
            0..60 => Attempt::First,
            60..85 => Attempt::Retry,
            _ => Attempt::Above(self.rng.below(3) as i64),
        }
    }

    /// A recent call again: a retry, or an attempt delayed in the network.
    fn resend(&mut self) -> Call {
        // Mostly the last call: a client retries at once.
        let at = match self.rng.chance(50) {
            true => self.recent.len() - 1,
            false => self.rng.below(self.recent.len() as u64) as usize,
        };
        let mut call = self.recent[at].clone();
        let retry = self.rng.chance(70);
        match &mut call {
            Call::Release { attempt, .. }
            | Call::FairRelease { attempt, .. }
            | Call::ReadRelease { attempt, .. }
            | Call::WriteRelease { attempt, .. }
                if retry =>
            {
                *attempt = Attempt::Retry;
            }
            Call::SemaphoreAcquire { attempt, .. } | Call::ExpirableAcquire { attempt, .. } => {
                *attempt = (*attempt + self.rng.below(3) as i64 - 1).max(1);
            }
            _ => {}
        }
        call
    }

    /// A lock's key, or a read hold's, that has a TTL, left without one:
    /// read holds half the time (when there are any).
    fn persist(&mut self, ks: &Keyspace) -> Option<Step> {
        let holds = self.rng.chance(50);
        let lasting = |holds: bool| -> Vec<Key> {
            ks.keys
                .iter()
                .filter(|(_, entry)| entry.expires_at.is_some())
                .map(|(key, _)| *key)
                .filter(|key| match key {
                    Key::ReadHold(..) => holds,
                    Key::Name(_) => !holds,
                    _ => false,
                })
                .collect()
        };
        let mut keys = lasting(holds);
        if keys.is_empty() {
            keys = lasting(!holds);
        }
        if keys.is_empty() {
            return None;
        }
        Some(Step::Persist(
            keys[self.rng.below(keys.len() as u64) as usize],
        ))
    }

    fn poke(&mut self) -> Step {
        let name = self.name();
        match self.rng.below(7) {
            0 => Step::Poke(Key::Name(name), Value::Str(Str::Garbage)),
            1 => Step::Poke(Key::Name(name), Value::List(vec![self.field()])),
            2 => Step::Poke(Key::Token(name), Value::Str(Str::Garbage)),
            3 => Step::Poke(Key::Token(name), Value::Str(Str::Int(-1))),
            4 => Step::Poke(Key::Token(name), Value::Str(Str::Int(i64::MAX))),
            5 => Step::Poke(Key::Token(name), Value::Str(Str::Int(7))),
            _ => Step::Delete(Key::Name(name)),
        }
    }
}
