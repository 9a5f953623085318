//! The real server's side of a walk: each call runs the file's own text
//! (EVALSHA, loaded on NOSCRIPT), the keyspace is read whole in one script,
//! TTLs are set to the model's before each step, and a listener hears
//! every classic message.

use super::files;
use redhold_model::call::Call;
use redhold_model::scripts::Script;
use redhold_model::wire;
use std::collections::HashMap;
use std::sync::mpsc::{channel, Receiver};
use std::time::Duration;

/// A reply as the server sent it.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Got {
    Nil,
    Int(i64),
    Text(String),
    Array(Vec<Got>),
    /// An error: its code and the rest.
    Error(String, String),
}

/// One key as the server holds it: name, type, PTTL and its value as the
/// strings `GET`, `HGETALL`, `LRANGE` or `ZRANGE WITHSCORES` give.
pub(crate) type Dumped = (String, String, i64, Vec<String>);

/// Reads every key in one step, so that no time passes between them; then
/// sets the TTLs as [`SNAP`] does (the model's after the step, for the next
/// one) and publishes the marker the listener reads up to.
const CHECK: &str = "local out = {}
for _, k in ipairs(redis.call('keys', '*')) do
  local t = redis.call('type', k)['ok']
  local v = {}
  if t == 'string' then v = {redis.call('get', k)}
  elseif t == 'hash' then v = redis.call('hgetall', k)
  elseif t == 'list' then v = redis.call('lrange', k, 0, -1)
  elseif t == 'zset' then v = redis.call('zrange', k, 0, -1, 'withscores') end
  out[#out + 1] = {k, t, redis.call('pttl', k), v}
end
local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
for i, k in ipairs(KEYS) do redis.call('pexpireat', k, now + tonumber(ARGV[i + 1])) end
redis.call('publish', ARGV[1], '')
return out";

/// Sets KEYS[i] to expire ARGV[i + 1] ms from now for the first ARGV[1]
/// keys, all from one reading of the clock, and deletes the rest: the
/// model's TTLs, exactly, after a tick. (The server's own clock moves too,
/// but only by the few ms a step takes.)
const SNAP: &str = "local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local n = tonumber(ARGV[1])
for i, k in ipairs(KEYS) do
  if i <= n then redis.call('pexpireat', k, now + tonumber(ARGV[i + 1]))
  else redis.call('del', k) end
end
return 0";

/// The marker a step's listener reads up to.
const MARKER: &str = "conformance:end-of-step";

/// A connection to the server, and its listener.
pub(crate) struct Real {
    con: redis::Connection,
    scripts: HashMap<Script, redis::Script>,
    check: redis::Script,
    snap: redis::Script,
    heard: Receiver<(String, String)>,
}

impl Real {
    pub(crate) fn connect(url: &str) -> Real {
        let client = redis::Client::open(url).expect("a client");
        let con = client.get_connection().expect("a connection");
        let (tx, heard) = channel();
        let (ready_tx, ready) = channel();
        let mut listener = client.get_connection().expect("the listener's connection");
        std::thread::Builder::new()
            .name("conformance-listener".into())
            .spawn(move || {
                let mut pubsub = listener.as_pubsub();
                pubsub.psubscribe("*").expect("PSUBSCRIBE *");
                let _ = ready_tx.send(());
                while let Ok(msg) = pubsub.get_message() {
                    let payload: String = msg.get_payload().unwrap_or_default();
                    if tx
                        .send((msg.get_channel_name().to_owned(), payload))
                        .is_err()
                    {
                        break;
                    }
                }
            })
            .expect("the listener thread");
        ready.recv().expect("the listener subscribed");
        let scripts = Script::ALL
            .iter()
            .map(|&s| (s, redis::Script::new(&files::as_run(files::text(s)))))
            .collect();
        Real {
            con,
            scripts,
            check: redis::Script::new(CHECK),
            snap: redis::Script::new(SNAP),
            heard,
        }
    }

    pub(crate) fn flush(&mut self) {
        redis::cmd("FLUSHALL")
            .exec(&mut self.con)
            .expect("FLUSHALL");
    }

    /// Runs a user's command (a poke of the walk).
    pub(crate) fn command(&mut self, args: &[String]) {
        let mut cmd = redis::cmd(&args[0]);
        for arg in &args[1..] {
            cmd.arg(arg);
        }
        cmd.exec(&mut self.con)
            .unwrap_or_else(|e| panic!("{args:?}: {e}"));
    }

    /// Sets every key of `ttls` to its TTL and deletes `gone`.
    pub(crate) fn snap(&mut self, ttls: &[(String, i64)], gone: &[String]) {
        let mut invocation = self.snap.prepare_invoke();
        invocation.arg(ttls.len());
        for (key, ttl) in ttls {
            invocation.key(key).arg(ttl);
        }
        for key in gone {
            invocation.key(key);
        }
        invocation
            .invoke::<i64>(&mut self.con)
            .expect("the snap script");
    }

    /// Runs `call`'s file on the server.
    pub(crate) fn run(&mut self, call: &Call) -> Got {
        let (keys, args) = wire::keys_and_args(call);
        let mut invocation = self.scripts[&Script::of(call)].prepare_invoke();
        for key in &keys {
            invocation.key(key);
        }
        for arg in &args {
            invocation.arg(arg);
        }
        match invocation.invoke::<redis::Value>(&mut self.con) {
            Ok(value) => got(value),
            Err(e) => Got::Error(
                e.code().unwrap_or("?").to_owned(),
                e.detail().unwrap_or("").to_owned(),
            ),
        }
    }

    /// Every key, sorted by name, and what the listener heard since the
    /// last check, in order; then every key of `ttls` gets its TTL, for
    /// the next step.
    pub(crate) fn check(&mut self, ttls: &[(String, i64)]) -> (Vec<Dumped>, Vec<(String, String)>) {
        let mut invocation = self.check.prepare_invoke();
        invocation.arg(MARKER);
        for (key, ttl) in ttls {
            invocation.key(key).arg(ttl);
        }
        let mut keys: Vec<Dumped> = invocation.invoke(&mut self.con).expect("the check script");
        keys.sort();
        (keys, self.heard())
    }

    /// What the listener heard up to the marker, in order.
    fn heard(&mut self) -> Vec<(String, String)> {
        let mut heard = Vec::new();
        loop {
            let (channel, message) = self
                .heard
                .recv_timeout(Duration::from_secs(10))
                .expect("the listener hears the marker");
            if channel == MARKER {
                return heard;
            }
            heard.push((channel, message));
        }
    }
}

fn got(value: redis::Value) -> Got {
    match value {
        redis::Value::Nil => Got::Nil,
        redis::Value::Int(n) => Got::Int(n),
        redis::Value::BulkString(bytes) => Got::Text(String::from_utf8_lossy(&bytes).into_owned()),
        redis::Value::SimpleString(s) => Got::Text(s),
        redis::Value::Okay => Got::Text("OK".into()),
        redis::Value::Array(items) => Got::Array(items.into_iter().map(got).collect()),
        redis::Value::ServerError(e) => {
            Got::Error(e.code().to_owned(), e.details().unwrap_or("").to_owned())
        }
        other => panic!("a reply no script sends: {other:?}"),
    }
}
