//! The model cannot drift from the scripts: seeded random walks of the
//! model's Redis side replayed against a real `redis-server` running the
//! files in `lua/` themselves, compared after every step (reply, every key
//! with its type, value and TTL, and what a `PSUBSCRIBE *` listener
//! heard); every branch of every script must be reached; each file's SHA-1
//! must be the one pinned in the model.
//!
//! `REDHOLD_CONFORMANCE_SEED=<seed>` replays one walk (the seed a failure
//! prints); `REDHOLD_CONFORMANCE_WALKS=<n>` runs more walks than the
//! default.

mod conformance {
    pub(crate) mod compare;
    pub(crate) mod files;
    pub(crate) mod real;
    pub(crate) mod rng;
    pub(crate) mod server;
    pub(crate) mod walk;
}

use conformance::walk::{Step, Walker};
use conformance::{compare, files, real::Real, server::Server};
use redhold_model::keyspace::{Keyspace, Value};
use redhold_model::names::Key;
use redhold_model::scripts::{self, branches, helper_returns, Env, Script};
use std::collections::BTreeSet;
use std::time::Instant;

/// The default walks: enough to reach every branch, well within 20 s.
const WALKS: u64 = 250;
const STEPS: usize = 60;
const MASTER_SEED: u64 = 0x005E_ED40;

fn env_u64(name: &str) -> Option<u64> {
    let value = std::env::var(name).ok()?;
    Some(
        value
            .parse()
            .unwrap_or_else(|_| panic!("{name}={value} is not a number")),
    )
}

#[test]
fn every_file_is_the_one_the_model_was_written_from() {
    let mut stale = Vec::new();
    for &script in Script::ALL {
        let text = files::text(script);
        let sha = redis::Script::new(text).get_hash().to_owned();
        if sha != script.pinned_sha1() {
            stale.push(format!(
                "lua/{} changed (SHA-1 {sha}, the model pins {}): update the model's \
                 function for it (model/src/scripts/), its branch table \
                 (model/src/scripts/branches.rs) and its pinned SHA (model/src/scripts/mod.rs)",
                script.file(),
                script.pinned_sha1()
            ));
        }
    }
    assert!(stale.is_empty(), "{}", stale.join("\n"));
}

#[test]
fn every_return_of_every_file_is_in_the_branch_table() {
    let lua = std::fs::read_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/../lua"))
        .expect("lua/ is readable")
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|f| f.ends_with(".lua"))
        .collect::<BTreeSet<_>>();
    let modelled = Script::ALL
        .iter()
        .map(|s| s.file().to_owned())
        .collect::<BTreeSet<_>>();
    assert_eq!(
        lua, modelled,
        "every file in lua/ has a model and no model lacks its file"
    );
    let mut problems = Vec::new();
    for &script in Script::ALL {
        let returns: BTreeSet<u16> = files::text(script)
            .lines()
            .enumerate()
            .filter(|(_, line)| is_return(line))
            .map(|(i, _)| i as u16 + 1)
            .collect();
        let mut named: BTreeSet<u16> = branches(script).iter().map(|b| b.line).collect();
        named.extend(helper_returns(script));
        if returns != named {
            problems.push(format!(
                "lua/{}: returns on lines {returns:?}, the model's table names {named:?}",
                script.file()
            ));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// Whether a line of Lua holds a `return` statement (outside a comment).
fn is_return(line: &str) -> bool {
    let code = line.split("--").next().unwrap_or("");
    code.split(|c: char| !(c.is_alphanumeric() || c == '_'))
        .any(|word| word == "return")
}

#[test]
fn the_model_answers_as_the_scripts_do() {
    let server = Server::start();
    let mut real = Real::connect(&server.url());
    let one = env_u64("REDHOLD_CONFORMANCE_SEED");
    let walks = env_u64("REDHOLD_CONFORMANCE_WALKS").unwrap_or(WALKS);
    let seeds: Vec<u64> = match one {
        Some(seed) => vec![seed],
        None => (0..walks)
            .map(|i| MASTER_SEED.wrapping_mul(0x9E37_79B9).wrapping_add(i))
            .collect(),
    };
    println!(
        "conformance: {} walks of {STEPS} steps (master seed {MASTER_SEED:#x}); \
         REDHOLD_CONFORMANCE_SEED=<seed> replays one",
        seeds.len()
    );
    let started = Instant::now();
    let mut hit = BTreeSet::new();
    let mut steps = 0;
    for &seed in &seeds {
        steps += walk(&mut real, seed, &mut hit);
    }
    println!("conformance: {steps} steps in {:.1?}", started.elapsed());
    if one.is_some() {
        return;
    }
    let mut missed = Vec::new();
    let mut total = 0;
    for &script in Script::ALL {
        for b in branches(script) {
            total += 1;
            if !hit.contains(&(script, b.id)) {
                missed.push(format!("lua/{}:{} ({})", script.file(), b.line, b.id));
            }
        }
    }
    println!(
        "conformance: {} of {total} branches reached",
        total - missed.len()
    );
    assert!(
        missed.is_empty(),
        "branches no walk reached:\n  {}",
        missed.join("\n  ")
    );
}

/// One walk from `seed`; the number of steps it ran.
fn walk(real: &mut Real, seed: u64, hit: &mut BTreeSet<(Script, &'static str)>) -> usize {
    real.flush();
    let env = Env {
        classic_listeners: 1,
        sharded_listeners: 0,
        mutation: None,
    };
    let mut ks = Keyspace::new();
    let mut walker = Walker::new(seed);
    let mut trace: Vec<String> = Vec::new();
    let fail = |trace: &[String], what: String| -> ! {
        panic!(
            "walk {seed} (REDHOLD_CONFORMANCE_SEED={seed}) diverged at step {}:\n{what}\nsteps:\n  {}",
            trace.len(),
            trace.join("\n  ")
        )
    };
    for _ in 0..STEPS {
        let step = walker.next(&ks);
        trace.push(format!("{step:?}"));
        match step {
            Step::Tick(ms) => {
                // What expires in the model goes on the server at once (a
                // poke may write the key again before the next call).
                let gone: Vec<String> = ks.advance(ms).iter().map(Key::to_string).collect();
                real.snap(&ttls(&ks), &gone);
            }
            Step::Poke(key, value) => {
                let name = key.to_string();
                real.command(&["DEL".into(), name.clone()]);
                match &value {
                    Value::Str(s) => real.command(&["SET".into(), name, s.to_string()]),
                    Value::List(items) => {
                        for item in items {
                            real.command(&["RPUSH".into(), name.clone(), item.to_string()]);
                        }
                    }
                    other => unreachable!("walks poke no {other:?}"),
                }
                ks.poke(key, value);
            }
            Step::Delete(key) => {
                real.command(&["DEL".into(), key.to_string()]);
                ks.del(key);
            }
            Step::Persist(key) => {
                real.command(&["PERSIST".into(), key.to_string()]);
                ks.persist(key);
            }
            Step::Call(call) => {
                let outcome = scripts::run(&mut ks, &call, env);
                let got = real.run(&call);
                let script = Script::of(&call);
                hit.insert((script, outcome.branch));
                if !compare::reply(&outcome.reply, &got) {
                    fail(
                        &trace,
                        format!(
                            "{}: model replied {:?} ({}), redis {got:?}",
                            script.file(),
                            outcome.reply,
                            outcome.branch
                        ),
                    );
                }
                let (keys, real_heard) = real.check(&ttls(&ks));
                if let Some(diff) = compare::keyspace(&compare::dump(&ks), &keys) {
                    fail(
                        &trace,
                        format!("{} ({}): {diff}", script.file(), outcome.branch),
                    );
                }
                let model_heard = compare::heard(&outcome.published);
                if model_heard != real_heard {
                    fail(
                        &trace,
                        format!(
                            "{}: model published {model_heard:?}, redis {real_heard:?}",
                            script.file()
                        ),
                    );
                }
            }
        }
    }
    STEPS
}

/// Every key of the model that has a TTL, with it: what the server's keys
/// are set to between steps, so that its clock drifts from the model's by
/// one step's time at most.
fn ttls(ks: &Keyspace) -> Vec<(String, i64)> {
    ks.keys
        .keys()
        .map(|k| (k.to_string(), ks.pttl(*k)))
        .filter(|(_, ttl)| *ttl > 0)
        .collect()
}
