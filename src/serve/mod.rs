//! `runwire-serve`: a small local HTTP server that answers AG-UI's
//! `POST /agui` with a live `text/event-stream`.
//!
//! Composition only: every run drives the same [`Normalizer`] →
//! [`Translator`] → [`Encoder`] objects as the pipeline
//! `normalize-events | agui-translate | sse-encode`, so the server's body is
//! byte for byte what those binaries print for the same input (a test holds
//! the two together).
//!
//! Layout: [`router`] is the route table and the browser boundary (Host,
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
//! [`Normalizer`]: crate::normalize::Normalizer
//! [`Translator`]: crate::agui::Translator
//! [`Encoder`]: crate::sse::Encoder

pub mod agui;
pub mod cluster;
pub mod control;
pub mod evidence;
pub mod feed;
pub mod http;
pub mod interrupts;
pub mod links;
pub mod router;
pub mod run;
pub mod runs;
pub mod stream;
pub mod studio;
pub mod tokens;

use crate::cli::{self, Exit};
use crate::normalize::Adapter;
use crate::session::launch::AgentKind;
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use std::io::{self, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub const BIN: &str = "runwire-serve";

/// The recorded Claude run replay mode replays when no `--agent` is given.
pub const DEMO_LOG: &[u8] = include_bytes!("../../fixtures/claude/bb-turn-tools.partial.jsonl");

/// Default pause between replayed lines (`RUNWIRE_REPLAY_DELAY_MS` overrides).
pub const DEFAULT_REPLAY_DELAY_MS: u64 = 20;

/// Default `--answer-timeout`: long enough to answer from a phone, short
/// enough that a forgotten request does not hold a session for the day.
pub const DEFAULT_ANSWER_TIMEOUT_S: u64 = 600;

/// Default interval of `: keep-alive` comments on an idle stream
/// (`RUNWIRE_KEEPALIVE_MS` overrides).
pub const DEFAULT_KEEPALIVE_MS: u64 = 15_000;

/// Most connections handled at once by default; more are answered 503
/// (`--max-connections` raises it: each connection is a thread, and a
/// dashboard of many followed tasks needs more than a chat client does).
pub const MAX_CONNECTIONS: usize = 256;

/// Default bound of one task stream's unsent bytes (`RUNWIRE_STREAM_BUFFER`
/// overrides); a client slower than the log loses events past it, and is told.
pub const DEFAULT_STREAM_BUFFER: usize = 1024 * 1024;

const AFTER_HELP: &str = "\
Security model: loopback only by default; a request whose Host is not a loopback name is refused
(DNS rebinding); a request with an Origin other than the server's own loopback origins or an
--allow-origin is refused; --token-file requires `Authorization: Bearer <token>` on every route
but /healthz. See runwire-serve(1).

Modes (the same words in the start line, GET /api/info's \"mode\" and the studio):
  replay  no --agent: each run replays a bundled recorded Claude Code run (no agent, no model)
  demo    --demo: each thread talks to runwire's built-in demo agent (approvals, a question,
          steer and Stop; it runs nothing)
  agent   --agent NAME: each run starts that agent (with --interactive, one session per thread);
          --agent NAME --replay FILE replays FILE instead (replay)
  hub     --cluster URL --hub: every node's runs; a chat runs on the node it names

Exit status: 0 clean shutdown (SIGINT/SIGTERM); 2 usage error; 3 cannot bind the address or read
a file named by a flag.";

/// Serve AG-UI over HTTP: POST /agui runs an agent (or replays a recorded run) and streams AG-UI
/// events as Server-Sent Events.
#[derive(clap::Parser, Debug)]
#[command(name = BIN, version, after_help = AFTER_HELP)]
pub struct Args {
    /// Address to listen on (port 0 picks a free port; the first stdout line names it).
    #[arg(long, value_name = "ADDR:PORT", default_value = "127.0.0.1:8787", value_parser = parse_listen)]
    pub listen: SocketAddr,
    /// Run this agent for each request (its wrapper, wrappers/AGENT.sh): agent mode. Without it,
    /// each request replays a bundled recorded Claude run: replay mode.
    #[arg(long, value_enum, value_name = "AGENT")]
    pub agent: Option<AgentArg>,
    /// Demo mode: try approvals, questions, steer and Stop with no agent installed; each thread holds
    /// an interactive session with runwire's built-in demo agent (it accepts any prompt, runs nothing).
    #[arg(long, conflicts_with_all = ["agent", "replay", "agent_cmd"])]
    pub demo: bool,
    /// The wrapper to start instead of wrappers/AGENT.sh (same contract). With --interactive, the
    /// agent itself instead of `$RUNWIRE_<AGENT>_BIN` or its usual name (the protocol's flags are
    /// appended, as runwire-session does: claude's stream-json flags, codex `app-server`, cursor `acp`).
    #[arg(long, value_name = "PATH", requires = "agent", conflicts_with = "replay")]
    pub agent_cmd: Option<PathBuf>,
    /// `--agent acp --interactive -- CMD [ARGS…]`: the ACP agent's whole command line, run exactly
    /// as given (nothing appended).
    #[arg(last = true, value_name = "CMD")]
    pub agent_argv: Vec<String>,
    /// Replay this recorded log of AGENT for each request instead of running the agent.
    #[arg(long, value_name = "FILE", requires = "agent")]
    pub replay: Option<PathBuf>,
    /// Also accept browser requests from this exact origin, scheme://host or scheme://host:port; repeatable.
    #[arg(long = "allow-origin", value_name = "ORIGIN", value_parser = parse_origin)]
    pub allow_origin: Vec<String>,
    /// Require `Authorization: Bearer <token>` (token = this file's content, trimmed, >= 16 bytes;
    /// or one `NAME:TOKEN` a line, each person's own, journaled by NAME).
    #[arg(long, value_name = "FILE")]
    pub token_file: Option<PathBuf>,
    /// Allow a non-loopback --listen address and any Host header (needs --token-file).
    #[arg(long, requires = "token_file")]
    pub allow_remote: bool,
    /// Most connections served at once (each open stream is one); more are answered 503.
    #[arg(long, value_name = "N", default_value_t = MAX_CONNECTIONS as u32, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub max_connections: u32,
    /// Do not record POST /agui runs under $HARNESS_HOME/serve (they then do not appear in GET /runs).
    #[arg(long)]
    pub no_record: bool,
    /// Hold one interactive session per AG-UI thread (claude, codex app-server, cursor acp, any ACP agent with --agent acp -- CMD): the agent stays alive between
    /// runs, asks before using tools (each request ends the run with an AG-UI interrupt), and takes
    /// answers, live steer and stop. Without it, each run is one batch turn.
    #[arg(long, requires = "agent", conflicts_with = "replay")]
    pub interactive: bool,
    /// Interactive sessions' permission mode: default (ask for every tool that needs permission),
    /// acceptEdits, plan, dontAsk, auto; bypassPermissions (nothing asks) needs --grant-all.
    #[arg(long, value_name = "MODE", default_value = "default", requires = "interactive")]
    pub permission_mode: String,
    /// Allow granting everything: claude's permission mode bypassPermissions, codex's sandbox
    /// danger-full-access (every tool call runs without asking a person), and claude's suggested
    /// grants that reach outside the working directory once resolved (a symlink, `..`, `~/`, `//`).
    #[arg(long, requires = "interactive")]
    pub grant_all: bool,
    /// The permission mode an approved claude plan is carried out in (an answer's `mode` may name
    /// another).
    #[arg(long, value_name = "MODE", default_value = "default", requires = "interactive")]
    pub plan_exit_mode: String,
    /// Interactive codex sessions' sandbox: read-only, workspace-write; danger-full-access needs
    /// --grant-all.
    #[arg(long, value_name = "MODE", default_value = "workspace-write", requires = "interactive")]
    pub sandbox: String,
    /// Interactive codex sessions' approval policy (when codex asks): untrusted,
    /// on-request, never.
    #[arg(long, value_name = "POLICY", default_value = "on-request", requires = "interactive")]
    pub approval_policy: String,
    /// Seconds a request of the agent waits for an answer before it is denied (fail closed); the
    /// interrupt's expiresAt says when.
    #[arg(long, value_name = "SECS", default_value_t = DEFAULT_ANSWER_TIMEOUT_S, value_parser = clap::value_parser!(u64).range(1..=86_400), requires = "interactive")]
    pub answer_timeout: u64,
    /// Compare evidence for the studio's Compare view and GET /api/evidence: a directory holding
    /// verdict.json (and H0/, H1/ revision.json, checked when present) or a verdict file. Read on
    /// every request.
    #[arg(long, value_name = "DIR")]
    pub evidence: Option<PathBuf>,
    /// The address people reach this server at (behind a TLS proxy), `http(s)://host[:port][/path]`:
    /// its Host and Origin are accepted, and approval links are minted under it (with
    /// --link-secret-file).
    #[arg(long, value_name = "URL", requires = "link_secret_file")]
    pub public_url: Option<String>,
    /// Mint an approval link `URL/a/<token>` for every approval an interactive session raises
    /// (HMAC-SHA256 under this file's secret, trimmed, >= 32 bytes); the journal records it.
    #[arg(long, value_name = "FILE", requires = "public_url")]
    pub link_secret_file: Option<PathBuf>,
    /// --cluster URL with --node NAME or --hub: the NATS JetStream cluster (spec/CLUSTER.md).
    #[command(flatten)]
    pub cluster: cluster::ClusterArgs,
}

/// `ADDR:PORT`, with `localhost` read as 127.0.0.1.
fn parse_listen(s: &str) -> Result<SocketAddr, String> {
    if let Some(port) = s.strip_prefix("localhost:") {
        let port: u16 = port.parse().map_err(|_| format!("{s:?}: the port must be a number from 0 to 65535"))?;
        return Ok(SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), port));
    }
    s.parse().map_err(|_| format!("{s:?} is not ADDR:PORT (e.g. 127.0.0.1:8787 or [::1]:8787)"))
}

/// An origin exactly as browsers send it: `scheme://host[:port]`, nothing
/// more (no path, no trailing slash, no user info). Returned lowercased.
pub fn parse_origin(s: &str) -> Result<String, String> {
    let bad = || format!("{s:?} is not an origin: expected exactly scheme://host[:port], e.g. http://localhost:3000");
    let (scheme, rest) = s.split_once("://").ok_or_else(bad)?;
    let scheme_ok = scheme.as_bytes().first().is_some_and(u8::is_ascii_alphabetic)
        && scheme.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'-' | b'.'));
    if !scheme_ok || rest.is_empty() {
        return Err(bad());
    }
    let (host, port) = if let Some(r) = rest.strip_prefix('[') {
        let (inside, after) = r.split_once(']').ok_or_else(bad)?;
        if inside.is_empty() || !inside.bytes().all(|b| b.is_ascii_hexdigit() || b == b':' || b == b'.') {
            return Err(bad());
        }
        (rest.len() - after.len(), after)
    } else {
        match rest.rfind(':') {
            Some(i) => (i, &rest[i..]),
            None => (rest.len(), ""),
        }
    };
    let host_part = &rest[..host];
    if !host_part.starts_with('[')
        && (host_part.is_empty()
            || !host_part.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_')))
    {
        return Err(bad());
    }
    if !port.is_empty() {
        let digits = port.strip_prefix(':').ok_or_else(bad)?;
        if digits.is_empty() || digits.len() > 5 || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return Err(bad());
        }
        if digits.parse::<u32>().map_or(true, |p| p == 0 || p > 65535) {
            return Err(bad());
        }
    }
    Ok(s.to_ascii_lowercase())
}

/// Where each run's lines come from.
#[derive(Debug, Clone)]
pub enum Source {
    /// A recorded log, replayed line by line.
    Replay { log: Arc<[u8]> },
    /// The agent's wrapper, or why none could be found (every run then fails
    /// with a `RUN_ERROR`, as a missing engine would).
    Agent { cmd: Result<PathBuf, String> },
}

/// The agents `--agent` names: the print-mode adapters, and any ACP agent
/// (`acp`, interactive only, its command line after `--`).
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum AgentArg {
    /// Claude Code (wrappers/claude.sh; interactive: stream-json and the control protocol)
    Claude,
    /// Codex CLI (wrappers/codex.sh; interactive: `codex app-server`)
    Codex,
    /// cursor-agent (wrappers/cursor.sh; interactive: `cursor-agent acp`)
    Cursor,
    /// Any agent speaking the Agent Client Protocol, with --interactive only: its command line
    /// after `--`, run exactly as given
    Acp,
}

/// What a server is, in the one vocabulary its start line, `--help`, `GET
/// /api/info`'s `mode` and the studio share (before it, "demo" named both a
/// recorded replay and the demo agent).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// No `--agent` (or `--agent X --replay FILE`): a recorded run replayed, no agent.
    Replay,
    /// `--demo`: runwire's built-in demo agent.
    Demo,
    /// `--agent NAME`: the agent itself.
    Agent,
    /// `--cluster URL --hub`: every node's runs; a chat runs on a node.
    Hub,
}

impl Mode {
    pub fn of(args: &Args) -> Mode {
        if args.cluster.hub {
            Mode::Hub
        } else if args.demo {
            Mode::Demo
        } else if args.agent.is_none() || args.replay.is_some() {
            Mode::Replay
        } else {
            Mode::Agent
        }
    }

    pub fn word(self) -> &'static str {
        match self {
            Mode::Replay => "replay",
            Mode::Demo => "demo",
            Mode::Agent => "agent",
            Mode::Hub => "hub",
        }
    }
}

impl AgentArg {
    /// The name `--agent` takes (`acp` for any ACP agent, whose output is read as cursor's).
    pub fn name(self) -> &'static str {
        match self {
            AgentArg::Claude => "claude",
            AgentArg::Codex => "codex",
            AgentArg::Cursor => "cursor",
            AgentArg::Acp => "acp",
        }
    }

    /// The adapter its output is read with (an ACP agent's is cursor's: ACP).
    pub fn adapter(self) -> Adapter {
        match self {
            AgentArg::Claude => Adapter::Claude,
            AgentArg::Codex => Adapter::Codex,
            AgentArg::Cursor | AgentArg::Acp => Adapter::Cursor,
        }
    }

    /// Its interactive protocol.
    pub fn kind(self) -> AgentKind {
        match self {
            AgentArg::Acp => AgentKind::Acp,
            other => AgentKind::of(other.adapter()),
        }
    }
}

/// Everything a request handler needs to know, fixed at startup.
#[derive(Debug, Clone)]
pub struct Config {
    pub adapter: Adapter,
    /// The interactive protocol (`--agent acp`: any ACP agent, run as given).
    pub kind: AgentKind,
    pub source: Source,
    /// Extra exact origins (lowercased).
    pub allow_origins: Vec<String>,
    /// `--token-file`: the anonymous token, or the named ones (people).
    pub token: Option<tokens::Tokens>,
    pub allow_remote: bool,
    /// The bound address, for the server's own origins.
    pub ip: IpAddr,
    pub port: u16,
    pub replay_delay: Duration,
    pub keepalive: Duration,
    /// How long a client may take to send its request (idle time between reads).
    pub read_timeout: Duration,
    /// How long bytes may wait for a client that takes none of them.
    pub write_timeout: Duration,
    /// Where the run registry lives (`$HARNESS_HOME`, default `~/.harness`).
    pub harness_home: PathBuf,
    /// Record `POST /agui` runs as runs.
    pub record: bool,
    pub max_connections: usize,
    /// Unsent bytes one task stream may hold.
    pub stream_buffer: usize,
    /// `--evidence`: what `GET /api/evidence` checks.
    pub evidence: Option<PathBuf>,
    /// `--interactive`: one live session per thread ([`agui::interactive`]).
    /// What this server is ([`Mode`]): the start line, `/api/info` and the studio say it.
    pub mode: Mode,
    /// The agent `--agent` names (`acp` for any ACP agent), said with agent mode.
    pub agent_name: Option<&'static str>,
    pub interactive: bool,
    /// `--agent-cmd` in interactive mode: the engine to run (else `$RUNWIRE_CLAUDE_BIN`, `claude`);
    /// with `--agent acp`, the command after `--`.
    pub engine: Option<PathBuf>,
    /// `--agent acp -- CMD ARGS…`: the command's arguments (nothing else is appended).
    pub engine_args: Vec<String>,
    /// Interactive sessions' permission mode (`bypassPermissions` only with `--grant-all`).
    pub permission_mode: String,
    pub grant_all: bool,
    /// The mode an approved plan is carried out in.
    pub plan_exit_mode: String,
    /// Interactive codex sessions' sandbox and approval policy.
    pub sandbox: String,
    pub approval_policy: String,
    /// How long a request waits for an answer before it is denied.
    pub answer_timeout: Duration,
    /// `--public-url` and `--link-secret-file`: approval links.
    pub links: Option<links::Keys>,
}

/// Why the server could not start.
pub use crate::cli::StartError;

/// The token file's tokens ([`tokens`]: one anonymous, or several named).
pub fn read_token(path: &Path) -> Result<tokens::Tokens, StartError> {
    tokens::read(path)
}

fn env_ms(name: &str, default: u64) -> Duration {
    Duration::from_millis(std::env::var(name).ok().and_then(|v| v.trim().parse().ok()).unwrap_or(default))
}

/// Checks the flags and reads the files they name, without binding.
pub fn configure(args: &Args) -> Result<Config, StartError> {
    if !args.listen.ip().is_loopback() && !args.allow_remote {
        return Err(StartError::Usage(format!(
            "--listen {}: not a loopback address; pass --allow-remote (with --token-file) to serve other hosts",
            args.listen
        )));
    }
    let token = args.token_file.as_deref().map(read_token).transpose()?;
    match (args.agent, args.agent_argv.is_empty()) {
        (Some(AgentArg::Acp), _) if !args.interactive => {
            return Err(StartError::Usage(
                "--agent acp: ACP has no batch mode; run it with --interactive -- CMD [ARGS…]".into(),
            ))
        }
        (Some(AgentArg::Acp), true) => {
            return Err(StartError::Usage(
                "--agent acp: give the agent's command line after -- (e.g. --agent acp --interactive -- codex-acp)"
                    .into(),
            ))
        }
        (Some(AgentArg::Acp), false) if args.agent_cmd.is_some() => {
            return Err(StartError::Usage("--agent acp: give its command after --, not with --agent-cmd".into()))
        }
        (Some(AgentArg::Acp), false) => {}
        (_, false) => {
            return Err(StartError::Usage(
                "a command after -- goes with --agent acp only (other agents: --agent-cmd)".into(),
            ))
        }
        _ => {}
    }
    let acp_program = (args.agent == Some(AgentArg::Acp)).then(|| PathBuf::from(&args.agent_argv[0]));
    let adapter = args.agent.map_or(Adapter::Claude, AgentArg::adapter);
    let interactive = args.interactive || args.demo;
    let source = match (&args.agent, &args.replay, &args.agent_cmd) {
        (None, _, _) => Source::Replay { log: Arc::from(DEMO_LOG) },
        (Some(_), Some(file), _) => {
            let log = std::fs::read(file).map_err(|e| StartError::Io(format!("--replay {}: {e}", file.display())))?;
            Source::Replay { log: Arc::from(log) }
        }
        (Some(_), None, Some(cmd)) => Source::Agent { cmd: Ok(cmd.clone()) },
        (Some(AgentArg::Acp), None, None) => Source::Agent { cmd: Ok(acp_program.clone().unwrap_or_default()) },
        (Some(a), None, None) => Source::Agent { cmd: crate::wrappers::find(a.adapter()) },
    };
    let cfg = Config {
        adapter,
        kind: args.agent.map_or(AgentKind::Claude, AgentArg::kind),
        source,
        allow_origins: args.allow_origin.clone(),
        token,
        allow_remote: args.allow_remote,
        ip: args.listen.ip(),
        port: args.listen.port(),
        replay_delay: env_ms("RUNWIRE_REPLAY_DELAY_MS", DEFAULT_REPLAY_DELAY_MS),
        keepalive: env_ms("RUNWIRE_KEEPALIVE_MS", DEFAULT_KEEPALIVE_MS).max(Duration::from_millis(10)),
        read_timeout: env_ms("RUNWIRE_READ_TIMEOUT_MS", http::READ_TIMEOUT.as_millis() as u64)
            .max(Duration::from_millis(10)),
        write_timeout: env_ms("RUNWIRE_WRITE_TIMEOUT_MS", http::WRITE_TIMEOUT.as_millis() as u64)
            .max(Duration::from_millis(100)),
        harness_home: crate::runs::harness_home(),
        record: !args.no_record,
        max_connections: args.max_connections as usize,
        stream_buffer: std::env::var("RUNWIRE_STREAM_BUFFER")
            .ok()
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(DEFAULT_STREAM_BUFFER)
            .max(1024),
        evidence: args.evidence.clone(),
        interactive,
        mode: Mode::of(args),
        agent_name: args.agent.map(AgentArg::name),
        engine: if args.demo {
            Some(std::env::current_exe().map_err(|e| StartError::Io(format!("--demo: this executable's path: {e}")))?)
        } else if acp_program.is_some() {
            acp_program.clone()
        } else if args.interactive {
            args.agent_cmd.clone()
        } else {
            None
        },
        engine_args: if acp_program.is_some() { args.agent_argv[1..].to_vec() } else { Vec::new() },
        permission_mode: args.permission_mode.clone(),
        grant_all: args.grant_all,
        plan_exit_mode: args.plan_exit_mode.clone(),
        sandbox: args.sandbox.clone(),
        approval_policy: args.approval_policy.clone(),
        answer_timeout: Duration::from_secs(args.answer_timeout),
        links: match (&args.public_url, &args.link_secret_file) {
            (Some(u), Some(f)) => Some(links::Keys::read(u, f)?),
            _ => None,
        },
    };
    if cfg.interactive {
        // The same checks runwire-session makes (nothing is started here).
        agui::interactive::check_launch(&cfg).map_err(StartError::Usage)?;
    }
    Ok(cfg)
}

/// State shared by every connection.
pub struct Shared {
    pub cfg: Config,
    pub shutdown: AtomicBool,
    pub book: std::sync::Mutex<agui::Book>,
    connections: AtomicUsize,
    /// The change feed's follower, started by the first `GET /runs/events`.
    feed: std::sync::Mutex<Option<Arc<feed::FeedHub>>>,
    /// Interactive mode's live sessions, one per thread.
    pub sessions: agui::interactive::Sessions,
    /// The link routes' rate limits.
    pub link_limits: links::Limiter,
}

impl Shared {
    pub fn new(cfg: Config) -> Shared {
        Shared {
            cfg,
            shutdown: AtomicBool::new(false),
            book: std::sync::Mutex::new(agui::Book::default()),
            connections: AtomicUsize::new(0),
            feed: std::sync::Mutex::new(None),
            sessions: agui::interactive::Sessions::default(),
            link_limits: links::Limiter::default(),
        }
    }

    /// The process's file watcher ([`crate::watch`]), started on first use.
    pub fn hub(&self) -> Result<Arc<crate::watch::Hub>, String> {
        crate::watch::Hub::global().map_err(|e| e.to_string())
    }

    /// The change feed's follower, started on first use.
    /// (A failure, e.g. out of inotify instances, is tried again by the next request.)
    pub fn feed(&self) -> Result<Arc<feed::FeedHub>, String> {
        let mut f = self.feed.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(h) = f.as_ref() {
            return Ok(h.clone());
        }
        let h = feed::FeedHub::start(&self.cfg.harness_home)
            .map_err(|e| format!("{}: {e}", self.cfg.harness_home.join("feed").display()))?;
        *f = Some(h.clone());
        Ok(h)
    }

    pub fn is_shutting_down(&self) -> bool {
        self.shutdown.load(Ordering::Relaxed)
    }
}

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
/// else on `$PATH`.
fn executable(program: &str) -> bool {
    use std::os::unix::fs::PermissionsExt;
    let ok =
        |p: &std::path::Path| std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0);
    if program.contains('/') {
        return ok(std::path::Path::new(program));
    }
    std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()).any(|d| ok(&d.join(program)))
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
    if !executable(&program) || (args.agent_cmd.is_some() && !crate::doctor::known_program(&program)) {
        return;
    }
    let adapter = cfg.adapter;
    std::thread::spawn(move || {
        if let Some(why) = crate::doctor::untested_warning(adapter, &program) {
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

pub fn serve(args: &Args, out: &mut dyn Write) -> Result<(), StartError> {
    args.cluster.check().map_err(StartError::Usage)?;
    args.cluster.check_door(args.token_file.is_some()).map_err(StartError::Usage)?;
    let mut cfg = configure(args)?;
    if args.demo {
        // Before any thread exists: the agents this server starts inherit it.
        std::env::set_var(crate::demo::ENV, "1");
    }
    if let (Source::Agent { cmd: Err(why) }, false) = (&cfg.source, cfg.interactive) {
        cli::report(BIN, format!("warning: {why}; every run will fail"));
    }
    if let Some(why) = agent_missing(args, &cfg) {
        cli::report(BIN, format!("warning: {why}"));
    }
    warn_if_untested(args, &cfg);
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
    // Block the signals before any thread exists, so every thread inherits
    // the mask and only the waiting thread ever sees them. Agents get a clean
    // mask: std resets it in the child before exec.
    let mut signals = nix::sys::signal::SigSet::empty();
    signals.add(nix::sys::signal::Signal::SIGINT);
    signals.add(nix::sys::signal::Signal::SIGTERM);
    signals.thread_block().map_err(|e| StartError::Io(format!("cannot block SIGINT/SIGTERM: {e}")))?;
    run::become_subreaper();
    let listener = TcpListener::bind(args.listen).map_err(|e| StartError::Io(format!("{}: {e}", args.listen)))?;
    let addr = listener.local_addr().map_err(|e| StartError::Io(format!("{}: {e}", args.listen)))?;
    cfg.port = addr.port();
    listener.set_nonblocking(true).map_err(|e| StartError::Io(format!("{addr}: {e}")))?;
    writeln!(out, "listening on http://{addr}")
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
        Some(t) if !t.named() => format!("http://{addr}/#token={}", fragment_encode(t.first())),
        // Named tokens are people's own: none is printed.
        Some(_) => format!("http://{addr}/ (with your token: #token=<yours>)"),
        None => format!("http://{addr}/"),
    };
    cli::report(
        BIN,
        format!("{what}; open {page} for the studio, or point an AG-UI client (HttpAgent url) at http://{addr}/agui"),
    );
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
    let sidecar = cluster::start(&args.cluster, &shared.cfg.harness_home, addr.port(), args.token_file.as_deref(), BIN)
        .map_err(StartError::Usage)?;
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

fn accept_loop(listener: &TcpListener, shared: &Arc<Shared>, wake: &std::os::fd::OwnedFd) {
    while !shared.is_shutting_down() {
        match listener.accept() {
            Ok((stream, _)) => {
                let _ = stream.set_nonblocking(false);
                let n = shared.connections.fetch_add(1, Ordering::SeqCst);
                if n >= shared.cfg.max_connections {
                    shared.connections.fetch_sub(1, Ordering::SeqCst);
                    // Answered from the accept loop, so nothing here may block for long.
                    let mut s = stream;
                    let _ = s.set_write_timeout(Some(Duration::from_millis(200)));
                    http::respond_error(&mut s, 503, &[], "too many connections; try again later");
                    let _ = s.shutdown(std::net::Shutdown::Write);
                    continue;
                }
                let shared2 = shared.clone();
                // A new thread per connection. Parked threads reused were
                // tried and measured slower on an idle VM: waking a parked
                // thread on a halted vCPU cost more than starting one here
                // (docs/PERFORMANCE.md, issue 24).
                let spawned = std::thread::Builder::new().name("conn".into()).spawn(move || {
                    connection(&shared2, stream);
                    shared2.connections.fetch_sub(1, Ordering::SeqCst);
                });
                if spawned.is_err() {
                    shared.connections.fetch_sub(1, Ordering::SeqCst);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cli_definition_is_consistent() {
        use clap::CommandFactory;
        Args::command().debug_assert();
    }

    #[test]
    fn origins_must_be_exactly_scheme_host_port() {
        for ok in ["http://localhost:3000", "https://app.example.com", "http://[::1]:8080", "HTTP://A.b"] {
            assert!(parse_origin(ok).is_ok(), "{ok}");
        }
        assert_eq!(parse_origin("HTTP://A.b").unwrap(), "http://a.b");
        for bad in [
            "localhost:3000",
            "http://localhost:3000/",
            "http://localhost:3000/x",
            "http://",
            "http://user@host",
            "http://host:",
            "http://host:0",
            "http://host:65536",
            "http://host?x",
            "*",
            "null",
            "http://[::1",
            "://host",
        ] {
            assert!(parse_origin(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn listen_accepts_localhost() {
        assert_eq!(parse_listen("localhost:0").unwrap(), "127.0.0.1:0".parse().unwrap());
        assert!(parse_listen("nowhere").is_err());
    }
}
