//! A bounded, incremental reader of RESP2 replies, for the pub/sub
//! connection and the command connections alike.
//!
//! Bytes arrive in pieces (a read timeout, a slow peer), so they are kept in
//! a buffer, and a reply is taken out only once it is complete. Three rules
//! keep a broken or hostile peer from hurting the reader:
//!
//! - **Incremental**: what was checked of an incomplete reply is not checked
//!   again when more bytes come (a scan position and the items each open
//!   array still expects), so reading a reply costs time in proportion to
//!   its size, however it is cut.
//! - **Bounded**: a reply longer than the reader's cap is a protocol error
//!   as soon as its header or its bytes say so, before the bytes are kept:
//!   the buffer never holds more than the cap plus one read.
//! - **Strict**: anything that is not RESP2 (an unknown type byte, a bad
//!   number, a negative length other than -1, nesting deeper than
//!   [`MAX_DEPTH`]) is an error, never a guess. The connection must then be
//!   dropped: the stream is out of step.

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

/// Longest nesting accepted; pub/sub replies are two levels deep at most,
/// and no reply of a command this crate sends is deeper than three.
pub(crate) const MAX_DEPTH: usize = 8;

/// The smallest item of an array: `+\r\n`. An array that announces more
/// items than its cap could hold is refused on its header.
const SMALLEST_ITEM: usize = 3;

/// Collects bytes and takes complete replies out of them, at most `cap`
/// bytes each.
#[derive(Debug)]
pub(crate) struct Decoder {
    buf: Vec<u8>,
    cap: usize,
    /// `buf[..scanned]` is the checked start of the reply at the front.
    scanned: usize,
    /// Where the search for the end of the current line goes on.
    line_searched: usize,
    /// Items still expected by each array opened and not yet complete.
    open: Vec<u64>,
}

impl Decoder {
    /// An empty decoder that refuses replies longer than `cap` bytes.
    pub(crate) fn new(cap: usize) -> Decoder {
        Decoder {
            buf: Vec::with_capacity(4096.min(cap)),
            cap,
            scanned: 0,
            line_searched: 0,
            open: Vec::new(),
        }
    }

    /// Changes the cap (the pub/sub reader raises it as longer channels are
    /// subscribed); it applies to the reply being read too.
    pub(crate) fn set_cap(&mut self, cap: usize) {
        self.cap = cap;
    }

    /// The buffer that reads append to; [`next_with`](Self::next_with)
    /// must be called after each read, which keeps it within the cap.
    pub(crate) fn buffer(&mut self) -> &mut Vec<u8> {
        &mut self.buf
    }

    /// How many bytes wait in the buffer.
    #[cfg(test)]
    pub(crate) fn buffered(&self) -> usize {
        self.buf.len()
    }

    /// The next complete reply, as [`Frame`].
    #[cfg(test)]
    pub(crate) fn next_frame(&mut self) -> Result<Option<Frame>, ProtocolError> {
        self.next_with(Decoder::frame)
    }

    /// The frame of one whole reply's bytes, as `next_with` hands them.
    pub(crate) fn frame(bytes: &[u8]) -> Frame {
        build(bytes, 0).0
    }

    /// The next complete reply: `read` gets its exact bytes (checked RESP2)
    /// and its result is returned; `Ok(None)` while more bytes are needed.
    pub(crate) fn next_with<T>(
        &mut self,
        read: impl FnOnce(&[u8]) -> T,
    ) -> Result<Option<T>, ProtocolError> {
        let Some(len) = self.scan()? else {
            return Ok(None);
        };
        let value = read(&self.buf[..len]);
        self.buf.drain(..len);
        self.scanned = 0;
        self.line_searched = 0;
        Ok(Some(value))
    }

    /// Checks bytes from where the last call stopped; the length of the
    /// reply at the front once it is complete.
    fn scan(&mut self) -> Result<Option<usize>, ProtocolError> {
        loop {
            let Some(line_end) = self.line_end()? else {
                return Ok(None);
            };
            let start = self.scanned;
            let line = &self.buf[start + 1..line_end];
            let after = line_end + 2;
            let item_done = match self.buf[start] {
                b'+' | b'-' => after,
                b':' => {
                    number(line)?;
                    after
                }
                b'$' => match length(line)? {
                    None => after,
                    Some(len) => {
                        let end = after
                            .checked_add(len)
                            .and_then(|e| e.checked_add(2))
                            .filter(|e| *e <= self.cap)
                            .ok_or_else(|| self.too_long())?;
                        if self.buf.len() < end {
                            return Ok(None);
                        }
                        if &self.buf[end - 2..end] != b"\r\n" {
                            return Err(ProtocolError("bulk string not followed by CRLF".into()));
                        }
                        end
                    }
                },
                b'*' | b'>' => match length(line)? {
                    Some(count) if count > 0 => {
                        if count > self.cap / SMALLEST_ITEM {
                            return Err(self.too_long());
                        }
                        if self.open.len() >= MAX_DEPTH {
                            return Err(ProtocolError("replies nested too deeply".into()));
                        }
                        self.open.push(count as u64);
                        self.advance(after);
                        continue;
                    }
                    _ => after,
                },
                other => {
                    return Err(ProtocolError(format!(
                        "unexpected reply type byte {:?}",
                        other as char
                    )))
                }
            };
            self.advance(item_done);
            if self.close_arrays() {
                return Ok(Some(item_done));
            }
        }
    }

    /// The end of the line at `scanned`, searching only bytes not searched
    /// before; an error once the line cannot end within the cap.
    fn line_end(&mut self) -> Result<Option<usize>, ProtocolError> {
        let from = self.line_searched.max(self.scanned);
        let found = self.buf[from..]
            .windows(2)
            .position(|w| w == b"\r\n")
            .map(|i| from + i);
        match found {
            Some(end) if end == self.scanned => Err(ProtocolError("empty reply line".into())),
            Some(end) if end + 2 > self.cap => Err(self.too_long()),
            Some(end) => Ok(Some(end)),
            None if self.buf.len() > self.cap => Err(self.too_long()),
            None => {
                // The last byte may be the CR of a CRLF still to come.
                self.line_searched = self.buf.len().saturating_sub(1).max(self.scanned);
                Ok(None)
            }
        }
    }

    fn advance(&mut self, to: usize) {
        self.scanned = to;
        self.line_searched = to;
    }

    /// Counts one item done in the arrays open; whether the reply is
    /// complete.
    fn close_arrays(&mut self) -> bool {
        while let Some(left) = self.open.last_mut() {
            *left -= 1;
            if *left > 0 {
                return false;
            }
            self.open.pop();
        }
        true
    }

    fn too_long(&self) -> ProtocolError {
        ProtocolError(format!("reply longer than {} bytes", self.cap))
    }
}

/// Builds the frame at the front of `bytes`, which [`Decoder::scan`]
/// checked; returns it and where it ends.
fn build(bytes: &[u8], start: usize) -> (Frame, usize) {
    let line_end = start
        + bytes[start..]
            .windows(2)
            .position(|w| w == b"\r\n")
            .unwrap_or(bytes.len() - start);
    let line = &bytes[start + 1..line_end];
    let after = line_end + 2;
    // `scan` accepted every number and length here, so the fallbacks are
    // never taken.
    match bytes[start] {
        b'+' => (Frame::Simple(line.to_vec()), after),
        b'-' => (Frame::Error(line.to_vec()), after),
        b':' => (Frame::Integer(number(line).unwrap_or(0)), after),
        b'$' => match length(line).ok().flatten() {
            None => (Frame::Bulk(None), after),
            Some(len) => (
                Frame::Bulk(Some(bytes[after..after + len].to_vec())),
                after + len + 2,
            ),
        },
        _ => match length(line).ok().flatten() {
            None => (Frame::Array(None), after),
            Some(count) => {
                let mut items = Vec::with_capacity(count);
                let mut pos = after;
                for _ in 0..count {
                    let (item, next) = build(bytes, pos);
                    items.push(item);
                    pos = next;
                }
                (Frame::Array(Some(items)), pos)
            }
        },
    }
}

fn number(line: &[u8]) -> Result<i64, ProtocolError> {
    std::str::from_utf8(line)
        .ok()
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| ProtocolError(format!("not a number: {:?}", String::from_utf8_lossy(line))))
}

/// A bulk or array length: `None` for -1 (nil); any other negative length
/// is an error, not a nil.
fn length(line: &[u8]) -> Result<Option<usize>, ProtocolError> {
    match number(line)? {
        -1 => Ok(None),
        n => usize::try_from(n)
            .map(Some)
            .map_err(|_| ProtocolError(format!("negative length {n}"))),
    }
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

    fn parse(raw: &[u8]) -> Result<Option<Frame>, ProtocolError> {
        let mut d = Decoder::new(1 << 20);
        d.buffer().extend_from_slice(raw);
        d.next_frame()
    }

    #[test]
    fn reads_a_message_push() {
        let raw = b"*3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$1\r\n0\r\n";
        assert_eq!(
            parse(raw).unwrap().unwrap(),
            Frame::Array(Some(vec![bulk("message"), bulk("ch"), bulk("0")]))
        );
    }

    #[test]
    fn waits_for_more_bytes_at_every_cut_and_goes_on_from_there() {
        let raw = b"*3\r\n$9\r\nsubscribe\r\n$2\r\nch\r\n:1\r\n";
        for cut in 0..raw.len() {
            assert_eq!(parse(&raw[..cut]), Ok(None), "cut at {cut}");
            let mut d = Decoder::new(1 << 20);
            d.buffer().extend_from_slice(&raw[..cut]);
            assert_eq!(d.next_frame(), Ok(None));
            d.buffer().extend_from_slice(&raw[cut..]);
            assert!(d.next_frame().unwrap().is_some(), "cut at {cut}");
            assert_eq!(d.buffered(), 0);
        }
    }

    #[test]
    fn leaves_the_next_reply_in_the_buffer() {
        let mut d = Decoder::new(1 << 20);
        d.buffer().extend_from_slice(b"+OK\r\n:5\r\n");
        assert_eq!(d.next_frame(), Ok(Some(Frame::Simple(b"OK".to_vec()))));
        assert_eq!(d.next_frame(), Ok(Some(Frame::Integer(5))));
        assert_eq!(d.next_frame(), Ok(None));
    }

    #[test]
    fn reads_errors_and_nils() {
        assert_eq!(
            parse(b"-WRONGPASS bad\r\n").unwrap().unwrap(),
            Frame::Error(b"WRONGPASS bad".to_vec())
        );
        assert_eq!(parse(b"$-1\r\n").unwrap().unwrap(), Frame::Bulk(None));
        assert_eq!(parse(b"*-1\r\n").unwrap().unwrap(), Frame::Array(None));
        assert_eq!(
            parse(b"*0\r\n").unwrap().unwrap(),
            Frame::Array(Some(vec![]))
        );
    }

    #[test]
    fn refuses_garbage() {
        assert!(parse(b"?what\r\n").is_err());
        assert!(parse(b":notanumber\r\n").is_err());
        assert!(parse(b"$3\r\nabcXY").is_err());
        assert!(parse(b"\r\n").is_err());
    }

    #[test]
    fn a_negative_length_other_than_minus_one_is_an_error() {
        assert!(parse(b"$-5\r\n").is_err());
        assert!(parse(b"*-7\r\n").is_err());
        assert!(parse(b"*1\r\n$-2\r\n").is_err());
    }

    #[test]
    fn a_reply_over_the_cap_is_refused_on_its_header() {
        let mut d = Decoder::new(100);
        d.buffer().extend_from_slice(b"$1000000000000\r\n");
        assert!(d.next_frame().is_err());
        let mut d = Decoder::new(100);
        d.buffer().extend_from_slice(b"*1000\r\n");
        assert!(d.next_frame().is_err());
        let mut d = Decoder::new(100);
        d.buffer().extend_from_slice(&[b'+'; 101]);
        assert!(d.next_frame().is_err());
    }

    #[test]
    fn nesting_is_bounded() {
        let deep = "*1\r\n".repeat(MAX_DEPTH + 1) + ":1\r\n";
        assert!(parse(deep.as_bytes()).is_err());
        let ok = "*1\r\n".repeat(MAX_DEPTH) + ":1\r\n";
        assert!(parse(ok.as_bytes()).unwrap().is_some());
    }

    #[test]
    fn encodes_commands() {
        assert_eq!(
            command(&[b"SUBSCRIBE", b"ch"]),
            b"*2\r\n$9\r\nSUBSCRIBE\r\n$2\r\nch\r\n".to_vec()
        );
    }
}
