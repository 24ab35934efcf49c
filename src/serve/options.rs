//! What `runwire-serve` is configured to be, fixed at startup: [`Config`]
//! (read from the command line by [`super::args`]), the server's mode and
//! constants. Every handler reads its settings from here, never from the
//! server's root (`serve/mod.rs` starts the server and points down only).

use super::run::Source;
use super::{link_keys, tokens};
use crate::pipeline::normalize::Adapter;
use crate::session::launch::AgentKind;
use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

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
    pub fn word(self) -> &'static str {
        match self {
            Mode::Replay => "replay",
            Mode::Demo => "demo",
            Mode::Agent => "agent",
            Mode::Hub => "hub",
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
    /// `--interactive`: one live session per thread ([`super::agui::interactive`]).
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
    /// `--public-url`: the name people reach this server by (its Host and Origin are accepted).
    pub public: Option<link_keys::Public>,
    /// `--public-url` and `--link-secret-file`: approval links.
    pub links: Option<link_keys::Keys>,
}

/// The person a handler journals for `req`: the name of its token, else `default`.
pub fn person(cfg: &Config, req: &super::http::Request, default: &str) -> String {
    cfg.token.as_ref().and_then(|t| tokens::caller(t, req)).flatten().unwrap_or(default).to_string()
}
