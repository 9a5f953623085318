//! Credentials that stay off the command line: a password from the
//! environment or a file, put into every URL the client connects with.
//!
//! The command line is visible to every user of the machine (`ps`,
//! `/proc/<pid>/cmdline`) and stays in shell history; the environment of a
//! process and a file with tight permissions are not.

use std::path::Path;

use crate::failure::{Failure, USAGE};

/// The password variables, in order of precedence: our own, then the one
/// redis-cli reads.
pub(crate) const PASSWORD_VARIABLES: [&str; 2] = ["REDHOLD_PASSWORD", "REDISCLI_AUTH"];

/// A user name and password to log in with, given outside the URLs.
#[derive(Default)]
pub(crate) struct Credentials {
    user: Option<String>,
    password: Option<String>,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credentials")
            .field("user", &self.user)
            .field("password", &self.password.as_ref().map(|_| "***"))
            .finish()
    }
}

impl Credentials {
    /// The password of `--password-file`, else of the first variable of
    /// [`PASSWORD_VARIABLES`] that is set and not empty; the user of
    /// `--user`.
    pub(crate) fn gather(
        user: Option<&str>,
        password_file: Option<&Path>,
    ) -> Result<Self, Failure> {
        let password = match password_file {
            Some(path) => Some(read_password_file(path)?),
            None => PASSWORD_VARIABLES
                .iter()
                .find_map(|name| std::env::var(name).ok().filter(|v| !v.is_empty())),
        };
        Ok(Credentials {
            user: user.map(str::to_owned),
            password,
        })
    }

    /// `url` with these credentials, unless it carries a password of its
    /// own (the more specific wins) or there are none to add. A URL the
    /// `url` crate cannot parse is given back as it is, for the library to
    /// refuse with its own (redacted) message.
    pub(crate) fn apply(&self, url: String) -> String {
        if self.user.is_none() && self.password.is_none() {
            return url;
        }
        let Ok(mut parsed) = url::Url::parse(&url) else {
            return url;
        };
        if parsed.scheme().ends_with("unix") {
            // Socket URLs carry their credentials in the query, as the
            // redis crate reads them.
            let has_own = parsed.query_pairs().any(|(k, _)| k == "pass");
            if has_own {
                return url;
            }
            let mut pairs = parsed.query_pairs_mut();
            if let Some(user) = &self.user {
                pairs.append_pair("user", user);
            }
            if let Some(password) = &self.password {
                pairs.append_pair("pass", password);
            }
            drop(pairs);
            return parsed.to_string();
        }
        if parsed.password().is_some() {
            return url;
        }
        // Both setters fail only for URLs without a host, which no
        // redis:// URL is; such a URL is left for the library to refuse.
        if let Some(user) = &self.user {
            if parsed.set_username(user).is_err() {
                return url;
            }
        }
        if let Some(password) = &self.password {
            if parsed.set_password(Some(password)).is_err() {
                return url;
            }
        }
        parsed.to_string()
    }
}

/// The file's content without its final line break; an unreadable or
/// empty file is a usage error that names the file, never its content.
fn read_password_file(path: &Path) -> Result<String, Failure> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        Failure::new(
            USAGE,
            format!("cannot read the password file {}: {e}", path.display()),
        )
    })?;
    let password = text
        .strip_suffix('\n')
        .map(|t| t.strip_suffix('\r').unwrap_or(t))
        .unwrap_or(&text);
    if password.is_empty() {
        return Err(Failure::new(
            USAGE,
            format!("the password file {} is empty", path.display()),
        ));
    }
    Ok(password.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with(password: &str) -> Credentials {
        Credentials {
            user: None,
            password: Some(password.to_owned()),
        }
    }

    #[test]
    fn a_password_goes_into_every_kind_of_url() {
        assert_eq!(
            with("p/w@x").apply("redis://h:1/".into()),
            "redis://:p%2Fw%40x@h:1/"
        );
        assert_eq!(
            with("pw").apply("redis+unix:///tmp/s.sock".into()),
            "redis+unix:///tmp/s.sock?pass=pw"
        );
    }

    #[test]
    fn a_url_with_its_own_password_keeps_it() {
        assert_eq!(
            with("pw").apply("redis://:own@h:1/".into()),
            "redis://:own@h:1/"
        );
    }

    #[test]
    fn debug_hides_the_password() {
        assert!(!format!("{:?}", with("s3cretPW")).contains("s3cretPW"));
    }
}
