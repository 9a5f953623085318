//! The human-readable output of `show`, `watch` and `list`.

use std::time::{Duration, SystemTime};

use redhold::inspect::{Kind, LockInfo};
use redhold::ClientIdentity;
use unicode_width::UnicodeWidthStr;

use crate::escape;

/// `show`: one `key: value` line per property, holders and waiters indented
/// below their count.
pub(crate) fn lock(info: &LockInfo) -> String {
    let mut lines = vec![
        format!("name:        {}", escape::name(&info.name)),
        format!("kind:        {}", info.kind),
        format!("locked:      {}", if info.locked { "yes" } else { "no" }),
        format!("mode:        {}", info.mode.map_or("-", |m| m.as_str())),
        format!("ttl:         {}", info.ttl.map_or("-".to_owned(), duration)),
        format!("holders:     {}", info.holders.len()),
    ];
    for holder in &info.holders {
        let holds = if holder.count == 1 { "hold" } else { "holds" };
        let side = match (info.kind, holder.write) {
            (Kind::ReadWrite, true) => " (write)",
            (Kind::ReadWrite, false) => " (read)",
            _ => "",
        };
        // An owner is not a thread: say so, the id stays the field.
        let id = if holder.owner {
            format!("{}, owner", holder.id())
        } else {
            holder.id()
        };
        lines.push(format!(
            "  {}  {} {holds}{side}",
            who(holder.identity.as_ref(), &id),
            holder.count
        ));
    }
    if info.kind == Kind::Fair {
        lines.push(format!("queue:       {}", info.queue.len()));
        let now = SystemTime::now();
        for (place, waiter) in info.queue.iter().enumerate() {
            let deadline = match waiter.deadline.map(|d| d.duration_since(now)) {
                Some(Ok(left)) => {
                    format!("  (dropped in {} unless it takes its turn)", duration(left))
                }
                Some(Err(_)) => "  (deadline passed: dropped at the next acquire)".to_owned(),
                None => String::new(),
            };
            let waiting = who(waiter.identity.as_ref(), &escape::name(&waiter.field));
            lines.push(format!("  {}. {waiting}{deadline}", place + 1));
        }
    }
    lines.push(format!("subscribers: {}", info.subscribers));
    if info.kind == Kind::Fenced {
        lines.push(format!(
            "token:       {}",
            info.token.map_or("-".to_owned(), |t| t.to_string())
        ));
    }
    lines.join("\n")
}

/// A holder or waiter: `name@host:pid (uuid:thread)` for a redhold client
/// whose identity is known, else the bare `uuid:thread` (Redisson clients).
/// `show` and the `force-unlock` question name them alike.
pub(crate) fn who(identity: Option<&ClientIdentity>, id: &str) -> String {
    match identity {
        Some(identity) => format!("{identity} ({id})"),
        None => id.to_owned(),
    }
}

/// `list`: a table with a header, columns as wide as their longest cell.
pub(crate) fn table(locks: &[LockInfo]) -> String {
    let mut rows = vec![[
        "NAME".to_owned(),
        "KIND".to_owned(),
        "MODE".to_owned(),
        "HOLDERS".to_owned(),
        "TTL".to_owned(),
        "WAITERS".to_owned(),
    ]];
    for info in locks {
        rows.push([
            escape::name(&info.name),
            info.kind.to_string(),
            info.mode.map_or("-", |m| m.as_str()).to_owned(),
            holders(info),
            info.ttl.map_or("-".to_owned(), duration),
            waiters(info).to_string(),
        ]);
    }
    columns(&rows)
}

/// Rows as columns as wide as their longest cell, two spaces apart.
pub(crate) fn columns<const N: usize>(rows: &[[String; N]]) -> String {
    let mut widths = [0usize; N];
    for row in rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.width());
        }
    }
    rows.iter()
        .map(|row| {
            let cells: Vec<String> = row
                .iter()
                .zip(widths)
                // Padded by display width: a wide character (CJK, emoji)
                // takes two columns, a combining mark none.
                .map(|(cell, width)| format!("{cell}{}", " ".repeat(width - cell.width())))
                .collect();
            cells.join("  ").trim_end().to_owned()
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The holders in short: how many, then the first two as
/// `<first 8 hex digits of the client id>:<thread>` (`:owner:<id>` for an
/// owner).
fn holders(info: &LockInfo) -> String {
    if info.holders.is_empty() {
        return "0".to_owned();
    }
    let mut shown: Vec<String> = info
        .holders
        .iter()
        .take(2)
        .map(|h| {
            let client = h.client.simple().to_string();
            let write = if h.write { "(w)" } else { "" };
            let named = h
                .identity
                .as_ref()
                .map_or_else(String::new, |identity| format!("{}@", identity.name));
            let holder = if h.owner { "owner:" } else { "" };
            format!("{named}{}:{holder}{}{write}", &client[..8], h.thread)
        })
        .collect();
    if info.holders.len() > 2 {
        shown.push(format!("+{}", info.holders.len() - 2));
    }
    format!("{} ({})", info.holders.len(), shown.join(", "))
}

/// A fair lock's queue length; for the other kinds, which keep no queue,
/// the connections listening for a release.
fn waiters(info: &LockInfo) -> u64 {
    match info.kind {
        Kind::Fair => info.queue.len() as u64,
        _ => info.subscribers,
    }
}

/// The kind in words, for sentences: `plain lock`, `fair lock`, ...
pub(crate) fn kind_words(kind: Kind) -> &'static str {
    match kind {
        Kind::Fair => "fair lock",
        Kind::ReadWrite => "read-write lock",
        Kind::Fenced => "fenced lock",
        _ => "plain lock",
    }
}

/// `850ms`, `29.8s`, `4m59s`, `2h03m`.
pub(crate) fn duration(d: Duration) -> String {
    let ms = d.as_millis();
    match ms {
        0..=999 => format!("{ms}ms"),
        1_000..=59_999 => format!("{}.{}s", ms / 1000, ms % 1000 / 100),
        60_000..=3_599_999 => format!("{}m{:02}s", ms / 60_000, ms % 60_000 / 1000),
        _ => format!("{}h{:02}m", ms / 3_600_000, ms % 3_600_000 / 60_000),
    }
}

#[cfg(test)]
mod tests {
    use super::duration;
    use std::time::Duration;

    #[test]
    fn durations_are_short() {
        assert_eq!(duration(Duration::from_millis(850)), "850ms");
        assert_eq!(duration(Duration::from_millis(29_870)), "29.8s");
        assert_eq!(duration(Duration::from_secs(299)), "4m59s");
        assert_eq!(duration(Duration::from_secs(7380)), "2h03m");
    }
}
