//! A waiting call's last look during an outage ends at the call's deadline
//! (issue 22, part 1, leftover): the server is down when `try_lock_for`
//! begins (an outage), comes back frozen (SIGSTOP: it accepts connections
//! and answers nothing), and the call still ends near its deadline instead
//! of spending the retry rule's whole bound on its last probe.

use std::thread;
use std::time::{Duration, Instant};

use crate::support::RedisServer;
use redhold::Error;

const CONNECT_TIMEOUT: Duration = Duration::from_secs(1);
const RESPONSE_TIMEOUT: Duration = Duration::from_secs(1);
const RETRIES: u32 = 3;

#[test]
fn try_lock_for_ends_at_its_deadline_when_the_server_comes_back_frozen() {
    let mut server = RedisServer::start();
    let client = server
        .builder()
        .connect_timeout(CONNECT_TIMEOUT)
        .response_timeout(RESPONSE_TIMEOUT)
        .retry_attempts(RETRIES)
        .retry_delay(Duration::from_millis(50))
        .build()
        .expect("client");
    let wait = Duration::from_secs(2);
    // The client may look in the moment between the restart and the
    // freeze and simply take the lock: then the scenario did not happen,
    // and it runs again.
    let mut outcome = None;
    for attempt in 0..3 {
        let lock = client.lock(format!("deadline-frozen-{attempt}"));
        server.stop();
        let (result, took) = thread::scope(|s| {
            let call = s.spawn(|| {
                let started = Instant::now();
                (
                    lock.try_lock_for(wait).map(|g| g.is_some()),
                    started.elapsed(),
                )
            });
            // The outage has begun (refused connections); the server comes
            // back frozen before the call's deadline.
            thread::sleep(Duration::from_millis(700));
            server.start_again();
            server.freeze();
            let outcome = call.join().unwrap();
            server.thaw();
            outcome
        });
        if !matches!(result, Ok(true)) {
            outcome = Some((result, took));
            break;
        }
    }
    let Some(outcome) = outcome else {
        panic!("the client took the lock before the freeze three times");
    };
    let (result, took) = outcome;
    assert!(
        matches!(result, Err(Error::Unreachable { .. })),
        "{result:?}"
    );
    // Before the fix the last probe ran the retry rule's bound, up to
    // (1 s + 1 s) × 4 + 3 × 50 ms past the last pause.
    let slack = Duration::from_millis(2000);
    assert!(took < wait + slack, "try_lock_for({wait:?}) took {took:?}");
}
