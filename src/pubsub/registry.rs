//! Which channels local threads wait on, and the waiters parked on each.
//!
//! A channel is subscribed while at least one local thread waits on it and
//! for a short linger after the last one leaves, so that repeated contention
//! on the same lock does not pay for SUBSCRIBE every time.
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

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::{self, Thread};
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

use crate::interrupt::Interrupt;

/// Where a channel's subscription stands; see the module table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SubState {
    Requested,
    Subscribed,
    Unsubscribing,
}

/// Why a parked waiter stopped waiting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Wake {
    /// A release was announced (or the connection was re-established): try
    /// the lock again.
    Notified,
    /// The wait time passed without news.
    TimedOut,
    /// The caller's [`Interrupt`] was triggered.
    Interrupted,
}

/// One parked thread.
#[derive(Debug)]
struct Waiter {
    thread: Thread,
    /// Set (under the channel mutex) when a wake-up was handed to this waiter.
    notified: AtomicBool,
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
    /// Local threads between `subscribe` and the end of their wait.
    waiters: usize,
    /// The ones among them parked right now, oldest first.
    parked: VecDeque<Arc<Waiter>>,
    /// Wake-ups that arrived while no waiter was parked, kept for the next
    /// one to park (at most one per waiter), so none is lost.
    permits: usize,
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
    /// Until when a local thread that did not wait must stand back: a
    /// release found waiters parked here, and the one woken should get the
    /// lock rather than a thread that comes back for it at once.
    handoff_until: Option<Instant>,
}

/// All channels local threads wait on, by name.
#[derive(Debug, Default)]
pub(crate) struct Registry {
    channels: Mutex<HashMap<Arc<str>, Arc<Channel>>>,
}

/// What a new waiter must do about the subscription.
pub(crate) enum Joined {
    /// The channel is subscribed or a SUBSCRIBE is on its way.
    Ready(Arc<Channel>),
    /// The caller must send SUBSCRIBE.
    MustSubscribe(Arc<Channel>),
}

impl Registry {
    /// Adds a waiter to `name`, creating the channel entry if needed.
    pub(crate) fn join(&self, name: &str) -> Joined {
        let mut channels = self.channels.lock();
        if let Some(channel) = channels.get(name) {
            let channel = Arc::clone(channel);
            let mut st = channel.state.lock();
            st.waiters += 1;
            st.idle_since = None;
            if st.sub == SubState::Unsubscribing {
                st.sub = SubState::Requested;
                drop(st);
                return Joined::MustSubscribe(channel);
            }
            drop(st);
            return Joined::Ready(channel);
        }
        let channel = Arc::new(Channel {
            name: Arc::from(name),
            state: Mutex::new(ChannelState {
                sub: SubState::Requested,
                waiters: 1,
                parked: VecDeque::new(),
                permits: 0,
                idle_since: None,
                wake_all_on_confirm: false,
                link: None,
                sends: 0,
                closed: false,
                handoff_until: None,
            }),
            confirmed: Condvar::new(),
        });
        channels.insert(Arc::clone(&channel.name), Arc::clone(&channel));
        Joined::MustSubscribe(channel)
    }

    /// Removes a waiter from its channel; the channel lingers subscribed.
    pub(crate) fn leave(&self, channel: &Channel) {
        let mut st = channel.state.lock();
        st.waiters -= 1;
        if st.waiters == 0 {
            st.idle_since = Some(Instant::now());
            st.permits = 0;
        } else {
            st.permits = st.permits.min(st.waiters);
        }
    }

    /// The channel called `name`, if any local thread waits or waited on it.
    pub(crate) fn get(&self, name: &[u8]) -> Option<Arc<Channel>> {
        let name = std::str::from_utf8(name).ok()?;
        self.channels.lock().get(name).cloned()
    }

    /// Every channel, for reconnects and housekeeping.
    pub(crate) fn all(&self) -> Vec<Arc<Channel>> {
        self.channels.lock().values().cloned().collect()
    }

    /// The server confirmed an UNSUBSCRIBE of `channel` on `link`, or ended
    /// the subscription on its own (sharded pub/sub: the slot moved away).
    /// Either way the connection no longer holds the subscription. Returns
    /// whether the channel must be subscribed again, which the caller then
    /// does; a channel nobody waits on is forgotten instead.
    ///
    /// The UNSUBSCRIBE of an idle channel is written after the registry lock
    /// is released (no lock is held during I/O), so a waiter who comes back
    /// meanwhile may get its SUBSCRIBE onto the wire first. The server then
    /// confirms that SUBSCRIBE before the UNSUBSCRIBE, and this is where the
    /// registry notices: a channel still `Requested` has a SUBSCRIBE on its
    /// way that the server runs after the UNSUBSCRIBE (confirmations come in
    /// the order the server ran the commands), and stays as it is; one that
    /// is `Subscribed` was undone by this UNSUBSCRIBE and goes back to
    /// `Requested`, waking its waiters on the next confirmation, since
    /// releases may go unheard until then.
    pub(crate) fn unsubscribed(&self, channel: &Channel, link: &str) -> bool {
        let mut channels = self.channels.lock();
        let mut st = channel.state.lock();
        if st.link.as_deref() != Some(link) || st.sub == SubState::Requested {
            // Not the connection this channel lives on (it moved), or a
            // SUBSCRIBE that the server runs after this is on its way.
            return false;
        }
        if st.waiters == 0 {
            if channels
                .get(&channel.name)
                .is_some_and(|c| std::ptr::eq(Arc::as_ptr(c), channel))
            {
                channels.remove(&channel.name);
            }
            return false;
        }
        st.sub = SubState::Requested;
        st.link = None;
        st.wake_all_on_confirm = true;
        drop(st);
        channel.confirmed.notify_all();
        true
    }

    /// Forgets `channel` if nobody waits on it and it is not subscribed:
    /// its SUBSCRIBE failed or was refused, and is not worth retrying.
    /// Returns whether it was forgotten.
    #[cfg(feature = "cluster")]
    pub(crate) fn forget_if_unwanted(&self, channel: &Channel) -> bool {
        let mut channels = self.channels.lock();
        let st = channel.state.lock();
        if st.waiters > 0 || st.sub != SubState::Requested {
            return false;
        }
        if channels
            .get(&channel.name)
            .is_some_and(|c| std::ptr::eq(Arc::as_ptr(c), channel))
        {
            channels.remove(&channel.name);
        }
        true
    }

    /// Channels whose last waiter left more than `linger` ago and that can
    /// be unsubscribed now; they are marked `Unsubscribing`. Channels nobody
    /// waits on whose SUBSCRIBE never went out are forgotten.
    pub(crate) fn take_idle(&self, linger: Duration, link: &str) -> Vec<Arc<Channel>> {
        let mut idle = Vec::new();
        let mut channels = self.channels.lock();
        channels.retain(|_, channel| {
            let mut st = channel.state.lock();
            if st.waiters == 0 && st.sub == SubState::Requested && st.link.is_none() {
                // Nothing on the server, nobody to subscribe for.
                return false;
            }
            if st.link.as_deref() != Some(link) {
                return true;
            }
            match st.idle_since {
                Some(since) if st.waiters == 0 && since.elapsed() >= linger => match st.sub {
                    SubState::Subscribed => {
                        st.sub = SubState::Unsubscribing;
                        idle.push(Arc::clone(channel));
                        true
                    }
                    // Never confirmed: nothing to undo on the server once
                    // the reply arrives, but keep it until then.
                    SubState::Requested => true,
                    SubState::Unsubscribing => true,
                },
                _ => true,
            }
        });
        idle
    }

    /// After a reconnect: forgets the channels nobody waits on and returns the
    /// others, which must be subscribed again.
    pub(crate) fn still_waited(&self) -> Vec<Arc<Channel>> {
        let mut channels = self.channels.lock();
        channels.retain(|_, channel| channel.has_waiters());
        channels.values().cloned().collect()
    }

    /// The channels last subscribed on `link`.
    pub(crate) fn on_link(&self, link: &str) -> Vec<Arc<Channel>> {
        self.all()
            .into_iter()
            .filter(|c| c.state.lock().link.as_deref() == Some(link))
            .collect()
    }

    /// Waited channels whose subscription is not confirmed, to be sent
    /// again (after a MOVED reply or a slot migration).
    #[cfg(feature = "cluster")]
    pub(crate) fn unconfirmed(&self) -> Vec<Arc<Channel>> {
        self.all()
            .into_iter()
            .filter(|c| {
                let st = c.state.lock();
                st.waiters > 0 && st.sub == SubState::Requested
            })
            .collect()
    }

    /// The client shuts down: wakes every waiter of every channel, and
    /// ends every wait for a confirmation.
    pub(crate) fn wake_everyone(&self) {
        for channel in self.all() {
            let mut st = channel.state.lock();
            st.closed = true;
            wake_all_locked(&mut st);
            drop(st);
            channel.confirmed.notify_all();
        }
    }
}

impl Channel {
    /// A local thread released the lock: if waiters are parked here, the
    /// oldest is about to be woken, so newcomers stand back for `grace`.
    pub(crate) fn expect_handoff(&self, grace: Duration) {
        let mut st = self.state.lock();
        if !st.parked.is_empty() || st.permits > 0 {
            st.handoff_until = Instant::now().checked_add(grace);
        }
    }

    /// Whether a newcomer should stand back (see [`expect_handoff`](Self::expect_handoff)).
    pub(crate) fn handoff_pending(&self) -> bool {
        self.state
            .lock()
            .handoff_until
            .is_some_and(|until| Instant::now() < until)
    }

    /// The woken waiter has made its attempt: newcomers may try again.
    pub(crate) fn handoff_done(&self) {
        self.state.lock().handoff_until = None;
    }

    /// Whether the server has confirmed the subscription.
    pub(crate) fn is_subscribed(&self) -> bool {
        self.state.lock().sub == SubState::Subscribed
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
        self.state.lock().waiters > 0
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
        st.waiters > 0 && st.sub == SubState::Requested
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
            if std::mem::take(&mut st.wake_all_on_confirm) {
                wake_all_locked(&mut st);
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
        wake_all_locked(&mut st);
        drop(st);
        self.confirmed.notify_all();
    }

    /// Hands one wake-up to the oldest parked waiter, or keeps it for the
    /// next waiter to park.
    pub(crate) fn wake_one(&self) {
        let mut st = self.state.lock();
        if let Some(waiter) = st.parked.pop_front() {
            waiter.notified.store(true, Ordering::Release);
            waiter.thread.unpark();
        } else if st.permits < st.waiters {
            st.permits += 1;
        }
    }

    /// Wakes every waiter, parked or about to park.
    pub(crate) fn wake_all(&self) {
        wake_all_locked(&mut self.state.lock());
    }

    /// Parks the calling thread until a wake-up reaches it, `timeout` passes
    /// or `interrupt` is triggered.
    pub(crate) fn park(&self, timeout: Duration, interrupt: Option<&Interrupt>) -> Wake {
        // A timeout too long to represent is no timeout at all.
        let deadline = Instant::now().checked_add(timeout);
        let waiter = Arc::new(Waiter {
            thread: thread::current(),
            notified: AtomicBool::new(false),
        });
        {
            let mut st = self.state.lock();
            if st.permits > 0 {
                st.permits -= 1;
                return Wake::Notified;
            }
            st.parked.push_back(Arc::clone(&waiter));
        }
        let _registered = interrupt.map(Interrupt::register);
        let outcome = loop {
            if waiter.notified.load(Ordering::Acquire) {
                break Wake::Notified;
            }
            if interrupt.is_some_and(Interrupt::is_triggered) {
                break Wake::Interrupted;
            }
            match deadline {
                Some(deadline) => {
                    let now = Instant::now();
                    if now >= deadline {
                        break Wake::TimedOut;
                    }
                    thread::park_timeout(deadline - now);
                }
                None => thread::park(),
            }
        };
        if outcome == Wake::Notified {
            return outcome;
        }
        let mut st = self.state.lock();
        match st.parked.iter().position(|w| Arc::ptr_eq(w, &waiter)) {
            Some(pos) => {
                st.parked.remove(pos);
                outcome
            }
            // Handed a wake-up just as we gave up: take it, so that the
            // caller tries the lock once more and no wake-up is lost.
            None => Wake::Notified,
        }
    }
}

fn wake_all_locked(st: &mut ChannelState) {
    for waiter in st.parked.drain(..) {
        waiter.notified.store(true, Ordering::Release);
        waiter.thread.unpark();
    }
    st.permits = st.waiters;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn joined(j: Joined) -> (Arc<Channel>, bool) {
        match j {
            Joined::Ready(c) => (c, false),
            Joined::MustSubscribe(c) => (c, true),
        }
    }

    #[test]
    fn first_waiter_subscribes_later_ones_share() {
        let reg = Registry::default();
        let (a, must_a) = joined(reg.join("ch"));
        let (b, must_b) = joined(reg.join("ch"));
        assert!(must_a && !must_b);
        assert!(Arc::ptr_eq(&a, &b));
    }

    #[test]
    fn a_wake_up_before_parking_is_kept() {
        let reg = Registry::default();
        let (ch, _) = joined(reg.join("ch"));
        ch.wake_one();
        assert_eq!(ch.park(Duration::from_secs(5), None), Wake::Notified);
        assert_eq!(ch.park(Duration::from_millis(10), None), Wake::TimedOut);
    }

    #[test]
    fn wake_one_frees_the_oldest_parked_waiter() {
        let reg = Arc::new(Registry::default());
        let (ch, _) = joined(reg.join("ch"));
        let (_, _) = joined(reg.join("ch"));
        let parked = {
            let ch = Arc::clone(&ch);
            thread::spawn(move || ch.park(Duration::from_secs(10), None))
        };
        while ch.state.lock().parked.is_empty() {
            thread::yield_now();
        }
        ch.wake_one();
        assert_eq!(parked.join().unwrap(), Wake::Notified);
    }

    #[test]
    fn interrupt_ends_a_park() {
        let reg = Registry::default();
        let (ch, _) = joined(reg.join("ch"));
        let stop = Interrupt::new();
        let trigger = {
            let stop = stop.clone();
            thread::spawn(move || {
                thread::sleep(Duration::from_millis(20));
                stop.trigger();
            })
        };
        assert_eq!(
            ch.park(Duration::from_secs(10), Some(&stop)),
            Wake::Interrupted
        );
        trigger.join().unwrap();
        assert!(ch.state.lock().parked.is_empty());
    }

    #[test]
    fn idle_channels_are_unsubscribed_after_the_linger() {
        let reg = Registry::default();
        let (ch, _) = joined(reg.join("ch"));
        ch.confirm();
        reg.leave(&ch);
        ch.assign(&Arc::from("node"));
        assert!(reg.take_idle(Duration::from_secs(60), "node").is_empty());
        assert!(reg.take_idle(Duration::ZERO, "elsewhere").is_empty());
        let idle = reg.take_idle(Duration::ZERO, "node");
        assert_eq!(idle.len(), 1);
        // A waiter that comes back must subscribe again.
        let (_, must) = joined(reg.join("ch"));
        assert!(must);
        // Its UNSUBSCRIBE is confirmed before the waiter's SUBSCRIBE.
        assert!(!reg.unsubscribed(&ch, "node"));
        assert!(reg.get(b"ch").is_some());
    }

    /// Issue 4: the UNSUBSCRIBE of an idle channel is written after the
    /// registry lock is released, so a waiter that comes back at that moment
    /// can get its SUBSCRIBE onto the wire first. The server then confirms
    /// the SUBSCRIBE and then the UNSUBSCRIBE, and holds no subscription.
    #[test]
    fn a_subscribe_that_overtook_the_unsubscribe_is_sent_again() {
        let reg = Registry::default();
        let link: Arc<str> = Arc::from("pubsub");
        let (ch, _) = joined(reg.join("ch"));
        ch.assign(&link);
        ch.confirm();
        reg.leave(&ch);
        assert_eq!(reg.take_idle(Duration::ZERO, "pubsub").len(), 1);
        let (again, must) = joined(reg.join("ch"));
        assert!(must && Arc::ptr_eq(&ch, &again));
        // SUBSCRIBE overtook UNSUBSCRIBE: their confirmations in that order.
        ch.confirm();
        assert!(
            reg.unsubscribed(&ch, "pubsub"),
            "the caller must subscribe again"
        );
        assert!(
            !ch.is_subscribed(),
            "the server holds no subscription after its UNSUBSCRIBE"
        );
        ch.assign(&link);
        ch.confirm();
        assert!(ch.is_subscribed());
        assert!(Arc::ptr_eq(&reg.get(b"ch").unwrap(), &ch));
    }

    /// As above, but the waiter left again before the UNSUBSCRIBE was
    /// confirmed: nothing is subscribed and nobody needs it, so the channel
    /// is forgotten (a later waiter subscribes afresh).
    #[test]
    fn an_overtaken_channel_nobody_waits_on_is_forgotten() {
        let reg = Registry::default();
        let link: Arc<str> = Arc::from("pubsub");
        let (ch, _) = joined(reg.join("ch"));
        ch.assign(&link);
        ch.confirm();
        reg.leave(&ch);
        assert_eq!(reg.take_idle(Duration::ZERO, "pubsub").len(), 1);
        let (_, must) = joined(reg.join("ch"));
        assert!(must);
        ch.assign(&link);
        ch.confirm();
        reg.leave(&ch);
        assert!(!reg.unsubscribed(&ch, "pubsub"));
        assert!(reg.get(b"ch").is_none());
        let (_, must) = joined(reg.join("ch"));
        assert!(must);
    }

    /// An UNSUBSCRIBE confirmation from a connection the channel no longer
    /// lives on (sharded pub/sub: its slot moved) changes nothing.
    #[test]
    fn an_unsubscribe_from_another_connection_is_ignored() {
        let reg = Registry::default();
        let (ch, _) = joined(reg.join("ch"));
        ch.assign(&Arc::from("new-node"));
        ch.confirm();
        assert!(!reg.unsubscribed(&ch, "old-node"));
        assert!(ch.is_subscribed());
    }

    /// With no SUBSCRIBE on its way (its send failed, or the connection was
    /// lost) there is no confirmation to wait for: the waiter falls back to
    /// its TTL at once, and is woken when the channel is subscribed later.
    #[test]
    fn nothing_sent_means_no_wait_for_a_confirmation() {
        let reg = Registry::default();
        let link: Arc<str> = Arc::from("pubsub");
        let (ch, _) = joined(reg.join("ch"));
        let token = ch.assign(&link);
        ch.send_failed(token);
        assert!(!ch.wait_subscribed(Duration::from_secs(600)));
        // A later SUBSCRIBE is not undone by the failure of an earlier one.
        ch.assign(&link);
        ch.send_failed(token);
        assert!(ch.state.lock().link.is_some());
        ch.connection_lost();
        assert!(!ch.wait_subscribed(Duration::from_secs(600)));
        // The confirmation, when it comes, wakes the waiter.
        ch.assign(&link);
        ch.confirm();
        assert_eq!(ch.park(Duration::from_secs(5), None), Wake::Notified);
    }

    /// Issue 5: a channel whose SUBSCRIBE never went out (its connection
    /// could not be opened) and that nobody waits on any more must not stay
    /// in the registry forever.
    #[test]
    fn an_unsent_channel_nobody_waits_on_is_forgotten() {
        let reg = Registry::default();
        let (ch, must) = joined(reg.join("ch"));
        assert!(must);
        reg.leave(&ch);
        let _ = reg.take_idle(Duration::ZERO, "node");
        assert!(reg.get(b"ch").is_none(), "the entry lingers: {ch:?}");
    }

    /// Issue 10: `Duration::MAX` (a setting meaning "no limit") must not
    /// overflow an `Instant`.
    #[test]
    fn endless_timeouts_do_not_overflow() {
        let reg = Registry::default();
        let (ch, _) = joined(reg.join("ch"));
        ch.assign(&Arc::from("pubsub"));
        ch.confirm();
        assert!(ch.wait_subscribed(Duration::MAX));
        ch.wake_one();
        assert_eq!(ch.park(Duration::MAX, None), Wake::Notified);
    }

    /// Issue 10: shutting down ends a wait for a confirmation at once, not
    /// after the response timeout.
    #[test]
    fn wake_everyone_ends_a_wait_for_the_confirmation() {
        let reg = Arc::new(Registry::default());
        let (ch, _) = joined(reg.join("ch"));
        ch.assign(&Arc::from("pubsub"));
        let (done, result) = std::sync::mpsc::channel();
        let waiting = {
            let ch = Arc::clone(&ch);
            thread::spawn(move || {
                let _ = done.send(ch.wait_subscribed(Duration::from_secs(600)));
            })
        };
        // Give the waiter time to block; the outcome is the same either way.
        thread::sleep(Duration::from_millis(50));
        reg.wake_everyone();
        let confirmed = result
            .recv_timeout(Duration::from_secs(30))
            .expect("still waiting for the confirmation after wake_everyone");
        assert!(!confirmed);
        waiting.join().unwrap();
    }
}
