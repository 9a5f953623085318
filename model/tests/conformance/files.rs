//! The text of every file in `lua/`, compiled in (a change to a file
//! rebuilds the test), and what the library puts before the scripts that
//! publish, read from `src/scripts.rs` itself.

use redhold_model::scripts::Script;

/// The file's text, as it is in `lua/`.
pub(crate) fn text(script: Script) -> &'static str {
    match script {
        Script::Acquire => include_str!("../../../lua/acquire.lua"),
        Script::FencedAcquire => include_str!("../../../lua/fenced_acquire.lua"),
        Script::Release => include_str!("../../../lua/release.lua"),
        Script::ForceRelease => include_str!("../../../lua/force_release.lua"),
        Script::Renew => include_str!("../../../lua/renew.lua"),
        Script::FairAcquire => include_str!("../../../lua/fair_acquire.lua"),
        Script::FairRelease => include_str!("../../../lua/fair_release.lua"),
        Script::FairGiveUp => include_str!("../../../lua/fair_give_up.lua"),
        Script::FairForceRelease => include_str!("../../../lua/fair_force_release.lua"),
        Script::ReadAcquire => include_str!("../../../lua/read_acquire.lua"),
        Script::ReadRelease => include_str!("../../../lua/read_release.lua"),
        Script::WriteAcquire => include_str!("../../../lua/write_acquire.lua"),
        Script::WriteRelease => include_str!("../../../lua/write_release.lua"),
        Script::RwForceRelease => include_str!("../../../lua/rw_force_release.lua"),
        Script::SemaphoreAcquire => include_str!("../../../lua/semaphore_acquire.lua"),
        Script::SemaphoreRelease => include_str!("../../../lua/semaphore_release.lua"),
        Script::SemaphoreSet => include_str!("../../../lua/semaphore_set.lua"),
        Script::SemaphoreGiveBack => include_str!("../../../lua/semaphore_give_back.lua"),
        Script::ExpirableAcquire => include_str!("../../../lua/expirable_acquire.lua"),
        Script::ExpirableRelease => include_str!("../../../lua/expirable_release.lua"),
        Script::ExpirableLease => include_str!("../../../lua/expirable_lease.lua"),
        Script::ExpirableGiveBack => include_str!("../../../lua/expirable_give_back.lua"),
        Script::LatchTrySet => include_str!("../../../lua/latch_try_set.lua"),
        Script::LatchCountDown => include_str!("../../../lua/latch_count_down.lua"),
        Script::LatchCountDownUndo => include_str!("../../../lua/latch_count_down_undo.lua"),
        Script::LatchDelete => include_str!("../../../lua/latch_delete.lua"),
        Script::Inspect => include_str!("../../../lua/inspect.lua"),
        Script::InspectCounter => include_str!("../../../lua/inspect_counter.lua"),
    }
}

/// The library's source that declares the prelude.
const SCRIPTS_RS: &str = include_str!("../../../src/scripts.rs");

/// `source` as the library runs it (`src/scripts.rs`, `as_run`): behind
/// the prelude when it publishes.
pub(crate) fn as_run(source: &str) -> String {
    let dynamic_call = rust_string_const("DYNAMIC_CALL");
    if source.contains(&dynamic_call) {
        format!("{}{source}", rust_string_const("PRELUDE"))
    } else {
        source.to_owned()
    }
}

/// The value of `const NAME: &str = "...";` in `src/scripts.rs`, with its
/// line continuations (a backslash, the newline and the next line's
/// indentation) taken out: the prelude has no other
/// escapes, which the assertion holds it to.
fn rust_string_const(name: &str) -> String {
    let start = format!("const {name}: &str = \"");
    let at = SCRIPTS_RS
        .find(&start)
        .unwrap_or_else(|| panic!("src/scripts.rs no longer declares {name}"))
        + start.len();
    let rest = &SCRIPTS_RS[at..];
    let end = rest.find("\";").expect("the constant ends");
    let mut out = String::new();
    let mut lines = rest[..end].split("\\\n");
    out.push_str(lines.next().unwrap_or(""));
    for line in lines {
        out.push_str(line.trim_start());
    }
    assert!(
        !out.contains('\\') && !out.contains('\n'),
        "{name} in src/scripts.rs has escapes this test does not read: {out}"
    );
    out
}
