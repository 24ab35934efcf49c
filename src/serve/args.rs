//! `runwire-serve`'s command line ([`Args`]) and what it means once
//! checked ([`configure`]: a [`Config`], the files it names read). Only the
//! server's start reads it.

use super::options::{
    Config, Mode, DEFAULT_ANSWER_TIMEOUT_S, DEFAULT_KEEPALIVE_MS, DEFAULT_REPLAY_DELAY_MS, DEFAULT_STREAM_BUFFER,
    DEMO_LOG, MAX_CONNECTIONS,
};
use super::run::Source;
use super::{cluster, http, links, tokens};
use crate::pipeline::normalize::Adapter;
use crate::session::launch::AgentKind;
use crate::util::origin::parse_origin;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

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
#[command(name = super::options::BIN, version, after_help = AFTER_HELP)]
// Live sessions: a real agent's (--interactive) or the demo agent's.
#[command(group(clap::ArgGroup::new("live").args(["interactive", "demo"]).multiple(true)))]
pub struct Args {
    /// Address to listen on (port 0 picks a free port; the first stdout line names it), or
    /// `unix:PATH`: a unix socket of mode 0600 for a reverse proxy of the same user (no TCP port).
    #[arg(long, value_name = "ADDR:PORT|unix:PATH", default_value = "127.0.0.1:8787", value_parser = parse_listen)]
    pub listen: super::listen::Listen,
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
    #[arg(long, value_name = "SECS", default_value_t = DEFAULT_ANSWER_TIMEOUT_S, value_parser = clap::value_parser!(u64).range(1..=86_400), requires = "live")]
    pub answer_timeout: u64,
    /// Compare evidence for the studio's Compare view and GET /api/evidence: a directory holding
    /// verdict.json (and H0/, H1/ revision.json, checked when present) or a verdict file. Read on
    /// every request.
    #[arg(long, value_name = "DIR")]
    pub evidence: Option<PathBuf>,
    /// The address people reach this server at (behind a TLS proxy), `http(s)://host[:port][/path]`:
    /// its Host and Origin are accepted; with --link-secret-file approval links are minted under
    /// it (at a hub, the nodes' links under it are forwarded to them).
    // Alone, for a hub behind a proxy (it mints no links: it serves its
    // nodes') or any server reached by another name.
    #[arg(long, value_name = "URL")]
    pub public_url: Option<String>,
    /// Mint an approval link `URL/a/<token>` for every approval an interactive session raises
    /// (HMAC-SHA256 under this file's secret, trimmed, >= 32 bytes); the journal records it.
    #[arg(long, value_name = "FILE", requires = "public_url")]
    pub link_secret_file: Option<PathBuf>,
    /// --cluster URL with --node NAME or --hub: the NATS JetStream cluster (spec/CLUSTER.md).
    #[command(flatten)]
    pub cluster: cluster::ClusterArgs,
}

/// `ADDR:PORT` (`localhost` read as 127.0.0.1) or `unix:PATH` ([`super::listen::Listen`]).
fn parse_listen(s: &str) -> Result<super::listen::Listen, String> {
    s.parse()
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

/// What a server started with `args` is.
pub fn mode_of(args: &Args) -> Mode {
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

/// Why the server could not start.
pub use crate::util::cli::StartError;

/// The token file's tokens ([`tokens`]: one anonymous, or several named).
pub fn read_token(path: &Path) -> Result<tokens::Tokens, StartError> {
    tokens::read(path)
}

fn env_ms(name: &str, default: u64) -> Duration {
    Duration::from_millis(std::env::var(name).ok().and_then(|v| v.trim().parse().ok()).unwrap_or(default))
}

/// Checks the flags and reads the files they name, without binding.
pub fn configure(args: &Args) -> Result<Config, StartError> {
    if args.listen.is_unix() && args.cluster.cluster.is_some() {
        return Err(StartError::Usage(format!(
            "--listen {}: the cluster sidecar reaches its server over TCP; run a cluster node on ADDR:PORT",
            args.listen
        )));
    }
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
        (Some(a), None, None) => Source::Agent { cmd: crate::session::wrappers::find(a.adapter()) },
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
        mode: mode_of(args),
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
        public: match &args.public_url {
            Some(u) => Some(links::Public::parse(u).map_err(|e| StartError::Usage(format!("--public-url: {e}")))?),
            None => None,
        },
        links: match (&args.public_url, &args.link_secret_file) {
            (Some(u), Some(f)) => Some(links::Keys::read(u, f)?.at_node(args.cluster.node.clone())),
            _ => None,
        },
    };
    Ok(cfg)
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
    fn listen_accepts_localhost() {
        assert_eq!(parse_listen("localhost:0").unwrap(), "127.0.0.1:0".parse().unwrap());
        assert!(parse_listen("nowhere").is_err());
    }
}
