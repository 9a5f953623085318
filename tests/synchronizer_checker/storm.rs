//! The faults a schedule's storm thread brings, besides the per-request
//! rules the actors arm: partitions longer than a request latch's life
//! (every connection through the proxy cut, new ones held silent), one
//! right after a lost reply (the call's next attempt then comes after its
//! latch expired), and server stalls (`DEBUG SLEEP`) whose queued requests
//! run after their callers gave up. [`Weather`] tells the liveness watch
//! when the last one ended.

use std::thread;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use crate::fault_proxy::{stall_server, Action, Arming, Matcher, Rule};
use crate::Rng;

/// How long a request latch lives with the checker's client settings:
/// (connect + response) × (retries + 1) + retry delay × retries + 1 s.
pub(crate) const LATCH_LIFE: Duration = Duration::from_millis(2300);

/// Whether a storm fault is on, and when the last one ended.
#[derive(Debug)]
pub(crate) struct Weather {
    /// Faults on now, and the end of the last one.
    state: Mutex<(u32, Instant)>,
}

impl Weather {
    pub(crate) fn new() -> Weather {
        Weather {
            state: Mutex::new((0, Instant::now())),
        }
    }

    fn begin(&self) {
        self.state.lock().0 += 1;
    }

    fn end(&self) {
        let mut state = self.state.lock();
        state.0 -= 1;
        state.1 = Instant::now();
    }

    /// When the last fault ended; `None` while one is on.
    pub(crate) fn calm_since(&self) -> Option<Instant> {
        let state = self.state.lock();
        (state.0 == 0).then_some(state.1)
    }
}

/// Runs one schedule's storm: from one to three faults at random moments
/// of the first `window`, each over before the next begins. `names` are
/// the keys whose script calls a lost reply may hit. Returns what it did.
pub(crate) fn blow(
    rng: &mut Rng,
    proxy: &Arming,
    server_port: u16,
    weather: &Weather,
    names: &[String],
    window: Duration,
) -> Vec<String> {
    let started = Instant::now();
    let mut done = Vec::new();
    while started.elapsed() < window && done.len() < 3 {
        thread::sleep(Duration::from_millis(200 + rng.below(1000)));
        let at = started.elapsed().as_secs_f64();
        // Longer than a latch lives: a resend after it is a fresh call.
        let partition = LATCH_LIFE + Duration::from_millis(700 + rng.below(2000));
        let what = match rng.below(3) {
            0 => {
                let name = &names[rng.below(names.len() as u64) as usize];
                // The partition starts as the reply is lost: the caller's
                // resends all meet it.
                weather.begin();
                let armed = proxy.arm(Rule {
                    matcher: Matcher::script(name, &[]),
                    action: Action::LoseReplyAndPartition,
                });
                let fired = armed.wait_fired(Duration::from_millis(1500));
                armed.disarm();
                proxy.partition(partition);
                weather.end();
                format!(
                    "{}partition {} ms at {at:.1} s",
                    if fired {
                        format!("lost reply ({name}) + ")
                    } else {
                        String::new()
                    },
                    partition.as_millis()
                )
            }
            1 => {
                weather.begin();
                proxy.partition(partition);
                weather.end();
                format!("partition {} ms at {at:.1} s", partition.as_millis())
            }
            _ => {
                let stall = Duration::from_millis(1000 + rng.below(2000));
                weather.begin();
                let said = stall_server(server_port, stall).join();
                weather.end();
                match said {
                    Ok(Ok(())) => format!("DEBUG SLEEP {} ms at {at:.1} s", stall.as_millis()),
                    other => panic!("DEBUG SLEEP failed: {other:?}"),
                }
            }
        };
        done.push(what);
    }
    done
}
