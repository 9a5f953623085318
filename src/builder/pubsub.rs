//! The cluster's pub/sub settings of [`ClientBuilder`]: how a cluster
//! client listens, and whom its releases reach, in a fleet whose Redisson
//! releases may listen either way (docs/wire-format.md, *Redisson
//! versions*).

use super::ClientBuilder;

impl ClientBuilder {
    /// Whether a cluster client announces and hears releases with sharded
    /// pub/sub (`SPUBLISH`/`SSUBSCRIBE`, served by the slot's owner) or
    /// classic pub/sub (`PUBLISH`/`SUBSCRIBE`, broadcast to every node).
    /// A waiter hears only the releases announced the way it listens, or
    /// waits out the lock's TTL: redhold's releases reach both kinds of
    /// waiter ([`publish_both_ways`](Self::publish_both_ways)), and a
    /// sharded listener can be told to hear classic releases too
    /// ([`hear_classic_releases`](Self::hear_classic_releases)).
    ///
    /// Defaults to sharded when every master runs Redis 7 or later, as
    /// Redisson 3.28 and later decide; ignored outside a cluster. Redisson
    /// 3.17 to 3.21 listen classically on every cluster, and 3.22 to 3.27
    /// decide by a probe at start (docs/wire-format.md has the table):
    /// `false` matches a fleet whose Java services all listen classically.
    pub fn sharded_pubsub(mut self, sharded: bool) -> Self {
        self.config.sharded_pubsub = Some(sharded);
        self
    }

    /// Whether, on a cluster whose masters all run Redis 7 or later, every
    /// release is announced both ways: with `SPUBLISH` for sharded
    /// listeners (Redisson 3.22 and later, redhold by default) and with
    /// classic `PUBLISH` for classic ones (Redisson 3.17 to 3.21, which
    /// listen with `SUBSCRIBE` on any cluster, and clients told
    /// `sharded_pubsub(false)`), whichever way this client itself listens.
    ///
    /// Defaults to `true`, so that a fleet in the middle of an upgrade from
    /// an older Redisson never waits out a TTL for a redhold release: a
    /// waiter that misses the message is not an error anywhere, only
    /// slow, so a wrong guess would go unnoticed. Both publishes run inside
    /// the release script that already publishes: no command, no round trip
    /// and no connection is added, and the command-count tests are
    /// unchanged. The price is server time: a classic `PUBLISH` on a
    /// cluster is sent to every other node over the cluster bus. Measured
    /// on a three-master Redis 7.0 cluster (docs/wire-format.md), a
    /// release script's run on its node took about 1.5 µs more (3.7 – 5.0
    /// µs against 5.3 – 6.5 µs), and each other node spent about 2.5 µs of
    /// CPU receiving the copy; that part grows with the number of nodes and
    /// the release rate. Turn it off when every client of the cluster
    /// listens sharded. Ignored outside a cluster and on a cluster with a master
    /// older than Redis 7 (which has only classic pub/sub).
    ///
    /// This covers the releases of this client. To hear the releases of
    /// Redisson before 3.22 (which publish classically), see
    /// [`hear_classic_releases`](Self::hear_classic_releases);
    /// docs/wire-format.md has the table of what each Redisson needs.
    pub fn publish_both_ways(mut self, both: bool) -> Self {
        self.config.publish_both_ways = both;
        self
    }

    /// Whether a cluster client that listens with sharded pub/sub (see
    /// [`sharded_pubsub`](Self::sharded_pubsub)) also hears releases
    /// announced with classic `PUBLISH`: those of Redisson 3.17 to 3.21,
    /// of Redisson 3.22 to 3.27 when its start-up probe chose classic
    /// pub/sub, and of clients told `sharded_pubsub(false)`. The client
    /// then keeps one more connection, to any node, subscribed with
    /// `PSUBSCRIBE` to the patterns of redhold's channels: no command per
    /// wait, but that connection receives every classic lock message of
    /// the cluster, this fleet's `publish_both_ways` copies included, and
    /// a waiter may be woken twice by one release (the second time it
    /// looks, finds the lock taken and waits again). And when that
    /// connection is on the node that serves a lock, the receiver count a
    /// release of this client gets back includes it, so the client may
    /// take it for another process's waiter and have its own woken waiter
    /// stand back a moment (a courtesy pause of 1 to 8 ms, which backs off
    /// when unused; [`Stats`](crate::Stats) counts them).
    ///
    /// Defaults to `false`: in a fleet that listens sharded throughout
    /// (redhold, Redisson 3.28+) it would only add that traffic. Turn it on
    /// where Java services that listen classically share locks with this
    /// client; a fleet where every Java service listens classically may
    /// use `sharded_pubsub(false)` instead. Ignored outside a cluster and
    /// when this client listens classically (it hears classic releases
    /// then).
    pub fn hear_classic_releases(mut self, hear: bool) -> Self {
        self.config.hear_classic_releases = hear;
        self
    }
}
