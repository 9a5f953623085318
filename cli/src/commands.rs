//! Each subcommand: connect, ask the library, print.

use std::io::{self, BufRead, IsTerminal, Write};
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use redhold::inspect::LockInfo;
use redhold::Client;

use crate::args::{Cli, Command, Connection};
use crate::credentials::Credentials;
use crate::failure::{Failure, NOT_CONFIRMED, USAGE};
use crate::{counters, escape, json, text};

/// The server used when neither --url, REDIS_URL, --cluster nor --sentinel
/// names one.
const DEFAULT_URL: &str = "redis://127.0.0.1:6379/";

/// Runs the command the user asked for.
pub(crate) fn run(cli: Cli) -> Result<(), Failure> {
    let client = connect(&cli.connection)?;
    match cli.command {
        Command::List {
            pattern,
            counters: true,
            json,
            ..
        } => list_counters(&client, &pattern, json),
        Command::List {
            pattern,
            json,
            json_lines,
            ..
        } => list(&client, &pattern, Format::pick(json, json_lines)),
        Command::Show { name, json } => show(&client, &name, json),
        Command::ForceUnlock { name, yes } => force_unlock(&client, &name, yes),
        Command::Watch { name, interval } => watch(&client, &name, Duration::from_millis(interval)),
    }
}

/// A client for the deployment the options name.
fn connect(options: &Connection) -> Result<Client, Failure> {
    let credentials =
        Credentials::gather(options.user.as_deref(), options.password_file.as_deref())?;
    let with_credentials = |node: &String| credentials.apply(node_url(node));
    let mut builder = Client::builder().connect_timeout(options.connect_timeout);
    if !options.cluster.is_empty() {
        builder = builder.cluster(options.cluster.iter().map(with_credentials));
    } else if !options.sentinel.is_empty() {
        let master = options.master.clone().unwrap_or_default();
        builder = builder.sentinel(options.sentinel.iter().map(with_credentials), master);
    } else {
        let url = options
            .url
            .clone()
            .or_else(|| std::env::var("REDIS_URL").ok().filter(|u| !u.is_empty()))
            .unwrap_or_else(|| DEFAULT_URL.to_owned());
        builder = builder.url(credentials.apply(url));
    }
    if let Some(path) = &options.tls_root_cert {
        let pem = std::fs::read(path).map_err(|e| {
            Failure::new(
                USAGE,
                format!("cannot read the certificate file {}: {e}", path.display()),
            )
        })?;
        builder = builder.tls_root_cert(pem);
    }
    Ok(builder.build()?)
}

/// A node given as `host:port` becomes `redis://host:port`.
fn node_url(node: &str) -> String {
    if node.contains("://") {
        node.to_owned()
    } else {
        format!("redis://{node}")
    }
}

/// How `list` prints the locks.
#[derive(Debug, Clone, Copy)]
enum Format {
    Table,
    Json,
    JsonLines,
}

impl Format {
    fn pick(json: bool, json_lines: bool) -> Format {
        match (json, json_lines) {
            (_, true) => Format::JsonLines,
            (true, false) => Format::Json,
            (false, false) => Format::Table,
        }
    }
}

fn list(client: &Client, pattern: &str, format: Format) -> Result<(), Failure> {
    let locks = client.list_locks(pattern)?;
    let mut out = io::stdout().lock();
    match format {
        Format::Json => print_line(&mut out, &json::locks(&locks))?,
        Format::JsonLines => {
            for info in &locks {
                print_line(&mut out, &json::lock(info))?;
            }
        }
        Format::Table if locks.is_empty() => eprintln!("no lock matches {pattern:?}"),
        Format::Table => print_line(&mut out, &text::table(&locks))?,
    }
    Ok(())
}

fn list_counters(client: &Client, pattern: &str, as_json: bool) -> Result<(), Failure> {
    let found = client.list_counters(pattern)?;
    let mut out = io::stdout().lock();
    if as_json {
        print_line(&mut out, &counters::json_array(&found))
    } else if found.is_empty() {
        eprintln!("no semaphore or latch matches {pattern:?}");
        Ok(())
    } else {
        print_line(&mut out, &counters::table(&found))
    }
}

fn show(client: &Client, name: &str, as_json: bool) -> Result<(), Failure> {
    let info = match client.inspect(name) {
        Ok(info) => info,
        // Not a lock: a semaphore or a latch, maybe.
        Err(not_a_lock @ redhold::Error::WrongKind { .. }) => {
            let Some(counter) = client.inspect_counter(name).ok().flatten() else {
                return Err(not_a_lock.into());
            };
            let rendered = if as_json {
                counters::json(&counter)
            } else {
                counters::show(&counter)
            };
            return print_line(&mut io::stdout().lock(), &rendered);
        }
        Err(e) => return Err(e.into()),
    };
    let rendered = if as_json {
        json::lock(&info)
    } else {
        text::lock(&info)
    };
    print_line(&mut io::stdout().lock(), &rendered)
}

fn force_unlock(client: &Client, name: &str, yes: bool) -> Result<(), Failure> {
    let info = client.inspect(name)?;
    let mut out = io::stdout().lock();
    if info.is_vacant() {
        return print_line(&mut out, &format!("{name:?} is not locked: nothing to do"));
    }
    if !yes {
        confirm(&info)?;
    }
    let done = match client.force_unlock_any(name)? {
        Some(kind) => format!(
            "removed {} {name:?} and woke its waiters",
            text::kind_words(kind)
        ),
        None => format!("{name:?} was no longer locked: nothing removed"),
    };
    print_line(&mut out, &done)
}

/// Asks on the terminal whether to go on; anything but y or yes is a no.
fn confirm(info: &LockInfo) -> Result<(), Failure> {
    let stdin = io::stdin();
    if !stdin.is_terminal() {
        return Err(Failure::new(
            NOT_CONFIRMED,
            format!(
                "not removing {:?}: stdin is not a terminal to confirm on; pass --yes to force-unlock without asking",
                info.name
            ),
        ));
    }
    let holders: Vec<String> = (info.holders.iter())
        .map(|h| text::who(h.identity.as_ref(), &h.id()))
        .collect();
    eprint!(
        "force-unlock {} {:?} held by {} ({} waiting)? [y/N] ",
        text::kind_words(info.kind),
        info.name,
        if holders.is_empty() {
            "nobody".to_owned()
        } else {
            holders.join(", ")
        },
        info.queue
            .len()
            .max(usize::try_from(info.subscribers).unwrap_or(usize::MAX))
    );
    let _ = io::stderr().flush();
    let mut answer = String::new();
    stdin
        .lock()
        .read_line(&mut answer)
        .map_err(|e| Failure::new(NOT_CONFIRMED, format!("cannot read the answer: {e}")))?;
    match answer.trim().to_ascii_lowercase().as_str() {
        "y" | "yes" => Ok(()),
        _ => Err(Failure::new(
            NOT_CONFIRMED,
            format!("not confirmed: {:?} left as it is", info.name),
        )),
    }
}

/// Redraws the lock whenever anything but its TTL changes. While Redis is
/// unreachable (a restart, a failover) it says so once and keeps asking;
/// once Redis answers again it redraws. Only Ctrl-C, or an error that
/// waiting cannot cure (refused access, a name that holds no lock), ends it.
fn watch(client: &Client, name: &str, interval: Duration) -> Result<(), Failure> {
    let terminal = io::stdout().is_terminal();
    let mut last: Option<LockInfo> = None;
    let mut away_since: Option<Instant> = None;
    loop {
        let info = match client.inspect(name) {
            Ok(info) => info,
            Err(e) => {
                let failure = Failure::from(e);
                if failure.code != crate::failure::UNREACHABLE {
                    return Err(failure);
                }
                if away_since.is_none() {
                    away_since = Some(Instant::now());
                    let line = format!(
                        "{} UTC: Redis is unreachable; reconnecting… (Ctrl-C to stop)\n  {failure}",
                        clock(SystemTime::now())
                    );
                    print_line(&mut io::stdout().lock(), &line)?;
                }
                thread::sleep(interval);
                continue;
            }
        };
        if let Some(since) = away_since.take() {
            let line = format!(
                "{} UTC: reconnected after {:.1} s",
                clock(SystemTime::now()),
                since.elapsed().as_secs_f64()
            );
            print_line(&mut io::stdout().lock(), &line)?;
            // Whatever changed meanwhile, draw the lock again.
            last = None;
        }
        let mut compared = info.clone();
        compared.ttl = None;
        if last.as_ref() != Some(&compared) {
            let mut out = io::stdout().lock();
            let screen = format!(
                "{}{} at {} UTC (Ctrl-C to stop)\n{}\n",
                if terminal { "\x1b[2J\x1b[H" } else { "" },
                escape::name(name),
                clock(SystemTime::now()),
                text::lock(&info)
            );
            print_line(&mut out, &screen)?;
            last = Some(compared);
        }
        thread::sleep(interval);
    }
}

/// `hh:mm:ss.mmm` of the UTC day.
fn clock(time: SystemTime) -> String {
    let ms = time
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() % 86_400_000);
    format!(
        "{:02}:{:02}:{:02}.{:03}",
        ms / 3_600_000,
        ms / 60_000 % 60,
        ms / 1000 % 60,
        ms % 1000
    )
}

/// Prints `text` and a newline; a closed pipe (`redhold list | head`) ends
/// the output quietly.
fn print_line(out: &mut impl Write, text: &str) -> Result<(), Failure> {
    match writeln!(out, "{text}").and_then(|()| out.flush()) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => std::process::exit(0),
        Err(e) => Err(Failure::new(
            crate::failure::FAILED,
            format!("cannot write the output: {e}"),
        )),
    }
}
