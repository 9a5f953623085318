//! The executors the proofs run on, behind one small interface: tokio's
//! multi-thread and current-thread runtimes, smol's executor, and a plain
//! hand-written `block_on` (a thread that parks until woken; a spawned
//! task is a thread of its own). And two executor-agnostic helpers: a
//! task's output as a future ([`spawn`]) and a nap that needs no
//! executor's timer ([`nap`]).

use std::future::Future;
use std::pin::{pin, Pin};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::thread::{self, Thread};
use std::time::{Duration, Instant};

/// A task, boxed.
pub(crate) type Task = Pin<Box<dyn Future<Output = ()> + Send + 'static>>;

/// What a scenario needs of an executor.
pub(crate) trait Executor: Send + Sync {
    /// Its name, for names of locks and messages.
    fn name(&self) -> &'static str;
    /// Runs `task` as a task of its own.
    fn spawn_task(&self, task: Task);
    /// Whether tasks run on several threads, so that a task that blocks
    /// its thread a moment leaves the others running elsewhere.
    fn parallel(&self) -> bool;
}

/// Runs `future` as a task of `executor`'s; the returned future resolves
/// to its output (and panics if the task panicked).
pub(crate) fn spawn<T: Send + 'static>(
    executor: &dyn Executor,
    future: impl Future<Output = T> + Send + 'static,
) -> impl Future<Output = T> {
    // tokio's oneshot needs no tokio runtime: it works on any executor.
    let (send, receive) = tokio::sync::oneshot::channel();
    executor.spawn_task(Box::pin(async move {
        let _ = send.send(future.await);
    }));
    async move { receive.await.expect("a spawned task panicked") }
}

/// Sleeps `pause` on any executor: a thread of its own wakes the task.
pub(crate) async fn nap(pause: Duration) {
    let (send, receive) = tokio::sync::oneshot::channel();
    thread::spawn(move || {
        thread::sleep(pause);
        let _ = send.send(());
    });
    let _ = receive.await;
}

/// Waits (napping) until `done` holds, at most `limit`; whether it did.
pub(crate) async fn eventually(limit: Duration, mut done: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + limit;
    loop {
        if done() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        nap(Duration::from_millis(2)).await;
    }
}

/// Runs `scenario` on each kind of executor: built, handed its
/// [`Executor`], driven to its end, torn down.
pub(crate) mod run {
    use super::*;

    /// tokio's multi-thread runtime, two workers (the scenario itself runs
    /// in `block_on`, off the workers).
    pub(crate) fn tokio_multi_thread<F: Future>(
        scenario: impl FnOnce(Arc<dyn Executor>) -> F,
    ) -> F::Output {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_time()
            .build()
            .expect("a tokio runtime");
        let executor = Arc::new(Tokio {
            handle: runtime.handle().clone(),
            name: "tokio-multi-thread",
            parallel: true,
        });
        runtime.block_on(scenario(executor))
    }

    /// tokio's current-thread runtime: every task on this thread.
    pub(crate) fn tokio_current_thread<F: Future>(
        scenario: impl FnOnce(Arc<dyn Executor>) -> F,
    ) -> F::Output {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .expect("a tokio runtime");
        let executor = Arc::new(Tokio {
            handle: runtime.handle().clone(),
            name: "tokio-current-thread",
            parallel: false,
        });
        runtime.block_on(scenario(executor))
    }

    /// smol's executor on two threads of its own, the scenario in
    /// `smol::block_on` on this one.
    pub(crate) fn smol<F: Future>(scenario: impl FnOnce(Arc<dyn Executor>) -> F) -> F::Output {
        let executor = Arc::new(smol::Executor::new());
        let (stop, stopped) = smol::channel::unbounded::<()>();
        let threads: Vec<_> = (0..2)
            .map(|n| {
                let executor = Arc::clone(&executor);
                let stopped = stopped.clone();
                thread::Builder::new()
                    .name(format!("smol-{n}"))
                    .spawn(move || smol::block_on(executor.run(stopped.recv())))
                    .expect("a smol thread")
            })
            .collect();
        let output = smol::block_on(scenario(Arc::new(Smol(executor))));
        drop(stop);
        for thread in threads {
            let _ = thread.join();
        }
        output
    }

    /// A plain `block_on`; each spawned task runs on a thread of its own.
    pub(crate) fn plain<F: Future>(scenario: impl FnOnce(Arc<dyn Executor>) -> F) -> F::Output {
        block_on(scenario(Arc::new(Plain)))
    }
}

struct Tokio {
    handle: tokio::runtime::Handle,
    name: &'static str,
    parallel: bool,
}

impl Executor for Tokio {
    fn name(&self) -> &'static str {
        self.name
    }

    fn spawn_task(&self, task: Task) {
        self.handle.spawn(task);
    }

    fn parallel(&self) -> bool {
        self.parallel
    }
}

struct Smol(Arc<smol::Executor<'static>>);

impl Executor for Smol {
    fn name(&self) -> &'static str {
        "smol"
    }

    fn spawn_task(&self, task: Task) {
        self.0.spawn(task).detach();
    }

    fn parallel(&self) -> bool {
        true
    }
}

struct Plain;

impl Executor for Plain {
    fn name(&self) -> &'static str {
        "block-on"
    }

    fn spawn_task(&self, task: Task) {
        thread::Builder::new()
            .name("block-on-task".into())
            .spawn(move || block_on(task))
            .expect("a thread for a task");
    }

    fn parallel(&self) -> bool {
        true
    }
}

/// Wakes the thread that runs [`block_on`].
struct Unpark(Thread);

impl Wake for Unpark {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }
}

/// Runs `future` to its end on this thread, parking between polls.
pub(crate) fn block_on<F: Future>(future: F) -> F::Output {
    let waker = Waker::from(Arc::new(Unpark(thread::current())));
    let mut cx = Context::from_waker(&waker);
    let mut future = pin!(future);
    loop {
        if let Poll::Ready(output) = future.as_mut().poll(&mut cx) {
            return output;
        }
        thread::park();
    }
}
