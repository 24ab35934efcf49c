//! `runwire-reaper [--grace-ms MS] [--parent PID] -- PROGRAM [ARGS...]`: the
//! per-run reaper the server and the supervisor put between themselves and
//! an agent wrapper. All logic is in `runwire::session::reaper`.

use clap::Parser;
use runwire::session::reaper::{reaper_main, ReaperOpts};
use runwire::util::cli;
use std::ffi::OsString;
use std::process::ExitCode;
use std::time::Duration;

/// Run PROGRAM so that none of its descendants outlives it, its caller or a stop request.
#[derive(Parser, Debug)]
#[command(
    name = "runwire-reaper",
    version,
    after_help = "Exit status: PROGRAM's exit code; 128+N when PROGRAM was killed by signal N; 126 PROGRAM is not executable; 127 PROGRAM was not found; 2 usage error; 3 the reaper could not be set up.\nSee runwire-reaper(1)."
)]
struct Args {
    /// Milliseconds from SIGTERM to SIGKILL when the run is stopped.
    #[arg(long, value_name = "MS", default_value_t = 2000)]
    grace_ms: u64,
    /// The caller's pid: if the reaper's parent is already another process, the caller died and nothing is started.
    #[arg(long, value_name = "PID")]
    parent: Option<i32>,
    /// The program to run, then its arguments, after `--` (so a mistyped
    /// flag is a usage error, never taken for the program).
    #[arg(required = true, last = true, value_name = "PROGRAM")]
    command: Vec<OsString>,
}

fn main() -> ExitCode {
    let args = match cli::parse_args::<Args>() {
        Ok(a) => a,
        Err(code) => return code,
    };
    let mut command = args.command.into_iter();
    let program = command.next().unwrap_or_default();
    let rc = reaper_main(ReaperOpts {
        grace: Duration::from_millis(args.grace_ms),
        parent: args.parent,
        program,
        args: command.collect(),
    });
    ExitCode::from(u8::try_from(rc).unwrap_or(255))
}

#[cfg(test)]
mod tests {
    #[test]
    fn cli_definition_is_consistent() {
        use clap::CommandFactory;
        super::Args::command().debug_assert();
    }
}
