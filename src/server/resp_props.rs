//! Property tests of the RESP reader ([`super::resp::Decoder`]): random and
//! adversarial byte streams, cut at random points, never make it panic or
//! keep more than its cap plus one read; every malformed reply is an error
//! and every well-formed one comes back whole.

use proptest::prelude::*;

use super::resp::{Decoder, Frame, MAX_DEPTH};

/// The cap of the decoders under test: small, so that streams cross it.
const CAP: usize = 512;

fn encode(frame: &Frame, out: &mut Vec<u8>) {
    match frame {
        Frame::Simple(s) => out.extend([&b"+"[..], s, b"\r\n"].concat()),
        Frame::Error(s) => out.extend([&b"-"[..], s, b"\r\n"].concat()),
        Frame::Integer(n) => out.extend(format!(":{n}\r\n").bytes()),
        Frame::Bulk(None) => out.extend(b"$-1\r\n"),
        Frame::Bulk(Some(b)) => {
            out.extend(format!("${}\r\n", b.len()).bytes());
            out.extend(b);
            out.extend(b"\r\n");
        }
        Frame::Array(None) => out.extend(b"*-1\r\n"),
        Frame::Array(Some(items)) => {
            out.extend(format!("*{}\r\n", items.len()).bytes());
            items.iter().for_each(|item| encode(item, out));
        }
    }
}

/// Text of a simple string or error: no CR or LF, never empty (an empty
/// line after the type byte is fine, but keeps the model simple).
fn line() -> impl Strategy<Value = Vec<u8>> {
    proptest::collection::vec(
        any::<u8>().prop_filter("no CR/LF", |b| *b != b'\r' && *b != b'\n'),
        0..12,
    )
}

fn frame() -> impl Strategy<Value = Frame> {
    let leaf = prop_oneof![
        line().prop_map(Frame::Simple),
        line().prop_map(Frame::Error),
        any::<i64>().prop_map(Frame::Integer),
        proptest::option::of(proptest::collection::vec(any::<u8>(), 0..20)).prop_map(Frame::Bulk),
        Just(Frame::Array(None)),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        proptest::collection::vec(inner, 0..4).prop_map(|items| Frame::Array(Some(items)))
    })
}

/// Feeds `bytes` in pieces cut at `cuts`; the frames read, or the first
/// error. Checks after every piece that the buffer stays within the cap
/// plus that piece.
fn feed(bytes: &[u8], cuts: &[usize]) -> Result<Vec<Frame>, String> {
    let mut decoder = Decoder::new(CAP);
    let mut points: Vec<usize> = cuts.iter().map(|c| c % (bytes.len() + 1)).collect();
    points.push(bytes.len());
    points.sort_unstable();
    let (mut frames, mut from) = (Vec::new(), 0);
    for to in points {
        decoder.buffer().extend_from_slice(&bytes[from..to]);
        loop {
            match decoder.next_frame() {
                Ok(Some(frame)) => frames.push(frame),
                Ok(None) => break,
                Err(e) => return Err(e.0),
            }
        }
        assert!(
            decoder.buffered() <= CAP + (to - from),
            "kept {} bytes",
            decoder.buffered()
        );
        from = to;
    }
    Ok(frames)
}

proptest! {
    #[test]
    fn well_formed_replies_come_back_whole_however_cut(
        frames in proptest::collection::vec(frame(), 1..4),
        cuts in proptest::collection::vec(any::<usize>(), 0..8),
    ) {
        let mut bytes = Vec::new();
        frames.iter().for_each(|f| encode(f, &mut bytes));
        // Every one of these fits the cap: 3 levels of 4 items of 20 bytes.
        prop_assert_eq!(feed(&bytes, &cuts), Ok(frames));
    }

    #[test]
    fn random_bytes_never_panic_nor_grow_past_the_cap(
        bytes in proptest::collection::vec(any::<u8>(), 0..2048),
        cuts in proptest::collection::vec(any::<usize>(), 0..16),
    ) {
        let _ = feed(&bytes, &cuts);
    }

    #[test]
    fn random_bytes_after_a_valid_header_never_panic(
        header in prop_oneof![Just("*3\r\n"), Just("$5\r\n"), Just("*2\r\n$3\r\n"), Just(":")],
        bytes in proptest::collection::vec(prop_oneof![Just(b'\r'), Just(b'\n'), Just(b'$'), Just(b'*'), Just(b'-'), Just(b'1'), any::<u8>()], 0..256),
        cuts in proptest::collection::vec(any::<usize>(), 0..8),
    ) {
        let stream = [header.as_bytes(), &bytes].concat();
        let _ = feed(&stream, &cuts);
    }

    #[test]
    fn lengths_past_the_cap_are_refused_before_their_bytes(
        len in (CAP as u64)..u64::MAX,
        array in any::<bool>(),
        cuts in proptest::collection::vec(any::<usize>(), 0..4),
    ) {
        let header = format!("{}{len}\r\n", if array { '*' } else { '$' });
        // Filler that would complete nothing: the error must come from the
        // header alone.
        let stream = [header.as_bytes(), &[b'x'; 64]].concat();
        prop_assert!(feed(&stream, &cuts).is_err());
    }

    #[test]
    fn negative_lengths_other_than_minus_one_are_errors(
        len in 2u64..=i64::MAX as u64,
        array in any::<bool>(),
        nested in any::<bool>(),
    ) {
        let kind = if array { '*' } else { '$' };
        let stream = format!("{}{kind}-{len}\r\n", if nested { "*1\r\n" } else { "" });
        prop_assert!(feed(stream.as_bytes(), &[]).is_err());
    }

    #[test]
    fn nesting_past_the_limit_is_an_error(extra in 1usize..64, cuts in proptest::collection::vec(any::<usize>(), 0..8)) {
        let stream = "*1\r\n".repeat(MAX_DEPTH + extra) + ":1\r\n";
        prop_assert!(feed(stream.as_bytes(), &cuts).is_err());
    }

    #[test]
    fn a_broken_reply_is_an_error_never_a_frame(
        item in frame(),
        junk in prop_oneof![Just(b'?'), Just(b'!'), Just(b'x'), Just(b'\r'), Just(b'#')],
        cuts in proptest::collection::vec(any::<usize>(), 0..8),
    ) {
        // A bulk whose CRLF is replaced, then an unknown type byte.
        let mut bytes = Vec::new();
        encode(&item, &mut bytes);
        let mut broken = b"$2\r\nab".to_vec();
        broken.extend([junk, junk]);
        bytes.extend(&broken);
        let read = feed(&bytes, &cuts);
        prop_assert!(read.is_err(), "{:?}", read);
    }
}
