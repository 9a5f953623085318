//! What actors lock: the lock kinds, their few names (so contention is
//! high), the acquire methods, and one guard type over every kind.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use redhold::{
    Client, Error, Fair, Fenced, Holding, Lock, LockGuard, LockKind, MemberGuard, MultiLock,
    MultiLockGuard, MultiMember, Owner, Read, RedLock, RedLockGuard, Reentrant, Spin, ThisThread,
    UnlockFuture, Write,
};

use crate::actors::Interrupter;

/// The kinds of lock the checker drives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Kind {
    Plain,
    Fair,
    Fenced,
    Spin,
    Read,
    Write,
    /// A `MultiLock` over some of the plain names.
    Multi,
    /// A `RedLock` over one name on three servers.
    Red,
}

/// How a hold excludes others.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Mode {
    Exclusive,
    Read,
    Write,
}

impl Mode {
    /// Whether holds of these modes by different holders exclude each other.
    pub(crate) fn conflicts(self, other: Mode) -> bool {
        !(self == Mode::Read && other == Mode::Read)
    }
}

impl Kind {
    /// The kinds of single locks (no multi-lock, no RedLock).
    pub(crate) const SINGLE: [Kind; 6] = [
        Kind::Plain,
        Kind::Fair,
        Kind::Fenced,
        Kind::Spin,
        Kind::Read,
        Kind::Write,
    ];

    /// Every kind, in wire order: the single ones, then the multi-lock and
    /// the RedLock.
    pub(crate) const ALL: [Kind; 8] = {
        let [plain, fair, fenced, spin, read, write] = Kind::SINGLE;
        [
            plain,
            fair,
            fenced,
            spin,
            read,
            write,
            Kind::Multi,
            Kind::Red,
        ]
    };

    /// A short word for logs and the wire.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Kind::Plain => "plain",
            Kind::Fair => "fair",
            Kind::Fenced => "fenced",
            Kind::Spin => "spin",
            Kind::Read => "read",
            Kind::Write => "write",
            Kind::Multi => "multi",
            Kind::Red => "red",
        }
    }

    /// The kind called `word`.
    pub(crate) fn parse(word: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| k.as_str() == word)
    }

    /// How its holds exclude others.
    pub(crate) fn mode(self) -> Mode {
        match self {
            Kind::Read => Mode::Read,
            Kind::Write => Mode::Write,
            _ => Mode::Exclusive,
        }
    }

    /// The short names most of this kind's traffic goes to (the run's key
    /// prefix goes in front, see [`full_name`]): few, so contention is
    /// high. A multi-lock takes two or three of the plain names, so it
    /// contends with plain holders; read and write share theirs.
    pub(crate) fn names(self) -> &'static [&'static str] {
        match self {
            Kind::Plain | Kind::Multi => &["p0", "p1", "p2"],
            Kind::Fair => &["f0", "f1"],
            Kind::Fenced => &["t0", "t1"],
            Kind::Spin => &["s0", "s1"],
            Kind::Read | Kind::Write => &["w0", "w1"],
            Kind::Red => &["r0", "r1"],
        }
    }

    /// Names mixed in now and then, each a different Redis key from every
    /// other name but sharing something with one:
    ///
    /// - `{p0}` and `p0` share a channel (`redisson_lock__channel:{…p0}`),
    ///   so a release of one wakes, or hands over to, waiters of the other;
    /// - `{pt}a` and `{pt}b` share a cluster hash slot;
    /// - `p0`, `p1`, `{p0}` used by fenced and spin locks too: the kinds with
    ///   the plain hash layout exclude each other on one key.
    ///
    /// Fair locks (a waiter queue besides the hash) and read-write locks (a
    /// `mode` field) keep names of their own: mixing them with the plain
    /// layout is a misuse whose outcome the scripts do not define.
    pub(crate) fn extra_names(self) -> &'static [&'static str] {
        match self {
            Kind::Plain => &["{p0}", "{p1}", "{pt}a", "{pt}b"],
            Kind::Fenced => &["{t0}", "p0", "{p0}"],
            Kind::Spin => &["p1", "{p0}"],
            _ => &[],
        }
    }

    /// Whether `Lock::hold_count` applies (single-name kinds).
    pub(crate) fn single(self) -> bool {
        !matches!(self, Kind::Multi | Kind::Red)
    }

    /// Which force-unlocks cut holds of this kind: one on the same name of
    /// a kind in the same family. The kinds with the plain hash layout are
    /// one family: they share names, and any of them deletes the key.
    pub(crate) fn family(self) -> u8 {
        match self {
            Kind::Plain | Kind::Multi | Kind::Fenced | Kind::Spin => 0,
            Kind::Fair => 1,
            Kind::Read | Kind::Write => 4,
            Kind::Red => 5,
        }
    }

    /// The servers its locks live on (0 is the main server).
    pub(crate) fn servers(self) -> &'static [u8] {
        match self {
            Kind::Red => &[0, 1, 2],
            _ => &[0],
        }
    }
}

/// One lock (or set of locks, for a multi-lock) an actor acts on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Target {
    pub(crate) kind: Kind,
    /// Short names; several only for [`Kind::Multi`], in acquire order.
    pub(crate) names: Vec<&'static str>,
}

impl Target {
    /// The names joined by `+`, as on the wire.
    pub(crate) fn joined(&self) -> String {
        self.names.join("+")
    }
}

/// How an acquire is called.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Method {
    Lock,
    LockLease(Duration),
    TryLock,
    TryFor(Duration),
    TryForLease(Duration, Duration),
    /// `lock_interruptibly`, with a trigger from another thread after the delay.
    Interruptibly(Duration),
    /// `lock_interruptibly_with_lease(trigger delay, lease)`.
    InterruptiblyLease(Duration, Duration),
}

impl Method {
    /// The lease, if any (`None`: watched by the watchdog).
    pub(crate) fn lease(self) -> Option<Duration> {
        match self {
            Method::LockLease(l) | Method::TryForLease(_, l) | Method::InterruptiblyLease(_, l) => {
                Some(l)
            }
            _ => None,
        }
    }

    /// How long the call may wait: `None` for an unbounded wait (an
    /// interruptible one ends when its trigger fires, but is waited like
    /// one).
    pub(crate) fn wait(self) -> Option<Duration> {
        match self {
            Method::TryLock => Some(Duration::ZERO),
            Method::TryFor(w) | Method::TryForLease(w, _) => Some(w),
            _ => None,
        }
    }

    /// The async form's call as code, e.g. `try_lock_for_async(200ms)`
    /// (an interruptible call has none: its plain form).
    pub(crate) fn async_label(self) -> String {
        let ms = |d: Duration| format!("{}ms", d.as_millis());
        match self {
            Method::Lock | Method::Interruptibly(_) => "lock_async()".into(),
            Method::LockLease(l) | Method::InterruptiblyLease(_, l) => {
                format!("lock_with_lease_async({})", ms(l))
            }
            Method::TryLock => "try_lock_async()".into(),
            Method::TryFor(w) => format!("try_lock_for_async({})", ms(w)),
            Method::TryForLease(w, l) => {
                format!("try_lock_for_with_lease_async({}, {})", ms(w), ms(l))
            }
        }
    }

    /// The call as code, e.g. `try_lock_for_with_lease(0ms, 200ms)`.
    pub(crate) fn label(self) -> String {
        let ms = |d: Duration| format!("{}ms", d.as_millis());
        match self {
            Method::Lock => "lock()".into(),
            Method::LockLease(l) => format!("lock_with_lease({})", ms(l)),
            Method::TryLock => "try_lock()".into(),
            Method::TryFor(w) => format!("try_lock_for({})", ms(w)),
            Method::TryForLease(w, l) => format!("try_lock_for_with_lease({}, {})", ms(w), ms(l)),
            Method::Interruptibly(d) => format!("lock_interruptibly(trigger after {})", ms(d)),
            Method::InterruptiblyLease(d, l) => format!(
                "lock_interruptibly_with_lease(trigger after {}, {})",
                ms(d),
                ms(l)
            ),
        }
    }
}

/// The clients of one client slot: the main one and, for red locks, one on
/// each of the two other servers. They are shut down and rebuilt together.
#[derive(Debug)]
pub(crate) struct ClientSet {
    /// `c1#0`: client slot and generation (`p1.c0#2` in a child process).
    pub(crate) tag: String,
    /// Every server's client, the main server's first.
    pub(crate) clients: Vec<Client>,
    /// The run's key prefix.
    pub(crate) prefix: Arc<str>,
    /// When the main client's `shutdown()` was called: an acquire on it
    /// must not return a guard after that.
    pub(crate) shutdown_began: std::sync::OnceLock<std::time::Instant>,
}

/// The Redis name of short name `short` in a run with key prefix
/// `prefix`: `prefix:p0`, and for a name with a hash tag the prefix goes
/// inside the tag (`{p0}` → `{prefix:p0}`), so that `{p0}` keeps sharing
/// `p0`'s channel `redisson_lock__channel:{prefix:p0}` (see
/// docs/wire-format.md: a name with a `{` is its own tag).
pub(crate) fn full_name(prefix: &str, short: &str) -> String {
    match short.strip_prefix('{') {
        Some(rest) => format!("{{{prefix}:{rest}"),
        None => format!("{prefix}:{short}"),
    }
}

/// The short name of a Redis name [`full_name`] made.
pub(crate) fn short_name<'a>(prefix: &str, full: &'a str) -> Option<std::borrow::Cow<'a, str>> {
    if let Some(rest) = full
        .strip_prefix('{')
        .and_then(|r| r.strip_prefix(prefix))
        .and_then(|r| r.strip_prefix(':'))
    {
        return Some(format!("{{{rest}").into());
    }
    full.strip_prefix(prefix)
        .and_then(|r| r.strip_prefix(':'))
        .map(Into::into)
}

impl ClientSet {
    /// The Redis name of short name `short`.
    pub(crate) fn full(&self, short: &str) -> String {
        full_name(&self.prefix, short)
    }

    fn lock<K: LockKind>(&self, short: &str, make: fn(&Client, String) -> Lock<K>) -> Lock<K> {
        make(&self.clients[0], self.full(short))
    }

    fn red(&self, short: &str) -> RedLock {
        RedLock::new(
            self.clients
                .iter()
                .map(|c| c.lock(self.full(short)))
                .collect(),
        )
    }

    fn multi(&self, names: &[&str]) -> MultiLock {
        MultiLock::new(
            names
                .iter()
                .map(|n| self.clients[0].lock(self.full(n)))
                .collect(),
        )
    }

    /// Shuts every client down, counting its direct hand-overs and
    /// courtesy pauses first.
    pub(crate) fn shutdown(&self) {
        let _ = self.shutdown_began.set(std::time::Instant::now());
        for client in &self.clients {
            let stats = client.stats();
            DIRECT_HANDOFFS.fetch_add(stats.direct_handoffs, Ordering::Relaxed);
            COURTESY_PAUSES.fetch_add(stats.courtesy_pauses, Ordering::Relaxed);
            let _ = client.shutdown();
        }
    }
}

/// Direct hand-overs (a release giving the lock straight to a parked thread
/// of its client) made by the clients this process shut down, so that the
/// report shows the checker exercised that path.
static DIRECT_HANDOFFS: AtomicU64 = AtomicU64::new(0);

/// Courtesy pauses (a local waiter standing back for another process's)
/// made by the clients this process shut down, likewise.
static COURTESY_PAUSES: AtomicU64 = AtomicU64::new(0);

/// The direct hand-overs and courtesy pauses counted since the last call.
pub(crate) fn take_handoff_counts() -> (u64, u64) {
    (
        DIRECT_HANDOFFS.swap(0, Ordering::Relaxed),
        COURTESY_PAUSES.swap(0, Ordering::Relaxed),
    )
}

fn plain(c: &Client, n: String) -> Lock<Reentrant> {
    c.lock(n)
}
fn fair(c: &Client, n: String) -> Lock<Fair> {
    c.fair_lock(n)
}
fn fenced(c: &Client, n: String) -> Lock<Fenced> {
    c.fenced_lock(n)
}
fn spin(c: &Client, n: String) -> Lock<Spin> {
    c.spin_lock(n)
}
fn read(c: &Client, n: String) -> Lock<Read> {
    c.read_write_lock(n).read()
}
fn write(c: &Client, n: String) -> Lock<Write> {
    c.read_write_lock(n).write()
}

/// Who an acquire holds for: the calling thread ([`Me`]) or an [`Owner`]
/// (`owners.rs`), whose handles are the same locks made `for_owner`.
pub(crate) trait Who: Copy {
    /// The library's holder type.
    type H: Holding;
    fn lock<K: LockKind>(self, lock: Lock<K>) -> Lock<K, Self::H>;
    fn multi(self, multi: MultiLock) -> MultiLock<Self::H>;
    fn red(self, red: RedLock) -> RedLock<Self::H>;
}

/// The calling thread as the holder.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Me;

impl Who for Me {
    type H = ThisThread;

    fn lock<K: LockKind>(self, lock: Lock<K>) -> Lock<K> {
        lock
    }

    fn multi(self, multi: MultiLock) -> MultiLock {
        multi
    }

    fn red(self, red: RedLock) -> RedLock {
        red
    }
}

impl Who for Owner {
    type H = Owner;

    fn lock<K: LockKind>(self, lock: Lock<K>) -> Lock<K, Owner> {
        lock.for_owner(self)
    }

    fn multi(self, multi: MultiLock) -> MultiLock<Owner> {
        multi.for_owner(self)
    }

    fn red(self, red: RedLock) -> RedLock<Owner> {
        red.for_owner(self)
    }
}

/// A held guard of any kind, of a thread (`H` = [`ThisThread`]) or of an
/// owner (`Send`).
#[derive(Debug)]
pub(crate) enum AnyGuard<H: Holding = ThisThread> {
    Plain(LockGuard<Reentrant, H>),
    Fair(LockGuard<Fair, H>),
    Fenced(LockGuard<Fenced, H>),
    Spin(LockGuard<Spin, H>),
    Read(LockGuard<Read, H>),
    Write(LockGuard<Write, H>),
    Multi(MultiLockGuard<H>),
    Red(RedLockGuard<H>),
    /// One lock of a multi-lock over several kinds, split off its set
    /// (`MultiLockGuard::into_guards`): judged as a hold of its own kind.
    Member(MemberGuard<H>),
}

/// Runs `$body` with `$g` bound to the guard, whatever its kind.
macro_rules! each_guard {
    ($guard:expr, $g:ident => $body:expr) => {
        match $guard {
            AnyGuard::Plain($g) => $body,
            AnyGuard::Fair($g) => $body,
            AnyGuard::Fenced($g) => $body,
            AnyGuard::Spin($g) => $body,
            AnyGuard::Read($g) => $body,
            AnyGuard::Write($g) => $body,
            AnyGuard::Multi($g) => $body,
            AnyGuard::Red($g) => $body,
            AnyGuard::Member($g) => $body,
        }
    };
}

impl<H: Holding> AnyGuard<H> {
    /// The guard's own belief that it holds the lock.
    pub(crate) fn is_held(&self) -> bool {
        each_guard!(self, g => g.is_held())
    }

    /// Releases and reports how it went.
    pub(crate) fn unlock(self) -> redhold::Result<()> {
        each_guard!(self, g => g.unlock())
    }

    /// The fencing token, for a fenced lock.
    pub(crate) fn token(&self) -> Option<u64> {
        match self {
            AnyGuard::Fenced(g) => Some(g.token()),
            AnyGuard::Member(g) => g.token(),
            _ => None,
        }
    }

    /// Gives the hold up without releasing it (single-name kinds only);
    /// hands the guard back when the kind cannot leak.
    pub(crate) fn leak(self) -> Result<(), AnyGuard<H>> {
        match self {
            AnyGuard::Plain(g) => g.leak(),
            AnyGuard::Fair(g) => g.leak(),
            AnyGuard::Fenced(g) => g.leak(),
            AnyGuard::Spin(g) => g.leak(),
            AnyGuard::Read(g) => g.leak(),
            AnyGuard::Write(g) => g.leak(),
            other => return Err(other),
        }
        Ok(())
    }
}

/// Calls `method` on one lock.
fn take<K: LockKind, H: Holding>(
    lock: &Lock<K, H>,
    method: Method,
    interrupts: &Interrupter,
) -> redhold::Result<Option<LockGuard<K, H>>> {
    match method {
        Method::Lock => lock.lock().map(Some),
        Method::LockLease(lease) => lock.lock_with_lease(lease).map(Some),
        Method::TryLock => lock.try_lock(),
        Method::TryFor(wait) => lock.try_lock_for(wait),
        Method::TryForLease(wait, lease) => lock.try_lock_for_with_lease(wait, lease),
        Method::Interruptibly(after) => {
            let interrupt = interrupts.arm(after);
            lock.lock_interruptibly(&interrupt).map(Some)
        }
        Method::InterruptiblyLease(after, lease) => {
            let interrupt = interrupts.arm(after);
            lock.lock_interruptibly_with_lease(&interrupt, lease)
                .map(Some)
        }
    }
}

/// Calls `method` on a multi-lock (an interruptible call has no lease).
fn take_multi<H: Holding>(
    multi: &MultiLock<H>,
    method: Method,
    interrupts: &Interrupter,
) -> redhold::Result<Option<MultiLockGuard<H>>> {
    match method {
        Method::Lock => multi.lock().map(Some),
        Method::LockLease(lease) => multi.lock_with_lease(lease).map(Some),
        Method::TryLock => multi.try_lock(),
        Method::TryFor(wait) => multi.try_lock_for(wait),
        Method::TryForLease(wait, lease) => multi.try_lock_for_with_lease(wait, lease),
        Method::Interruptibly(after) | Method::InterruptiblyLease(after, _) => {
            let interrupt = interrupts.arm(after);
            multi.lock_interruptibly(&interrupt).map(Some)
        }
    }
}

/// Acquires `target` with `method` on the client set.
pub(crate) fn acquire(
    set: &ClientSet,
    target: &Target,
    method: Method,
    interrupts: &Interrupter,
) -> redhold::Result<Option<AnyGuard>> {
    acquire_as(set, target, method, interrupts, Me)
}

/// [`acquire`] for `who`: the calling thread or an owner.
pub(crate) fn acquire_as<W: Who>(
    set: &ClientSet,
    target: &Target,
    method: Method,
    interrupts: &Interrupter,
    who: W,
) -> redhold::Result<Option<AnyGuard<W::H>>> {
    let name = target.names[0];
    match target.kind {
        Kind::Plain => {
            let lock = who.lock(set.lock(name, plain));
            Ok(take(&lock, method, interrupts)?.map(AnyGuard::Plain))
        }
        Kind::Fair => {
            let lock = who.lock(set.lock(name, fair));
            Ok(take(&lock, method, interrupts)?.map(AnyGuard::Fair))
        }
        Kind::Fenced => {
            let lock = who.lock(set.lock(name, fenced));
            Ok(take(&lock, method, interrupts)?.map(AnyGuard::Fenced))
        }
        Kind::Spin => {
            let lock = who.lock(set.lock(name, spin));
            Ok(take(&lock, method, interrupts)?.map(AnyGuard::Spin))
        }
        Kind::Read => {
            let lock = who.lock(set.lock(name, read));
            Ok(take(&lock, method, interrupts)?.map(AnyGuard::Read))
        }
        Kind::Write => {
            let lock = who.lock(set.lock(name, write));
            Ok(take(&lock, method, interrupts)?.map(AnyGuard::Write))
        }
        Kind::Multi => {
            let guard = take_multi(&who.multi(set.multi(&target.names)), method, interrupts)?;
            Ok(guard.map(AnyGuard::Multi))
        }
        Kind::Red => {
            let red = who.red(set.red(name));
            let guard = match method {
                Method::Lock => red.lock().map(Some),
                Method::LockLease(lease) => red.lock_with_lease(lease).map(Some),
                Method::TryLock => red.try_lock(),
                Method::TryFor(wait) => red.try_lock_for(wait),
                Method::TryForLease(wait, lease) => red.try_lock_for_with_lease(wait, lease),
                Method::Interruptibly(after) | Method::InterruptiblyLease(after, _) => {
                    let interrupt = interrupts.arm(after);
                    red.lock_interruptibly(&interrupt).map(Some)
                }
            }?;
            Ok(guard.map(AnyGuard::Red))
        }
    }
}

/// An owner's async acquire, boxed, its guard as an [`AnyGuard`]: the
/// library's future is made at once (its first step is queued then), and
/// dropping this drops it.
pub(crate) type AcquireFuture =
    Pin<Box<dyn Future<Output = redhold::Result<Option<AnyGuard<Owner>>>> + Send>>;

/// The async form of `method` on one lock of `owner` (an interruptible
/// call has none: its plain form).
fn take_async<K: LockKind>(
    lock: Lock<K, Owner>,
    method: Method,
    wrap: fn(LockGuard<K, Owner>) -> AnyGuard<Owner>,
) -> AcquireFuture {
    match method {
        Method::Lock | Method::Interruptibly(_) => {
            let f = lock.lock_async();
            Box::pin(async move { f.await.map(|g| Some(wrap(g))) })
        }
        Method::LockLease(lease) | Method::InterruptiblyLease(_, lease) => {
            let f = lock.lock_with_lease_async(lease);
            Box::pin(async move { f.await.map(|g| Some(wrap(g))) })
        }
        Method::TryLock => {
            let f = lock.try_lock_async();
            Box::pin(async move { f.await.map(|g| g.map(wrap)) })
        }
        Method::TryFor(wait) => {
            let f = lock.try_lock_for_async(wait);
            Box::pin(async move { f.await.map(|g| g.map(wrap)) })
        }
        Method::TryForLease(wait, lease) => {
            let f = lock.try_lock_for_with_lease_async(wait, lease);
            Box::pin(async move { f.await.map(|g| g.map(wrap)) })
        }
    }
}

/// `owner`'s async acquire of `target` with the async form of `method`
/// (see [`Method::async_label`]).
pub(crate) fn acquire_async(
    set: &ClientSet,
    target: &Target,
    method: Method,
    owner: Owner,
) -> AcquireFuture {
    let name = target.names[0];
    match target.kind {
        Kind::Plain => take_async(owner.lock(set.lock(name, plain)), method, AnyGuard::Plain),
        Kind::Fair => take_async(owner.lock(set.lock(name, fair)), method, AnyGuard::Fair),
        Kind::Fenced => take_async(owner.lock(set.lock(name, fenced)), method, AnyGuard::Fenced),
        Kind::Spin => take_async(owner.lock(set.lock(name, spin)), method, AnyGuard::Spin),
        Kind::Read => take_async(owner.lock(set.lock(name, read)), method, AnyGuard::Read),
        Kind::Write => take_async(owner.lock(set.lock(name, write)), method, AnyGuard::Write),
        Kind::Multi => {
            let multi = owner.multi(set.multi(&target.names));
            match method {
                Method::Lock | Method::Interruptibly(_) => {
                    let f = multi.lock_async();
                    Box::pin(async move { f.await.map(|g| Some(AnyGuard::Multi(g))) })
                }
                Method::LockLease(lease) | Method::InterruptiblyLease(_, lease) => {
                    let f = multi.lock_with_lease_async(lease);
                    Box::pin(async move { f.await.map(|g| Some(AnyGuard::Multi(g))) })
                }
                Method::TryLock => {
                    let f = multi.try_lock_async();
                    Box::pin(async move { f.await.map(|g| g.map(AnyGuard::Multi)) })
                }
                Method::TryFor(wait) => {
                    let f = multi.try_lock_for_async(wait);
                    Box::pin(async move { f.await.map(|g| g.map(AnyGuard::Multi)) })
                }
                Method::TryForLease(wait, lease) => {
                    let f = multi.try_lock_for_with_lease_async(wait, lease);
                    Box::pin(async move { f.await.map(|g| g.map(AnyGuard::Multi)) })
                }
            }
        }
        Kind::Red => {
            let red = owner.red(set.red(name));
            match method {
                Method::Lock | Method::Interruptibly(_) => {
                    let f = red.lock_async();
                    Box::pin(async move { f.await.map(|g| Some(AnyGuard::Red(g))) })
                }
                Method::LockLease(lease) | Method::InterruptiblyLease(_, lease) => {
                    let f = red.lock_with_lease_async(lease);
                    Box::pin(async move { f.await.map(|g| Some(AnyGuard::Red(g))) })
                }
                Method::TryLock => {
                    let f = red.try_lock_async();
                    Box::pin(async move { f.await.map(|g| g.map(AnyGuard::Red)) })
                }
                Method::TryFor(wait) => {
                    let f = red.try_lock_for_async(wait);
                    Box::pin(async move { f.await.map(|g| g.map(AnyGuard::Red)) })
                }
                Method::TryForLease(wait, lease) => {
                    let f = red.try_lock_for_with_lease_async(wait, lease);
                    Box::pin(async move { f.await.map(|g| g.map(AnyGuard::Red)) })
                }
            }
        }
    }
}

impl AnyGuard<Owner> {
    /// The async release: `unlock_async()` of a single lock's or a
    /// RedLock's guard; a multi-lock's guard has none (handed back).
    pub(crate) fn unlock_async(self) -> Result<UnlockFuture, AnyGuard<Owner>> {
        match self {
            AnyGuard::Plain(g) => Ok(g.unlock_async()),
            AnyGuard::Fair(g) => Ok(g.unlock_async()),
            AnyGuard::Fenced(g) => Ok(g.unlock_async()),
            AnyGuard::Spin(g) => Ok(g.unlock_async()),
            AnyGuard::Read(g) => Ok(g.unlock_async()),
            AnyGuard::Write(g) => Ok(g.unlock_async()),
            AnyGuard::Red(g) => Ok(g.unlock_async()),
            other => Err(other),
        }
    }
}

/// How the calls of a multi-lock over several kinds are labelled: each of
/// its locks is recorded as a call of its own kind (so that every rule
/// judges it as one), with this in front of the method.
pub(crate) const MEMBER_CALL: &str = "member of a multi-lock: ";

/// Whether a call's method label is a multi-lock member's.
pub(crate) fn is_member_call(method: &str) -> bool {
    method.starts_with(MEMBER_CALL)
}

/// `member` (a single-name target) as a member of a multi-lock.
fn member(set: &ClientSet, target: &Target) -> MultiMember {
    let name = target.names[0];
    match target.kind {
        Kind::Plain => set.lock(name, plain).into(),
        Kind::Fair => set.lock(name, fair).into(),
        Kind::Fenced => set.lock(name, fenced).into(),
        Kind::Spin => set.lock(name, spin).into(),
        Kind::Read => set.lock(name, read).into(),
        Kind::Write => set.lock(name, write).into(),
        Kind::Multi | Kind::Red => unreachable!("a member is a single lock"),
    }
}

/// Acquires a multi-lock over `members` (single locks of several kinds)
/// with `method`; on success, one guard per member, in `members`' order.
pub(crate) fn acquire_mixed(
    set: &ClientSet,
    members: &[Target],
    method: Method,
    interrupts: &Interrupter,
) -> redhold::Result<Option<Vec<AnyGuard>>> {
    let multi = MultiLock::of(members.iter().map(|t| member(set, t)));
    let guard = take_multi(&multi, method, interrupts)?;
    let Some(guard) = guard else {
        return Ok(None);
    };
    // Taken in their own order (the busy one first): sorted back by name.
    let mut split: Vec<Option<MemberGuard>> = guard.into_guards().into_iter().map(Some).collect();
    let guards = members
        .iter()
        .map(|t| {
            let full = set.full(t.names[0]);
            let at = split
                .iter()
                .position(|g| g.as_ref().is_some_and(|g| g.name() == full))
                .expect("a guard for every member");
            AnyGuard::Member(split[at].take().expect("taken once"))
        })
        .collect();
    Ok(Some(guards))
}

/// The method a kind really runs: multi-locks and red locks have no
/// interruptible call with a lease, so they get the one without.
pub(crate) fn effective(kind: Kind, method: Method) -> Method {
    match (kind, method) {
        (Kind::Multi | Kind::Red, Method::InterruptiblyLease(after, _)) => {
            Method::Interruptibly(after)
        }
        _ => method,
    }
}

/// `force_unlock` on the target (a red lock: on each server).
pub(crate) fn force_unlock(set: &ClientSet, target: &Target) -> redhold::Result<bool> {
    let name = target.names[0];
    match target.kind {
        Kind::Plain => set.lock(name, plain).force_unlock(),
        Kind::Fair => set.lock(name, fair).force_unlock(),
        Kind::Fenced => set.lock(name, fenced).force_unlock(),
        Kind::Spin => set.lock(name, spin).force_unlock(),
        Kind::Read => set.lock(name, read).force_unlock(),
        Kind::Write => set.lock(name, write).force_unlock(),
        Kind::Multi => set.multi(&target.names).force_unlock(),
        Kind::Red => {
            let mut any = false;
            for client in &set.clients {
                any |= client.lock(set.full(name)).force_unlock()?;
            }
            Ok(any)
        }
    }
}

/// `hold_count()` (or, with `as_bool`, `is_held_by_current_thread()` as
/// 0 or 1) of a single-name kind.
pub(crate) fn hold_count(
    set: &ClientSet,
    kind: Kind,
    name: &str,
    as_bool: bool,
) -> redhold::Result<u32> {
    fn ask<K: LockKind>(lock: Lock<K>, as_bool: bool) -> redhold::Result<u32> {
        if as_bool {
            lock.is_held_by_current_thread().map(u32::from)
        } else {
            lock.hold_count()
        }
    }
    match kind {
        Kind::Plain | Kind::Multi => ask(set.lock(name, plain), as_bool),
        Kind::Fair => ask(set.lock(name, fair), as_bool),
        Kind::Fenced => ask(set.lock(name, fenced), as_bool),
        Kind::Spin => ask(set.lock(name, spin), as_bool),
        Kind::Read => ask(set.lock(name, read), as_bool),
        Kind::Write => ask(set.lock(name, write), as_bool),
        Kind::Red => ask(set.lock(name, plain), as_bool),
    }
}

/// `hold_count()` of `owner` on lock `name` of a single-name `kind` (a
/// multi-lock's or RedLock's: the plain lock of that name on the main
/// server), asked through the set's main client.
pub(crate) fn owner_hold_count(
    set: &ClientSet,
    kind: Kind,
    name: &str,
    owner: Owner,
) -> redhold::Result<u32> {
    fn ask<K: LockKind>(lock: Lock<K>, owner: Owner) -> redhold::Result<u32> {
        lock.for_owner(owner).hold_count()
    }
    match kind {
        Kind::Plain | Kind::Multi | Kind::Red => ask(set.lock(name, plain), owner),
        Kind::Fair => ask(set.lock(name, fair), owner),
        Kind::Fenced => ask(set.lock(name, fenced), owner),
        Kind::Spin => ask(set.lock(name, spin), owner),
        Kind::Read => ask(set.lock(name, read), owner),
        Kind::Write => ask(set.lock(name, write), owner),
    }
}

/// `owner`'s holder field in lock `name` of a single-name `kind`, as the
/// set's main client writes it (`<uuid>:<owner id>`, a writer's with
/// `:write`): the fault proxy matches the owner's requests by it, and the
/// checker looks for it in Redis.
pub(crate) fn owner_holder_id(set: &ClientSet, kind: Kind, name: &str, owner: Owner) -> String {
    match kind {
        Kind::Fair => set.lock(name, fair).for_owner(owner).holder_id(),
        Kind::Fenced => set.lock(name, fenced).for_owner(owner).holder_id(),
        Kind::Spin => set.lock(name, spin).for_owner(owner).holder_id(),
        Kind::Read => set.lock(name, read).for_owner(owner).holder_id(),
        Kind::Write => set.lock(name, write).for_owner(owner).holder_id(),
        _ => set.lock(name, plain).for_owner(owner).holder_id(),
    }
}

/// A Redis name with `prefix` in front, inside the name's hash tag when it
/// has one (`redisson_lock_queue:{name}`): where a fair lock keeps its
/// queue and deadlines (docs/wire-format.md).
pub(crate) fn tagged_key(prefix: &str, full: &str) -> String {
    if full.contains('{') {
        format!("{prefix}:{full}")
    } else {
        format!("{prefix}:{{{full}}}")
    }
}

/// The start of every read-hold key of `field` in the read-write lock
/// `full` (`{name}:<field>:rwlock_timeout:<k>`, one per read hold).
pub(crate) fn read_hold_prefix(full: &str, field: &str) -> String {
    let base = if full.contains('{') {
        full.to_owned()
    } else {
        format!("{{{full}}}")
    };
    format!("{base}:{field}:rwlock_timeout:")
}

/// The calling thread's holder field in lock `name` of a single-name
/// `kind` (`Lock::holder_id`), as the set's main client writes it: the
/// fault proxy matches the thread's own requests by it.
pub(crate) fn holder_id(set: &ClientSet, kind: Kind, name: &str) -> String {
    match kind {
        Kind::Fair => set.lock(name, fair).holder_id(),
        Kind::Fenced => set.lock(name, fenced).holder_id(),
        Kind::Spin => set.lock(name, spin).holder_id(),
        Kind::Read => set.lock(name, read).holder_id(),
        Kind::Write => set.lock(name, write).holder_id(),
        _ => set.lock(name, plain).holder_id(),
    }
}

/// `is_locked()` and `remaining_lease()`: exercised, not judged (another
/// holder may change the answer at any moment).
pub(crate) fn peek(set: &ClientSet, kind: Kind, name: &str) -> redhold::Result<()> {
    fn both<K: LockKind>(lock: Lock<K>) -> redhold::Result<()> {
        lock.is_locked()?;
        lock.remaining_lease()?;
        Ok(())
    }
    match kind {
        Kind::Fair => both(set.lock(name, fair)),
        Kind::Fenced => both(set.lock(name, fenced)),
        Kind::Spin => both(set.lock(name, spin)),
        Kind::Read => both(set.lock(name, read)),
        Kind::Write => both(set.lock(name, write)),
        _ => both(set.lock(name, plain)),
    }
}

/// `Lock::unlock()` for a hold whose guard was leaked.
pub(crate) fn unlock_leaked(set: &ClientSet, kind: Kind, name: &str) -> redhold::Result<()> {
    match kind {
        Kind::Fair => set.lock(name, fair).unlock(),
        Kind::Fenced => set.lock(name, fenced).unlock(),
        Kind::Spin => set.lock(name, spin).unlock(),
        Kind::Read => set.lock(name, read).unlock(),
        Kind::Write => set.lock(name, write).unlock(),
        _ => set.lock(name, plain).unlock(),
    }
}

/// A short word for how a call ended.
pub(crate) fn outcome(result: &redhold::Result<()>) -> String {
    match result {
        Ok(()) => "ok".into(),
        Err(e) => error_word(e),
    }
}

/// A short word for an error: `lost`, `interrupted`, `shutdown`, … or
/// `error:<text>`.
pub(crate) fn error_word(e: &Error) -> String {
    match e {
        Error::LockLost { .. } => "lost".into(),
        Error::Interrupted { .. } => "interrupted".into(),
        Error::Shutdown => "shutdown".into(),
        Error::NotHeld { .. } => "not-held".into(),
        Error::UpgradeNotSupported { .. } => "upgrade-refused".into(),
        other => {
            let text = other.to_string();
            let short: String = text.chars().take(80).collect();
            format!("error:{short}")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tagged_name_keeps_sharing_its_channel() {
        assert_eq!(full_name("model-1", "p0"), "model-1:p0");
        assert_eq!(full_name("model-1", "{p0}"), "{model-1:p0}");
        assert_eq!(full_name("model-1", "{pt}a"), "{model-1:pt}a");
        for short in ["p0", "{p0}", "{pt}a"] {
            let full = full_name("model-1", short);
            assert_eq!(short_name("model-1", &full).as_deref(), Some(short));
        }
    }
}
