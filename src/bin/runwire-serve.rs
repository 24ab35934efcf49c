//! `runwire-serve`: AG-UI over HTTP (`POST /agui` → Server-Sent Events).
//! The logic is `runwire::serve`.

use runwire::cli;
use runwire::serve::{self, Args};
use std::process::ExitCode;

fn main() -> ExitCode {
    match cli::parse_args::<Args>() {
        Ok(args) => serve::main(args),
        Err(code) => code,
    }
}
