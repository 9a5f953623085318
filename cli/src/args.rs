//! The command line, as clap reads it.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

/// What `--help` prints after the options.
const AFTER_HELP: &str = "\
Exit codes:
  0  success (also: `show` of a name that holds no lock)
  1  a Redis command failed, or the name holds a value that is not a lock
  2  bad command line: unknown option, malformed URL, unreadable certificate file
  3  Redis unreachable: refused, timed out, or no cluster node or sentinel answered
  4  Redis refused access: wrong password or user, or missing ACL rights
  5  force-unlock not confirmed (answered no, or no terminal and no --yes)

Errors are one line on stderr.

Passwords: the command line (a password in --url, --cluster or --sentinel)
is visible to every user of this machine (ps, /proc) and stays in the shell
history. Give the password in the environment instead, as REDHOLD_PASSWORD
or REDISCLI_AUTH (the variable redis-cli reads), or in a file with
--password-file. It is used for --url (or REDIS_URL) and for every node of
--cluster and --sentinel, except a URL that carries a password of its own.
Passwords are never printed: errors show URLs with `***` in their place.";

/// Looks at and operates the distributed locks that redhold (and Redisson)
/// clients keep in Redis.
#[derive(Debug, Parser)]
#[command(name = "redhold", version, after_help = AFTER_HELP)]
pub(crate) struct Cli {
    #[command(flatten)]
    pub(crate) connection: Connection,
    #[command(subcommand)]
    pub(crate) command: Command,
}

/// Where the locks live: the options of the library's client builder.
#[derive(Debug, Args)]
pub(crate) struct Connection {
    /// The Redis server, redis://[user:password@]host[:port][/db] or
    /// rediss://… [env: REDIS_URL] [default: redis://127.0.0.1:6379/]
    #[arg(long, global = true, value_name = "URL", conflicts_with_all = ["cluster", "sentinel"])]
    pub(crate) url: Option<String>,

    /// A Redis Cluster node, as a URL or host:port; one is enough, repeat
    /// the option or separate with commas to give more.
    #[arg(
        long,
        global = true,
        value_name = "NODE",
        value_delimiter = ',',
        conflicts_with = "sentinel"
    )]
    pub(crate) cluster: Vec<String>,

    /// A Sentinel, as a URL or host:port (repeat or separate with commas);
    /// needs --master.
    #[arg(
        long,
        global = true,
        value_name = "NODE",
        value_delimiter = ',',
        requires = "master"
    )]
    pub(crate) sentinel: Vec<String>,

    /// The name of the master the sentinels watch.
    #[arg(long, global = true, value_name = "NAME", requires = "sentinel")]
    pub(crate) master: Option<String>,

    /// Trust this CA certificate (PEM) for rediss:// connections instead of
    /// the system's roots.
    #[arg(long, global = true, value_name = "FILE")]
    pub(crate) tls_root_cert: Option<PathBuf>,

    /// The ACL user to log in as on every node (with the password of
    /// --password-file, REDHOLD_PASSWORD or REDISCLI_AUTH).
    #[arg(long, global = true, value_name = "NAME")]
    pub(crate) user: Option<String>,

    /// Read the password from this file (its first line break ends it),
    /// for every node; takes precedence over REDHOLD_PASSWORD and
    /// REDISCLI_AUTH. Safer than a password on the command line, which
    /// other users can see.
    #[arg(long, global = true, value_name = "FILE")]
    pub(crate) password_file: Option<PathBuf>,

    /// How long connecting may take before the server counts as
    /// unreachable.
    #[arg(
        long,
        global = true,
        value_name = "SECONDS",
        default_value = "5",
        value_parser = seconds
    )]
    pub(crate) connect_timeout: Duration,
}

/// The things to do.
#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// List the locks that are held or have waiters.
    ///
    /// One line each: name, kind, mode, holders, TTL, waiters (for a fair
    /// lock its queue; for the other kinds the client connections listening
    /// for its release). Found with SCAN, on every master of a cluster.
    /// With --counters, the semaphores and count-down latches instead.
    // Each form's whole usage: clap would otherwise print, after a
    // mistyped option, the usage of the option it suggests (`list --jsn`
    // gave `Usage: redhold list --json [PATTERN]`) as if that were the form.
    #[command(override_usage = "redhold list [OPTIONS] [PATTERN]")]
    List {
        /// Only names matching this Redis glob pattern.
        #[arg(default_value = "*")]
        pattern: String,
        /// List semaphores and count-down latches (every number stored
        /// under a matching name: Redis cannot tell the two apart) and
        /// permit-expirable semaphores with their permits out.
        #[arg(long, conflicts_with = "json_lines")]
        counters: bool,
        /// One JSON array of the locks, each as `show --json` prints it
        /// (`[]` when none matches).
        #[arg(long, conflicts_with = "json_lines")]
        json: bool,
        /// One JSON object per line, as `show --json` prints it.
        #[arg(long)]
        json_lines: bool,
    },
    /// Show one lock in full.
    ///
    /// Kind, mode, holders, TTL, fair queue, listeners, fencing token. A
    /// name that holds no lock shows as not locked (exit code 0). A name
    /// that holds a semaphore or a count-down latch shows its number, and
    /// a permit-expirable semaphore its permits out with their leases.
    #[command(override_usage = "redhold show [OPTIONS] <NAME>")]
    Show {
        /// The lock's name.
        name: String,
        /// Print one JSON object.
        #[arg(long)]
        json: bool,
    },
    /// Delete a lock whoever holds it, and wake its waiters.
    ///
    /// Works for every kind; waiters in every process are woken the way
    /// that kind wakes them. The holders lose the lock and find out when
    /// they renew or release it. Asks first unless --yes is given.
    #[command(
        name = "force-unlock",
        override_usage = "redhold force-unlock [OPTIONS] <NAME>"
    )]
    ForceUnlock {
        /// The lock's name.
        name: String,
        /// Do not ask for confirmation (needed when stdin is not a terminal).
        #[arg(long, short)]
        yes: bool,
    },
    /// Show one lock and redraw it as it changes, until Ctrl-C.
    ///
    /// Redrawn when its holders, mode, waiters, listeners or token change;
    /// a TTL renewed by a watchdog is not a change. While Redis is
    /// unreachable (a restart, a failover) it says "reconnecting…" and
    /// carries on once Redis answers again.
    #[command(override_usage = "redhold watch [OPTIONS] <NAME>")]
    Watch {
        /// The lock's name.
        name: String,
        /// How often to look, in milliseconds.
        #[arg(long, value_name = "MS", default_value_t = 300, value_parser = clap::value_parser!(u64).range(10..))]
        interval: u64,
    },
}

/// Parses a positive number of seconds, fractions allowed.
fn seconds(text: &str) -> Result<Duration, String> {
    let value: f64 = text
        .parse()
        .map_err(|_| format!("{text:?} is not a number of seconds"))?;
    if !(value > 0.0 && value <= 3600.0) {
        return Err(format!("{text} must be above 0 and at most 3600"));
    }
    Ok(Duration::from_secs_f64(value))
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::*;

    #[test]
    fn the_command_line_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn cluster_nodes_may_be_repeated_or_comma_separated() {
        let cli = Cli::try_parse_from([
            "redhold",
            "--cluster",
            "a:1,b:2",
            "--cluster",
            "c:3",
            "list",
        ])
        .unwrap();
        assert_eq!(cli.connection.cluster, ["a:1", "b:2", "c:3"]);
        assert!(matches!(cli.command, Command::List { ref pattern, .. } if pattern == "*"));
        // Connection options may follow the subcommand too.
        let cli = Cli::try_parse_from(["redhold", "show", "x", "--cluster", "c:3"]).unwrap();
        assert_eq!(cli.connection.cluster, ["c:3"]);
    }

    #[test]
    fn url_and_cluster_exclude_each_other() {
        let parsed =
            Cli::try_parse_from(["redhold", "--url", "redis://x/", "--cluster", "a:1", "list"]);
        assert!(parsed.is_err());
        assert!(Cli::try_parse_from(["redhold", "--sentinel", "s:1", "list"]).is_err());
    }

    #[test]
    fn timeouts_are_positive_seconds() {
        assert_eq!(seconds("1.5"), Ok(Duration::from_millis(1500)));
        assert!(seconds("0").is_err());
        assert!(seconds("soon").is_err());
    }
}
