//! Threads that cannot touch a socket: a seccomp filter on the calling
//! thread (and every thread it starts afterwards: filters are inherited)
//! makes each socket system call fail with `EPERM`. The executors of the
//! proofs run on such threads, so a Redis command sent, a connection
//! opened or a reply read in a poll, a waker or a guard's drop fails
//! there, and the proof with it; the client's own threads, started
//! before, are free. That is how the proofs show that no Redis I/O runs
//! on an executor's thread, in a way that really fails if it ever does:
//! [`assert_filtered`] checks that the filter is there, and
//! `never_blocked.rs` shows it failing a blocking redhold call made on
//! such a thread.

use std::collections::BTreeMap;
use std::io::ErrorKind;
use std::net::TcpStream;
use std::thread;

use seccompiler::{BpfProgram, SeccompAction, SeccompFilter};

/// Every system call that opens, uses or looks at a socket. std sends
/// with `sendto` and receives with `recvfrom` (TCP and Unix sockets
/// alike), connects with `connect` (and `poll`s for a connect timeout,
/// which executors use too: left alone), and sets timeouts with
/// `setsockopt`.
const SOCKET_CALLS: &[libc::c_long] = &[
    libc::SYS_socket,
    libc::SYS_socketpair,
    libc::SYS_connect,
    libc::SYS_accept,
    libc::SYS_accept4,
    libc::SYS_bind,
    libc::SYS_listen,
    libc::SYS_sendto,
    libc::SYS_recvfrom,
    libc::SYS_sendmsg,
    libc::SYS_recvmsg,
    libc::SYS_sendmmsg,
    libc::SYS_recvmmsg,
    libc::SYS_shutdown,
    libc::SYS_setsockopt,
    libc::SYS_getsockopt,
    libc::SYS_getsockname,
    libc::SYS_getpeername,
];

/// Forbids sockets to the calling thread and the threads it starts from
/// now on.
///
/// # Panics
///
/// If the kernel refuses the filter.
pub(crate) fn forbid_sockets() {
    let rules = SOCKET_CALLS
        .iter()
        .map(|&call| (call, Vec::new()))
        .collect::<BTreeMap<_, _>>();
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EPERM as u32),
        std::env::consts::ARCH
            .try_into()
            .expect("a target seccomp knows"),
    )
    .expect("a seccomp filter");
    let program: BpfProgram = filter.try_into().expect("a BPF program");
    seccompiler::apply_filter(&program).expect("the kernel takes the seccomp filter");
    assert_filtered();
}

/// Panics unless the calling thread is refused a socket.
pub(crate) fn assert_filtered() {
    match TcpStream::connect(("127.0.0.1", 9)) {
        Err(e) if e.kind() == ErrorKind::PermissionDenied => {}
        other => panic!("a socket call went through the filter: {other:?}"),
    }
}

/// Runs `run` on a new thread (named `name`) that cannot touch a socket,
/// and returns what it returns.
///
/// # Panics
///
/// If `run` panics (with its message).
pub(crate) fn on_a_filtered_thread<T: Send>(name: &str, run: impl FnOnce() -> T + Send) -> T {
    thread::scope(|scope| {
        let thread = thread::Builder::new()
            .name(name.to_owned())
            .spawn_scoped(scope, move || {
                forbid_sockets();
                run()
            })
            .expect("a thread for the executor");
        thread
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
    })
}

/// Starts `client`'s threads for async callers (its I/O pool and timer)
/// from the calling thread, which must be free: a thread started from a
/// filtered one would inherit the filter, and the client's own threads
/// must reach Redis. An async acquire that parks on its timer (long
/// enough that its first attempt ends before its deadline, however slow
/// the machine), and one that takes the lock and drops the guard.
///
/// # Panics
///
/// If the lock cannot be taken, or the threads did not start.
pub(crate) fn warm_up(client: &redhold::Client) {
    use std::time::{Duration, Instant};
    let lock = client.lock("warm-up");
    let held = lock.lock().expect("the warm-up's blocking lock");
    let before = client.stats().async_threads;
    let asked = Instant::now();
    let busy = crate::executors::block_on(lock.try_lock_for_async(Duration::from_millis(100)))
        .expect("the warm-up's bounded wait");
    assert!(busy.is_none(), "a held lock was taken");
    assert!(
        asked.elapsed() >= Duration::from_millis(100),
        "the bounded wait ended early"
    );
    drop(held);
    let guard = crate::executors::block_on(lock.lock_async()).expect("the warm-up's lock_async");
    drop(guard);
    let started = client.stats().async_threads;
    // The pool (at least one thread) and the timer.
    assert!(
        started >= 2 && started > before,
        "the client's async threads did not start: {:?}",
        client.stats()
    );
}
