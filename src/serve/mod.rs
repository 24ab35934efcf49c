//! `runwire-serve`: a small local HTTP server that answers AG-UI's
//! `POST /agui` with a live `text/event-stream`.
//!
//! Composition only: every run drives the same [`Normalizer`] →
//! [`Translator`] → [`Encoder`] objects as the pipeline
//! `normalize-events | agui-translate | sse-encode`, so the server's body is
//! byte for byte what those binaries print for the same input (a test holds
//! the two together).
//!
//! Layout: this file starts the server and points down only; [`args`] reads
//! the command line, [`options`] is what it means ([`Config`], fixed at
//! startup) and [`state`] what every connection shares ([`Shared`]): the
//! handlers import those, never this file. [`router`] is the route table and the browser boundary (Host,
//! Origin, token, media type, size), pointing down to the handlers; [`http`]
//! holds the HTTP/1.1 helpers they all use (requests read with hard bounds,
//! responses, closing); [`run`] starts and stops
//! the line source of a run (an agent wrapper in its own process group, or a
//! recorded log replayed at a steady pace); [`agui`] is the route itself
//! (its entry and the book of threads and finished runs, then the batch and
//! the interactive mode, which do not import each other). The HTTP layer is our own, on
//! `std::net`: tiny_http 0.12 has no bound on header size or count and no
//! read timeout, which the boundary needs; the response is streamed the way
//! the style guide's idiom 8 describes (head written by hand, one chunk per
//! frame, written as soon as it exists).
//!
//! [`Normalizer`]: crate::pipeline::normalize::Normalizer
//! [`Translator`]: crate::pipeline::translate::Translator
//! [`Encoder`]: crate::pipeline::encode::Encoder

pub mod agui;
pub mod args;
pub mod cluster;
pub mod evidence;
pub mod feed;
pub mod feed_hub;
pub mod http;
pub mod idempotency;
pub mod interrupts;
pub mod link_keys;
pub mod links;
pub mod listen;
pub mod options;

pub mod router;
pub mod run;
pub mod runs;
pub mod state;
pub mod stream;
pub mod studio;
pub mod supervisor;
pub mod tokens;

pub use crate::util::origin::parse_origin;
pub use args::{configure, mode_of, read_token, AgentArg, Args, StartError};
pub use options::{
    Config, Mode, BIN, DEFAULT_ANSWER_TIMEOUT_S, DEFAULT_KEEPALIVE_MS, DEFAULT_REPLAY_DELAY_MS, DEFAULT_STREAM_BUFFER,
    DEMO_LOG, MAX_CONNECTIONS,
};
pub use run::Source;
pub use state::Shared;

use crate::session::launch::AgentKind;
use crate::util::cli::{self, Exit};
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use std::io::{self, Write};
use std::net::TcpStream;
use std::os::fd::AsFd;
use std::process::ExitCode;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Why the agent a run would start cannot be found, if so: its program
/// (`--agent-cmd` with `--interactive`, else `$RUNWIRE_<AGENT>_BIN`, else its
/// usual name, as the wrappers and `runwire-session` look for it) is not an
/// executable file nor on `$PATH`. Only a warning: it may be installed later.
fn agent_missing(args: &Args, cfg: &Config) -> Option<String> {
    if args.demo || args.replay.is_some() || args.agent.is_none() {
        return None;
    }
    // In batch mode --agent-cmd replaces the wrapper, which finds its own agent.
    if args.agent_cmd.is_some() && !cfg.interactive {
        return None;
    }
    let engine = if cfg.kind == AgentKind::Acp { cfg.engine.clone() } else { args.agent_cmd.clone() };
    let interactive = Config { interactive: true, engine, ..cfg.clone() };
    let program = agui::interactive::agent_program(&interactive)?;
    if executable(&program) {
        return None;
    }
    let agent = cfg.adapter.name();
    let var = format!("RUNWIRE_{}_BIN", agent.to_uppercase());
    let from = if args.agent_cmd.is_some() {
        "--agent-cmd".to_string()
    } else if std::env::var_os(&var).is_some_and(|v| !v.is_empty()) {
        format!("${var}")
    } else {
        format!("the {agent} CLI (set ${var} or put it on PATH)")
    };
    Some(format!("{from}: {program:?} not found or not executable; every run will fail until it is"))
}

/// `bytes` percent-encoded for a URL fragment the studio reads with
/// `decodeURIComponent`: unreserved characters as they are, the rest `%XX`.
fn fragment_encode(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len());
    for &b in bytes {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Whether `program` names an executable file: itself when it has a slash,
/// else on `$PATH` (the one lookup `runs doctor` makes too).
fn executable(program: &str) -> bool {
    crate::tools::doctor::locate(program).is_some()
}

/// Warns when the agent a run would start is found but its version is not
/// the one the real-agent matrix tested (`runs doctor`'s finding): read off
/// the start-up path, since a CLI may take a while to answer `--version`.
/// Nothing for the demo, a replay, `--agent-cmd` in batch mode (it
/// replaces the wrapper, which finds its own agent), or a command line
/// given after `--` (`--agent acp -- CMD ARGS`: it runs exactly as given,
/// never as `CMD --version`).
fn warn_if_untested(args: &Args, cfg: &Config) {
    let given = !args.agent_argv.is_empty() || cfg.kind == AgentKind::Acp;
    if given
        || args.demo
        || args.replay.is_some()
        || args.agent.is_none()
        || (args.agent_cmd.is_some() && !cfg.interactive)
    {
        return;
    }
    // The program as an interactive session would start it (cfg.engine is
    // --agent-cmd there; none in batch mode, where the wrapper finds the default).
    let Some(program) = agui::interactive::agent_program(&Config { interactive: true, ..cfg.clone() }) else { return };
    // A program of one's own under an agent's flag (a stand-in, a script) is
    // not run at start to ask its version: only the agent CLIs the matrix knows.
    if !executable(&program) || (args.agent_cmd.is_some() && !crate::tools::doctor::known_program(&program)) {
        return;
    }
    let adapter = cfg.adapter;
    std::thread::spawn(move || {
        if let Some(why) = crate::tools::doctor::untested_warning(adapter, &program) {
            cli::report(BIN, format!("warning: {why}"));
        }
    });
}

/// The binary's whole life: parse, configure, bind, serve until SIGINT/SIGTERM.
pub fn main(args: Args) -> ExitCode {
    match serve(&args, &mut io::stdout()) {
        Ok(()) => Exit::Ok.into(),
        Err(e) => e.exit(BIN),
    }
}

/// Serves until SIGINT or SIGTERM; `out` gets the `listening on` line.
/// The recorded runs an earlier server on this home left unfinished (it
/// crashed, or was killed): journaled `failed` with why, once, before any
/// listing is served (spec/LAYOUT.md, "Runs recorded by runwire-serve").
fn recover_runs(cfg: &Config) {
    let home = &cfg.harness_home;
    let ours = home.join("serve").join("runstate");
    let mine = |p: &crate::runs::registry::Pointer| std::path::Path::new(&p.runstate_dir) == ours;
    for r in crate::supervise::socket::recover(home, crate::runs::record::ACTOR, "server", mine) {
        if let Some(why) = r.reason {
            cli::report(BIN, format!("run {}: its server was gone; journaled: {why}", r.run_id));
        }
    }
}

/// The address this server's approval links live under, recorded in the
/// home before any is minted (`runs::link_prefixes`): the feed, the run
/// views and `runs notify` pass on only links under a recorded one. A
/// server that mints links records its `--public-url`; so does a hub (it
/// serves its nodes' links, minted under its address).
fn record_link_prefix(cfg: &Config) -> Result<(), StartError> {
    let public = match (&cfg.links, &cfg.public) {
        (Some(keys), _) => &keys.public,
        (None, Some(p)) if cfg.mode == Mode::Hub => p,
        _ => return Ok(()),
    };
    let path = crate::runs::link_prefixes::path(&cfg.harness_home);
    crate::runs::link_prefixes::record(&cfg.harness_home, public)
        .map_err(|e| StartError::Io(format!("{}: {e}", path.display())))
}

/// A supervisor's death is news: every `owned::WATCH_EVERY` the home's
/// owners gone get their one `supervisor-gone` record, which the change
/// feed carries (spec/LAYOUT.md, "Who runs a run"). After [`recover_runs`]:
/// an earlier server's runs are ended first, not noted. A thread that
/// cannot start leaves the views' own judgement, and says so.
fn watch_owners(shared: &Arc<Shared>) {
    use crate::supervise::owned::{Noted, Watch, WATCH_EVERY};
    let shared = shared.clone();
    let spawned = std::thread::Builder::new().name("owners".into()).spawn(move || {
        let mut watch = Watch::default();
        while !shared.shutdown.load(Ordering::SeqCst) {
            for n in watch.round(&shared.cfg.harness_home, crate::runs::record::ACTOR) {
                match n {
                    Noted::Wrote { run, why } => {
                        cli::report(BIN, format!("owners: run {run}: journaled supervisor-gone: {why}"))
                    }
                    Noted::Failed { run, error } => cli::report(
                        BIN,
                        format!("owners: run {run}: cannot journal that its supervisor is gone: {error}"),
                    ),
                }
            }
            std::thread::sleep(WATCH_EVERY);
        }
    });
    if let Err(e) = spawned {
        cli::report(
            BIN,
            format!("owners: warning: cannot start the watch ({e}): the feed will not say when a supervisor dies"),
        );
    }
}

pub fn serve(args: &Args, out: &mut dyn Write) -> Result<(), StartError> {
    // Block the signals before any thread exists (the checks below may start
    // agent CLIs for their versions, and with them the process spawner's
    // thread), so every thread inherits the mask and only the waiting thread
    // ever sees them: a SIGTERM taken by a thread that does not block it
    // would end the server unclean. Agents get a clean mask: std resets it
    // in the child before exec.
    let mut signals = nix::sys::signal::SigSet::empty();
    signals.add(nix::sys::signal::Signal::SIGINT);
    signals.add(nix::sys::signal::Signal::SIGTERM);
    signals.thread_block().map_err(|e| StartError::Io(format!("cannot block SIGINT/SIGTERM: {e}")))?;
    args.cluster.check().map_err(StartError::Usage)?;
    args.cluster.check_door(args.token_file.is_some()).map_err(StartError::Usage)?;
    let mut cfg = configure(args)?;
    if cfg.interactive {
        // The same checks runwire-session makes (nothing is started here).
        agui::interactive::check_launch(&cfg).map_err(StartError::Usage)?;
    }
    if args.demo {
        // Before any thread exists: the agents this server starts inherit it.
        std::env::set_var(crate::tools::demo::ENV, "1");
    }
    if let (Source::Agent { cmd: Err(why) }, false) = (&cfg.source, cfg.interactive) {
        cli::report(BIN, format!("warning: {why}; every run will fail"));
    }
    if let Some(why) = agent_missing(args, &cfg) {
        cli::report(BIN, format!("warning: {why}"));
    }
    warn_if_untested(args, &cfg);
    // The address first: a server that cannot listen (the port taken) never
    // holds its node's name, which every hub would then call lost.
    let listener = listen::Listener::bind(&args.listen).map_err(|e| StartError::Io(format!("{}: {e}", args.listen)))?;
    // A node's name before anything else is done or said (refused: exit 2, this home untouched).
    cluster::take_name(&args.cluster, &cfg.harness_home, BIN).map_err(StartError::Usage)?;
    record_link_prefix(&cfg)?;
    recover_runs(&cfg);
    // Evidence is read per request (it may appear later), so a missing path only warns.
    if let Some(e) = cfg.evidence.as_ref().filter(|e| !e.exists()) {
        cli::report(
            BIN,
            format!(
                "warning: --evidence {}: does not exist (yet); GET /api/evidence answers 422 until it does",
                e.display()
            ),
        );
    }
    run::become_subreaper();
    // `http://ADDR:PORT`, or `unix:PATH`.
    let addr = listener.base().map_err(|e| StartError::Io(format!("{}: {e}", args.listen)))?;
    cfg.port = listener.port();
    listener.set_nonblocking(true).map_err(|e| StartError::Io(format!("{addr}: {e}")))?;
    writeln!(out, "listening on {addr}")
        .and_then(|_| out.flush())
        .map_err(|e| StartError::Io(format!("stdout: {e}")))?;
    // For people: what this server does, and where an AG-UI client should post (stdout stays one parsable line).
    // The mode's word first, the same as /api/info's and the studio's; an
    // ACP agent is named by its command (it is no cursor session).
    let agent = cfg.agent_name.unwrap_or("claude");
    let who = match cfg.kind {
        AgentKind::Acp if cfg.mode == Mode::Agent => format!("{agent} ({})", args.agent_argv.join(" ")),
        _ => agent.to_string(),
    };
    let what = match cfg.mode {
        Mode::Hub => "hub: every node's runs, from the cluster; a chat runs on the node it names".to_string(),
        Mode::Demo => format!(
            "demo: each thread holds an interactive session with runwire's built-in demo agent (it asks to run a command, then a question; try Approve, Deny, a steer and Stop; unanswered requests denied after {} s)",
            cfg.answer_timeout.as_secs()
        ),
        Mode::Replay => match &args.replay {
            Some(file) => format!("replay: each run replays {} (a recorded {agent} log; no agent runs)", file.display()),
            None => "replay: each run replays a recorded Claude Code run (no agent runs)".to_string(),
        },
        Mode::Agent if cfg.interactive => format!(
            "agent: {who}, interactive: each thread holds a session (permission mode {}; unanswered requests denied after {} s)",
            cfg.permission_mode,
            cfg.answer_timeout.as_secs()
        ),
        Mode::Agent => format!("agent: {who}: each run starts the {agent} wrapper"),
    };
    // With a token, the page's address carries it (the studio keeps it for the tab and drops it from the address).
    let page = match &cfg.token {
        Some(t) if !t.named() => format!("{addr}/#token={}", fragment_encode(t.first())),
        // Named tokens are people's own: none is printed.
        Some(_) => format!("{addr}/ (with your token: #token=<yours>)"),
        None => format!("{addr}/"),
    };
    // A unix socket has no address a browser opens: say how it is reached instead.
    let reach = match addr.strip_prefix("unix:") {
        Some(path) => format!(
            "the studio and /agui are served on the socket {path} (no browser opens it: put a reverse proxy in front, examples/remote/Caddyfile; or curl --unix-socket {path} http://localhost/api/info)"
        ),
        None => format!("open {page} for the studio, or point an AG-UI client (HttpAgent url) at {addr}/agui"),
    };
    cli::report(BIN, format!("{what}; {reach}"));
    let shared = Arc::new(Shared::new(cfg));
    // The signal thread writes a byte here after setting the flag, so the
    // accept loop sleeps in poll with no timeout and wakes for shutdown at once.
    // Close-on-exec: agents started later must not inherit it.
    let (wake_rx, wake_tx) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)
        .map_err(|e| StartError::Io(format!("cannot create the shutdown pipe: {e}")))?;
    {
        let shared = shared.clone();
        std::thread::Builder::new()
            .name("signals".into())
            .spawn(move || {
                if let Ok(sig) = signals.wait() {
                    cli::report(BIN, format!("{sig}: shutting down"));
                }
                shared.shutdown.store(true, Ordering::SeqCst);
                let _ = nix::unistd::write(&wake_tx, b"x");
            })
            .map_err(|e| StartError::Io(format!("cannot start the signal thread: {e}")))?;
    }
    watch_owners(&shared);
    let sidecar =
        cluster::start(&args.cluster, &shared.cfg.harness_home, listener.port(), args.token_file.as_deref(), BIN);
    accept_loop(&listener, &shared, &wake_rx);
    drop(sidecar);
    // Streams notice the flag within a tick, stop their agents (TERM, grace,
    // KILL) and end their bodies; give them that long.
    let deadline = Instant::now() + run::KILL_GRACE + Duration::from_secs(3);
    while shared.connections.load(Ordering::SeqCst) > 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    shared.sessions.end_all();
    run::kill_remaining();
    Ok(())
}

/// A connection answered 503 from the accept loop, so nothing here may block for long.
fn turn_away(mut s: TcpStream, why: &str) {
    let _ = s.set_write_timeout(Some(Duration::from_millis(200)));
    http::respond_error(&mut s, 503, &[], why);
    let _ = s.shutdown(std::net::Shutdown::Write);
}

fn accept_loop(listener: &listen::Listener, shared: &Arc<Shared>, wake: &std::os::fd::OwnedFd) {
    while !shared.is_shutting_down() {
        match listener.accept() {
            Ok(stream) => {
                let _ = stream.set_nonblocking(false);
                let n = shared.connections.fetch_add(1, Ordering::SeqCst);
                if n >= shared.cfg.max_connections {
                    shared.connections.fetch_sub(1, Ordering::SeqCst);
                    turn_away(stream, "too many connections; try again later");
                    continue;
                }
                let shared2 = shared.clone();
                // Kept to answer with when no thread can be had: the
                // connection otherwise went with the closure, closed unanswered.
                let spare = stream.try_clone().ok();
                // A new thread per connection. Parked threads reused were
                // tried and measured slower on an idle VM: waking a parked
                // thread on a halted vCPU cost more than starting one here
                // (docs/PERFORMANCE.md, issue 24).
                let spawned = std::thread::Builder::new().name("conn".into()).spawn(move || {
                    connection(&shared2, stream);
                    shared2.connections.fetch_sub(1, Ordering::SeqCst);
                });
                if let Err(e) = spawned {
                    shared.connections.fetch_sub(1, Ordering::SeqCst);
                    // Out of threads (the system's or the process's limits):
                    // said, and the client told to come back.
                    cli::report(BIN, format!("accept: no thread for a connection ({e}); answered 503"));
                    if let Some(s) = spare {
                        turn_away(s, "no thread for this connection; try again later");
                    }
                }
            }
            // Nothing pending: wait for the next connection or the shutdown
            // byte, both woken at once (no idle wakeups). Sleeping instead let
            // a burst of connects overflow the kernel's accept queue (128
            // deep), and each dropped SYN cost its client a 1 s retransmission.
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                let mut fds =
                    [PollFd::new(listener.as_fd(), PollFlags::POLLIN), PollFd::new(wake.as_fd(), PollFlags::POLLIN)];
                if poll(&mut fds, PollTimeout::NONE).is_err() {
                    std::thread::sleep(Duration::from_millis(20));
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            // Out of descriptors and the like: back off rather than spin.
            Err(_) => std::thread::sleep(Duration::from_millis(100)),
        }
    }
}

/// One connection, one request; a panic anywhere in it closes the
/// connection and nothing else.
fn connection(shared: &Shared, stream: TcpStream) {
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| router::handle(shared, stream)));
    if result.is_err() {
        cli::report(BIN, "internal error: a request handler panicked; its connection was closed");
    }
}
