//! `runwire-supervise --plan PLAN`: runs a plan's tasks through their
//! wrappers, wave by wave, with a control socket for kill, steer, pause and
//! resume. All logic is in `runwire::supervise`.

use clap::Parser;
use runwire::supervise::{self, Options, Outcome};
use runwire::util::cli::{self, Exit};
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

const BIN: &str = "runwire-supervise";

/// Run a plan (plan/v1) under supervision: journal, liveness, registry pointer and a control socket at $HARNESS_HOME/sock/RUNID.sock.
#[derive(Parser, Debug)]
#[command(name = BIN, version, after_help = "Exit status: 0 every task committed; 1 the plan finished with a task halted or failed, or the supervisor was stopped by a signal; 2 usage error (bad flag, bad plan, no wrapper, a slug another run owns in the runstate directory: nothing written); 3 input or output error (runstate, socket), or another supervisor of the run is live (nothing written).\nSee runwire-supervise(1) and spec/SUPERVISOR.md.")]
struct Args {
    /// The plan file (plan/v1); copied to RUNSTATE/SLUG.plan.json.
    #[arg(long, value_name = "PLAN")]
    plan: PathBuf,
    /// The runstate directory (journal, liveness, task logs).
    #[arg(long, value_name = "DIR", default_value = "./runstate")]
    runstate: PathBuf,
    /// At most N tasks in progress at once.
    #[arg(long, value_name = "N", default_value_t = 4, value_parser = clap::value_parser!(u16).range(1..))]
    max_parallel: u16,
    /// The run's slug (default: the plan file's name without .plan.json or .json).
    #[arg(long)]
    slug: Option<String>,
    /// Seconds from SIGTERM to SIGKILL when a task is killed (its wrapper gets half of it to stop its engine).
    #[arg(long, value_name = "SECONDS", default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=3600))]
    kill_grace: u64,
    /// Where the ADAPTER.sh wrappers are (default: $RUNWIRE_WRAPPER_DIR, else found as runwire-serve finds them).
    #[arg(long, value_name = "DIR")]
    wrapper_dir: Option<PathBuf>,
    /// Run task turns as interactive sessions (ADAPTER.sh --interactive: claude, codex app-server, cursor ACP): steer goes into the running session (cursor: cancel, then prompt again), stop interrupts the turn and keeps the session, answer answers the agent's requests.
    #[arg(long)]
    interactive: bool,
    /// The address people reach runwire-serve at, for approval links (with --link-secret-file): each tool or plan approval a task's agent raises is journaled with a link URL/a/TOKEN that answers it once (through a runwire-serve given the same two flags).
    #[arg(long, value_name = "URL", requires = "link_secret_file")]
    public_url: Option<String>,
    /// The file holding the link secret (at least 32 bytes), the same as runwire-serve's.
    #[arg(long, value_name = "FILE", requires = "public_url")]
    link_secret_file: Option<PathBuf>,
    /// The cluster node this supervisor runs beside (runwire-serve --node NAME on the same home): its links name it, so a hub forwards them to that node even when another node has a run of the same id. Default: the node this home is when a link is made (its runwire-cluster sidecar says so while it holds the name); another name than that is a usage error.
    #[arg(long, value_name = "NAME", requires = "public_url")]
    node: Option<String>,
}

fn main() -> ExitCode {
    let args = match cli::parse_args::<Args>() {
        Ok(a) => a,
        Err(code) => return code,
    };
    let workdir = match std::env::current_dir() {
        Ok(d) => d,
        Err(e) => {
            cli::report(BIN, format!("current directory: {e}"));
            return Exit::Io.into();
        }
    };
    if let Some(n) = args.node.as_deref().filter(|n| !runwire::runs::valid_node(n)) {
        return cli::usage(BIN, format!("--node: {n:?}: a node name is {}", runwire::runs::NODE_RULE)).into();
    }
    let home = runwire::runs::harness_home();
    // Another node than the one this home is now: its server would refuse every link.
    if let Some(n) = &args.node {
        if let Some(h) = runwire::runs::nodes::home_node(&home).filter(|h| h != n) {
            let why = format!(
                "this home is node {h} (its runwire-cluster sidecar holds the name), whose server takes no \
                 link naming another node"
            );
            return cli::usage(BIN, format!("--node {n}: {why}")).into();
        }
    }
    let links = match (&args.public_url, &args.link_secret_file) {
        (Some(u), Some(f)) => match runwire::control::links::Keys::read(u, f) {
            Ok(k) => Some(k.at_node(args.node)),
            Err(e) => return e.exit(BIN),
        },
        _ => None,
    };
    let opts = Options {
        links,
        slug: args.slug.unwrap_or_else(|| supervise::slug_of(&args.plan)),
        plan: args.plan,
        runstate: args.runstate,
        max_parallel: usize::from(args.max_parallel),
        kill_grace: Duration::from_secs(args.kill_grace),
        home,
        workdir,
        interactive: args.interactive,
        // A closed stdout (`| head -1`) loses the report, never the run.
        report: |line| {
            let _ = writeln!(std::io::stdout().lock(), "{line}");
        },
        wrapper_dir: args
            .wrapper_dir
            .or_else(|| std::env::var_os("RUNWIRE_WRAPPER_DIR").filter(|v| !v.is_empty()).map(PathBuf::from)),
    };
    match supervise::run(opts) {
        Ok(Outcome::AllCommitted) => Exit::Ok.into(),
        Ok(Outcome::SomeHalted | Outcome::Aborted) => Exit::Flagged.into(),
        Err(e) => e.exit(BIN),
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
