//! Who holds a lock: a client's name, host and pid travel in the name of
//! its connections, where `inspect` (and so `redhold show`) finds them.

mod support;

use redhold::{Client, Error};
use support::RedisServer;

#[test]
fn inspect_names_the_holding_client_by_name_host_and_pid() {
    let server = RedisServer::start();
    let client = server.builder().name("billing-worker").build().unwrap();
    let me = client.identity().clone();
    assert_eq!(me.name, "billing-worker");
    assert_eq!(me.pid, std::process::id());
    assert!(!me.host.is_empty());

    let _guard = client.lock("identity:a").lock().unwrap();
    let info = server.client().inspect("identity:a").unwrap();
    assert_eq!(info.holders.len(), 1);
    assert_eq!(info.holders[0].identity.as_ref(), Some(&me));
    assert_eq!(
        me.to_string(),
        format!("billing-worker@{}:{}", me.host, me.pid)
    );

    // CLIENT LIST shows it too, for operators without redhold.
    let list: String = server.cmd(&["CLIENT", "LIST"]);
    assert!(
        list.contains(&format!("name=redhold:{}:", client.id())),
        "{list}"
    );
}

#[test]
fn a_holder_without_a_live_connection_has_no_identity() {
    let server = RedisServer::start();
    let gone = server.builder().name("gone").build().unwrap();
    let guard = gone.lock("identity:b").lock().unwrap();
    std::mem::forget(guard);
    gone.shutdown().unwrap();
    // The hold may be left (forgotten guard); its client's connections
    // are closed, so nobody can say who it was.
    let info = server.client().inspect("identity:b").unwrap();
    for holder in &info.holders {
        assert_eq!(holder.identity, None, "{info:?}");
    }
}

#[test]
fn a_user_who_may_not_name_connections_still_locks() {
    let server = RedisServer::start();
    let refused = support::server_version().acl_refusing_client_setname();
    let () = server.cmd(&[
        "ACL", "SETUSER", "plain", "on", ">pw", "~*", "&*", "+@all", refused,
    ]);
    let url = format!("redis://plain:pw@127.0.0.1:{}/", server.port());
    let client = Client::builder().url(&url).name("unnamed").build().unwrap();
    let _guard = client.lock("identity:c").lock().unwrap();
    let info = server.client().inspect("identity:c").unwrap();
    assert_eq!(info.holders[0].identity, None);
}

#[test]
fn an_empty_name_is_refused() {
    let err = Client::builder().name("").build().unwrap_err();
    assert!(matches!(err, Error::InvalidArgument { .. }), "{err:?}");
}
