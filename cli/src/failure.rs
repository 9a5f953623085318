//! What went wrong, as one line for stderr and an exit code (listed in
//! `--help` and the README).

use std::fmt;

/// A Redis command failed, or the name holds a value that is not a lock.
pub(crate) const FAILED: u8 = 1;
/// A bad command line: clap's own code for usage errors, also used for a
/// malformed URL or an unreadable certificate file.
pub(crate) const USAGE: u8 = 2;
/// Redis could not be reached.
pub(crate) const UNREACHABLE: u8 = 3;
/// Redis refused the credentials or the ACL rights.
pub(crate) const ACCESS: u8 = 4;
/// `force-unlock` was not confirmed.
pub(crate) const NOT_CONFIRMED: u8 = 5;

/// Why the tool stops before finishing its work.
#[derive(Debug)]
pub(crate) struct Failure {
    pub(crate) code: u8,
    pub(crate) message: String,
}

impl Failure {
    pub(crate) fn new(code: u8, message: impl Into<String>) -> Failure {
        Failure {
            code,
            message: message.into(),
        }
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // One line, whatever the server or the OS put in the message.
        let line: String = self
            .message
            .chars()
            .map(|c| if c.is_control() { ' ' } else { c })
            .collect();
        write!(f, "redhold: {line}")
    }
}

impl From<redhold::Error> for Failure {
    fn from(e: redhold::Error) -> Failure {
        use redhold::Error;
        let code = match &e {
            Error::InvalidUrl { .. }
            | Error::InvalidArgument { .. }
            | Error::InvalidName { .. } => USAGE,
            Error::Connect { source, .. } if refused_access(&source.to_string(), source.code()) => {
                ACCESS
            }
            Error::Connect { .. } => UNREACHABLE,
            Error::Redis(source) if refused_access(&source.to_string(), source.code()) => ACCESS,
            e if e.is_connection_error() => UNREACHABLE,
            _ => FAILED,
        };
        let message = match &e {
            Error::WrongKind { lock, found, .. } => {
                format!("{lock:?} is not a lock: it holds {found}")
            }
            Error::Redis(source) if code == ACCESS => format!(
                "Redis refused a command for lack of rights ({source}); the ACL user needs \
                 +@read +@scripting +@pubsub, and +@write for force-unlock, on the locks' \
                 keys and channels"
            ),
            // `Display` leaves the cause to `source()`; say both.
            _ => e.report(),
        };
        Failure::new(code, message)
    }
}

/// Whether a Redis error says the credentials or rights were refused.
///
/// Outside scripts every server since 6.0 sends the `NOAUTH`, `WRONGPASS`
/// or `NOPERM` code. Inside a script the refusal comes as a plain `ERR`,
/// worded differently by each server:
/// - Redis 6.2 and 7.0: "The user executing the script can't run this
///   command or subcommand" (or "can't access at least one of the keys");
/// - Redis 7.2 and later, Redis 8 and Valkey: "ACL failure in script: User
///   r has no permissions to run the 'del' command" (or "No permissions to
///   access a key" / "a channel").
fn refused_access(text: &str, code: Option<&str>) -> bool {
    if matches!(code, Some("NOAUTH" | "WRONGPASS" | "NOPERM")) {
        return true;
    }
    let lower = text.to_ascii_lowercase();
    [
        "noauth",
        "wrongpass",
        "noperm",
        "authentication",
        "the user executing the script can't",
        "acl failure in script",
        "no permissions to",
    ]
    .iter()
    .any(|words| lower.contains(words))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_are_one_line() {
        let failure = Failure::new(FAILED, "two\nlines\r");
        assert_eq!(failure.to_string(), "redhold: two lines ");
    }

    #[test]
    fn causes_are_printed_once_after_the_error() {
        let io = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "refused here");
        let e = redhold::Error::Connect {
            url: "redis://h:1/".into(),
            source: io.into(),
        };
        let failure = Failure::from(e);
        assert_eq!(failure.code, UNREACHABLE);
        assert_eq!(failure.message.matches("refused here").count(), 1);
        assert!(
            failure.message.contains("redis://h:1/"),
            "{}",
            failure.message
        );
    }

    #[test]
    fn auth_errors_are_access_errors() {
        assert!(refused_access(
            "WRONGPASS invalid username-password pair",
            None
        ));
        assert!(refused_access("x", Some("NOPERM")));
        assert!(!refused_access("Connection refused (os error 111)", None));
    }

    /// A refusal inside a script, as each server version words it.
    #[test]
    fn script_refusals_of_every_server_version_are_access_errors() {
        for text in [
            // Redis 6.2, 7.0
            "ERR Error running script (call to f_0123): @user_script:1: @user_script: 1: \
             The user executing the script can't run this command or subcommand",
            "ERR The user executing the script can't access at least one of the keys \
             mentioned in the command",
            // Redis 7.2, 7.4, 8.0, Valkey 8
            "ERR ACL failure in script: User r has no permissions to run the 'del' command \
             script: 0123, on @user_script:3.",
            "ERR ACL failure in script: No permissions to access a key",
            "ERR ACL failure in script: No permissions to access a channel",
        ] {
            assert!(refused_access(text, Some("ERR")), "{text}");
        }
        assert!(!refused_access("ERR unknown command 'x'", Some("ERR")));
        assert!(!refused_access(
            "ERR Error running script: attempt to compare nil with number",
            Some("ERR")
        ));
    }
}
