//! Redis Cluster hash slots: which of the 16384 slots a key belongs to.

/// Number of hash slots in a Redis Cluster.
pub(crate) const SLOTS: u16 = 16384;

/// The slot of `key`: CRC16 (XMODEM) of its hash tag (the part between the
/// first `{` and the next `}`, when not empty) or of the whole key.
pub(crate) fn of(key: &[u8]) -> u16 {
    crc16(hash_tag(key).unwrap_or(key)) % SLOTS
}

fn hash_tag(key: &[u8]) -> Option<&[u8]> {
    let open = key.iter().position(|&b| b == b'{')?;
    let len = key[open + 1..].iter().position(|&b| b == b'}')?;
    (len > 0).then(|| &key[open + 1..open + 1 + len])
}

/// CRC16-CCITT (XMODEM), as Redis Cluster uses it.
fn crc16(bytes: &[u8]) -> u16 {
    let mut crc: u16 = 0;
    for &byte in bytes {
        crc ^= u16::from(byte) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    crc
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_redis_cluster_keyslot() {
        // Values from CLUSTER KEYSLOT on a real server.
        assert_eq!(of(b"foo"), 12182);
        assert_eq!(of(b"somekey"), 11058);
        assert_eq!(of(b""), 0);
    }

    #[test]
    fn hash_tags_pick_the_slot() {
        assert_eq!(of(b"{user1000}.following"), of(b"{user1000}.followers"));
        assert_eq!(of(b"redisson_lock__channel:{orders:42}"), of(b"orders:42"));
        // An empty tag does not count: the whole key is hashed.
        assert_eq!(of(b"foo{}{bar}"), crc16(b"foo{}{bar}") % SLOTS);
        assert_eq!(of(b"foo{{bar}}zap"), of(b"{bar"));
    }
}
