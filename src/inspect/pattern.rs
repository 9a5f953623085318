//! Redis glob patterns (`SCAN ... MATCH`), matched here for names that are
//! not keys themselves: a fair queue's lock name is part of the queue's key.

/// Whether `text` matches the glob `pattern` the way Redis' `stringmatchlen`
/// does (case-sensitive): `*` any run, `?` one byte, `[abc]`, `[^a]`,
/// `[a-z]` classes, `\` escapes the next byte.
///
/// Every token but `*` consumes exactly one byte, so a mismatch only ever
/// needs to go back to the latest `*` and let it swallow one byte more:
/// the time is at most `pattern.len() * text.len()` steps, whatever the
/// pattern (a backtracking matcher took exponential time on patterns such
/// as `*a*a*a*a*b`).
pub(super) fn matches(pattern: &[u8], text: &[u8]) -> bool {
    let (mut p, mut t) = (0, 0);
    // Where to resume after the latest `*`: the pattern just past it, and
    // the text position that star's run ends at so far.
    let mut resume: Option<(usize, usize)> = None;
    loop {
        if p < pattern.len() && pattern[p] == b'*' {
            p += 1;
            resume = Some((p, t));
            continue;
        }
        if t == text.len() {
            // Only stars may be left of the pattern.
            return pattern[p..].iter().all(|&b| b == b'*');
        }
        if let Some(next) = one_byte(pattern, p, text[t]) {
            p = next;
            t += 1;
            continue;
        }
        match resume.as_mut() {
            Some((star_p, star_t)) => {
                *star_t += 1;
                p = *star_p;
                t = *star_t;
            }
            None => return false,
        }
    }
}

/// Matches the token at `p` (not a `*`) against the byte `c`: the index of
/// the next token when it matches, `None` when it does not or the pattern
/// has ended.
fn one_byte(pattern: &[u8], p: usize, c: u8) -> Option<usize> {
    match *pattern.get(p)? {
        b'?' => Some(p + 1),
        b'[' => {
            let (matched, next) = class(pattern, p + 1, c);
            matched.then_some(next)
        }
        b'\\' if p + 1 < pattern.len() => (pattern[p + 1] == c).then_some(p + 2),
        literal => (literal == c).then_some(p + 1),
    }
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

    #[test]
    fn stars_match_any_run_including_none() {
        assert!(m("*a*b*", "xaxxbx"));
        assert!(m("*a*b", "ab"));
        assert!(!m("*a*b", "ba"));
        assert!(m("a*", "a"));
        assert!(!m("a*b", "a"));
        assert!(m("*?", "x"));
        assert!(!m("*?", ""));
        assert!(m(r"*\*", "ab*"));
        assert!(!m("[", "["));
        assert!(m(r"ab\", r"ab\"));
    }

    /// The pattern that took a backtracking matcher 14.8 s of CPU on a
    /// 60-byte name: it now takes at most `pattern * text` steps, so even a
    /// debug build finishes it in well under a millisecond (no timing is
    /// asserted; a regression would hang this test for minutes).
    #[test]
    fn pathological_patterns_take_linear_steps() {
        let name = "a".repeat(60);
        assert!(!m("*a*a*a*a*a*a*a*a*a*a*a*a*b", &name));
        let long = "a".repeat(100_000);
        let mut no_b_at_the_end = "*a".repeat(50);
        no_b_at_the_end.push('b');
        assert!(!m(&no_b_at_the_end, &long));
        assert!(m(&"*a".repeat(50), &long));
    }
}
