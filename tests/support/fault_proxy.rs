//! A TCP proxy in front of a real `redis-server` that can lose one chosen
//! request or its reply: the realistic way to make a command's first
//! attempt fail at an exact moment (a dead pooled connection), which
//! killing connections at random times reaches only by luck.
//!
//! Every accepted connection gets a connection to the server and two
//! threads: one pumps the client's bytes to the server, cutting them into
//! RESP requests as they pass, the other pumps the server's bytes back.
//! A [`Rule`] names the request it waits for (a command and the arguments
//! it must carry) and what to do to the first one that matches:
//!
//! - [`Action::LoseRequest`]: the connection is cut before the request is
//!   forwarded; the server never runs it.
//! - [`Action::LoseReply`]: the request is forwarded, the connection is cut
//!   as the reply arrives; the server ran it, the client never learns how.
//! - [`Action::DelayReply`], [`Action::DelayRequest`]: a slow round trip
//!   at a chosen moment (a stalled server: the request still runs later).
//! - [`Action::TrickleReply`], [`Action::GarbleReply`],
//!   [`Action::CutMidReply`], [`Action::FloodAfterReply`]: a reply sent a
//!   byte at a time, replaced by junk, cut mid-way, or followed by endless
//!   filler.
//!
//! A rule fires once (on the first matching request, or the N-th with
//! [`Matcher::nth`]) and is then spent. A standing rule
//! ([`Arming::arm_every`], [`Arming::arm_for`]) fires on every matching
//! request instead, until it is disarmed or its window closes: every
//! release of a lock held back, say, not just the first. One-shot rules
//! are looked at first. The proxy stops when dropped: it shuts every socket
//! down and joins every thread it started.
//!
//! [`Arming::partition`] (or [`Arming::start_partition`] and
//! [`Arming::heal`]) cuts the network instead: every open connection is
//! cut, and until it heals new connections are accepted but held silent
//! (nothing read through, nothing answered), as behind a dead link, so a
//! client's connects succeed and its requests time out. Healing closes
//! the held connections; new ones are served again.
//!
//! A proxy started with [`FaultProxy::start_raw`] does not look at the
//! bytes at all (they may be TLS): it only forwards them, and trickles
//! every reply while [`FaultProxy::trickle_all_replies`] says so.

use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU16, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

/// How long connecting to the server may take before the client's
/// connection is closed (the server is away: a restart, say).
const UPSTREAM_CONNECT: Duration = Duration::from_millis(300);
/// Size of one read; also what one pump keeps at most beyond the request
/// it is cutting out.
const CHUNK: usize = 16 * 1024;
/// A request larger than this is forwarded without being looked at.
const MAX_REQUEST: usize = 4 * 1024 * 1024;
/// How often the acceptor looks at the stop flag.
const ACCEPT_POLL: Duration = Duration::from_millis(5);

/// What to do to the request a rule matches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Action {
    /// Cut the connection instead of forwarding the request.
    LoseRequest,
    /// Forward the request, cut the connection when its reply comes.
    LoseReply,
    /// As [`LoseReply`](Self::LoseReply), and start a partition at that
    /// moment (see [`Arming::start_partition`]): the caller's resend finds
    /// the network gone, not a fresh connection. Heal it with
    /// [`Arming::heal`].
    #[allow(dead_code)] // not every test binary that includes the proxy uses it
    LoseReplyAndPartition,
    /// Forward the request, hold its reply back this long.
    DelayReply(Duration),
    /// Hold the request back this long, then forward it (a stalled server:
    /// the client gives up on it, and it still runs later).
    DelayRequest(Duration),
    /// Hold the request back this long, then cut the connection instead
    /// of forwarding it: a request the client gave up on (and wrote an
    /// undo behind) that never runs.
    #[allow(dead_code)] // not every test binary that includes the proxy uses it
    LoseRequestAfter(Duration),
    /// Hold the request back this long, forward it, and cut the
    /// connection at once: the late request runs, and what the client
    /// wrote behind it (an undo) never reaches the server.
    #[allow(dead_code)] // not every test binary that includes the proxy uses it
    DelayRequestThenCut(Duration),
    /// Forward the request, send its reply one byte per this pause.
    TrickleReply(Duration),
    /// Forward the request and its reply, then send these bytes and
    /// endless filler after them (about 10 MB/s) until the client closes.
    #[allow(dead_code)] // tests/faults only: the checker does not flood
    FloodAfterReply(&'static [u8]),
    /// Forward the request, send these bytes instead of its reply (and
    /// keep the connection): a garbled reply.
    GarbleReply(&'static [u8]),
    /// Forward the request, send the first half of its reply, then cut
    /// the connection: a reply cut mid-way.
    CutMidReply,
}

/// Which request a rule waits for: its command (case-insensitive) is one of
/// `commands`, one argument equals `exact` (when set), and for every entry
/// of `containing` some argument contains it, and no argument equals one
/// of `excluding`; the first `skip` requests that match only count down
/// (see [`Matcher::nth`]).
#[derive(Debug, Clone, Default)]
pub(crate) struct Matcher {
    pub(crate) commands: Vec<String>,
    pub(crate) exact: Option<Vec<u8>>,
    pub(crate) containing: Vec<Vec<u8>>,
    pub(crate) excluding: Vec<Vec<u8>>,
    pub(crate) skip: u32,
}

impl Matcher {
    /// A script call (`EVAL`/`EVALSHA`) with `exact` among its arguments
    /// and every one of `containing` inside some argument.
    pub(crate) fn script(exact: &str, containing: &[&str]) -> Matcher {
        Matcher {
            commands: vec!["EVALSHA".into(), "EVAL".into()],
            exact: Some(exact.as_bytes().to_vec()),
            containing: containing.iter().map(|c| c.as_bytes().to_vec()).collect(),
            excluding: Vec::new(),
            skip: 0,
        }
    }

    /// The same matcher, for requests none of whose arguments equals one
    /// of `args`.
    #[allow(dead_code)] // not every test binary that includes the proxy uses it
    pub(crate) fn excluding(mut self, args: &[&str]) -> Matcher {
        self.excluding = args.iter().map(|a| a.as_bytes().to_vec()).collect();
        self
    }

    /// The same matcher, firing on the `n`-th matching request (1-based)
    /// instead of the first: the N-th reply of a command, say the second
    /// renewal of a lock. A request taken by an earlier rule is not
    /// counted.
    #[allow(dead_code)] // not every test binary that includes the proxy uses it
    pub(crate) fn nth(mut self, n: u32) -> Matcher {
        self.skip = n.saturating_sub(1);
        self
    }

    fn matches(&self, args: &[Vec<u8>]) -> bool {
        let Some(command) = args.first() else {
            return false;
        };
        if !self
            .commands
            .iter()
            .any(|c| c.as_bytes().eq_ignore_ascii_case(command))
        {
            return false;
        }
        let rest = &args[1..];
        if let Some(exact) = &self.exact {
            if !rest.iter().any(|a| a == exact) {
                return false;
            }
        }
        self.containing
            .iter()
            .all(|needle| rest.iter().any(|a| contains(a, needle)))
            && !rest.iter().any(|a| self.excluding.contains(a))
    }
}

/// Stalls the server at `port` for `duration` with `DEBUG SLEEP` sent on
/// a side connection, from a thread of its own: the server reads nothing
/// meanwhile, and the requests queued on its sockets run late when it
/// wakes, after their callers gave up on them. The server must allow
/// `DEBUG` (`support::server_version().debug_command_args()`). Join the
/// handle to know the stall is over (it returns what `DEBUG` said).
#[allow(dead_code)] // not every test binary that includes the proxy uses it
pub(crate) fn stall_server(port: u16, duration: Duration) -> JoinHandle<Result<(), String>> {
    let secs = format!("{:.3}", duration.as_secs_f64());
    thread::Builder::new()
        .name("debug-sleep".into())
        .spawn(move || {
            let mut side = TcpStream::connect(("127.0.0.1", port)).map_err(|e| e.to_string())?;
            let request = format!(
                "*3\r\n$5\r\nDEBUG\r\n$5\r\nSLEEP\r\n${}\r\n{secs}\r\n",
                secs.len()
            );
            side.write_all(request.as_bytes())
                .map_err(|e| e.to_string())?;
            let mut reply = [0u8; 64];
            let n = side.read(&mut reply).map_err(|e| e.to_string())?;
            match reply.get(..n) {
                Some(b"+OK\r\n") => Ok(()),
                other => Err(format!(
                    "DEBUG SLEEP said {:?}",
                    other.map(String::from_utf8_lossy)
                )),
            }
        })
        .expect("spawn the DEBUG SLEEP thread")
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    needle.is_empty() || haystack.windows(needle.len()).any(|w| w == needle)
}

/// A matcher and its action.
#[derive(Debug, Clone)]
pub(crate) struct Rule {
    pub(crate) matcher: Matcher,
    pub(crate) action: Action,
}

/// An armed rule: ask whether it fired, or take it back.
#[derive(Debug)]
pub(crate) struct Armed {
    id: u64,
    shared: Arc<Shared>,
}

impl Armed {
    /// Waits until the rule fired, at most `limit`; whether it did.
    pub(crate) fn wait_fired(&self, limit: Duration) -> bool {
        let deadline = Instant::now() + limit;
        let mut fired = self.shared.fired.lock();
        while !fired.contains(&self.id) {
            if self
                .shared
                .fired_changed
                .wait_until(&mut fired, deadline)
                .timed_out()
            {
                return fired.contains(&self.id);
            }
        }
        true
    }

    /// How many times the rule fired so far (at most once for a one-shot
    /// rule; every matching request for a standing one).
    #[allow(dead_code)] // not every test binary that includes the proxy uses it
    pub(crate) fn times_fired(&self) -> usize {
        self.shared
            .fired
            .lock()
            .iter()
            .filter(|id| **id == self.id)
            .count()
    }

    /// Waits until the rule fired at least `times` times, at most `limit`;
    /// whether it did.
    #[allow(dead_code)] // not every test binary that includes the proxy uses it
    pub(crate) fn wait_fired_times(&self, times: usize, limit: Duration) -> bool {
        let deadline = Instant::now() + limit;
        let count = |fired: &Vec<u64>| fired.iter().filter(|id| **id == self.id).count();
        let mut fired = self.shared.fired.lock();
        while count(&fired) < times {
            if self
                .shared
                .fired_changed
                .wait_until(&mut fired, deadline)
                .timed_out()
            {
                return count(&fired) >= times;
            }
        }
        true
    }

    /// Takes the rule back if it has not fired; whether it had fired. A
    /// standing rule stops firing from now on (requests it is holding back
    /// still go on when their time is up).
    pub(crate) fn disarm(self) -> bool {
        self.shared.rules.lock().retain(|(id, _)| *id != self.id);
        self.shared
            .standing
            .lock()
            .retain(|standing| standing.id != self.id);
        let mut fired = self.shared.fired.lock();
        let was = fired.contains(&self.id);
        fired.retain(|id| *id != self.id);
        was
    }
}

/// What the proxy's threads share.
#[derive(Debug)]
struct Shared {
    /// The server's port on 127.0.0.1 (see [`FaultProxy::set_upstream`]).
    upstream_port: AtomicU16,
    stop: AtomicBool,
    next_id: AtomicU64,
    rules: Mutex<Vec<(u64, Rule)>>,
    /// Standing rules: they fire on every matching request until disarmed
    /// or until their window closes.
    standing: Mutex<Vec<Standing>>,
    /// Rules that fired and were not yet disarmed (a standing rule once
    /// per request it fired on).
    fired: Mutex<Vec<u64>>,
    fired_changed: Condvar,
    /// Both sockets of every live connection, to cut them all on stop.
    live: Mutex<Vec<(u64, TcpStream, TcpStream)>>,
    threads: Mutex<Vec<JoinHandle<()>>>,
    /// Requests lost, replies lost, replies delayed, requests delayed,
    /// partitions.
    counts: [AtomicU64; 5],
    /// `Some` while partitioned: the connections accepted meanwhile, held
    /// silent. The acceptor holds this lock while it serves a connection,
    /// so a partition cannot miss one that is being set up.
    partition: Mutex<Option<Vec<TcpStream>>>,
    /// Forward the client's bytes without cutting them into requests.
    raw: bool,
    /// Send every server byte one at a time, this far apart.
    trickle_all: Mutex<Option<Duration>>,
}

/// A rule that fires on every matching request (see [`Arming::arm_every`]).
#[derive(Debug)]
struct Standing {
    id: u64,
    rule: Rule,
    /// Matches no request after this moment (and is then forgotten).
    until: Option<Instant>,
}

impl Shared {
    /// The first armed rule matching `args`, taken out (rules fire once);
    /// else the first standing rule matching it, which stays.
    fn take_rule(&self, args: &[Vec<u8>]) -> Option<(u64, Action)> {
        self.take_one_shot(args)
            .or_else(|| self.match_standing(args))
    }

    fn take_one_shot(&self, args: &[Vec<u8>]) -> Option<(u64, Action)> {
        let mut rules = self.rules.lock();
        let mut at = None;
        for (pos, (_, rule)) in rules.iter_mut().enumerate() {
            if !rule.matcher.matches(args) {
                continue;
            }
            if rule.matcher.skip > 0 {
                rule.matcher.skip -= 1;
                continue;
            }
            at = Some(pos);
            break;
        }
        let (id, rule) = rules.remove(at?);
        Some((id, rule.action))
    }

    fn match_standing(&self, args: &[Vec<u8>]) -> Option<(u64, Action)> {
        let mut standing = self.standing.lock();
        let now = Instant::now();
        standing.retain(|s| s.until.is_none_or(|until| now < until));
        for s in standing.iter_mut() {
            if !s.rule.matcher.matches(args) {
                continue;
            }
            if s.rule.matcher.skip > 0 {
                s.rule.matcher.skip -= 1;
                continue;
            }
            return Some((s.id, s.rule.action));
        }
        None
    }

    fn fire(&self, id: u64, action: Action) {
        let slot = match action {
            Action::LoseRequest | Action::LoseRequestAfter(_) => 0,
            Action::DelayRequestThenCut(_)
            | Action::LoseReply
            | Action::LoseReplyAndPartition
            | Action::GarbleReply(_)
            | Action::CutMidReply => 1,
            Action::DelayReply(_) | Action::TrickleReply(_) | Action::FloodAfterReply(_) => 2,
            Action::DelayRequest(_) => 3,
        };
        self.counts[slot].fetch_add(1, Ordering::Relaxed);
        self.fired.lock().push(id);
        self.fired_changed.notify_all();
    }

    fn forget(&self, conn: u64) {
        self.live.lock().retain(|(id, _, _)| *id != conn);
    }

    /// See [`Arming::start_partition`].
    fn start_partition(&self) {
        let mut partition = self.partition.lock();
        if partition.is_some() {
            return;
        }
        *partition = Some(Vec::new());
        self.counts[4].fetch_add(1, Ordering::Relaxed);
        for (_, client, server) in self.live.lock().drain(..) {
            let _ = client.shutdown(Shutdown::Both);
            let _ = server.shutdown(Shutdown::Both);
        }
    }
}

/// A proxy listening on a port of its own in front of one server.
#[derive(Debug)]
pub(crate) struct FaultProxy {
    port: u16,
    shared: Arc<Shared>,
    acceptor: Option<JoinHandle<()>>,
}

impl FaultProxy {
    /// Starts a proxy in front of the server at `127.0.0.1:upstream_port`.
    ///
    /// # Panics
    ///
    /// When no local port can be bound or no thread started.
    pub(crate) fn start(upstream_port: u16) -> FaultProxy {
        FaultProxy::start_with(upstream_port, false)
    }

    /// Starts a proxy that forwards bytes without looking at them, for
    /// TLS: rules never match; only
    /// [`trickle_all_replies`](Self::trickle_all_replies) acts.
    ///
    /// # Panics
    ///
    /// As [`start`](Self::start) does.
    #[allow(dead_code)] // tests/faults only: the checker speaks plain RESP
    pub(crate) fn start_raw(upstream_port: u16) -> FaultProxy {
        FaultProxy::start_with(upstream_port, true)
    }

    /// From now on (`Some`), every byte the server sends on any connection
    /// goes out alone, `pause` after the one before; `None` ends that.
    #[allow(dead_code)] // tests/faults only: the checker speaks plain RESP
    pub(crate) fn trickle_all_replies(&self, pause: Option<Duration>) {
        *self.shared.trickle_all.lock() = pause;
    }

    /// Points the proxy at another server port, for connections accepted
    /// from now on: a server that must know the proxy's port when it
    /// starts (a cluster node announcing it) starts after the proxy.
    #[allow(dead_code)] // tests/faults only
    pub(crate) fn set_upstream(&self, upstream_port: u16) {
        self.shared
            .upstream_port
            .store(upstream_port, Ordering::Relaxed);
    }

    /// The port the proxy listens on.
    #[allow(dead_code)] // tests/faults only: the checker speaks plain RESP
    pub(crate) fn port(&self) -> u16 {
        self.port
    }

    fn start_with(upstream_port: u16, raw: bool) -> FaultProxy {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the fault proxy");
        listener
            .set_nonblocking(true)
            .expect("make the fault proxy's listener non-blocking");
        let port = listener.local_addr().expect("the proxy's address").port();
        let shared = Arc::new(Shared {
            upstream_port: AtomicU16::new(upstream_port),
            stop: AtomicBool::new(false),
            next_id: AtomicU64::new(1),
            rules: Mutex::new(Vec::new()),
            standing: Mutex::new(Vec::new()),
            fired: Mutex::new(Vec::new()),
            fired_changed: Condvar::new(),
            live: Mutex::new(Vec::new()),
            threads: Mutex::new(Vec::new()),
            counts: Default::default(),
            partition: Mutex::new(None),
            raw,
            trickle_all: Mutex::new(None),
        });
        let for_acceptor = Arc::clone(&shared);
        let acceptor = thread::Builder::new()
            .name("fault-proxy-accept".into())
            .spawn(move || accept_loop(&listener, &for_acceptor))
            .expect("spawn the fault proxy's acceptor");
        FaultProxy {
            port,
            shared,
            acceptor: Some(acceptor),
        }
    }

    /// `redis://127.0.0.1:<proxy port>/`.
    pub(crate) fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    /// A handle actors can keep to arm rules.
    pub(crate) fn arming(&self) -> Arming {
        Arming {
            shared: Arc::clone(&self.shared),
        }
    }

    /// `lost request N, lost reply N, delayed reply N, delayed request N,
    /// partitions N` (delayed replies count the trickled and flooded ones
    /// too).
    pub(crate) fn summary(&self) -> String {
        let c = |i: usize| self.shared.counts[i].load(Ordering::Relaxed);
        format!(
            "lost request {}, lost reply {}, delayed reply {}, delayed request {}, partitions {}",
            c(0),
            c(1),
            c(2),
            c(3),
            c(4)
        )
    }
}

/// Arms rules on a running proxy (cheap to clone, `Send`).
#[derive(Debug, Clone)]
pub(crate) struct Arming {
    shared: Arc<Shared>,
}

impl Arming {
    /// Arms `rule`: the next request that matches it gets its action.
    pub(crate) fn arm(&self, rule: Rule) -> Armed {
        let id = self.shared.next_id.fetch_add(1, Ordering::Relaxed);
        self.shared.rules.lock().push((id, rule));
        Armed {
            id,
            shared: Arc::clone(&self.shared),
        }
    }

    /// Arms `rule` as a standing rule: every request that matches it from
    /// now on gets its action (the first `skip` only count down, as with
    /// [`Matcher::nth`]), until [`Armed::disarm`]. One-shot rules armed
    /// with [`arm`](Self::arm) come first.
    #[allow(dead_code)] // not every test binary that includes the proxy uses it
    pub(crate) fn arm_every(&self, rule: Rule) -> Armed {
        self.arm_standing(rule, None)
    }

    /// As [`arm_every`](Self::arm_every), for requests that arrive within
    /// `window` from now only: a stalled path that heals by itself.
    #[allow(dead_code)] // not every test binary that includes the proxy uses it
    pub(crate) fn arm_for(&self, rule: Rule, window: Duration) -> Armed {
        self.arm_standing(rule, Instant::now().checked_add(window))
    }

    fn arm_standing(&self, rule: Rule, until: Option<Instant>) -> Armed {
        let id = self.shared.next_id.fetch_add(1, Ordering::Relaxed);
        self.shared
            .standing
            .lock()
            .push(Standing { id, rule, until });
        Armed {
            id,
            shared: Arc::clone(&self.shared),
        }
    }

    /// Cuts every open connection and holds new ones silent until
    /// [`heal`](Self::heal). A partition already on goes on.
    #[allow(dead_code)] // not every test binary that includes the proxy uses it
    pub(crate) fn start_partition(&self) {
        self.shared.start_partition();
    }

    /// Ends a partition: the connections held silent are closed, new ones
    /// are served again.
    #[allow(dead_code)] // not every test binary that includes the proxy uses it
    pub(crate) fn heal(&self) {
        for held in self.shared.partition.lock().take().unwrap_or_default() {
            let _ = held.shutdown(Shutdown::Both);
        }
    }

    /// A partition `duration` long: returns once it healed.
    #[allow(dead_code)] // not every test binary that includes the proxy uses it
    pub(crate) fn partition(&self, duration: Duration) {
        self.start_partition();
        thread::sleep(duration);
        self.heal();
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        if let Some(acceptor) = self.acceptor.take() {
            let _ = acceptor.join();
        }
        for (_, client, server) in self.shared.live.lock().drain(..) {
            let _ = client.shutdown(Shutdown::Both);
            let _ = server.shutdown(Shutdown::Both);
        }
        for held in self.shared.partition.lock().take().unwrap_or_default() {
            let _ = held.shutdown(Shutdown::Both);
        }
        let threads: Vec<_> = self.shared.threads.lock().drain(..).collect();
        for t in threads {
            let _ = t.join();
        }
    }
}

fn accept_loop(listener: &TcpListener, shared: &Arc<Shared>) {
    while !shared.stop.load(Ordering::SeqCst) {
        match listener.accept() {
            Ok((client, _)) => {
                let _ = client.set_nonblocking(false);
                let mut partition = shared.partition.lock();
                match partition.as_mut() {
                    // Accepted, then never read nor answered.
                    Some(held) => held.push(client),
                    None => serve(client, shared),
                }
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => thread::sleep(ACCEPT_POLL),
            Err(_) => thread::sleep(ACCEPT_POLL),
        }
        // Forget the threads of connections that are over.
        shared.threads.lock().retain(|t| !t.is_finished());
    }
}

/// Connects `client` to the server and starts its two pumps; closes it at
/// once when the server cannot be reached.
fn serve(client: TcpStream, shared: &Arc<Shared>) {
    let upstream = SocketAddr::from(([127, 0, 0, 1], shared.upstream_port.load(Ordering::Relaxed)));
    let Ok(server) = TcpStream::connect_timeout(&upstream, UPSTREAM_CONNECT) else {
        let _ = client.shutdown(Shutdown::Both);
        return;
    };
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    let conn = shared.next_id.fetch_add(1, Ordering::Relaxed);
    let clones = (
        client.try_clone(),
        server.try_clone(),
        client.try_clone(),
        server.try_clone(),
    );
    let (Ok(c1), Ok(s1), Ok(c2), Ok(s2)) = clones else {
        let _ = client.shutdown(Shutdown::Both);
        let _ = server.shutdown(Shutdown::Both);
        return;
    };
    shared.live.lock().push((conn, client, server));
    let replies = Arc::new(Mutex::new(ReplyState::Pass));
    let (up_shared, up_replies) = (Arc::clone(shared), Arc::clone(&replies));
    let down_shared = Arc::clone(shared);
    let up = thread::Builder::new()
        .name("fault-proxy-up".into())
        .spawn(move || {
            pump_requests(c1, &s1, &up_shared, &up_replies);
            let _ = s1.shutdown(Shutdown::Both);
            up_shared.forget(conn);
        });
    let down = thread::Builder::new()
        .name("fault-proxy-down".into())
        .spawn(move || {
            pump_replies(s2, &c2, &down_shared, &replies);
            let _ = c2.shutdown(Shutdown::Both);
            down_shared.forget(conn);
        });
    let mut threads = shared.threads.lock();
    threads.extend(up.ok());
    threads.extend(down.ok());
}

/// What happens to the next bytes the server sends on one connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ReplyState {
    Pass,
    /// Cut the connection instead (a lost reply); the rule's id.
    Cut(u64),
    /// The same, starting a partition; the rule's id.
    CutAndPartition(u64),
    /// Hold them back this long first; the rule's id.
    Delay(Duration, u64),
    /// Other ways to spoil the reply: see [`spoil`].
    Spoil(Action),
    /// Send these bytes instead (garbled); the rule's id.
    Garble(&'static [u8], u64),
    /// Send half of them, then cut the connection; the rule's id.
    Half(u64),
}

/// Client → server: forwards whole requests, applying rules; returns when
/// either side is closed or a rule cut the connection.
fn pump_requests(
    mut client: TcpStream,
    server: &TcpStream,
    shared: &Shared,
    replies: &Mutex<ReplyState>,
) {
    let mut server = server;
    let mut pending: Vec<u8> = Vec::with_capacity(CHUNK);
    let mut chunk = vec![0u8; CHUNK];
    loop {
        let n = match client.read(&mut chunk) {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        if shared.raw {
            if server.write_all(&chunk[..n]).is_err() {
                return;
            }
            continue;
        }
        pending.extend_from_slice(&chunk[..n]);
        loop {
            let (used, args) = match parse_request(&pending) {
                Parsed::Whole(used, args) => (used, Some(args)),
                Parsed::Inline(used) => (used, None),
                Parsed::Partial if pending.len() > MAX_REQUEST => (pending.len(), None),
                Parsed::Partial => break,
            };
            let rule = args.as_deref().and_then(|a| shared.take_rule(a));
            match rule {
                Some((id, Action::LoseRequest)) => {
                    shared.fire(id, Action::LoseRequest);
                    let _ = client.shutdown(Shutdown::Both);
                    return;
                }
                // Set before the request leaves, so its reply cannot slip by.
                Some((id, Action::LoseReply)) => *replies.lock() = ReplyState::Cut(id),
                Some((id, Action::LoseReplyAndPartition)) => {
                    *replies.lock() = ReplyState::CutAndPartition(id);
                }
                Some((id, Action::DelayReply(d))) => *replies.lock() = ReplyState::Delay(d, id),
                Some((id, Action::DelayRequest(d))) => {
                    shared.fire(id, Action::DelayRequest(d));
                    thread::sleep(d);
                }
                Some((id, Action::LoseRequestAfter(d))) => {
                    shared.fire(id, Action::LoseRequestAfter(d));
                    thread::sleep(d);
                    let _ = client.shutdown(Shutdown::Both);
                    return;
                }
                Some((id, Action::DelayRequestThenCut(d))) => {
                    shared.fire(id, Action::DelayRequestThenCut(d));
                    thread::sleep(d);
                    let _ = server.write_all(&pending[..used]);
                    let _ = client.shutdown(Shutdown::Both);
                    return;
                }
                Some((id, Action::GarbleReply(with))) => {
                    *replies.lock() = ReplyState::Garble(with, id);
                }
                Some((id, Action::CutMidReply)) => *replies.lock() = ReplyState::Half(id),
                Some((_, action)) => *replies.lock() = ReplyState::Spoil(action),
                None => {}
            }
            if server.write_all(&pending[..used]).is_err() {
                return;
            }
            pending.drain(..used);
            // A delay has fired once the request is on its way: whoever
            // waits for it knows the server has the request.
            // (A held-back request fired before its pause; a garbled or cut
            // reply fires when it is spoilt.)
            let fired_later = |a: &Action| {
                matches!(
                    a,
                    Action::LoseReply
                        | Action::LoseReplyAndPartition
                        | Action::DelayRequest(_)
                        | Action::GarbleReply(_)
                        | Action::CutMidReply
                )
            };
            if let Some((id, action)) = rule.filter(|(_, a)| !fired_later(a)) {
                shared.fire(id, action);
            }
        }
    }
}

/// Server → client: forwards bytes, cutting or delaying the next reply
/// when a rule asked for it.
fn pump_replies(
    mut server: TcpStream,
    client: &TcpStream,
    shared: &Shared,
    replies: &Mutex<ReplyState>,
) {
    let mut client = client;
    let mut chunk = vec![0u8; CHUNK];
    loop {
        let n = match server.read(&mut chunk) {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        let state = std::mem::replace(&mut *replies.lock(), ReplyState::Pass);
        match state {
            ReplyState::Pass => {}
            ReplyState::Cut(id) => {
                shared.fire(id, Action::LoseReply);
                return;
            }
            ReplyState::CutAndPartition(id) => {
                shared.start_partition();
                shared.fire(id, Action::LoseReplyAndPartition);
                return;
            }
            ReplyState::Delay(d, _) => thread::sleep(d),
            ReplyState::Spoil(action) => return spoil(action, &chunk[..n], client, shared),
            ReplyState::Garble(with, id) => {
                shared.fire(id, Action::GarbleReply(with));
                if client.write_all(with).is_err() {
                    return;
                }
                continue;
            }
            ReplyState::Half(id) => {
                shared.fire(id, Action::CutMidReply);
                let _ = client.write_all(&chunk[..n.div_ceil(2).min(n - 1).max(1)]);
                return;
            }
        }
        let trickle_all = *shared.trickle_all.lock();
        let sent = match trickle_all {
            Some(pause) => trickle(&chunk[..n], pause, client, shared),
            None => client.write_all(&chunk[..n]).is_ok(),
        };
        if !sent {
            return;
        }
    }
}

/// Sends `bytes` one at a time, `pause` apart; false when the client is
/// gone or the proxy stops.
fn trickle(bytes: &[u8], pause: Duration, mut client: &TcpStream, shared: &Shared) -> bool {
    for byte in bytes {
        if shared.stop.load(Ordering::SeqCst) || client.write_all(&[*byte]).is_err() {
            return false;
        }
        thread::sleep(pause);
    }
    true
}

/// Sends `reply` as `action` says, then forwards nothing more: the
/// connection is spoilt. Ends when the client closes or the proxy stops.
fn spoil(action: Action, reply: &[u8], mut client: &TcpStream, shared: &Shared) {
    let stopped = || shared.stop.load(Ordering::SeqCst);
    match action {
        Action::TrickleReply(pause) => {
            trickle(reply, pause, client, shared);
        }
        Action::FloodAfterReply(junk) => {
            if client
                .write_all(reply)
                .and_then(|()| client.write_all(junk))
                .is_err()
            {
                return;
            }
            let filler = vec![b'x'; 64 * 1024];
            while !stopped() && client.write_all(&filler).is_ok() {
                thread::sleep(Duration::from_millis(6));
            }
        }
        _ => {}
    }
}

/// One request cut out of the client's bytes.
#[derive(Debug)]
enum Parsed {
    /// A whole RESP array of bulk strings: its length and its arguments.
    Whole(usize, Vec<Vec<u8>>),
    /// Something else up to a line break (an inline command): its length.
    Inline(usize),
    /// Not all there yet.
    Partial,
}

/// Cuts the first request out of `buf`.
fn parse_request(buf: &[u8]) -> Parsed {
    let Some(line_end) = find_crlf(buf, 0) else {
        return Parsed::Partial;
    };
    if buf[0] != b'*' {
        return Parsed::Inline(line_end + 2);
    }
    let Some(count) = number(&buf[1..line_end]) else {
        return Parsed::Inline(line_end + 2);
    };
    let mut at = line_end + 2;
    let mut args = Vec::with_capacity(count.max(0) as usize);
    for _ in 0..count.max(0) {
        let Some(end) = find_crlf(buf, at) else {
            return Parsed::Partial;
        };
        if buf[at] != b'$' {
            // Not a bulk string: forward what we have as it is.
            return Parsed::Inline(end + 2);
        }
        let Some(len) = number(&buf[at + 1..end]) else {
            return Parsed::Inline(end + 2);
        };
        let start = end + 2;
        let stop = start + len.max(0) as usize;
        if buf.len() < stop + 2 {
            return Parsed::Partial;
        }
        args.push(buf[start..stop].to_vec());
        at = stop + 2;
    }
    Parsed::Whole(at, args)
}

fn find_crlf(buf: &[u8], from: usize) -> Option<usize> {
    buf.get(from..)?
        .windows(2)
        .position(|w| w == b"\r\n")
        .map(|p| from + p)
}

fn number(text: &[u8]) -> Option<i64> {
    std::str::from_utf8(text).ok()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_cut_out_whole() {
        let buf = b"*3\r\n$7\r\nEVALSHA\r\n$1\r\n1\r\n$3\r\nkey\r\n*1\r\n$4\r\nPING\r\n";
        match parse_request(buf) {
            Parsed::Whole(used, args) => {
                assert_eq!(
                    args,
                    vec![b"EVALSHA".to_vec(), b"1".to_vec(), b"key".to_vec()]
                );
                assert!(matches!(parse_request(&buf[used..]), Parsed::Whole(_, _)));
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(parse_request(&buf[..10]), Parsed::Partial));
        assert!(matches!(parse_request(b"PING\r\n"), Parsed::Inline(6)));
    }

    #[test]
    fn a_matcher_needs_the_command_and_every_argument() {
        let m = Matcher::script("key", &["latch", "uuid"]);
        let args = |v: &[&str]| v.iter().map(|s| s.as_bytes().to_vec()).collect::<Vec<_>>();
        assert!(m.matches(&args(&["evalsha", "sha", "key", "the-latch:uuid:1"])));
        assert!(!m.matches(&args(&["evalsha", "sha", "key2", "the-latch:uuid:1"])));
        assert!(!m.matches(&args(&["GET", "key", "latch", "uuid"])));
        assert!(!m.matches(&args(&["EVAL", "key", "latch"])));
    }

    #[test]
    fn an_nth_rule_fires_on_the_nth_matching_request_only() {
        let shared = Shared {
            upstream_port: AtomicU16::new(1),
            stop: AtomicBool::new(false),
            next_id: AtomicU64::new(0),
            rules: Mutex::new(vec![(
                7,
                Rule {
                    matcher: Matcher::script("key", &[]).nth(3),
                    action: Action::LoseReply,
                },
            )]),
            standing: Mutex::default(),
            fired: Mutex::default(),
            fired_changed: Condvar::new(),
            live: Mutex::default(),
            threads: Mutex::default(),
            counts: Default::default(),
            partition: Mutex::default(),
            raw: false,
            trickle_all: Mutex::default(),
        };
        let hit = vec![b"EVALSHA".to_vec(), b"sha".to_vec(), b"key".to_vec()];
        let miss = vec![b"EVALSHA".to_vec(), b"sha".to_vec(), b"other".to_vec()];
        assert_eq!(shared.take_rule(&hit), None, "1st");
        assert_eq!(shared.take_rule(&miss), None, "not counted");
        assert_eq!(shared.take_rule(&hit), None, "2nd");
        assert_eq!(shared.take_rule(&hit), Some((7, Action::LoseReply)), "3rd");
        assert_eq!(shared.take_rule(&hit), None, "spent");
    }

    #[test]
    fn a_standing_rule_fires_on_every_matching_request_until_disarmed() {
        let proxy = FaultProxy::start(1);
        let arming = proxy.arming();
        let hit = vec![b"EVALSHA".to_vec(), b"sha".to_vec(), b"key".to_vec()];
        let miss = vec![b"EVALSHA".to_vec(), b"sha".to_vec(), b"other".to_vec()];
        let held = Action::DelayRequest(Duration::from_millis(1));
        let every = arming.arm_every(Rule {
            matcher: Matcher::script("key", &[]).nth(2),
            action: held,
        });
        let shared = &proxy.shared;
        assert_eq!(shared.take_rule(&hit), None, "1st: counted down");
        assert_eq!(shared.take_rule(&miss), None, "not counted");
        for n in 2..5 {
            assert_eq!(shared.take_rule(&hit), Some((every.id, held)), "{n}th");
        }
        // A one-shot rule comes first, once.
        let once = arming.arm(Rule {
            matcher: Matcher::script("key", &[]),
            action: Action::LoseReply,
        });
        assert_eq!(shared.take_rule(&hit), Some((once.id, Action::LoseReply)));
        assert_eq!(shared.take_rule(&hit), Some((every.id, held)));
        every.disarm();
        assert_eq!(shared.take_rule(&hit), None, "disarmed");
        // A window that has closed matches nothing.
        let closed = arming.arm_for(
            Rule {
                matcher: Matcher::script("key", &[]),
                action: held,
            },
            Duration::ZERO,
        );
        assert_eq!(shared.take_rule(&hit), None, "window closed");
        assert_eq!(closed.times_fired(), 0);
    }
}
