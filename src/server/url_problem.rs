//! Which part of a Redis URL does not parse, said without the part's text:
//! the text may be a password (`redis://:pa/ss@host` puts "pa" where the
//! port goes), and no error may print a password.

/// The schemes the redis crate connects to.
const SCHEMES: [&str; 6] = ["redis", "rediss", "valkey", "valkeys", "redis+unix", "unix"];

/// What the redis crate adds to its own error for every URL it cannot read.
pub(super) const CRATE_SAYS: &str = "Redis URL did not parse";

/// Names the part of `url` that does not parse, or the scheme it does not
/// know; `None` when the URL parses and its scheme is known (the redis
/// crate's own reason then says what is wrong).
pub(super) fn url_problem(url: &str) -> Option<String> {
    let parsed = match url::Url::parse(url) {
        Ok(parsed) => parsed,
        Err(e) => return Some(format!("{}{ENCODE_HINT}", unparsed_part(e))),
    };
    let scheme = parsed.scheme();
    if SCHEMES.contains(&scheme) {
        return None;
    }
    Some(format!(
        "the scheme {scheme:?} is not one of {}",
        SCHEMES.join(", ")
    ))
}

/// The hint for a URL that holds a password with a reserved character.
const ENCODE_HINT: &str = " (a password that holds `/`, `@`, `:`, `?` or `#` must be \
                           percent-encoded, e.g. `/` as %2F)";

/// The `url` crate's reason, as the part of the URL it is about.
fn unparsed_part(e: url::ParseError) -> String {
    use url::ParseError as P;
    match e {
        P::InvalidPort => "the port is not a number from 0 to 65535".to_owned(),
        P::EmptyHost => "the host is missing".to_owned(),
        P::InvalidIpv4Address => "the host is not a valid IPv4 address".to_owned(),
        P::InvalidIpv6Address => {
            "the host is not a valid IPv6 address (write one in brackets: redis://[::1]:6379/)"
                .to_owned()
        }
        P::InvalidDomainCharacter | P::IdnaError => {
            "the host holds a character that no host name may hold".to_owned()
        }
        P::RelativeUrlWithoutBase => {
            "the scheme is missing: start the URL with redis://, rediss:// or redis+unix://"
                .to_owned()
        }
        // The url crate's own text names the part and never quotes the input.
        other => format!("the URL does not parse: {other}"),
    }
}

#[cfg(test)]
mod tests {
    use super::url_problem;

    #[test]
    fn names_the_part_without_quoting_it() {
        let port = url_problem("redis://127.0.0.1:notaport/").expect("a problem");
        assert!(port.contains("the port"), "{port}");
        // The `/` in the password ends the authority: ":sec" reads as an
        // empty host and a port "sec". Neither part's text is quoted.
        let slash = url_problem("redis://:sec/ret@127.0.0.1:6379/").expect("a problem");
        assert!(slash.contains("the host is missing"), "{slash}");
        assert!(slash.contains("percent-encoded"), "{slash}");
        assert!(!slash.contains("sec"), "{slash}");
        let host = url_problem("redis://user:pw@[::1/").expect("a problem");
        assert!(host.contains("IPv6"), "{host}");
        assert!(!host.contains("pw"), "{host}");
        let scheme = url_problem("http://127.0.0.1:6379/").expect("a problem");
        assert!(scheme.contains("\"http\""), "{scheme}");
        assert_eq!(url_problem("rediss://h:1/"), None);
    }
}
