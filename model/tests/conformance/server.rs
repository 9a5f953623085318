//! A `redis-server` of the test's own, on a free port in a temp dir,
//! killed and cleaned up on drop (a small copy of the library's
//! `tests/support`, which this crate cannot import).

#[path = "../../../tests/support/server_command.rs"]
mod server_command;

use std::net::{Ipv4Addr, TcpListener};
use std::path::PathBuf;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

/// A running server.
pub(crate) struct Server {
    child: Child,
    dir: PathBuf,
    pub(crate) port: u16,
}

impl Server {
    /// Starts one and waits until it answers PING.
    pub(crate) fn start() -> Server {
        let found = std::process::Command::new("redis-server")
            .arg("--version")
            .output();
        assert!(
            found.is_ok_and(|o| o.status.success()),
            "redis-server not found on PATH: the conformance test needs it \
             (sudo apt-get install redis-server)"
        );
        let dir = std::env::temp_dir().join(format!(
            "redhold-model-{}-{}",
            std::process::id(),
            Instant::now().elapsed().as_nanos()
        ));
        std::fs::create_dir_all(&dir).expect("a temp dir");
        for _ in 0..5 {
            let port = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
                .and_then(|l| l.local_addr())
                .map(|a| a.port())
                .expect("a free port");
            let child = server_command::redis_server_command()
                .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
                .args(["--save", "", "--appendonly", "no"])
                .arg("--dir")
                .arg(&dir)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("redis-server starts");
            let mut server = Server {
                child,
                dir: dir.clone(),
                port,
            };
            if server.wait_ready() {
                return server;
            }
            let _ = server.child.kill();
            let _ = server.child.wait();
        }
        panic!("redis-server did not start in {}", dir.display());
    }

    /// `redis://127.0.0.1:<port>/`.
    pub(crate) fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    fn wait_ready(&mut self) -> bool {
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return false;
            }
            let pong = redis::Client::open(self.url())
                .and_then(|c| c.get_connection_with_timeout(Duration::from_millis(200)))
                .and_then(|mut c| redis::cmd("PING").query::<String>(&mut c));
            if pong.is_ok() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        false
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
