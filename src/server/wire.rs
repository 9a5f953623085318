//! Reading whole replies from a [`Stream`] against one deadline: the read
//! timeout is recomputed before every read from what is left, so a peer
//! that sends a reply one byte at a time gets no more time than one that
//! sends nothing.

use std::io;
use std::time::Instant;

use super::resp::Decoder;
use super::stream::time_left;
use super::stream::Stream;

/// A stream and the replies read from it so far.
#[derive(Debug)]
pub(crate) struct Wire {
    pub(crate) stream: Stream,
    decoder: Decoder,
}

impl Wire {
    /// Reads replies of at most `cap` bytes from `stream`.
    pub(crate) fn new(stream: Stream, cap: usize) -> Wire {
        Wire {
            stream,
            decoder: Decoder::new(cap),
        }
    }

    /// Changes the longest reply accepted.
    pub(crate) fn set_cap(&mut self, cap: usize) {
        self.decoder.set_cap(cap);
    }

    /// The next whole reply, handed to `read` as its exact bytes;
    /// `Ok(None)` when `deadline` passed first (the bytes read so far are
    /// kept for the next call). A reply that is not RESP2 or is too long is
    /// an `InvalidData` error, the server closing the connection an
    /// `UnexpectedEof` one.
    pub(crate) fn read_until<T>(
        &mut self,
        deadline: Option<Instant>,
        mut read: impl FnMut(&[u8]) -> T,
    ) -> io::Result<Option<T>> {
        loop {
            match self.decoder.next_with(&mut read) {
                Ok(Some(value)) => return Ok(Some(value)),
                Ok(None) => {}
                Err(e) => return Err(io::Error::new(io::ErrorKind::InvalidData, e.0)),
            }
            let left = match time_left(deadline) {
                Ok(left) => left,
                Err(_) => return Ok(None),
            };
            self.stream.set_read_timeout(left)?;
            match self.stream.read_into(self.decoder.buffer()) {
                Ok(0) => {
                    return Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "the server closed the connection",
                    ))
                }
                Ok(_) => {}
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock
                            | io::ErrorKind::TimedOut
                            | io::ErrorKind::Interrupted
                    ) => {}
                Err(e) => return Err(e),
            }
        }
    }
}
