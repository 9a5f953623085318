//! Who the holders and waiters are: the identities redhold clients give
//! their connections (see `identity.rs`), read from `CLIENT LIST` on every
//! server that holds keys. A Redisson client, a client that has gone, or a
//! user without the right to run `CLIENT LIST` leaves them unknown.

use std::collections::HashMap;

use redis::{ConnectionLike, RedisResult};
use uuid::Uuid;

use super::info::LockInfo;
use crate::identity::ClientIdentity;
use crate::server::Server;

/// The identity of every redhold client connected to the deployment, by
/// client id; empty when `CLIENT LIST` is refused or fails (an identity is
/// a courtesy to the reader, never a reason to fail an inspection).
pub(super) fn identities(server: &Server) -> HashMap<Uuid, ClientIdentity> {
    let found = read_all(server);
    found.unwrap_or_else(|e| {
        log::debug!("client identities unknown: CLIENT LIST failed: {e}");
        HashMap::new()
    })
}

fn read_all(server: &Server) -> crate::error::Result<HashMap<Uuid, ClientIdentity>> {
    #[cfg(feature = "cluster")]
    if server.is_cluster() {
        let mut all = HashMap::new();
        for (_, mut conn) in server.connect_masters()? {
            all.extend(read(&mut conn)?);
        }
        return Ok(all);
    }
    server.run(read)
}

/// The identities in one server's `CLIENT LIST`.
fn read(conn: &mut dyn ConnectionLike) -> RedisResult<HashMap<Uuid, ClientIdentity>> {
    let list: String = redis::cmd("CLIENT").arg("LIST").query(conn)?;
    Ok(list
        .lines()
        .filter_map(|line| {
            let name = line.split(' ').find_map(|f| f.strip_prefix("name="))?;
            ClientIdentity::parse(name)
        })
        .collect())
}

/// Fills in the identity of each holder and queued waiter of `info` that
/// `known` has.
pub(super) fn attach(info: &mut LockInfo, known: &HashMap<Uuid, ClientIdentity>) {
    for holder in &mut info.holders {
        holder.identity = known.get(&holder.client).cloned();
    }
    for waiter in &mut info.queue {
        waiter.identity = waiter
            .field
            .rsplit_once(':')
            .and_then(|(client, _)| Uuid::try_parse(client).ok())
            .and_then(|client| known.get(&client).cloned());
    }
}
