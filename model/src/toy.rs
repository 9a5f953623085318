//! The toy model: clients taking and releasing one plain lock through the
//! modelled `acquire.lua` and `release.lua`, where a release's reply may be
//! lost (within a budget) and the client then retries it with the same
//! request id. The first exhaustive check of the scripts, and the yardstick
//! for the search's speed.
//!
//! Each client has one request in flight at most, and its request id is
//! its own number: once a release is answered, its latch can never be read
//! again, so the model deletes it then (the real latch lives on until its
//! TTL, read by nobody) and the id is free for the client's next release.
//! Time does not move: leases outlive every run.

use crate::call::{Attempt, Call, Publish};
use crate::keyspace::{Entry, HashValue, Keyspace, Value};
use crate::names::{Field, Holder, Key, Name, Request};
use crate::reply::Reply;
use crate::scripts::{self, Env, Mutation};
use crate::search::{Model, Property};

const LOCK: Name = Name(0);
const LEASE: i64 = 30_000;
const LATCH_TTL: i64 = 60_000;

/// The toy's bounds.
#[derive(Clone, Copy, Debug)]
pub struct Toy {
    /// How many clients (one thread each).
    pub clients: u8,
    /// How many holds a client takes at most (re-entries).
    pub max_holds: i64,
    /// How many replies may be lost in a run.
    pub lost_replies: u8,
    /// A deliberate fault in the model's scripts.
    pub mutation: Option<Mutation>,
    /// Whether states that differ only by which client is which are
    /// explored once.
    pub symmetry: bool,
}

/// A whole state: Redis, each client, the faults left.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct State {
    /// The server's keyspace.
    pub redis: Keyspace,
    /// Each client, by number.
    pub clients: Vec<Client>,
    /// Replies that may still be lost.
    pub faults_left: u8,
}

/// One client: the holds it believes it has, and its request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Client {
    /// Holds its guards stand for.
    pub holds: i64,
    /// What it is doing.
    pub op: Op,
}

/// A client's request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Op {
    /// None.
    Idle,
    /// An acquire.
    Acquiring(Net),
    /// A release, sent as this attempt.
    Releasing(Attempt, Net),
}

/// Where a request is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Net {
    /// On its way to the server.
    Sent,
    /// Served; its reply is on its way back.
    Replied(Answer),
    /// Served; its reply was lost (the client will retry).
    Lost,
}

/// What a reply tells the client.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Answer {
    /// Acquired: this many holds now.
    Took(i64),
    /// Held by another.
    Busy,
    /// One hold released.
    Released,
    /// The hold was lost (release: nil or 3; re-entry: `{2, 0}`).
    Gone,
}

/// One atomic step, of one client (its number) or of the network.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Action {
    /// The client sends an acquire (a new hold or a re-entry).
    Acquire(u8),
    /// The client sends a release of one hold.
    Release(u8),
    /// The server runs the client's request.
    Serve(u8),
    /// The reply reaches the client.
    Deliver(u8),
    /// The reply to a release is lost (a fault).
    LoseReply(u8),
    /// The client sends its release again, as a retry.
    Retry(u8),
}

fn field(client: u8) -> Field {
    Field::Reader(Holder { client, thread: 0 })
}

impl Toy {
    fn serve(&self, redis: &mut Keyspace, c: u8, client: Client) -> Option<Answer> {
        let call = match client.op {
            Op::Acquiring(Net::Sent) => Call::Acquire {
                name: LOCK,
                field: field(c),
                lease: LEASE,
                reentry_only: client.holds > 0,
            },
            Op::Releasing(attempt, Net::Sent) => Call::Release {
                name: LOCK,
                field: field(c),
                latch: Request(u16::from(c)),
                latch_ttl: LATCH_TTL,
                publish: Publish::Classic,
                attempt,
                successor: None,
            },
            _ => return None,
        };
        let env = Env {
            mutation: self.mutation,
            ..Env::default()
        };
        let reply = scripts::run(redis, &call, env).reply;
        Some(match reply {
            Reply::Array(items) => match items[..] {
                [Reply::Int(1), Reply::Int(n)] if matches!(call, Call::Acquire { .. }) => {
                    Answer::Took(n)
                }
                [Reply::Int(1), _] => Answer::Released,
                [Reply::Int(0), _] => Answer::Busy,
                _ => Answer::Gone,
            },
            Reply::Int(0) => Answer::Released,
            _ => Answer::Gone,
        })
    }
}

impl Model for Toy {
    type State = State;
    type Action = Action;

    fn init(&self) -> Vec<State> {
        let idle = Client {
            holds: 0,
            op: Op::Idle,
        };
        vec![State {
            redis: Keyspace::new(),
            clients: vec![idle; usize::from(self.clients)],
            faults_left: self.lost_replies,
        }]
    }

    fn actions(&self, state: &State, out: &mut Vec<Action>) {
        for (c, client) in state.clients.iter().enumerate() {
            let c = c as u8;
            match client.op {
                Op::Idle => {
                    if client.holds < self.max_holds {
                        out.push(Action::Acquire(c));
                    }
                    if client.holds > 0 {
                        out.push(Action::Release(c));
                    }
                }
                Op::Acquiring(Net::Sent) | Op::Releasing(_, Net::Sent) => {
                    out.push(Action::Serve(c))
                }
                Op::Acquiring(Net::Replied(_)) => out.push(Action::Deliver(c)),
                Op::Releasing(_, Net::Replied(_)) => {
                    out.push(Action::Deliver(c));
                    if state.faults_left > 0 {
                        out.push(Action::LoseReply(c));
                    }
                }
                Op::Releasing(_, Net::Lost) => out.push(Action::Retry(c)),
                Op::Acquiring(Net::Lost) => {}
            }
        }
    }

    fn step(&self, state: &State, action: &Action) -> Option<State> {
        let mut next = state.clone();
        let (Action::Acquire(c)
        | Action::Release(c)
        | Action::Serve(c)
        | Action::Deliver(c)
        | Action::LoseReply(c)
        | Action::Retry(c)) = *action;
        let client = &mut next.clients[usize::from(c)];
        match (*action, client.op) {
            (Action::Acquire(_), Op::Idle) => client.op = Op::Acquiring(Net::Sent),
            (Action::Release(_), Op::Idle) => client.op = Op::Releasing(Attempt::First, Net::Sent),
            (Action::Serve(_), _) => {
                let answer = self.serve(&mut next.redis, c, *client)?;
                let client = &mut next.clients[usize::from(c)];
                client.op = match client.op {
                    Op::Releasing(a, _) => Op::Releasing(a, Net::Replied(answer)),
                    _ => Op::Acquiring(Net::Replied(answer)),
                };
            }
            (
                Action::Deliver(_),
                Op::Acquiring(Net::Replied(answer)) | Op::Releasing(_, Net::Replied(answer)),
            ) => {
                match answer {
                    Answer::Took(n) => client.holds = n,
                    Answer::Busy => {}
                    Answer::Released => client.holds -= 1,
                    Answer::Gone => client.holds = 0,
                }
                if matches!(client.op, Op::Releasing(..)) {
                    // Answered: nothing reads this request's latch again.
                    next.redis.del(Key::Latch(LOCK, Request(u16::from(c))));
                }
                next.clients[usize::from(c)].op = Op::Idle;
            }
            (Action::LoseReply(_), Op::Releasing(a, Net::Replied(_))) => {
                client.op = Op::Releasing(a, Net::Lost);
                next.faults_left -= 1;
            }
            (Action::Retry(_), Op::Releasing(_, Net::Lost)) => {
                client.op = Op::Releasing(Attempt::Retry, Net::Sent)
            }
            _ => return None,
        }
        Some(next)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        vec![
            Property {
                name: "mutual exclusion",
                holds: |_, s| s.clients.iter().filter(|c| in_critical_section(c)).count() <= 1,
            },
            Property {
                name: "no lock without a TTL",
                holds: |_, s| {
                    s.redis
                        .keys
                        .iter()
                        .all(|(k, e)| !matches!(k, Key::Name(_)) || e.expires_at.is_some())
                },
            },
        ]
    }

    fn canonical(&self, state: &State) -> State {
        if !self.symmetry {
            return state.clone();
        }
        // Clients sorted by what they do; Redis renamed to match.
        let mut order: Vec<usize> = (0..state.clients.len()).collect();
        order.sort_by_key(|&c| state.clients[c]);
        let mut rank = vec![0u8; order.len()];
        for (new, &old) in order.iter().enumerate() {
            rank[old] = new as u8;
        }
        State {
            redis: renamed(&state.redis, &rank),
            clients: order.iter().map(|&c| state.clients[c]).collect(),
            faults_left: state.faults_left,
        }
    }
}

/// Whether a client holds the lock beyond the hold it is releasing.
fn in_critical_section(client: &Client) -> bool {
    let releasing = i64::from(matches!(client.op, Op::Releasing(..)));
    client.holds - releasing > 0
}

/// `redis` with client `c`'s field and request id renamed `rank[c]`.
fn renamed(redis: &Keyspace, rank: &[u8]) -> Keyspace {
    let field = |f: Field| match f {
        Field::Reader(h) => Field::Reader(Holder {
            client: rank[usize::from(h.client)],
            ..h
        }),
        other => other,
    };
    let mut out = Keyspace {
        now: redis.now,
        ..Keyspace::default()
    };
    for (key, entry) in &redis.keys {
        let key = match *key {
            Key::Latch(n, Request(r)) => Key::Latch(n, Request(u16::from(rank[usize::from(r)]))),
            other => other,
        };
        let value = match &entry.value {
            Value::Hash(fields) => {
                let mut fields: Vec<(Field, HashValue)> =
                    fields.iter().map(|&(f, v)| (field(f), v)).collect();
                // One holder at a time: the order of fields never matters here.
                fields.sort();
                Value::Hash(fields)
            }
            other => other.clone(),
        };
        out.keys.insert(
            key,
            Entry {
                value,
                expires_at: entry.expires_at,
            },
        );
    }
    out
}
