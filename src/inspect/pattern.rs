//! Redis glob patterns (`SCAN ... MATCH`), matched here for names that are
//! not keys themselves: a fair queue's lock name is part of the queue's key.

/// Whether `text` matches the glob `pattern` the way Redis' `stringmatchlen`
/// does (case-sensitive): `*` any run, `?` one byte, `[abc]`, `[^a]`,
/// `[a-z]` classes, `\` escapes the next byte.
pub(super) fn matches(pattern: &[u8], text: &[u8]) -> bool {
    let (mut p, mut t) = (0, 0);
    while p < pattern.len() {
        match pattern[p] {
            b'*' => {
                while pattern.get(p + 1) == Some(&b'*') {
                    p += 1;
                }
                if p + 1 == pattern.len() {
                    return true;
                }
                return (t..=text.len()).any(|start| matches(&pattern[p + 1..], &text[start..]));
            }
            b'?' => {
                if t == text.len() {
                    return false;
                }
                t += 1;
            }
            b'[' => {
                let Some(&c) = text.get(t) else {
                    return false;
                };
                let (matched, next) = class(pattern, p + 1, c);
                if !matched {
                    return false;
                }
                p = next;
                t += 1;
                continue;
            }
            b'\\' if p + 1 < pattern.len() => {
                p += 1;
                if text.get(t) != Some(&pattern[p]) {
                    return false;
                }
                t += 1;
            }
            literal => {
                if text.get(t) != Some(&literal) {
                    return false;
                }
                t += 1;
            }
        }
        p += 1;
    }
    t == text.len()
}

/// Matches `c` against the class starting at `start` (just after `[`).
/// Returns whether it matched and the index just past the closing `]` (the
/// pattern's end when there is none, as in Redis).
fn class(pattern: &[u8], start: usize, c: u8) -> (bool, usize) {
    let mut p = start;
    let negate = pattern.get(p) == Some(&b'^');
    if negate {
        p += 1;
    }
    let mut matched = false;
    while p < pattern.len() && pattern[p] != b']' {
        if pattern[p] == b'\\' && p + 1 < pattern.len() {
            p += 1;
            matched |= pattern[p] == c;
        } else if pattern.get(p + 1) == Some(&b'-') && p + 2 < pattern.len() {
            let (mut low, mut high) = (pattern[p], pattern[p + 2]);
            if low > high {
                std::mem::swap(&mut low, &mut high);
            }
            matched |= (low..=high).contains(&c);
            p += 2;
        } else {
            matched |= pattern[p] == c;
        }
        p += 1;
    }
    (matched != negate, (p + 1).min(pattern.len()))
}

#[cfg(test)]
mod tests {
    use super::matches;

    fn m(pattern: &str, text: &str) -> bool {
        matches(pattern.as_bytes(), text.as_bytes())
    }

    #[test]
    fn stars_and_question_marks() {
        assert!(m("*", ""));
        assert!(m("*", "orders:42"));
        assert!(m("orders:*", "orders:42"));
        assert!(!m("orders:*", "order:42"));
        assert!(m("*:4?", "orders:42"));
        assert!(!m("*:4?", "orders:4"));
        assert!(m("a**b", "axxb"));
        assert!(m("exact", "exact"));
        assert!(!m("exact", "exactly"));
    }

    #[test]
    fn classes_and_escapes() {
        assert!(m("h[ae]llo", "hallo"));
        assert!(!m("h[ae]llo", "hillo"));
        assert!(m("h[^e]llo", "hallo"));
        assert!(!m("h[^e]llo", "hello"));
        assert!(m("h[a-c]llo", "hbllo"));
        assert!(m("h[c-a]llo", "hbllo"));
        assert!(m(r"\*x", "*x"));
        assert!(!m(r"\*x", "ax"));
        assert!(m(r"[\]]", "]"));
        assert!(m("{orders}:*", "{orders}:1"));
    }
}
