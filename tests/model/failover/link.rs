//! A plain TCP forwarder standing for one server's network address: what
//! lets the failover test lose the replication stream the way a crashed
//! host loses it.
//!
//! Each server listens on `127.0.0.1:<port>`; its link listens on
//! `127.0.0.2:<port>`, and that second address is the only one the rest
//! of the deployment knows (the sentinels monitor it, the servers announce
//! it with `replica-announce-ip`, replicas replicate from it, clients get
//! it from the sentinels). The link forwards bytes both ways unchanged and
//! can
//!
//! - **starve the replicas** ([`Link::starve_replicas`]): from then on, the
//!   bytes the server sends on a replication connection (one whose peer
//!   sent `REPLCONF` or `PSYNC`) are held back and never delivered, while
//!   clients and sentinels are served as before. The master keeps
//!   acknowledging writes to its clients; its replica receives none of
//!   them and still looks healthy (its link is up, it answers the
//!   sentinels).
//! - **go down** ([`Link::down`]): stop listening (connects are refused)
//!   and cut every connection, discarding what was held back. Taken
//!   together with a `SIGKILL` of the server this is a crashed host: the
//!   writes it acknowledged but had not yet sent to its replica are gone.
//! - **come back** ([`Link::up`]), listening again on the same address.
//! - **shut the sentinels out** ([`Link::isolate_sentinels`]): every
//!   connection whose peer names itself `sentinel-…` (`CLIENT SETNAME`, as
//!   sentinels do) is cut, now and as soon as it names itself, until
//!   [`Link::admit_sentinels`]; clients and replicas are served as before.
//!   The sentinels then take the server for down and fail it over while
//!   it lives and serves its clients: a network partition between the
//!   sentinels and a master.
//! - **shut one sentinel out** ([`Link::isolate_sentinel`]): the same for
//!   the sentinel whose id starts as given (the name a sentinel gives its
//!   connections, `sentinel-<first 8 characters of its id>-cmd` or
//!   `-pubsub`, carries it), for good: a partition between that sentinel
//!   and the server only (`tests/sentinel.rs` makes a stale sentinel with
//!   it).
//!
//! Why not simply `SIGSTOP` the replica, or `DEBUG SLEEP`/`CLIENT PAUSE`
//! it: the master would still have written the stream into the replica's
//! socket, and on loopback the kernel delivers those bytes when the
//! replica resumes, even after the master was killed: the write survives,
//! and the failover loses nothing. Only bytes that never left the
//! master's side can be lost, so the link keeps them.

use std::io::{ErrorKind, Read, Write};
use std::net::{Ipv4Addr, Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::Duration;

use parking_lot::Mutex;

/// The loopback address the deployment knows every server by.
pub(crate) const FRONT_HOST: &str = "127.0.0.2";
/// How long connecting to the server may take (it is local: longer means
/// it is down).
const UPSTREAM_CONNECT: Duration = Duration::from_millis(300);
/// How often the acceptor looks at its stop flag.
const ACCEPT_POLL: Duration = Duration::from_millis(5);
/// Size of one read.
const CHUNK: usize = 16 * 1024;
/// How the name a sentinel gives its connections starts.
const SENTINEL_NAME: &[u8] = b"sentinel-";
/// How many characters of its id a sentinel puts in those names.
const SENTINEL_ID_LEN: usize = 8;

/// One forwarded connection: both sockets, to cut them, and whether it
/// carries replication.
struct Conn {
    client: TcpStream,
    server: TcpStream,
    replication: AtomicBool,
    sentinel: AtomicBool,
    /// The first 8 characters of the sentinel's id, from the name it
    /// gives the connection.
    sentinel_id: Mutex<Option<Vec<u8>>>,
}

/// What the acceptor and the pumps share.
struct Shared {
    upstream: SocketAddr,
    /// Whether connections may be told apart as replication (not on a
    /// cluster bus port, whose binary messages could hold the words).
    sniff: bool,
    starving: AtomicBool,
    /// Sentinels' connections are cut (see [`Link::isolate_sentinels`]).
    isolating: AtomicBool,
    /// Ids (first 8 characters) of the sentinels whose connections are cut
    /// (see [`Link::isolate_sentinel`]).
    isolated: Mutex<Vec<Vec<u8>>>,
    conns: Mutex<Vec<Arc<Conn>>>,
    threads: Mutex<Vec<JoinHandle<()>>>,
    /// Replication bytes held back (to be lost) since the last `down`.
    withheld: AtomicU64,
}

/// The listening side, present while the link is up.
struct Listening {
    stop: Arc<AtomicBool>,
    acceptor: JoinHandle<()>,
}

/// The forwarder for one server; see the module documentation.
pub(crate) struct Link {
    front: SocketAddr,
    shared: Arc<Shared>,
    listening: Option<Listening>,
}

impl std::fmt::Debug for Link {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Link({} -> {})", self.front, self.shared.upstream)
    }
}

impl Link {
    /// Starts forwarding `127.0.0.2:<port>` to `127.0.0.1:<port>`.
    ///
    /// # Panics
    ///
    /// When the address cannot be bound.
    pub(crate) fn start(port: u16) -> Link {
        Link::start_with(port, true)
    }

    /// A link that only forwards (for a cluster bus port): it never tells
    /// replication apart, so starving holds nothing back.
    pub(crate) fn start_plain(port: u16) -> Link {
        Link::start_with(port, false)
    }

    fn start_with(port: u16, sniff: bool) -> Link {
        let host: Ipv4Addr = FRONT_HOST.parse().expect("a loopback address");
        let mut link = Link {
            front: SocketAddr::from((host, port)),
            shared: Arc::new(Shared {
                upstream: SocketAddr::from((Ipv4Addr::LOCALHOST, port)),
                sniff,
                starving: AtomicBool::new(false),
                isolating: AtomicBool::new(false),
                isolated: Mutex::new(Vec::new()),
                conns: Mutex::new(Vec::new()),
                threads: Mutex::new(Vec::new()),
                withheld: AtomicU64::new(0),
            }),
            listening: None,
        };
        link.up();
        link
    }

    /// Listens again (after [`down`](Self::down)); does nothing when up.
    ///
    /// # Panics
    ///
    /// When the address cannot be bound within a second.
    pub(crate) fn up(&mut self) {
        if self.listening.is_some() {
            return;
        }
        // std sets SO_REUSEADDR, so the cut connections' TIME_WAIT does
        // not hold the address; a short retry covers the rest.
        let mut tries = 0;
        let listener = loop {
            match TcpListener::bind(self.front) {
                Ok(listener) => break listener,
                Err(e) if tries < 100 => {
                    tries += 1;
                    log::debug!("link {}: bind failed ({e}); retrying", self.front);
                    thread::sleep(Duration::from_millis(10));
                }
                Err(e) => panic!("link {}: cannot listen: {e}", self.front),
            }
        };
        listener
            .set_nonblocking(true)
            .expect("make the link's listener non-blocking");
        let stop = Arc::new(AtomicBool::new(false));
        let (shared, stop2) = (Arc::clone(&self.shared), Arc::clone(&stop));
        let acceptor = thread::Builder::new()
            .name("failover-link-accept".into())
            .spawn(move || accept_loop(&listener, &shared, &stop2))
            .expect("spawn the link's acceptor");
        self.listening = Some(Listening { stop, acceptor });
    }

    /// Stops listening and cuts every connection; bytes held back by
    /// [`starve_replicas`](Self::starve_replicas) are discarded (their
    /// count is returned), and starving ends.
    pub(crate) fn down(&mut self) -> u64 {
        if let Some(Listening { stop, acceptor }) = self.listening.take() {
            stop.store(true, Ordering::SeqCst);
            let _ = acceptor.join();
        }
        // Cut while still starving, so that nothing held is flushed.
        for conn in self.shared.conns.lock().drain(..) {
            let _ = conn.client.shutdown(Shutdown::Both);
            let _ = conn.server.shutdown(Shutdown::Both);
        }
        self.shared.starving.store(false, Ordering::SeqCst);
        self.shared.withheld.swap(0, Ordering::SeqCst)
    }

    /// From now until [`down`](Self::down) or
    /// [`feed_replicas`](Self::feed_replicas), holds back every byte the
    /// server sends on a replication connection.
    pub(crate) fn starve_replicas(&self) {
        self.shared.starving.store(true, Ordering::SeqCst);
    }

    /// Ends starving (after a failover that kept the server alive): the
    /// replication connections are cut, what they held back is discarded
    /// (its count is returned), and new ones are forwarded again.
    pub(crate) fn feed_replicas(&self) -> u64 {
        for conn in self.shared.conns.lock().iter() {
            if conn.replication.load(Ordering::SeqCst) {
                cut(conn);
            }
        }
        self.shared.starving.store(false, Ordering::SeqCst);
        self.shared.withheld.swap(0, Ordering::SeqCst)
    }
}

impl Link {
    /// From now until [`admit_sentinels`](Self::admit_sentinels), cuts
    /// every sentinel's connection to the server.
    pub(crate) fn isolate_sentinels(&self) {
        self.shared.isolating.store(true, Ordering::SeqCst);
        for conn in self.shared.conns.lock().iter() {
            if conn.sentinel.load(Ordering::SeqCst) {
                cut(conn);
            }
        }
    }

    /// Lets sentinels reach the server again (not those shut out one by
    /// one).
    pub(crate) fn admit_sentinels(&self) {
        self.shared.isolating.store(false, Ordering::SeqCst);
    }

    /// From now on, cuts every connection of the sentinel whose id
    /// (`SENTINEL MYID`) starts with `id`'s first 8 characters, the part
    /// its connections' names carry.
    #[allow(dead_code)] // tests/sentinel.rs: the checker shuts all out
    pub(crate) fn isolate_sentinel(&self, id: &str) {
        let short = id.as_bytes()[..SENTINEL_ID_LEN.min(id.len())].to_ascii_lowercase();
        self.shared.isolated.lock().push(short.clone());
        for conn in self.shared.conns.lock().iter() {
            if conn.sentinel_id.lock().as_ref() == Some(&short) {
                cut(conn);
            }
        }
    }
}

impl Drop for Link {
    fn drop(&mut self) {
        let _ = self.down();
        let threads: Vec<JoinHandle<()>> = self.shared.threads.lock().drain(..).collect();
        for t in threads {
            let _ = t.join();
        }
    }
}

fn accept_loop(listener: &TcpListener, shared: &Arc<Shared>, stop: &AtomicBool) {
    while !stop.load(Ordering::SeqCst) {
        match listener.accept() {
            Ok((client, _)) => forward(client, shared),
            Err(e) if e.kind() == ErrorKind::WouldBlock => thread::sleep(ACCEPT_POLL),
            Err(e) => {
                log::debug!("link accept failed: {e}");
                thread::sleep(ACCEPT_POLL);
            }
        }
    }
}

/// Connects the accepted `client` to the server and starts its two pumps;
/// closes it when the server is away.
fn forward(client: TcpStream, shared: &Arc<Shared>) {
    let Ok(server) = TcpStream::connect_timeout(&shared.upstream, UPSTREAM_CONNECT) else {
        return;
    };
    let (Ok(()), Ok(())) = (client.set_nonblocking(false), server.set_nodelay(true)) else {
        return;
    };
    let _ = client.set_nodelay(true);
    let (Ok(client2), Ok(server2)) = (client.try_clone(), server.try_clone()) else {
        return;
    };
    let conn = Arc::new(Conn {
        client,
        server,
        replication: AtomicBool::new(false),
        sentinel: AtomicBool::new(false),
        sentinel_id: Mutex::new(None),
    });
    let mut threads = shared.threads.lock();
    threads.retain(|t| !t.is_finished());
    {
        let mut conns = shared.conns.lock();
        conns.retain(|c| Arc::strong_count(c) > 1);
        conns.push(Arc::clone(&conn));
    }
    let (c1, s1) = (Arc::clone(&conn), Arc::clone(shared));
    let (c2, s2) = (Arc::clone(&conn), Arc::clone(shared));
    let spawned = [
        thread::Builder::new()
            .name("failover-link-up".into())
            .spawn(move || pump_requests(client2, &c1, &s1)),
        thread::Builder::new()
            .name("failover-link-down".into())
            .spawn(move || pump_replies(server2, &c2, &s2)),
    ];
    for t in spawned {
        match t {
            Ok(t) => threads.push(t),
            Err(_) => cut(&conn),
        }
    }
}

fn cut(conn: &Conn) {
    let _ = conn.client.shutdown(Shutdown::Both);
    let _ = conn.server.shutdown(Shutdown::Both);
}

/// Client to server; marks the connection as replication when the peer
/// speaks the replica handshake (`REPLCONF` is sent first and then every
/// second, so a command split across reads is caught the next time).
fn pump_requests(mut from: TcpStream, conn: &Conn, shared: &Shared) {
    let mut buf = vec![0u8; CHUNK];
    let mut to = &conn.server;
    loop {
        let n = match from.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        let bytes = &buf[..n];
        if shared.sniff && (contains(bytes, b"REPLCONF") || contains(bytes, b"PSYNC")) {
            conn.replication.store(true, Ordering::SeqCst);
        }
        if shared.sniff && contains(bytes, SENTINEL_NAME) {
            conn.sentinel.store(true, Ordering::SeqCst);
            let mut id = conn.sentinel_id.lock();
            if id.is_none() {
                *id = sentinel_id(bytes);
            }
        }
        if shut_out(conn, shared) || to.write_all(bytes).is_err() {
            break;
        }
    }
    cut(conn);
}

/// Server to client; holds back a replication connection's bytes while
/// starving.
fn pump_replies(mut from: TcpStream, conn: &Conn, shared: &Shared) {
    let mut buf = vec![0u8; CHUNK];
    let mut to = &conn.client;
    loop {
        let n = match from.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        if shut_out(conn, shared) {
            break;
        }
        if conn.replication.load(Ordering::SeqCst) && shared.starving.load(Ordering::SeqCst) {
            // Held back until the link goes down, i.e. lost: the stream
            // after this point cannot be resumed, and never is.
            shared.withheld.fetch_add(n as u64, Ordering::Relaxed);
            continue;
        }
        if to.write_all(&buf[..n]).is_err() {
            break;
        }
    }
    cut(conn);
}

/// Whether `conn` is a sentinel's while sentinels are shut out, or the
/// connection of a sentinel shut out by itself.
fn shut_out(conn: &Conn, shared: &Shared) -> bool {
    if !conn.sentinel.load(Ordering::SeqCst) {
        return false;
    }
    if shared.isolating.load(Ordering::SeqCst) {
        return true;
    }
    let isolated = shared.isolated.lock();
    !isolated.is_empty()
        && conn
            .sentinel_id
            .lock()
            .as_ref()
            .is_some_and(|id| isolated.contains(id))
}

/// The id part of the name a sentinel gives its connection, from the
/// bytes that carry its `CLIENT SETNAME` (lowercase), if they hold all of
/// it.
fn sentinel_id(bytes: &[u8]) -> Option<Vec<u8>> {
    let at = bytes
        .windows(SENTINEL_NAME.len())
        .position(|w| w.eq_ignore_ascii_case(SENTINEL_NAME))?;
    let id = bytes
        .get(at + SENTINEL_NAME.len()..)?
        .get(..SENTINEL_ID_LEN)?;
    Some(id.to_ascii_lowercase())
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack
        .windows(needle.len())
        .any(|w| w.eq_ignore_ascii_case(needle))
}
