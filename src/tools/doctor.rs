//! `runs doctor`: is each agent CLI runwire drives here, at a version the
//! real-agent matrix tested, with the wrapper that will run it? And the
//! matrix's capability table (`runs doctor --capabilities`).
//!
//! One agent at a time ([`check`]): its program is found as the wrappers
//! and `runwire-serve` find it (`$RUNWIRE_<AGENT>_BIN`, else its usual name
//! on `$PATH`; the ACP agents by name on `$PATH`); its version is read with
//! `PROGRAM --version` ([`run_bounded`]: stdin `/dev/null`, its own process
//! group, killed whole after a short timeout, output capped, so a CLI that
//! phones home or waits cannot hang the doctor) or, for the ACP agents,
//! which have no such flag, from the `package.json` of the npm package the
//! program belongs to; and compared with the version the matrix ran
//! (`realagents/tested.json`, the one place it is written). Whether the
//! agent is logged in is read offline only (an API key in the environment,
//! a credentials file), and when nothing says so the answer is "can't
//! tell": a keychain, an `apiKeyHelper` or a model provider of the agent's
//! own configuration are not looked into.
//!
//! `runwire-serve --agent X` warns at start through [`untested_warning`].

use crate::pipeline::normalize::Adapter;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The versions the matrix ran (`realagents/tested.json`).
pub const TESTED_JSON: &str = include_str!("../../realagents/tested.json");
/// The matrix's capability table (`realagents/capabilities.json`).
pub const CAPABILITIES_JSON: &str = include_str!("../../realagents/capabilities.json");

/// How long `PROGRAM --version` may take before its group is killed.
pub const VERSION_TIMEOUT: Duration = Duration::from_secs(5);
/// The most of its output read.
pub const VERSION_CAP: usize = 64 * 1024;

/// How an agent's version is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VersionFrom {
    /// `PROGRAM --version`, else its npm package's `package.json`.
    Flag,
    /// Only its npm package's `package.json` (the ACP agents have no
    /// `--version`: claude-agent-acp starts its server, codex-acp refuses it).
    Package,
}

/// Where an agent's login is looked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LoginKind {
    Anthropic,
    OpenAi,
    Cursor,
}

/// An agent CLI runwire drives.
#[derive(Debug)]
pub struct AgentSpec {
    /// Its name for `runs doctor NAME` (and in `realagents/tested.json`).
    pub name: &'static str,
    /// Other names it answers to.
    pub aliases: &'static [&'static str],
    /// Its usual program name on `$PATH`.
    pub program: &'static str,
    /// The environment variable the wrappers and `runwire-session` take it from.
    pub env: Option<&'static str>,
    /// The wrapper that runs it (`wrappers/NAME.sh`); `None` for an ACP agent.
    pub adapter: Option<Adapter>,
    /// Its npm package.
    pub package: Option<&'static str>,
    pub version_from: VersionFrom,
    pub login: LoginKind,
    /// How runwire runs it when it has no wrapper.
    pub runs_as: &'static str,
    /// How to install it when it is on no package registry (else `npm
    /// install -g` of its package at the tested version: [`install_hint`]).
    pub install: Option<&'static str>,
}

/// Every agent the doctor knows, in its order.
pub const AGENTS: &[AgentSpec] = &[
    AgentSpec {
        name: "claude",
        aliases: &["claude-code"],
        program: "claude",
        env: Some("RUNWIRE_CLAUDE_BIN"),
        adapter: Some(Adapter::Claude),
        package: Some("@anthropic-ai/claude-code"),
        version_from: VersionFrom::Flag,
        login: LoginKind::Anthropic,
        runs_as: "",
        install: None,
    },
    AgentSpec {
        name: "codex",
        aliases: &[],
        program: "codex",
        env: Some("RUNWIRE_CODEX_BIN"),
        adapter: Some(Adapter::Codex),
        package: Some("@openai/codex"),
        version_from: VersionFrom::Flag,
        login: LoginKind::OpenAi,
        runs_as: "",
        install: None,
    },
    AgentSpec {
        name: "cursor",
        aliases: &["cursor-agent"],
        program: "cursor-agent",
        env: Some("RUNWIRE_CURSOR_BIN"),
        adapter: Some(Adapter::Cursor),
        package: None,
        version_from: VersionFrom::Flag,
        login: LoginKind::Cursor,
        runs_as: "",
        install: Some("curl https://cursor.com/install -fsS | bash (Cursor's installer, https://cursor.com/docs/cli/installation; cursor-agent is on no package registry)"),
    },
    AgentSpec {
        name: "claude-agent-acp",
        aliases: &[],
        program: "claude-agent-acp",
        env: None,
        adapter: None,
        package: Some("@zed-industries/claude-agent-acp"),
        version_from: VersionFrom::Package,
        login: LoginKind::Anthropic,
        runs_as: "no wrapper (ACP, interactive only): runwire-session acp -- claude-agent-acp",
        install: None,
    },
    AgentSpec {
        name: "codex-acp",
        aliases: &[],
        program: "codex-acp",
        env: None,
        adapter: None,
        package: Some("@zed-industries/codex-acp"),
        version_from: VersionFrom::Package,
        login: LoginKind::OpenAi,
        runs_as: "no wrapper (ACP, interactive only): runwire-session acp -- codex-acp",
        install: None,
    },
];

/// The agent called `name` (or one of its aliases).
pub fn spec(name: &str) -> Option<&'static AgentSpec> {
    AGENTS.iter().find(|a| a.name == name || a.aliases.contains(&name))
}

/// The agent behind a print-mode adapter.
pub fn spec_of(adapter: Adapter) -> &'static AgentSpec {
    AGENTS.iter().find(|a| a.adapter == Some(adapter)).expect("every adapter has its agent")
}

/// How to install `spec`'s agent: its npm package at the version the
/// matrix tested (the version one gets `tested` for), else its own
/// installer.
pub fn install_hint(spec: &AgentSpec) -> String {
    match (spec.package, tested().get(spec.name), spec.install) {
        (Some(p), Some(t), _) => format!("npm install -g {p}@{}", t.version),
        (_, _, Some(how)) => how.to_string(),
        (Some(p), None, None) => format!("npm install -g {p}"),
        (None, _, None) => format!("put {} on PATH", spec.program),
    }
}

/// The names `runs doctor` takes, for its usage errors.
pub fn names() -> String {
    AGENTS.iter().map(|a| a.name).collect::<Vec<_>>().join(", ")
}

#[derive(Debug, Deserialize)]
struct Tested {
    agents: BTreeMap<String, TestedAgent>,
}

/// One agent's row of `realagents/tested.json`.
#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct TestedAgent {
    pub package: String,
    pub version: String,
}

/// `realagents/tested.json`, by agent name.
pub fn tested() -> BTreeMap<String, TestedAgent> {
    serde_json::from_str::<Tested>(TESTED_JSON).map(|t| t.agents).unwrap_or_default()
}

/// What one bounded run of a program gave.
#[derive(Debug)]
pub struct Ran {
    /// Its exit code; `None` when killed by a signal (or by the timeout).
    pub code: Option<i32>,
    pub timed_out: bool,
    /// The first [`VERSION_CAP`] bytes of its stdout and of its stderr.
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
}

/// Runs `program args` with stdin `/dev/null`, started as every agent
/// process is ([`crate::session::proc`]: a process group of its own behind
/// the per-run reaper, gone when this process goes), with the agents' own
/// switches against non-essential traffic set; at most `timeout`, after
/// which the whole run is killed (SIGKILL), and what the program left
/// behind is stopped once it has exited too (a child must not hold the
/// pipes open). At most `cap` bytes of each output are kept; the rest is
/// not read.
pub fn run_bounded(program: &Path, args: &[&str], timeout: Duration, cap: usize) -> std::io::Result<Ran> {
    use crate::session::proc::{Proc, Spec};
    let mut spec = Spec::new(program);
    for a in args {
        spec.arg(a);
    }
    spec.env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        .env("DISABLE_AUTOUPDATER", "1")
        .env("NO_UPDATE_NOTIFIER", "1");
    spec.pipe_stderr = true;
    spec.kill_grace = Duration::ZERO;
    let mut child = Proc::spawn(&spec)?;
    let reader = |r: Option<Box<dyn Read + Send>>| {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            if let Some(r) = r {
                let _ = r.take(cap as u64).read_to_end(&mut buf);
            }
            let _ = tx.send(buf);
        });
        rx
    };
    let out = reader(child.stdout.take().map(|s| Box::new(s) as Box<dyn Read + Send>));
    let err = reader(child.stderr.take().map(|s| Box::new(s) as Box<dyn Read + Send>));
    let rc = child.wait_timeout(timeout);
    let timed_out = rc.is_none();
    if timed_out {
        child.kill();
    }
    let rc = rc.unwrap_or_else(|| child.stop());
    let grace = Duration::from_secs(1);
    let stdout = out.recv_timeout(grace).unwrap_or_default();
    let stderr = err.recv_timeout(grace).unwrap_or_default();
    // A program killed by a signal has no exit code (the run reports 128 + signal).
    let code = (!timed_out && (0..128).contains(&rc)).then_some(rc as i32);
    Ok(Ran { code, timed_out, stdout, stderr })
}

/// The first version-like word of `text`: digits and dots with at least one
/// dot (`2.1.328`, `0.169.0`, `2025.09.18-7ae6800`), with a `-`/`+` suffix.
pub fn parse_version(text: &str) -> Option<String> {
    for word in text.split(|c: char| c.is_whitespace() || matches!(c, '(' | ')' | ',' | ';' | '"' | '\'')) {
        let w = word.strip_prefix('v').unwrap_or(word);
        let core_len = w.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(w.len());
        let core = w[..core_len].trim_end_matches('.');
        let parts: Vec<&str> = core.split('.').collect();
        if parts.len() < 2 || parts.iter().any(|p| p.is_empty()) {
            continue;
        }
        let rest = &w[core.len()..];
        let suffix = match rest.chars().next() {
            Some('-' | '+') => {
                let s: String =
                    rest.chars().take_while(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '+' | '.')).collect();
                s.trim_end_matches('.').to_string()
            }
            _ => String::new(),
        };
        return Some(format!("{core}{suffix}"));
    }
    None
}

/// `program` as a path: itself when it has a slash, else the first
/// executable file of that name on `$PATH`.
pub fn locate(program: &str) -> Option<PathBuf> {
    crate::util::which(std::ffi::OsStr::new(program))
}

/// The version of npm package `package` that `program` belongs to: the
/// `package.json` named so in a directory above it (links resolved).
pub fn package_version(program: &Path, package: &str) -> Option<String> {
    let real = program.canonicalize().ok()?;
    for dir in real.ancestors().skip(1).take(6) {
        let Ok(text) = std::fs::read_to_string(dir.join("package.json")) else { continue };
        let Ok(v) = serde_json::from_str::<serde_json::Value>(&text) else { continue };
        if v["name"] == package {
            return v["version"].as_str().map(str::to_string);
        }
    }
    None
}

/// The version of `program`, and how it was read, or why it could not be.
pub fn read_version(spec: &AgentSpec, program: &Path) -> Result<(String, String), String> {
    let mut why = Vec::new();
    if spec.version_from == VersionFrom::Flag {
        match run_bounded(program, &["--version"], VERSION_TIMEOUT, VERSION_CAP) {
            Ok(r) if r.timed_out => why.push(format!("--version gave no answer within {}s", VERSION_TIMEOUT.as_secs())),
            // On stdout; a CLI that prints it on stderr is read there.
            Ok(r) if r.code == Some(0) => match parse_version(&String::from_utf8_lossy(&r.stdout))
                .or_else(|| parse_version(&String::from_utf8_lossy(&r.stderr)))
            {
                Some(v) => return Ok((v, "--version".into())),
                None => why.push("--version printed no version".into()),
            },
            Ok(r) => {
                let first = String::from_utf8_lossy(&r.stderr)
                    .lines()
                    .map(str::trim)
                    .find(|l| !l.is_empty())
                    .map(str::to_string);
                let how = r.code.map_or("was killed".to_string(), |c| format!("exited {c}"));
                why.push(match first {
                    Some(l) => format!("--version {how}: {}", cut(&l, 120)),
                    None => format!("--version {how}"),
                });
            }
            Err(e) => why.push(format!("--version: {e}")),
        }
    }
    if let Some(pkg) = spec.package {
        match package_version(program, pkg) {
            Some(v) => return Ok((v, format!("{pkg}/package.json"))),
            None => why.push(format!("not inside the npm package {pkg}")),
        }
    }
    Err(why.join("; "))
}

fn cut(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        format!("{}…", s.chars().take(n).collect::<String>())
    }
}

/// Whether the agent is logged in, as far as can be told offline.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Login {
    /// `found`, or `can't tell` (nothing found; it may still be there).
    pub status: &'static str,
    pub detail: String,
}

fn home() -> Option<PathBuf> {
    std::env::var_os("HOME").filter(|h| !h.is_empty()).map(PathBuf::from)
}

fn env_set(k: &str) -> bool {
    std::env::var_os(k).is_some_and(|v| !v.is_empty())
}

/// The offline look at `kind`'s login: keys in the environment, then the
/// credentials file the CLI writes when one logs in.
pub fn login(kind: LoginKind) -> Login {
    let found = |detail: String| Login { status: "found", detail };
    let (vars, files, unchecked): (&[&str], Vec<PathBuf>, &str) = match kind {
        LoginKind::Anthropic => {
            let dir = std::env::var_os("CLAUDE_CONFIG_DIR")
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
                .or_else(|| home().map(|h| h.join(".claude")));
            (
                &[
                    "ANTHROPIC_API_KEY",
                    "ANTHROPIC_AUTH_TOKEN",
                    "CLAUDE_CODE_OAUTH_TOKEN",
                    "CLAUDE_CODE_USE_BEDROCK",
                    "CLAUDE_CODE_USE_VERTEX",
                ],
                dir.map(|d| d.join(".credentials.json")).into_iter().collect(),
                "a keychain or an apiKeyHelper is not looked into",
            )
        }
        LoginKind::OpenAi => {
            let dir = std::env::var_os("CODEX_HOME")
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
                .or_else(|| home().map(|h| h.join(".codex")));
            (
                &["OPENAI_API_KEY", "CODEX_API_KEY"],
                dir.map(|d| d.join("auth.json")).into_iter().collect(),
                "a model provider of config.toml with its own key is not looked into",
            )
        }
        LoginKind::Cursor => (&["CURSOR_API_KEY"], Vec::new(), "cursor-agent's own login is not looked into"),
    };
    if let Some(v) = vars.iter().find(|v| env_set(v)) {
        return found(format!("${v} is set"));
    }
    if let Some(f) = files.iter().find(|f| f.is_file()) {
        return found(format!("{} exists", f.display()));
    }
    let mut looked: Vec<String> = vars.iter().map(|v| format!("${v}")).collect();
    looked.extend(files.iter().map(|f| f.display().to_string()));
    Login { status: "can't tell", detail: format!("none of {} ({unchecked})", looked.join(", ")) }
}

/// One agent's check.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub agent: String,
    /// The program that will run: its path, when found.
    pub program: Option<String>,
    /// Where the program came from: `$RUNWIRE_CLAUDE_BIN`, `PATH`, `--agent-cmd`.
    pub from: String,
    pub version: Option<String>,
    /// How the version was read (`--version`, a package.json), or why it could not be.
    pub version_source: String,
    /// The version the matrix ran; `None` for an agent not in the matrix.
    pub tested_version: Option<String>,
    /// What the matrix says of it, whether or not it is installed: the
    /// version it ran, or `untested` (not in the matrix).
    pub tested: String,
    /// How to install it ([`install_hint`]).
    pub install: String,
    /// `tested`, `untested`, `unknown` (could not be read), `not in the matrix`, `not installed`.
    pub version_status: String,
    /// The wrapper that will run it (`runwire-serve`, `runwire-supervise`), or how it runs.
    pub wrapper: Option<String>,
    pub wrapper_error: Option<String>,
    pub login: Login,
    /// What stands between it and ready, one sentence each.
    pub missing: Vec<String>,
    pub ready: bool,
}

/// Checks one agent: `program` (a path or a name on `$PATH`) when given
/// (`--agent-cmd`), else its `$RUNWIRE_<AGENT>_BIN`, else its usual name.
pub fn check(spec: &AgentSpec, program: Option<&str>) -> Report {
    let env_val = spec.env.and_then(|e| std::env::var(e).ok()).filter(|v| !v.is_empty());
    let (name, from) = match (program, &env_val) {
        (Some(p), _) => (p.to_string(), "--agent-cmd".to_string()),
        (None, Some(v)) => (v.clone(), format!("${}", spec.env.unwrap_or_default())),
        (None, None) => (spec.program.to_string(), "PATH".to_string()),
    };
    let found = locate(&name);
    let tested = tested().get(spec.name).map(|t| t.version.clone());
    let mut missing = Vec::new();
    let (version, version_source, version_status) = match &found {
        None => {
            let how = if from == "PATH" {
                let hint = spec.env.map(|e| format!(" (or set ${e})")).unwrap_or_default();
                format!("not installed: no {name} on PATH{hint}")
            } else {
                format!("not installed: {from} {name:?} is not an executable file")
            };
            missing.push(how);
            (None, String::new(), "not installed".to_string())
        }
        Some(p) => match read_version(spec, p) {
            Ok((v, src)) => {
                let status = match &tested {
                    None => {
                        missing.push(format!("untested: {} is not in the real-agent matrix", spec.name));
                        "not in the matrix"
                    }
                    Some(t) if *t == v => "tested",
                    Some(t) => {
                        missing.push(format!("untested version: {v} (the real-agent matrix ran {t})"));
                        "untested"
                    }
                };
                (Some(v), src, status.to_string())
            }
            Err(why) => {
                missing.push(format!("version unknown: {why}"));
                (None, why, "unknown".to_string())
            }
        },
    };
    let (wrapper, wrapper_error) = match spec.adapter {
        Some(a) => match crate::session::wrappers::find(a) {
            Ok(w) => (Some(w.display().to_string()), None),
            Err(e) => {
                missing.push(format!("no wrapper: {e}"));
                (None, Some(e))
            }
        },
        None => (Some(spec.runs_as.to_string()), None),
    };
    Report {
        agent: spec.name.to_string(),
        program: found.map(|p| p.display().to_string()),
        from,
        version,
        version_source,
        tested: tested.clone().unwrap_or_else(|| "untested".to_string()),
        tested_version: tested,
        install: install_hint(spec),
        version_status,
        wrapper,
        wrapper_error,
        login: login(spec.login),
        ready: missing.is_empty(),
        missing,
    }
}

/// What `runwire-serve --agent X` says at start about a program it found
/// (`program`, a path or a name on `$PATH`): nothing when its version is
/// the tested one or cannot be read (a stand-in without `--version`),
/// else why it is untested.
/// Whether `program` is one of the agent CLIs the matrix knows, by its file
/// name: anything else (a stand-in, a script of one's own) is never run to
/// ask its version.
pub fn known_program(program: &str) -> bool {
    let base = Path::new(program).file_name().and_then(|n| n.to_str()).unwrap_or_default();
    AGENTS.iter().any(|a| a.program == base)
}

pub fn untested_warning(adapter: Adapter, program: &str) -> Option<String> {
    let path = locate(program)?;
    // A known program under another adapter's flag (`--agent cursor --agent-cmd claude-agent-acp`).
    let base = path.file_name().and_then(|n| n.to_str()).unwrap_or_default();
    let spec = AGENTS.iter().find(|a| a.program == base && a.adapter.is_none()).unwrap_or_else(|| spec_of(adapter));
    let (v, _) = read_version(spec, &path).ok()?;
    match tested().get(spec.name) {
        Some(t) if t.version == v => None,
        Some(t) => Some(format!(
            "{} {v} ({}) is not the version the real-agent matrix tested ({}); see `runs doctor {}`",
            spec.name,
            path.display(),
            t.version,
            spec.name
        )),
        None => Some(format!(
            "{} {v} ({}) is not in the real-agent matrix: untested; see `runs doctor {}`",
            spec.name,
            path.display(),
            spec.name
        )),
    }
}

/// The reports as the terminal table: one block per agent.
pub fn table(reports: &[Report]) -> String {
    let mut s = String::new();
    for r in reports {
        let mark = if r.ready { "ready" } else { "NOT READY" };
        s.push_str(&format!("{}: {mark}\n", r.agent));
        let program = match &r.program {
            Some(p) => format!("{p} (from {})", r.from),
            None => "not found".to_string(),
        };
        let version = match (&r.version, &r.tested_version) {
            (Some(v), Some(t)) if v == t => format!("{v}: tested"),
            (Some(v), Some(t)) => format!("{v}: untested (the matrix ran {t})"),
            (Some(v), None) => format!("{v}: untested (not in the matrix)"),
            (None, _) if r.program.is_none() => "-".to_string(),
            (None, _) => format!("unknown ({})", r.version_source),
        };
        let wrapper = match (&r.wrapper, &r.wrapper_error) {
            (Some(w), _) => w.clone(),
            (None, Some(e)) => format!("none: {e}"),
            (None, None) => "-".to_string(),
        };
        let matrix = match &r.tested_version {
            Some(t) => format!("{t} (the version the real-agent matrix ran)"),
            None => "untested (not in the real-agent matrix)".to_string(),
        };
        let rows = [
            ("program", program),
            ("version", version),
            ("tested", matrix),
            ("install", r.install.clone()),
            ("wrapper", wrapper),
            ("login", format!("{}: {}", r.login.status, r.login.detail)),
        ];
        for (k, v) in rows {
            s.push_str(&format!("  {k:<8} {v}\n"));
        }
        for m in &r.missing {
            s.push_str(&format!("  missing  {m}\n"));
        }
    }
    s
}

// ---- the capability table ---------------------------------------------------

/// `realagents/capabilities.json`.
#[derive(Debug, Deserialize)]
pub struct Capabilities {
    pub columns: Vec<Column>,
    pub agents: Vec<AgentCaps>,
}

#[derive(Debug, Deserialize)]
pub struct Column {
    pub key: String,
    pub title: String,
}

#[derive(Debug, Deserialize)]
pub struct AgentCaps {
    /// Its name in `realagents/tested.json`.
    pub agent: String,
    pub title: String,
    pub cells: BTreeMap<String, Cell>,
}

/// One agent × capability.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Cell {
    /// `yes`, `partial`, `no`, `n/a`, `untested`.
    pub is: String,
    #[serde(default)]
    pub tests: Vec<String>,
    pub case: Option<u32>,
    pub note: Option<String>,
}

/// The statuses a cell may have.
pub const CELL_STATUSES: &[&str] = &["yes", "partial", "no", "n/a", "untested"];

/// `realagents/capabilities.json`, parsed.
pub fn capabilities() -> Result<Capabilities, String> {
    serde_json::from_str(CAPABILITIES_JSON).map_err(|e| format!("realagents/capabilities.json: {e}"))
}

/// The capability table as markdown: one row per agent, its tested version, a cell per column.
pub fn capability_table() -> Result<String, String> {
    let caps = capabilities()?;
    let tested = tested();
    let esc = |s: &str| s.replace('|', "\\|");
    let mut s = String::new();
    s.push_str("| agent | version |");
    for c in &caps.columns {
        s.push_str(&format!(" {} |", esc(&c.title)));
    }
    s.push_str("\n|---|---|");
    s.push_str(&"---|".repeat(caps.columns.len()));
    s.push('\n');
    for a in &caps.agents {
        let version = tested
            .get(&a.agent)
            .map(|t| t.version.clone())
            .ok_or(format!("realagents/capabilities.json: agent {:?} is not in realagents/tested.json", a.agent))?;
        s.push_str(&format!("| {} | {} |", esc(&a.title), esc(&version)));
        for c in &caps.columns {
            let cell = a
                .cells
                .get(&c.key)
                .ok_or(format!("realagents/capabilities.json: {} has no cell {:?}", a.agent, c.key))?;
            if !CELL_STATUSES.contains(&cell.is.as_str()) {
                return Err(format!(
                    "realagents/capabilities.json: {} {}: unknown status {:?}",
                    a.agent, c.key, cell.is
                ));
            }
            let mut text = cell.is.clone();
            if let Some(n) = cell.case {
                text.push_str(&format!(": case {n}"));
            }
            if let Some(n) = &cell.note {
                text.push_str(&format!(" ({n})"));
            }
            s.push_str(&format!(" {} |", esc(&text)));
        }
        s.push('\n');
    }
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_are_read_from_what_the_clis_print() {
        assert_eq!(parse_version("2.1.328 (Claude Code)\n").as_deref(), Some("2.1.328"));
        assert_eq!(parse_version("codex-cli 0.169.0\n").as_deref(), Some("0.169.0"));
        assert_eq!(parse_version("2025.09.18-7ae6800\n").as_deref(), Some("2025.09.18-7ae6800"));
        assert_eq!(parse_version("tool v1.2.3-beta.1, built").as_deref(), Some("1.2.3-beta.1"));
        assert_eq!(parse_version("version 12 of 3").as_deref(), None);
        assert_eq!(parse_version("").as_deref(), None);
    }

    #[test]
    fn every_agent_of_the_matrix_is_known_and_the_table_renders() {
        assert!(!tested().is_empty(), "realagents/tested.json does not parse");
        for name in tested().keys() {
            assert!(spec(name).is_some(), "{name} of realagents/tested.json is not an agent of the doctor");
        }
        assert_eq!(spec("cursor-agent").map(|s| s.name), Some("cursor"));
        let t = capability_table().unwrap();
        assert!(t.starts_with("| agent | version | batch |"), "{t}");
        assert_eq!(t.lines().count(), 2 + capabilities().unwrap().agents.len());
    }
}
