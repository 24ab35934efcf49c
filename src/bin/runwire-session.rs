//! `runwire-session claude [-- CMD…]`: runs an agent interactively, its
//! session input on stdin (or a FIFO), its output (the task log) on stdout.
//! All logic is in `runwire::session`.

use clap::Parser;
use runwire::session::driver::{self, JournalTo};
use runwire::session::launch::{launch, on_path, AgentKind, LaunchOptions};
use runwire::session::proc::{Spec, SUPERVISED_ENV};
use runwire::session::{self, Agent, Session};
use runwire::util::cli::{self, Exit};
use std::io::{self, BufWriter};
use std::path::PathBuf;
use std::process::ExitCode;

const BIN: &str = "runwire-session";

#[derive(clap::ValueEnum, Clone, Copy, Debug)]
enum AgentName {
    /// Claude Code (stream-json in and out, the SDK control protocol)
    Claude,
    /// Codex CLI as `codex app-server` (JSON-RPC 2.0)
    Codex,
    /// cursor-agent as `cursor-agent acp` (the Agent Client Protocol)
    Cursor,
    /// Any agent speaking the Agent Client Protocol: give its command line after `--`
    Acp,
}

/// Run a coding agent interactively: answer its approvals and questions, steer it mid-turn, interrupt a turn, end the session. The session input (spec/SESSION-INPUT.md) is read from stdin or --input; stdout is the agent's raw output with the session's runwire.request / runwire.answer lines (and a runwire.idle line, with the input lines applied, whenever it becomes idle), so `| normalize-events claude | agui-translate | sse-encode` works on it.
#[derive(Parser, Debug)]
#[command(name = BIN, version, after_help = "Exit status: 0 the agent exited 0 (or, ended, was stopped for not exiting); 1 the agent failed (non-zero exit, killed) or refused what the session needs (a thread, a session: its reason on stderr); 2 usage error; 3 input or output error (the agent or the input could not be opened); 128+N ended by signal N (SIGTERM: 143).\nSee runwire-session(1) and spec/SESSION-INPUT.md.")]
struct Args {
    /// The agent whose protocol to speak.
    #[arg(value_enum)]
    agent: AgentName,
    /// The agent command and its arguments (default: $RUNWIRE_CLAUDE_BIN, else `claude`); the protocol flags are appended.
    #[arg(last = true, value_name = "CMD")]
    cmd: Vec<String>,
    /// The first message, written as the session opens.
    #[arg(long, value_name = "TEXT")]
    prompt: Option<String>,
    /// Read the session input from PATH instead of stdin; a FIFO is reopened whenever its writer closes it (only an end line ends the session then).
    #[arg(long, value_name = "PATH")]
    input: Option<PathBuf>,
    /// How long a request waits for an answer before it is denied (fail closed): 90, 90s, 5m, 1h.
    #[arg(long, value_name = "DUR", default_value = "300s", value_parser = parse_duration)]
    answer_timeout: u64,
    /// The agent's permission mode: default (or manual), acceptEdits, plan, dontAsk, auto (bypassPermissions needs --grant-all).
    #[arg(long, value_name = "MODE", default_value = "default")]
    permission_mode: String,
    /// The permission mode an approved plan is carried out in (an answer may name another).
    #[arg(long, value_name = "MODE", default_value = "default")]
    plan_exit_mode: String,
    /// Allow granting every tool call (permission mode bypassPermissions); without it that mode is
    /// refused, and claude's suggested grants reaching outside the working directory once resolved
    /// (a symlink, `..`, `~/`, `//`) are dropped.
    #[arg(long)]
    grant_all: bool,
    /// codex: the sandbox (read-only, workspace-write; danger-full-access needs --grant-all).
    #[arg(long, value_name = "MODE", default_value = "workspace-write")]
    sandbox: String,
    /// codex: when codex asks before running a command (untrusted, on-request, never).
    #[arg(long, value_name = "POLICY", default_value = "on-request")]
    approval_policy: String,
    /// codex: the model.
    #[arg(long, value_name = "MODEL")]
    model: Option<String>,
    /// codex and ACP agents: the session's working directory (default: the current one).
    #[arg(long, value_name = "DIR")]
    cwd: Option<PathBuf>,
    /// ACP agents: switch the new session to this mode of the agent's (cursor: agent, plan, ask).
    #[arg(long, value_name = "ID")]
    mode: Option<String>,
    /// Resume this agent session (claude --resume, codex thread/resume, ACP session/load).
    #[arg(long, value_name = "SESSION")]
    resume: Option<String>,
    /// Journal each request and answer as input records to this runstate journal (needs --task).
    #[arg(long, value_name = "FILE", requires = "task")]
    journal: Option<PathBuf>,
    /// The task the journal's input records name.
    #[arg(long, value_name = "T", requires = "journal")]
    task: Option<String>,
    /// The journal's actor.
    #[arg(long, value_name = "A", default_value = "runwire-session")]
    actor: String,
    /// The agent process's number among its runner's (a supervisor's task runs one per turn): the
    /// `generation` of each open request on the runwire.session_status lines.
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..))]
    generation: u64,
    /// A SIGTERM, SIGINT or SIGHUP means the runner that started the session died or stops it
    /// (runwire-supervise sets RUNWIRE_SUPERVISED=1, which says the same): the session is killed by
    /// it, answering nothing; its runner closes the open requests. Without it (an operator's
    /// signal) the session ends as an end line does, its open requests cancelled, and exits 128+N.
    #[arg(long)]
    supervised: bool,
}

/// `--supervised`, or `RUNWIRE_SUPERVISED=1` in the environment (what
/// runwire-supervise gives a task's turn: it reaches a session a wrapper
/// runs, and no further: the agent does not inherit it).
fn supervised(args: &Args) -> bool {
    args.supervised || std::env::var_os(SUPERVISED_ENV).is_some_and(|v| v == "1")
}

/// Milliseconds from `90`, `90s`, `1500ms`, `5m`, `1h` (at least 1 ms).
fn parse_duration(s: &str) -> Result<u64, String> {
    let (num, mult) = match s {
        _ if s.ends_with("ms") => (&s[..s.len() - 2], 1),
        _ if s.ends_with('s') => (&s[..s.len() - 1], 1000),
        _ if s.ends_with('m') => (&s[..s.len() - 1], 60_000),
        _ if s.ends_with('h') => (&s[..s.len() - 1], 3_600_000),
        _ => (s, 1000),
    };
    let n: u64 = num.parse().map_err(|_| format!("not a duration: {s:?} (like 90, 90s, 1500ms, 5m, 1h)"))?;
    n.checked_mul(mult)
        .filter(|ms| (1..=7 * 24 * 3_600_000).contains(ms))
        .ok_or_else(|| format!("{s:?} is out of range"))
}

fn main() -> ExitCode {
    let args = match cli::parse_args::<Args>() {
        Ok(a) => a,
        Err(code) => return code,
    };
    // What the session will send or journal, checked before anything starts.
    if let Some(p) = &args.prompt {
        if let Err(e) = runwire::control::check_text(p, runwire::control::MAX_MESSAGE) {
            return usage(format!("--prompt: {e}"));
        }
    }
    if let Some(t) = &args.task {
        if let Err(e) = runwire::runs::check_id("--task", t) {
            return usage(e);
        }
    }
    if args.actor.trim().is_empty() || args.actor.len() > 128 || args.actor.chars().any(char::is_control) {
        return usage(format!("--actor {:?}: 1 to 128 characters, none of them control characters", args.actor));
    }
    if let Some(j) = &args.journal {
        // Every record would be lost otherwise (said once a record, exit 0).
        let opened = std::fs::OpenOptions::new().create(true).append(true).open(j).and_then(|f| {
            if f.metadata()?.is_file() {
                Ok(())
            } else {
                Err(io::Error::other("not a regular file"))
            }
        });
        if let Err(e) = opened {
            cli::report(BIN, format!("--journal {}: {e}", j.display()));
            return Exit::Io.into();
        }
    }
    let cwd = match &args.cwd {
        Some(d) => match std::fs::canonicalize(d).map(|p| p.into_os_string().into_string()) {
            Ok(Ok(p)) => Some(p),
            Ok(Err(_)) => return usage(format!("--cwd {}: not UTF-8", d.display())),
            Err(e) => return usage(format!("--cwd {}: {e}", d.display())),
        },
        None => None,
    };
    let kind = match args.agent {
        AgentName::Claude => AgentKind::Claude,
        AgentName::Codex => AgentKind::Codex,
        AgentName::Cursor => AgentKind::Cursor,
        AgentName::Acp => AgentKind::Acp,
    };
    let o = LaunchOptions {
        cmd: args.cmd.clone(),
        resume: args.resume.clone(),
        grant_all: args.grant_all,
        permission_mode: args.permission_mode.clone(),
        plan_exit_mode: args.plan_exit_mode.clone(),
        sandbox: args.sandbox.clone(),
        approval_policy: args.approval_policy.clone(),
        model: args.model.clone(),
        cwd,
        mode: args.mode.clone(),
    };
    match launch(kind, &o) {
        Ok(l) => run(&args, l.argv, l.agent),
        Err(e) => usage(e),
    }
}

fn usage(e: String) -> ExitCode {
    cli::usage(BIN, e).into()
}

fn run<A: Agent>(args: &Args, argv: Vec<String>, agent: A) -> ExitCode {
    let mut spec = Spec::new(on_path(std::ffi::OsStr::new(&argv[0])));
    for a in &argv[1..] {
        spec.arg(a);
    }
    // This session's runner's flag: a session the agent (or a tool of its)
    // starts is nobody's supervised session.
    spec.env_remove(SUPERVISED_ENV);

    let (tx, rx) = std::sync::mpsc::channel();
    // First: no thread may start before the signals are blocked.
    let signalled = if supervised(args) {
        None
    } else {
        match driver::end_on_signals(tx.clone()) {
            Ok(s) => Some(s),
            Err(e) => {
                cli::report(BIN, format!("signals: {e}"));
                return Exit::Io.into();
            }
        }
    };
    let signal = || signalled.as_ref().map_or(0, |s| s.load(std::sync::atomic::Ordering::SeqCst));
    let started = match &args.input {
        Some(p) if p.as_os_str() != "-" => {
            use std::os::unix::fs::FileTypeExt;
            match std::fs::metadata(p) {
                Ok(m) if m.file_type().is_fifo() => driver::read_fifo(p, tx.clone()),
                // Opens, then fails every read: refused here, as a file that cannot be opened.
                Ok(m) if m.is_dir() => Err(io::Error::other("a directory, not a file of input lines")),
                Ok(_) => std::fs::File::open(p).and_then(|f| driver::read_input(f, tx.clone())),
                Err(e) => Err(e),
            }
            .map_err(|e| format!("{}: {e}", p.display()))
        }
        _ => driver::read_input(io::stdin(), tx.clone()).map_err(|e| format!("stdin: {e}")),
    };
    if let Err(e) = started {
        cli::report(BIN, e);
        return Exit::Io.into();
    }
    let s = Session::new(
        agent,
        session::Options { answer_timeout_ms: args.answer_timeout as i64, actor: args.actor.clone() },
    );
    let opts = driver::Options {
        first: args.prompt.clone(),
        journal: args.journal.clone().map(|path| JournalTo {
            // A registered run's journal: its mark is held while writing.
            run: {
                let home = runwire::runs::harness_home();
                let reg = runwire::runs::registry::Registry::at(&home);
                reg.run_of_journal(&path).map(|id| runwire::runs::marks::Run::new(&home, &id))
            },
            path,
            task: args.task.clone().unwrap_or_default(),
            actor: args.actor.clone(),
            links: None,
        }),
        status_lines: true,
        generation: args.generation,
    };
    let out = BufWriter::new(cli::Stdout(io::stdout()));
    let report = Box::new(|m: String| cli::report(BIN, m));
    match driver::run(s, &spec, tx, rx, out, &opts, report) {
        // The session's record is short: said, and a failed write, whatever
        // the agent did (a script reads 0 as "every request and answer is
        // in the journal").
        Ok(o) if o.journal_lost.is_some() => {
            let (first, n) = o.journal_lost.unwrap_or_default();
            let j = args.journal.as_deref().unwrap_or(std::path::Path::new("")).display().to_string();
            cli::report(BIN, format!("--journal {j}: {n} input record(s) could not be written ({first})"));
            Exit::Io.into()
        }
        // Ended by an operator's signal (its requests closed, the agent
        // ended): 128 + its number, as a process it killed would say.
        Ok(_) if signal() != 0 => ExitCode::from((128 + signal()) as u8),
        // The agent refused what the session needs (a thread, a session):
        // its reason, and a failure whatever the agent's exit.
        Ok(o) if o.failure.is_some() => {
            cli::report(BIN, format!("{}: {}", argv[0], o.failure.unwrap_or_default()));
            Exit::Flagged.into()
        }
        // Refused input lines were reported one by one; they do not make the
        // session fail (a wrapper judges the turn by its exit).
        Ok(o) if o.rc == 0 => Exit::Ok.into(),
        Ok(o) => {
            cli::report(BIN, format!("{}: the agent exited {}", argv[0], o.rc));
            Exit::Flagged.into()
        }
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        // The agent's CLI is not there: what to do about it (the error
        // names the program already).
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            cli::report(
                BIN,
                format!("{e}: is the agent's CLI installed? Put it on PATH or give its command after -- (runs doctor says which agents are ready)"),
            );
            Exit::Io.into()
        }
        // The session's output (stdout) failed: said as where it failed.
        Err(e) if cli::OnStdout::is(&e) => {
            cli::report(BIN, e);
            Exit::Io.into()
        }
        Err(e) => {
            cli::report(BIN, format!("{}: {e}", argv[0]));
            Exit::Io.into()
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn cli_definition_is_consistent() {
        use clap::CommandFactory;
        super::Args::command().debug_assert();
    }

    #[test]
    fn durations_read_as_people_write_them() {
        use super::parse_duration as p;
        assert_eq!(p("90"), Ok(90_000));
        assert_eq!((p("90s"), p("1500ms"), p("5m"), p("1h")), (Ok(90_000), Ok(1500), Ok(300_000), Ok(3_600_000)));
        assert!(p("0").is_err() && p("x").is_err() && p("-1s").is_err() && p("9999h").is_err());
    }
}
