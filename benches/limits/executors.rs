//! The executors the async face is measured on: tokio's multi-thread
//! runtime, tokio's current-thread runtime, and a plain `block_on` written
//! here (the calling thread polls, a Waker unparks it; no runtime at all).
//!
//! A measurement is one future run by [`Exec::run`]: on the multi-thread
//! runtime it is spawned as a task (so it runs on a worker, as a service's
//! handler would), on the current-thread runtime it is the runtime's
//! `block_on`, and on the plain executor it is [`block_on`]. Inside it,
//! [`Spawner`] starts the other side of a hand-over where that executor
//! would: a task of the same runtime, or (plain `block_on`) a thread of
//! its own with its own `block_on`. The coordination between the two sides
//! uses `tokio::sync` channels, which need no runtime.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};
use std::thread::{self, Thread};
use std::time::Duration;

use tokio::runtime::{Builder, Handle, Runtime};
use tokio::sync::oneshot;

/// One executor, with what it needs to run futures.
pub(crate) enum Exec {
    /// tokio, multi-thread (one worker per core, tokio's default).
    Multi(Runtime),
    /// tokio, current-thread: the measuring thread drives every task.
    Current(Runtime),
    /// [`block_on`]: the calling thread, parked until woken.
    BlockOn,
}

impl Exec {
    /// The three, in table order.
    pub(crate) fn all() -> Vec<Exec> {
        let multi = Builder::new_multi_thread()
            .enable_all()
            .build()
            .expect("tokio multi-thread runtime");
        let current = Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("tokio current-thread runtime");
        vec![Exec::Multi(multi), Exec::Current(current), Exec::BlockOn]
    }

    /// JSON key part.
    pub(crate) fn key(&self) -> &'static str {
        match self {
            Exec::Multi(_) => "tokio_mt",
            Exec::Current(_) => "tokio_ct",
            Exec::BlockOn => "block_on",
        }
    }

    /// Table label.
    pub(crate) fn label(&self) -> &'static str {
        match self {
            Exec::Multi(_) => "tokio multi-thread",
            Exec::Current(_) => "tokio current-thread",
            Exec::BlockOn => "plain block_on",
        }
    }

    /// Worker threads of the multi-thread runtime (0 for the others).
    pub(crate) fn workers(&self) -> usize {
        match self {
            Exec::Multi(rt) => rt.metrics().num_workers(),
            _ => 0,
        }
    }

    /// Runs `body` to its end on this executor and returns its output.
    pub(crate) fn run<T, F>(&self, body: impl FnOnce(Spawner) -> F) -> T
    where
        T: Send + 'static,
        F: Future<Output = T> + Send + 'static,
    {
        match self {
            Exec::Multi(rt) => {
                let fut = body(Spawner::Tokio(rt.handle().clone()));
                rt.block_on(rt.spawn(fut))
                    .expect("measurement task panicked")
            }
            Exec::Current(rt) => rt.block_on(body(Spawner::Tokio(rt.handle().clone()))),
            Exec::BlockOn => block_on(body(Spawner::Threads)),
        }
    }
}

/// Starts concurrent work and waits, the way the executor at hand does.
#[derive(Clone)]
pub(crate) enum Spawner {
    Tokio(Handle),
    /// Plain `block_on`: a thread per concurrent future, sleeps block it.
    Threads,
}

impl Spawner {
    /// Runs `fut` beside the caller; the receiver yields its output.
    pub(crate) fn spawn<T: Send + 'static>(
        &self,
        fut: impl Future<Output = T> + Send + 'static,
    ) -> oneshot::Receiver<T> {
        let (tx, rx) = oneshot::channel();
        let fut = async move {
            let _ = tx.send(fut.await);
        };
        match self {
            Spawner::Tokio(h) => {
                h.spawn(fut);
            }
            Spawner::Threads => {
                thread::spawn(move || block_on(fut));
            }
        }
        rx
    }

    /// Sleeps `d`: tokio's timer, or (plain `block_on`) `thread::sleep`,
    /// which only blocks the thread that owns this one future.
    pub(crate) async fn sleep(&self, d: Duration) {
        match self {
            Spawner::Tokio(_) => tokio::time::sleep(d).await,
            Spawner::Threads => thread::sleep(d),
        }
    }
}

/// Unparks the thread that runs [`block_on`].
struct Unpark(Thread);

impl Wake for Unpark {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }
    fn wake_by_ref(self: &Arc<Self>) {
        self.0.unpark();
    }
}

/// The smallest executor: poll, park until woken, poll again.
pub(crate) fn block_on<F: Future>(fut: F) -> F::Output {
    let mut fut = std::pin::pin!(fut);
    let waker = Waker::from(Arc::new(Unpark(thread::current())));
    let mut cx = Context::from_waker(&waker);
    loop {
        if let Poll::Ready(out) = fut.as_mut().poll(&mut cx) {
            return out;
        }
        thread::park();
    }
}

/// A boxed future, for [`JoinAll`].
pub(crate) type Task<T> = Pin<Box<dyn Future<Output = T> + Send>>;

/// Every future of a set to its end, on one thread (under [`block_on`]:
/// a thousand tasks on one plain `block_on`). Only the futures whose
/// waker fired are polled again.
pub(crate) struct JoinAll<T> {
    tasks: Vec<Option<Task<T>>>,
    out: Vec<Option<T>>,
    wakers: Vec<Waker>,
    woken: Arc<Woken>,
    left: usize,
    started: bool,
}

#[derive(Default)]
struct Woken {
    /// Indices of the futures to poll again.
    ready: Mutex<Vec<usize>>,
    /// The waker of the `JoinAll` itself.
    parent: Mutex<Option<Waker>>,
}

struct Child(Arc<Woken>, usize);

impl Wake for Child {
    fn wake(self: Arc<Self>) {
        self.0.ready.lock().unwrap().push(self.1);
        if let Some(w) = self.0.parent.lock().unwrap().as_ref() {
            w.wake_by_ref();
        }
    }
}

impl<T> JoinAll<T> {
    pub(crate) fn new(tasks: Vec<Task<T>>) -> JoinAll<T> {
        let n = tasks.len();
        let woken: Arc<Woken> = Arc::default();
        JoinAll {
            tasks: tasks.into_iter().map(Some).collect(),
            out: (0..n).map(|_| None).collect(),
            wakers: (0..n)
                .map(|i| Waker::from(Arc::new(Child(Arc::clone(&woken), i))))
                .collect(),
            woken,
            left: n,
            started: false,
        }
    }
}

// The outputs are only moved, never pinned; the tasks are boxed.
impl<T> Unpin for JoinAll<T> {}

impl<T> Future for JoinAll<T> {
    type Output = Vec<T>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Vec<T>> {
        let me = self.get_mut();
        *me.woken.parent.lock().unwrap() = Some(cx.waker().clone());
        let due: Vec<usize> = if me.started {
            std::mem::take(&mut *me.woken.ready.lock().unwrap())
        } else {
            me.started = true;
            (0..me.tasks.len()).collect()
        };
        for i in due {
            let Some(task) = me.tasks[i].as_mut() else {
                continue;
            };
            let mut child = Context::from_waker(&me.wakers[i]);
            if let Poll::Ready(v) = task.as_mut().poll(&mut child) {
                me.out[i] = Some(v);
                me.tasks[i] = None;
                me.left -= 1;
            }
        }
        if me.left == 0 {
            Poll::Ready(me.out.iter_mut().map(|v| v.take().unwrap()).collect())
        } else {
            Poll::Pending
        }
    }
}
