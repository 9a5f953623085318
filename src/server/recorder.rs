//! A connection that sends nothing: it records the commands a script call
//! would send, so that they can be written later on another connection,
//! behind a late request (see `late.rs`).
//!
//! A script is called with EVALSHA, and loaded (`SCRIPT LOAD`) when the
//! server answers NOSCRIPT. Behind a late request nobody can answer in
//! time, and a server whose script cache lacks the script would reject a
//! bare EVALSHA, so the recorder answers the first EVALSHA with NOSCRIPT:
//! the redis crate then loads the script and calls it again, and the
//! recording is those two commands, good on any server.

use std::io;

use redis::{ConnectionLike, ErrorKind, RedisError, RedisResult, ServerErrorKind, Value};

/// The recorded commands, packed, and how many there are.
#[derive(Debug, Default)]
pub(crate) struct Recorder {
    commands: Vec<u8>,
    count: usize,
    /// The hash of the script being loaded: its first EVALSHA was answered
    /// with NOSCRIPT.
    loading: Option<Vec<u8>>,
    /// The scripts loaded in the recording so far.
    loaded: Vec<Vec<u8>>,
}

impl Recorder {
    /// The commands recorded (each script's load and its call), packed,
    /// with their count.
    pub(crate) fn into_commands(self) -> (Vec<u8>, usize) {
        (self.commands, self.count)
    }
}

impl ConnectionLike for Recorder {
    fn req_packed_command(&mut self, cmd: &[u8]) -> RedisResult<Value> {
        let args = arguments(cmd);
        let name = args.first().map(|a| a.to_ascii_uppercase());
        let hash = args.get(1).cloned().unwrap_or_default();
        match name.as_deref() {
            Some(b"EVALSHA") if !self.loaded.contains(&hash) => {
                self.loading = Some(hash);
                Err(RedisError::from((
                    ErrorKind::Server(ServerErrorKind::NoScript),
                    "recorded: the script is loaded first",
                )))
            }
            Some(b"SCRIPT") if self.loading.is_some() => {
                let hash = self.loading.take().unwrap_or_default();
                self.record(cmd);
                self.loaded.push(hash.clone());
                Ok(Value::BulkString(hash))
            }
            _ => {
                self.record(cmd);
                Err(io::Error::new(
                    io::ErrorKind::WouldBlock,
                    "recorded: sent later behind a late request",
                )
                .into())
            }
        }
    }

    fn req_packed_commands(
        &mut self,
        cmd: &[u8],
        _offset: usize,
        _count: usize,
    ) -> RedisResult<Vec<Value>> {
        self.record(cmd);
        Err(io::Error::new(io::ErrorKind::WouldBlock, "recorded").into())
    }

    fn get_db(&self) -> i64 {
        0
    }

    fn check_connection(&mut self) -> bool {
        false
    }

    fn is_open(&self) -> bool {
        true
    }
}

impl Recorder {
    fn record(&mut self, cmd: &[u8]) {
        self.commands.extend_from_slice(cmd);
        self.count += 1;
    }
}

/// The arguments of one packed command (`*N\r\n$len\r\narg\r\n…`); as many
/// as parse.
fn arguments(cmd: &[u8]) -> Vec<Vec<u8>> {
    let mut args = Vec::new();
    let mut rest = cmd;
    let Some(header) = line(&mut rest) else {
        return args;
    };
    let count: usize = parse(header.strip_prefix(b"*")).unwrap_or(0);
    for _ in 0..count {
        let Some(len) = line(&mut rest).and_then(|l| parse(l.strip_prefix(b"$"))) else {
            break;
        };
        if rest.len() < len + 2 {
            break;
        }
        args.push(rest[..len].to_vec());
        rest = &rest[len + 2..];
    }
    args
}

/// The next line without its CRLF.
fn line<'a>(rest: &mut &'a [u8]) -> Option<&'a [u8]> {
    let at = rest.windows(2).position(|w| w == b"\r\n")?;
    let found = &rest[..at];
    *rest = &rest[at + 2..];
    Some(found)
}

fn parse(digits: Option<&[u8]>) -> Option<usize> {
    std::str::from_utf8(digits?).ok()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_script_is_loaded_once_in_a_recording() {
        let one = redis::Script::new("return 1");
        let two = redis::Script::new("return 2");
        let mut recorder = Recorder::default();
        for script in [&one, &two, &one] {
            assert!(script.invoke::<i64>(&mut recorder).is_err());
        }
        let (commands, count) = recorder.into_commands();
        // Two loads, three calls.
        assert_eq!(count, 5);
        assert_eq!(
            String::from_utf8_lossy(&commands).matches("LOAD").count(),
            2
        );
    }

    #[test]
    fn a_script_call_is_recorded_as_its_load_and_its_call() {
        let script = redis::Script::new("return ARGV[1]");
        let mut recorder = Recorder::default();
        let sent = script.arg("x").invoke::<String>(&mut recorder);
        assert!(sent.is_err());
        let (commands, count) = recorder.into_commands();
        assert_eq!(count, 2);
        let text = String::from_utf8_lossy(&commands);
        assert!(text.contains("SCRIPT") && text.contains("return ARGV[1]"));
        assert!(text.contains("EVALSHA") && text.contains(script.get_hash()));
    }
}
