//! redhold's side of the synchronizer commands (`Op::Sync`): the same words
//! as the Java driver's `sem-*` and `latch-*` commands, on redhold's
//! `Semaphore` and `CountDownLatch`. Permits taken stay taken (the permit is
//! forgotten) until a `sem-release`, from either side, as in Java.

use std::time::Duration;

use redhold::Client;

/// Runs one synchronizer command; its reply's data words.
pub fn run(
    client: &Client,
    counters: Option<&redis::Client>,
    words: &[String],
) -> Result<String, String> {
    let word = |i: usize| -> Result<&str, String> {
        words
            .get(i)
            .map(String::as_str)
            .ok_or_else(|| format!("{words:?}: too few words"))
    };
    let number = |i: usize| -> Result<u32, String> {
        word(i)?.parse().map_err(|e| format!("{words:?}: {e}"))
    };
    let err = |e: redhold::Error| e.report();
    match word(0)? {
        "sem-try-set" => client
            .semaphore(word(1)?)
            .try_set_permits(number(2)?)
            .map(|set| set.to_string())
            .map_err(err),
        "sem-acquire" => {
            let permit = client
                .semaphore(word(1)?)
                .acquire_many(number(2)?)
                .map_err(err)?;
            permit.forget();
            Ok(String::new())
        }
        "sem-release" => client
            .semaphore(word(1)?)
            .release(number(2)?)
            .map(|()| String::new())
            .map_err(err),
        "sem-available" => client
            .semaphore(word(1)?)
            .available_permits()
            .map(|n| n.to_string())
            .map_err(err),
        "sem-hammer" => {
            let con = counters.ok_or("no counter server in this run")?;
            hammer(client, con, word(1)?, number(2)?, number(3)?, word(4)?)
        }
        "latch-try-set" => client
            .count_down_latch(word(1)?)
            .try_set_count(u64::from(number(2)?))
            .map(|set| set.to_string())
            .map_err(err),
        "latch-count-down" => client
            .count_down_latch(word(1)?)
            .count_down()
            .map(|_| String::new())
            .map_err(err),
        "latch-count" => client
            .count_down_latch(word(1)?)
            .count()
            .map(|n| n.to_string())
            .map_err(err),
        "latch-await" => client
            .count_down_latch(word(1)?)
            .wait()
            .map(|()| String::new())
            .map_err(err),
        "pes-try-set" => client
            .permit_expirable_semaphore(word(1)?)
            .try_set_permits(number(2)?)
            .map(|set| set.to_string())
            .map_err(err),
        "pes-acquire" => {
            let permit = client
                .permit_expirable_semaphore(word(1)?)
                .acquire(Duration::from_millis(u64::from(number(2)?)))
                .map_err(err)?;
            let id = permit.id();
            // Kept until its lease ends or someone releases it by its id.
            permit.forget();
            Ok(id)
        }
        "pes-release" => client
            .permit_expirable_semaphore(word(1)?)
            .release(word(2)?)
            .map(|released| released.to_string())
            .map_err(err),
        "pes-available" => client
            .permit_expirable_semaphore(word(1)?)
            .available_permits()
            .map(|n| n.to_string())
            .map_err(err),
        other => Err(format!("unknown synchronizer op {other}")),
    }
}

/// The Java driver's `semHammer`, round for round: take a permit, count
/// yourself in `PREFIX:inside` for a moment, give it back.
fn hammer(
    client: &Client,
    counters: &redis::Client,
    name: &str,
    rounds: u32,
    permits: u32,
    prefix: &str,
) -> Result<String, String> {
    let mut con = counters.get_connection().map_err(|e| e.to_string())?;
    let inside = format!("{prefix}:inside");
    let semaphore = client.semaphore(name);
    let (mut violations, mut most) = (0u32, 0i64);
    for _ in 0..rounds {
        let permit = semaphore.acquire().map_err(|e| e.report())?;
        let now: i64 = redis::cmd("INCR")
            .arg(&inside)
            .query(&mut con)
            .map_err(|e| e.to_string())?;
        most = most.max(now);
        if now > i64::from(permits) {
            violations += 1;
        }
        std::thread::sleep(Duration::from_millis(1));
        let _: i64 = redis::cmd("DECR")
            .arg(&inside)
            .query(&mut con)
            .map_err(|e| e.to_string())?;
        permit.release().map_err(|e| e.report())?;
    }
    Ok(format!("{violations} {rounds} {most}"))
}
