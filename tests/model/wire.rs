//! How child processes report events: one line per event over a local TCP
//! socket; the parent stamps the event when the line arrives and only then
//! answers `k`. The child waits for that answer before it goes on, so the
//! parent's stamp of a `Call` or `Exit` precedes the real call or release,
//! and the stamp of an `Enter` follows the real acquire.

use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use crate::history::{Event, History};
use crate::targets::Kind;

/// How long a child waits for an ack before it gives up: the parent is gone.
const ACK_TIMEOUT: Duration = Duration::from_secs(20);

/// Tabs and line breaks would break the line format.
fn clean(text: &str) -> String {
    text.replace(['\t', '\n', '\r'], " ")
}

/// One event as a line (without the line break).
pub(crate) fn encode(event: &Event) -> String {
    let fields: Vec<String> = match event {
        Event::Actor { actor, label } => vec!["actor".into(), actor.to_string(), clean(label)],
        Event::Call {
            actor,
            op,
            client,
            kind,
            names,
            method,
            lease_ms,
            wait_ms,
            reentrant,
        } => vec![
            "call".into(),
            actor.to_string(),
            op.to_string(),
            clean(client),
            kind.as_str().into(),
            clean(names),
            clean(method),
            lease_ms.to_string(),
            wait_ms.to_string(),
            u8::from(*reentrant).to_string(),
        ],
        Event::Enter {
            actor,
            op,
            hold,
            token,
        } => vec![
            "enter".into(),
            actor.to_string(),
            op.to_string(),
            hold.to_string(),
            token.to_string(),
        ],
        Event::Miss { actor, op, outcome } => vec![
            "miss".into(),
            actor.to_string(),
            op.to_string(),
            clean(outcome),
        ],
        Event::Exit {
            actor,
            hold,
            how,
            held,
        } => vec![
            "exit".into(),
            actor.to_string(),
            hold.to_string(),
            clean(how),
            u8::from(*held).to_string(),
        ],
        Event::Released {
            actor,
            hold,
            result,
        } => vec![
            "released".into(),
            actor.to_string(),
            hold.to_string(),
            clean(result),
        ],
        Event::HeldFalse { actor, hold } => {
            vec!["heldfalse".into(), actor.to_string(), hold.to_string()]
        }
        Event::Flag { actor, text } => vec!["flag".into(), actor.to_string(), clean(text)],
        Event::Probe { actor } => vec!["probe".into(), actor.to_string()],
        Event::Count {
            actor,
            client,
            kind,
            name,
            what,
            observed,
        } => vec![
            "count".into(),
            actor.to_string(),
            clean(client),
            kind.as_str().into(),
            clean(name),
            clean(what),
            observed.to_string(),
        ],
        Event::Lost { client, name } => vec!["lost".into(), clean(client), clean(name)],
        Event::ForceStart { actor, kind, names } => vec![
            "forcestart".into(),
            actor.to_string(),
            kind.as_str().into(),
            clean(names),
        ],
        Event::ForceEnd { actor, result } => {
            vec!["forceend".into(), actor.to_string(), clean(result)]
        }
        Event::ClientDown { client } => vec!["down".into(), clean(client)],
        Event::ClientUp { client, ids } => vec!["up".into(), clean(client), clean(ids)],
        Event::ClientGone { client } => vec!["gone".into(), clean(client)],
        Event::Remains {
            client,
            server,
            name,
            tids,
        } => vec![
            "remains".into(),
            clean(client),
            server.to_string(),
            clean(name),
            clean(tids),
        ],
        Event::Tid { actor, tid } => vec!["tid".into(), actor.to_string(), tid.to_string()],
        Event::HeldBack {
            actor,
            client,
            name,
            for_ms,
        } => vec![
            "heldback".into(),
            actor.to_string(),
            clean(client),
            clean(name),
            for_ms.to_string(),
        ],
        Event::FaultStart { server, kind } => {
            vec!["faultstart".into(), server.to_string(), clean(kind)]
        }
        Event::FaultEnd { server, kind } => {
            vec!["faultend".into(), server.to_string(), clean(kind)]
        }
        Event::Done { actor, ops } => vec!["done".into(), actor.to_string(), ops.to_string()],
        Event::Note { text } => vec!["note".into(), clean(text)],
    };
    fields.join("\t")
}

/// Reads the fields of one line in order.
struct Fields<'a>(std::str::Split<'a, char>);

impl Fields<'_> {
    fn text(&mut self) -> Option<String> {
        self.0.next().map(str::to_owned)
    }
    fn num<T: std::str::FromStr>(&mut self) -> Option<T> {
        self.0.next()?.parse().ok()
    }
    fn kind(&mut self) -> Option<Kind> {
        Kind::parse(self.0.next()?)
    }
    fn flag(&mut self) -> Option<bool> {
        Some(self.0.next()? == "1")
    }
}

/// The event a line stands for, `None` when it is malformed.
pub(crate) fn decode(line: &str) -> Option<Event> {
    let mut f = Fields(line.split('\t'));
    let tag = f.text()?;
    Some(match tag.as_str() {
        "actor" => Event::Actor {
            actor: f.num()?,
            label: f.text()?,
        },
        "call" => Event::Call {
            actor: f.num()?,
            op: f.num()?,
            client: f.text()?,
            kind: f.kind()?,
            names: f.text()?,
            method: f.text()?,
            lease_ms: f.num()?,
            wait_ms: f.num()?,
            reentrant: f.flag()?,
        },
        "enter" => Event::Enter {
            actor: f.num()?,
            op: f.num()?,
            hold: f.num()?,
            token: f.num()?,
        },
        "miss" => Event::Miss {
            actor: f.num()?,
            op: f.num()?,
            outcome: f.text()?,
        },
        "exit" => Event::Exit {
            actor: f.num()?,
            hold: f.num()?,
            how: f.text()?,
            held: f.flag()?,
        },
        "released" => Event::Released {
            actor: f.num()?,
            hold: f.num()?,
            result: f.text()?,
        },
        "heldfalse" => Event::HeldFalse {
            actor: f.num()?,
            hold: f.num()?,
        },
        "flag" => Event::Flag {
            actor: f.num()?,
            text: f.text()?,
        },
        "probe" => Event::Probe { actor: f.num()? },
        "count" => Event::Count {
            actor: f.num()?,
            client: f.text()?,
            kind: f.kind()?,
            name: f.text()?,
            what: f.text()?,
            observed: f.num()?,
        },
        "lost" => Event::Lost {
            client: f.text()?,
            name: f.text()?,
        },
        "forcestart" => Event::ForceStart {
            actor: f.num()?,
            kind: f.kind()?,
            names: f.text()?,
        },
        "forceend" => Event::ForceEnd {
            actor: f.num()?,
            result: f.text()?,
        },
        "down" => Event::ClientDown { client: f.text()? },
        "up" => Event::ClientUp {
            client: f.text()?,
            ids: f.text()?,
        },
        "gone" => Event::ClientGone { client: f.text()? },
        "remains" => Event::Remains {
            client: f.text()?,
            server: f.num()?,
            name: f.text()?,
            tids: f.text()?,
        },
        "tid" => Event::Tid {
            actor: f.num()?,
            tid: f.num()?,
        },
        "heldback" => Event::HeldBack {
            actor: f.num()?,
            client: f.text()?,
            name: f.text()?,
            for_ms: f.num()?,
        },
        "faultstart" => Event::FaultStart {
            server: f.num()?,
            kind: f.text()?,
        },
        "faultend" => Event::FaultEnd {
            server: f.num()?,
            kind: f.text()?,
        },
        "done" => Event::Done {
            actor: f.num()?,
            ops: f.num()?,
        },
        "note" => Event::Note { text: f.text()? },
        _ => return None,
    })
}

/// The parent's end: accepts children's connections and records what they
/// send into the history.
#[derive(Debug)]
pub(crate) struct Collector {
    /// Where children connect.
    pub(crate) addr: SocketAddr,
    stop: Arc<AtomicBool>,
    accept: Option<JoinHandle<()>>,
    readers: Arc<Mutex<Vec<JoinHandle<()>>>>,
}

impl Collector {
    /// Listens on a free local port.
    ///
    /// # Panics
    ///
    /// If no port can be bound.
    pub(crate) fn start(history: Arc<History>) -> Collector {
        let listener = TcpListener::bind("127.0.0.1:0").expect("collector: bind");
        let addr = listener.local_addr().expect("collector: local address");
        listener
            .set_nonblocking(true)
            .expect("collector: non-blocking accept");
        let stop = Arc::new(AtomicBool::new(false));
        let readers = Arc::new(Mutex::new(Vec::new()));
        let accept = {
            let stop = Arc::clone(&stop);
            let readers = Arc::clone(&readers);
            thread::Builder::new()
                .name("model-collector".into())
                .spawn(move || {
                    // Polls, so that it notices `stop` without a connection.
                    while !stop.load(Ordering::SeqCst) {
                        match listener.accept() {
                            Ok((stream, _)) => {
                                let history = Arc::clone(&history);
                                let reader = thread::Builder::new()
                                    .name("model-collector-conn".into())
                                    .spawn(move || serve(stream, &history))
                                    .expect("collector: spawn a reader");
                                readers.lock().push(reader);
                            }
                            Err(_) => thread::sleep(Duration::from_millis(5)),
                        }
                    }
                })
                .expect("collector: spawn")
        };
        Collector {
            addr,
            stop,
            accept: Some(accept),
            readers,
        }
    }

    /// Stops accepting and waits (at most `limit`) for the connections to
    /// end, which they do when the children exit.
    pub(crate) fn finish(mut self, limit: Duration) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(accept) = self.accept.take() {
            let _ = accept.join();
        }
        let deadline = Instant::now() + limit;
        let readers = std::mem::take(&mut *self.readers.lock());
        for reader in readers {
            while !reader.is_finished() && Instant::now() < deadline {
                thread::sleep(Duration::from_millis(10));
            }
            if reader.is_finished() {
                let _ = reader.join();
            }
        }
    }
}

/// Records every line of one connection and acks it.
fn serve(stream: TcpStream, history: &History) {
    let _ = stream.set_nodelay(true);
    let Ok(mut writer) = stream.try_clone() else {
        return;
    };
    for line in BufReader::new(stream).lines() {
        let Ok(line) = line else { break };
        let event = decode(&line).unwrap_or_else(|| Event::Note {
            text: format!("malformed line from a child: {line:?}"),
        });
        history.record(event);
        if writer.write_all(b"k\n").is_err() {
            break;
        }
    }
}

/// A child's connection to the parent's [`Collector`].
#[derive(Debug)]
pub(crate) struct Link {
    addr: SocketAddr,
    io: Mutex<(TcpStream, BufReader<TcpStream>)>,
}

impl Link {
    /// Connects to the collector at `addr`.
    ///
    /// # Panics
    ///
    /// If the parent cannot be reached.
    pub(crate) fn connect(addr: SocketAddr) -> Link {
        let stream = TcpStream::connect_timeout(&addr, ACK_TIMEOUT)
            .unwrap_or_else(|e| panic!("child: cannot reach the parent at {addr}: {e}"));
        let _ = stream.set_nodelay(true);
        stream
            .set_read_timeout(Some(ACK_TIMEOUT))
            .expect("child: read timeout");
        let reader = BufReader::new(stream.try_clone().expect("child: clone the socket"));
        Link {
            addr,
            io: Mutex::new((stream, reader)),
        }
    }

    /// A new connection to the same parent.
    pub(crate) fn reconnect(&self) -> Link {
        Link::connect(self.addr)
    }

    /// Sends `event` and waits for the parent's ack. Without a parent the
    /// child has no purpose left: it exits.
    pub(crate) fn send(&self, event: &Event) {
        let mut io = self.io.lock();
        let mut line = encode(event);
        line.push('\n');
        let mut ack = String::new();
        let ok = io.0.write_all(line.as_bytes()).is_ok()
            && io.1.read_line(&mut ack).is_ok_and(|n| n > 0);
        if !ok {
            eprintln!("model child: the parent stopped answering; exiting");
            std::process::exit(3);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_event_survives_the_wire() {
        let events = vec![
            Event::Actor {
                actor: 3,
                label: "p1.c0.t2".into(),
            },
            Event::Call {
                actor: 3,
                op: 77,
                client: "p1.c0#0".into(),
                kind: Kind::Multi,
                names: "p0+p2".into(),
                method: "try_lock_for_with_lease(0ms, 200ms)".into(),
                lease_ms: 200,
                wait_ms: -1,
                reentrant: true,
            },
            Event::Enter {
                actor: 3,
                op: 77,
                hold: 9,
                token: 4,
            },
            Event::Exit {
                actor: 3,
                hold: 9,
                how: "unlock".into(),
                held: false,
            },
            Event::Count {
                actor: 3,
                client: "c".into(),
                kind: Kind::Read,
                name: "w0".into(),
                what: "hold_count".into(),
                observed: 2,
            },
            Event::FaultEnd {
                server: 2,
                kind: "sleep-300".into(),
            },
            Event::Note {
                text: "a\tb\nc".into(),
            },
        ];
        for event in events {
            let back = decode(&encode(&event)).expect("decodes");
            match (&event, &back) {
                (Event::Note { .. }, Event::Note { text }) => assert_eq!(text, "a b c"),
                _ => assert_eq!(back, event),
            }
        }
        assert_eq!(decode("nonsense\t1"), None);
    }
}
