//! A thread that may touch sockets, started before the executor's thread
//! is filtered (`no_sockets.rs`): a scenario's blocking checks (does a
//! key exist, how many holds does an owner have) run there, the calling
//! task waiting for the answer.

use std::sync::mpsc::{self, Sender};
use std::thread::{self, JoinHandle};

type Job = Box<dyn FnOnce() + Send>;

/// The side thread; ends when dropped.
pub(crate) struct Side {
    jobs: Option<Sender<Job>>,
    thread: Option<JoinHandle<()>>,
}

impl Side {
    pub(crate) fn start() -> Side {
        let (jobs, queue) = mpsc::channel::<Job>();
        let thread = thread::Builder::new()
            .name("side".into())
            .spawn(move || {
                while let Ok(job) = queue.recv() {
                    job();
                }
            })
            .expect("the side thread");
        Side {
            jobs: Some(jobs),
            thread: Some(thread),
        }
    }

    /// Runs `check` on the side thread and returns its answer.
    ///
    /// # Panics
    ///
    /// If `check` panics.
    pub(crate) fn run<T: Send + 'static>(&self, check: impl FnOnce() -> T + Send + 'static) -> T {
        let (answer, answered) = mpsc::channel();
        let job: Job = Box::new(move || {
            let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(check));
            let _ = answer.send(outcome);
        });
        self.jobs
            .as_ref()
            .expect("the side thread runs")
            .send(job)
            .expect("the side thread runs");
        answered
            .recv()
            .expect("the side thread answers")
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
    }
}

impl Drop for Side {
    fn drop(&mut self) {
        drop(self.jobs.take());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}
