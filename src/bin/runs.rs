//! `runs list|show|task|register|reindex|reap|rm|prune|watch|notify`: the run views of
//! `runwire-serve`'s `GET /runs…` routes (a table on a terminal, else JSON
//! lines), the registry's write side, removal, and the change feed
//! (`GET /runs/events`). All logic is in `runwire::runs`; the feed's
//! webhooks (`runs notify`) in `runwire::tools::notify`. `runs doctor`:
//! whether the agent CLIs are ready (`runwire::tools::doctor`).

use clap::{Parser, Subcommand};
use runwire::runs::list::{self, Query};
use runwire::runs::nodes;
use runwire::runs::registry::{NewRun, Registry};
use runwire::runs::view::{self, ViewError};
use runwire::runs::{self, human, remove};
use runwire::util::cli::{self, Exit};
use std::io::{IsTerminal, Write};
use std::process::ExitCode;

const BIN: &str = "runs";

/// List, show, register, remove and reap runs ($HARNESS_HOME/runs, default ~/.harness/runs): a table on a terminal, JSON lines otherwise. `runs doctor`: are the agent CLIs ready?
#[derive(Parser, Debug)]
#[command(name = BIN, version, after_help = "Exit status: 0 success; 1 no such run or task, or a run not removed (live, or not found), or (doctor) an agent not ready; 2 usage error; 3 input or output error.\nSee runs(1) and spec/LAYOUT.md.")]
struct Args {
    /// Default: list.
    #[command(subcommand)]
    cmd: Option<Cmd>,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Every registered run, newest activity first: a table on a terminal; else JSON lines, runId, slug, repo, status, wave, counts, cost, tokens (as GET /runs). The default command.
    List {
        /// At most N runs (1 to 10000).
        #[arg(long, value_name = "N")]
        limit: Option<String>,
        /// Only runs after this cursor (from a --page answer's "next").
        #[arg(long)]
        cursor: Option<String>,
        /// Only runs with one of these statuses (comma-separated; see runs(1)).
        #[arg(long, value_name = "S[,S...]")]
        status: Option<String>,
        /// Only runs whose repo name or repo root is exactly R.
        #[arg(long, value_name = "R")]
        repo: Option<String>,
        /// Print one JSON object, as GET /runs answers: {"runs": [...], "total": N, "next": CURSOR|null}.
        #[arg(long)]
        page: bool,
        /// JSON lines (as GET /runs items), also on a terminal. They are the default when stdout is not a terminal, and list every run.
        #[arg(long, conflicts_with = "table")]
        json: bool,
        /// The table, also when stdout is not a terminal.
        #[arg(long, conflicts_with = "page")]
        table: bool,
        /// The table also shows chat runs (kind chat: what runwire-serve's POST /agui records, chat turns and the demo), with a KIND column.
        #[arg(long)]
        all: bool,
        /// Read every run's files, not the run index ($HARNESS_HOME/index/runs.jsonl), and leave the index as it is.
        #[arg(long)]
        from_files: bool,
        /// At a hub's home: only node NAME's runs (as GET /runs?node=NAME).
        #[arg(long, value_name = "NAME")]
        node: Option<String>,
    },
    /// Rebuild the run index ($HARNESS_HOME/index/runs.jsonl) from every registered run's files; prints {"runs": N, "index": PATH}.
    Reindex,
    /// Remove runs from the registry (pointer, journal link, and the run's files when they are runwire-serve's own under $HARNESS_HOME/serve); never a live run.
    Rm {
        /// Run ids, id prefixes or slugs.
        #[arg(required = true, value_name = "RUN")]
        runs: Vec<String>,
        /// Only print what would be removed.
        #[arg(long)]
        dry_run: bool,
    },
    /// Remove every run with no activity for DURATION (e.g. 30d, 12h, 90m); never a live run.
    Prune {
        /// How long a run has been idle: a number and s, m, h, d or w.
        #[arg(long, value_name = "DURATION")]
        older_than: String,
        /// Only chat runs (kind chat: runwire-serve's own).
        #[arg(long)]
        chat: bool,
        /// Only print what would be removed.
        #[arg(long)]
        dry_run: bool,
    },
    /// Remove registry pointers whose runstate directory is gone; prints each one removed.
    Reap {
        /// Only print what would be removed.
        #[arg(long)]
        dry_run: bool,
    },
    /// One run: meta, plan DAG, each task's last state (as GET /runs/RUNID). RUN: a run id, an id prefix or a slug.
    Show {
        #[arg(value_name = "RUN")]
        run_id: String,
    },
    /// One task: adapter, session id, pid, runtime, idle time, log path (as GET /runs/RUNID/tasks/TID). RUN as for show.
    Task {
        #[arg(value_name = "RUN")]
        run_id: String,
        task: String,
    },
    /// Follow the change feed: one JSON line per change of any run or task (created, task, run,
    /// needs_input, input_answered, ended, removed), as GET /runs/events; no server needed.
    Watch {
        /// Resume after this event id (the "id" of the last line you got); 0 replays the whole
        /// feed: every run has its "created" there (one registered before the feed began gets it,
        /// with its state then, when the feed begins; its earlier records are not replayed).
        /// Default: only what happens from now.
        #[arg(long, value_name = "ID")]
        since: Option<u64>,
        /// Only this run's events (repeatable, or comma-separated).
        #[arg(long = "run", value_name = "RUNID", value_delimiter = ',')]
        runs: Vec<String>,
        /// Only events after which the run has one of these statuses (see spec/LAYOUT.md).
        #[arg(long = "status", value_name = "STATUS", value_delimiter = ',')]
        statuses: Vec<String>,
        /// Only runs of this repository (its name or its root).
        #[arg(long = "repo", value_name = "REPO", value_delimiter = ',')]
        repos: Vec<String>,
        /// Only these event types: created, task, run, needs_input, input_answered, ended, removed, node (a hub's home: a node lost or up again).
        #[arg(long = "type", value_name = "TYPE", value_delimiter = ',')]
        types: Vec<String>,
        /// Print what the feed holds past --since, then exit instead of waiting for more.
        #[arg(long)]
        no_follow: bool,
    },
    /// POST each chosen change of the feed (default: needs_input and ended) to webhooks, signed
    /// per Standard Webhooks; follows the feed as watch does, until SIGINT or SIGTERM.
    #[command(
        after_help = "Exit status: 0 stopped by SIGINT or SIGTERM (requests in flight finished, --state written); 2 usage error (a bad URL, secret, filter, --since or state file); 3 the feed or the state file cannot be read or written.\nOnly http:// URLs: for https, a local TLS proxy. See runs(1), NOTIFY."
    )]
    Notify {
        /// Where to POST (repeatable): `http://HOST:PORT/PATH` (default port 80); https through a local TLS proxy.
        #[arg(long = "webhook", value_name = "URL", required = true)]
        webhooks: Vec<String>,
        /// The signing secret: whsec_BASE64 (the key is the decoded part), else the file's bytes as they are. Without it nothing is signed.
        #[arg(long, value_name = "FILE")]
        secret_file: Option<std::path::PathBuf>,
        /// Keep each webhook's position here (written as events are delivered): a restart resumes where it stopped. Without it, each start begins from now.
        #[arg(long, value_name = "FILE")]
        state: Option<std::path::PathBuf>,
        /// A webhook with no position in --state starts after this event id (0: the whole feed). Default: from now.
        #[arg(long, value_name = "ID")]
        since: Option<u64>,
        /// The body: json (Standard Webhooks' {"type","timestamp","data"}), ntfy, slack, apprise.
        #[arg(long, value_name = "FORMAT", default_value = "json")]
        format: String,
        /// Only this run's events (repeatable, or comma-separated).
        #[arg(long = "run", value_name = "RUNID", value_delimiter = ',')]
        runs: Vec<String>,
        /// Only events after which the run has one of these statuses (see spec/LAYOUT.md).
        #[arg(long = "status", value_name = "STATUS", value_delimiter = ',')]
        statuses: Vec<String>,
        /// Only runs of this repository (its name or its root).
        #[arg(long = "repo", value_name = "REPO", value_delimiter = ',')]
        repos: Vec<String>,
        /// Only these event types (default: needs_input,ended,node): created, task, run, needs_input, input_answered, ended, removed, node (a hub's home: a node lost or up again).
        #[arg(long = "type", value_name = "TYPE", value_delimiter = ',')]
        types: Vec<String>,
    },
    /// Whether each agent CLI is ready: found (`$RUNWIRE_<AGENT>_BIN`, else on PATH), its version the one the real-agent matrix tested (realagents/tested.json), the wrapper that will run it, its login (as far as can be told offline). A table on a terminal, else one JSON object. Exit 0 when ready, 1 when not.
    #[command(
        after_help = "Exit status: 0 every agent named is ready (none named: every installed one, and at least one is installed); 1 one is missing, its version untested or unknown, or its wrapper not found (cursor-agent is not in the matrix, so never ready); 2 usage error.\nLogin is never guessed: 'can't tell' does not make an agent not ready."
    )]
    Doctor {
        /// Only these agents: claude, codex, cursor, claude-agent-acp, codex-acp (default: all).
        #[arg(value_name = "AGENT")]
        agents: Vec<String>,
        /// The agent's program, a path or a name on PATH (as runwire-serve --agent-cmd); with one AGENT.
        #[arg(long, value_name = "PROGRAM")]
        agent_cmd: Option<String>,
        /// One JSON object, {"ready": BOOL, "agents": [...]}, also on a terminal (the default when stdout is not one).
        #[arg(long, conflicts_with = "table")]
        json: bool,
        /// The table, also when stdout is not a terminal.
        #[arg(long)]
        table: bool,
        /// Print the real-agent matrix's capability table (markdown, realagents/capabilities.json) instead.
        #[arg(long, conflicts_with_all = ["agents", "agent_cmd", "json", "table"])]
        capabilities: bool,
    },
    /// Write a registry pointer (what a runner does at start); prints it.
    Register {
        #[arg(long)]
        slug: String,
        #[arg(long, value_name = "DIR")]
        repo_root: String,
        #[arg(long, value_name = "DIR")]
        worktree: Option<String>,
        #[arg(long)]
        project: Option<String>,
        /// The repository's name (default: the repo root's last component).
        #[arg(long)]
        repo: Option<String>,
        #[arg(long)]
        branch: Option<String>,
        /// Where the journal, plan, logs and liveness live (default WORKTREE/runstate).
        #[arg(long, value_name = "DIR")]
        runstate_dir: Option<String>,
        /// The run's runstate directory moved: point a run id already registered with another
        /// journal at this one (refused without it; the old journal is left, no longer the run's).
        #[arg(long)]
        repoint: bool,
    },
}

fn line(o: &mut impl Write, v: &serde_json::Value) -> anyhow::Result<()> {
    let mut s = serde_json::to_vec(v)?;
    s.push(b'\n');
    o.write_all(&s)?;
    Ok(())
}

/// How long a `running` or `registered` run must have been idle before it
/// is taken for dead and may be removed (a chat turn has no liveness
/// sidecar; its files moving is what says it runs).
const RULE_IDLE_MS: i64 = 3_600_000;

fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
}

fn usage(m: String) -> anyhow::Result<Exit> {
    Ok(cli::usage(BIN, m))
}

/// The listing as a table, leaving out chat runs unless `all`.
fn write_table(o: &mut impl Write, p: &runwire::runs::list::Page, all: bool) -> anyhow::Result<()> {
    let items: Vec<serde_json::Value> = p.items.iter().filter_map(|s| serde_json::from_str(s).ok()).collect();
    let (shown, hidden): (Vec<_>, Vec<_>) = items.into_iter().partition(|it| all || human::kind(it) != "chat");
    if shown.is_empty() && hidden.is_empty() {
        writeln!(o, "no runs")?;
    } else {
        o.write_all(human::table(&shown, now_ms(), all).as_bytes())?;
    }
    if !hidden.is_empty() {
        let n = hidden.len();
        writeln!(o, "({n} chat run{} not shown: runs list --all)", if n == 1 { "" } else { "s" })?;
    }
    if let Some(c) = &p.next {
        writeln!(o, "(more: runs list --cursor {c})")?;
    }
    Ok(())
}

/// Removes each run unless it is live; one line per run removed (JSON:
/// runId, slug, status, removed, files, kept; a sentence on a terminal).
/// True when every run was.
fn remove_runs(
    reg: &Registry,
    o: &mut impl Write,
    ids: Vec<String>,
    idle_ms: i64,
    dry_run: bool,
    what: &str,
) -> anyhow::Result<bool> {
    let mut all = true;
    let now = now_ms();
    let open = if ids.is_empty() { Default::default() } else { remove::open_files() };
    for id in ids {
        let l = match reg.read(&id) {
            Ok(p) => view::load(p),
            Err(e) => {
                cli::report(BIN, format!("{what} {id}: not removed: pointer {e}"));
                all = false;
                continue;
            }
        };
        let status = l.status();
        if let Some(node) = remove::mirrored_from(reg.home(), &l.pointer.runstate_dir) {
            cli::report(
                BIN,
                format!(
                    "{what} {id}: not removed: it is node {node}'s run, mirrored by this hub: remove it at the node \
                     (runs rm there), and it leaves the cluster and every hub"
                ),
            );
            all = false;
            continue;
        }
        let owner = remove::owner(reg.home(), &id);
        let last = remove::last_activity_ms(reg, &l);
        if let Some(why) = remove::live(&l, status, last, now, idle_ms, &open, owner.as_ref()) {
            cli::report(BIN, format!("{what} {id}: not removed: {why}"));
            all = false;
            continue;
        }
        let summary = l.summary();
        let r = remove::remove_run(reg, &l, status, dry_run).map_err(|e| anyhow::anyhow!("{what} {id}: {e}"))?;
        for k in &r.kept {
            cli::report(BIN, format!("{what} {id}: left: {k}"));
        }
        if !dry_run {
            // The feed says so (best effort: the run is gone either way).
            if let Err(e) = remove::feed_removed(reg.home(), summary, &runwire::util::time::format_ms(now)) {
                cli::report(BIN, format!("{what} {id}: feed: {e}"));
            }
        }
        if std::io::stdout().is_terminal() {
            let verb = if dry_run { "would remove" } else { "removed" };
            let n = r.files.len() + 1;
            writeln!(o, "{verb} {id} ({}; {n} file{})", r.status, if n == 1 { "" } else { "s" })?;
        } else {
            let mut v = serde_json::to_value(&r)?;
            v["removed"] = (!dry_run).into();
            line(o, &v)?;
        }
    }
    o.flush()?;
    Ok(all)
}

/// `runs doctor`: each agent asked for, checked; the exit says whether all are ready.
fn doctor(
    o: &mut impl Write,
    agents: Vec<String>,
    agent_cmd: Option<String>,
    as_json: bool,
    capabilities: bool,
) -> anyhow::Result<Exit> {
    use runwire::tools::doctor;
    if capabilities {
        let t = doctor::capability_table().map_err(anyhow::Error::msg)?;
        o.write_all(t.as_bytes())?;
        o.flush()?;
        return Ok(Exit::Ok);
    }
    let mut specs = Vec::new();
    for a in &agents {
        match doctor::spec(a) {
            Some(s) => specs.push(s),
            None => return usage(format!("doctor: unknown agent {a:?} (known: {})", doctor::names())),
        }
    }
    if agent_cmd.is_some() && specs.len() != 1 {
        return usage("doctor: --agent-cmd needs exactly one AGENT".into());
    }
    let named = !specs.is_empty();
    if !named {
        specs = doctor::AGENTS.iter().collect();
    }
    let reports: Vec<doctor::Report> = specs.iter().map(|s| doctor::check(s, agent_cmd.as_deref())).collect();
    // Named: each must be ready. None named: what is installed must be, and something is.
    let ready = if named {
        reports.iter().all(|r| r.ready)
    } else {
        let installed: Vec<_> = reports.iter().filter(|r| r.program.is_some()).collect();
        !installed.is_empty() && installed.iter().all(|r| r.ready)
    };
    if as_json {
        line(o, &serde_json::json!({"ready": ready, "agents": reports}))?;
    } else {
        o.write_all(doctor::table(&reports).as_bytes())?;
        if !named && !ready && reports.iter().all(|r| r.program.is_none()) {
            writeln!(o, "no agent CLI is installed")?;
        }
    }
    o.flush()?;
    Ok(if ready { Exit::Ok } else { Exit::Flagged })
}

fn run(args: Args) -> anyhow::Result<Exit> {
    let cmd = match args.cmd {
        Some(Cmd::Doctor { agents, agent_cmd, json, table, capabilities }) => {
            let as_json = json || (!table && !std::io::stdout().is_terminal());
            return doctor(&mut cli::Stdout(std::io::stdout().lock()), agents, agent_cmd, as_json, capabilities);
        }
        cmd => cmd,
    };
    let home = runs::harness_home();
    // A home that is a file lists as if empty otherwise: said, as an I/O error.
    if home.exists() && !home.is_dir() {
        cli::report(BIN, format!("{}: not a directory ($HARNESS_HOME is the runs' home)", home.display()));
        return Ok(Exit::Io);
    }
    let reg = Registry::at(&home);
    let stdout = std::io::stdout();
    let mut o = std::io::BufWriter::new(cli::Stdout(stdout.lock()));
    let cmd = cmd.unwrap_or(Cmd::List {
        limit: None,
        cursor: None,
        status: None,
        repo: None,
        page: false,
        json: false,
        table: false,
        all: false,
        from_files: false,
        node: None,
    });
    let result = match cmd {
        Cmd::List { limit, cursor, status, repo, page, json, table, all, from_files, node } => {
            let as_table = table || (!json && !page && std::io::stdout().is_terminal());
            // At a hub's home, its runs carry their node's liveness, as its GET /runs gives them.
            let hub = nodes::is_hub_home(reg.home());
            let q =
                Query::parse(limit.as_deref(), cursor.as_deref(), status.as_deref(), repo.as_deref()).and_then(|q| {
                    match node {
                        Some(n) if hub => nodes::by_node(q, &n),
                        Some(_) => {
                            Err(format!("--node: {} is not a hub's home (no cluster/nodes/)", reg.home().display()))
                        }
                        None => Ok(q),
                    }
                });
            match q {
                Err(m) => Err(ViewError::Bad(m)),
                Ok(q) => {
                    // The same listing as GET /runs, through the same run index.
                    let o_ = if from_files {
                        list::Options { use_index: false, repair: false, ..Default::default() }
                    } else {
                        list::Options::default().with_env()
                    };
                    let mut p = list::page_with(&reg, &q, o_);
                    // As GET /runs: whether each run not ended still has its supervisor.
                    runwire::supervise::owned::add_to_page(reg.home(), &mut p);
                    if hub {
                        nodes::add_to_page(&mut p, nodes::read(reg.home()).as_ref());
                    }
                    let written = if page {
                        // In pieces: a whole listing is megabytes, not copied into one.
                        let mut tail = String::new();
                        p.pieces(&mut tail)
                            .iter()
                            .try_for_each(|s| o.write_all(s.as_bytes()))
                            .and_then(|_| o.write_all(b"\n"))
                            .map_err(Into::into)
                    } else if as_table {
                        write_table(&mut o, &p, all)
                    } else {
                        p.items.iter().try_for_each(|it| -> anyhow::Result<()> {
                            o.write_all(it.as_bytes())?;
                            o.write_all(b"\n")?;
                            Ok(())
                        })
                    };
                    Ok(written.and_then(|_| Ok(o.flush()?)))
                }
            }
        }
        Cmd::Reindex => {
            let home = reg.home().to_path_buf();
            let n = runs::index::reindex(&home)
                .map_err(|e| anyhow::anyhow!("{}: {e}", runs::index::path(&home).display()))?;
            Ok(line(&mut o, &serde_json::json!({"runs": n, "index": runs::index::path(&home)})))
        }
        Cmd::Reap { dry_run } => {
            let removed = reg.reap(dry_run).map_err(|e| anyhow::anyhow!("{}: {e}", reg.dir.display()))?;
            Ok(removed.iter().try_for_each(|r| {
                if let Some(why) = &r.kept {
                    cli::report(BIN, format!("reap {}: journal link left: {why}", r.run_id));
                }
                line(
                    &mut o,
                    &serde_json::json!({"runId": r.run_id, "runstateDir": r.runstate_dir, "removed": !dry_run}),
                )
            }))
        }
        Cmd::Rm { runs, dry_run } => {
            let mut ids = Vec::new();
            let mut missed = false;
            for q in &runs {
                match human::resolve(&reg, q) {
                    Ok(id) => ids.push(id),
                    Err(ViewError::Bad(m)) => return usage(m),
                    Err(ViewError::NotFound(m) | ViewError::Unreadable(m)) => {
                        cli::report(BIN, format!("rm: {m}"));
                        missed = true;
                    }
                }
            }
            // A run not named by its id is removed only after a live check, as any.
            let r = remove_runs(&reg, &mut o, ids, RULE_IDLE_MS, dry_run, "rm");
            return r.map(|all| if all && !missed { Exit::Ok } else { Exit::Flagged });
        }
        Cmd::Prune { older_than, chat, dry_run } => {
            let age = match human::parse_duration(&older_than) {
                Ok(a) => a,
                Err(m) => return usage(format!("--older-than: {m}")),
            };
            let now = now_ms();
            // A hub's mirrors of its nodes' runs are the cluster's to keep
            // (`runwire-cluster setup`'s limits, `runs rm` at a node): left
            // out, said once, so a hub's cron prune neither fails nor repeats.
            let mut mirrored = 0;
            let ids: Vec<String> = reg
                .ids()
                .into_iter()
                .filter(|id| {
                    let Ok(p) = reg.read(id) else { return false };
                    let mirror = remove::mirrored_from(reg.home(), &p.runstate_dir).is_some();
                    let l = view::load(p);
                    let old = (!chat || human::kind(&l.summary()) == "chat")
                        && now - remove::last_activity_ms(&reg, &l) >= age;
                    mirrored += usize::from(old && mirror);
                    old && !mirror
                })
                .collect();
            if mirrored > 0 {
                cli::report(
                    BIN,
                    format!(
                        "prune: {mirrored} run(s) are nodes' runs mirrored by this hub: not pruned here (the \
                         cluster's retention, runwire-cluster setup --max-age-days, or runs rm at the node removes \
                         them)"
                    ),
                );
            }
            // A run still `running` is taken for dead only when idle for the age asked, and an hour at least.
            let r = remove_runs(&reg, &mut o, ids, age.max(RULE_IDLE_MS), dry_run, "prune");
            return r.map(|all| if all { Exit::Ok } else { Exit::Flagged });
        }
        Cmd::Watch { since, runs, statuses, repos, types, no_follow } => {
            let filter = runs::feed::Filter { runs, statuses, repos, types };
            if !no_follow {
                cli::exit_when_stdout_closes();
            }
            // Each line is flushed as it comes: a script waits on it.
            let r = runs::feed::follow(&runs::harness_home(), since, &filter, !no_follow, |line| {
                o.write_all(line)?;
                o.write_all(b"\n")?;
                o.flush()
            });
            match r {
                Ok(()) => Ok(Ok(())),
                Err(runs::feed::FollowError::Usage(m)) => Err(ViewError::Bad(m)),
                Err(runs::feed::FollowError::Io(e)) => Ok(Err(anyhow::Error::from(e).context("feed"))),
            }
        }
        Cmd::Notify { webhooks, secret_file, state, since, format, runs, statuses, repos, types } => {
            let filter = runs::feed::Filter { runs, statuses, repos, types };
            let home = runs::harness_home();
            let o_ = runwire::tools::notify::Options { home, webhooks, secret_file, state, since, format, filter };
            // Runs until a signal (its own thread exits the process) or an error.
            match runwire::tools::notify::run(o_) {
                Ok(()) => Ok(Ok(())),
                Err(runwire::tools::notify::NotifyError::Usage(m)) => Err(ViewError::Bad(format!("notify: {m}"))),
                Err(runwire::tools::notify::NotifyError::Io(m)) => Err(ViewError::Unreadable(format!("notify: {m}"))),
            }
        }
        Cmd::Show { run_id } => {
            human::resolve(&reg, &run_id).and_then(|id| view::find(&reg, &id).map(|l| (id, l.show()))).map(
                |(id, mut v)| {
                    runwire::supervise::owned::add_to_view(reg.home(), &mut v);
                    if nodes::is_hub_home(reg.home()) {
                        nodes::add_to_view(&mut v, &id, nodes::read(reg.home()).as_ref());
                    }
                    if std::io::stdout().is_terminal() {
                        // Indented for a person; one line for a pipe, as before.
                        serde_json::to_string_pretty(&v).map_err(Into::into).and_then(|t| Ok(writeln!(o, "{t}")?))
                    } else {
                        line(&mut o, &v)
                    }
                },
            )
        }
        Cmd::Task { run_id, task } => human::resolve(&reg, &run_id)
            .and_then(|id| view::find(&reg, &id))
            .and_then(|l| l.task(&task))
            .map(|v| line(&mut o, &v)),
        // Answered above, before the registry.
        Cmd::Doctor { .. } => Ok(Ok(())),
        Cmd::Register { slug, repo_root, worktree, project, repo, branch, runstate_dir, repoint } => {
            // Absolute, as readers require (a relative runstateDir would be read against each reader's cwd).
            let abs = |p: String| match std::path::absolute(&p) {
                Ok(a) if !p.is_empty() => a.display().to_string(),
                _ => p,
            };
            let (repo_root, worktree, runstate_dir) = (abs(repo_root), worktree.map(abs), runstate_dir.map(abs));
            let new = NewRun { slug, repo_root, worktree, project, repo, branch, runstate_dir };
            let created = runwire::util::time::format_ms(
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map(|d| d.as_millis() as i64)
                    .unwrap_or(0),
            );
            match new.pointer(created) {
                Err(e) => Err(ViewError::Bad(e)),
                Ok(p) => match if repoint { reg.repoint(&p) } else { reg.register(&p) } {
                    // Refused before anything was written (a slug another run
                    // owns, a run id registered with another journal): usage.
                    Err(e)
                        if matches!(e.kind(), std::io::ErrorKind::AlreadyExists | std::io::ErrorKind::InvalidInput) =>
                    {
                        Err(ViewError::Bad(format!("register: {e}")))
                    }
                    Err(e) => Err(anyhow::anyhow!("{}: {e}", reg.path(&p.run_id).display()))?,
                    Ok(()) => Ok(line(&mut o, &serde_json::to_value(&p)?)),
                },
            }
        }
    };
    match result {
        Ok(r) => {
            r?;
            o.flush()?;
            Ok(Exit::Ok)
        }
        Err(ViewError::Bad(m)) => Ok(cli::usage(BIN, m)),
        Err(ViewError::NotFound(m)) => {
            cli::report(BIN, m);
            Ok(Exit::Flagged)
        }
        Err(ViewError::Unreadable(m)) => {
            cli::report(BIN, m);
            Ok(Exit::Io)
        }
    }
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
