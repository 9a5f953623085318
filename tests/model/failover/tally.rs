//! From the holds and the crashes to the figures of one run.

use super::actors::Hold;
use super::crash::Crash;

/// What one run counted.
#[derive(Debug, Default, Clone)]
pub(crate) struct Counts {
    pub(crate) failovers: u64,
    pub(crate) holds: u64,
    /// Holds whose section contains a crash of the master.
    pub(crate) across_failover: u64,
    /// Holds whose acquire call began after the replica was starved and
    /// returned before the master was killed: confirmed on a write the
    /// replica never got. `sync_replicas` must make this zero.
    pub(crate) unreplicated: u64,
    /// Sections during which another actor took the same lock (each
    /// counted once, however many sections overlap it).
    pub(crate) incidents: u64,
    /// Incidents whose holder was never told its hold was lost: no
    /// `on_lock_lost`, and its release said `Ok`.
    pub(crate) silent: u64,
    /// Incidents whose holder's release failed otherwise (an outage, or
    /// `ReplicasNotSynced`): not told "lost", but not told "Ok" either.
    pub(crate) release_failed: u64,
    /// One line per silent incident, for the failure message.
    pub(crate) silent_details: Vec<String>,
    /// Holds the client reported lost (`on_lock_lost` or `LockLost`).
    pub(crate) lost_reported: u64,
    /// Releases that said `ReplicasNotSynced`.
    pub(crate) releases_unsynced: u64,
}

/// Counts what `holds` and `crashes` show.
pub(crate) fn count(holds: &mut [Hold], crashes: &[Crash], failovers: u64) -> Counts {
    let mut c = Counts {
        failovers,
        holds: holds.len() as u64,
        ..Counts::default()
    };
    for h in holds.iter() {
        if crashes
            .iter()
            .any(|k| h.start <= k.killed_at && k.killed_at <= h.end)
        {
            c.across_failover += 1;
        }
        if crashes
            .iter()
            .any(|k| k.starved_at <= h.asked && h.start < k.killed_at)
        {
            c.unreplicated += 1;
        }
        c.lost_reported += u64::from(h.reported_lost);
        c.releases_unsynced += u64::from(h.release == "not replicated");
    }
    holds.sort_by_key(|h| (h.name, h.start));
    let origin = crashes
        .first()
        .map_or(holds.first().map(|h| h.asked), |k| Some(k.starved_at));
    for (i, a) in holds.iter().enumerate() {
        // A later section by another actor that began while `a` believed
        // it held: the lock was gone from under `a`.
        let taken = holds[i + 1..]
            .iter()
            .take_while(|b| b.name == a.name && b.start < a.end)
            .find(|b| b.actor != a.actor);
        let Some(b) = taken else { continue };
        c.incidents += 1;
        if !a.reported_lost && a.release != "ok" {
            c.release_failed += 1;
        }
        if !a.reported_lost && a.release == "ok" {
            c.silent += 1;
            let at = |t: std::time::Instant| {
                origin.map_or(0.0, |o| t.saturating_duration_since(o).as_secs_f64())
            };
            c.silent_details.push(format!(
                "{} held by actor {} {:.3}..{:.3} s (asked {:.3}, release said {}), taken by \
                 actor {} at {:.3} s (release said {}); crashes at {:?}",
                a.name,
                a.actor,
                at(a.start),
                at(a.end),
                at(a.asked),
                a.release,
                b.actor,
                at(b.start),
                b.release,
                crashes
                    .iter()
                    .map(|k| (at(k.starved_at), at(k.killed_at)))
                    .collect::<Vec<_>>()
            ));
        }
    }
    c
}
