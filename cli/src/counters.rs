//! Semaphores and count-down latches: `show` of a name that holds one, and
//! `list --counters`. Redis keeps both as a number, so the tool cannot say
//! which of the two a plain number is; a permit-expirable semaphore shows
//! its permits out with their lease ends.
//!
//! JSON object: `{"name", "kind": "semaphore or latch" | "expirable
//! semaphore", "value", "permits_out": [{"id", "lease_ends_ms",
//! "lease_left_ms"}]}`, `null` lease fields for a permit without a lease.

use std::time::UNIX_EPOCH;

use redhold::inspect::{CounterInfo, PermitOut};
use serde::Serialize;

use crate::escape;
use crate::text::{columns, duration};

/// What the layout says the name holds, in words.
fn kind(info: &CounterInfo) -> &'static str {
    if info.is_expirable_semaphore() {
        "expirable semaphore"
    } else {
        "semaphore or latch"
    }
}

/// `show`: one `key: value` line per property, permits out indented.
pub(crate) fn show(info: &CounterInfo) -> String {
    let mut lines = vec![
        format!("name:        {}", escape::name(&info.name)),
        format!("kind:        {}", kind(info)),
    ];
    if info.is_expirable_semaphore() {
        lines.push(format!("available:   {}", info.value));
        lines.push(format!("permits out: {}", info.permits_out.len()));
        for permit in &info.permits_out {
            lines.push(format!("  {}  {}", permit.id, lease(permit)));
        }
    } else {
        // A semaphore's permits available, or a latch's count.
        lines.push(format!("value:       {}", info.value));
    }
    lines.join("\n")
}

/// A permit's lease in words.
fn lease(permit: &PermitOut) -> String {
    match permit.lease_left() {
        None => "no lease".to_owned(),
        Some(left) if left.is_zero() => "lease ended: given back at the next change".to_owned(),
        Some(left) => format!("lease ends in {}", duration(left)),
    }
}

/// `list --counters`: a table with a header.
pub(crate) fn table(counters: &[CounterInfo]) -> String {
    let mut rows = vec![[
        "NAME".to_owned(),
        "KIND".to_owned(),
        "VALUE".to_owned(),
        "OUT".to_owned(),
        "NEXT LEASE END".to_owned(),
    ]];
    for info in counters {
        let next = info
            .permits_out
            .first()
            .and_then(PermitOut::lease_left)
            .map_or("-".to_owned(), duration);
        rows.push([
            escape::name(&info.name),
            kind(info).to_owned(),
            info.value.to_string(),
            info.permits_out.len().to_string(),
            next,
        ]);
    }
    columns(&rows)
}

/// One counter, as the JSON object described above.
#[derive(Debug, Serialize)]
struct CounterJson<'a> {
    name: &'a str,
    kind: &'a str,
    value: i64,
    permits_out: Vec<PermitJson>,
}

/// One permit out.
#[derive(Debug, Serialize)]
struct PermitJson {
    id: String,
    lease_ends_ms: Option<u128>,
    lease_left_ms: Option<u128>,
}

fn document(info: &CounterInfo) -> CounterJson<'_> {
    CounterJson {
        name: &info.name,
        kind: kind(info),
        value: info.value,
        permits_out: info
            .permits_out
            .iter()
            .map(|p| PermitJson {
                id: p.id.clone(),
                lease_ends_ms: p
                    .lease_ends
                    .and_then(|end| end.duration_since(UNIX_EPOCH).ok())
                    .map(|d| d.as_millis()),
                lease_left_ms: p.lease_left().map(|d| d.as_millis()),
            })
            .collect(),
    }
}

/// `show --json` of a counter.
pub(crate) fn json(info: &CounterInfo) -> String {
    serde_json::to_string(&document(info)).expect("plain data always serializes")
}

/// `list --counters --json`: one array.
pub(crate) fn json_array(counters: &[CounterInfo]) -> String {
    let all: Vec<CounterJson<'_>> = counters.iter().map(document).collect();
    serde_json::to_string_pretty(&all).expect("plain data always serializes")
}
