//! Faults on an acquire's reply, at the worst moment: the script ran (or
//! not), and the reply comes back garbled, cut mid-way or not at all (the
//! connection dies as it arrives). Armed through the fault proxy on the
//! actor's own next acquire of one lock, a first hold or a re-entry.
//!
//! Judged on the spot, by the actor that made the call: the thread's hold
//! count in Redis (`hold_count()`) must have grown by exactly what the
//! call returned, one hold with a guard and none without. A hold more is
//! a hold in Redis that no guard owns (it blocks everyone until its TTL)
//! or a re-entry Redis counts and the thread will never release. The
//! count is compared with a baseline read just before, not with the
//! guards, so that holds the model already judges otherwise (a lease past
//! its end, a phantom count) do not blur it.

use std::sync::atomic::{AtomicU64, Ordering};

use redhold::Client;

use crate::fault_proxy::{Action, Armed, Arming, Matcher, Rule};
use crate::history::{ActorId, Event, Recorder};
use crate::rng::Rng;
use crate::targets::{self, ClientSet, Kind, Target};

/// Percent of acquires (behind the proxy) whose reply is spoiled.
const SPOIL: u64 = 6;

/// An acquire reply with a non-integer where the hold count goes.
const GARBLED: &[u8] = b"*2\r\n:0\r\n:abc\r\n";

/// Counts the starts and ends of server faults (`faults.rs`) in this
/// process: a kill or a stall during a spoiled acquire may also fail the
/// look that settles it (a documented limit, judged by the oracle's other
/// rules), so such acquires are not judged here.
static FAULT_MOMENTS: AtomicU64 = AtomicU64::new(0);

/// A server fault starts or ends now.
pub(crate) fn fault_moment() {
    FAULT_MOMENTS.fetch_add(1, Ordering::SeqCst);
}

/// A spoiled acquire under way: the rule, and the count before it.
pub(crate) struct Spoiled {
    armed: Armed,
    what: &'static str,
    kind: Kind,
    name: &'static str,
    before: u32,
    /// [`FAULT_MOMENTS`] when it was armed.
    faults_before: u64,
}

/// The acquire script a kind runs (the proxy matches it by SHA).
fn acquire_script(kind: Kind) -> Option<&'static str> {
    Some(match kind {
        Kind::Plain | Kind::Spin => include_str!("../../lua/acquire.lua"),
        Kind::Fair => include_str!("../../lua/fair_acquire.lua"),
        Kind::Fenced => include_str!("../../lua/fenced_acquire.lua"),
        Kind::Read => include_str!("../../lua/read_acquire.lua"),
        Kind::Write => include_str!("../../lua/write_acquire.lua"),
        Kind::Multi | Kind::Red => return None,
    })
}

/// How a reply is spoiled, by number (`spoil` of [`arm`]).
const SPOILS: [(Action, &str); 3] = [
    (Action::GarbleReply(GARBLED), "garbled"),
    (Action::CutMidReply, "cut mid-way"),
    (Action::LoseReply, "lost"),
];

/// Arms the proxy to spoil the reply of the calling thread's next acquire
/// of `target` with `set`, after reading the thread's hold count: the
/// `spoil`-th way of [`SPOILS`] (modulo their number) when one is given,
/// else now and then at random. `None` when not armed.
pub(crate) fn arm(
    rng: &mut Rng,
    proxy: Option<&Arming>,
    set: &ClientSet,
    target: &Target,
    spoil: Option<u8>,
) -> Option<Spoiled> {
    let proxy = proxy?;
    let script = acquire_script(target.kind)?;
    let (action, what) = match spoil {
        Some(n) => SPOILS[usize::from(n) % SPOILS.len()],
        None if rng.chance(SPOIL) => {
            rng.weighted(&[(40, SPOILS[0]), (30, SPOILS[1]), (30, SPOILS[2])])
        }
        None => return None,
    };
    let name = target.names[0];
    let faults_before = FAULT_MOMENTS.load(Ordering::SeqCst);
    let before = targets::hold_count(set, target.kind, name, false).ok()?;
    let client: &Client = &set.clients[0];
    let uuid = client.id().to_string();
    let full = set.full(name);
    let armed = proxy.arm(Rule {
        matcher: Matcher {
            commands: vec!["EVALSHA".into()],
            exact: Some(redis::Script::new(script).get_hash().as_bytes().to_vec()),
            containing: vec![full.into_bytes(), uuid.into_bytes()],
            excluding: Vec::new(),
            skip: 0,
        },
        action,
    });
    Some(Spoiled {
        armed,
        what,
        kind: target.kind,
        name,
        before,
        faults_before,
    })
}

impl Spoiled {
    /// After the call (`took`: it returned a guard; `guards`: the holds of
    /// this lock the thread had before, with or without their guard, as it
    /// counts them): takes the rule back and, when it fired, flags a count
    /// in Redis beyond the guards.
    pub(crate) fn judge(
        self,
        set: &ClientSet,
        took: bool,
        guards: u32,
        actor: ActorId,
        recorder: &Recorder,
    ) {
        if !self.armed.disarm() {
            return;
        }
        recorder.record(Event::Note {
            text: format!(
                "actor {actor}: the reply of its acquire of {} {} was {}",
                self.kind.as_str(),
                self.name,
                self.what
            ),
        });
        let Ok(after) = targets::hold_count(set, self.kind, self.name, false) else {
            return;
        };
        let expected = self.before + u32::from(took);
        // Odd: a fault was under way when it was armed.
        let fault_nearby = self.faults_before % 2 == 1
            || FAULT_MOMENTS.load(Ordering::SeqCst) != self.faults_before;
        // No excuse when Redis had lost holds the thread still counts (a
        // force-unlock, a restart): a re-entry never takes the lock anew,
        // so a count above the baseline is this call's, whatever the
        // guards say.
        if self.before < guards {
            recorder.record(Event::Note {
                text: format!(
                    "actor {actor}: Redis had lost {} of its {guards} holds of {} {} before \
                     its spoiled acquire",
                    guards - self.before,
                    self.kind.as_str(),
                    self.name,
                ),
            });
        }
        if after > expected && !fault_nearby {
            recorder.record(Event::Flag {
                actor,
                text: format!(
                    "hold counts disagree with Redis: after an acquire of {} {} whose reply \
                     was {} {}, Redis counts {after} holds for the thread, its guards {expected} \
                     (a hold no guard owns)",
                    self.kind.as_str(),
                    self.name,
                    self.what,
                    if took { "returned a guard" } else { "failed" },
                ),
            });
        }
    }
}
