//! Which channels local threads wait on, by name.
//!
//! A channel is subscribed while at least one local thread waits on it and
//! for a short linger after the last one leaves, so that repeated contention
//! on the same lock does not pay for SUBSCRIBE every time. Each channel's
//! own state (its waiters and its subscription) is in `channel.rs`.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;

use super::channel::{Channel, Idle, Unsubscribed};

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
    /// Adds a waiter for `lock` to the channel `name`, creating the channel
    /// entry if needed.
    pub(crate) fn join(&self, name: &str, lock: &str) -> Joined {
        let mut channels = self.channels.lock();
        if let Some(channel) = channels.get(name) {
            let channel = Arc::clone(channel);
            return match channel.add_waiter(lock) {
                true => Joined::MustSubscribe(channel),
                false => Joined::Ready(channel),
            };
        }
        let channel = Arc::new(Channel::new(name, lock));
        channels.insert(Arc::clone(&channel.name), Arc::clone(&channel));
        Joined::MustSubscribe(channel)
    }

    /// Removes a waiter for `lock` from its channel; the channel lingers
    /// subscribed.
    pub(crate) fn leave(&self, channel: &Channel, lock: &str) {
        channel.remove_waiter(lock);
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
        match channel.server_unsubscribed(link) {
            Unsubscribed::Ignored => false,
            Unsubscribed::Unwanted => {
                forget(&mut channels, channel);
                false
            }
            Unsubscribed::Wanted => true,
        }
    }

    /// Forgets `channel` if nobody waits on it and it is not subscribed:
    /// its SUBSCRIBE failed or was refused, and is not worth retrying.
    /// Returns whether it was forgotten.
    #[cfg(feature = "cluster")]
    pub(crate) fn forget_if_unwanted(&self, channel: &Channel) -> bool {
        let mut channels = self.channels.lock();
        if !channel.is_unwanted() {
            return false;
        }
        forget(&mut channels, channel);
        true
    }

    /// Channels whose last waiter left more than `linger` ago and that can
    /// be unsubscribed now; they are marked `Unsubscribing`. Channels nobody
    /// waits on whose SUBSCRIBE never went out are forgotten.
    pub(crate) fn take_idle(&self, linger: Duration, link: &str) -> Vec<Arc<Channel>> {
        let mut idle = Vec::new();
        self.channels
            .lock()
            .retain(|_, channel| match channel.idle(linger, link) {
                Idle::Forget => false,
                Idle::Keep => true,
                Idle::Unsubscribe => {
                    idle.push(Arc::clone(channel));
                    true
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
        self.all().into_iter().filter(|c| c.is_on(link)).collect()
    }

    /// Waited channels whose subscription is not confirmed, to be sent
    /// again (after a MOVED reply or a slot migration).
    #[cfg(feature = "cluster")]
    pub(crate) fn unconfirmed(&self) -> Vec<Arc<Channel>> {
        self.all()
            .into_iter()
            .filter(|c| c.wants_subscription())
            .collect()
    }

    /// The client shuts down: wakes every waiter of every channel, and
    /// ends every wait for a confirmation.
    pub(crate) fn wake_everyone(&self) {
        for channel in self.all() {
            channel.close();
        }
    }
}

/// Removes `channel` from the map, unless the name now stands for
/// another channel.
fn forget(channels: &mut HashMap<Arc<str>, Arc<Channel>>, channel: &Channel) {
    if channels
        .get(&channel.name)
        .is_some_and(|c| std::ptr::eq(Arc::as_ptr(c), channel))
    {
        channels.remove(&channel.name);
    }
}

#[cfg(test)]
mod tests {
    use std::thread;

    use super::super::waiter::Wake;
    use super::*;
    use crate::interrupt::Interrupt;

    fn joined(j: Joined) -> (Arc<Channel>, bool) {
        match j {
            Joined::Ready(c) => (c, false),
            Joined::MustSubscribe(c) => (c, true),
        }
    }

    #[test]
    fn first_waiter_subscribes_later_ones_share() {
        let reg = Registry::default();
        let (a, must_a) = joined(reg.join("ch", "lock"));
        let (b, must_b) = joined(reg.join("ch", "lock"));
        assert!(must_a && !must_b);
        assert!(Arc::ptr_eq(&a, &b));
    }

    #[test]
    fn a_wake_up_before_parking_is_kept() {
        let reg = Registry::default();
        let (ch, _) = joined(reg.join("ch", "lock"));
        ch.wake_one_each();
        assert_eq!(
            ch.park("lock", Duration::from_secs(5), None, None, None),
            Wake::Notified
        );
        assert_eq!(
            ch.park("lock", Duration::from_millis(10), None, None, None),
            Wake::TimedOut
        );
    }

    #[test]
    fn wake_one_frees_the_oldest_parked_waiter() {
        let reg = Arc::new(Registry::default());
        let (ch, _) = joined(reg.join("ch", "lock"));
        let (_, _) = joined(reg.join("ch", "lock"));
        let parked = {
            let ch = Arc::clone(&ch);
            thread::spawn(move || ch.park("lock", Duration::from_secs(10), None, None, None))
        };
        while ch.parked_now() == 0 {
            thread::yield_now();
        }
        ch.wake_one_each();
        assert_eq!(parked.join().unwrap(), Wake::Notified);
    }

    #[test]
    fn interrupt_ends_a_park() {
        let reg = Registry::default();
        let (ch, _) = joined(reg.join("ch", "lock"));
        let stop = Interrupt::new();
        let trigger = {
            let stop = stop.clone();
            thread::spawn(move || {
                thread::sleep(Duration::from_millis(20));
                stop.trigger();
            })
        };
        assert_eq!(
            ch.park("lock", Duration::from_secs(10), None, Some(&stop), None),
            Wake::Interrupted
        );
        trigger.join().unwrap();
        assert_eq!(ch.parked_now(), 0);
    }

    #[test]
    fn idle_channels_are_unsubscribed_after_the_linger() {
        let reg = Registry::default();
        let (ch, _) = joined(reg.join("ch", "lock"));
        ch.confirm();
        reg.leave(&ch, "lock");
        ch.assign(&Arc::from("node"));
        assert!(reg.take_idle(Duration::from_secs(60), "node").is_empty());
        assert!(reg.take_idle(Duration::ZERO, "elsewhere").is_empty());
        let idle = reg.take_idle(Duration::ZERO, "node");
        assert_eq!(idle.len(), 1);
        // A waiter that comes back must subscribe again.
        let (_, must) = joined(reg.join("ch", "lock"));
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
        let (ch, _) = joined(reg.join("ch", "lock"));
        ch.assign(&link);
        ch.confirm();
        reg.leave(&ch, "lock");
        assert_eq!(reg.take_idle(Duration::ZERO, "pubsub").len(), 1);
        let (again, must) = joined(reg.join("ch", "lock"));
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
        let (ch, _) = joined(reg.join("ch", "lock"));
        ch.assign(&link);
        ch.confirm();
        reg.leave(&ch, "lock");
        assert_eq!(reg.take_idle(Duration::ZERO, "pubsub").len(), 1);
        let (_, must) = joined(reg.join("ch", "lock"));
        assert!(must);
        ch.assign(&link);
        ch.confirm();
        reg.leave(&ch, "lock");
        assert!(!reg.unsubscribed(&ch, "pubsub"));
        assert!(reg.get(b"ch").is_none());
        let (_, must) = joined(reg.join("ch", "lock"));
        assert!(must);
    }

    /// An UNSUBSCRIBE confirmation from a connection the channel no longer
    /// lives on (sharded pub/sub: its slot moved) changes nothing.
    #[test]
    fn an_unsubscribe_from_another_connection_is_ignored() {
        let reg = Registry::default();
        let (ch, _) = joined(reg.join("ch", "lock"));
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
        let (ch, _) = joined(reg.join("ch", "lock"));
        let token = ch.assign(&link);
        ch.send_failed(token);
        assert!(!ch.wait_subscribed(Duration::from_secs(600)));
        // A later SUBSCRIBE is not undone by the failure of an earlier one.
        ch.assign(&link);
        ch.send_failed(token);
        assert!(ch.is_on("pubsub"));
        ch.connection_lost();
        assert!(!ch.wait_subscribed(Duration::from_secs(600)));
        // The confirmation, when it comes, wakes the waiter.
        ch.assign(&link);
        ch.confirm();
        assert_eq!(
            ch.park("lock", Duration::from_secs(5), None, None, None),
            Wake::Notified
        );
    }

    /// Issue 5: a channel whose SUBSCRIBE never went out (its connection
    /// could not be opened) and that nobody waits on any more must not stay
    /// in the registry forever.
    #[test]
    fn an_unsent_channel_nobody_waits_on_is_forgotten() {
        let reg = Registry::default();
        let (ch, must) = joined(reg.join("ch", "lock"));
        assert!(must);
        reg.leave(&ch, "lock");
        let _ = reg.take_idle(Duration::ZERO, "node");
        assert!(reg.get(b"ch").is_none(), "the entry lingers: {ch:?}");
    }

    /// Issue 10: `Duration::MAX` (a setting meaning "no limit") must not
    /// overflow an `Instant`.
    #[test]
    fn endless_timeouts_do_not_overflow() {
        let reg = Registry::default();
        let (ch, _) = joined(reg.join("ch", "lock"));
        ch.assign(&Arc::from("pubsub"));
        ch.confirm();
        assert!(ch.wait_subscribed(Duration::MAX));
        ch.wake_one_each();
        assert_eq!(
            ch.park("lock", Duration::MAX, None, None, None),
            Wake::Notified
        );
    }

    /// Issue 10: shutting down ends a wait for a confirmation at once, not
    /// after the response timeout.
    #[test]
    fn wake_everyone_ends_a_wait_for_the_confirmation() {
        let reg = Arc::new(Registry::default());
        let (ch, _) = joined(reg.join("ch", "lock"));
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
