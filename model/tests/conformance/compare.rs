//! Holding the server to the model after a step: the reply, every key and
//! what was heard. Clock values (TTLs, fair deadlines and what scripts
//! compute from them) may be smaller on the server by the time the step
//! took, up to [`SLACK`] ms; everything else must be equal.

use super::real::{Dumped, Got};
use redhold_model::keyspace::{Keyspace, Value};
use redhold_model::reply::{Publication, Reply};

/// How much smaller a clock value may be on the server: far more than a
/// step takes, far less than the walk's time unit (10 s), so that a wrong
/// TTL in the model still shows.
pub(crate) const SLACK: i64 = 2_000;

fn close(model: i64, real: i64) -> bool {
    if model < 0 {
        return model == real;
    }
    // +2: a script that copies a TTL it read (read_release.lua) may set it
    // a millisecond after reading it.
    model - SLACK <= real && real <= model + 2
}

/// Whether the server's reply is the model's.
pub(crate) fn reply(model: &Reply, real: &Got) -> bool {
    match (model, real) {
        (Reply::Nil, Got::Nil) => true,
        (Reply::Int(a), Got::Int(b)) => a == b,
        (Reply::Ttl(a), Got::Int(b)) => close(*a, *b),
        (Reply::Text(a), Got::Text(b)) => a == b,
        (Reply::Score(a), Got::Text(b)) => b.parse().is_ok_and(|b| close(*a, b)),
        (Reply::Array(a), Got::Array(b)) => {
            if is_scored(a) {
                // Members with equal scores may sort either way when the
                // server's scores moved by the step's time: compare by member.
                let mut a: Vec<_> = a.chunks(2).collect();
                let mut b: Vec<_> = b.chunks(2).collect();
                a.sort_by_key(|p| format!("{:?}", p[0]));
                b.sort_by_key(|p| format!("{:?}", p[0]));
                return a.len() == b.len()
                    && a.iter()
                        .zip(&b)
                        .all(|(x, y)| x.iter().zip(y.iter()).all(|(m, r)| reply(m, r)));
            }
            a.len() == b.len() && a.iter().zip(b).all(|(m, r)| reply(m, r))
        }
        (Reply::Error(text), Got::Error(code, detail)) => *text == format!("{code} {detail}"),
        (Reply::Raised(a), Got::Error(code, _)) => a == code,
        _ => false,
    }
}

fn is_scored(items: &[Reply]) -> bool {
    !items.is_empty() && matches!(items.get(1), Some(Reply::Score(_)))
}

/// The model's keyspace as the server's dump spells it.
pub(crate) fn dump(ks: &Keyspace) -> Vec<Dumped> {
    let mut out: Vec<Dumped> = ks
        .keys
        .iter()
        .map(|(key, entry)| {
            let values = match &entry.value {
                Value::Str(s) => vec![s.to_string()],
                Value::Hash(fields) => fields
                    .iter()
                    .flat_map(|(f, v)| [f.to_string(), v.to_string()])
                    .collect(),
                Value::List(items) => items.iter().map(|f| f.to_string()).collect(),
                Value::ZSet(items) => items
                    .iter()
                    .flat_map(|(m, s)| [m.to_string(), s.to_string()])
                    .collect(),
            };
            let ttl = ks.pttl(*key);
            (
                key.to_string(),
                entry.value.type_name().to_owned(),
                ttl,
                values,
            )
        })
        .collect();
    out.sort();
    out
}

/// The first difference between the model's keyspace and the server's.
pub(crate) fn keyspace(model: &[Dumped], real: &[Dumped]) -> Option<String> {
    let names = |d: &[Dumped]| d.iter().map(|k| k.0.clone()).collect::<Vec<_>>();
    if names(model) != names(real) {
        return Some(format!(
            "keys differ:\n  model {:?}\n  redis {:?}",
            names(model),
            names(real)
        ));
    }
    for (m, r) in model.iter().zip(real) {
        let values_match = if m.1 == "zset" && r.1 == "zset" {
            let pairs = |v: &[String]| {
                let mut p: Vec<(String, i64)> = v
                    .chunks(2)
                    .map(|c| (c[0].clone(), c[1].parse().expect("a score")))
                    .collect();
                p.sort();
                p
            };
            let (a, b) = (pairs(&m.3), pairs(&r.3));
            a.len() == b.len() && a.iter().zip(&b).all(|(x, y)| x.0 == y.0 && close(x.1, y.1))
        } else {
            m.3 == r.3
        };
        if m.1 != r.1 || !close(m.2, r.2) || !values_match {
            return Some(format!(
                "key {} differs:\n  model {m:?}\n  redis {r:?}",
                m.0
            ));
        }
    }
    None
}

/// What a classic listener hears of the model's publications.
pub(crate) fn heard(published: &[Publication]) -> Vec<(String, String)> {
    published
        .iter()
        .filter(|p| !p.sharded)
        .map(|p| (p.channel.to_string(), p.message.to_string()))
        .collect()
}
