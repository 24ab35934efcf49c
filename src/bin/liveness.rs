//! `liveness set|get|reap`: the `liveness/v1` sidecar of a run, for runners,
//! scripts and cron. All logic is in `runwire::runs::liveness`.

use clap::{Parser, Subcommand};
use runwire::runs::{self, liveness, RunFiles};
use runwire::util::cli::{self, Exit};
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

const BIN: &str = "liveness";

/// Read and update a run's liveness sidecar (RUNSTATE/SLUG.live.json): which process runs which task.
#[derive(Parser, Debug)]
#[command(name = BIN, version, after_help = "Exit status: 0 success; 1 no such task (get); 2 usage error (bad slug, task or JSON); 3 input or output error (the runstate directory is missing, a file cannot be read or written).\nSee liveness(1) and spec/liveness.schema.json.")]
struct Args {
    /// The runstate directory holding the run's files.
    #[arg(long, value_name = "DIR", default_value = "./runstate", global = true)]
    runstate: PathBuf,
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Merge JSON keys (pid, pgid, session_id, logfile, state, started_ts) into TASK's entry; TASK `-` sets run-level keys (sock). Prints the entry.
    Set { slug: String, task: String, json: String },
    /// Print the whole sidecar, or one task's entry.
    Get { slug: String, task: Option<String> },
    /// Drop entries whose pid is gone (signal 0); print one JSON line per dropped entry with the journal's last state.
    Reap { slug: String },
}

fn out(v: &impl serde::Serialize) -> anyhow::Result<()> {
    let mut s = serde_json::to_vec(v)?;
    s.push(b'\n');
    let mut o = runwire::util::cli::Stdout(std::io::stdout().lock());
    o.write_all(&s)?;
    o.flush()?;
    Ok(())
}

fn run(args: Args) -> anyhow::Result<Exit> {
    let slug = match &args.cmd {
        Cmd::Set { slug, .. } | Cmd::Get { slug, .. } | Cmd::Reap { slug } => slug,
    };
    if let Err(e) = runs::check_id("slug", slug) {
        return Ok(cli::usage(BIN, e));
    }
    let files = RunFiles::new(&args.runstate, slug);
    let dir = args.runstate.display().to_string();
    match &args.cmd {
        Cmd::Set { task, json, .. } => {
            let patch = match liveness::parse_patch(task, json) {
                Ok(p) => p,
                Err(e) => return Ok(cli::usage(BIN, format!("set {task}: {e}"))),
            };
            if !args.runstate.is_dir() {
                anyhow::bail!("{dir}: not a directory");
            }
            let l = liveness::set(&files, patch).map_err(|e| anyhow::anyhow!("{}: {e}", files.live().display()))?;
            match l.tasks.get(task.as_str()) {
                Some(e) => out(e)?,
                None => out(&serde_json::json!({"sock": l.sock}))?,
            }
        }
        Cmd::Get { task, .. } => {
            // A missing directory is not an empty sidecar: a wrong --runstate must show.
            if !args.runstate.is_dir() {
                anyhow::bail!("{dir}: not a directory");
            }
            let l = liveness::get(&files);
            match task {
                None => out(&l)?,
                Some(t) => match l.tasks.get(t.as_str()) {
                    Some(e) => out(e)?,
                    None => {
                        cli::report(BIN, format!("{}: no task {t:?}", files.live().display()));
                        return Ok(Exit::Flagged);
                    }
                },
            }
        }
        Cmd::Reap { .. } => {
            if !args.runstate.is_dir() {
                anyhow::bail!("{dir}: not a directory");
            }
            for r in liveness::reap(&files).map_err(|e| anyhow::anyhow!("{}: {e}", files.live().display()))? {
                out(&r)?;
            }
        }
    }
    Ok(Exit::Ok)
}

fn main() -> ExitCode {
    match cli::parse_args::<Args>() {
        Ok(args) => cli::finish(BIN, run(args)),
        Err(code) => code,
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn cli_definition_is_consistent() {
        use clap::CommandFactory;
        super::Args::command().debug_assert();
    }
}
