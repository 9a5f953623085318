//! The client's I/O threads for async callers: every Redis call an async
//! acquire, release or query makes runs here, never on an executor's
//! thread. Started with the first async call; bounded (the builder's
//! `async_threads`); ended with the client.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::thread::{self, JoinHandle};

use crossbeam_channel::{unbounded, Receiver, Sender};
use parking_lot::Mutex;

use crate::error::{Error, Result};

/// One piece of work: a step of an async call.
pub(crate) type Job = Box<dyn FnOnce() + Send>;

/// A fixed number of threads running [`Job`]s in the order they come.
#[derive(Debug)]
pub(crate) struct IoPool {
    size: usize,
    running: Mutex<Option<Running>>,
}

#[derive(Debug)]
struct Running {
    jobs: Sender<Job>,
    threads: Vec<JoinHandle<()>>,
    /// Set by [`IoPool::shutdown`]: no thread is started again.
    stopped: bool,
}

impl IoPool {
    /// A pool of `size` threads (at least one), not started yet.
    pub(crate) fn new(size: usize) -> IoPool {
        IoPool {
            size: size.max(1),
            running: Mutex::new(None),
        }
    }

    /// Runs `job` on one of the threads, starting them if need be.
    ///
    /// # Errors
    ///
    /// [`Error::Shutdown`] once the pool was shut down, [`Error::Spawn`]
    /// when the system refuses a thread.
    pub(crate) fn spawn(&self, job: Job) -> Result<()> {
        let mut running = self.running.lock();
        if running.as_ref().is_some_and(|r| r.stopped) {
            return Err(Error::Shutdown);
        }
        if running.is_none() {
            *running = Some(self.start()?);
        }
        let Some(live) = running.as_ref() else {
            return Err(Error::Shutdown);
        };
        live.jobs.send(job).map_err(|_| Error::Shutdown)
    }

    /// How many threads run now.
    pub(crate) fn threads(&self) -> usize {
        self.running
            .lock()
            .as_ref()
            .map_or(0, |r| if r.stopped { 0 } else { r.threads.len() })
    }

    fn start(&self) -> Result<Running> {
        let (jobs, queue) = unbounded::<Job>();
        let mut threads = Vec::with_capacity(self.size);
        for n in 0..self.size {
            let queue: Receiver<Job> = queue.clone();
            let thread = thread::Builder::new()
                .name(format!("redhold-io-{n}"))
                .spawn(move || work(&queue))
                .map_err(|source| Error::Spawn {
                    thread: "redhold-io",
                    source,
                })?;
            threads.push(thread);
        }
        Ok(Running {
            jobs,
            threads,
            stopped: false,
        })
    }

    /// Lets the threads run the jobs queued already, then ends them and
    /// waits for them; later jobs are refused. Called from a job itself, it
    /// does not wait for that thread.
    pub(crate) fn shutdown(&self) {
        let threads = {
            let mut running = self.running.lock();
            let Some(live) = running.as_mut() else {
                *running = Some(Running {
                    jobs: unbounded().0,
                    threads: Vec::new(),
                    stopped: true,
                });
                return;
            };
            live.stopped = true;
            // Disconnects the queue once it is empty: each thread ends.
            live.jobs = unbounded().0;
            std::mem::take(&mut live.threads)
        };
        let me = thread::current().id();
        for thread in threads {
            if thread.thread().id() != me {
                let _ = thread.join();
            }
        }
    }
}

/// A thread's loop: one job after another until the pool is gone. A job
/// that panics is logged and does not take the thread with it.
fn work(queue: &Receiver<Job>) {
    while let Ok(job) = queue.recv() {
        if catch_unwind(AssertUnwindSafe(job)).is_err() {
            log::error!("redhold: an async call's step panicked");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    #[test]
    fn jobs_run_on_the_pools_threads_until_it_shuts_down() {
        let pool = IoPool::new(2);
        assert_eq!(pool.threads(), 0, "started with the first job");
        let done = Arc::new(AtomicUsize::new(0));
        for _ in 0..10 {
            let done = Arc::clone(&done);
            pool.spawn(Box::new(move || {
                assert!(thread::current().name().unwrap().starts_with("redhold-io-"));
                done.fetch_add(1, Ordering::SeqCst);
            }))
            .unwrap();
        }
        pool.spawn(Box::new(|| panic!("a job that panics")))
            .unwrap();
        assert_eq!(pool.threads(), 2);
        pool.shutdown();
        assert_eq!(done.load(Ordering::SeqCst), 10, "queued jobs ran first");
        assert!(matches!(pool.spawn(Box::new(|| {})), Err(Error::Shutdown)));
        assert_eq!(pool.threads(), 0);
    }
}
