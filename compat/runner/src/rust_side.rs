//! redhold's side: every slot is a named thread that owns the guards it
//! took (guards are `!Send`), driven by the same commands as the Java driver.

use std::collections::HashMap;
use std::sync::mpsc::{self, Sender};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use redhold::{
    Client, ClientBuilder, Fair, Fenced, LockGuard, LostHold, MultiLock, MultiLockGuard, Read,
    Write,
};

use crate::side::{now_us, Kind, Op, Outcome, Pending, Reply, Side};

type Job = (Op, Sender<Outcome>);

/// Every hold a redhold client reported lost through its `on_hold_lost`
/// callback, in order (checks::owner looks for its own locks' entries).
#[derive(Clone, Default)]
pub struct LostLog(Arc<Mutex<Vec<LostHold>>>);

impl LostLog {
    /// `builder` with an `on_hold_lost` callback that records into this log.
    pub fn record(&self, builder: ClientBuilder) -> ClientBuilder {
        let log = Arc::clone(&self.0);
        builder.on_hold_lost(move |hold| {
            if let Ok(mut log) = log.lock() {
                log.push(hold.clone());
            }
        })
    }

    /// The losses reported so far for the lock `name`.
    pub fn of(&self, name: &str) -> Vec<LostHold> {
        self.0
            .lock()
            .map(|log| log.iter().filter(|h| h.lock == name).cloned().collect())
            .unwrap_or_default()
    }
}

/// redhold, one client, any number of slot threads.
pub struct RustSide {
    client: Client,
    /// The server holding the hammer counters: on a cluster, the node that
    /// serves [`COUNTERS_TAG`](crate::checks::COUNTERS_TAG).
    counters: Option<redis::Client>,
    /// What the client's `on_hold_lost` callback was told (empty unless the
    /// client was built with [`LostLog::record`]).
    lost: LostLog,
    slots: Mutex<HashMap<String, Sender<Job>>>,
}

impl RustSide {
    pub fn new(client: Client, counters: Option<redis::Client>, lost: LostLog) -> RustSide {
        RustSide {
            client,
            counters,
            lost,
            slots: Mutex::default(),
        }
    }

    pub fn client(&self) -> &Client {
        &self.client
    }

    /// The holds the client reported lost.
    pub fn lost(&self) -> &LostLog {
        &self.lost
    }

    fn slot(&self, name: &str) -> Result<Sender<Job>, String> {
        let mut slots = self.slots.lock().map_err(|_| "poisoned")?;
        if let Some(tx) = slots.get(name) {
            return Ok(tx.clone());
        }
        let (tx, rx) = mpsc::channel::<Job>();
        let (client, counters) = (self.client.clone(), self.counters.clone());
        thread::Builder::new()
            .name(format!("slot-{name}"))
            .spawn(move || {
                // Made here: the guards it will hold never leave this thread.
                let mut worker = Worker {
                    client,
                    counters,
                    held: Vec::new(),
                };
                for (op, reply) in rx {
                    let start_us = now_us();
                    let outcome = worker.run(op).map(|data| Reply {
                        start_us,
                        end_us: now_us(),
                        data,
                    });
                    let _ = reply.send(outcome);
                }
            })
            .map_err(|e| format!("spawn: {e}"))?;
        slots.insert(name.to_owned(), tx.clone());
        Ok(tx)
    }
}

impl Side for RustSide {
    fn label(&self) -> &'static str {
        "rust"
    }

    fn call(&self, slot: &str, op: Op) -> Pending {
        let what = format!("rust {slot}: {}", op.words().join(" "));
        let (tx, rx) = mpsc::channel();
        match self.slot(slot) {
            Ok(worker) => {
                let _ = worker.send((op, tx));
            }
            Err(e) => {
                let _ = tx.send(Err(e));
            }
        }
        Pending::new(what, rx)
    }
}

/// A guard of any kind, kept by the slot thread that took it.
enum Guard {
    Plain(LockGuard),
    Fair(LockGuard<Fair>),
    Read(LockGuard<Read>),
    Write(LockGuard<Write>),
    Fenced(LockGuard<Fenced>),
    Multi(MultiLockGuard),
}

impl Guard {
    fn unlock(self) -> redhold::Result<()> {
        match self {
            Guard::Plain(g) => g.unlock(),
            Guard::Fair(g) => g.unlock(),
            Guard::Read(g) => g.unlock(),
            Guard::Write(g) => g.unlock(),
            Guard::Fenced(g) => g.unlock(),
            Guard::Multi(g) => g.unlock(),
        }
    }
}

struct Worker {
    client: Client,
    counters: Option<redis::Client>,
    /// Guards in the order taken; an unlock releases the latest of its lock.
    held: Vec<(Kind, String, Guard)>,
}

fn err(e: redhold::Error) -> String {
    e.to_string()
}

impl Worker {
    fn multi(&self, names: &str) -> MultiLock {
        MultiLock::new(names.split(',').map(|n| self.client.lock(n)).collect())
    }

    /// Takes the lock: waiting when `wait` is `None`, else for at most that
    /// long. Returns the guard (and a fenced lock's token), or `None`.
    fn take(
        &self,
        kind: Kind,
        name: &str,
        wait: Option<Duration>,
        lease: Option<Duration>,
    ) -> redhold::Result<Option<(Guard, Option<u64>)>> {
        macro_rules! acquire {
            ($lock:expr) => {{
                let lock = $lock;
                match (wait, lease) {
                    (None, None) => Some(lock.lock()?),
                    (None, Some(l)) => Some(lock.lock_with_lease(l)?),
                    (Some(w), None) if w.is_zero() => lock.try_lock()?,
                    (Some(w), None) => lock.try_lock_for(w)?,
                    (Some(w), Some(l)) => lock.try_lock_for_with_lease(w, l)?,
                }
            }};
        }
        Ok(match kind {
            Kind::Plain => acquire!(self.client.lock(name)).map(|g| (Guard::Plain(g), None)),
            Kind::Fair => acquire!(self.client.fair_lock(name)).map(|g| (Guard::Fair(g), None)),
            Kind::Read => {
                acquire!(self.client.read_write_lock(name).read()).map(|g| (Guard::Read(g), None))
            }
            Kind::Write => {
                acquire!(self.client.read_write_lock(name).write()).map(|g| (Guard::Write(g), None))
            }
            Kind::Fenced => acquire!(self.client.fenced_lock(name)).map(|g| {
                let token = g.token();
                (Guard::Fenced(g), Some(token))
            }),
            Kind::Multi => acquire!(self.multi(name)).map(|g| (Guard::Multi(g), None)),
        })
    }

    fn release(&mut self, kind: Kind, name: &str) -> Result<(), String> {
        let index = self
            .held
            .iter()
            .rposition(|(k, n, _)| *k == kind && n == name)
            .ok_or_else(|| format!("this slot holds no {} lock {name}", kind.word()))?;
        let (_, _, guard) = self.held.remove(index);
        guard.unlock().map_err(err)
    }

    fn run(&mut self, op: Op) -> Result<String, String> {
        let ms = Duration::from_millis;
        match op {
            Op::Lock { kind, name, lease } => {
                let (guard, token) = self
                    .take(kind, &name, None, lease.map(ms))
                    .map_err(err)?
                    .ok_or("lock() returned no guard")?;
                self.held.push((kind, name, guard));
                Ok(token.map(|t| t.to_string()).unwrap_or_default())
            }
            Op::TryLock {
                kind,
                name,
                wait,
                lease,
            } => match self
                .take(kind, &name, Some(ms(wait)), lease.map(ms))
                .map_err(err)?
            {
                Some((guard, token)) => {
                    self.held.push((kind, name, guard));
                    Ok(match token {
                        Some(t) => format!("true {t}"),
                        None => "true".into(),
                    })
                }
                None => Ok("false".into()),
            },
            Op::Unlock { kind, name } => self.release(kind, &name).map(|()| String::new()),
            Op::ForceUnlock { kind, name } => {
                let rw = || self.client.read_write_lock(&name);
                let done = match kind {
                    Kind::Plain => self.client.lock(&name).force_unlock(),
                    Kind::Fair => self.client.fair_lock(&name).force_unlock(),
                    Kind::Read => rw().read().force_unlock(),
                    Kind::Write => rw().write().force_unlock(),
                    Kind::Fenced => self.client.fenced_lock(&name).force_unlock(),
                    Kind::Multi => self.multi(&name).force_unlock(),
                };
                done.map(|b| b.to_string()).map_err(err)
            }
            Op::HoldCount { kind, name } => {
                let rw = || self.client.read_write_lock(&name);
                let count = match kind {
                    Kind::Plain => self.client.lock(&name).hold_count(),
                    Kind::Fair => self.client.fair_lock(&name).hold_count(),
                    Kind::Read => rw().read().hold_count(),
                    Kind::Write => rw().write().hold_count(),
                    Kind::Fenced => self.client.fenced_lock(&name).hold_count(),
                    Kind::Multi => return Err("no hold count for a multi-lock".into()),
                };
                count.map(|c| c.to_string()).map_err(err)
            }
            Op::IsLocked { kind, name } => {
                let rw = || self.client.read_write_lock(&name);
                let locked = match kind {
                    Kind::Plain => self.client.lock(&name).is_locked(),
                    Kind::Fair => self.client.fair_lock(&name).is_locked(),
                    Kind::Read => rw().read().is_locked(),
                    Kind::Write => rw().write().is_locked(),
                    Kind::Fenced => self.client.fenced_lock(&name).is_locked(),
                    Kind::Multi => return Err("no is_locked for a multi-lock".into()),
                };
                locked.map(|b| b.to_string()).map_err(err)
            }
            Op::Token { .. } => Err("redhold has no getToken(): guards carry their token".into()),
            Op::Field => Ok(self.client.lock("-").holder_id()),
            Op::HeldByThread { .. } => {
                Err("redhold asks is_held_by(holder id), with the whole field".into())
            }
            Op::Section {
                kind,
                name,
                label,
                list,
                hold,
            } => {
                let mut con = self.counter_connection()?;
                let (guard, _) = self
                    .take(kind, &name, None, None)
                    .map_err(err)?
                    .ok_or("lock() returned no guard")?;
                redis::cmd("RPUSH")
                    .arg(&list)
                    .arg(&label)
                    .query::<i64>(&mut con)
                    .map_err(|e| e.to_string())?;
                thread::sleep(ms(hold));
                guard.unlock().map_err(err)?;
                Ok(String::new())
            }
            Op::Hammer {
                kind,
                name,
                n,
                prefix,
            } => self.hammer(kind, &name, n, &prefix),
            Op::Sync(words) => crate::sync_side::run(&self.client, self.counters.as_ref(), &words),
        }
    }

    fn counter_connection(&self) -> Result<redis::Connection, String> {
        self.counters
            .as_ref()
            .ok_or("no counter server in this run")?
            .get_connection()
            .map_err(|e| e.to_string())
    }

    /// The Java driver's `hammer`, section for section: the two sides update
    /// the same counters the same way, and time each section's wait for the
    /// lock the same way (re-entries not counted).
    fn hammer(&mut self, kind: Kind, name: &str, n: usize, prefix: &str) -> Result<String, String> {
        let mut con = self.counter_connection()?;
        let key = |k: &str| format!("{prefix}:{k}");
        let (inside, readers, counter, last_token) =
            (key("inside"), key("readers"), key("counter"), key("token"));
        let mut q = |cmd: &mut redis::Cmd| -> Result<i64, String> {
            // INCR, DECR and GET answer numbers (or nil); SET answers OK.
            match cmd
                .query::<redis::Value>(&mut con)
                .map_err(|e| e.to_string())?
            {
                redis::Value::Int(n) => Ok(n),
                redis::Value::Nil | redis::Value::Okay => Ok(0),
                other => redis::from_redis_value::<i64>(other).map_err(|e| e.to_string()),
            }
        };
        let mut violations = 0;
        let mut first = String::new();
        let mut waits = Vec::with_capacity(n);
        let mut times = Vec::with_capacity(n);
        for i in 0..n {
            let asked_us = now_us();
            let asked = Instant::now();
            let (guard, token) = self
                .take(kind, name, None, None)
                .map_err(err)?
                .ok_or("lock() returned no guard")?;
            let took = u64::try_from(asked.elapsed().as_micros()).unwrap_or(u64::MAX);
            waits.push(took);
            let got = Instant::now();
            let mut problem = None;
            if i % 3 == 2 {
                let (inner, _) = self
                    .take(kind, name, None, None)
                    .map_err(err)?
                    .ok_or("re-entry returned no guard")?;
                let holds = match &inner {
                    Guard::Plain(g) => g.lock().hold_count(),
                    Guard::Fair(g) => g.lock().hold_count(),
                    Guard::Read(g) => g.lock().hold_count(),
                    Guard::Write(g) => g.lock().hold_count(),
                    Guard::Fenced(g) => g.lock().hold_count(),
                    Guard::Multi(_) => Ok(2),
                }
                .map_err(err)?;
                inner.unlock().map_err(err)?;
                if holds != 2 {
                    problem = Some(format!("hold count {holds} after re-entry"));
                }
            }
            if kind == Kind::Read {
                q(redis::cmd("INCR").arg(&readers))?;
                let writers = q(redis::cmd("GET").arg(&inside))?;
                if writers != 0 {
                    problem = Some(format!("a reader saw {writers} writer(s) inside"));
                }
                q(redis::cmd("DECR").arg(&readers))?;
            } else {
                let now = q(redis::cmd("INCR").arg(&inside))?;
                if now != 1 {
                    problem = Some(format!("{now} holders inside at once"));
                }
                if kind == Kind::Write && q(redis::cmd("GET").arg(&readers))? != 0 {
                    problem = Some("a writer saw readers inside".into());
                }
                let value = q(redis::cmd("GET").arg(&counter))?;
                thread::yield_now();
                q(redis::cmd("SET").arg(&counter).arg(value + 1))?;
                if let Some(token) = token {
                    let last = q(redis::cmd("GET").arg(&last_token))?;
                    if i64::try_from(token).unwrap_or(i64::MAX) <= last {
                        problem = Some(format!("token {token} after token {last}"));
                    }
                    q(redis::cmd("SET").arg(&last_token).arg(token))?;
                }
                q(redis::cmd("DECR").arg(&inside))?;
            }
            guard.unlock().map_err(err)?;
            times.push(format!("{asked_us}:{took}:{}", got.elapsed().as_micros()));
            if let Some(problem) = problem {
                violations += 1;
                if first.is_empty() {
                    first = problem.replace(' ', "_");
                }
            }
        }
        waits.sort_unstable();
        let longest = waits.last().copied().unwrap_or(0);
        let median = waits.get(n / 2).copied().unwrap_or(0);
        let times = if times.is_empty() {
            "-".to_owned()
        } else {
            times.join(",")
        };
        Ok(
            format!("{violations} {n} {longest} {median} {times} {first}")
                .trim_end()
                .to_owned(),
        )
    }
}
