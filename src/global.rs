//! The process-wide client built from `REDIS_URL`.

use once_cell::sync::OnceCell;

use crate::client::Client;
use crate::config::DEFAULT_URL;
use crate::error::Result;

static GLOBAL: OnceCell<Client> = OnceCell::new();

/// A client shared by the whole process, built on first use from the
/// `REDIS_URL` environment variable (default `redis://127.0.0.1:6379/`).
///
/// A failed first use is not remembered: the next call tries again.
/// Shutting the global client down shuts it down for the whole process.
/// In a `fork()`ed child the parent's client answers every call with
/// [`Error::ForkedProcess`](crate::Error::ForkedProcess): build a client of
/// the child's own with [`Client::open`].
///
/// # Errors
///
/// As [`Client::open`].
pub fn global() -> Result<&'static Client> {
    GLOBAL.get_or_try_init(|| {
        let url = std::env::var("REDIS_URL").unwrap_or_else(|_| DEFAULT_URL.to_owned());
        Client::open(&url)
    })
}
