//! The real-agent matrix (issue 26): the pinned agent CLIs (`realagents/`,
//! installed with `npm ci`: Claude Code 2.1.328, Codex 0.169.0,
//! claude-agent-acp 0.23.1, codex-acp 0.16.0) driven by runwire's real
//! binaries against the project's scripted model server
//! (`realagents/model-server.py`), every test in a network namespace of its
//! own with only loopback up, so nothing can leave the machine. Each AG-UI
//! stream is checked by the official client (`conformance/`).
//!
//! Without the agents installed every test is ignored (the project's one
//! skip rule, `tool = "real-agents"` in tests/support/tools.rs), so `cargo
//! test` shows them as skipped, never passed; under CI they always run, and a missing agent
//! fails. A test that shows a known runwire gap is `#[ignore]`d with the
//! issue's case number: `cargo test --test it real_agents:: -- --ignored` runs
//! them (and they fail until the gap is fixed). docs/REAL-AGENTS.md has the
//! resulting table.

use crate::support;

use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Output, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");
/// A scripted turn takes 1-2 s; a whole scenario a few turns.
const LIMIT: Duration = Duration::from_secs(90);

fn agent_bin(name: &str) -> PathBuf {
    let p = Path::new(ROOT).join("realagents/node_modules/.bin").join(name);
    assert!(p.exists(), "{} is missing: cd realagents && npm ci", p.display());
    p
}

/// Moves this test's thread into a network namespace of its own with only
/// `lo` (up): the thread's sockets and every process it starts from now on
/// (the model server, runwire, the agents, node) see nothing else.
fn offline() {
    // SAFETY: unshare(2) with CLONE_NEWNET changes this thread's network namespace only.
    let rc = unsafe { nix::libc::unshare(nix::libc::CLONE_NEWNET) };
    assert_eq!(
        rc,
        0,
        "unshare(CLONE_NEWNET): {} (the matrix needs root, or CAP_SYS_ADMIN, for an offline network namespace)",
        std::io::Error::last_os_error()
    );
    let st = Command::new("ip").args(["link", "set", "lo", "up"]).status().expect("run ip (iproute2)");
    assert!(st.success(), "ip link set lo up: {st}");
}

/// One scenario's world: the scripted model on a loopback port, a throwaway
/// HOME and CODEX_HOME, a working directory.
struct Lab {
    dir: PathBuf,
    model: Child,
    port: u16,
}

impl Lab {
    fn new(name: &str, script: Value) -> Lab {
        offline();
        let dir = support::scratch(name);
        for d in ["home", "codex-home", "work", "tmp"] {
            std::fs::create_dir_all(dir.join(d)).unwrap();
        }
        std::fs::write(dir.join("script.json"), script.to_string()).unwrap();
        // `codex exec` refuses a directory outside a git repository, and the
        // codex wrapper does not pass --skip-git-repo-check.
        let git = Command::new("git").args(["init", "-q"]).arg(dir.join("work")).status().expect("run git");
        assert!(git.success(), "git init: {git}");
        let mut model = Command::new("python3")
            .arg(Path::new(ROOT).join("realagents/model-server.py"))
            .arg(dir.join("script.json"))
            .arg(dir.join("requests.jsonl"))
            .stdout(Stdio::piped())
            // Its tracebacks (a client that hung up mid-stream: a stop, a kill) go with the
            // scenario's files, shown only when a test fails (`why`), not in a passing run.
            .stderr(std::fs::File::create(dir.join("model-server.err")).expect("create model-server.err"))
            .spawn()
            .expect("start python3 realagents/model-server.py");
        let mut line = String::new();
        BufReader::new(model.stdout.take().unwrap()).read_line(&mut line).unwrap();
        let port = line.trim().parse().unwrap_or_else(|_| panic!("model-server.py said {line:?}, not its port"));
        // Codex: the mock provider, and nothing that looks anything up.
        let config = format!(
            "model = \"gpt-5.5\"\nmodel_provider = \"mock\"\n\n[model_providers.mock]\nname = \"mock\"\n\
             base_url = \"http://127.0.0.1:{port}/v1\"\nwire_api = \"responses\"\nenv_key = \"MOCK_API_KEY\"\n\
             request_max_retries = 0\nstream_max_retries = 0\n\n[features]\nplugins = false\n\n[analytics]\nenabled = false\n"
        );
        std::fs::write(dir.join("codex-home/config.toml"), config).unwrap();
        Lab { dir, model, port }
    }

    fn work(&self) -> PathBuf {
        self.dir.join("work")
    }

    /// The agents' temporary directory (their `TMPDIR`).
    fn tmp(&self) -> std::path::PathBuf {
        self.dir.join("tmp")
    }

    /// `cmd` with the agents' offline environment, run in the work directory.
    fn cmd(&self, program: impl AsRef<std::ffi::OsStr>) -> Command {
        let mut c = Command::new(program);
        c.current_dir(self.work())
            .env("HOME", self.dir.join("home"))
            .env("ANTHROPIC_BASE_URL", format!("http://127.0.0.1:{}", self.port))
            .env("ANTHROPIC_API_KEY", "sk-offline")
            .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
            .env("DISABLE_TELEMETRY", "1")
            .env("DISABLE_AUTOUPDATER", "1")
            .env("DISABLE_ERROR_REPORTING", "1")
            .env("CODEX_HOME", self.dir.join("codex-home"))
            .env("MOCK_API_KEY", "sk-offline")
            .env("RUNWIRE_CLAUDE_BIN", agent_bin("claude"))
            .env("RUNWIRE_CODEX_BIN", agent_bin("codex"))
            .env("HARNESS_HOME", self.dir.join("harness"))
            // The agents' own temporary files (Claude Code's /tmp/claude-UID, its sockets) go
            // under the test's scratch, removed with it: a passing run leaves nothing in /tmp.
            .env("TMPDIR", self.tmp())
            // The Claude Code that claude-agent-acp starts takes its own variable for that.
            .env("CLAUDE_CODE_TMPDIR", self.tmp());
        // As root, claude refuses its permission-skipping modes (and
        // claude-agent-acp its session) unless it is told it is sandboxed.
        // SAFETY: geteuid(2) cannot fail.
        if unsafe { nix::libc::geteuid() } == 0 {
            c.env("IS_SANDBOX", "1");
        }
        c
    }

    /// Every request the model got, in order.
    fn requests(&self) -> Vec<Value> {
        std::fs::read_to_string(self.dir.join("requests.jsonl"))
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }

    /// Whether any request the model got carries `text` (anywhere in its
    /// body, as the agent encoded it).
    fn model_saw(&self, text: &str) -> bool {
        self.requests().iter().any(|r| r["body"].to_string().contains(text))
    }

    fn why(&self) -> String {
        format!("(the scenario's files: {})", self.dir.display())
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        let _ = self.model.kill();
        let _ = self.model.wait();
    }
}

/// Runs `cmd` in a process group of its own with `input` on stdin, within
/// `limit` (then the group is killed and the test fails).
fn run(cmd: &mut Command, input: &[u8], limit: Duration) -> Output {
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .unwrap_or_else(|e| panic!("start {cmd:?}: {e}"));
    let mut stdin = child.stdin.take().unwrap();
    let input = input.to_vec();
    std::thread::spawn(move || {
        let _ = stdin.write_all(&input);
    });
    let out = collect(child.stdout.take().unwrap());
    let err = collect(child.stderr.take().unwrap());
    let t = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if t.elapsed() > limit {
            kill_group(&child);
            let _ = child.wait();
            panic!("{cmd:?} still running after {limit:?}; stderr:\n{}", String::from_utf8_lossy(&take(&err)));
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    // The pipes close when the group is gone; a grandchild could hold them.
    std::thread::sleep(Duration::from_millis(50));
    Output { status, stdout: take(&out), stderr: take(&err) }
}

fn collect(mut r: impl Read + Send + 'static) -> Arc<Mutex<Vec<u8>>> {
    let buf = Arc::new(Mutex::new(Vec::new()));
    let b = buf.clone();
    std::thread::spawn(move || {
        let mut chunk = [0u8; 8192];
        while let Ok(n) = r.read(&mut chunk) {
            if n == 0 {
                break;
            }
            b.lock().unwrap().extend_from_slice(&chunk[..n]);
        }
    });
    buf
}

fn take(b: &Arc<Mutex<Vec<u8>>>) -> Vec<u8> {
    b.lock().unwrap().clone()
}

fn kill_group(child: &Child) {
    // SAFETY: kill(2) on the process group this test started.
    unsafe { nix::libc::kill(-(child.id() as i32), nix::libc::SIGKILL) };
}

fn runwire(bin: &str) -> Command {
    let path = match bin {
        "normalize-events" => env!("CARGO_BIN_EXE_normalize-events"),
        "agui-translate" => env!("CARGO_BIN_EXE_agui-translate"),
        "sse-encode" => env!("CARGO_BIN_EXE_sse-encode"),
        "runwire-session" => env!("CARGO_BIN_EXE_runwire-session"),
        "runwire-serve" => env!("CARGO_BIN_EXE_runwire-serve"),
        other => panic!("no binary {other}"),
    };
    Command::new(path)
}

/// `log | normalize-events AGENT | agui-translate | sse-encode`, checked by
/// the official AG-UI client (`conformance/check.mjs`); the AG-UI events.
fn official_pipeline(lab: &Lab, agent: &str, log: &[u8]) -> Vec<Value> {
    std::fs::write(lab.dir.join(format!("{agent}.log")), log).unwrap();
    let events = run(runwire("normalize-events").arg(agent), log, LIMIT);
    assert!(events.status.code().is_some_and(|c| c <= 1), "normalize-events: {events:?}");
    let agui = run(&mut runwire("agui-translate"), &events.stdout, LIMIT);
    assert!(agui.status.success(), "agui-translate: {}", String::from_utf8_lossy(&agui.stderr));
    let sse = run(&mut runwire("sse-encode"), &agui.stdout, LIMIT);
    assert!(sse.status.success(), "sse-encode: {}", String::from_utf8_lossy(&sse.stderr));
    let file = lab.dir.join(format!("{agent}.sse"));
    std::fs::write(&file, &sse.stdout).unwrap();
    support::need(&["agui-client"]);
    let check = run(Command::new("node").arg(Path::new(ROOT).join("conformance/check.mjs")).arg(&file), b"", LIMIT);
    assert!(
        check.status.success(),
        "the official client refused {}:\n{}{}",
        file.display(),
        String::from_utf8_lossy(&check.stdout),
        String::from_utf8_lossy(&check.stderr)
    );
    agui.stdout.split(|b| *b == b'\n').filter_map(|l| serde_json::from_slice(l).ok()).collect()
}

fn types(events: &[Value]) -> Vec<&str> {
    events.iter().filter_map(|e| e["type"].as_str()).collect()
}

fn lines(out: &[u8]) -> Vec<Value> {
    out.split(|b| *b == b'\n').filter_map(|l| serde_json::from_slice(l).ok()).collect()
}

// ---- scripts --------------------------------------------------------------

/// A Bash call that writes (batch mode denies it unless allowed; interactive
/// mode asks), then the final answer.
fn claude_bash_script() -> Value {
    json!({"steps": [
        {"tool": "Bash", "input": {"command": "touch made && echo made", "description": "make a file"}},
        {"text": "The file is made."}
    ]})
}

/// Codex's command tool asking to run outside its sandbox (so an
/// `on-request` policy asks), then the final answer.
fn codex_escalated_script() -> Value {
    json!({"steps": [
        {"tool": "exec_command", "input": {"cmd": "touch made && echo made",
            "sandbox_permissions": "require_escalated", "justification": "make a file"}},
        {"text": "The file is made."}
    ]})
}

// ---- batch ----------------------------------------------------------------

#[test]
#[cfg_attr(not(tool = "real-agents"), ignore = "the pinned agents are not installed: cd realagents && npm ci")]
#[cfg_attr(not(tool = "agui-client"), ignore = "needs node, npm (official AG-UI client): apt-get install nodejs npm")]
fn claude_batch_pipeline() {
    let lab = Lab::new("ra-claude-batch", claude_bash_script());
    let out = run(
        lab.cmd(agent_bin("claude")).args([
            "-p",
            "--output-format",
            "stream-json",
            "--verbose",
            "--include-partial-messages",
            "--allowedTools",
            "Bash",
            "--",
            "make a file",
        ]),
        b"",
        LIMIT,
    );
    assert!(out.status.success(), "claude: {}\n{}", String::from_utf8_lossy(&out.stderr), lab.why());
    assert!(lab.work().join("made").exists(), "the command did not run {}", lab.why());
    let ev = official_pipeline(&lab, "claude", &out.stdout);
    let t = types(&ev);
    assert!(t.contains(&"TOOL_CALL_START") && t.contains(&"TOOL_CALL_RESULT"), "{t:?}");
    assert_eq!(t.last(), Some(&"RUN_FINISHED"), "{t:?}");
    assert!(ev.iter().any(|e| e["delta"].as_str().is_some_and(|d| d.contains("made"))), "{ev:?}");
}

#[test]
#[cfg_attr(not(tool = "real-agents"), ignore = "the pinned agents are not installed: cd realagents && npm ci")]
#[cfg_attr(not(tool = "agui-client"), ignore = "needs node, npm (official AG-UI client): apt-get install nodejs npm")]
fn codex_batch_pipeline() {
    let lab = Lab::new(
        "ra-codex-batch",
        json!({"steps": [
            {"tool": "exec_command", "input": {"cmd": "echo made"}},
            {"text": "The command ran."}
        ]}),
    );
    let out = run(
        lab.cmd(agent_bin("codex")).args(["exec", "--json", "--skip-git-repo-check", "--", "run echo"]),
        b"",
        LIMIT,
    );
    assert!(out.status.success(), "codex: {}\n{}", String::from_utf8_lossy(&out.stderr), lab.why());
    let ev = official_pipeline(&lab, "codex", &out.stdout);
    let t = types(&ev);
    assert!(t.contains(&"TOOL_CALL_START") && t.contains(&"TOOL_CALL_RESULT"), "{t:?}");
    assert_eq!(t.last(), Some(&"RUN_FINISHED"), "{t:?}");
    assert!(lab.model_saw("made"), "the command's output never reached the model {}", lab.why());
    let errors: Vec<&Value> = ev.iter().filter(|e| e["name"] == "runwire.error").collect();
    assert!(errors.is_empty(), "runwire.error events: {errors:?}");
}

/// `node conformance/live.mjs` against the server on `port`: one run that
/// must pass the official client and end as `expect`.
fn live(port: u16, prompt: &str, expect: &str) {
    support::need(&["agui-client"]);
    let out = run(
        Command::new("node").arg(Path::new(ROOT).join("conformance/live.mjs")).args([
            &format!("http://127.0.0.1:{port}/agui"),
            "--expect",
            expect,
            "--prompt",
            prompt,
        ]),
        b"",
        LIMIT,
    );
    assert!(
        out.status.success(),
        "live.mjs:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `runwire-serve --agent acp --interactive -- AGENT` (the agent run
/// exactly as given), with codex-acp's `bwrap` on `PATH`.
fn serve_acp(lab: &Lab, agent: &str) -> support::Server {
    let mut cmd = lab.cmd(env!("CARGO_BIN_EXE_runwire-serve"));
    cmd.args(["--agent", "acp", "--interactive", "--listen", "127.0.0.1:0", "--"])
        .arg(agent_bin(agent))
        .stderr(std::fs::File::create(lab.dir.join("serve.stderr")).unwrap());
    with_bwrap(&mut cmd);
    support::Server::spawn(cmd)
}

fn serve(lab: &Lab, args: &[&str]) -> support::Server {
    let mut cmd = lab.cmd(env!("CARGO_BIN_EXE_runwire-serve"));
    cmd.args(args).stderr(std::fs::File::create(lab.dir.join("serve.stderr")).unwrap());
    support::Server::spawn(cmd)
}

#[test]
#[cfg_attr(not(tool = "real-agents"), ignore = "the pinned agents are not installed: cd realagents && npm ci")]
#[cfg_attr(not(tool = "agui-client"), ignore = "needs node, npm (official AG-UI client): apt-get install nodejs npm")]
fn claude_serve_batch() {
    let lab = Lab::new("ra-claude-serve", json!({"steps": [{"text": "Hello from the model."}]}));
    let s = serve(&lab, &["--agent", "claude"]);
    live(s.port, "say hello", "finished");
    assert!(lab.model_saw("say hello"), "{}", lab.why());
}

#[test]
#[cfg_attr(not(tool = "real-agents"), ignore = "the pinned agents are not installed: cd realagents && npm ci")]
#[cfg_attr(not(tool = "agui-client"), ignore = "needs node, npm (official AG-UI client): apt-get install nodejs npm")]
fn codex_serve_batch() {
    let lab = Lab::new("ra-codex-serve", json!({"steps": [{"text": "Hello from the model."}]}));
    let s = serve(&lab, &["--agent", "codex"]);
    live(s.port, "say hello", "finished");
    assert!(lab.model_saw("say hello"), "{}", lab.why());
}

// ---- interactive, through the server and the official client ---------------

/// The official client's interrupt round (`conformance/interrupts.mjs`):
/// ask with `prompt`, answer with `answer`.
fn interrupts(lab: &Lab, s: &support::Server, prompt: &str, answer: &str) {
    support::need(&["agui-client"]);
    let stderr = lab.dir.join("serve.stderr");
    support::official_interrupts(s.port, prompt, answer, &[], 60_000, || {
        format!("{}\n{}", std::fs::read_to_string(&stderr).unwrap_or_default(), lab.why())
    });
}

#[test]
#[cfg_attr(not(tool = "real-agents"), ignore = "the pinned agents are not installed: cd realagents && npm ci")]
#[cfg_attr(not(tool = "agui-client"), ignore = "needs node, npm (official AG-UI client): apt-get install nodejs npm")]
fn claude_interactive_approve() {
    let lab = Lab::new("ra-claude-approve", claude_bash_script());
    let s = serve(&lab, &["--agent", "claude", "--interactive"]);
    interrupts(&lab, &s, "make a file", "approve");
    assert!(lab.work().join("made").exists(), "approved, and the command did not run {}", lab.why());
}

#[test]
#[cfg_attr(not(tool = "real-agents"), ignore = "the pinned agents are not installed: cd realagents && npm ci")]
#[cfg_attr(not(tool = "agui-client"), ignore = "needs node, npm (official AG-UI client): apt-get install nodejs npm")]
fn claude_interactive_deny_with_message() {
    let lab = Lab::new("ra-claude-deny", claude_bash_script());
    let s = serve(&lab, &["--agent", "claude", "--interactive"]);
    interrupts(&lab, &s, "make a file", "deny");
    assert!(!lab.work().join("made").exists(), "denied, and the command ran {}", lab.why());
    // interrupts.mjs denies with this message: it must reach the model.
    assert!(lab.model_saw("denied by the conformance check"), "the deny message never reached the model {}", lab.why());
}

#[test]
#[cfg_attr(not(tool = "real-agents"), ignore = "the pinned agents are not installed: cd realagents && npm ci")]
#[cfg_attr(not(tool = "agui-client"), ignore = "needs node, npm (official AG-UI client): apt-get install nodejs npm")]
fn claude_interactive_question() {
    let lab = Lab::new(
        "ra-claude-question",
        json!({"steps": [
            {"tool": "AskUserQuestion", "input": {"questions": [{"question": "Tabs or spaces?", "header": "Indent",
                "multiSelect": false, "options": [{"label": "tabs", "description": "one tab"},
                {"label": "spaces", "description": "four spaces"}]}]}},
            {"text": "Spaces it is."}
        ]}),
    );
    let s = serve(&lab, &["--agent", "claude", "--interactive"]);
    interrupts(&lab, &s, "ask me about indentation", "question:spaces");
    let answered = lab.requests().iter().any(|r| {
        let b = r["body"].to_string();
        b.contains("tool_result") && b.contains("Tabs or spaces?") && b.contains("spaces")
    });
    assert!(answered, "the answer never reached the model {}", lab.why());
}

#[test]
#[cfg_attr(not(tool = "real-agents"), ignore = "the pinned agents are not installed: cd realagents && npm ci")]
#[cfg_attr(not(tool = "agui-client"), ignore = "needs node, npm (official AG-UI client): apt-get install nodejs npm")]
fn codex_interactive_approve() {
    let lab = Lab::new("ra-codex-approve", codex_escalated_script());
    let s = serve(&lab, &["--agent", "codex", "--interactive"]);
    interrupts(&lab, &s, "make a file", "approve");
    assert!(lab.work().join("made").exists(), "approved, and the command did not run {}", lab.why());
}

#[test]
#[cfg_attr(not(tool = "real-agents"), ignore = "the pinned agents are not installed: cd realagents && npm ci")]
#[cfg_attr(not(tool = "agui-client"), ignore = "needs node, npm (official AG-UI client): apt-get install nodejs npm")]
fn codex_interactive_deny() {
    let lab = Lab::new("ra-codex-deny", codex_escalated_script());
    let s = serve(&lab, &["--agent", "codex", "--interactive"]);
    interrupts(&lab, &s, "make a file", "deny");
    assert!(!lab.work().join("made").exists(), "denied, and the command ran {}", lab.why());
    assert_eq!(lab.requests().iter().filter(|r| r["step"] == 1).count(), 1, "{}", lab.why());
}

// ---- interactive sessions, driven line by line ------------------------------

/// A `runwire-session` whose input the test writes and whose output lines it
/// reads as they come.
struct Session {
    child: Child,
    stdin: Option<ChildStdin>,
    out: Arc<Mutex<Vec<Value>>>,
    err: Arc<Mutex<Vec<u8>>>,
    written: usize,
}

impl Session {
    fn start(mut cmd: Command) -> Session {
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .spawn()
            .unwrap_or_else(|e| panic!("start {cmd:?}: {e}"));
        let out = Arc::new(Mutex::new(Vec::new()));
        let o = out.clone();
        let stdout = child.stdout.take().unwrap();
        std::thread::spawn(move || {
            for l in BufReader::new(stdout).lines() {
                let Ok(l) = l else { break };
                o.lock().unwrap().push(serde_json::from_str(&l).unwrap_or(Value::String(l)));
            }
        });
        let err = collect(child.stderr.take().unwrap());
        Session { stdin: child.stdin.take(), child, out, err, written: 0 }
    }

    fn send(&mut self, line: Value) {
        let stdin = self.stdin.as_mut().expect("the input is open");
        writeln!(stdin, "{line}").unwrap();
        self.written += 1;
    }

    fn lines(&self) -> Vec<Value> {
        self.out.lock().unwrap().clone()
    }

    fn why(&self) -> String {
        let lines: Vec<String> = self.lines().iter().map(|l| l.to_string()).collect();
        format!("stdout:\n{}\nstderr:\n{}", lines.join("\n"), String::from_utf8_lossy(&take(&self.err)))
    }

    /// The first output line that `pred` holds for, within `limit`.
    fn wait_for(&self, what: &str, limit: Duration, pred: impl Fn(&Value) -> bool) -> Value {
        let t = Instant::now();
        loop {
            if let Some(l) = self.lines().into_iter().find(|l| pred(l)) {
                return l;
            }
            assert!(t.elapsed() < limit, "no {what} within {limit:?}\n{}", self.why());
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// `runwire.idle` once every line written has been applied.
    fn wait_idle(&self, limit: Duration) {
        let n = self.written;
        self.wait_for("runwire.idle", limit, |l| l["type"] == "runwire.idle" && l["inputs"] == n);
    }

    /// The exit code within `limit`, or `None` (the group is then killed).
    fn exit_within(&mut self, limit: Duration) -> Option<i32> {
        let t = Instant::now();
        loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                return Some(s.code().unwrap_or(-1));
            }
            if t.elapsed() > limit {
                kill_group(&self.child);
                let _ = self.child.wait();
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn count(&self, pred: impl Fn(&Value) -> bool) -> usize {
        self.lines().iter().filter(|l| pred(l)).count()
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        kill_group(&self.child);
        let _ = self.child.wait();
    }
}

fn session(lab: &Lab, args: &[&str]) -> Session {
    let mut cmd = lab.cmd(env!("CARGO_BIN_EXE_runwire-session"));
    cmd.args(args);
    Session::start(cmd)
}

fn is_request(l: &Value) -> bool {
    l["type"] == "runwire.request"
}

fn is_result(l: &Value) -> bool {
    l["type"] == "result"
}

#[test]
#[cfg_attr(not(tool = "real-agents"), ignore = "the pinned agents are not installed: cd realagents && npm ci")]
fn claude_session_approve_for_session() {
    // The same command twice: allowed for the session, the second call is
    // not asked again.
    let call = json!({"tool": "Bash", "input": {"command": "touch made && echo made", "description": "make a file"}});
    let lab = Lab::new("ra-claude-scope", json!({"steps": [call, call, {"text": "Made it twice."}]}));
    let mut s = session(&lab, &["claude"]);
    s.send(json!({"type": "message", "text": "make a file twice"}));
    let r = s.wait_for("a request", LIMIT, is_request);
    s.send(json!({"type": "answer", "id": r["id"], "decision": "allow", "scope": "session"}));
    s.wait_idle(LIMIT);
    assert_eq!(s.count(is_request), 1, "asked again after allow for the session\n{}", s.why());
    assert_eq!(lab.requests().iter().filter(|r| r["step"] == 2).count(), 1, "{}", lab.why());
    s.send(json!({"type": "end"}));
    assert_eq!(s.exit_within(Duration::from_secs(20)), Some(0), "{}", s.why());
}

#[test]
#[cfg_attr(not(tool = "real-agents"), ignore = "the pinned agents are not installed: cd realagents && npm ci")]
fn claude_session_kill_then_resume() {
    kill_then_resume("claude", "the resumed session", |s| {
        let init = s.wait_for("system/init", LIMIT, |l| l["type"] == "system" && l["subtype"] == "init");
        init["session_id"].as_str().expect("a session id").to_string()
    });
}

/// The agent remembers a word, its process group is killed, and a new
/// process resumed from `id_of`'s session carries the first turn.
fn kill_then_resume(agent: &str, what: &str, id_of: impl Fn(&mut Session) -> String) {
    let lab = Lab::new(
        &format!("ra-{agent}-resume"),
        json!({"steps": [{"text": "First answer."}, {"text": "Second answer."}]}),
    );
    let mut s = session(&lab, &[agent]);
    s.send(json!({"type": "message", "text": "remember the word pelican"}));
    s.wait_idle(LIMIT);
    let id = id_of(&mut s);
    kill_group(&s.child);
    drop(s);
    let mut s = session(&lab, &[agent, "--resume", &id]);
    s.send(json!({"type": "message", "text": "what was the word?"}));
    s.wait_idle(LIMIT);
    let last = lab.requests().into_iter().rfind(|r| r["step"] == 1);
    let body = last.map(|r| r["body"].to_string()).unwrap_or_default();
    assert!(
        body.contains("pelican") && body.contains("what was the word?"),
        "{what} did not carry the first turn {}",
        lab.why()
    );
    s.send(json!({"type": "end"}));
    assert_eq!(s.exit_within(Duration::from_secs(20)), Some(0), "{}", s.why());
}

#[test]
#[cfg_attr(not(tool = "real-agents"), ignore = "the pinned agents are not installed: cd realagents && npm ci")]
fn claude_session_bare_name_on_path() {
    let lab = Lab::new("ra-claude-path", json!({"steps": [{"text": "Hello."}]}));
    let bin = Path::new(ROOT).join("realagents/node_modules/.bin");
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
    let mut cmd = lab.cmd(env!("CARGO_BIN_EXE_runwire-session"));
    cmd.env_remove("RUNWIRE_CLAUDE_BIN").env("PATH", path).args(["claude", "--prompt", "say hello"]);
    let out = run(&mut cmd, b"", LIMIT);
    assert!(out.status.success(), "runwire-session claude: {}", String::from_utf8_lossy(&out.stderr));
    assert!(lines(&out.stdout).iter().any(is_result), "{}", String::from_utf8_lossy(&out.stdout));
}

#[test]
#[cfg_attr(not(tool = "real-agents"), ignore = "the pinned agents are not installed: cd realagents && npm ci")]
fn claude_session_steer_mid_answer() {
    // Claude runs a message written while the final answer streams as a new
    // turn after `result`; the steer's answer streams slowly, so a session
    // that says idle after the first `result` is caught every time.
    let lab = Lab::new(
        "ra-claude-steer",
        json!({"steps": [
            {"text": "A long first answer that streams slowly, piece by piece, for a while.", "chunks": 12, "delay_ms": 150},
            {"text": "The steer's answer, streamed slowly too.", "chunks": 8, "delay_ms": 150}
        ]}),
    );
    let mut s = session(&lab, &["claude"]);
    s.send(json!({"type": "message", "text": "tell me something long"}));
    s.wait_for("the answer streaming", LIMIT, |l| l["type"] == "stream_event");
    s.send(json!({"type": "message", "text": "also mention otters"}));
    s.wait_idle(LIMIT);
    let steer_done = |l: &Value| is_result(l) && l["result"] == "The steer's answer, streamed slowly too.";
    let done_at_idle = s.count(steer_done) == 1;
    // A client that sees everything applied ends the session.
    s.send(json!({"type": "end"}));
    let code = s.exit_within(Duration::from_secs(20));
    assert!(lab.model_saw("also mention otters"), "the steer never reached the model {}", lab.why());
    assert!(done_at_idle, "runwire.idle said every input was applied before the steer's turn ended\n{}", s.why());
    assert_eq!(code, Some(0), "{}", s.why());
}

#[test]
#[cfg_attr(not(tool = "real-agents"), ignore = "the pinned agents are not installed: cd realagents && npm ci")]
fn claude_session_stop_with_a_queued_message() {
    let lab = Lab::new(
        "ra-claude-stop",
        json!({"steps": [
            {"text": "A long first answer that streams slowly, piece by piece, for a while.", "chunks": 20, "delay_ms": 200},
            {"text": "Whatever comes next."}
        ]}),
    );
    let mut s = session(&lab, &["claude"]);
    s.send(json!({"type": "message", "text": "tell me something long"}));
    s.wait_for("the answer streaming", LIMIT, |l| l["type"] == "stream_event");
    s.send(json!({"type": "message", "text": "second message"}));
    s.send(json!({"type": "interrupt"}));
    s.wait_idle(LIMIT);
    std::thread::sleep(Duration::from_secs(2));
    s.send(json!({"type": "end"}));
    let _ = s.exit_within(Duration::from_secs(20));
    // Stop stops everything sent: the queued message must not run as a turn.
    assert!(!lab.model_saw("second message"), "Stop did not cancel the queued message {}", lab.why());
}

#[test]
#[cfg_attr(not(tool = "real-agents"), ignore = "the pinned agents are not installed: cd realagents && npm ci")]
fn claude_session_manual_mode() {
    let lab = Lab::new("ra-claude-manual", json!({"steps": [{"text": "Hello."}]}));
    let out = run(
        lab.cmd(env!("CARGO_BIN_EXE_runwire-session")).args([
            "claude",
            "--permission-mode",
            "manual",
            "--prompt",
            "say hello",
        ]),
        b"",
        LIMIT,
    );
    assert!(out.status.success(), "--permission-mode manual: {}", String::from_utf8_lossy(&out.stderr));
}

#[test]
#[cfg_attr(not(tool = "real-agents"), ignore = "the pinned agents are not installed: cd realagents && npm ci")]
fn codex_session_approve_then_end() {
    let lab = Lab::new("ra-codex-session", codex_escalated_script());
    let mut s = session(&lab, &["codex"]);
    s.send(json!({"type": "message", "text": "make a file"}));
    let r = s.wait_for("a request", LIMIT, is_request);
    s.send(json!({"type": "answer", "id": r["id"], "decision": "allow"}));
    s.wait_idle(LIMIT);
    assert!(lab.work().join("made").exists(), "approved, and the command did not run {}", lab.why());
    s.send(json!({"type": "end"}));
    assert_eq!(s.exit_within(Duration::from_secs(20)), Some(0), "{}", s.why());
}

#[test]
#[cfg_attr(not(tool = "real-agents"), ignore = "the pinned agents are not installed: cd realagents && npm ci")]
#[cfg_attr(not(tool = "agui-client"), ignore = "needs node, npm (official AG-UI client): apt-get install nodejs npm")]
fn codex_session_stream_has_no_runwire_error() {
    let lab = Lab::new("ra-codex-drift", json!({"steps": [{"text": "Hello."}]}));
    let mut s = session(&lab, &["codex"]);
    s.send(json!({"type": "message", "text": "say hello"}));
    s.wait_idle(LIMIT);
    s.send(json!({"type": "end"}));
    assert_eq!(s.exit_within(Duration::from_secs(20)), Some(0), "{}", s.why());
    let log: String = s.lines().iter().map(|l| format!("{l}\n")).collect();
    let ev = official_pipeline(&lab, "codex", log.as_bytes());
    let errors: Vec<&Value> = ev.iter().filter(|e| e["name"] == "runwire.error").collect();
    assert!(errors.is_empty(), "runwire.error events: {errors:?}");
}

#[test]
#[cfg_attr(not(tool = "real-agents"), ignore = "the pinned agents are not installed: cd realagents && npm ci")]
fn codex_session_resume_of_a_missing_thread_ends() {
    let lab = Lab::new("ra-codex-noresume", json!({"steps": [{"text": "Hello."}]}));
    let mut s = session(&lab, &["codex", "--resume", "019a0000-0000-7000-8000-000000000000", "--prompt", "say hello"]);
    let code = s.exit_within(LIMIT);
    assert!(matches!(code, Some(c) if c != 0), "the session did not end with an error\n{}", s.why());
    let status =
        s.lines().into_iter().find(|l| l["type"] == "runwire.status" && l.get("ok").is_some()).unwrap_or_default();
    assert!(status["detail"].as_str().is_some_and(|d| d.contains("refused thread/resume")), "{}", s.why());
}

// ---- ACP agents -------------------------------------------------------------

#[test]
#[cfg_attr(not(tool = "real-agents"), ignore = "the pinned agents are not installed: cd realagents && npm ci")]
fn claude_acp_session_ends() {
    let lab = Lab::new("ra-claude-acp", json!({"steps": [{"text": "Hello over ACP."}]}));
    let acp = agent_bin("claude-agent-acp");
    let mut s = session(&lab, &["acp", "--", acp.to_str().unwrap()]);
    s.send(json!({"type": "message", "text": "say hello"}));
    s.wait_idle(LIMIT);
    assert!(lab.model_saw("say hello"), "{}", lab.why());
    s.send(json!({"type": "end"}));
    assert!(s.exit_within(Duration::from_secs(20)).is_some(), "end did not end the ACP session\n{}", s.why());
}

#[test]
#[cfg_attr(not(tool = "real-agents"), ignore = "the pinned agents are not installed: cd realagents && npm ci")]
fn codex_acp_session_ends() {
    let lab = Lab::new("ra-codex-acp", json!({"steps": [{"text": "Hello over ACP."}]}));
    let acp = agent_bin("codex-acp");
    let mut s = session(&lab, &["acp", "--", acp.to_str().unwrap()]);
    s.send(json!({"type": "message", "text": "say hello"}));
    s.wait_idle(LIMIT);
    assert!(lab.model_saw("say hello"), "{}", lab.why());
    s.send(json!({"type": "end"}));
    assert!(s.exit_within(Duration::from_secs(20)).is_some(), "end did not end the ACP session\n{}", s.why());
}

/// The `bwrap` inside `@openai/codex` on `PATH`: codex-acp bundles none, and
/// its sandboxed commands panic without one.
fn with_bwrap(cmd: &mut Command) {
    let dir = Path::new(ROOT)
        .join("realagents/node_modules/@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl/codex-resources");
    cmd.env("PATH", format!("{}:{}", dir.display(), std::env::var("PATH").unwrap_or_default()));
}

#[test]
#[cfg_attr(not(tool = "real-agents"), ignore = "the pinned agents are not installed: cd realagents && npm ci")]
fn claude_acp_session_approve() {
    let lab = Lab::new("ra-claude-acp-approve", claude_bash_script());
    let acp = agent_bin("claude-agent-acp");
    let mut s = session(&lab, &["acp", "--", acp.to_str().unwrap()]);
    s.send(json!({"type": "message", "text": "make a file"}));
    let r = s.wait_for("a request", LIMIT, is_request);
    s.send(json!({"type": "answer", "id": r["id"], "decision": "allow"}));
    s.wait_idle(LIMIT);
    assert!(lab.work().join("made").exists(), "approved, and the command did not run {}", lab.why());
    assert!(
        lab.model_saw("The file is made.") || s.lines().iter().any(|l| l.to_string().contains("The file is made."))
    );
}

#[test]
#[cfg_attr(not(tool = "real-agents"), ignore = "the pinned agents are not installed: cd realagents && npm ci")]
fn codex_acp_session_approve() {
    let lab = Lab::new("ra-codex-acp-approve", codex_escalated_script());
    let acp = agent_bin("codex-acp");
    let mut cmd = lab.cmd(env!("CARGO_BIN_EXE_runwire-session"));
    cmd.args(["acp", "--", acp.to_str().unwrap()]);
    with_bwrap(&mut cmd);
    let mut s = Session::start(cmd);
    s.send(json!({"type": "message", "text": "make a file"}));
    let r = s.wait_for("a request", LIMIT, is_request);
    s.send(json!({"type": "answer", "id": r["id"], "decision": "allow"}));
    s.wait_idle(LIMIT);
    assert!(lab.work().join("made").exists(), "approved, and the command did not run {}", lab.why());
}

#[test]
#[cfg_attr(not(tool = "real-agents"), ignore = "the pinned agents are not installed: cd realagents && npm ci")]
#[cfg_attr(not(tool = "agui-client"), ignore = "needs node, npm (official AG-UI client): apt-get install nodejs npm")]
fn claude_acp_serve_approve() {
    let lab = Lab::new("ra-claude-acp-serve", claude_bash_script());
    let s = serve_acp(&lab, "claude-agent-acp");
    interrupts(&lab, &s, "make a file", "approve");
    assert!(lab.work().join("made").exists(), "approved, and the command did not run {}", lab.why());
}

#[test]
#[cfg_attr(not(tool = "real-agents"), ignore = "the pinned agents are not installed: cd realagents && npm ci")]
#[cfg_attr(not(tool = "agui-client"), ignore = "needs node, npm (official AG-UI client): apt-get install nodejs npm")]
fn claude_acp_serve_deny() {
    let lab = Lab::new("ra-claude-acp-deny", claude_bash_script());
    let s = serve_acp(&lab, "claude-agent-acp");
    interrupts(&lab, &s, "make a file", "deny");
    assert!(!lab.work().join("made").exists(), "denied, and the command ran {}", lab.why());
}

#[test]
#[cfg_attr(not(tool = "real-agents"), ignore = "the pinned agents are not installed: cd realagents && npm ci")]
#[cfg_attr(not(tool = "agui-client"), ignore = "needs node, npm (official AG-UI client): apt-get install nodejs npm")]
fn codex_acp_serve_deny() {
    let lab = Lab::new("ra-codex-acp-deny", codex_escalated_script());
    let s = serve_acp(&lab, "codex-acp");
    interrupts(&lab, &s, "make a file", "deny");
    assert!(!lab.work().join("made").exists(), "denied, and the command ran {}", lab.why());
}

#[test]
#[cfg_attr(not(tool = "real-agents"), ignore = "the pinned agents are not installed: cd realagents && npm ci")]
fn codex_session_steer_mid_answer() {
    let lab = Lab::new(
        "ra-codex-steer",
        json!({"steps": [
            {"text": "A long first answer that streams slowly, piece by piece, for a while.", "chunks": 12, "delay_ms": 150},
            {"text": "The steer's answer, streamed slowly too.", "chunks": 8, "delay_ms": 150}
        ]}),
    );
    let mut s = session(&lab, &["codex"]);
    s.send(json!({"type": "message", "text": "tell me something long"}));
    s.wait_for("the answer streaming", LIMIT, |l| l["method"] == "item/agentMessage/delta");
    s.send(json!({"type": "message", "text": "also mention otters"}));
    s.wait_idle(LIMIT);
    let steer_done = |l: &Value| {
        l["method"] == "item/completed" && l["params"]["item"]["text"] == "The steer's answer, streamed slowly too."
    };
    let done_at_idle = s.count(steer_done) == 1;
    s.send(json!({"type": "end"}));
    let code = s.exit_within(Duration::from_secs(20));
    assert!(lab.model_saw("also mention otters"), "the steer never reached the model {}", lab.why());
    assert!(done_at_idle, "runwire.idle said every input was applied before the steer's answer\n{}", s.why());
    assert_eq!(code, Some(0), "{}", s.why());
}

#[test]
#[cfg_attr(not(tool = "real-agents"), ignore = "the pinned agents are not installed: cd realagents && npm ci")]
fn codex_session_stop_with_a_queued_message() {
    let lab = Lab::new(
        "ra-codex-stop",
        json!({"steps": [
            {"text": "A long first answer that streams slowly, piece by piece, for a while.", "chunks": 20, "delay_ms": 200},
            {"text": "Whatever comes next."}
        ]}),
    );
    let mut s = session(&lab, &["codex"]);
    s.send(json!({"type": "message", "text": "tell me something long"}));
    s.wait_for("the answer streaming", LIMIT, |l| l["method"] == "item/agentMessage/delta");
    s.send(json!({"type": "message", "text": "second message"}));
    s.send(json!({"type": "interrupt"}));
    s.wait_idle(LIMIT);
    std::thread::sleep(Duration::from_secs(2));
    s.send(json!({"type": "end"}));
    assert_eq!(s.exit_within(Duration::from_secs(20)), Some(0), "{}", s.why());
    assert!(!lab.model_saw("second message"), "Stop did not cancel the queued message {}", lab.why());
}

#[test]
#[cfg_attr(not(tool = "real-agents"), ignore = "the pinned agents are not installed: cd realagents && npm ci")]
fn codex_session_kill_then_resume() {
    kill_then_resume("codex", "the resumed thread", |s| {
        let started = s.wait_for("thread/started", LIMIT, |l| l["method"] == "thread/started");
        started["params"]["thread"]["id"].as_str().expect("a thread id").to_string()
    });
}

#[test]
#[cfg_attr(not(tool = "real-agents"), ignore = "the pinned agents are not installed: cd realagents && npm ci")]
#[cfg_attr(not(tool = "agui-client"), ignore = "needs node, npm (official AG-UI client): apt-get install nodejs npm")]
fn codex_acp_session_deny() {
    let lab = Lab::new("ra-codex-acp-deny-s", codex_escalated_script());
    let acp = agent_bin("codex-acp");
    let mut cmd = lab.cmd(env!("CARGO_BIN_EXE_runwire-session"));
    cmd.args(["acp", "--", acp.to_str().unwrap()]);
    with_bwrap(&mut cmd);
    let mut s = Session::start(cmd);
    s.send(json!({"type": "message", "text": "make a file"}));
    let r = s.wait_for("a request", LIMIT, is_request);
    s.send(json!({"type": "answer", "id": r["id"], "decision": "deny", "message": "not now"}));
    s.wait_idle(LIMIT);
    assert!(!lab.work().join("made").exists(), "denied, and the command ran {}", lab.why());
    let log: String = s.lines().iter().map(|l| format!("{l}\n")).collect();
    let ev = official_pipeline(&lab, "cursor", log.as_bytes());
    assert_eq!(types(&ev).last(), Some(&"RUN_FINISHED"), "a denial ended the run as an error: {ev:?}");
}

#[test]
#[cfg_attr(not(tool = "real-agents"), ignore = "the pinned agents are not installed: cd realagents && npm ci")]
fn claude_acp_session_steer() {
    let lab = Lab::new(
        "ra-claude-acp-steer",
        json!({"steps": [
            {"text": "A long first answer that streams slowly, piece by piece, for a while.", "chunks": 12, "delay_ms": 150},
            {"text": "The steer's answer."}
        ]}),
    );
    let acp = agent_bin("claude-agent-acp");
    let mut s = session(&lab, &["acp", "--", acp.to_str().unwrap()]);
    s.send(json!({"type": "message", "text": "tell me something long"}));
    s.wait_for("the answer streaming", LIMIT, |l| l["params"]["update"]["sessionUpdate"] == "agent_message_chunk");
    s.send(json!({"type": "message", "text": "also mention otters"}));
    s.wait_idle(LIMIT);
    assert!(lab.model_saw("also mention otters"), "the steer never reached the model {}", lab.why());
    let streamed = s.lines().iter().any(|l| l["params"]["update"]["content"]["text"] == "The steer's answer.");
    assert!(streamed, "the steer's reply never streamed\n{}", s.why());
}

#[test]
#[cfg_attr(not(tool = "real-agents"), ignore = "the pinned agents are not installed: cd realagents && npm ci")]
fn codex_session_on_failure_policy_ends() {
    let lab = Lab::new("ra-codex-onfailure", json!({"steps": [{"text": "Hello."}]}));
    let mut s = session(&lab, &["codex", "--approval-policy", "on-failure", "--prompt", "say hello"]);
    let code = s.exit_within(Duration::from_secs(20));
    assert!(code.is_some(), "the session neither ran nor ended\n{}", s.why());
}

#[test]
#[cfg_attr(not(tool = "real-agents"), ignore = "the pinned agents are not installed: cd realagents && npm ci")]
fn claude_acp_session_load_of_a_missing_session_ends() {
    let lab = Lab::new("ra-claude-acp-noload", json!({"steps": [{"text": "Hello."}]}));
    let acp = agent_bin("claude-agent-acp");
    let mut s = session(
        &lab,
        &[
            "acp",
            "--resume",
            "00000000-0000-4000-8000-000000000000",
            "--prompt",
            "say hello",
            "--",
            acp.to_str().unwrap(),
        ],
    );
    // The agent's own start takes a while: the point is that the session ends, with the reason.
    let code = s.exit_within(LIMIT);
    assert!(matches!(code, Some(c) if c != 0), "the session did not end with an error\n{}", s.why());
    let status =
        s.lines().into_iter().find(|l| l["type"] == "runwire.status" && l.get("ok").is_some()).unwrap_or_default();
    assert!(status["detail"].as_str().is_some_and(|d| d.contains("refused session/load")), "{}", s.why());
}

#[test]
#[cfg_attr(not(tool = "real-agents"), ignore = "the pinned agents are not installed: cd realagents && npm ci")]
fn claude_supervised_interactive_approve() {
    let lab = Lab::new("ra-claude-sup", claude_bash_script());
    let plan = json!({"v": "plan/v1", "tasks": [{"id": "a", "adapter": "claude", "prompt": "make a file"}]});
    std::fs::write(lab.work().join("p.plan.json"), plan.to_string()).unwrap();
    let mut cmd = lab.cmd(env!("CARGO_BIN_EXE_runwire-supervise"));
    cmd.env("RUNWIRE_SESSION_BIN", env!("CARGO_BIN_EXE_runwire-session"))
        .args(["--plan", "p.plan.json", "--kill-grace", "2", "--interactive", "--wrapper-dir"])
        .arg(Path::new(ROOT).join("wrappers"));
    let mut sup = support::Supervised::spawn(lab.work(), cmd);
    let t = Instant::now();
    let id = loop {
        let req = lines(sup.log().as_bytes()).into_iter().find(is_request);
        if let Some(r) = req {
            // The supervisor takes runwire's id for the request, never the agent's.
            break r["interrupt_id"].clone();
        }
        assert!(t.elapsed() < LIMIT, "no request in the task log:\n{}\n{}", sup.log(), sup.stderr());
        std::thread::sleep(Duration::from_millis(50));
    };
    // The supervisor reads the request from the task log a moment after it is written.
    let r = loop {
        let answer = json!({"verb": "answer", "task": "a", "actor": "test", "answer": {"id": id, "decision": "allow"}});
        let r = sup.call(answer, LIMIT);
        let not_yet = r["detail"].as_str().is_some_and(|d| d.contains("is pending"));
        if r["ok"] == true || !not_yet || t.elapsed() > LIMIT {
            break r;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(r["ok"], true, "{r}");
    let code = sup.wait(LIMIT, |s| format!("log:\n{}\nstderr:\n{}", s.log(), s.stderr()));
    assert_eq!(code, 0, "{}", sup.stderr());
    assert!(lab.dir.join("work/made").exists(), "approved, and the command did not run");
}

#[test]
#[cfg_attr(not(tool = "real-agents"), ignore = "the pinned agents are not installed: cd realagents && npm ci")]
fn claude_session_stop() {
    let lab = Lab::new(
        "ra-claude-stop-plain",
        json!({"steps": [
            {"text": "A long first answer that streams slowly, piece by piece, for a while.", "chunks": 20, "delay_ms": 200},
            {"text": "The next answer."}
        ]}),
    );
    let mut s = session(&lab, &["claude"]);
    s.send(json!({"type": "message", "text": "tell me something long"}));
    s.wait_for("the answer streaming", LIMIT, |l| l["type"] == "stream_event");
    let t = Instant::now();
    s.send(json!({"type": "interrupt"}));
    s.wait_idle(LIMIT);
    assert!(t.elapsed() < Duration::from_secs(3), "the turn was not stopped: {:?}", t.elapsed());
    s.send(json!({"type": "message", "text": "go on"}));
    s.wait_idle(LIMIT);
    let last = s.lines().into_iter().rfind(is_result).unwrap_or_default();
    assert_eq!(last["result"], "The next answer.", "{}", s.why());
    s.send(json!({"type": "end"}));
    assert_eq!(s.exit_within(Duration::from_secs(20)), Some(0), "{}", s.why());
}

#[test]
#[cfg_attr(not(tool = "real-agents"), ignore = "the pinned agents are not installed: cd realagents && npm ci")]
#[cfg_attr(not(tool = "agui-client"), ignore = "needs node, npm (official AG-UI client): apt-get install nodejs npm")]
fn codex_interactive_question() {
    let lab = Lab::new(
        "ra-codex-question",
        json!({"steps": [
            {"tool": "AskUserQuestion", "input": {"questions": [{"question": "Tabs or spaces?", "header": "Indent",
                "multiSelect": false, "options": [{"label": "tabs", "description": "one tab"},
                {"label": "spaces", "description": "four spaces"}]}]}},
            {"text": "Spaces it is."}
        ]}),
    );
    let s = serve(&lab, &["--agent", "codex", "--interactive"]);
    interrupts(&lab, &s, "ask me about indentation", "question:spaces");
    let answered = lab.requests().iter().any(|r| {
        let b = r["body"].to_string();
        b.contains("function_call_output") && b.contains("spaces")
    });
    assert!(answered, "the answer never reached the model {}", lab.why());
}

#[test]
#[cfg_attr(not(tool = "real-agents"), ignore = "the pinned agents are not installed: cd realagents && npm ci")]
fn codex_session_scope_refused_when_not_offered() {
    // Codex 0.169.0 offers no acceptForSession for an escalated command
    // (only accept, acceptWithExecpolicyAmendment, cancel): runwire refuses
    // allow-for-the-session and the request stays open for another answer.
    let call = json!({"tool": "exec_command", "input": {"cmd": "touch made && echo made",
        "sandbox_permissions": "require_escalated", "justification": "make a file"}});
    let lab = Lab::new("ra-codex-scope", json!({"steps": [call, call, {"text": "Made it twice."}]}));
    let mut s = session(&lab, &["codex"]);
    s.send(json!({"type": "message", "text": "make a file twice"}));
    let r = s.wait_for("a request", LIMIT, is_request);
    s.send(json!({"type": "answer", "id": r["id"], "decision": "allow", "scope": "session"}));
    let t = Instant::now();
    while !String::from_utf8_lossy(&take(&s.err)).contains("did not offer to allow this for the session") {
        assert!(t.elapsed() < LIMIT, "scope session was not refused\n{}", s.why());
        std::thread::sleep(Duration::from_millis(20));
    }
    s.send(json!({"type": "answer", "id": r["id"], "decision": "allow"}));
    let second = s.wait_for("the second request", LIMIT, |l| is_request(l) && l["id"] != r["id"]);
    s.send(json!({"type": "answer", "id": second["id"], "decision": "allow"}));
    s.wait_idle(LIMIT);
    assert!(lab.work().join("made").exists(), "approved, and the command did not run {}", lab.why());
    s.send(json!({"type": "end"}));
    assert_eq!(s.exit_within(Duration::from_secs(20)), Some(0), "{}", s.why());
}

/// One HTTP/1.0 `POST` of `body` to the server on `port` (the test's thread
/// is in the lab's namespace): the status and the whole body.
fn post(port: u16, path: &str, body: &Value) -> (u16, String) {
    let mut c = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    c.set_read_timeout(Some(LIMIT)).unwrap();
    let body = body.to_string();
    write!(
        c,
        "POST {path} HTTP/1.0\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut raw = String::new();
    c.read_to_string(&mut raw).unwrap();
    let (head, body) = raw.split_once("\r\n\r\n").unwrap_or((&raw, ""));
    (head.split(' ').nth(1).and_then(|c| c.parse().ok()).unwrap_or(0), body.to_string())
}

#[test]
#[cfg_attr(not(tool = "real-agents"), ignore = "the pinned agents are not installed: cd realagents && npm ci")]
fn claude_serve_steer_mid_answer() {
    let lab = Lab::new(
        "ra-claude-serve-steer",
        json!({"steps": [
            {"text": "A long first answer that streams slowly, piece by piece, for a while.", "chunks": 12, "delay_ms": 150},
            {"text": "The steer's answer, streamed slowly too.", "chunks": 8, "delay_ms": 150}
        ]}),
    );
    let s = serve(&lab, &["--agent", "claude", "--interactive"]);
    let port = s.port;
    let input = json!({"threadId": "t1", "runId": "r1",
        "messages": [{"id": "m1", "role": "user", "content": "tell me something long"}]});
    // Spawned from the test's thread, so in the lab's namespace too.
    let stream = std::thread::spawn(move || post(port, "/agui", &input));
    let t = Instant::now();
    while !lab.requests().iter().any(|r| r["step"] == 0) {
        assert!(t.elapsed() < LIMIT, "the model was never asked {}", lab.why());
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(400));
    let run = {
        let mut c = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        write!(c, "GET /runs HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").unwrap();
        let mut raw = String::new();
        c.read_to_string(&mut raw).unwrap();
        let body: Value = serde_json::from_str(raw.split_once("\r\n\r\n").map_or("", |(_, b)| b)).unwrap_or_default();
        body["runs"][0]["runId"].as_str().unwrap_or_else(|| panic!("no recorded run: {raw}")).to_string()
    };
    let steer = format!("/runs/{run}/tasks/agent/steer");
    let (code, reply) = post(port, &steer, &json!({"msg": "also mention otters"}));
    assert_eq!(code, 200, "{reply}");
    let (_, sse) = stream.join().unwrap();
    let events: Vec<Value> =
        sse.lines().filter_map(|l| l.strip_prefix("data: ")).filter_map(|d| serde_json::from_str(d).ok()).collect();
    let text: String = events.iter().filter_map(|e| e["delta"].as_str()).collect();
    assert_eq!(types(&events).last(), Some(&"RUN_FINISHED"), "{sse}");
    // The steer's turn may come after the run: wait for it before judging.
    let t = Instant::now();
    while !lab.model_saw("also mention otters") {
        assert!(t.elapsed() < Duration::from_secs(15), "the steer never reached the model {}", lab.why());
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        text.contains("The steer's answer, streamed slowly too."),
        "the run streaming the thread when the steer was accepted ended before the steer's turn (steer reply: {reply}):\n{text}"
    );
}

#[test]
#[cfg_attr(not(tool = "real-agents"), ignore = "the pinned agents are not installed: cd realagents && npm ci")]
fn codex_session_resume_draws_no_deprecation_notice() {
    let lab = Lab::new("ra-codex-deprecation", json!({"steps": [{"text": "First answer."}, {"text": "Second."}]}));
    let mut s = session(&lab, &["codex"]);
    s.send(json!({"type": "message", "text": "say hello"}));
    s.wait_idle(LIMIT);
    let started = s.wait_for("thread/started", LIMIT, |l| l["method"] == "thread/started");
    let id = started["params"]["thread"]["id"].as_str().expect("a thread id").to_string();
    s.send(json!({"type": "end"}));
    assert_eq!(s.exit_within(Duration::from_secs(20)), Some(0), "{}", s.why());
    let mut s = session(&lab, &["codex", "--resume", &id]);
    s.send(json!({"type": "message", "text": "again"}));
    s.wait_idle(LIMIT);
    let notices: Vec<Value> = s.lines().into_iter().filter(|l| l["method"] == "deprecationNotice").collect();
    assert!(notices.is_empty(), "{notices:?}");
}

#[test]
#[cfg_attr(not(tool = "real-agents"), ignore = "the pinned agents are not installed: cd realagents && npm ci")]
fn claude_acp_session_stop() {
    let lab = Lab::new(
        "ra-claude-acp-stop",
        json!({"steps": [
            {"text": "A long first answer that streams slowly, piece by piece, for a while.", "chunks": 20, "delay_ms": 200}
        ]}),
    );
    let acp = agent_bin("claude-agent-acp");
    let mut s = session(&lab, &["acp", "--", acp.to_str().unwrap()]);
    s.send(json!({"type": "message", "text": "tell me something long"}));
    s.wait_for("the answer streaming", LIMIT, |l| l["params"]["update"]["sessionUpdate"] == "agent_message_chunk");
    let t = Instant::now();
    s.send(json!({"type": "interrupt"}));
    s.wait_idle(LIMIT);
    assert!(t.elapsed() < Duration::from_secs(3), "the turn was not stopped: {:?}", t.elapsed());
    let cancelled = s.lines().iter().any(|l| l["result"]["stopReason"] == "cancelled");
    assert!(cancelled, "the prompt did not end cancelled\n{}", s.why());
}

#[test]
#[cfg_attr(not(tool = "real-agents"), ignore = "the pinned agents are not installed: cd realagents && npm ci")]
fn claude_acp_session_kill_then_resume() {
    let lab =
        Lab::new("ra-claude-acp-resume", json!({"steps": [{"text": "First answer."}, {"text": "Second answer."}]}));
    let acp = agent_bin("claude-agent-acp");
    let mut s = session(&lab, &["acp", "--", acp.to_str().unwrap()]);
    s.send(json!({"type": "message", "text": "remember the word pelican"}));
    s.wait_idle(LIMIT);
    let new = s.wait_for("the session id", LIMIT, |l| l["result"]["sessionId"].is_string());
    let id = new["result"]["sessionId"].as_str().unwrap().to_string();
    kill_group(&s.child);
    drop(s);
    let mut s = session(&lab, &["acp", "--resume", &id, "--", acp.to_str().unwrap()]);
    s.send(json!({"type": "message", "text": "what was the word?"}));
    s.wait_idle(LIMIT);
    let last = lab.requests().into_iter().rfind(|r| r["step"] == 1);
    let body = last.map(|r| r["body"].to_string()).unwrap_or_default();
    assert!(
        body.contains("pelican") && body.contains("what was the word?"),
        "the loaded session did not carry the first turn {}\n{}",
        lab.why(),
        s.why()
    );
}

/// `runwire-session acp [ARGS] -- AGENT` with codex-acp's `bwrap` on `PATH`.
fn acp_session(lab: &Lab, agent: &str, args: &[&str]) -> Session {
    let mut cmd = lab.cmd(env!("CARGO_BIN_EXE_runwire-session"));
    cmd.arg("acp").args(args).arg("--").arg(agent_bin(agent));
    with_bwrap(&mut cmd);
    Session::start(cmd)
}

fn acp_approve_for_session(agent: &str, call: Value) {
    let lab = Lab::new(&format!("ra-{agent}-scope"), json!({"steps": [call, call, {"text": "Made it twice."}]}));
    let mut s = acp_session(&lab, agent, &[]);
    s.send(json!({"type": "message", "text": "make a file twice"}));
    let r = s.wait_for("a request", LIMIT, is_request);
    s.send(json!({"type": "answer", "id": r["id"], "decision": "allow", "scope": "always"}));
    s.wait_idle(LIMIT);
    assert_eq!(s.count(is_request), 1, "asked again after allow for the session\n{}", s.why());
    assert!(lab.work().join("made").exists(), "approved, and the command did not run {}", lab.why());
}

#[test]
#[cfg_attr(not(tool = "real-agents"), ignore = "the pinned agents are not installed: cd realagents && npm ci")]
fn claude_acp_session_approve_for_session() {
    acp_approve_for_session(
        "claude-agent-acp",
        json!({"tool": "Bash", "input": {"command": "touch made && echo made", "description": "make a file"}}),
    );
}

#[test]
#[cfg_attr(not(tool = "real-agents"), ignore = "the pinned agents are not installed: cd realagents && npm ci")]
fn codex_acp_session_stop() {
    let lab = Lab::new(
        "ra-codex-acp-stop",
        json!({"steps": [
            {"text": "A long first answer that streams slowly, piece by piece, for a while.", "chunks": 20, "delay_ms": 200}
        ]}),
    );
    let mut s = acp_session(&lab, "codex-acp", &[]);
    s.send(json!({"type": "message", "text": "tell me something long"}));
    s.wait_for("the answer streaming", LIMIT, |l| l["params"]["update"]["sessionUpdate"] == "agent_message_chunk");
    let t = Instant::now();
    s.send(json!({"type": "interrupt"}));
    s.wait_idle(LIMIT);
    assert!(t.elapsed() < Duration::from_secs(3), "the turn was not stopped: {:?}", t.elapsed());
    let cancelled = s.lines().iter().any(|l| l["result"]["stopReason"] == "cancelled");
    assert!(cancelled, "the prompt did not end cancelled\n{}", s.why());
}

#[test]
#[cfg_attr(not(tool = "real-agents"), ignore = "the pinned agents are not installed: cd realagents && npm ci")]
fn codex_acp_session_kill_then_resume() {
    let lab =
        Lab::new("ra-codex-acp-resume", json!({"steps": [{"text": "First answer."}, {"text": "Second answer."}]}));
    let mut s = acp_session(&lab, "codex-acp", &[]);
    s.send(json!({"type": "message", "text": "remember the word pelican"}));
    s.wait_idle(LIMIT);
    let new = s.wait_for("the session id", LIMIT, |l| l["result"]["sessionId"].is_string());
    let id = new["result"]["sessionId"].as_str().unwrap().to_string();
    kill_group(&s.child);
    drop(s);
    let mut s = acp_session(&lab, "codex-acp", &["--resume", &id]);
    s.send(json!({"type": "message", "text": "what was the word?"}));
    s.wait_idle(LIMIT);
    let last = lab.requests().into_iter().rfind(|r| r["step"] == 1);
    let body = last.map(|r| r["body"].to_string()).unwrap_or_default();
    assert!(
        body.contains("pelican") && body.contains("what was the word?"),
        "the loaded session did not carry the first turn {}\n{}",
        lab.why(),
        s.why()
    );
}
