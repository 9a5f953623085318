//! `--json`: one object per lock, written by hand (a dozen fields need no
//! serde).

use std::fmt::Write;

use redhold::inspect::LockInfo;

/// The lock as one line of JSON:
///
/// `{"name":…,"locked":…,"kind":…,"mode":…,"ttl_ms":…,"holders":[{"client":…,"thread":…,"count":…,"write":…}],"queue":[…],"subscribers":…,"token":…}`
pub(crate) fn lock(info: &LockInfo) -> String {
    let mut out = String::from("{");
    field(&mut out, "name", &string(&info.name));
    field(&mut out, "locked", &info.locked.to_string());
    field(&mut out, "kind", &string(info.kind.as_str()));
    field(
        &mut out,
        "mode",
        &info.mode.map_or("null".to_owned(), |m| string(m.as_str())),
    );
    field(
        &mut out,
        "ttl_ms",
        &info
            .ttl
            .map_or("null".to_owned(), |ttl| ttl.as_millis().to_string()),
    );
    let holders: Vec<String> = info
        .holders
        .iter()
        .map(|h| {
            format!(
                "{{\"client\":{},\"thread\":{},\"count\":{},\"write\":{}}}",
                string(&h.client.hyphenated().to_string()),
                h.thread,
                h.count,
                h.write
            )
        })
        .collect();
    field(&mut out, "holders", &format!("[{}]", holders.join(",")));
    let queue: Vec<String> = info.queue.iter().map(|w| string(&w.field)).collect();
    field(&mut out, "queue", &format!("[{}]", queue.join(",")));
    field(&mut out, "subscribers", &info.subscribers.to_string());
    field(
        &mut out,
        "token",
        &info.token.map_or("null".to_owned(), |t| t.to_string()),
    );
    out.push('}');
    out
}

fn field(out: &mut String, key: &str, value: &str) {
    if out.len() > 1 {
        out.push(',');
    }
    out.push_str(&string(key));
    out.push(':');
    out.push_str(value);
}

/// `text` as a JSON string literal.
pub(crate) fn string(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if u32::from(c) < 0x20 || c == '\u{7f}' => {
                let _ = write!(out, "\\u{:04x}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::string;

    #[test]
    fn strings_are_escaped() {
        assert_eq!(string("plain"), "\"plain\"");
        assert_eq!(string("a\"b\\c"), "\"a\\\"b\\\\c\"");
        assert_eq!(string("line\nfeed\u{1}"), "\"line\\nfeed\\u0001\"");
        assert_eq!(string("{orders}:é"), "\"{orders}:é\"");
    }
}
