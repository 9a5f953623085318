//! The fault thread: connection kills, short server stalls and server
//! restarts, at random moments, each recorded with its start and end so the
//! oracle knows which holds a fault may have disturbed.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;
use std::thread;
use std::time::Instant;

use parking_lot::Mutex;

use crate::history::{Event, Recorder};
use crate::rng::Rng;
use crate::support::RedisServer;

/// Restarts lose every lock of a server (a documented limit), so a few per
/// schedule are enough.
const MAX_RESTARTS: u32 = 2;

#[derive(Debug, Clone, Copy)]
enum Fault {
    KillNormal,
    KillPubsub,
    Sleep,
    Restart,
}

/// Injects faults until `until`, every 250–900 ms; returns a summary like
/// `kill-normal 5, kill-pubsub 4, sleep 3, restart 1`.
pub(crate) fn run(
    servers: &[Arc<Mutex<RedisServer>>],
    mut rng: Rng,
    recorder: &Recorder,
    until: Instant,
) -> String {
    let mut counts = [0u32; 4];
    loop {
        let pause = rng.millis(250, 900);
        if Instant::now() + pause >= until {
            break;
        }
        thread::sleep(pause);
        let mut fault = rng.weighted(&[
            (35, Fault::KillNormal),
            (30, Fault::KillPubsub),
            (25, Fault::Sleep),
            (10, Fault::Restart),
        ]);
        if matches!(fault, Fault::Restart) && counts[3] >= MAX_RESTARTS {
            fault = Fault::KillNormal;
        }
        // Mostly the main server, which every kind uses; the others carry
        // only the red locks.
        let server = if rng.chance(70) {
            0
        } else {
            rng.range(1, 2) as u8
        };
        let target = &servers[usize::from(server)];
        let stall_ms = rng.range(100, 400);
        let kind = match fault {
            Fault::KillNormal => "kill-normal".to_owned(),
            Fault::KillPubsub => "kill-pubsub".to_owned(),
            Fault::Sleep => format!("sleep-{stall_ms}ms"),
            Fault::Restart => "restart".to_owned(),
        };
        crate::spoiled::fault_moment();
        recorder.record(Event::FaultStart {
            server,
            kind: kind.clone(),
        });
        let outcome: Result<(), String> = match fault {
            // `skipme` is the default: our own connection survives.
            Fault::KillNormal => target
                .lock()
                .try_cmd::<i64>(&["CLIENT", "KILL", "TYPE", "normal"])
                .map(drop)
                .map_err(|e| e.to_string()),
            Fault::KillPubsub => target
                .lock()
                .try_cmd::<i64>(&["CLIENT", "KILL", "TYPE", "pubsub"])
                .map(drop)
                .map_err(|e| e.to_string()),
            Fault::Sleep => {
                let secs = format!("{:.3}", stall_ms as f64 / 1000.0);
                target
                    .lock()
                    .try_cmd::<()>(&["DEBUG", "SLEEP", &secs])
                    .map_err(|e| e.to_string())
            }
            Fault::Restart => {
                let down_for = rng.millis(50, 300);
                let mut server = target.lock();
                server.stop();
                thread::sleep(down_for);
                catch_unwind(AssertUnwindSafe(|| server.start_again())).map_err(|panic| {
                    panic
                        .downcast_ref::<String>()
                        .cloned()
                        .unwrap_or_else(|| "start_again panicked".into())
                })
            }
        };
        crate::spoiled::fault_moment();
        recorder.record(Event::FaultEnd {
            server,
            kind: kind.clone(),
        });
        if let Err(e) = outcome {
            recorder.record(Event::Note {
                text: format!("fault {kind} on server {server} failed: {e}"),
            });
        }
        counts[fault as usize] += 1;
    }
    format!(
        "kill-normal {}, kill-pubsub {}, sleep {}, restart {}",
        counts[0], counts[1], counts[2], counts[3]
    )
}
