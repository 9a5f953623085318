//! Names from Redis made safe for a terminal, as redis-cli shows them.
//!
//! A lock name is any byte string a client chose: a `\n` splits a table
//! row, a `\r` overwrites what came before, an escape sequence recolours
//! or moves the cursor, and a bidirectional override reverses what follows.
//! Such a name is printed quoted, with these characters escaped (`"a\nb"`,
//! `"\x1b[31m"`); any other name is printed as it is.

use std::fmt::Write;

/// `text` as it is when it has nothing to escape, else quoted and escaped.
pub(crate) fn name(text: &str) -> String {
    if !text.chars().any(needs_quoting) {
        return text.to_owned();
    }
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{7}' => out.push_str("\\a"),
            '\u{8}' => out.push_str("\\b"),
            c if c.is_ascii_control() => {
                let _ = write!(out, "\\x{:02x}", u32::from(c));
            }
            c if is_hidden(c) => {
                let _ = write!(out, "\\u{{{:x}}}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Characters that make a name print as something else; a quote or a
/// backslash too, so that a quoted name is never mistaken for a plain one.
fn needs_quoting(c: char) -> bool {
    c.is_control() || is_hidden(c) || c == '"' || c == '\\'
}

/// Non-ASCII controls (C1) and the invisible characters that reorder or
/// hide text: zero-width spaces and marks, bidirectional embeddings,
/// overrides and isolates.
fn is_hidden(c: char) -> bool {
    (c.is_control() && !c.is_ascii())
        || matches!(c, '\u{200b}'..='\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{feff}')
}

#[cfg(test)]
mod tests {
    use super::name;

    #[test]
    fn plain_names_are_left_alone() {
        assert_eq!(name("orders:42"), "orders:42");
        assert_eq!(name("naïve ünïcode 日本"), "naïve ünïcode 日本");
    }

    #[test]
    fn controls_are_escaped_as_redis_cli_does() {
        assert_eq!(name("a\nb"), "\"a\\nb\"");
        assert_eq!(name("x\r\x1b[31m"), "\"x\\r\\x1b[31m\"");
        assert_eq!(name("q\"\\"), "\"q\\\"\\\\\"");
        assert_eq!(name("\u{202e}abc"), "\"\\u{202e}abc\"");
        assert_eq!(name("\u{9b}"), "\"\\u{9b}\"");
    }
}
