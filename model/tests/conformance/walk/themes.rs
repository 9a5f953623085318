//! The calls of each theme, with the arguments the library would send.

use super::{Pending, Walker, HOLDERS, UNIT};
use redhold_model::call::{Call, LeaseOp, Renewal, SetOp, Successor};
use redhold_model::names::{Field, Name};

impl Walker {
    fn release(&mut self, name: Name, field: Field) -> Call {
        let successor = self.rng.chance(35).then(|| Successor {
            field: self.field(),
            lease: self.lease(),
            fenced: self.rng.chance(50),
        });
        Call::Release {
            name,
            field,
            latch: self.latch(),
            latch_ttl: self.latch_ttl(),
            publish: self.publish(),
            attempt: self.attempt(),
            successor,
        }
    }

    fn renew(&mut self, read: u64) -> Call {
        let locks = (0..1 + self.rng.below(3))
            .map(|_| Renewal {
                name: self.name(),
                read: self.rng.chance(read),
                field: self.field(),
            })
            .collect();
        Call::Renew {
            ttl: UNIT * self.rng.pick(&[2, 3, 5]) as i64,
            locks,
        }
    }

    pub(super) fn plain(&mut self) -> Call {
        let (name, field, lease) = (self.name(), self.field(), self.lease());
        let reentry_only = self.rng.chance(15);
        match self.rng.below(100) {
            0..30 => Call::Acquire {
                name,
                field,
                lease,
                reentry_only,
            },
            30..45 => Call::FencedAcquire {
                name,
                field,
                lease,
                reentry_only,
            },
            45..82 => self.release(name, field),
            82..87 => Call::ForceRelease {
                name,
                publish: self.publish(),
            },
            _ => self.renew(15),
        }
    }

    pub(super) fn fair(&mut self, now: i64) -> Call {
        let (name, field, lease) = (self.name(), self.field(), self.lease());
        // One wait timeout per lock, as a client has.
        let wait = UNIT * (1 + i64::from(name.0));
        let publish = self.publish();
        match self.rng.below(100) {
            0..40 => Call::FairAcquire {
                name,
                field,
                lease,
                wait,
                now,
                join: self.rng.chance(80),
                reentry_only: self.rng.chance(10),
            },
            40..72 => Call::FairRelease {
                name,
                field,
                now,
                latch: self.latch(),
                latch_ttl: self.latch_ttl(),
                publish,
                attempt: self.attempt(),
            },
            72..87 => Call::FairGiveUp {
                name,
                field,
                wait,
                publish,
            },
            87..92 => Call::FairForceRelease { name, now, publish },
            _ => Call::Acquire {
                name,
                field,
                lease,
                reentry_only: false,
            },
        }
    }

    pub(super) fn read_write(&mut self) -> Call {
        // Two holders: a writer's read holds and its downgrade come up.
        let holder = HOLDERS[2 * self.rng.below(2) as usize];
        let (name, lease) = (self.name(), self.lease());
        // One in five: a re-entry of holds whose keys expired comes up too.
        let reentry_only = self.rng.chance(20);
        let (latch, latch_ttl, publish, attempt) = (
            self.latch(),
            self.latch_ttl(),
            self.publish(),
            self.attempt(),
        );
        match self.rng.below(100) {
            0..27 => Call::ReadAcquire {
                name,
                holder,
                lease,
                reentry_only,
            },
            27..45 => Call::WriteAcquire {
                name,
                holder,
                lease,
                reentry_only,
            },
            45..70 => Call::ReadRelease {
                name,
                holder,
                latch,
                latch_ttl,
                publish,
                attempt,
            },
            70..86 => Call::WriteRelease {
                name,
                holder,
                latch,
                latch_ttl,
                publish,
                attempt,
            },
            86..91 => Call::RwForceRelease {
                name,
                write: self.rng.chance(50),
                publish,
            },
            _ => self.renew(70),
        }
    }

    /// An acquire call's next attempt, or a new call.
    fn acquire_call(&mut self, ids: usize) -> Pending {
        if !self.pending.is_empty() && self.rng.chance(45) {
            let at = self.rng.below(self.pending.len() as u64) as usize;
            self.pending[at].attempt += 1;
            return self.pending[at].clone();
        }
        let ids = (0..ids)
            .map(|_| {
                self.next_permit += 1;
                self.next_permit
            })
            .collect();
        let call = Pending {
            latch: self.latch(),
            ids,
            attempt: 1,
        };
        self.pending.push(call.clone());
        call
    }

    pub(super) fn semaphore(&mut self) -> Call {
        let (name, latch, latch_ttl, publish) =
            (self.name(), self.latch(), self.latch_ttl(), self.publish());
        let n = 1 + self.rng.below(3) as i64;
        match self.rng.below(100) {
            0..35 => {
                let p = self.acquire_call(n as usize);
                Call::SemaphoreAcquire {
                    name,
                    permits: p.ids.len() as i64,
                    latch: p.latch,
                    latch_ttl,
                    attempt: p.attempt,
                }
            }
            35..55 => Call::SemaphoreRelease {
                name,
                permits: n,
                latch,
                latch_ttl,
                publish,
            },
            55..85 => {
                let op = match self.rng.below(9) {
                    0 | 1 => SetOp::TrySet(n),
                    2 | 3 => SetOp::Set(n - 1),
                    4 | 5 => SetOp::Remove(n),
                    6 | 7 => SetOp::Drain,
                    _ => SetOp::Unknown,
                };
                Call::SemaphoreSet {
                    name,
                    op,
                    latch,
                    latch_ttl,
                    publish,
                }
            }
            _ => match self.pending.pop() {
                Some(p) => Call::SemaphoreGiveBack {
                    name,
                    permits: p.ids.len() as i64,
                    latch: p.latch,
                    latch_ttl,
                    publish,
                },
                None => Call::SemaphoreGiveBack {
                    name,
                    permits: n,
                    latch,
                    latch_ttl,
                    publish,
                },
            },
        }
    }

    pub(super) fn expirable(&mut self, now: i64) -> Call {
        let (name, latch, latch_ttl, publish) =
            (self.name(), self.latch(), self.latch_ttl(), self.publish());
        let end = now + UNIT * self.rng.pick(&[1, 2, 3]) as i64;
        match self.rng.below(100) {
            0..30 => {
                let ids = 1 + self.rng.below(2) as usize;
                let p = self.acquire_call(ids);
                self.permits_out.extend(&p.ids);
                Call::ExpirableAcquire {
                    name,
                    lease_end: end,
                    now,
                    publish,
                    latch: p.latch,
                    latch_ttl,
                    attempt: p.attempt,
                    ids: p.ids,
                }
            }
            30..50 => {
                let id = match self.permits_out.is_empty() {
                    true => 99,
                    false => self.rng.pick(&self.permits_out.clone()),
                };
                Call::ExpirableRelease {
                    name,
                    id,
                    now,
                    publish,
                    latch,
                    latch_ttl,
                }
            }
            50..72 => {
                let op = match self.rng.below(7) {
                    0..3 => LeaseOp::Available,
                    3..6 if !self.permits_out.is_empty() => {
                        let id = self.rng.pick(&self.permits_out.clone());
                        LeaseOp::Update(id, now + UNIT * self.rng.below(4) as i64)
                    }
                    3..6 => LeaseOp::Update(98, end),
                    _ => LeaseOp::Unknown,
                };
                Call::ExpirableLease {
                    name,
                    now,
                    publish,
                    op,
                }
            }
            72..87 => {
                let op = if self.rng.chance(50) {
                    SetOp::TrySet(2)
                } else {
                    SetOp::Set(1 + self.rng.below(2) as i64)
                };
                Call::SemaphoreSet {
                    name,
                    op,
                    latch,
                    latch_ttl,
                    publish,
                }
            }
            _ => match self.pending.pop() {
                Some(p) => Call::ExpirableGiveBack {
                    name,
                    publish,
                    latch: p.latch,
                    latch_ttl,
                    ids: p.ids,
                },
                None => Call::ExpirableGiveBack {
                    name,
                    publish,
                    latch,
                    latch_ttl,
                    ids: vec![97],
                },
            },
        }
    }

    pub(super) fn count_down(&mut self) -> Call {
        let (name, latch, latch_ttl, publish) =
            (self.name(), self.latch(), self.latch_ttl(), self.publish());
        match self.rng.below(100) {
            0..30 => Call::LatchTrySet {
                name,
                count: 1 + self.rng.below(3) as i64,
                latch,
                latch_ttl,
                publish,
            },
            30..70 => Call::LatchCountDown {
                name,
                latch,
                latch_ttl,
                publish,
            },
            // The undo of a recent count-down (its attempts may come again
            // as resends), else of one none of whose attempts ran.
            70..80 => {
                let downs: Vec<_> = self
                    .recent
                    .iter()
                    .filter_map(|call| match *call {
                        Call::LatchCountDown { name, latch, .. } => Some((name, latch)),
                        _ => None,
                    })
                    .collect();
                let (name, latch) = match downs.is_empty() {
                    true => (name, latch),
                    false => self.rng.pick(&downs),
                };
                Call::LatchCountDownUndo {
                    name,
                    latch,
                    latch_ttl,
                }
            }
            80..90 => Call::LatchDelete {
                name,
                latch,
                latch_ttl,
                publish,
            },
            _ => Call::SemaphoreRelease {
                name,
                permits: 1,
                latch,
                latch_ttl,
                publish,
            },
        }
    }
}
