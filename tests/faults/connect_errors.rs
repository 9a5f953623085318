//! Errors say what happened (promise 4): a connection set-up that gets no
//! answer fails within the connect timeout and says that it timed out, and
//! where; a server that does not speak RESP is called that; a database the
//! server refuses shows the server's own error; a command on a frozen server
//! says it got no reply within the response timeout.
//!
//! The peers that are not Redis are listeners written here: one that accepts
//! and never answers, one that answers like an HTTP server.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use crate::bounded::{self, Bounded};
use crate::common::PROMPTLY;
use crate::support::RedisServer;

const CONNECT_TIMEOUT: Duration = Duration::from_millis(300);
const RESPONSE_TIMEOUT: Duration = Duration::from_millis(300);

/// A TCP listener on a free port that serves each connection with
/// `serve` on a thread of its own, until dropped.
struct FakeServer {
    port: u16,
    stop: Arc<AtomicBool>,
    acceptor: Option<thread::JoinHandle<()>>,
}

impl FakeServer {
    fn start(serve: fn(TcpStream)) -> FakeServer {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind a listener");
        let port = listener.local_addr().expect("local address").port();
        listener
            .set_nonblocking(true)
            .expect("nonblocking listener");
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = Arc::clone(&stop);
        let acceptor = thread::spawn(move || {
            let mut peers = Vec::new();
            while !stopped.load(Ordering::SeqCst) {
                match listener.accept() {
                    Ok((stream, _)) => {
                        stream.set_nonblocking(false).expect("blocking stream");
                        // Kept until the server stops, so that a silent
                        // peer's connections stay open.
                        let kept = stream.try_clone().expect("clone the stream");
                        peers.push(kept);
                        thread::spawn(move || serve(stream));
                    }
                    Err(_) => thread::sleep(Duration::from_millis(5)),
                }
            }
            for peer in peers {
                let _ = peer.shutdown(std::net::Shutdown::Both);
            }
        });
        FakeServer {
            port,
            stop,
            acceptor: Some(acceptor),
        }
    }

    fn address(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }
}

impl Drop for FakeServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(acceptor) = self.acceptor.take() {
            let _ = acceptor.join();
        }
    }
}

/// Reads whatever comes and never answers.
fn never_answer(mut stream: TcpStream) {
    let mut buf = [0u8; 1024];
    while matches!(stream.read(&mut buf), Ok(n) if n > 0) {}
}

/// Answers the first request like an HTTP server that did not understand
/// it, and closes the connection.
fn answer_http(mut stream: TcpStream) {
    let mut buf = [0u8; 1024];
    let _ = stream.read(&mut buf);
    let _ = stream.write_all(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n");
}

/// Builds a client for `url` on another thread and returns its error and
/// how long the build took.
fn build_error(builder: redhold::ClientBuilder) -> (redhold::Error, Duration) {
    let started = Instant::now();
    let building: Bounded<Result<redhold::Client, redhold::Error>> =
        bounded::spawn("build", move || builder.build());
    match building.join_within(PROMPTLY) {
        Ok(_) => panic!("a client was built against a peer that is no Redis server"),
        Err(e) => (e, started.elapsed()),
    }
}

#[test]
fn a_connect_that_gets_no_answer_times_out_within_the_connect_timeout() {
    let peer = FakeServer::start(never_answer);
    // A password and a database make the set-up several commands long:
    // together they get one connect timeout, not one each.
    let url = format!("redis://:secret-pw@{}/3", peer.address());
    let builder = redhold::Client::builder()
        .url(url)
        .connect_timeout(CONNECT_TIMEOUT)
        .response_timeout(RESPONSE_TIMEOUT);
    let (e, took) = build_error(builder);
    let report = e.report();
    eprintln!("silent peer: build failed after {took:?}: {report}");
    assert!(e.is_timeout(), "not a timeout: {report}");
    assert!(e.is_connection_error(), "not a connection error: {report}");
    assert!(
        report.contains(&format!(
            "connecting to {} timed out after 300 ms",
            peer.address()
        )),
        "the error does not say that connecting timed out, and where: {report}"
    );
    assert!(
        !report.contains("secret-pw"),
        "the password is printed: {report}"
    );
    // Generous for a noisy machine, yet below what one timeout per
    // set-up command took (four of them here).
    assert!(
        took < CONNECT_TIMEOUT * 3,
        "the connect took {took:?} with a connect timeout of {CONNECT_TIMEOUT:?}"
    );
}

#[test]
fn a_peer_that_does_not_speak_resp_is_called_that() {
    let peer = FakeServer::start(answer_http);
    let builder = redhold::Client::builder()
        .url(format!("redis://{}/", peer.address()))
        .connect_timeout(CONNECT_TIMEOUT)
        .response_timeout(RESPONSE_TIMEOUT);
    let (e, _) = build_error(builder);
    let report = e.report();
    eprintln!("HTTP peer: {report}");
    assert!(
        report.contains(&format!(
            "the server at {} does not speak the Redis protocol",
            peer.address()
        )),
        "the error does not say the peer is no Redis server: {report}"
    );
    assert!(
        report.contains("HTTP/1.1 400"),
        "the error does not show what the peer answered: {report}"
    );
    assert!(!e.is_timeout(), "called a timeout: {report}");
}

#[test]
fn a_database_out_of_range_shows_the_servers_error() {
    let server = RedisServer::start();
    let builder = redhold::Client::builder()
        .url(format!("redis://127.0.0.1:{}/99", server.port()))
        .connect_timeout(Duration::from_secs(5));
    let (e, _) = build_error(builder);
    let report = e.report();
    eprintln!("database 99: {report}");
    assert!(
        report.contains("DB index is out of range"),
        "the server's error is not shown: {report}"
    );
    assert!(
        !report.contains("unreachable") && !report.contains("check that the server runs"),
        "a refused database is reported as an unreachable server: {report}"
    );
    assert!(!e.is_connection_error(), "called a network error: {report}");
}

/// Thaws the server when dropped, also when the test fails.
struct Frozen<'a>(&'a RedisServer);

impl Drop for Frozen<'_> {
    fn drop(&mut self) {
        self.0.thaw();
    }
}

#[test]
fn a_command_on_a_frozen_server_says_it_got_no_reply_in_time() {
    let server = RedisServer::start();
    let client = server
        .builder()
        .connect_timeout(CONNECT_TIMEOUT)
        .response_timeout(RESPONSE_TIMEOUT)
        .retry_attempts(0)
        .build()
        .expect("client");
    let lock = client.lock("frozen");
    assert!(!lock.is_locked().expect("is_locked before the freeze"));

    server.freeze();
    let frozen = Frozen(&server);
    let asking = {
        let lock = lock.clone();
        bounded::spawn("is_locked", move || lock.is_locked())
    };
    let outcome = asking.join_within(PROMPTLY);
    drop(frozen);
    let e = outcome.expect_err("is_locked answered while the server was frozen");
    let report = e.report();
    eprintln!("frozen server: {report}");
    assert!(e.is_timeout(), "not a timeout: {report}");
    assert!(
        report.contains(&format!(
            "no reply from 127.0.0.1:{} within 300 ms (response timeout)",
            server.port()
        )),
        "the error does not say that the reply timed out, and where: {report}"
    );

    // The same client works again once the server runs.
    assert!(!lock.is_locked().expect("is_locked after the thaw"));
}
