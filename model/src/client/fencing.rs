//! The fencing rule: a token granted to a holder is above every token of
//! a generation another thread still holds (the resource it guards never
//! sees an older holder's token after a newer one's). A restart without
//! persistence resets the counter: holds it wiped are excused.

use super::state::State;

/// Thread `(c, t)` was granted `token`.
pub fn granted(s: &mut State, c: u8, t: u8, token: Option<i64>) {
    let Some(token) = token else {
        return;
    };
    let older = s.clients.iter().enumerate().any(|(oc, client)| {
        client.up
            && client.threads.iter().enumerate().any(|(ot, thread)| {
                (oc as u8, ot as u8) != (c, t)
                    && !thread.ghost.wiped
                    && thread
                        .gen
                        .is_some_and(|g| g.count > 0 && g.token.is_some_and(|o| o >= token))
            })
    });
    if older {
        s.broken.token_regressed = true;
    }
}
