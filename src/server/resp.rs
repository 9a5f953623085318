//! A small incremental reader of RESP2 replies, for the pub/sub connection.
//!
//! The subscriber reads with a timeout so that it can do housekeeping; a
//! timeout may land in the middle of a reply, so bytes are kept in a buffer
//! and a reply is taken out only once it is complete.

/// One RESP reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Frame {
    /// `+OK`
    Simple(Vec<u8>),
    /// `-ERR ...`
    Error(Vec<u8>),
    /// `:1`
    Integer(i64),
    /// `$3\r\nabc`, or `$-1` (nil)
    Bulk(Option<Vec<u8>>),
    /// `*2\r\n...`, or `*-1` (nil); RESP3 push frames (`>`) read as arrays.
    Array(Option<Vec<Frame>>),
}

/// The bytes could not be read as RESP: the connection must be dropped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ProtocolError(pub(crate) String);

/// Where a parse attempt ended.
type Parsed = Result<Option<(Frame, usize)>, ProtocolError>;

/// Longest nesting accepted; pub/sub replies are two levels deep at most.
const MAX_DEPTH: usize = 8;

/// Takes one complete reply from the front of `buf`: `Ok(Some((frame, len)))`
/// where `len` bytes were used, `Ok(None)` when more bytes are needed.
pub(crate) fn parse(buf: &[u8]) -> Parsed {
    parse_at(buf, 0, 0)
}

fn parse_at(buf: &[u8], start: usize, depth: usize) -> Parsed {
    if depth > MAX_DEPTH {
        return Err(ProtocolError("replies nested too deeply".into()));
    }
    let Some(line_end) = find_crlf(buf, start) else {
        return Ok(None);
    };
    if line_end == start {
        return Err(ProtocolError("empty reply line".into()));
    }
    let kind = buf[start];
    let line = &buf[start + 1..line_end];
    let after = line_end + 2;
    match kind {
        b'+' => Ok(Some((Frame::Simple(line.to_vec()), after))),
        b'-' => Ok(Some((Frame::Error(line.to_vec()), after))),
        b':' => Ok(Some((Frame::Integer(number(line)?), after))),
        b'$' => {
            let len = number(line)?;
            if len < 0 {
                return Ok(Some((Frame::Bulk(None), after)));
            }
            let len = usize::try_from(len).map_err(|_| ProtocolError("bulk too long".into()))?;
            let end = after
                .checked_add(len)
                .ok_or_else(|| ProtocolError("bulk too long".into()))?;
            if buf.len() < end + 2 {
                return Ok(None);
            }
            if &buf[end..end + 2] != b"\r\n" {
                return Err(ProtocolError("bulk string not followed by CRLF".into()));
            }
            Ok(Some((Frame::Bulk(Some(buf[after..end].to_vec())), end + 2)))
        }
        b'*' | b'>' => {
            let count = number(line)?;
            if count < 0 {
                return Ok(Some((Frame::Array(None), after)));
            }
            let mut items = Vec::with_capacity(usize::try_from(count.min(16)).unwrap_or(16));
            let mut pos = after;
            for _ in 0..count {
                match parse_at(buf, pos, depth + 1)? {
                    Some((item, next)) => {
                        items.push(item);
                        pos = next;
                    }
                    None => return Ok(None),
                }
            }
            Ok(Some((Frame::Array(Some(items)), pos)))
        }
        other => Err(ProtocolError(format!(
            "unexpected reply type byte {:?}",
            other as char
        ))),
    }
}

fn find_crlf(buf: &[u8], from: usize) -> Option<usize> {
    buf.get(from..)?
        .windows(2)
        .position(|w| w == b"\r\n")
        .map(|i| from + i)
}

fn number(line: &[u8]) -> Result<i64, ProtocolError> {
    std::str::from_utf8(line)
        .ok()
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| ProtocolError(format!("not a number: {:?}", String::from_utf8_lossy(line))))
}

/// Encodes a command as a RESP array of bulk strings.
pub(crate) fn command(args: &[&[u8]]) -> Vec<u8> {
    let mut out = Vec::with_capacity(16 + args.iter().map(|a| a.len() + 16).sum::<usize>());
    out.extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
    for arg in args {
        out.extend_from_slice(format!("${}\r\n", arg.len()).as_bytes());
        out.extend_from_slice(arg);
        out.extend_from_slice(b"\r\n");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bulk(s: &str) -> Frame {
        Frame::Bulk(Some(s.as_bytes().to_vec()))
    }

    #[test]
    fn reads_a_message_push() {
        let raw = b"*3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$1\r\n0\r\n";
        let (frame, used) = parse(raw).unwrap().unwrap();
        assert_eq!(used, raw.len());
        assert_eq!(
            frame,
            Frame::Array(Some(vec![bulk("message"), bulk("ch"), bulk("0")]))
        );
    }

    #[test]
    fn waits_for_more_bytes_at_every_cut() {
        let raw = b"*3\r\n$9\r\nsubscribe\r\n$2\r\nch\r\n:1\r\n";
        for cut in 0..raw.len() {
            assert_eq!(parse(&raw[..cut]), Ok(None), "cut at {cut}");
        }
        assert!(parse(raw).unwrap().is_some());
    }

    #[test]
    fn leaves_the_next_reply_in_the_buffer() {
        let raw = b"+OK\r\n:5\r\n";
        let (first, used) = parse(raw).unwrap().unwrap();
        assert_eq!(first, Frame::Simple(b"OK".to_vec()));
        let (second, _) = parse(&raw[used..]).unwrap().unwrap();
        assert_eq!(second, Frame::Integer(5));
    }

    #[test]
    fn reads_errors_and_nils() {
        assert_eq!(
            parse(b"-WRONGPASS bad\r\n").unwrap().unwrap().0,
            Frame::Error(b"WRONGPASS bad".to_vec())
        );
        assert_eq!(parse(b"$-1\r\n").unwrap().unwrap().0, Frame::Bulk(None));
        assert_eq!(parse(b"*-1\r\n").unwrap().unwrap().0, Frame::Array(None));
    }

    #[test]
    fn refuses_garbage() {
        assert!(parse(b"?what\r\n").is_err());
        assert!(parse(b":notanumber\r\n").is_err());
        assert!(parse(b"$3\r\nabcXY").is_err());
    }

    #[test]
    fn encodes_commands() {
        assert_eq!(
            command(&[b"SUBSCRIBE", b"ch"]),
            b"*2\r\n$9\r\nSUBSCRIBE\r\n$2\r\nch\r\n".to_vec()
        );
    }
}
