//! `inspect.lua` and `inspect_counter.lua`: reads that change nothing.

use super::{Exec, Exit};
use crate::call::Call;
use crate::keyspace::Value;
use crate::names::Key;
use crate::reply::Reply;

fn text(s: impl ToString) -> Reply {
    Reply::Text(s.to_string())
}

/// A sorted set as `ZRANGE ... WITHSCORES` sends it.
fn with_scores(x: &Exec<'_>, key: Key) -> Vec<Reply> {
    match x.ks.value(key) {
        Some(Value::ZSet(items)) => items
            .iter()
            .flat_map(|(m, s)| [text(m), Reply::Score(*s)])
            .collect(),
        _ => Vec::new(),
    }
}

/// Both inspect scripts.
pub(crate) fn run(x: &mut Exec<'_>, call: &Call) -> Exit {
    match *call {
        Call::Inspect { name } => {
            let lock = Key::Name(name);
            let fields = match x.ks.value(lock) {
                Some(Value::Hash(fields)) => fields
                    .iter()
                    .flat_map(|(f, v)| [text(f), text(v)])
                    .collect(),
                _ => Vec::new(),
            };
            let queue = match x.ks.value(Key::Queue(name)) {
                Some(Value::List(items)) => items.iter().map(text).collect(),
                _ => Vec::new(),
            };
            let token = match x.ks.value(Key::Token(name)) {
                Some(Value::Str(s)) => text(s),
                _ => Reply::Nil,
            };
            let reply = vec![
                text(x.ks.type_of(lock)),
                Reply::Array(fields),
                Reply::Ttl(x.ks.pttl(lock)),
                Reply::Array(queue),
                Reply::Array(with_scores(x, Key::Deadlines(name))),
                token,
            ];
            Ok((Reply::Array(reply), "read"))
        }
        Call::InspectCounter { name } => {
            let key = Key::Name(name);
            let value = match x.ks.value(key) {
                Some(Value::Str(s)) => text(s),
                _ => Reply::Nil,
            };
            let reply = vec![
                text(x.ks.type_of(key)),
                value,
                Reply::Array(with_scores(x, Key::Leases(name))),
            ];
            Ok((Reply::Array(reply), "read"))
        }
        _ => unreachable!("not an inspect call"),
    }
}
