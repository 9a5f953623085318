//! URLs made fit for errors, logs and `Debug`: no password, in any of the
//! forms the redis crate accepts.
//!
//! The URL is parsed with the `url` crate, as the redis crate parses it, so
//! that what is hidden here is exactly what the redis crate would read as a
//! credential: the password of the user info (`redis://user:pw@host`) and
//! the `pass` query parameter of a socket URL (`redis+unix:///s?pass=pw`).
//! A URL that does not parse cleanly is shown as its scheme alone: a
//! password with an unencoded `/` or `@` makes it unparseable, and which
//! part is the password is then anybody's guess.

/// What replaces a secret.
const HIDDEN: &str = "***";

/// The URL with any password replaced by `***`; when the URL cannot be
/// parsed as `scheme://authority…`, only its scheme followed by `…` (`pw:x`
/// parses as a URL with the scheme `pw`, so an authority is required).
pub(crate) fn redact_url(text: &str) -> String {
    match url::Url::parse(text) {
        Ok(url) if url.has_authority() && is_clean(&url) => hide_credentials(url),
        _ if text.is_empty() => String::new(),
        _ => scheme_only(text),
    }
}

/// Several URLs, passwords hidden, joined by commas.
#[cfg(any(feature = "cluster", feature = "sentinel"))]
pub(crate) fn redact_all(urls: &[String]) -> String {
    urls.iter()
        .map(|u| redact_url(u))
        .collect::<Vec<_>>()
        .join(", ")
}

/// False when an `@` lies outside the user info: `redis://us/er:pw@host`
/// parses with the password in the path, so the parse is not to be trusted.
fn is_clean(url: &url::Url) -> bool {
    let after_authority = [
        url.path(),
        url.query().unwrap_or(""),
        url.fragment().unwrap_or(""),
    ];
    !after_authority.iter().any(|part| part.contains('@'))
}

fn hide_credentials(mut url: url::Url) -> String {
    if url.password().is_some() {
        // Fails only for URLs without a host, which have no password.
        let _ = url.set_password(Some(HIDDEN));
    }
    if url.query().is_some() {
        let pairs: Vec<(String, String)> = url
            .query_pairs()
            .map(|(key, value)| {
                let value = if is_secret_key(&key) {
                    HIDDEN.to_owned()
                } else {
                    value.into_owned()
                };
                (key.into_owned(), value)
            })
            .collect();
        url.query_pairs_mut().clear().extend_pairs(pairs);
    }
    url.to_string()
}

/// Query parameters that carry a password: the redis crate reads `pass`;
/// anything else named like one is hidden too.
fn is_secret_key(key: &str) -> bool {
    let key = key.to_ascii_lowercase();
    key.contains("pass") || key.contains("secret") || key.contains("token")
}

/// `redis://…` for a URL whose scheme is plain letters, `…` otherwise.
fn scheme_only(text: &str) -> String {
    let scheme = text.split_once("://").map(|(scheme, _)| scheme);
    match scheme {
        Some(s)
            if !s.is_empty()
                && s.chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.')) =>
        {
            format!("{s}://… (not shown: it does not parse)")
        }
        _ => "… (not shown: it does not parse)".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_info_passwords_are_hidden() {
        assert_eq!(
            redact_url("redis://user:secret@host:6379/0"),
            "redis://user:***@host:6379/0"
        );
        assert_eq!(redact_url("redis://:secret@host/"), "redis://:***@host/");
        assert_eq!(redact_url("rediss://u:p%2Fw@h:1/"), "rediss://u:***@h:1/");
        assert_eq!(redact_url("redis://host:6379/"), "redis://host:6379/");
    }

    #[test]
    fn query_passwords_are_hidden() {
        assert_eq!(
            redact_url("redis+unix:///tmp/x.sock?pass=s3cretPW&db=2"),
            "redis+unix:///tmp/x.sock?pass=***&db=2"
        );
        let shown = redact_url("unix:///tmp/x.sock?user=u&PASSWORD=s3cretPW");
        assert!(!shown.contains("s3cretPW"), "{shown}");
    }

    #[test]
    fn what_does_not_parse_shows_only_its_scheme() {
        assert_eq!(
            redact_url("redis://:s3cret/PW@host/"),
            "redis://… (not shown: it does not parse)"
        );
        assert_eq!(
            redact_url("redis://us/er:s3cret@host/"),
            "redis://… (not shown: it does not parse)"
        );
        assert_eq!(redact_url("not a url"), "… (not shown: it does not parse)");
        assert_eq!(redact_url("pw:s3cret"), "… (not shown: it does not parse)");
    }
}
