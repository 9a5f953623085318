//! A Redis server for the examples to talk to: `REDIS_URL` when set, else
//! the default local address when something answers there, else a
//! throwaway `redis-server` from PATH that is stopped at the end.
//!
//! Shared by the examples with `mod support;` (`examples/Cargo.toml` lists
//! the examples; this folder is not one).

use std::error::Error;
use std::fs;
use std::io::{ErrorKind, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

/// The address tried when `REDIS_URL` is not set.
pub(crate) const DEFAULT_URL: &str = "redis://127.0.0.1:6379/";

/// `REDIS_URL` if set, else [`DEFAULT_URL`] if something listens there, else
/// a throwaway `redis-server` (stopped when the [`Throwaway`] drops; keep it
/// alive for as long as clients use the URL). `example` names the example
/// in the message shown when there is no `redis-server` to start.
pub(crate) fn pick_server(example: &str) -> Result<(String, Option<Throwaway>), Box<dyn Error>> {
    if let Ok(url) = std::env::var("REDIS_URL") {
        return Ok((url, None));
    }
    if TcpStream::connect(("127.0.0.1", 6379)).is_ok() {
        return Ok((DEFAULT_URL.to_string(), None));
    }
    println!("nothing answers at 127.0.0.1:6379; starting a throwaway redis-server");
    let server = Throwaway::start(example)?;
    Ok((format!("redis://127.0.0.1:{}/", server.port), Some(server)))
}

/// A `redis-server` from PATH on a free port, persistence off, in a temp dir;
/// killed and its dir removed on drop.
pub(crate) struct Throwaway {
    child: Child,
    port: u16,
    dir: PathBuf,
}

impl Throwaway {
    fn start(example: &str) -> Result<Throwaway, Box<dyn Error>> {
        let port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
        let dir = std::env::temp_dir().join(format!("redhold-{example}-{}", std::process::id()));
        fs::create_dir_all(&dir)?;
        let spawned = Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no", "--logfile", "redis.log"])
            .current_dir(&dir)
            .stdout(Stdio::null())
            .spawn();
        let child = match spawned {
            Ok(child) => child,
            Err(e) => {
                let _ = fs::remove_dir_all(&dir);
                return Err(match e.kind() {
                    ErrorKind::NotFound => no_redis(example).into(),
                    _ => format!("cannot run redis-server: {e}").into(),
                });
            }
        };
        // From here on, Drop kills the child and removes the dir.
        let mut server = Throwaway { child, port, dir };
        let deadline = Instant::now() + Duration::from_secs(10);
        while !ping(port) {
            if let Some(status) = server.child.try_wait()? {
                let log = fs::read_to_string(server.dir.join("redis.log")).unwrap_or_default();
                return Err(format!("redis-server exited with {status}; its log:\n{log}").into());
            }
            if Instant::now() >= deadline {
                return Err("redis-server did not answer PING within 10 s".into());
            }
            thread::sleep(Duration::from_millis(20));
        }
        println!("redis-server is up on port {port}");
        Ok(server)
    }
}

impl Drop for Throwaway {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = fs::remove_dir_all(&self.dir);
        // Not println!: a closed stdout must not turn into a panic in Drop.
        let _ = writeln!(std::io::stdout(), "(stopped the throwaway redis-server)");
    }
}

fn ping(port: u16) -> bool {
    let mut reply = [0u8; 7];
    TcpStream::connect(("127.0.0.1", port))
        .and_then(|mut stream| {
            stream.set_read_timeout(Some(Duration::from_millis(200)))?;
            stream.write_all(b"PING\r\n")?;
            stream.read_exact(&mut reply)
        })
        .is_ok_and(|()| &reply == b"+PONG\r\n")
}

fn no_redis(example: &str) -> String {
    format!(
        "nothing answers at {DEFAULT_URL} and there is no redis-server on PATH to start.
Either point REDIS_URL at a Redis server, or install Redis 6.2 or later:
    Debian/Ubuntu:  sudo apt-get install redis-server
    macOS:          brew install redis
then run `cargo run --example {example}` again."
    )
}
