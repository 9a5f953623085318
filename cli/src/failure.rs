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
fn refused_access(text: &str, code: Option<&str>) -> bool {
    matches!(code, Some("NOAUTH" | "WRONGPASS" | "NOPERM"))
        || [
            "NOAUTH",
            "WRONGPASS",
            "NOPERM",
            "uthentication",
            // A command inside a script that the ACL user may not run
            // (Redis 7.0 words it so, without the NOPERM code).
            "can't run this command",
        ]
        .iter()
        .any(|word| text.contains(word))
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
}
