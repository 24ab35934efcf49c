//! `runs doctor` (issue 26): real `runs` processes against stand-in agent
//! CLIs on a PATH of the test's own (shell scripts printing a version, one
//! that never answers, an npm-like package of an ACP agent), the
//! `runwire-serve` start-up warning, and the capability table: its data
//! (`realagents/capabilities.json`) against the matrix
//! (`tests/it/real_agents.rs`) and the pins (`realagents/tested.json`
//! against `package.json` and `package-lock.json`), and the rendered table
//! against `docs/REAL-AGENTS.md` (and README.md once it holds the markers).

use crate::support;

use serde_json::Value;
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");
const BEGIN: &str = "<!-- capability-table:begin -->";
const END: &str = "<!-- capability-table:end -->";

/// A world for one test: `bin/` (the PATH), `home/` (HOME), a cache.
struct World {
    dir: PathBuf,
}

impl World {
    fn new(name: &str) -> World {
        let dir = support::scratch(&format!("doctor-{name}"));
        for d in ["bin", "home", "cache"] {
            std::fs::create_dir_all(dir.join(d)).unwrap();
        }
        World { dir }
    }

    fn bin(&self) -> PathBuf {
        self.dir.join("bin")
    }

    /// An executable `bin/NAME` running `body` under /bin/sh.
    fn script(&self, name: &str, body: &str) -> PathBuf {
        let p = self.bin().join(name);
        std::fs::write(&p, format!("#!/bin/sh\n{body}\n")).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        p
    }

    /// A command with only `bin/` (and /bin, /usr/bin for the scripts' own
    /// tools, which hold no agent) on PATH and none of the agents' settings.
    fn cmd(&self, program: &str) -> Command {
        let mut c = Command::new(program);
        c.env("PATH", format!("{}:/usr/bin:/bin", self.bin().display()))
            .env("HOME", self.dir.join("home"))
            .env("XDG_CACHE_HOME", self.dir.join("cache"))
            .env("HARNESS_HOME", self.dir.join("harness"))
            .stdin(Stdio::null());
        for v in [
            "RUNWIRE_CLAUDE_BIN",
            "RUNWIRE_CODEX_BIN",
            "RUNWIRE_CURSOR_BIN",
            "ANTHROPIC_API_KEY",
            "ANTHROPIC_AUTH_TOKEN",
            "CLAUDE_CODE_OAUTH_TOKEN",
            "CLAUDE_CODE_USE_BEDROCK",
            "CLAUDE_CODE_USE_VERTEX",
            "CLAUDE_CONFIG_DIR",
            "OPENAI_API_KEY",
            "CODEX_API_KEY",
            "CODEX_HOME",
            "CURSOR_API_KEY",
            "PREFIX",
        ] {
            c.env_remove(v);
        }
        c
    }

    fn doctor(&self, args: &[&str]) -> Output {
        self.cmd(env!("CARGO_BIN_EXE_runs")).arg("doctor").args(args).output().expect("run runs doctor")
    }
}

/// `runs doctor --json ARGS`: the exit code and the parsed object.
fn doctor_json(w: &World, args: &[&str]) -> (i32, Value) {
    let out = w.doctor(&[&["--json"], args].concat());
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!("{e}: {}\n{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
    });
    (out.status.code().unwrap_or(-1), v)
}

fn agent<'a>(v: &'a Value, name: &str) -> &'a Value {
    v["agents"].as_array().unwrap().iter().find(|a| a["agent"] == name).unwrap_or_else(|| panic!("no {name}: {v}"))
}

fn tested(name: &str) -> String {
    let t: Value =
        serde_json::from_str(&std::fs::read_to_string(Path::new(ROOT).join("realagents/tested.json")).unwrap())
            .unwrap();
    t["agents"][name]["version"].as_str().unwrap().to_string()
}

#[test]
fn a_tested_version_is_ready_another_is_not_and_the_exit_says_so() {
    let w = World::new("versions");
    w.script("claude", &format!("echo '{} (Claude Code)'", tested("claude")));
    w.script("codex", "echo 'codex-cli 0.150.0'");
    let (code, v) = doctor_json(&w, &["claude"]);
    assert_eq!(code, 0, "{v}");
    let c = agent(&v, "claude");
    assert_eq!(c["ready"], true, "{c}");
    assert_eq!(c["version_status"], "tested", "{c}");
    assert_eq!(c["from"], "PATH", "{c}");
    assert_eq!(c["program"], w.bin().join("claude").display().to_string(), "{c}");
    assert!(c["wrapper"].as_str().unwrap().ends_with("wrappers/claude.sh"), "{c}");
    assert_eq!(v["ready"], true);

    let (code, v) = doctor_json(&w, &["claude", "codex"]);
    assert_eq!(code, 1, "{v}");
    let x = agent(&v, "codex");
    assert_eq!((x["version"].as_str(), x["version_status"].as_str()), (Some("0.150.0"), Some("untested")), "{x}");
    let missing = x["missing"].to_string();
    assert!(missing.contains("untested version: 0.150.0") && missing.contains(&tested("codex")), "{x}");
    assert_eq!(v["ready"], false);

    // None named: every installed one must be ready (codex is not); without codex, claude alone is.
    let (code, _) = doctor_json(&w, &[]);
    assert_eq!(code, 1);
    std::fs::remove_file(w.bin().join("codex")).unwrap();
    let (code, v) = doctor_json(&w, &[]);
    assert_eq!(code, 0, "{v}");
    assert_eq!(agent(&v, "codex-acp")["version_status"], "not installed", "{v}");
    // The table, for a person.
    let out = w.doctor(&["--table", "claude", "codex"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1));
    assert!(text.contains("claude: ready") && text.contains("codex: NOT READY"), "{text}");
    assert!(text.contains("missing  not installed: no codex on PATH (or set $RUNWIRE_CODEX_BIN)"), "{text}");
}

#[test]
fn nothing_installed_is_not_ready() {
    let w = World::new("none");
    let out = w.doctor(&["--table"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stdout).contains("no agent CLI is installed"));
}

#[test]
fn the_configured_program_is_the_one_checked() {
    let w = World::new("configured");
    // On PATH an untested one; the one configured is tested.
    w.script("claude", "echo '1.0.0 (Claude Code)'");
    let other = w.dir.join("elsewhere");
    std::fs::create_dir_all(&other).unwrap();
    let good = other.join("my-claude");
    std::fs::write(&good, format!("#!/bin/sh\necho '{} (Claude Code)'\n", tested("claude"))).unwrap();
    std::fs::set_permissions(&good, std::fs::Permissions::from_mode(0o755)).unwrap();
    let out = w
        .cmd(env!("CARGO_BIN_EXE_runs"))
        .env("RUNWIRE_CLAUDE_BIN", &good)
        .args(["doctor", "--json", "claude"])
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let c = agent(&v, "claude");
    assert_eq!((c["from"].as_str(), c["ready"].as_bool()), (Some("$RUNWIRE_CLAUDE_BIN"), Some(true)), "{c}");
    assert_eq!(c["program"], good.display().to_string());
    // --agent-cmd wins over both.
    let (code, v) = doctor_json(&w, &["claude", "--agent-cmd", "claude"]);
    assert_eq!(code, 1);
    assert_eq!(agent(&v, "claude")["from"], "--agent-cmd");
    assert_eq!(agent(&v, "claude")["version"], "1.0.0");
    // A configured path that is not there.
    let out = w
        .cmd(env!("CARGO_BIN_EXE_runs"))
        .env("RUNWIRE_CODEX_BIN", "/nonexistent/codex")
        .args(["doctor", "--json", "codex"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        agent(&v, "codex")["missing"]
            .to_string()
            .contains(r#"$RUNWIRE_CODEX_BIN \"/nonexistent/codex\" is not an executable file"#),
        "{v}"
    );
}

#[test]
fn a_version_that_never_comes_is_given_up_on_and_its_whole_group_killed() {
    let w = World::new("hang");
    let pids = w.dir.join("pids");
    // A CLI that "phones home": a child holding the output open, and itself waiting.
    w.script("codex", &format!("sleep 300 &\necho $$ $! > {}\nwait", pids.display()));
    let t = Instant::now();
    let (code, v) = doctor_json(&w, &["codex"]);
    let took = t.elapsed();
    assert_eq!(code, 1, "{v}");
    assert!(took < Duration::from_secs(12), "the doctor waited {took:?}");
    let x = agent(&v, "codex");
    assert_eq!(x["version_status"], "unknown", "{x}");
    assert!(x["missing"].to_string().contains("--version gave no answer within 5s"), "{x}");
    let text = std::fs::read_to_string(&pids).unwrap();
    for pid in text.split_whitespace() {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let state = if stat.is_empty() {
            "gone"
        } else {
            stat.rsplit(") ").next().and_then(|s| s.split(' ').next()).unwrap_or("")
        };
        assert!(state == "gone" || state == "Z", "process {pid} of the stand-in still runs: {stat}");
    }
}

#[test]
fn a_version_flag_that_fails_says_why() {
    let w = World::new("fails");
    w.script("claude", "echo 'error: unexpected argument' >&2\nexit 2");
    let (code, v) = doctor_json(&w, &["claude"]);
    assert_eq!(code, 1);
    let c = agent(&v, "claude");
    assert_eq!(c["version_status"], "unknown");
    assert!(c["missing"].to_string().contains("--version exited 2: error: unexpected argument"), "{c}");
    // A version printed on stderr is read there; cursor-agent is in no matrix.
    w.script("cursor-agent", "echo '2025.09.18-7ae6800' >&2");
    let (code, v) = doctor_json(&w, &["cursor-agent"]);
    assert_eq!(code, 1);
    let c = agent(&v, "cursor");
    assert_eq!(
        (c["version"].as_str(), c["version_status"].as_str()),
        (Some("2025.09.18-7ae6800"), Some("not in the matrix")),
        "{c}"
    );
    assert!(c["missing"].to_string().contains("untested: cursor is not in the real-agent matrix"), "{c}");
}

#[test]
fn an_acp_agent_s_version_is_its_package_s_and_it_is_not_run() {
    let w = World::new("acp");
    let pkg = w.dir.join("node_modules/@zed-industries/codex-acp");
    std::fs::create_dir_all(pkg.join("bin")).unwrap();
    std::fs::write(
        pkg.join("package.json"),
        format!(r#"{{"name": "@zed-industries/codex-acp", "version": "{}"}}"#, tested("codex-acp")),
    )
    .unwrap();
    let ran = w.dir.join("ran");
    let js = pkg.join("bin/codex-acp.js");
    std::fs::write(&js, format!("#!/bin/sh\ntouch {}\nexit 2\n", ran.display())).unwrap();
    std::fs::set_permissions(&js, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::os::unix::fs::symlink(&js, w.bin().join("codex-acp")).unwrap();
    let (code, v) = doctor_json(&w, &["codex-acp"]);
    assert_eq!(code, 0, "{v}");
    let a = agent(&v, "codex-acp");
    assert_eq!(a["version_status"], "tested", "{a}");
    assert_eq!(a["version_source"], "@zed-industries/codex-acp/package.json", "{a}");
    assert!(a["wrapper"].as_str().unwrap().contains("runwire-session acp -- codex-acp"), "{a}");
    assert!(!ran.exists(), "the ACP agent was started");
    // Not inside its package: unknown.
    std::fs::remove_file(w.bin().join("codex-acp")).unwrap();
    w.script("codex-acp", "exit 2");
    let (code, v) = doctor_json(&w, &["codex-acp"]);
    assert_eq!(code, 1);
    assert!(agent(&v, "codex-acp")["missing"].to_string().contains("not inside the npm package"), "{v}");
}

#[test]
fn login_is_found_offline_or_said_unknown_never_guessed() {
    let w = World::new("login");
    w.script("claude", &format!("echo '{} (Claude Code)'", tested("claude")));
    w.script("codex", &format!("echo 'codex-cli {}'", tested("codex")));
    let (code, v) = doctor_json(&w, &["claude", "codex"]);
    // Not knowing does not make an agent not ready.
    assert_eq!(code, 0, "{v}");
    for a in ["claude", "codex"] {
        assert_eq!(agent(&v, a)["login"]["status"], "can't tell", "{v}");
    }
    let home = w.dir.join("home");
    std::fs::create_dir_all(home.join(".claude")).unwrap();
    std::fs::write(home.join(".claude/.credentials.json"), "{}").unwrap();
    let codex_home = w.dir.join("codex-home");
    std::fs::create_dir_all(&codex_home).unwrap();
    std::fs::write(codex_home.join("auth.json"), "{}").unwrap();
    let out = w
        .cmd(env!("CARGO_BIN_EXE_runs"))
        .env("CODEX_HOME", &codex_home)
        .args(["doctor", "--json", "claude", "codex"])
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let l = &agent(&v, "claude")["login"];
    assert_eq!(l["status"], "found");
    assert!(l["detail"].as_str().unwrap().ends_with(".claude/.credentials.json exists"), "{l}");
    assert!(agent(&v, "codex")["login"]["detail"].as_str().unwrap().contains("codex-home/auth.json exists"), "{v}");
    let out = w
        .cmd(env!("CARGO_BIN_EXE_runs"))
        .env("OPENAI_API_KEY", "k")
        .args(["doctor", "--json", "codex-acp"])
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(agent(&v, "codex-acp")["login"]["detail"], "$OPENAI_API_KEY is set", "{v}");
}

#[test]
fn usage_errors_exit_2() {
    let w = World::new("usage");
    let out = w.doctor(&["gemini"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr)
        .starts_with("runs: usage: doctor: unknown agent \"gemini\" (known: claude,"));
    let out = w.doctor(&["claude", "codex", "--agent-cmd", "x"]);
    assert_eq!(out.status.code(), Some(2));
    let out = w.doctor(&["--capabilities", "claude"]);
    assert_eq!(out.status.code(), Some(2));
    // Not a terminal: one JSON object unless --table.
    let out = w.doctor(&["claude"]);
    assert_eq!(out.status.code(), Some(1));
    let v: Value = serde_json::from_slice(&out.stdout).expect("JSON when stdout is not a terminal");
    assert_eq!(v["ready"], false);
    let help = w.doctor(&["--help"]);
    assert_eq!(help.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&help.stdout).contains("Exit status: 0 every agent named is ready"));
}

/// runwire-serve's stderr lines until `until` holds for one (or 15 s pass).
fn serve_stderr(w: &World, args: &[&str], until: impl Fn(&str) -> bool) -> String {
    let mut child = w
        .cmd(env!("CARGO_BIN_EXE_runwire-serve"))
        .args(["--listen", "127.0.0.1:0"])
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let err = child.stderr.take().unwrap();
    std::thread::spawn(move || {
        for l in BufReader::new(err).lines().map_while(Result::ok) {
            if tx.send(l).is_err() {
                break;
            }
        }
    });
    let mut text = String::new();
    let t = Instant::now();
    while t.elapsed() < Duration::from_secs(15) {
        if let Ok(l) = rx.recv_timeout(Duration::from_millis(100)) {
            text.push_str(&l);
            text.push('\n');
            if until(&l) {
                break;
            }
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    text
}

#[test]
fn runwire_serve_warns_at_start_of_an_untested_version() {
    let w = World::new("serve");
    w.script("codex", "echo 'codex-cli 0.150.0'");
    let err = serve_stderr(&w, &["--agent", "codex"], |l| l.contains("warning"));
    assert!(
        err.contains(&format!(
            "runwire-serve: warning: codex 0.150.0 ({}) is not the version the real-agent matrix tested ({}); see `runs doctor codex`",
            w.bin().join("codex").display(),
            tested("codex")
        )),
        "{err}"
    );
    // The tested one: nothing said, once it has answered.
    let asked = w.dir.join("asked");
    w.script("codex", &format!("echo 'codex-cli {}'\ntouch {}", tested("codex"), asked.display()));
    let t = Instant::now();
    let err = serve_stderr(&w, &["--agent", "codex", "--interactive"], |_| {
        while !asked.exists() && t.elapsed() < Duration::from_secs(10) {
            std::thread::sleep(Duration::from_millis(20));
        }
        std::thread::sleep(Duration::from_millis(500));
        true
    });
    assert!(asked.exists(), "the server never asked the version");
    assert!(!err.contains("warning"), "{err}");
    // cursor-agent is in no matrix: untested whatever its version.
    w.script("cursor-agent", "echo '2025.09.18-7ae6800'");
    let err = serve_stderr(&w, &["--agent", "cursor"], |l| l.contains("warning"));
    assert!(err.contains("warning: cursor 2025.09.18-7ae6800 ("), "{err}");
    assert!(err.contains("is not in the real-agent matrix: untested"), "{err}");
}

/// Issue 34, defect 6: `runwire-serve --agent acp -- CMD ARGS` runs CMD
/// exactly as given and never as `CMD --version` (nor with any other
/// arguments). The stand-in logs every argv it is started with; a run starts it for real,
/// so the log holds the given arguments, and only those.
#[test]
fn an_acp_command_line_is_never_run_with_other_arguments() {
    let w = World::new("acp-argv");
    let log = w.dir.join("argv.log");
    let agent =
        w.script("my-acp", &format!("printf '%s|' \"$@\" >> {}\necho >> {}\nexit 3", log.display(), log.display()));
    let mut child = w
        .cmd(env!("CARGO_BIN_EXE_runwire-serve"))
        .args(["--listen", "127.0.0.1:0", "--agent", "acp", "--interactive", "--"])
        .arg(&agent)
        .args(["--flag", "two words"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    let port: u16 = line.trim().rsplit(':').next().and_then(|p| p.parse().ok()).expect("the port");
    let body = r#"{"threadId":"t1","runId":"r1","messages":[{"id":"m1","role":"user","content":"hi"}]}"#;
    let mut c = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    std::io::Write::write_all(
        &mut c,
        format!(
            "POST /agui HTTP/1.0\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        )
        .as_bytes(),
    )
    .unwrap();
    let mut raw = String::new();
    let _ = std::io::Read::read_to_string(&mut c, &mut raw);
    let t = Instant::now();
    while !std::fs::read_to_string(&log).is_ok_and(|l| l.contains("--flag")) && t.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
    let runs = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(!runs.is_empty(), "the agent never started: {raw}");
    for argv in runs.lines() {
        assert_eq!(argv, "--flag|two words|", "CMD ran only with its own arguments: {runs}");
    }
}

/// Issue 40, item 7: every agent the doctor knows says, installed or not,
/// the version the matrix tested (the pin of realagents/package.json) or
/// `untested`, and how to install it: the npm ones at their pin, cursor
/// (on no package registry) by Cursor's own installer.
#[test]
fn every_agent_has_its_tested_version_and_an_install_hint() {
    let w = World::new("install-hints");
    let (_, v) = doctor_json(&w, &[]);
    let pkg: Value = serde_json::from_str(&read("realagents/package.json")).unwrap();
    let matrix: Value = serde_json::from_str(&read("realagents/tested.json")).unwrap();
    let agents = v["agents"].as_array().unwrap();
    assert_eq!(agents.len(), 5, "{v}");
    for a in agents {
        let name = a["agent"].as_str().unwrap();
        let install = a["install"].as_str().unwrap_or_default();
        match matrix["agents"].get(name) {
            Some(t) => {
                let p = t["package"].as_str().unwrap();
                let pin = pkg["dependencies"][p].as_str().unwrap();
                assert_eq!(a["tested"], pin, "{a}");
                assert_eq!(install, format!("npm install -g {p}@{pin}"), "{a}");
            }
            None => {
                assert_eq!(a["tested"], "untested", "{a}");
                assert!(!install.is_empty(), "{a}");
            }
        }
    }
    let cursor = agent(&v, "cursor");
    assert_eq!(cursor["tested"], "untested", "{cursor}");
    assert!(cursor["install"].as_str().unwrap().starts_with("curl https://cursor.com/install -fsS | bash"), "{cursor}");
    let text = String::from_utf8(w.doctor(&["--table"]).stdout).unwrap();
    assert_eq!(text.matches("\n  tested   ").count(), 5, "{text}");
    assert_eq!(text.matches("\n  install  ").count(), 5, "{text}");
    assert!(text.contains("  tested   untested (not in the real-agent matrix)\n"), "{text}");
    assert!(
        text.contains(&format!("  install  npm install -g @zed-industries/codex-acp@{}\n", tested("codex-acp"))),
        "{text}"
    );
}

// ---- the pins and the capability table ---------------------------------------

fn read(rel: &str) -> String {
    std::fs::read_to_string(Path::new(ROOT).join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

#[test]
fn tested_versions_are_the_pins_of_the_matrix() {
    let tested: Value = serde_json::from_str(&read("realagents/tested.json")).unwrap();
    let pkg: Value = serde_json::from_str(&read("realagents/package.json")).unwrap();
    let lock: Value = serde_json::from_str(&read("realagents/package-lock.json")).unwrap();
    let agents = tested["agents"].as_object().unwrap();
    let deps = pkg["dependencies"].as_object().unwrap();
    assert_eq!(agents.len(), deps.len(), "every pinned agent, and only they, in tested.json");
    for (name, t) in agents {
        let (p, v) = (t["package"].as_str().unwrap(), t["version"].as_str().unwrap());
        assert_eq!(deps.get(p).and_then(Value::as_str), Some(v), "{name}: package.json pins {p} otherwise");
        let locked = &lock["packages"][format!("node_modules/{p}")]["version"];
        assert_eq!(locked.as_str(), Some(v), "{name}: package-lock.json has {p} {locked}");
    }
}

/// The `#[test]` functions of tests/it/real_agents.rs and, for each, the
/// reason of an unconditional `#[ignore = ...]` (a `cfg_attr` one, the
/// skip rule's, does not count).
fn matrix_tests() -> BTreeMap<String, Option<String>> {
    let src = read("tests/it/real_agents.rs");
    let mut out = BTreeMap::new();
    let mut attrs: Vec<&str> = Vec::new();
    for l in src.lines().map(str::trim) {
        if l.starts_with("#[") {
            attrs.push(l);
            continue;
        }
        if let Some(rest) = l.strip_prefix("fn ") {
            if attrs.contains(&"#[test]") {
                let name = rest.split('(').next().unwrap().to_string();
                let ignored = attrs.iter().find_map(|a| {
                    a.strip_prefix("#[ignore")
                        .map(|r| r.trim_start_matches([' ', '=']).trim_end_matches(']').to_string())
                });
                out.insert(name, ignored);
            }
        }
        if !l.is_empty() && !l.starts_with("//") {
            attrs.clear();
        }
    }
    out
}

#[test]
fn every_capability_cell_stands_on_the_matrix() {
    let tests = matrix_tests();
    // Every case is fixed today, so no test carries an unconditional ignore;
    // the parse is still held to finding the whole matrix.
    assert!(tests.len() > 30, "the parse found {tests:?}");
    let caps: Value = serde_json::from_str(&read("realagents/capabilities.json")).unwrap();
    let tested: Value = serde_json::from_str(&read("realagents/tested.json")).unwrap();
    let columns: Vec<&str> = caps["columns"].as_array().unwrap().iter().map(|c| c["key"].as_str().unwrap()).collect();
    let mut bad = Vec::new();
    for a in caps["agents"].as_array().unwrap() {
        let name = a["agent"].as_str().unwrap();
        if tested["agents"][name].is_null() {
            bad.push(format!("{name}: not in realagents/tested.json"));
        }
        let cells = a["cells"].as_object().unwrap();
        let keys: Vec<&str> = cells.keys().map(String::as_str).collect();
        let mut want = columns.clone();
        want.sort();
        if keys != want {
            bad.push(format!("{name}: cells {keys:?}, columns {want:?}"));
        }
        for (key, cell) in cells {
            let at = format!("{name} / {key}");
            let is = cell["is"].as_str().unwrap_or("");
            let names: Vec<&str> =
                cell["tests"].as_array().map(|t| t.iter().filter_map(Value::as_str).collect()).unwrap_or_default();
            let case = cell["case"].as_u64();
            let mut ignored = Vec::new();
            for t in &names {
                match tests.get(*t) {
                    None => bad.push(format!("{at}: no test {t} in tests/it/real_agents.rs")),
                    Some(Some(reason)) => {
                        if is == "yes" || is == "n/a" || is == "untested" {
                            bad.push(format!("{at} says {is}, but {t} is ignored: {reason}"));
                        }
                        if let Some(n) = case {
                            if !reason.contains(&format!("case {n}")) {
                                bad.push(format!("{at}: {t} is ignored for another reason than case {n}: {reason}"));
                            }
                        }
                        ignored.push(*t);
                    }
                    Some(None) => {}
                }
            }
            if !["yes", "partial", "no", "n/a", "untested"].contains(&is) {
                bad.push(format!("{at}: unknown status {is:?}"));
            }
            if ["yes", "partial", "no"].contains(&is) && names.is_empty() {
                bad.push(format!("{at} says {is} and names no test"));
            }
            if is == "no" && ignored.len() != names.len() {
                bad.push(format!(
                    "{at} says no, but of {names:?} only {ignored:?} are ignored: the gap is fixed? flip the cell to partial or yes"
                ));
            }
            if !ignored.is_empty() && case.is_none() {
                bad.push(format!("{at}: {ignored:?} are ignored, and the cell names no case"));
            }
            if is == "no" && case.is_none() {
                bad.push(format!("{at} says no without its case"));
            }
            if case.is_some() && ignored.is_empty() {
                bad.push(format!(
                    "{at} names case {case:?} but none of its tests is ignored for it: the gap is fixed?"
                ));
            }
        }
    }
    assert!(bad.is_empty(), "realagents/capabilities.json:\n{}", bad.join("\n"));
}

/// The text between the markers of `doc`, if it has them.
fn block(doc: &str) -> Option<&str> {
    let start = doc.find(BEGIN)? + BEGIN.len();
    let end = doc[start..].find(END)? + start;
    Some(doc[start..end].trim_matches('\n'))
}

fn rendered() -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_runs")).args(["doctor", "--capabilities"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn the_docs_hold_exactly_the_rendered_table() {
    let table = rendered();
    let docs = read("docs/REAL-AGENTS.md");
    let b = block(&docs).expect("docs/REAL-AGENTS.md has the capability-table markers");
    assert_eq!(b, table.trim_end(), "docs/REAL-AGENTS.md's table is stale: run scripts/capability-table.sh");
    // README.md once it holds the table too.
    let readme = read("README.md");
    if readme.contains(BEGIN) {
        let b = block(&readme).expect("README.md has both markers");
        assert_eq!(b, table.trim_end(), "README.md's table is stale: run scripts/capability-table.sh");
    }
}

#[test]
#[cfg_attr(not(tool = "bash"), ignore = "needs bash: apt-get install bash")]
fn the_script_rewrites_only_the_block() {
    support::need(&["bash"]);
    let w = World::new("script");
    let doc = w.dir.join("doc.md");
    std::fs::write(&doc, format!("# Title\n\nbefore\n\n{BEGIN}\n| old | table |\n{END}\n\nafter\n")).unwrap();
    let plain = w.dir.join("plain.md");
    std::fs::write(&plain, "no markers here\n").unwrap();
    let out = Command::new("bash")
        .arg(Path::new(ROOT).join("scripts/capability-table.sh"))
        .arg(&doc)
        .arg(&plain)
        .env("RUNS", env!("CARGO_BIN_EXE_runs"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = std::fs::read_to_string(&doc).unwrap();
    assert_eq!(text, format!("# Title\n\nbefore\n\n{BEGIN}\n{}{END}\n\nafter\n", rendered()));
    assert_eq!(std::fs::read_to_string(&plain).unwrap(), "no markers here\n");
    // Again: nothing changes.
    let out = Command::new("bash")
        .arg(Path::new(ROOT).join("scripts/capability-table.sh"))
        .arg(&doc)
        .env("RUNS", env!("CARGO_BIN_EXE_runs"))
        .output()
        .unwrap();
    assert!(out.status.success());
    assert_eq!(std::fs::read_to_string(&doc).unwrap(), text);
}
