//! Which agent, how it is started, and its protocol object: the one place
//! that turns a session's settings into a command line and an [`Agent`], for
//! `runwire-session`, the server and the supervisor alike.

use crate::pipeline::events::InputRequest;
use crate::session::core::acp::{Acp, AcpOptions};
use crate::session::core::claude::{self, Claude, ClaudeOptions};
use crate::session::core::codex::{Codex, CodexOptions};
use crate::session::core::{Agent, AnswerInput, MidTurn};

/// The interactive protocols runwire speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AgentKind {
    /// Claude Code: stream-json in and out, the SDK control protocol.
    Claude,
    /// Codex CLI as `codex app-server` (JSON-RPC 2.0).
    Codex,
    /// cursor-agent as `cursor-agent acp` (the Agent Client Protocol).
    Cursor,
    /// Any ACP agent, given its whole command line.
    Acp,
}

impl AgentKind {
    pub fn name(self) -> &'static str {
        match self {
            AgentKind::Claude => "claude",
            AgentKind::Codex => "codex",
            AgentKind::Cursor => "cursor",
            AgentKind::Acp => "acp",
        }
    }

    /// The interactive protocol of a print-mode adapter (a plan task's
    /// adapter, `runwire-serve --agent`).
    pub fn of(adapter: crate::pipeline::normalize::Adapter) -> AgentKind {
        match adapter {
            crate::pipeline::normalize::Adapter::Claude => AgentKind::Claude,
            crate::pipeline::normalize::Adapter::Codex => AgentKind::Codex,
            crate::pipeline::normalize::Adapter::Cursor => AgentKind::Cursor,
        }
    }

    /// Checks an answer against a request's record as this protocol would
    /// ([`Agent::check_answer`]), for a runner that holds the record and not
    /// the protocol object (the supervisor reads requests from a task log).
    pub fn check_answer(self, req: &InputRequest, a: &AnswerInput) -> Result<(), String> {
        match self {
            // Claude's checks are the answer's own (plan modes aside, which
            // depend on the session's --grant-all).
            AgentKind::Claude => Ok(()),
            AgentKind::Codex => crate::session::core::codex::check_answer(req, a),
            AgentKind::Cursor | AgentKind::Acp => crate::session::core::acp::check_answer(req, a),
        }
    }

    /// What a message mid-turn does in this protocol ([`Agent::message`]).
    pub fn mid_turn(self) -> MidTurn {
        match self {
            AgentKind::Claude | AgentKind::Codex => MidTurn::Joins,
            AgentKind::Cursor | AgentKind::Acp => MidTurn::CancelsAndPrompts,
        }
    }
}

/// A session's settings, each for the agents it names.
#[derive(Debug, Clone)]
pub struct LaunchOptions {
    /// The agent's command and arguments (empty: its `$RUNWIRE_*_BIN`, else
    /// its usual name); the protocol's own arguments are appended (for
    /// `Acp`, the whole command line, nothing appended).
    pub cmd: Vec<String>,
    /// Resume this session (claude `--resume`, codex `thread/resume`, ACP `session/load`).
    pub resume: Option<String>,
    /// Granting everything was asked for (claude `bypassPermissions`, codex `danger-full-access`).
    pub grant_all: bool,
    /// claude: the permission mode, and the one an approved plan continues in.
    pub permission_mode: String,
    pub plan_exit_mode: String,
    /// codex: sandbox, approval policy, model.
    pub sandbox: String,
    pub approval_policy: String,
    pub model: Option<String>,
    /// codex and ACP: the working directory (absolute).
    pub cwd: Option<String>,
    /// ACP: a session mode of the agent's to switch to.
    pub mode: Option<String>,
}

impl Default for LaunchOptions {
    fn default() -> LaunchOptions {
        let c = CodexOptions::default();
        LaunchOptions {
            cmd: Vec::new(),
            resume: None,
            grant_all: false,
            permission_mode: "default".into(),
            plan_exit_mode: "default".into(),
            sandbox: c.sandbox,
            approval_policy: c.approval_policy,
            model: None,
            cwd: None,
            mode: None,
        }
    }
}

/// The command line to start and the protocol object to drive it with.
pub struct Launch {
    pub argv: Vec<String>,
    pub agent: Box<dyn Agent + Send>,
}

fn argv(cmd: &[String], env: &str, default: &str, protocol: Vec<String>) -> Vec<String> {
    let mut argv = if cmd.is_empty() {
        vec![std::env::var(env).ok().filter(|b| !b.is_empty()).unwrap_or_else(|| default.into())]
    } else {
        cmd.to_vec()
    };
    argv.extend(protocol);
    argv
}

/// Checks the settings for `kind` and builds its launch. `Err` is a usage
/// error (`<flag>: <what>`), nothing started.
pub fn launch(kind: AgentKind, o: &LaunchOptions) -> Result<Launch, String> {
    let cwd = || -> Result<String, String> {
        match &o.cwd {
            Some(c) => Ok(c.clone()),
            None => std::env::current_dir()
                .map_err(|e| format!("the current directory: {e}"))?
                .into_os_string()
                .into_string()
                .map_err(|_| "the working directory is not UTF-8".to_string()),
        }
    };
    match kind {
        AgentKind::Claude => {
            for (flag, mode) in [("--permission-mode", &o.permission_mode), ("--plan-exit-mode", &o.plan_exit_mode)] {
                claude::check_mode(mode, o.grant_all).map_err(|e| format!("{flag}: {e}"))?;
            }
            let mut protocol = Vec::new();
            if let Some(s) = &o.resume {
                protocol.extend(["--resume".to_string(), s.clone()]);
            }
            protocol.extend(claude::protocol_args(&o.permission_mode));
            let agent = Claude::new(ClaudeOptions { plan_exit_mode: o.plan_exit_mode.clone(), grant_all: o.grant_all });
            Ok(Launch { argv: argv(&o.cmd, "RUNWIRE_CLAUDE_BIN", "claude", protocol), agent: Box::new(agent) })
        }
        AgentKind::Codex => {
            let c = CodexOptions {
                approval_policy: o.approval_policy.clone(),
                sandbox: o.sandbox.clone(),
                cwd: Some(cwd()?),
                model: o.model.clone(),
                resume: o.resume.clone(),
                questions: true,
                grant_all: o.grant_all,
            };
            c.check()?;
            let argv = argv(&o.cmd, "RUNWIRE_CODEX_BIN", "codex", vec!["app-server".into()]);
            Ok(Launch { argv, agent: Box::new(Codex::new(c)) })
        }
        AgentKind::Cursor | AgentKind::Acp => {
            let argv = match kind {
                AgentKind::Cursor => argv(&o.cmd, "RUNWIRE_CURSOR_BIN", "cursor-agent", vec!["acp".into()]),
                _ if o.cmd.is_empty() => {
                    return Err("acp: give the agent's command line (e.g. -- opencode acp)".into());
                }
                _ => o.cmd.clone(),
            };
            let agent = Acp::new(AcpOptions { cwd: cwd()?, resume: o.resume.clone(), mode: o.mode.clone() });
            Ok(Launch { argv, agent: Box::new(agent) })
        }
    }
}

/// `name` as a path: itself when it has a slash, else the first executable
/// `name` on `$PATH` (the process layer takes a path, and does not search),
/// else `name` (which then fails to start with a clear error). The one
/// lookup of an agent's program, for `runwire-session` and the server alike
/// (issue 26 case 1: `runwire-session claude` did not search `PATH`).
pub fn on_path(name: &std::ffi::OsStr) -> std::path::PathBuf {
    let p = std::path::PathBuf::from(name);
    if p.components().count() > 1 {
        return p;
    }
    crate::util::which(name).unwrap_or(p)
}
