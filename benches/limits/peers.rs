//! Peers side by side: the uncontended lock + unlock pair of redhold next to
//! other Rust Redis lock crates, measured by the `peers` binary of the
//! `redhold-peers` workspace crate (`benches/peers`) on the same server, as
//! a subprocess (the peers' dependencies stay out of the library and of
//! this bench). Its one JSON line is folded into the table and the JSON.
//!
//! Where the binary comes from: `LIMITS_PEERS_BIN` if set; else, if cargo
//! can be run (`$CARGO`, else `cargo` on PATH), `cargo build --release -p
//! redhold-peers` into this bench's target directory (a no-op when it is up
//! to date, so the redhold it measures is the one in the tree), then
//! `<target>/release/peers`; else that file if it exists. If none works the
//! rows are left out and the run says why; never fatal.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::json::Json;
use crate::table::Table;

/// The peers binary gets this long (it needs a few seconds).
const PEERS_TIMEOUT: Duration = Duration::from_secs(120);
/// Target: redhold's pair p50 within this of rslock's.
const MAX_OVER_RSLOCK: f64 = 1.05;
/// (JSON key, table label) of each peer, in table order.
const PEERS: [(&str, &str); 3] = [
    ("rslock", "rslock 0.10 (async)"),
    ("rlock", "rlock 0.2 (sync)"),
    ("redis_lock", "redis-lock 0.5 (sync)"),
];

/// The figures of the peers run (every number of its JSON line), or why
/// there are none.
pub(crate) type Peers = Result<Vec<(String, f64)>, String>;

pub(crate) fn measure(url: &str, samples: usize) -> Peers {
    let bin = locate()?;
    eprintln!("peers: {} {samples} samples", bin.display());
    let mut child = Command::new(&bin)
        .arg(url)
        .arg(samples.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run {}: {e}", bin.display()))?;
    let deadline = Instant::now() + PEERS_TIMEOUT;
    while child.try_wait().map_err(|e| e.to_string())?.is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!("{} ran past {PEERS_TIMEOUT:?}", bin.display()));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().map_err(|e| e.to_string())?;
    if !out.status.success() {
        return Err(format!(
            "{} failed ({}): {}",
            bin.display(),
            out.status,
            last_line(&out.stderr)
        ));
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout.lines().last().unwrap_or("");
    parse(line).ok_or_else(|| format!("unreadable output: {:?}", last_line(&out.stdout)))
}

fn locate() -> Result<PathBuf, String> {
    if let Some(p) = std::env::var_os("LIMITS_PEERS_BIN") {
        let p = PathBuf::from(p);
        return if p.is_file() {
            Ok(p)
        } else {
            Err(format!("LIMITS_PEERS_BIN={} is not a file", p.display()))
        };
    }
    // This executable is <target>/release/deps/limits-<hash>.
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let release = exe
        .parent()
        .and_then(Path::parent)
        .ok_or("cannot tell the target directory")?;
    let target = release.parent().ok_or("cannot tell the target directory")?;
    let bin = release.join(format!("peers{}", std::env::consts::EXE_SUFFIX));
    match cargo_build(target) {
        Ok(()) if bin.is_file() => Ok(bin),
        Ok(()) => Err(format!(
            "cargo built redhold-peers but {} is missing",
            bin.display()
        )),
        Err(why) if bin.is_file() => {
            eprintln!("peers: {why}; using {} as it is", bin.display());
            Ok(bin)
        }
        Err(why) => Err(why),
    }
}

/// What cargo sets (besides `CARGO_PKG_*`) for the program it runs.
const RUN_VARS: [&str; 8] = [
    "CARGO_MANIFEST_DIR",
    "CARGO_MANIFEST_PATH",
    "CARGO_CRATE_NAME",
    "CARGO_BIN_NAME",
    "CARGO_PRIMARY_PACKAGE",
    "CARGO_TARGET_TMPDIR",
    "CARGO_RUSTC_CURRENT_DIR",
    "OUT_DIR",
];

/// `cargo build --release -p redhold-peers --quiet` into `target`.
fn cargo_build(target: &Path) -> Result<(), String> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    eprintln!("peers: cargo build --release -p redhold-peers (the first build takes minutes)");
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml");
    let mut cmd = Command::new(&cargo);
    // Not the variables cargo set for this bench's run: build scripts track
    // some (ring: CARGO_MANIFEST_DIR), and a change rebuilds half the tree.
    for (k, _) in std::env::vars_os() {
        let k = k.to_string_lossy();
        if k.starts_with("CARGO_PKG_") || RUN_VARS.contains(&k.as_ref()) {
            cmd.env_remove(k.as_ref());
        }
    }
    let out = cmd
        .args(["build", "--release", "--quiet", "-p", "redhold-peers"])
        .arg("--manifest-path")
        .arg(&manifest)
        .arg("--target-dir")
        .arg(target)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run cargo: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "cargo build -p redhold-peers failed: {}",
            last_line(&out.stderr)
        ))
    }
}

fn last_line(bytes: &[u8]) -> String {
    let s = String::from_utf8_lossy(bytes);
    s.lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("(no output)")
        .trim()
        .to_string()
}

/// A flat JSON object of numbers, as the peers binary prints it.
fn parse(line: &str) -> Option<Vec<(String, f64)>> {
    let inner = line.trim().strip_prefix('{')?.strip_suffix('}')?;
    inner
        .split(',')
        .map(|kv| {
            let (k, v) = kv.split_once(':')?;
            let k = k.trim().strip_prefix('"')?.strip_suffix('"')?;
            Some((k.to_string(), v.trim().parse().ok()?))
        })
        .collect()
}

pub(crate) fn get(p: &[(String, f64)], key: &str) -> Option<f64> {
    p.iter().find(|(k, _)| k == key).map(|(_, v)| *v)
}

pub(crate) fn us(v: f64) -> String {
    crate::stats::fmt_us(Duration::from_secs_f64(v.max(0.0) / 1e6))
}

/// The line printed instead of the rows when there are none.
pub(crate) fn not_measured(p: &Peers) -> Option<String> {
    p.as_ref()
        .err()
        .map(|why| format!("peers: not measured ({why})"))
}

pub(crate) fn rows(t: &mut Table, p: &Peers) {
    let Ok(p) = p else { return };
    let pair = |k: &str| {
        Some((
            get(p, &format!("{k}_pair_p50_us"))?,
            get(p, &format!("{k}_pair_p99_us"))?,
        ))
    };
    let (Some(raw), Some(rh)) = (pair("raw"), pair("redhold")) else {
        return;
    };
    t.info_cols(
        "peers run: redhold lock()+drop",
        &format!("{} / {}", us(rh.0), us(rh.1)),
        &format!("{} (raw acq+rel)", us(raw.0)),
        &format!("{:.2}", rh.0 / raw.0),
        "-",
    );
    for (key, label) in PEERS {
        if let Some((p50, p99)) = pair(key) {
            t.info_cols(
                &format!("peer {label} uncontended pair"),
                &format!("{} / {}", us(p50), us(p99)),
                &format!("{} (redhold)", us(rh.0)),
                &format!("{:.2}", p50 / rh.0),
                "info: ratio = peer / redhold",
            );
        }
    }
    if let Some(rs) = pair("rslock") {
        t.plain_row(
            "redhold pair vs rslock pair",
            &format!("{} / {}", us(rh.0), us(rh.1)),
            &format!("{} (rslock)", us(rs.0)),
            &format!("{:.2}", rh.0 / rs.0),
            &format!("p50 <= {MAX_OVER_RSLOCK}x rslock"),
            rh.0 <= MAX_OVER_RSLOCK * rs.0,
        );
    }
}

/// `peers_<key>` for every figure of the peers run, and
/// `peers_redhold_p50_over_rslock_p50`; or `peers_not_measured` (why).
pub(crate) fn to_json(j: &mut Json, p: &Peers) {
    match p {
        Ok(p) => {
            for (k, v) in p {
                j.num(&format!("peers_{k}"), *v);
            }
            if let (Some(rh), Some(rs)) =
                (get(p, "redhold_pair_p50_us"), get(p, "rslock_pair_p50_us"))
            {
                j.num("peers_redhold_p50_over_rslock_p50", rh / rs);
            }
        }
        Err(why) => j.str("peers_not_measured", why),
    }
}
