//! One side of the suite: the Java driver or redhold, behind the same
//! commands, so every check can run in both directions.

use std::sync::mpsc::{Receiver, RecvTimeoutError, TryRecvError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The kinds of lock both sides implement.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Redisson `RLock`, redhold `client.lock`.
    Plain,
    /// `RFairLock`, `client.fair_lock`.
    Fair,
    /// `RReadWriteLock.readLock()`, `read_write_lock(..).read()`.
    Read,
    /// `RReadWriteLock.writeLock()`, `read_write_lock(..).write()`.
    Write,
    /// `RFencedLock`, `client.fenced_lock`.
    Fenced,
    /// `RedissonMultiLock`, `MultiLock`, over the plain locks whose names
    /// are joined by commas in the lock name.
    Multi,
}

impl Kind {
    /// The word the Java driver knows the kind by.
    pub fn word(self) -> &'static str {
        match self {
            Kind::Plain => "plain",
            Kind::Fair => "fair",
            Kind::Read => "read",
            Kind::Write => "write",
            Kind::Fenced => "fenced",
            Kind::Multi => "multi",
        }
    }
}

/// One command for a slot (a thread of its own on either side).
#[derive(Clone, Debug)]
pub enum Op {
    /// Wait until held; a lease in ms, or the watchdog. Fenced: replies the token.
    Lock {
        kind: Kind,
        name: String,
        lease: Option<u64>,
    },
    /// Wait at most `wait` ms; replies `true [TOKEN]` or `false`.
    TryLock {
        kind: Kind,
        name: String,
        wait: u64,
        lease: Option<u64>,
    },
    /// Release one hold of this slot's thread.
    Unlock { kind: Kind, name: String },
    /// Delete the lock whoever holds it; replies `true` or `false`.
    ForceUnlock { kind: Kind, name: String },
    /// This slot thread's hold count.
    HoldCount { kind: Kind, name: String },
    /// Whether anyone holds it (in that mode); replies `true` or `false`.
    IsLocked { kind: Kind, name: String },
    /// The fenced lock's current token (Java side only).
    Token { name: String },
    /// This slot thread's holder field, `<client-id>:<thread-id>`.
    Field,
    /// Redisson's `isHeldByThread(thread)`: whether the field
    /// `<this client's id>:<thread>` holds the lock (Java side only).
    HeldByThread {
        kind: Kind,
        name: String,
        thread: u64,
    },
    /// Lock, RPUSH `label` to `list`, sleep `hold` ms, unlock.
    Section {
        kind: Kind,
        name: String,
        label: String,
        list: String,
        hold: u64,
    },
    /// `n` checked critical sections on the counters under `prefix`;
    /// replies `VIOLATIONS SECTIONS MAX-WAIT-US MEDIAN-WAIT-US TIMES [FIRST]`,
    /// the waits those of the calls that took the lock (re-entries not
    /// counted), TIMES every section's `ASKED_US:TOOK_US:HELD_US` (the call,
    /// wall clock in µs since the epoch; the wait; from holding the lock
    /// until the unlock returned), joined by commas.
    Hammer {
        kind: Kind,
        name: String,
        n: usize,
        prefix: String,
    },
    /// A semaphore's or a count-down latch's command, as the words the Java
    /// driver reads (`sem-acquire NAME N`, `latch-await NAME`, ...; see
    /// `sync_side.rs`).
    Sync(Vec<String>),
}

impl Op {
    /// The command words the Java driver reads.
    pub fn words(&self) -> Vec<String> {
        let lease = |l: &Option<u64>| l.map(|l| l.to_string());
        let mut w: Vec<String> = match self {
            Op::Lock {
                kind,
                name,
                lease: l,
            } => {
                let mut w = vec!["lock".into(), kind.word().into(), name.clone()];
                w.extend(lease(l));
                w
            }
            Op::TryLock {
                kind,
                name,
                wait,
                lease: l,
            } => {
                let mut w = vec![
                    "try-lock".into(),
                    kind.word().into(),
                    name.clone(),
                    wait.to_string(),
                ];
                w.extend(lease(l));
                w
            }
            Op::Unlock { kind, name } => vec!["unlock".into(), kind.word().into(), name.clone()],
            Op::ForceUnlock { kind, name } => {
                vec!["force-unlock".into(), kind.word().into(), name.clone()]
            }
            Op::HoldCount { kind, name } => {
                vec!["hold-count".into(), kind.word().into(), name.clone()]
            }
            Op::IsLocked { kind, name } => {
                vec!["is-locked".into(), kind.word().into(), name.clone()]
            }
            Op::Token { name } => vec!["token".into(), name.clone()],
            Op::Field => vec!["field".into()],
            Op::HeldByThread { kind, name, thread } => vec![
                "held-by-thread".into(),
                kind.word().into(),
                name.clone(),
                thread.to_string(),
            ],
            Op::Section {
                kind,
                name,
                label,
                list,
                hold,
            } => vec![
                "section".into(),
                kind.word().into(),
                name.clone(),
                label.clone(),
                list.clone(),
                hold.to_string(),
            ],
            Op::Hammer {
                kind,
                name,
                n,
                prefix,
            } => vec![
                "hammer".into(),
                kind.word().into(),
                name.clone(),
                n.to_string(),
                prefix.clone(),
            ],
            Op::Sync(words) => words.clone(),
        };
        w.retain(|s| !s.is_empty());
        w
    }
}

/// A successful answer: when the call began and ended (wall clock, µs since
/// the epoch, comparable across the two processes on one machine) and what
/// it returned.
#[derive(Clone, Debug)]
pub struct Reply {
    pub start_us: u64,
    pub end_us: u64,
    pub data: String,
}

impl Reply {
    /// The reply's first word is `true`.
    pub fn is_true(&self) -> bool {
        self.data.split(' ').next() == Some("true")
    }

    /// The reply's `index`th word as a number.
    pub fn number(&self, index: usize) -> Result<i64, String> {
        self.data
            .split(' ')
            .nth(index)
            .and_then(|w| w.parse().ok())
            .ok_or_else(|| format!("expected a number at word {index} of {:?}", self.data))
    }
}

/// What a command came back with: a reply, or the error the call raised.
pub type Outcome = Result<Reply, String>;

/// A command sent and not yet necessarily answered.
#[derive(Debug)]
pub struct Pending {
    what: String,
    rx: Receiver<Outcome>,
    got: Option<Outcome>,
}

impl Pending {
    pub fn new(what: String, rx: Receiver<Outcome>) -> Pending {
        Pending {
            what,
            rx,
            got: None,
        }
    }

    /// Whether the answer has come (without waiting).
    pub fn is_done(&mut self) -> bool {
        if self.got.is_some() {
            return true;
        }
        match self.rx.try_recv() {
            Ok(outcome) => {
                self.got = Some(outcome);
                true
            }
            Err(TryRecvError::Empty) => false,
            Err(TryRecvError::Disconnected) => {
                self.got = Some(Err("its side went away".into()));
                true
            }
        }
    }

    /// Waits at most `limit` for the answer.
    pub fn wait(mut self, limit: Duration) -> Result<Reply, String> {
        let outcome = match self.got.take() {
            Some(outcome) => outcome,
            None => match self.rx.recv_timeout(limit) {
                Ok(outcome) => outcome,
                Err(RecvTimeoutError::Timeout) => {
                    return Err(format!("{}: no answer within {limit:?}", self.what))
                }
                Err(RecvTimeoutError::Disconnected) => Err("its side went away".into()),
            },
        };
        outcome.map_err(|e| format!("{}: {e}", self.what))
    }
}

/// The Java driver or redhold.
pub trait Side: Sync {
    /// `java` or `rust`.
    fn label(&self) -> &'static str;

    /// Runs `op` on the slot's own thread (created on first use).
    fn call(&self, slot: &str, op: Op) -> Pending;

    fn lock(&self, slot: &str, kind: Kind, name: &str, lease: Option<u64>) -> Pending {
        let name = name.to_owned();
        self.call(slot, Op::Lock { kind, name, lease })
    }

    fn try_lock(
        &self,
        slot: &str,
        kind: Kind,
        name: &str,
        wait: u64,
        lease: Option<u64>,
    ) -> Pending {
        let name = name.to_owned();
        self.call(
            slot,
            Op::TryLock {
                kind,
                name,
                wait,
                lease,
            },
        )
    }

    fn unlock(&self, slot: &str, kind: Kind, name: &str) -> Pending {
        let name = name.to_owned();
        self.call(slot, Op::Unlock { kind, name })
    }

    fn force_unlock(&self, slot: &str, kind: Kind, name: &str) -> Pending {
        let name = name.to_owned();
        self.call(slot, Op::ForceUnlock { kind, name })
    }

    fn hold_count(&self, slot: &str, kind: Kind, name: &str) -> Pending {
        let name = name.to_owned();
        self.call(slot, Op::HoldCount { kind, name })
    }

    fn is_locked(&self, slot: &str, kind: Kind, name: &str) -> Pending {
        let name = name.to_owned();
        self.call(slot, Op::IsLocked { kind, name })
    }
}

/// A synchronizer command of `words` (see [`Op::Sync`]).
pub fn sync_op(words: &[&str]) -> Op {
    Op::Sync(words.iter().map(|w| (*w).to_owned()).collect())
}

/// Now, in µs since the epoch (the unit both sides stamp replies with).
pub fn now_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}
