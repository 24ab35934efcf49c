//! `runwire-serve`: AG-UI over HTTP (`POST /agui` → Server-Sent Events).
//! The logic is `runwire::serve`.

use runwire::serve::{self, Args};
use runwire::util::cli;
use std::process::ExitCode;

fn main() -> ExitCode {
    // Started by `runwire-serve --demo` as its demo agent (never by a person).
    if runwire::tools::demo::is_agent() {
        let args: Vec<String> = std::env::args().skip(1).collect();
        return ExitCode::from(runwire::tools::demo::run(&args) as u8);
    }
    match cli::parse_args::<Args>() {
        Ok(args) => serve::main(args),
        Err(code) => code,
    }
}
