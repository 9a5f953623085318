//! One channel local threads wait on: its waiters, lock by lock
//! (`locks.rs`, `waiters.rs`), and where its subscription stands.
//!
//! Subscription states of a channel (changed under its mutex; the subscriber
//! thread applies the server's confirmations in the order they arrive, which
//! is the order the server ran the commands):
//!
//! | state         | meaning                                   | next                                   |
//! |---------------|-------------------------------------------|----------------------------------------|
//! | `Requested`   | SUBSCRIBE sent, or due (not sent yet, send failed, connection lost) | `Subscribed` on its confirmation |
//! | `Subscribed`  | messages flow                             | `Unsubscribing` after the linger; `Requested` if an UNSUBSCRIBE confirmation shows the server dropped it |
//! | `Unsubscribing` | UNSUBSCRIBE sent                        | removed on confirmation, or `Requested` if a waiter came back |
//!
//! Beside the state, a channel records the connection its SUBSCRIBE went out
//! on (`link`), as long as that SUBSCRIBE or the subscription it made lasts.
//! A `Requested` channel without a link has nothing on its way to the
//! server: nobody waits for a confirmation then, and once no waiter is left
//! the channel is forgotten.

mod park;

use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

use super::locks::Locks;
use super::waiters::Waiters;

/// Where a channel's subscription stands; see the module table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SubState {
    Requested,
    Subscribed,
    Unsubscribing,
}

/// The state of one channel.
#[derive(Debug)]
pub(crate) struct Channel {
    pub(crate) name: Arc<str>,
    state: Mutex<ChannelState>,
    /// Signalled when the subscription is confirmed or the connection drops.
    confirmed: Condvar,
}

#[derive(Debug)]
struct ChannelState {
    sub: SubState,
    /// The waiters of each lock announced on this channel.
    locks: Locks,
    /// When the last waiter left, for the linger.
    idle_since: Option<Instant>,
    /// Wake every waiter when the next confirmation arrives: the connection
    /// was lost, or a waiter stopped waiting for the confirmation, so
    /// releases may have gone unheard.
    wake_all_on_confirm: bool,
    /// The connection the SUBSCRIBE went out on (a cluster node in sharded
    /// mode; always the one connection otherwise), while that SUBSCRIBE or
    /// the subscription it made lasts; `None` while nothing is sent.
    link: Option<Arc<str>>,
    /// How many times a SUBSCRIBE was about to be sent: tells a failed send
    /// from a later one that went out (see [`Channel::send_failed`]).
    sends: u64,
    /// The client shut down: nobody waits for a confirmation any more.
    closed: bool,
}

/// What an UNSUBSCRIBE confirmation (or a subscription the server ended)
/// means for a channel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Unsubscribed {
    /// Not about this channel's current subscription: nothing to do.
    Ignored,
    /// Gone, and nobody waits: forget the channel.
    Unwanted,
    /// Gone while waiters need it: subscribe it again.
    Wanted,
}

/// What the linger says of a channel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Idle {
    /// Keep it as it is.
    Keep,
    /// Nothing on the server and nobody waits: drop it.
    Forget,
    /// Idle past the linger: send UNSUBSCRIBE.
    Unsubscribe,
}

impl Channel {
    /// A channel with its first waiter, a waiter for `lock`, whose
    /// SUBSCRIBE is due.
    pub(super) fn new(name: &str, lock: &str) -> Channel {
        let mut locks = Locks::default();
        locks.join(lock);
        Channel {
            name: Arc::from(name),
            state: Mutex::new(ChannelState {
                sub: SubState::Requested,
                locks,
                idle_since: None,
                wake_all_on_confirm: false,
                link: None,
                sends: 0,
                closed: false,
            }),
            confirmed: Condvar::new(),
        }
    }

    /// Counts one more waiter, for `lock`; true when the caller must send
    /// SUBSCRIBE (the channel was being unsubscribed).
    pub(super) fn add_waiter(&self, lock: &str) -> bool {
        let mut st = self.state.lock();
        st.locks.join(lock);
        st.idle_since = None;
        if st.sub == SubState::Unsubscribing {
            st.sub = SubState::Requested;
            return true;
        }
        false
    }

    /// Counts one waiter for `lock` less; the channel lingers subscribed.
    pub(super) fn remove_waiter(&self, lock: &str) {
        let mut st = self.state.lock();
        st.locks.leave(lock);
        if st.locks.count() == 0 {
            st.idle_since = Some(Instant::now());
        }
    }

    /// The server no longer holds the subscription on `link` (see
    /// [`Registry::unsubscribed`](super::registry::Registry::unsubscribed)).
    pub(super) fn server_unsubscribed(&self, link: &str) -> Unsubscribed {
        let mut st = self.state.lock();
        if st.link.as_deref() != Some(link) || st.sub == SubState::Requested {
            // Not the connection this channel lives on (it moved), or a
            // SUBSCRIBE that the server runs after this is on its way.
            return Unsubscribed::Ignored;
        }
        if st.locks.count() == 0 {
            return Unsubscribed::Unwanted;
        }
        st.sub = SubState::Requested;
        st.link = None;
        st.wake_all_on_confirm = true;
        drop(st);
        self.confirmed.notify_all();
        Unsubscribed::Wanted
    }

    /// Whether nobody waits on the channel and it is not subscribed.
    #[cfg(feature = "cluster")]
    pub(super) fn is_unwanted(&self) -> bool {
        let st = self.state.lock();
        st.locks.count() == 0 && st.sub == SubState::Requested
    }

    /// What the linger says of this channel on `link`; a channel marked
    /// [`Idle::Unsubscribe`] is `Unsubscribing` from now on.
    pub(super) fn idle(&self, linger: Duration, link: &str) -> Idle {
        let mut st = self.state.lock();
        if st.locks.count() == 0 && st.sub == SubState::Requested && st.link.is_none() {
            // Nothing on the server, nobody to subscribe for.
            return Idle::Forget;
        }
        if st.link.as_deref() != Some(link) {
            return Idle::Keep;
        }
        match st.idle_since {
            Some(since) if st.locks.count() == 0 && since.elapsed() >= linger => match st.sub {
                SubState::Subscribed => {
                    st.sub = SubState::Unsubscribing;
                    Idle::Unsubscribe
                }
                // Never confirmed: nothing to undo on the server once the
                // reply arrives, but keep it until then.
                SubState::Requested | SubState::Unsubscribing => Idle::Keep,
            },
            _ => Idle::Keep,
        }
    }

    /// Whether the channel's SUBSCRIBE last went out on `link`.
    pub(super) fn is_on(&self, link: &str) -> bool {
        self.state.lock().link.as_deref() == Some(link)
    }

    /// The client shuts down: wakes every waiter and ends every wait for a
    /// confirmation.
    pub(super) fn close(&self) {
        let mut st = self.state.lock();
        st.closed = true;
        st.locks.wake_all();
        drop(st);
        self.confirmed.notify_all();
    }

    /// How many waiters are parked now.
    #[cfg(test)]
    pub(super) fn parked_now(&self) -> usize {
        self.state.lock().locks.parked_now()
    }

    /// A local thread released `lock` and announced it to `heard`
    /// subscribers (when the script says): if waiters of that lock are
    /// parked here, the oldest is about to be woken, so newcomers stand back
    /// for `grace`, and the one woken may owe other processes a courtesy
    /// first.
    pub(crate) fn expect_handoff(&self, lock: &str, grace: Duration, heard: Option<u64>) {
        let mut st = self.state.lock();
        // Our own subscriber is among those who heard, when subscribed.
        let ours = u64::from(st.sub == SubState::Subscribed);
        let others_heard = heard.is_some_and(|heard| heard > ours);
        if let Some(waiters) = st.locks.of(lock) {
            waiters.expect_handoff(grace, others_heard);
        }
    }

    /// Runs `f` on the waiters of `lock` under the channel's mutex;
    /// `None` when no thread ever waited for `lock` here. Waiters of other
    /// locks on this channel are out of `f`'s reach: a hand-over, a
    /// courtesy or a passed-on wake-up concerns one lock only.
    pub(super) fn with_lock<R>(&self, lock: &str, f: impl FnOnce(&mut Waiters) -> R) -> Option<R> {
        self.state.lock().locks.of(lock).map(f)
    }

    /// Whether the server has confirmed the subscription.
    pub(crate) fn is_subscribed(&self) -> bool {
        self.state.lock().sub == SubState::Subscribed
    }

    /// While subscribed, how many disturbances the channel has had: the
    /// same number later, subscribed, means no release was announced on
    /// it in between (see `Subscription::quiet_since`).
    pub(crate) fn quiet_mark(&self) -> Option<u64> {
        let st = self.state.lock();
        (st.sub == SubState::Subscribed).then(|| st.locks.disturbances())
    }

    /// Waits up to `timeout` (no limit if it cannot be represented) for
    /// the subscription to be confirmed. Stops waiting early when nothing
    /// is on its way to be confirmed (no SUBSCRIBE sent, or its connection
    /// lost) or the client shuts down.
    ///
    /// When it is not confirmed, the caller goes on to check the lock and
    /// park without it, and a release announced before the subscription
    /// takes effect is never heard; so the confirmation, when it comes,
    /// wakes every waiter to check again.
    pub(crate) fn wait_subscribed(&self, timeout: Duration) -> bool {
        let deadline = Instant::now().checked_add(timeout);
        let mut st = self.state.lock();
        while st.sub != SubState::Subscribed && !st.closed && st.link.is_some() {
            let timed_out = match deadline {
                Some(deadline) => self.confirmed.wait_until(&mut st, deadline).timed_out(),
                None => {
                    self.confirmed.wait(&mut st);
                    false
                }
            };
            if timed_out {
                break;
            }
        }
        if st.sub == SubState::Subscribed {
            return true;
        }
        st.wake_all_on_confirm = true;
        false
    }

    /// Whether a local thread still waits on this channel, so that it must
    /// be subscribed again after a reconnect.
    pub(crate) fn has_waiters(&self) -> bool {
        self.state.lock().locks.count() > 0
    }

    /// Records the connection a SUBSCRIBE for this channel is about to go
    /// out on (before it is sent, so that a connection lost right after
    /// the send finds the channel). Returns a token for
    /// [`send_failed`](Self::send_failed).
    pub(crate) fn assign(&self, link: &Arc<str>) -> u64 {
        let mut st = self.state.lock();
        st.link = Some(Arc::clone(link));
        st.sends += 1;
        st.sends
    }

    /// The latest SUBSCRIBE's token, for a caller that finds it cannot send
    /// one at all: see [`send_failed`](Self::send_failed).
    pub(crate) fn last_send(&self) -> u64 {
        self.state.lock().sends
    }

    /// The SUBSCRIBE assigned with `token` could not be sent (or, with the
    /// token of [`last_send`](Self::last_send), none could): nothing is on
    /// its way, unless another SUBSCRIBE was assigned since.
    pub(crate) fn send_failed(&self, token: u64) {
        let mut st = self.state.lock();
        if st.sends == token && st.sub == SubState::Requested {
            st.link = None;
        }
        drop(st);
        self.confirmed.notify_all();
    }

    /// Whether a waiter still needs this channel subscribed and it is not.
    #[cfg(feature = "cluster")]
    pub(crate) fn wants_subscription(&self) -> bool {
        let st = self.state.lock();
        st.locks.count() > 0 && st.sub == SubState::Requested
    }

    /// Whether this channel is unconfirmed on `link`: its SUBSCRIBE went
    /// out there and has no reply yet.
    #[cfg(feature = "cluster")]
    pub(crate) fn unconfirmed_on(&self, link: &str) -> bool {
        let st = self.state.lock();
        st.sub == SubState::Requested && st.link.as_deref() == Some(link)
    }

    /// The server confirmed the subscription.
    pub(crate) fn confirm(&self) {
        let mut st = self.state.lock();
        if st.sub == SubState::Requested {
            st.sub = SubState::Subscribed;
            st.locks.disturbed();
            if std::mem::take(&mut st.wake_all_on_confirm) {
                st.locks.wake_all();
            }
        }
        drop(st);
        self.confirmed.notify_all();
    }

    /// The connection was lost: nothing is subscribed any more, and no
    /// confirmation will come.
    pub(crate) fn connection_lost(&self) {
        let mut st = self.state.lock();
        st.sub = SubState::Requested;
        st.link = None;
        st.wake_all_on_confirm = true;
        st.locks.wake_all();
        drop(st);
        self.confirmed.notify_all();
    }

    /// A release was announced on this channel, for one of its locks (the
    /// message does not say which): one wake-up for each lock's waiters.
    pub(crate) fn wake_one_each(&self) {
        self.state.lock().locks.wake_one_each();
    }

    /// Wakes every waiter, parked or about to park.
    pub(crate) fn wake_all(&self) {
        self.state.lock().locks.wake_all();
    }

    /// A semaphore's or a latch's message: every waiter looks once.
    pub(crate) fn wake_each_once(&self) {
        self.state.lock().locks.wake_each_once();
    }
}
