//! `redhold`: list, show, watch and force-unlock the distributed locks that
//! redhold and Redisson clients keep in Redis.
//!
//! This binary only reads arguments and prints; what it shows comes from
//! the library's [`redhold::inspect`] module.

// No silent `as` narrowing (the library denies it too).
#![deny(clippy::cast_possible_truncation)]

mod args;
mod commands;
mod counters;
mod credentials;
mod escape;
mod failure;
mod json;
mod text;

use std::process::ExitCode;

use clap::Parser;

use args::Cli;

fn main() -> ExitCode {
    let cli = Cli::parse();
    match commands::run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) => {
            eprintln!("{failure}");
            ExitCode::from(failure.code)
        }
    }
}
