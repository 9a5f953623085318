//! The tasks' own Redis commands, from the task, without blocking its
//! executor: a tiny connection over a tokio `TcpStream` that sends `GET`
//! and `SET` and reads their replies, and a pool of them. (The redis
//! crate's async API would bring the library's dependency features it
//! does not build with; this needs none.)

use std::sync::Mutex;

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tokio::sync::Semaphore;

/// One connection to a server at `127.0.0.1:<port>`.
pub(crate) struct AsyncRedis {
    stream: BufReader<TcpStream>,
}

impl AsyncRedis {
    pub(crate) async fn connect(port: u16) -> AsyncRedis {
        let stream = TcpStream::connect(("127.0.0.1", port))
            .await
            .expect("a connection to Redis");
        AsyncRedis {
            stream: BufReader::new(stream),
        }
    }

    /// `GET key`, as a number (absent: 0).
    pub(crate) async fn get(&mut self, key: &str) -> u64 {
        self.send(&["GET", key]).await;
        let line = self.line().await;
        let Some(len) = line.strip_prefix('$') else {
            panic!("GET answered {line:?}");
        };
        let Ok(len) = usize::try_from(len.parse::<i64>().expect("a bulk length")) else {
            return 0; // $-1: no such key
        };
        let mut value = vec![0; len + 2];
        self.stream
            .read_exact(&mut value)
            .await
            .expect("GET's value");
        std::str::from_utf8(&value[..len])
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("GET {key}: not a number: {value:?}"))
    }

    /// `SET key value`.
    pub(crate) async fn set(&mut self, key: &str, value: u64) {
        self.send(&["SET", key, &value.to_string()]).await;
        let line = self.line().await;
        assert_eq!(line, "+OK", "SET answered {line:?}");
    }

    async fn send(&mut self, args: &[&str]) {
        let mut request = format!("*{}\r\n", args.len());
        for arg in args {
            request.push_str(&format!("${}\r\n{arg}\r\n", arg.len()));
        }
        self.stream
            .get_mut()
            .write_all(request.as_bytes())
            .await
            .expect("a request to Redis");
    }

    async fn line(&mut self) -> String {
        let mut line = String::new();
        self.stream
            .read_line(&mut line)
            .await
            .expect("a reply from Redis");
        line.trim_end().to_owned()
    }
}

/// A few connections shared by many tasks.
pub(crate) struct Pool {
    idle: Mutex<Vec<AsyncRedis>>,
    free: Semaphore,
}

impl Pool {
    pub(crate) async fn new(port: u16, size: usize) -> Pool {
        let mut idle = Vec::with_capacity(size);
        for _ in 0..size {
            idle.push(AsyncRedis::connect(port).await);
        }
        Pool {
            idle: Mutex::new(idle),
            free: Semaphore::new(size),
        }
    }

    /// Adds one to `key` with a separate GET and SET and a yield between
    /// them (as the library's `support::contention::increment` does), so
    /// that two callers at once lose an update.
    pub(crate) async fn increment(&self, key: &str) {
        let permit = self.free.acquire().await.expect("the pool's semaphore");
        let mut con = self.idle.lock().unwrap().pop().expect("an idle connection");
        let value = con.get(key).await;
        tokio::task::yield_now().await;
        con.set(key, value + 1).await;
        self.idle.lock().unwrap().push(con);
        drop(permit);
    }
}
