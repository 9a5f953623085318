//! The configurations the client model is checked in: each small enough
//! to be exhausted in CI (`tests/client.rs`), and a deeper one run by
//! hand. Their figures (states, depth, seconds) are in
//! `docs/reliability.md`.

use super::config::{Config, Fault, Kind, Lease, ReleaseMode};
use super::known::Known;

impl Config {
    /// Two clients of one thread each on the plain lock, one watched and
    /// one leased for two ticks, re-entering once, trying (no waits) and
    /// dropping guards, with two faults among cuts and held-back requests:
    /// the lane, the pool's retries, late attempts and their undos, the
    /// worker, the latches and the renewal map's generations.
    pub fn plain_faults() -> Config {
        Config {
            kind: Kind::Plain,
            clients: vec![vec![Lease::Watched], vec![Lease::Ticks(2)]],
            max_holds: 2,
            tries: true,
            waits: false,
            wait_ticks: None,
            release_modes: vec![ReleaseMode::Drop],
            faults: vec![Fault::Cut, Fault::HoldBack],
            fault_budget: 2,
            retries: 1,
            watchdog: 4,
            outage_tolerance: 1,
            mutation: None,
            script_mutation: None,
            excused: Known::ALL.to_vec(),
            owners: Vec::new(),
            sync_replicas: false,
            braced: Vec::new(),
        }
    }

    /// As [`plain_faults`](Self::plain_faults) with `unlock` instead of
    /// drops and one fault: what `unlock` tells its caller.
    pub fn plain_unlock() -> Config {
        Config {
            release_modes: vec![ReleaseMode::Unlock],
            fault_budget: 1,
            ..Config::plain_faults()
        }
    }

    /// Waiting calls (no limit) instead of tries, one fault: parking,
    /// wake-ups and kept wake-ups, the first-busy skip, outages ridden out.
    pub fn plain_waits() -> Config {
        Config {
            tries: false,
            waits: true,
            fault_budget: 1,
            ..Config::plain_faults()
        }
    }

    /// Two threads of one client (watched, and leased for one tick) and a
    /// watched thread of another, each waiting for one hold at a time, no
    /// faults: direct hand-over, reservations, hand-over to a shorter lease
    /// while another client waits, wake-ups within one client.
    pub fn handover() -> Config {
        Config {
            clients: vec![vec![Lease::Watched, Lease::Ticks(1)], vec![Lease::Watched]],
            max_holds: 1,
            fault_budget: 0,
            faults: Vec::new(),
            ..Config::plain_waits()
        }
    }

    /// Tries and drops with a restart without persistence and one cut.
    pub fn restart() -> Config {
        Config {
            faults: vec![Fault::Restart, Fault::Cut],
            ..Config::plain_faults()
        }
    }

    /// Waiting calls with one fault among a partition (healed at any
    /// moment), a crash and a pub/sub connection dropped.
    pub fn outages() -> Config {
        Config {
            faults: vec![Fault::Partition, Fault::Crash, Fault::PubSubDrop],
            ..Config::plain_waits()
        }
    }

    /// The fenced lock, tries and drops, one fault.
    pub fn fenced() -> Config {
        Config {
            kind: Kind::Fenced,
            fault_budget: 1,
            ..Config::plain_faults()
        }
    }

    /// The fenced lock's hand-over (tokens drawn by the release).
    pub fn fenced_handover() -> Config {
        Config {
            kind: Kind::Fenced,
            ..Config::handover()
        }
    }

    /// Another kind's release path (fair, write or read): the two
    /// clients of [`plain_faults`](Self::plain_faults), tries (their waits
    /// are not modelled), drops and unlocks, re-entry, two faults among
    /// cuts and held-back requests: latches, retries, late attempts and
    /// their undos (`above:N`), the worker, renewals.
    pub fn kind_faults(kind: Kind) -> Config {
        Config {
            kind,
            release_modes: vec![ReleaseMode::Drop, ReleaseMode::Unlock],
            ..Config::plain_faults()
        }
    }

    /// [`kind_faults`](Self::kind_faults) in CI: drops only, one fault.
    pub fn kind_ci(kind: Kind) -> Config {
        Config {
            release_modes: vec![ReleaseMode::Drop],
            fault_budget: 1,
            ..Config::kind_faults(kind)
        }
    }

    /// The spin lock: waits back off, no pub/sub, one fault.
    pub fn spin() -> Config {
        Config {
            kind: Kind::Spin,
            ..Config::plain_waits()
        }
    }

    /// Two threads of one client acting for one `Owner` (one field, one
    /// lane, one renewal record: either takes, re-enters or releases a
    /// hold the other took) and a leased thread of another client; tries,
    /// drops and unlocks, one fault among cuts and held-back requests.
    pub fn owner() -> Config {
        Config {
            clients: vec![vec![Lease::Watched, Lease::Watched], vec![Lease::Ticks(2)]],
            owners: vec![(0, 2)],
            release_modes: vec![ReleaseMode::Drop, ReleaseMode::Unlock],
            fault_budget: 1,
            ..Config::plain_faults()
        }
    }

    /// One client: two threads acting for one `Owner` and a thread of its
    /// own (all watched), tries and waits, re-entry, drops, no fault: a
    /// hand-over from the plain thread to a parked thread of the owner
    /// while the owner's other thread re-enters (a148de8).
    pub fn owner_handover() -> Config {
        Config {
            clients: vec![vec![Lease::Watched, Lease::Watched, Lease::Watched]],
            owners: vec![(0, 2)],
            waits: true,
            fault_budget: 0,
            faults: Vec::new(),
            ..Config::plain_faults()
        }
    }

    /// A deeper configuration, by hand: [`owner`](Self::owner) with
    /// waiting calls too (the owner's threads wait for the other client),
    /// no fault (with one, it passes 20M states unexhausted).
    pub fn deep_owner() -> Config {
        Config {
            waits: true,
            fault_budget: 0,
            ..Config::owner()
        }
    }

    /// A deeper configuration, by hand: three threads (two of one
    /// client, the other client's leased longer than the watchdog's
    /// timeout), re-entering once, tries and waits, no faults.
    pub fn deep_threads() -> Config {
        Config {
            clients: vec![vec![Lease::Watched, Lease::Ticks(2)], vec![Lease::Ticks(5)]],
            waits: true,
            fault_budget: 0,
            ..Config::plain_faults()
        }
    }

    /// A deeper configuration, by hand: the two clients of
    /// [`plain_faults`](Self::plain_faults), tries, drops and unlocks, two
    /// faults of every kind.
    pub fn deep_faults() -> Config {
        Config {
            release_modes: vec![ReleaseMode::Drop, ReleaseMode::Unlock],
            faults: vec![
                Fault::Cut,
                Fault::HoldBack,
                Fault::Partition,
                Fault::Restart,
                Fault::PubSubDrop,
                Fault::Crash,
            ],
            fault_budget: 2,
            ..Config::plain_faults()
        }
    }

    /// Two clients of one thread each (watched, and leased for two
    /// ticks), re-entering once, tries and drops, and one fault: the
    /// master's failover to its lagging replica, with or without
    /// `sync_replicas`.
    pub fn failover(sync_replicas: bool) -> Config {
        Config {
            faults: vec![Fault::Failover],
            fault_budget: 1,
            sync_replicas,
            ..Config::plain_faults()
        }
    }

    /// A deeper configuration, by hand: [`failover`](Self::failover) with
    /// drops and unlocks, two faults among the failover, cuts and
    /// held-back requests.
    pub fn deep_failover(sync_replicas: bool) -> Config {
        Config {
            release_modes: vec![ReleaseMode::Drop, ReleaseMode::Unlock],
            faults: vec![Fault::Failover, Fault::Cut, Fault::HoldBack],
            fault_budget: 2,
            ..Config::failover(sync_replicas)
        }
    }

    /// Two locks on one channel (phase 9b): `x` and `{x}` share
    /// `redisson_lock__channel:{x}`. Client 0 has a watched thread on `x`
    /// and one on `{x}`, client 1 a thread on `{x}` leased for two ticks;
    /// waiting calls, one hold at a time, drops, and one fault: a pub/sub
    /// connection dropped. Client 0's releases of `x` publish on the
    /// channel its waiter of `{x}` listens on, and find it parked when
    /// they could hand a lock over; client 1's releases of `{x}` are heard
    /// by a client whose other lock has a joined thread too.
    pub fn shared_channel() -> Config {
        Config {
            clients: vec![vec![Lease::Watched, Lease::Watched], vec![Lease::Ticks(2)]],
            braced: vec![(0, 1), (1, 0)],
            max_holds: 1,
            faults: vec![Fault::PubSubDrop],
            fault_budget: 1,
            ..Config::plain_waits()
        }
    }

    /// A deeper configuration, by hand: [`shared_channel`](Self::shared_channel)
    /// with drops and unlocks, and one fault among cuts, held-back
    /// requests and a pub/sub connection dropped (with tries and re-entry
    /// too, it passes 8.7M states at depth 27 in two minutes, unexhausted).
    pub fn deep_shared_channel() -> Config {
        Config {
            release_modes: vec![ReleaseMode::Drop, ReleaseMode::Unlock],
            faults: vec![Fault::Cut, Fault::HoldBack, Fault::PubSubDrop],
            ..Config::shared_channel()
        }
    }

    /// A deeper configuration, by hand: [`shared_channel`](Self::shared_channel)
    /// with both locks' waiters in one client: client 0's threads on `x`
    /// (watched), `{x}` (watched) and `x` (leased for one tick), client 1's
    /// on `{x}` (leased for two); waits, one hold each, drops, no fault. A
    /// release of `x` hands it to client 0's younger waiter of `x` past its
    /// older waiter of `{x}`, and a message reaches a subscriber with a
    /// waiter of each lock parked.
    pub fn shared_channel_threads() -> Config {
        Config {
            clients: vec![
                vec![Lease::Watched, Lease::Watched, Lease::Ticks(1)],
                vec![Lease::Ticks(2)],
            ],
            faults: Vec::new(),
            fault_budget: 0,
            ..Config::shared_channel()
        }
    }
}
