//! The process-wide client built from `REDIS_URL`.

mod support;

use support::RedisServer;

#[test]
fn global_client_comes_from_redis_url_and_is_built_once() {
    let server = RedisServer::start();
    // The only test in this binary, so no other thread reads the variable.
    std::env::set_var("REDIS_URL", server.url());
    let first = redhold::global().expect("global client");
    let second = redhold::global().expect("global client again");
    assert!(std::ptr::eq(first, second), "built twice");
    assert_eq!(first.id(), second.id());

    let guard = first.lock("global:lock").lock().expect("lock");
    assert_eq!(
        server.cmd::<u32>(&["EXISTS", "global:lock"]),
        1,
        "not on REDIS_URL's server"
    );
    guard.unlock().expect("unlock");
    first.shutdown().expect("shutdown");
}
