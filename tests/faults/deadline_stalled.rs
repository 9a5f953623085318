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
    let lock = client.lock("deadline-frozen");
    server.stop();
    let wait = Duration::from_secs(2);
    let outcome = thread::scope(|s| {
        let call = s.spawn(|| {
            let started = Instant::now();
            (
                lock.try_lock_for(wait).map(|g| g.is_some()),
                started.elapsed(),
            )
        });
        // The outage has begun (refused connections); the server comes back
        // frozen before the call's deadline.
        thread::sleep(Duration::from_millis(700));
        server.start_again();
        server.freeze();
        let outcome = call.join().unwrap();
        server.thaw();
        outcome
    });
    let (result, took) = outcome;
    assert!(
        matches!(result, Err(Error::Unreachable { .. })),
        "{result:?}"
    );
    // Before the fix the last probe ran the retry rule's bound, up to
    // (1 s + 1 s) × 4 + 3 × 50 ms past the last pause.
    let slack = Duration::from_millis(1200);
    assert!(took < wait + slack, "try_lock_for({wait:?}) took {took:?}");
}
