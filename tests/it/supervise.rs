//! `runwire-supervise` end to end with the stub engines first on PATH:
//! real wrappers, real process groups and signals. Every test bounds its
//! waits, stops the supervisor's process group on the way out (even on a
//! failed assertion) and checks that no stub process is left.

use crate::support;
use support::Server;

use serde_json::Value;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const LIMIT: Duration = Duration::from_secs(30);

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// A test's directory: a git work tree (codex wants one), a harness home
/// and the knob files of the stubs.
struct Env {
    dir: PathBuf,
}

impl Env {
    fn new(name: &str) -> Env {
        // Short: the control socket path must fit in sun_path.
        let dir = support::scratch(name);
        std::fs::create_dir_all(dir.join("home")).unwrap();
        std::fs::create_dir_all(dir.join(".git")).unwrap();
        Env { dir }
    }
    fn p(&self, rel: &str) -> PathBuf {
        self.dir.join(rel)
    }
    fn plan(&self, json: &str) -> PathBuf {
        let p = self.p("p.plan.json");
        std::fs::write(&p, json).unwrap();
        p
    }
    fn cmd(&self, mode: &str) -> Command {
        self.cmd_in(mode, &self.dir, "p.plan.json")
    }
    /// The supervisor of the plan file `plan` (relative to `dir`), started in `dir`.
    fn cmd_in(&self, mode: &str, dir: &std::path::Path, plan: &str) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_runwire-supervise"));
        let path =
            format!("{}:{}", root().join("fixtures/stub-engines").display(), std::env::var("PATH").unwrap_or_default());
        c.current_dir(dir)
            .env("PATH", path)
            .env("HARNESS_HOME", self.p("home"))
            .env("STUB_MODE", mode)
            .env("STUB_ARGV_LOG", self.p("argv"))
            .env("STUB_PID_FILE", self.p("pids"))
            .args(["--plan", plan, "--kill-grace", "2"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0);
        c
    }
    fn start(&self, mode: &str) -> Sup {
        Sup { child: Some(self.cmd(mode).spawn().unwrap()) }
    }
    fn journal(&self) -> Vec<Value> {
        std::fs::read_to_string(self.p("runstate/p.jsonl"))
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }
    fn states(&self, task: &str) -> Vec<String> {
        self.journal().iter().filter(|r| r["task"] == task).map(|r| r["state"].as_str().unwrap().to_string()).collect()
    }
    fn last(&self, task: &str) -> Option<String> {
        self.states(task).pop()
    }
    fn argv(&self) -> Vec<String> {
        std::fs::read_to_string(self.p("argv")).unwrap_or_default().lines().map(str::to_string).collect()
    }
    fn live(&self) -> Value {
        std::fs::read_to_string(self.p("runstate/p.live.json"))
            .ok()
            .and_then(|s| serde_json::from_str(&s).ok())
            .unwrap_or(Value::Null)
    }
    fn sock(&self) -> PathBuf {
        self.live()["sock"].as_str().map(PathBuf::from).unwrap_or_default()
    }
    fn call(&self, req: Value) -> Value {
        let mut s = UnixStream::connect(self.sock()).expect("control socket");
        s.set_read_timeout(Some(LIMIT)).unwrap();
        writeln!(s, "{req}").unwrap();
        let mut line = String::new();
        BufReader::new(s).read_line(&mut line).unwrap();
        serde_json::from_str(&line).unwrap()
    }
    /// Every pid a stub wrote (engines and their children).
    fn stub_pids(&self) -> Vec<i32> {
        std::fs::read_to_string(self.p("pids"))
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.trim().parse().ok())
            .collect()
    }
}

impl Drop for Env {
    fn drop(&mut self) {
        // Kept after a failure, to look at.
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// The supervisor; dropping it kills its process group and reaps it.
struct Sup {
    child: Option<Child>,
}

impl Sup {
    fn wait(&mut self) -> i32 {
        let c = self.child.as_mut().unwrap();
        let until = Instant::now() + LIMIT;
        loop {
            if let Some(s) = c.try_wait().unwrap() {
                self.child = None;
                return s.code().unwrap_or(-1);
            }
            assert!(Instant::now() < until, "supervisor did not finish in {LIMIT:?}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    /// Its exit code once it has exited (-1: by a signal), else `None`.
    fn exited(&mut self) -> Option<i32> {
        let s = self.child.as_mut()?.try_wait().unwrap()?;
        self.child = None;
        Some(s.code().unwrap_or(-1))
    }
    fn pid(&self) -> i32 {
        self.child.as_ref().unwrap().id() as i32
    }
    fn kill9(&mut self) {
        let mut c = self.child.take().unwrap();
        let _ = c.kill();
        let _ = c.wait();
    }
}

impl Drop for Sup {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            // SIGTERM first so that it stops its tasks; then make sure. Its
            // group directly: procps' `kill -TERM -PID` (no `--`) signals
            // every process of the user (kill(-1)), which took down whole
            // test runs here.
            let _ =
                nix::sys::signal::killpg(nix::unistd::Pid::from_raw(c.id() as i32), nix::sys::signal::Signal::SIGTERM);
            let until = Instant::now() + Duration::from_secs(10);
            while c.try_wait().ok().flatten().is_none() && Instant::now() < until {
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn alive(pid: i32) -> bool {
    // A zombie still answers signal 0; /proc/<pid>/stat says Z.
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| s.rsplit(')').next().is_some_and(|r| !r.trim_start().starts_with('Z')))
        .unwrap_or(false)
}

/// The pids whose parent is `pid` (from /proc).
fn children(pid: i32) -> Vec<i32> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(p) = e.file_name().to_str().and_then(|n| n.parse::<i32>().ok()) else { continue };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{p}/stat")) else { continue };
        let ppid = stat.rsplit_once(')').and_then(|(_, r)| r.split_whitespace().nth(1)?.parse::<i32>().ok());
        if ppid == Some(pid) {
            out.push(p);
        }
    }
    out
}

/// Waits until `f` holds.
fn until(what: &str, mut f: impl FnMut() -> bool) {
    let end = Instant::now() + LIMIT;
    while !f() {
        assert!(Instant::now() < end, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn no_stub_left(env: &Env) {
    until("every stub process to be gone", || env.stub_pids().iter().all(|&p| !alive(p)));
}

const THREE: &str = r#"{"v":"plan/v1","tasks":[
  {"id":"a","adapter":"claude","prompt":"do a","gate":"echo a >> gates.txt"},
  {"id":"b","adapter":"cursor","prompt":"do b"},
  {"id":"c","adapter":"claude","prompt":"do c","deps":["a","b"],"review":"codex"}]}"#;

/// A plan run again after every task ended redoes nothing, and says so with
/// the ways to run it anew (a newcomer's second try after installing the
/// missing agent otherwise only sees the old outcome again), and each way
/// it names works. (It named `runs rm`, which keeps the run's journal in
/// its runstate directory, so the next start found every task ended again.)
/// A start of a registered run leaves no second name of its journal behind
/// (a hidden temp link per start, before).
#[test]
fn a_plan_run_again_after_it_ended_redoes_nothing_and_says_how_to_run_it_anew() {
    let env = Env::new("again");
    env.plan(r#"{"v":"plan/v1","tasks":[{"id":"a","adapter":"claude","prompt":"do a"}]}"#);
    let first = env.cmd("ok").stderr(Stdio::piped()).output().unwrap();
    assert_eq!(first.status.code(), Some(0));
    assert!(!String::from_utf8_lossy(&first.stderr).contains("already ended"));
    let again = env.cmd("ok").stderr(Stdio::piped()).output().unwrap();
    assert_eq!(again.status.code(), Some(0));
    let err = String::from_utf8_lossy(&again.stderr);
    let id = run_id(&env);
    let journal = env.p("runstate/p.jsonl");
    assert!(
        err.contains(&format!("runwire-supervise: run {id}: every task already ended"))
            && err.contains(&journal.display().to_string())
            && err.contains("give another --slug")
            && err.contains(&format!("first move the run's files ({}/p.*", env.p("runstate").display())),
        "{err}"
    );
    assert_eq!(env.argv().len(), 1, "nothing was redone");
    let links: Vec<String> = std::fs::read_dir(env.p("home/journals"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(links, [format!("{id}.jsonl")], "one name of the journal in journals/");
    // Another --slug: a new run, which runs the plan.
    let fresh = env.cmd("ok").args(["--slug", "p-2"]).stderr(Stdio::piped()).output().unwrap();
    assert_eq!(fresh.status.code(), Some(0), "{}", String::from_utf8_lossy(&fresh.stderr));
    assert_eq!(env.argv().len(), 2, "run again under another slug");
    // The run's files moved away: the same run id, run anew, its task log
    // this run's alone.
    std::fs::rename(env.p("runstate"), env.p("old-runstate")).unwrap();
    std::fs::create_dir(env.p("runstate")).unwrap();
    for e in std::fs::read_dir(env.p("old-runstate")).unwrap().flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if !name.starts_with("p.") {
            std::fs::rename(e.path(), env.p("runstate").join(&name)).unwrap();
        }
    }
    let moved = env.cmd("ok").stderr(Stdio::piped()).output().unwrap();
    let err = String::from_utf8_lossy(&moved.stderr);
    assert_eq!(moved.status.code(), Some(0), "{err}");
    assert!(!err.contains("already ended"), "{err}");
    assert_eq!(env.argv().len(), 3, "run again once its files were moved away");
    let lines = |p: &str| std::fs::read_to_string(env.p(p)).unwrap().lines().count();
    assert_eq!(lines("runstate/p.a.log"), lines("old-runstate/p.a.log"), "one run's turn in the log");
}

#[test]
fn three_tasks_with_a_dependency_complete() {
    let env = Env::new("three");
    env.plan(THREE);
    let mut sup = env.start("ok");
    assert_eq!(sup.wait(), 0);
    assert_eq!(env.states("a"), ["leased", "implemented", "gated", "committed"]);
    assert_eq!(env.states("b"), ["leased", "implemented", "committed"]);
    assert_eq!(env.states("c"), ["leased", "implemented", "reviewed", "committed"]);
    let j = env.journal();
    let pos = |t: &str, s: &str| j.iter().position(|r| r["task"] == t && r["state"] == s).unwrap();
    assert!(pos("c", "leased") > pos("a", "committed") && pos("c", "leased") > pos("b", "committed"));
    assert!(j.iter().all(|r| r["ts"].is_string() && r["actor"].is_string()));
    assert_eq!(j.last().unwrap()["run"], "finished");
    // Every record passes the runstate/v1 checks of the readers.
    let folded = runwire::runs::journal::Journal::read(&env.p("runstate/p.jsonl")).unwrap();
    assert_eq!((folded.skipped, folded.records), (0, j.len()));
    let argv = env.argv();
    assert_eq!(argv.iter().filter(|l| l.starts_with("codex exec --json")).count(), 1, "{argv:?}");
    assert_eq!(std::fs::read_to_string(env.p("gates.txt")).unwrap(), "a\n");
    // The registry points at the run; the socket is gone after the end.
    let ptrs: Vec<_> = std::fs::read_dir(env.p("home/runs")).unwrap().flatten().collect();
    assert_eq!(ptrs.len(), 1);
    assert!(std::fs::read_dir(env.p("home/sock")).unwrap().next().is_none());
    let log = std::fs::read_to_string(env.p("runstate/p.a.log")).unwrap();
    assert!(log.lines().last().unwrap().contains("runwire.status"));
    no_stub_left(&env);
}

#[test]
fn a_failed_wrapper_halts_fail_closed() {
    let env = Env::new("fail");
    env.plan(r#"{"v":"plan/v1","tasks":[{"id":"a","adapter":"claude","prompt":"x"},{"id":"b","adapter":"claude","prompt":"y","deps":["a"]}]}"#);
    let mut sup = env.start("fail");
    assert_eq!(sup.wait(), 1);
    assert_eq!(env.states("a"), ["leased", "halted"]);
    assert_eq!(env.states("b"), ["halted"]);
    assert_eq!(env.argv().len(), 1, "b never started: {:?}", env.argv());
    no_stub_left(&env);
}

fn pid_of(env: &Env, task: &str) -> Option<i32> {
    env.live()["tasks"][task]["pid"].as_i64().map(|p| p as i32)
}

#[test]
fn kill_stops_the_whole_group_and_dependents_never_start() {
    let env = Env::new("kill");
    env.plan(r#"{"v":"plan/v1","tasks":[{"id":"a","adapter":"claude","prompt":"x"},{"id":"b","adapter":"claude","prompt":"y","deps":["a"]}]}"#);
    let mut sup = env.start("hang");
    // The engine and its child both wrote their pid: the group is complete.
    until("the hanging engine and its session id", || {
        env.stub_pids().len() >= 2 && env.live()["tasks"]["a"]["session_id"].is_string()
    });
    let wrapper = pid_of(&env, "a").unwrap();
    use std::os::unix::fs::PermissionsExt;
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!((mode(&env.p("home/sock")), mode(&env.sock())), (0o700, 0o600), "private socket");
    let entry = &env.live()["tasks"]["a"];
    assert_eq!(entry["pgid"].as_i64(), Some(wrapper as i64));
    assert_eq!(entry["state"], "leased");
    assert!(entry["started_ts"].is_string() && entry["session_id"].is_string(), "{entry}");
    assert!(entry["logfile"].as_str().unwrap().ends_with("runstate/p.a.log"), "{entry}");
    let r = env.call(serde_json::json!({"verb":"kill","task":"a","actor":"tester"}));
    assert_eq!((r["ok"].as_bool(), r["state"].as_str()), (Some(true), Some("halted")), "{r}");
    assert!(!alive(wrapper), "the wrapper is reaped when kill answers");
    no_stub_left(&env);
    // Idempotent: a second kill reports the state.
    let sock = env.sock();
    if sock.exists() {
        if let Ok(mut s) = UnixStream::connect(&sock) {
            s.set_read_timeout(Some(LIMIT)).unwrap();
            writeln!(s, r#"{{"verb":"kill","task":"a"}}"#).unwrap();
            let mut line = String::new();
            let _ = BufReader::new(s).read_line(&mut line);
            if !line.is_empty() {
                let v: Value = serde_json::from_str(&line).unwrap();
                assert_eq!((v["ok"].as_bool(), v["state"].as_str()), (Some(true), Some("halted")), "{v}");
            }
        }
    }
    assert_eq!(sup.wait(), 1);
    let j = env.journal();
    let halt = j.iter().find(|r| r["task"] == "a" && r["state"] == "halted").unwrap();
    assert_eq!(halt["actor"], "tester");
    assert!(halt["rc"].as_i64().unwrap() > 128, "{halt}");
    assert_eq!(env.states("b"), ["halted"]);
    assert_eq!(env.argv().len(), 1, "b never started");
}

#[test]
fn steer_resumes_the_session_with_the_message_and_reruns_the_gate() {
    let env = Env::new("steer");
    env.plan(
        r#"{"v":"plan/v1","tasks":[{"id":"a","adapter":"claude","prompt":"first","gate":"echo g >> gates.txt; sleep 1"}]}"#,
    );
    let mut sup = env.start("ok");
    until("the first gate", || env.p("gates.txt").exists());
    let sid = env.live()["tasks"]["a"]["session_id"].as_str().unwrap().to_string();
    let r = env.call(serde_json::json!({"verb":"steer","task":"a","msg":"now fix the tests"}));
    assert_eq!(r["ok"], true, "{r}");
    assert_eq!(sup.wait(), 0);
    let argv = env.argv();
    assert_eq!(argv.len(), 2, "{argv:?}");
    assert!(
        argv[1].contains(&format!("--resume {sid}")) && argv[1].ends_with("-- now\\ fix\\ the\\ tests "),
        "{argv:?}"
    );
    assert_eq!(std::fs::read_to_string(env.p("gates.txt")).unwrap(), "g\ng\n", "the gate ran again");
    assert_eq!(env.states("a"), ["leased", "implemented", "gated", "leased", "implemented", "gated", "committed"]);
    assert!(env.journal().iter().any(|r| r["run"] == "steer-queued"));
    no_stub_left(&env);
}

#[test]
fn steer_refusals_and_pause_holds_the_next_task() {
    let env = Env::new("pause");
    env.plan(
        r#"{"v":"plan/v1","tasks":[{"id":"a","adapter":"claude","prompt":"x"},{"id":"r","adapter":"codex","prompt":"review"},
            {"id":"b","adapter":"claude","prompt":"y","deps":["a"]}]}"#,
    );
    let mut cmd = env.cmd("ok");
    cmd.env("STUB_DELAY", "0.02");
    let mut sup = Sup { child: Some(cmd.spawn().unwrap()) };
    until("a leased", || env.last("a").is_some());
    let r = env.call(serde_json::json!({"verb":"pause"}));
    assert_eq!(r["ok"], true, "{r}");
    let refused = |task: &str, needle: &str| {
        let r = env.call(serde_json::json!({"verb":"steer","task":task,"msg":"m"}));
        assert_eq!(r["ok"], false, "{r}");
        assert!(r["detail"].as_str().unwrap().contains(needle), "{r}");
    };
    refused("r", "review seat");
    refused("b", "no session");
    until("a committed", || env.last("a").as_deref() == Some("committed"));
    refused("a", "terminal");
    let big = "x".repeat(64 * 1024 + 1);
    let r = env.call(serde_json::json!({"verb":"steer","task":"zz","msg":big}));
    assert_eq!(r["ok"], false);
    std::thread::sleep(Duration::from_millis(500));
    assert!(env.states("b").is_empty(), "b is held while paused");
    let r = env.call(serde_json::json!({"verb":"resume"}));
    assert_eq!(r["ok"], true, "{r}");
    assert_eq!(sup.wait(), 0);
    let j = env.journal();
    let resumed = j.iter().position(|r| r["run"] == "resumed").unwrap();
    let b = j.iter().position(|r| r["task"] == "b").unwrap();
    assert!(b > resumed && j.iter().any(|r| r["run"] == "paused"));
    no_stub_left(&env);
}

/// A steer queued while the run is paused leaves it paused: every view
/// says `paused` (the `steer-queued` record read as `running`), and a live
/// supervisor's run is never removed by `runs rm` (it took its socket and
/// owner record away, and nobody could reach the supervisor any more).
#[test]
fn a_steer_while_paused_keeps_the_pause_and_a_supervised_run_is_not_removed() {
    let env = Env::new("pausesteer");
    env.plan(r#"{"v":"plan/v1","tasks":[{"id":"a","adapter":"claude","prompt":"x","gate":"while ! test -f ok.flag; do sleep 0.05; done"}]}"#);
    let mut sup = env.start("ok");
    until("a's gate", || env.last("a").as_deref() == Some("implemented"));
    let r = env.call(serde_json::json!({"verb":"pause"}));
    assert_eq!(r["ok"], true, "{r}");
    let r = env.call(serde_json::json!({"verb":"steer","task":"a","msg":"also this"}));
    assert_eq!(r["ok"], true, "{r}");
    assert!(env.journal().last().is_some_and(|r| r["run"] == "steer-queued"), "{:?}", env.journal());
    let id = run_id(&env);
    let show = serde_json::from_slice::<Value>(&runs_cmd(&env, &["show", &id]).stdout).unwrap();
    assert_eq!(show["run"]["status"], "paused", "{show}");
    let rm = runs_cmd(&env, &["rm", &id]);
    let err = String::from_utf8_lossy(&rm.stderr);
    assert!(!rm.status.success() && err.contains("its owner, process") && err.contains("is live"), "{err}");
    assert!(env.sock().exists(), "the supervisor's socket is still there");
    std::fs::write(env.p("ok.flag"), "").unwrap();
    let r = env.call(serde_json::json!({"verb":"resume"}));
    assert_eq!(r["ok"], true, "{r}");
    assert_eq!(sup.wait(), 0);
}

/// The session a restarted supervisor resumes comes from the task's log
/// when liveness lost it (a cron `liveness reap` between the crash and the
/// restart): a steer is queued and resumes it, as without the reap (it was
/// refused: "no session id yet").
#[test]
fn a_restart_after_liveness_reap_still_resumes_the_tasks_session() {
    let env = Env::new("reapsid");
    env.plan(WAITING);
    let mut sup = env.start("ok");
    until("a's gate", || env.last("a").as_deref() == Some("implemented"));
    let sid = env.live()["tasks"]["a"]["session_id"].as_str().expect("a session id").to_string();
    sup.kill9();
    until("a's processes gone", || {
        Command::new(env!("CARGO_BIN_EXE_liveness"))
            .args(["--runstate", env.p("runstate").to_str().unwrap(), "reap", "p"])
            .output()
            .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).contains("\"a\""))
    });
    assert!(env.live()["tasks"]["a"].is_null(), "reaped: {}", env.live());
    let mut again = env.start("ok");
    until("the restart's socket", || UnixStream::connect(env.sock()).is_ok());
    let r = env.call(serde_json::json!({"verb":"steer","task":"a","msg":"more"}));
    assert_eq!(r["ok"], true, "{r}");
    std::fs::write(env.p("ok.flag"), "").unwrap();
    assert_eq!(again.wait(), 0);
    let argv = env.argv();
    assert!(argv.last().is_some_and(|a| a.contains(&format!("--resume {sid}"))), "{argv:?}");
}

/// A supervisor that takes a command and does not answer in time (it is
/// stopped): the route's 502 says so, and is not kept under its key, so the
/// retry reaches the supervisor, which runs the command once (its own keys).
#[test]
fn a_stopped_supervisor_gets_a_502_that_a_retry_gets_past() {
    let env = Env::new("stopped");
    env.plan(WAITING);
    let mut sup = env.start("ok");
    until("a's gate", || env.last("a").as_deref() == Some("implemented"));
    let mut cmd = support::Server::command();
    cmd.env("HARNESS_HOME", env.p("home")).env("RUNWIRE_CONTROL_TIMEOUT_MS", "700");
    let srv = support::Server::spawn(cmd);
    let path = format!("/runs/{}/pause", run_id(&env));
    let spid = nix::unistd::Pid::from_raw(sup.pid());
    nix::sys::signal::kill(spid, nix::sys::signal::Signal::SIGSTOP).unwrap();
    let r = srv.request("POST", &path, "Idempotency-Key: pause-1\r\n", "");
    nix::sys::signal::kill(spid, nix::sys::signal::Signal::SIGCONT).unwrap();
    let body = String::from_utf8_lossy(&r.body).into_owned();
    assert_eq!(r.status, 502, "{body}");
    assert!(body.contains("did not answer within 700 ms"), "{body}");
    let again = srv.request("POST", &path, "Idempotency-Key: pause-1\r\n", "");
    assert_eq!(again.status, 200, "{}", String::from_utf8_lossy(&again.body));
    assert_ne!(again.header("idempotent-replayed"), Some("true"), "the 502 was kept");
    let paused = env.journal().iter().filter(|r| r["run"] == "paused").count();
    assert_eq!(paused, 1, "paused once: {:?}", env.journal());
    std::fs::write(env.p("ok.flag"), "").unwrap();
    env.call(serde_json::json!({"verb":"resume"}));
    assert_eq!(sup.wait(), 0);
}

#[test]
fn kill_9_of_the_supervisor_then_restart_finishes_without_redoing() {
    let env = Env::new("crash");
    env.plan(
        r#"{"v":"plan/v1","tasks":[{"id":"a","adapter":"claude","prompt":"x"},
            {"id":"b","adapter":"claude","prompt":"y","deps":["a"],"gate":"test -f ok.flag || exec sleep 100"}]}"#,
    );
    let mut sup = env.start("ok");
    // The liveness pid is the run's reaper; the gate is its child once it
    // is the `sleep` the gate execs.
    let sleeping = || {
        let reaper = pid_of(&env, "b")?;
        children(reaper)
            .into_iter()
            .find(|p| std::fs::read(format!("/proc/{p}/cmdline")).is_ok_and(|c| c.starts_with(b"sleep\0")))
    };
    until("b's gate", || sleeping().is_some());
    let gate = sleeping().unwrap();
    let sock = env.sock();
    sup.kill9();
    // The parent-death signal stops the gate: nothing is orphaned.
    // Gone entirely (reaped by init, not a zombie), as `liveness reap` judges by signal 0.
    let reaper = pid_of(&env, "b").unwrap();
    until("the gate and its reaper to die with their supervisor", || {
        [gate, reaper].iter().all(|p| !std::path::Path::new(&format!("/proc/{p}")).exists())
    });
    let r = Command::new(env!("CARGO_BIN_EXE_liveness"))
        .args(["--runstate", env.p("runstate").to_str().unwrap(), "reap", "p"])
        .output()
        .unwrap();
    let reaped: Vec<Value> =
        String::from_utf8_lossy(&r.stdout).lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(reaped.len(), 1, "{reaped:?}");
    assert_eq!((reaped[0]["task"].as_str(), reaped[0]["last_state"].as_str()), (Some("b"), Some("implemented")));
    assert!(sock.exists() && UnixStream::connect(&sock).is_err(), "a stale socket nobody answers");
    let srv = serve(&env, &[]);
    let id = run_id(&env);
    for path in [format!("/runs/{id}/pause"), format!("/runs/{id}/tasks/b/kill")] {
        let (code, v) = srv.post_with(&path, "", "");
        assert_eq!(
            (code, v),
            (409, serde_json::json!({"ok":false,"detail":"run not supervised / not live"})),
            "{path}"
        );
    }
    let (code, _) = srv.post_with(&format!("/runs/{id}/tasks/b/steer"), JSON, r#"{"msg":"m"}"#);
    assert_eq!(code, 409);
    std::fs::write(env.p("ok.flag"), "").unwrap();
    let mut again = env.start("ok");
    assert_eq!(again.wait(), 0);
    assert_eq!(env.last("b").as_deref(), Some("committed"));
    let argv = env.argv();
    assert_eq!(argv.iter().filter(|l| l.contains("-- x ")).count(), 1, "a is not redone: {argv:?}");
    assert_eq!(env.states("a"), ["leased", "implemented", "committed"]);
    // b's turn had finished: only its gate, in flight at the crash, runs again.
    assert_eq!(argv.len(), 2, "{argv:?}");
    assert_eq!(env.states("b"), ["leased", "implemented", "gated", "committed"]);
    no_stub_left(&env);
}

/// Every view of a run: `runs list`'s line, `runs show`'s `run`, `GET /runs`'
/// item and `GET /runs/:id`'s `run`.
fn every_view(env: &Env, srv: &Server, id: &str) -> Vec<(&'static str, Value)> {
    let runs = |args: &[&str]| -> Value {
        let o =
            Command::new(env!("CARGO_BIN_EXE_runs")).args(args).env("HARNESS_HOME", env.p("home")).output().unwrap();
        assert!(o.status.success(), "runs {args:?}: {}", String::from_utf8_lossy(&o.stderr));
        serde_json::from_slice(String::from_utf8_lossy(&o.stdout).lines().next().unwrap().as_bytes()).unwrap()
    };
    let (code, listed) = srv.get("/runs");
    assert_eq!(code, 200, "{listed}");
    let (code, shown) = srv.get(&format!("/runs/{id}"));
    assert_eq!(code, 200, "{shown}");
    vec![
        ("runs list", runs(&["list"])),
        ("runs show", runs(&["show", id])["run"].clone()),
        ("GET /runs", listed["runs"][0].clone()),
        ("GET /runs/:id", shown["run"].clone()),
    ]
}

/// A supervisor stopped (SIGSTOP, a terminal's Ctrl-Z) runs nothing and
/// takes no command until it is continued: every view says
/// `"supervisor":"stopped"` with why and how to continue it, the status
/// still the journal's; continued, it is live again and the run goes on.
/// Before, it read `live` while nothing it ran could act.
#[test]
fn a_stopped_supervisors_run_says_so_in_every_view_until_it_continues() {
    use nix::sys::signal::{kill, Signal};
    let env = Env::new("supstop");
    env.plan(WAITING);
    let mut sup = env.start("ok");
    until("a's gate", || env.last("a").as_deref() == Some("implemented"));
    let id = run_id(&env);
    let srv = serve(&env, &[]);
    let pid = sup.pid();
    kill(nix::unistd::Pid::from_raw(pid), Signal::SIGSTOP).unwrap();
    let why = format!(
        "its supervisor (pid {pid}) is stopped (SIGSTOP, or Ctrl-Z in its terminal): it takes no command and runs \
         nothing on until it continues (kill -CONT {pid}, or fg)"
    );
    let views = every_view(&env, &srv, &id);
    kill(nix::unistd::Pid::from_raw(pid), Signal::SIGCONT).unwrap();
    for (view, run) in views {
        assert_eq!(run["status"], "running", "{view}: the status stays the journal's: {run}");
        assert_eq!(
            (run["supervisor"].as_str(), run["reason"].as_str()),
            (Some("stopped"), Some(why.as_str())),
            "{view}"
        );
    }
    for (view, run) in every_view(&env, &srv, &id) {
        assert_eq!((run["supervisor"].as_str(), &run["reason"]), (Some("live"), &Value::Null), "{view}: {run}");
    }
    std::fs::write(env.p("ok.flag"), "").unwrap();
    assert_eq!(sup.wait(), 0);
}

/// A supervisor killed with SIGKILL journals nothing: its run stays
/// `running` (the journal's status), and every view says beside it that its
/// supervisor is gone and what to do; started again on the plan, the
/// supervisor is live again, and once the run ends no view says either.
#[test]
fn a_killed_supervisors_run_says_its_supervisor_is_gone_in_every_view() {
    let env = Env::new("supgone");
    env.plan(WAITING);
    let mut sup = env.start("ok");
    until("a's gate", || env.last("a").as_deref() == Some("implemented"));
    let id = run_id(&env);
    let srv = serve(&env, &[]);
    for (view, run) in every_view(&env, &srv, &id) {
        assert_eq!(
            (run["status"].as_str(), run["supervisor"].as_str()),
            (Some("running"), Some("live")),
            "{view}: {run}"
        );
        assert_eq!(run["reason"], Value::Null, "{view}: {run}");
    }
    let pid = sup.pid();
    sup.kill9();
    // Its owner record stays behind, naming the process that is gone.
    let owner: Value =
        serde_json::from_str(&std::fs::read_to_string(env.p(&format!("home/sock/{id}.owner.json"))).unwrap()).unwrap();
    assert_eq!(owner["supervisor"]["pid"], pid);
    let why = format!(
        "its supervisor (pid {pid}) is gone: nothing runs it; start runwire-supervise on its plan again to continue"
    );
    for (view, run) in every_view(&env, &srv, &id) {
        assert_eq!(run["status"], "running", "{view}: the status stays the journal's: {run}");
        assert_eq!((run["supervisor"].as_str(), run["reason"].as_str()), (Some("gone"), Some(why.as_str())), "{view}");
    }
    // The status filters are the statuses' alone.
    let (_, listed) = srv.get("/runs?status=running");
    assert_eq!(listed["runs"][0]["supervisor"], "gone", "{listed}");
    let mut again = env.start("ok");
    until("the supervisor again", || {
        every_view(&env, &srv, &id).iter().all(|(_, run)| run["supervisor"] == "live" && run["reason"].is_null())
    });
    std::fs::write(env.p("ok.flag"), "").unwrap();
    assert_eq!(again.wait(), 0);
    for (view, run) in every_view(&env, &srv, &id) {
        assert_eq!(run["status"], "done", "{view}: {run}");
        assert!(run.get("supervisor").is_none() && run["reason"].is_null(), "{view}: {run}");
    }
}

/// The feed's next event about run `id` with run record `record`, within
/// `limit` (the events before it passed over).
fn feed_record(feed: &mut support::sse::Reader<std::net::TcpStream>, id: &str, record: &str, limit: Duration) -> Value {
    let end = Instant::now() + limit;
    loop {
        let left = end.saturating_duration_since(Instant::now());
        let f = feed.next_frame_within(left).unwrap_or_else(|| panic!("no {record} event for {id} in {limit:?}"));
        if f.kind() == "ready" {
            continue;
        }
        let ev: Value = serde_json::from_str(&f.data).unwrap();
        if ev["runId"] == id && ev["record"] == record {
            return ev;
        }
    }
}

/// A supervisor's death is news (spec/LAYOUT.md, "Who runs a run"): with
/// two servers up on its home, a supervisor SIGKILLed gets one
/// `supervisor-gone` record in its journal, which an open feed delivers
/// within seconds as a `run` event with the run's status unchanged; a
/// supervisor started again on the plan is live again, in the feed too.
#[test]
fn a_supervisor_killed_while_servers_run_is_one_journal_record_and_a_feed_event() {
    let env = Env::new("supnews");
    env.plan(WAITING);
    let mut sup = env.start("ok");
    until("a's gate", || env.last("a").as_deref() == Some("implemented"));
    let id = run_id(&env);
    let srv = serve(&env, &[]);
    let second = serve(&env, &[]);
    let mut s = std::net::TcpStream::connect(("127.0.0.1", srv.port)).unwrap();
    s.set_read_timeout(Some(LIMIT)).unwrap();
    write!(s, "GET /runs/events HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").unwrap();
    let mut feed = support::sse::Reader::new(s);
    assert_eq!(feed.status(), 200);
    let ready = feed.next_frame_within(LIMIT).expect("the feed's ready");
    assert_eq!(ready.kind(), "ready", "{ready:?}");
    let pid = sup.pid();
    sup.kill9();
    let why = format!(
        "its supervisor (pid {pid}) is gone: nothing runs it; start runwire-supervise on its plan again to continue"
    );
    let ev = feed_record(&mut feed, &id, "supervisor-gone", Duration::from_secs(10));
    assert_eq!(
        (ev["type"].as_str(), ev["actor"].as_str(), ev["detail"].as_str()),
        (Some("run"), Some("runwire-serve"), Some(why.as_str())),
        "{ev}"
    );
    // The record says nothing of the run's state; the summary says who runs it.
    assert_eq!((ev["status"].as_str(), ev["previous"].as_str()), (Some("running"), Some("running")), "{ev}");
    assert_eq!((ev["supervisor"].as_str(), ev["reason"].as_str()), (Some("gone"), Some(why.as_str())), "{ev}");
    // Both servers look every 2 s: after a few rounds each, still one record.
    std::thread::sleep(Duration::from_secs(5));
    let notes = env.journal().iter().filter(|r| r["run"] == "supervisor-gone").count();
    assert_eq!(notes, 1, "{:?}", env.journal());
    for (view, run) in every_view(&env, &srv, &id) {
        assert_eq!(run["status"], "running", "{view}: {run}");
        assert_eq!((run["supervisor"].as_str(), run["reason"].as_str()), (Some("gone"), Some(why.as_str())), "{view}");
    }
    let mut again = env.start("ok");
    let ev = feed_record(&mut feed, &id, "started", LIMIT);
    assert_eq!(ev["status"], "running", "{ev}");
    assert!(ev.get("supervisor").is_none() && ev["reason"].is_null(), "live again: {ev}");
    until("the supervisor again", || {
        every_view(&env, &srv, &id).iter().all(|(_, run)| run["supervisor"] == "live" && run["reason"].is_null())
    });
    std::fs::write(env.p("ok.flag"), "").unwrap();
    assert_eq!(again.wait(), 0);
    assert_eq!(env.journal().iter().filter(|r| r["run"] == "supervisor-gone").count(), 1);
    drop(second);
}

/// A supervisor dead before its run's first record (the run `registered`,
/// its journal empty, its owner record left): the server's watch journals
/// nothing for it, so the run stays `registered` (and a supervisor started
/// again starts it, not "restarted"), while every view says its supervisor
/// is gone, judged when read. Before, the watch's record made it `running`.
#[test]
fn a_supervisor_dead_before_its_first_record_leaves_its_run_registered() {
    let env = Env::new("supnews-registered");
    env.plan(WAITING);
    let mut sup = env.start("ok");
    until("a's gate", || env.last("a").as_deref() == Some("implemented"));
    let id = run_id(&env);
    sup.kill9();
    // As a kill before the first record leaves it: the journal empty.
    std::fs::write(env.p("runstate/p.jsonl"), "").unwrap();
    let srv = serve(&env, &[]);
    // The watch looks every 2 s: a few rounds.
    std::thread::sleep(Duration::from_secs(5));
    assert_eq!(std::fs::read_to_string(env.p("runstate/p.jsonl")).unwrap(), "", "nothing journaled");
    for (view, run) in every_view(&env, &srv, &id) {
        assert_eq!(
            (run["status"].as_str(), run["supervisor"].as_str()),
            (Some("registered"), Some("gone")),
            "{view}: {run}"
        );
    }
}

// ---- through runwire-serve ----

/// runwire-serve with what these tests ask of it.
fn serve(env: &Env, args: &[&str]) -> Server {
    let mut cmd = Server::command();
    cmd.args(args).env("HARNESS_HOME", env.p("home"));
    Server::spawn(cmd)
}

fn run_id(env: &Env) -> String {
    let e = std::fs::read_dir(env.p("home/runs")).unwrap().flatten().next().unwrap();
    e.file_name().to_string_lossy().trim_end_matches(".json").to_string()
}

const JSON: &str = "Content-Type: application/json\r\n";

#[test]
fn routes_reach_the_supervisor_and_answer_409_without_one() {
    let env = Env::new("routes");
    env.plan(r#"{"v":"plan/v1","tasks":[{"id":"a","adapter":"claude","prompt":"x"},{"id":"b","adapter":"claude","prompt":"y","deps":["a"]}]}"#);
    std::fs::write(env.p("token"), "0123456789abcdef0123").unwrap();
    let mut sup = env.start("hang");
    until("the hanging engine", || env.stub_pids().len() >= 2 && pid_of(&env, "a").is_some());
    let id = run_id(&env);
    let srv = serve(&env, &["--token-file", env.p("token").to_str().unwrap()]);
    let auth = "Authorization: Bearer 0123456789abcdef0123\r\n";
    let with = |h: &str| format!("{auth}{h}");
    // The /agui boundary: token, Origin, media type.
    assert_eq!(srv.post_with(&format!("/runs/{id}/pause"), "", "").0, 401);
    assert_eq!(srv.post_with(&format!("/runs/{id}/pause"), &with("Origin: http://evil.example\r\n"), "").0, 403);
    let steer = format!("/runs/{id}/tasks/a/steer");
    assert_eq!(srv.post_with(&steer, &with("Content-Type: text/plain\r\n"), r#"{"msg":"m"}"#).0, 415);
    assert_eq!(srv.post_with(&steer, &with(JSON), r#"{"msg":"m","bogus":1}"#).0, 400);
    let (code, v) = srv.post_with(&format!("/runs/{id}/pause"), auth, "");
    assert_eq!((code, v["ok"].as_bool()), (200, Some(true)), "{v}");
    let (code, v) = srv.post_with(&format!("/runs/{id}/resume"), auth, "");
    assert_eq!((code, v["ok"].as_bool()), (200, Some(true)), "{v}");
    let (code, v) = srv.post_with(&format!("/runs/{id}/tasks/b/steer"), &with(JSON), r#"{"msg":"m"}"#);
    assert_eq!((code, v["ok"].as_bool()), (409, Some(false)), "{v}");
    let (code, v) = srv.post_with(&format!("/runs/{id}/tasks/a/kill"), auth, "");
    assert_eq!((code, v["state"].as_str()), (200, Some("halted")), "{v}");
    no_stub_left(&env);
    assert_eq!(sup.wait(), 1);
    let j = env.journal();
    assert!(j.iter().any(|r| r["task"] == "a" && r["state"] == "halted" && r["actor"] == "runwire-serve"));
    assert!(j.iter().any(|r| r["run"] == "paused") && j.iter().any(|r| r["run"] == "resumed"));
    // Nobody answers now.
    for path in [format!("/runs/{id}/pause"), format!("/runs/{id}/tasks/a/kill")] {
        let (code, v) = srv.post_with(&path, auth, "");
        assert_eq!(
            (code, v),
            (409, serde_json::json!({"ok":false,"detail":"run not supervised / not live"})),
            "{path}"
        );
    }
    // The run has ended (its supervisor exited): a steer inbox beside it
    // takes nothing, as the supervisor took nothing for a halted task.
    std::fs::write(env.p("runstate/p.steer.jsonl"), "").unwrap();
    let (code, v) = srv.post_with(&steer, &with(JSON), r#"{"msg":"later","interrupt":true}"#);
    assert_eq!(code, 409, "{v}");
    assert!(v["detail"].as_str().unwrap().contains("task a is halted"), "{v}");
    let (code, v) = srv.post_with(&format!("/runs/{id}/pause"), auth, "");
    assert_eq!(code, 409, "{v}");
    assert!(v["detail"].as_str().unwrap().contains("the run is failed"), "{v}");
    assert_eq!(std::fs::read_to_string(env.p("runstate/p.steer.jsonl")).unwrap(), "");
}

/// A run without a supervisor whose runner declared a steer inbox: the
/// server appends steer, pause and resume there on a supervisor's terms
/// (a task of the run, not ended, a run not ended), never kill, and never
/// through a link the agent planted in its directory.
#[test]
fn a_steer_inbox_takes_what_a_supervisor_would_and_is_never_followed_out() {
    let env = Env::new("inbox");
    let tasks = r#"{"v":"plan/v1","tasks":[{"id":"a","adapter":"claude","prompt":"x"},{"id":"b","adapter":"claude","prompt":"y"}]}"#;
    let (id, rs) = support::register_run(&env.p("home"), "p", &env.dir, tasks);
    let record = |rec: &str| {
        let mut f = std::fs::OpenOptions::new().create(true).append(true).open(rs.join("p.jsonl")).unwrap();
        writeln!(f, r#"{{"v":"runstate/v1","ts":"2026-03-01T10:00:00.000Z","actor":"runner",{rec}}}"#).unwrap();
    };
    record(r#""run":"started""#);
    record(r#""task":"a","state":"leased""#);
    record(r#""task":"b","state":"failed""#);
    let inbox = rs.join("p.steer.jsonl");
    std::fs::write(&inbox, "").unwrap();
    let srv = serve(&env, &[]);
    let post = |path: &str, body: &str| srv.post_with(&format!("/runs/{id}{path}"), JSON, body);
    let lines = || {
        std::fs::read_to_string(&inbox)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect::<Vec<Value>>()
    };
    assert_eq!(post("/tasks/a/steer", r#"{"msg":"later","interrupt":true}"#).0, 202);
    assert_eq!(post("/pause", "").0, 202);
    assert_eq!(post("/tasks/a/kill", "").0, 409);
    // A task the run does not have, and one that ended.
    let (code, v) = post("/tasks/zz/steer", r#"{"msg":"m"}"#);
    assert_eq!((code, v["detail"].as_str()), (409, Some(r#"no task "zz" in this run"#)), "{v}");
    let (code, v) = post("/tasks/b/steer", r#"{"msg":"m"}"#);
    assert_eq!((code, v["state"].as_str()), (409, Some("failed")), "{v}");
    let got = lines();
    assert_eq!(got.len(), 2, "{got:?}");
    assert_eq!(
        (got[0]["verb"].as_str(), got[0]["task"].as_str(), got[0]["msg"].as_str()),
        (Some("steer"), Some("a"), Some("later"))
    );
    assert_eq!(got[1]["verb"], "pause");
    // The agent writes its directory: an inbox made a link to a file of the
    // server's user elsewhere, or to the run's own journal, is not written.
    let victim = env.p("victim.txt");
    std::fs::write(&victim, "precious\n").unwrap();
    let journal_before = std::fs::read(rs.join("p.jsonl")).unwrap();
    for target in [victim.clone(), rs.join("p.jsonl")] {
        std::fs::remove_file(&inbox).unwrap();
        std::os::unix::fs::symlink(&target, &inbox).unwrap();
        for (path, body) in [("/tasks/a/steer", r#"{"msg":"through a link"}"#), ("/pause", ""), ("/resume", "")] {
            let (code, v) = post(path, body);
            assert_eq!((code, v["ok"].as_bool()), (409, Some(false)), "{path} via {}: {v}", target.display());
        }
    }
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious\n");
    assert_eq!(std::fs::read(rs.join("p.jsonl")).unwrap(), journal_before);
    // A regular inbox again; then the run ends: nothing reads the inbox now.
    std::fs::remove_file(&inbox).unwrap();
    std::fs::write(&inbox, "").unwrap();
    assert_eq!(post("/resume", "").0, 202);
    record(r#""task":"a","state":"committed""#);
    record(r#""run":"ended""#);
    let (code, v) = post("/resume", "");
    assert_eq!(code, 409, "{v}");
    assert!(v["detail"].as_str().unwrap().starts_with("the run is "), "{v}");
    assert_eq!(lines().len(), 1);
}

/// The ways a command reaches a steer inbox ([`an_inbox_takes_nothing_past_its_budget`]).
#[derive(Clone, Copy, Debug)]
enum InboxDoor {
    /// `POST /runs/:id/tasks/a/steer`, by a person's token.
    TaskRoute,
    /// `POST /runs/:id/pause` and `/resume`.
    RunRoutes,
    /// A hub's command, as the node's cluster sidecar makes it to its own
    /// server (the `cluster` token, `Rw-Actor`, `Rw-Hub`: cluster/src/forward.rs).
    Hub,
}

/// `n` bytes of lines no runner takes for a command.
fn filler(n: u64) -> Vec<u8> {
    let mut b = vec![b'x'; n as usize];
    for i in (4095..b.len()).step_by(4096) {
        b[i] = b'\n';
    }
    if let Some(last) = b.last_mut() {
        *last = b'\n';
    }
    b
}

/// A steer inbox may hold what a supervised run's journal may of steers
/// (8 MiB, `STEER_BUDGET`), whichever `door` the command came in by: a line
/// that would take it past that is `409` with the supervisor's refusal
/// shape (`ok:false`, no `code`), saying so, and the file is untouched; a
/// line that brings it exactly to the budget is taken; a file already past
/// it (written by hand, or by a server that had no budget) refuses
/// everything, by its size (a sparse 16 GiB file: its bytes are not read).
fn an_inbox_takes_nothing_past_its_budget(name: &str, door: InboxDoor) {
    const BUDGET: u64 = 8 * 1024 * 1024;
    let env = Env::new(name);
    let tasks = r#"{"v":"plan/v1","tasks":[{"id":"a","adapter":"claude","prompt":"x"}]}"#;
    let (id, rs) = support::register_run(&env.p("home"), "p", &env.dir, tasks);
    let mut f = std::fs::OpenOptions::new().create(true).append(true).open(rs.join("p.jsonl")).unwrap();
    for rec in [r#""run":"started""#, r#""task":"a","state":"leased""#] {
        writeln!(f, r#"{{"v":"runstate/v1","ts":"2026-03-01T10:00:00.000Z","actor":"runner",{rec}}}"#).unwrap();
    }
    drop(f);
    let inbox = rs.join("p.steer.jsonl");
    std::fs::write(env.p("tokens"), "ana:0123456789abcdef-ana\ncluster:0123456789abcdef-cluster\n").unwrap();
    let srv = serve(&env, &["--token-file", env.p("tokens").to_str().unwrap()]);
    let steer = format!(r#"{{"msg":"{}"}}"#, "y".repeat(2000));
    let (headers, actor, commands) = match door {
        InboxDoor::TaskRoute => {
            ("Authorization: Bearer 0123456789abcdef-ana\r\n", "ana", vec![("/tasks/a/steer", steer)])
        }
        InboxDoor::RunRoutes => (
            "Authorization: Bearer 0123456789abcdef-ana\r\n",
            "ana",
            vec![("/pause", String::new()), ("/resume", String::new())],
        ),
        InboxDoor::Hub => (
            "Authorization: Bearer 0123456789abcdef-cluster\r\nRw-Actor: bob\r\nRw-Hub: east\r\n",
            "bob@east",
            vec![("/tasks/a/steer", steer), ("/pause", String::new())],
        ),
    };
    for (path, body) in &commands {
        let post = || srv.post_with(&format!("/runs/{id}{path}"), &format!("{headers}{JSON}"), body);
        // The line this command appends, and that it came in by this door.
        std::fs::write(&inbox, "").unwrap();
        let (code, v) = post();
        assert_eq!(code, 202, "{door:?} {path}: {v}");
        let line = std::fs::read(&inbox).unwrap();
        let rec: Value = serde_json::from_slice(&line).unwrap();
        assert_eq!(rec["actor"], actor, "{door:?} {path}: {rec}");
        let len = line.len() as u64;
        // One byte short of the room it needs: refused, nothing written.
        let full = filler(BUDGET - len + 1);
        std::fs::write(&inbox, &full).unwrap();
        let (code, v) = post();
        assert_eq!((code, v["ok"].as_bool(), v.get("code")), (409, Some(false), None), "{door:?} {path}: {v}");
        let detail = v["detail"].as_str().unwrap_or_default();
        assert!(
            detail.contains("steer inbox") && detail.contains("8388608") && detail.contains("nothing was written"),
            "{door:?} {path}: {v}"
        );
        assert!(std::fs::read(&inbox).unwrap() == full, "{door:?} {path}: the inbox was written");
        // Exactly the room it needs: taken, the inbox at the budget.
        std::fs::write(&inbox, filler(BUDGET - len)).unwrap();
        let (code, v) = post();
        assert_eq!(code, 202, "{door:?} {path}: {v}");
        assert_eq!(std::fs::metadata(&inbox).unwrap().len(), BUDGET, "{door:?} {path}");
        // Already past the budget: refused by its size.
        std::fs::write(&inbox, "").unwrap();
        std::fs::File::options().write(true).open(&inbox).unwrap().set_len(16 << 30).unwrap();
        let (code, v) = post();
        assert_eq!((code, v["ok"].as_bool()), (409, Some(false)), "{door:?} {path}: {v}");
        assert_eq!(std::fs::metadata(&inbox).unwrap().len(), 16 << 30, "{door:?} {path}: the inbox was written");
    }
    std::fs::remove_file(&inbox).unwrap();
}

#[test]
fn a_steer_inbox_takes_nothing_past_its_budget_through_the_task_route() {
    an_inbox_takes_nothing_past_its_budget("inbox-task", InboxDoor::TaskRoute);
}

#[test]
fn a_steer_inbox_takes_nothing_past_its_budget_through_the_run_routes() {
    an_inbox_takes_nothing_past_its_budget("inbox-run", InboxDoor::RunRoutes);
}

#[test]
fn a_steer_inbox_takes_nothing_past_its_budget_through_a_hubs_command() {
    an_inbox_takes_nothing_past_its_budget("inbox-hub", InboxDoor::Hub);
}

#[test]
fn steer_with_interrupt_stops_the_turn_and_resumes_with_the_message() {
    let env = Env::new("intr");
    env.plan(r#"{"v":"plan/v1","tasks":[{"id":"a","adapter":"claude","prompt":"long"}]}"#);
    let mut cmd = env.cmd("ok");
    // 50 lines, 0.2 s apart: a turn of 10 s unless interrupted.
    cmd.env("STUB_DELAY", "0.2");
    let mut sup = Sup { child: Some(cmd.spawn().unwrap()) };
    until("a session id", || env.live()["tasks"]["a"]["session_id"].is_string());
    let sid = env.live()["tasks"]["a"]["session_id"].as_str().unwrap().to_string();
    let t0 = Instant::now();
    let r = env.call(serde_json::json!({"verb":"steer","task":"a","msg":"short","interrupt":true}));
    assert_eq!(r["ok"], true, "{r}");
    until("the resumed turn", || env.argv().len() == 2);
    assert!(t0.elapsed() < Duration::from_secs(8), "the first turn was cut short");
    let argv = env.argv();
    assert!(argv[1].contains(&format!("--resume {sid}")) && argv[1].ends_with("-- short "), "{argv:?}");
    assert_eq!(sup.wait(), 0);
    assert_eq!(env.states("a"), ["leased", "leased", "implemented", "committed"]);
    no_stub_left(&env);
}

#[test]
fn kill_stops_a_group_that_ignores_sigterm() {
    let env = Env::new("ignterm");
    env.plan(r#"{"v":"plan/v1","tasks":[{"id":"a","adapter":"claude","prompt":"x"}]}"#);
    // The wrapper gets half the grace to SIGKILL its engine; our SIGKILL (and
    // the descendant sweep) would follow at the full grace.
    let mut sup = env.start("ignore-term");
    until("the engine", || env.stub_pids().len() >= 2 && pid_of(&env, "a").is_some());
    let sock = env.sock();
    let kill = std::thread::spawn(move || {
        let mut s = UnixStream::connect(&sock).unwrap();
        writeln!(s, r#"{{"verb":"kill","task":"a"}}"#).unwrap();
        let mut line = String::new();
        std::io::BufRead::read_line(&mut std::io::BufReader::new(s), &mut line).unwrap();
        serde_json::from_str::<Value>(&line).unwrap()
    });
    // The kill is taken at once and answered only once the task is reaped,
    // a second or more later (the stub ignores SIGTERM): the steer comes within.
    std::thread::sleep(Duration::from_millis(500));
    // A steer while the kill is in flight would never apply: refused, not "queued".
    let r = env.call(serde_json::json!({"verb":"steer","task":"a","msg":"m","interrupt":true}));
    assert_eq!(r["ok"], false, "{r}");
    assert!(r["detail"].as_str().unwrap().contains("being killed"), "{r}");
    let r = kill.join().unwrap();
    assert_eq!(r["state"], "halted", "{r}");
    assert!(!env.journal().iter().any(|r| r["run"] == "steer-queued"), "{:?}", env.journal());
    no_stub_left(&env);
    assert_eq!(sup.wait(), 1);
}

#[test]
fn sigterm_to_the_supervisor_halts_running_tasks_and_aborts() {
    let env = Env::new("term");
    env.plan(
        r#"{"v":"plan/v1","tasks":[{"id":"a","adapter":"claude","prompt":"x"},{"id":"b","adapter":"claude","prompt":"y"}]}"#,
    );
    let mut cmd = env.cmd("hang");
    cmd.args(["--max-parallel", "1"]);
    let mut sup = Sup { child: Some(cmd.spawn().unwrap()) };
    until("the engine", || env.stub_pids().len() >= 2 && pid_of(&env, "a").is_some());
    let pid = sup.child.as_ref().unwrap().id();
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid as i32), nix::sys::signal::Signal::SIGTERM).unwrap();
    assert_eq!(sup.wait(), 1);
    assert_eq!(env.last("a").as_deref(), Some("halted"));
    // Only what ran is halted: b, not started, is the plan's still, and the
    // same command started again runs it (it was halted, with nothing left to do).
    assert_eq!(env.states("b"), Vec::<String>::new(), "b was halted too");
    assert_eq!(env.journal().last().unwrap()["run"], "aborted");
    no_stub_left(&env);
    assert_eq!(env.start("ok").wait(), 1, "a stays halted");
    assert_eq!(env.last("b").as_deref(), Some("committed"));
}

#[test]
fn help_has_no_side_effects_and_bad_input_exits_2_with_the_error_form() {
    let env = Env::new("usage");
    let out = Command::new(env!("CARGO_BIN_EXE_runwire-supervise"))
        .arg("--help")
        .current_dir(&env.dir)
        .env("HARNESS_HOME", env.p("home"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stdout).contains("--plan"));
    assert!(!env.p("runstate").exists() && std::fs::read_dir(env.p("home")).unwrap().next().is_none());
    env.plan(r#"{"v":"plan/v1","tasks":[{"id":"a","adapter":"claude","prompt":"x","deps":["a"]}]}"#);
    let out = env.cmd("ok").stderr(Stdio::piped()).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.starts_with("runwire-supervise: p.plan.json: ") && err.contains("cycle"), "{err}");
    let out = env.cmd("ok").args(["--max-parallel", "0"]).stderr(Stdio::piped()).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(env.argv().is_empty(), "nothing ran");
}

/// A plan is checked as its schema says (`additionalProperties: false`): a
/// misspelt key is refused (exit 2, nothing run), never run as a task
/// without the gate it meant; so are arrays in place of the plan or a task,
/// which serde alone reads by position.
#[test]
fn a_plan_of_unknown_keys_or_arrays_is_refused_and_nothing_runs() {
    let env = Env::new("shape");
    for (plan, says) in [
        (
            r#"{"v":"plan/v1","tasks":[{"id":"a","adapter":"claude","prompt":"x","gates":"false"}]}"#,
            r#"task "a": unknown key "gates""#,
        ),
        (r#"{"v":"plan/v1","tasks":[{"id":"a","adapter":"claude","prompt":"x"}],"extra":1}"#, r#"unknown key "extra""#),
        (r#"["plan/v1",[{"id":"a","adapter":"claude","prompt":"x"}],null]"#, "a plan is a JSON object"),
        (r#"{"v":"plan/v1","tasks":[["a","claude","x"]]}"#, "task 1: a task is a JSON object"),
    ] {
        env.plan(plan);
        let out = env.cmd("ok").stderr(Stdio::piped()).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{plan}: {err}");
        assert!(err.starts_with("runwire-supervise: p.plan.json: ") && err.contains(says), "{plan}: {err}");
    }
    assert!(env.argv().is_empty(), "nothing ran");
    assert!(!env.p("home/runs").exists() || std::fs::read_dir(env.p("home/runs")).unwrap().next().is_none());
    // The gate spelt right: the task halts on it.
    env.plan(r#"{"v":"plan/v1","tasks":[{"id":"a","adapter":"claude","prompt":"x","gate":"false"}]}"#);
    assert_eq!(env.start("ok").wait(), 1);
}

/// A plan of no tasks runs to its end: the run lists `done` (it listed
/// `running` for ever, and `runs rm` refused it as running).
#[test]
fn a_finished_plan_of_no_tasks_lists_done_and_can_be_removed() {
    let env = Env::new("ended");
    env.plan(r#"{"v":"plan/v1","tasks":[]}"#);
    assert_eq!(env.start("ok").wait(), 0);
    let id = run_id(&env);
    let show = serde_json::from_slice::<Value>(&runs_cmd(&env, &["show", &id]).stdout).unwrap();
    assert_eq!(show["run"]["status"], "done", "{show}");
    let rm = runs_cmd(&env, &["rm", &id]);
    assert!(rm.status.success(), "{rm:?}");
}

/// A supervisor whose journal fills its disk (a real tmpfs under the
/// runstate directory; the gate fills it, once) finishes its tasks, exits 3
/// saying the journal is short and how to mend it, and leaves a journal of
/// whole lines (a short write used to leave a torn record, and the exit was
/// 1, "a task halted", with the run listed `running`). Started again once
/// there is room, the same command ends the run.
#[test]
#[cfg_attr(not(tool = "root"), ignore = "needs root, to mount a small tmpfs (CI runs as root)")]
fn a_journal_that_fills_its_disk_exits_3_with_whole_lines_and_a_restart_mends_it() {
    support::need(&["root"]);
    let env = Env::new("full");
    let rs = env.p("runstate");
    let _u = support::Tmpfs::mount(&rs, "size=8m");
    let fill = "test -f filled || { touch filled; dd if=/dev/zero of=runstate/fill bs=4k 2>/dev/null; }; true";
    // Forty tasks: their records outgrow the journal's last page, which
    // the filled disk cannot give another.
    let tasks: Vec<Value> = (0..40)
        .map(|i| serde_json::json!({"id": format!("t{i}"), "adapter": "claude", "prompt": "x", "gate": fill}))
        .collect();
    env.plan(&serde_json::json!({"v": "plan/v1", "tasks": tasks}).to_string());
    let out = env.cmd("ok").stderr(Stdio::piped()).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert!(err.contains("could not be written") && err.contains("start the same command again"), "{err}");
    let journal = std::fs::read(rs.join("p.jsonl")).unwrap();
    assert!(journal.ends_with(b"\n"), "whole lines:\n{}", String::from_utf8_lossy(&journal));
    for l in journal.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
        assert!(serde_json::from_slice::<Value>(l).is_ok(), "a torn record: {}", String::from_utf8_lossy(l));
    }
    let show = serde_json::from_slice::<Value>(&runs_cmd(&env, &["show", &run_id(&env)]).stdout).unwrap();
    assert_eq!(show["run"]["status"], "running", "the journal could not say more: {show}");
    std::fs::remove_file(rs.join("fill")).unwrap();
    // Tasks whose logs the full disk refused halted (journaled while the
    // journal's page had room): the run ends failed or done, never running.
    let out = env.cmd("ok").stderr(Stdio::piped()).output().unwrap();
    assert!(matches!(out.status.code(), Some(0 | 1)), "{}", String::from_utf8_lossy(&out.stderr));
    let show = serde_json::from_slice::<Value>(&runs_cmd(&env, &["show", &run_id(&env)]).stdout).unwrap();
    assert!(matches!(show["run"]["status"].as_str(), Some("done" | "failed")), "{show}");
    assert_eq!(env.journal().last().unwrap()["run"], "finished");
}

// ---- what the supervisor reads from a turn's output ----

/// A wrapper of our own in `<env>/w`: the N-th turn of task T prints
/// `T.N.out` byte for byte (so a test can end it without a newline, or with
/// no status line at all) and exits with `T.N.rc`; its argv goes to `T.argv`.
fn scripted_wrapper(env: &Env) -> PathBuf {
    let w = env.p("w");
    std::fs::create_dir_all(&w).unwrap();
    let script = r#"#!/bin/sh
d=$(dirname "$0")
t=$RUNWIRE_TASK
n=$(( $(cat "$d/$t.calls" 2>/dev/null || echo 0) + 1 ))
echo "$n" > "$d/$t.calls"
printf '%s\n' "$*" >> "$d/$t.argv"
cat "$d/$t.$n.out"
exit "$(cat "$d/$t.$n.rc")"
"#;
    let p = w.join("claude.sh");
    std::fs::write(&p, script).unwrap();
    std::fs::set_permissions(&p, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    w
}

fn script_turn(w: &std::path::Path, task: &str, n: u32, out: &str, rc: i32) {
    std::fs::write(w.join(format!("{task}.{n}.out")), out).unwrap();
    std::fs::write(w.join(format!("{task}.{n}.rc")), rc.to_string()).unwrap();
}

fn start_with(env: &Env, w: &std::path::Path) -> Sup {
    let mut c = env.cmd("ok");
    c.arg("--wrapper-dir").arg(w);
    Sup { child: Some(c.spawn().unwrap()) }
}

/// The detail of the task's last journal record.
fn last_detail(env: &Env, task: &str) -> Option<String> {
    env.journal().iter().rev().find(|r| r["task"] == task).and_then(|r| r["detail"].as_str().map(str::to_string))
}

#[test]
fn a_session_only_the_status_line_names_is_resumed_and_a_turn_without_one_has_no_detail() {
    let env = Env::new("stonly");
    env.plan(
        r#"{"v":"plan/v1","tasks":[{"id":"a","adapter":"claude","prompt":"x","gate":"echo g >> gates.txt; sleep 1"}]}"#,
    );
    let w = scripted_wrapper(&env);
    // No init: the session is one the stream never announced (cursor's
    // create-chat id after a turn that failed early is such a case).
    let status = r#"{"type":"runwire.status","ok":true,"rc":0,"session_id":"only-in-status","detail":"turn completed","files":[]}"#;
    script_turn(&w, "a", 1, &format!("{{\"type\":\"keep_alive\"}}\n{status}\n"), 0);
    // The resumed turn dies without a status line.
    script_turn(&w, "a", 2, "{\"type\":\"system\",\"subtype\":\"init\",\"session_id\":\"only-in-status\"}\n", 3);
    let mut sup = start_with(&env, &w);
    until("the first gate", || env.p("gates.txt").exists());
    assert_eq!(env.live()["tasks"]["a"]["session_id"], "only-in-status", "{}", env.live());
    let r = env.call(serde_json::json!({"verb":"steer","task":"a","msg":"again"}));
    assert_eq!(r["ok"], true, "{r}");
    assert_eq!(sup.wait(), 1);
    let argv = std::fs::read_to_string(w.join("a.argv")).unwrap();
    assert!(argv.lines().nth(1).is_some_and(|l| l.contains("--resume only-in-status")), "{argv}");
    assert_eq!(env.states("a"), ["leased", "implemented", "gated", "leased", "halted"]);
    // Not the first turn's "turn completed": that turn's status is not this one's.
    assert_eq!(last_detail(&env, "a").as_deref(), Some("wrapper exited 3"));
}

#[test]
fn cut_and_unterminated_last_lines_and_ids_no_engine_confirmed() {
    let env = Env::new("cut");
    env.plan(
        r#"{"v":"plan/v1","tasks":[{"id":"a","adapter":"claude","prompt":"x","gate":"echo g >> gates.txt; sleep 1"},
            {"id":"b","adapter":"claude","prompt":"y"},{"id":"c","adapter":"claude","prompt":"z"}]}"#,
    );
    let w = scripted_wrapper(&env);
    let init = r#"{"type":"system","subtype":"init","session_id":"s-init","model":"m"}"#;
    let cut = r#"{"type":"runwire.status","ok":false,"rc":1,"session_id":"s-cut","detail":"cut sh"#;
    // a: an id only a result line carries (claude after a failed --resume)
    // and a status line cut short: neither names a session to resume.
    let result = r#"{"type":"result","subtype":"success","is_error":false,"session_id":"s-carried"}"#;
    script_turn(&w, "a", 1, &format!("{result}\n{cut}"), 0);
    // b: a whole status line without its newline is still read.
    let status = r#"{"type":"runwire.status","ok":false,"rc":1,"session_id":"s-init","detail":"engine exited 1: boom","files":[]}"#;
    script_turn(&w, "b", 1, &format!("{init}\n{status}"), 1);
    // c: a cut status line has no detail to report.
    script_turn(&w, "c", 1, &format!("{init}\n{cut}"), 1);
    let mut sup = start_with(&env, &w);
    until("a's gate", || env.p("gates.txt").exists());
    assert!(env.live()["tasks"]["a"].get("session_id").is_none(), "{}", env.live());
    let r = env.call(serde_json::json!({"verb":"steer","task":"a","msg":"again"}));
    assert!(r["ok"] == false && r["detail"].as_str().unwrap().contains("no session"), "{r}");
    assert_eq!(sup.wait(), 1);
    assert_eq!(env.states("a"), ["leased", "implemented", "gated", "committed"]);
    assert_eq!(last_detail(&env, "b").as_deref(), Some("wrapper exited 1: engine exited 1: boom"));
    assert_eq!(last_detail(&env, "c").as_deref(), Some("wrapper exited 1"));
}

// ---- trust: nothing the run's agent can write finds or signals a process ----

/// The run id whose worktree is `dir` (the registry's pointer says).
fn run_id_of(env: &Env, dir: &std::path::Path) -> String {
    for e in std::fs::read_dir(env.p("home/runs")).unwrap().flatten() {
        let p: Value = serde_json::from_str(&std::fs::read_to_string(e.path()).unwrap()).unwrap();
        let root = p["repoRoot"].as_str().or(p["repo_root"].as_str()).map(PathBuf::from);
        if root.and_then(|r| r.canonicalize().ok()) == dir.canonicalize().ok() {
            return e.file_name().to_string_lossy().trim_end_matches(".json").to_string();
        }
    }
    panic!("no run registered for {}", dir.display());
}

/// Replaces the run-level `sock` of a liveness file, as the run's agent could.
fn plant_sock(live: &std::path::Path, sock: &std::path::Path) {
    let mut v: Value = serde_json::from_str(&std::fs::read_to_string(live).unwrap()).unwrap();
    v["sock"] = sock.to_str().unwrap().into();
    std::fs::write(live, v.to_string()).unwrap();
}

/// A control socket served by someone other than the supervisor (this test
/// process): it answers every request with success, as a run's agent could.
fn fake_control(at: &std::path::Path) {
    let _ = std::fs::remove_file(at);
    let l = std::os::unix::net::UnixListener::bind(at).unwrap();
    std::thread::spawn(move || {
        for c in l.incoming().flatten() {
            let mut line = String::new();
            if BufReader::new(&c).read_line(&mut line).is_ok_and(|n| n > 0) {
                let _ = (&c).write_all(b"{\"ok\":true,\"detail\":\"halted\",\"state\":\"halted\"}\n");
            }
        }
    });
}

#[test]
fn control_routes_ignore_a_planted_sock_and_refuse_an_unregistered_peer() {
    let env = Env::new("trust");
    let a_plan = r#"{"v":"plan/v1","tasks":[{"id":"a","adapter":"claude","prompt":"x"}]}"#;
    env.plan(a_plan);
    let wb = env.p("wb");
    std::fs::create_dir_all(wb.join(".git")).unwrap();
    std::fs::write(wb.join("p.plan.json"), a_plan).unwrap();
    let mut sup_a = env.start("hang");
    let mut cb = env.cmd("hang");
    cb.current_dir(&wb);
    let _sup_b = Sup { child: Some(cb.spawn().unwrap()) };
    let live_b = || -> Value {
        std::fs::read_to_string(wb.join("runstate/p.live.json"))
            .ok()
            .and_then(|s| serde_json::from_str(&s).ok())
            .unwrap_or(Value::Null)
    };
    let task_b = || live_b()["tasks"]["a"]["pid"].as_i64().map(|p| p as i32);
    until("both runs' engines", || pid_of(&env, "a").is_some() && task_b().is_some() && env.stub_pids().len() >= 4);
    let (id_a, id_b) = (run_id_of(&env, &env.dir), run_id_of(&env, &wb));
    let b_pid = task_b().unwrap();
    let sock_b = PathBuf::from(live_b()["sock"].as_str().unwrap());
    let srv = serve(&env, &[]);
    // A's agent points A's liveness at B's socket: the route still reaches A's own supervisor.
    plant_sock(&env.p("runstate/p.live.json"), &sock_b);
    let (code, v) = srv.post_with(&format!("/runs/{id_a}/pause"), "", "");
    assert_eq!((code, v["ok"].as_bool()), (200, Some(true)), "{v}");
    assert!(env.journal().iter().any(|r| r["run"] == "paused"), "A's own supervisor paused A");
    let b_journal = || std::fs::read_to_string(wb.join("runstate/p.jsonl")).unwrap_or_default();
    assert!(!b_journal().contains("paused"), "B was not paused: {}", b_journal());
    // A's supervisor gone (kill -9): a planted sock names B's socket, then a fake's.
    let a_task = pid_of(&env, "a").unwrap();
    sup_a.kill9();
    until("A's task to die with its supervisor", || !alive(a_task));
    plant_sock(&env.p("runstate/p.live.json"), &sock_b);
    let (code, v) = srv.post_with(&format!("/runs/{id_a}/tasks/a/kill"), "", "");
    assert_eq!(code, 409, "{v}");
    assert!(alive(b_pid), "run B's task survives a kill of run A");
    assert!(!b_journal().contains("halted"), "{}", b_journal());
    fake_control(&env.p("agent.sock"));
    plant_sock(&env.p("runstate/p.live.json"), &env.p("agent.sock"));
    for path in [format!("/runs/{id_a}/tasks/a/kill"), format!("/runs/{id_a}/pause")] {
        let (code, v) = srv.post_with(&path, "", "");
        assert_eq!((code, v["ok"].as_bool()), (409, Some(false)), "{path}: {v}");
    }
    // A process other than the registered supervisor at the run's own socket
    // (the stale socket of the dead supervisor, taken over) is refused too.
    fake_control(&env.p(&format!("home/sock/{id_a}.sock")));
    for path in [format!("/runs/{id_a}/tasks/a/kill"), format!("/runs/{id_a}/pause")] {
        let (code, v) = srv.post_with(&path, "", "");
        assert_eq!(code, 502, "{path}: {v}");
        assert!(v["detail"].as_str().unwrap().contains("not the registered supervisor"), "{v}");
    }
    // B's registered supervisor, stopped, takes a request and never replies:
    // an error, and a steer inbox beside it takes nothing either.
    let sup_b_pid = _sup_b.child.as_ref().unwrap().id().to_string();
    std::fs::write(wb.join("runstate/p.steer.jsonl"), "").unwrap();
    let mut deaf = Server::command();
    deaf.env("HARNESS_HOME", env.p("home")).env("RUNWIRE_CONTROL_TIMEOUT_MS", "300");
    let deaf = Server::spawn(deaf);
    let sup_b_pid = nix::unistd::Pid::from_raw(sup_b_pid.parse().unwrap());
    nix::sys::signal::kill(sup_b_pid, nix::sys::signal::Signal::SIGSTOP).unwrap();
    let (code, v) = deaf.post_with(&format!("/runs/{id_b}/pause"), "", "");
    nix::sys::signal::kill(sup_b_pid, nix::sys::signal::Signal::SIGCONT).unwrap();
    assert_eq!((code, v["ok"].as_bool()), (502, Some(false)), "{v}");
    assert_eq!(std::fs::read_to_string(wb.join("runstate/p.steer.jsonl")).unwrap(), "");
    // B's own route still works, through B's registered supervisor.
    let (code, v) = srv.post_with(&format!("/runs/{id_b}/tasks/a/kill"), "", "");
    assert_eq!((code, v["state"].as_str()), (200, Some("halted")), "{v}");
    until("B's task to be killed", || !alive(b_pid));
}

#[test]
fn a_restart_stops_only_the_groups_it_recorded() {
    let env = Env::new("stale");
    env.plan(r#"{"v":"plan/v1","tasks":[{"id":"a","adapter":"claude","prompt":"x"}]}"#);
    assert_eq!(env.start("ok").wait(), 0);
    let id = run_id_of(&env, &env.dir);
    let sleeper = || Command::new("sleep").arg("100").stdin(Stdio::null()).process_group(0).spawn().unwrap();
    // Unrelated: named by a liveness file the agent wrote.
    let mut unrelated = sleeper();
    // Ours: recorded in the run's registration as a group this run started.
    let mut ours = sleeper();
    let (u, o) = (unrelated.id() as i32, ours.id() as i32);
    std::fs::write(
        env.p("runstate/p.live.json"),
        serde_json::json!({"v":"liveness/v1","tasks":{"a":{"pid":u,"pgid":u},"b":{"pid":o,"pgid":o}}}).to_string(),
    )
    .unwrap();
    let mut owner = runwire::supervise::socket::Owner::me().unwrap();
    owner.supervisor.pid = 2_147_483_000;
    owner.groups.insert("b".into(), runwire::util::procid::Ident::of(o).unwrap());
    owner.write(&env.p("home"), &id).unwrap();
    // A recorded group whose pid now names another process is not signalled either.
    let mut reused = sleeper();
    let r = reused.id() as i32;
    let mut stale = runwire::util::procid::Ident::of(r).unwrap();
    stale.start -= 1;
    let mut owner = runwire::supervise::socket::Owner::read(&env.p("home"), &id).unwrap();
    owner.groups.insert("c".into(), stale);
    owner.write(&env.p("home"), &id).unwrap();
    assert_eq!(env.start("ok").wait(), 0);
    let gone = |c: &mut Child| c.try_wait().unwrap().is_some();
    until("the recorded group to be stopped", || gone(&mut ours));
    assert!(!gone(&mut unrelated), "an unrelated group named in liveness survives");
    assert!(!gone(&mut reused), "a reused pid survives");
    for c in [&mut unrelated, &mut reused] {
        let _ = c.kill();
        let _ = c.wait();
    }
}

#[test]
fn session_settings_for_the_wrappers_follow_the_flag_rules() {
    let env = Env::new("modes");
    env.plan(r#"{"v":"plan/v1","tasks":[{"id":"a","adapter":"claude","prompt":"x"},{"id":"b","adapter":"codex","prompt":"y"}]}"#);
    for (var, value, needs) in [
        ("RUNWIRE_PERMISSION_MODE", "bypassPermissions", "RUNWIRE_PERMISSION_MODE: "),
        ("RUNWIRE_PLAN_EXIT_MODE", "bypassPermissions", "RUNWIRE_PLAN_EXIT_MODE: "),
        ("RUNWIRE_SANDBOX", "danger-full-access", "danger-full-access"),
        ("RUNWIRE_PLAN_EXIT_MODE", "sideways", "RUNWIRE_PLAN_EXIT_MODE: "),
    ] {
        let out = env.cmd("ok").arg("--interactive").env(var, value).stderr(Stdio::piped()).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{var}={value}: {err}");
        assert!(err.starts_with("runwire-supervise: ") && err.contains(needs), "{var}={value}: {err}");
        if value != "sideways" {
            assert!(err.contains("RUNWIRE_GRANT_ALL=1"), "{err}");
        }
        assert!(env.argv().is_empty(), "nothing ran");
    }
    // With RUNWIRE_GRANT_ALL=1 they are allowed.
    let out = env
        .cmd("ok")
        .env("RUNWIRE_GRANT_ALL", "1")
        .env("RUNWIRE_PLAN_EXIT_MODE", "bypassPermissions")
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
}

/// `runs` against the test's home.
fn runs_cmd(env: &Env, args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_runs")).env("HARNESS_HOME", env.p("home")).args(args).output().unwrap()
}

#[test]
fn a_failing_gate_says_why_on_the_terminal_in_its_log_in_runs_and_in_the_feed() {
    let env = Env::new("why");
    // The feed begins before the run, so that the run's records are news.
    let o = runs_cmd(&env, &["watch", "--no-follow"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // `cargo test` outside a Cargo project (the scratch directory is not in one): 101, on stderr.
    let gate = format!("echo checking the build; {} test", env!("CARGO"));
    env.plan(
        &serde_json::json!({"v":"plan/v1","tasks":[
        {"id":"impl","adapter":"claude","prompt":"do it","gate":gate},
        {"id":"docs","adapter":"claude","prompt":"docs","deps":["impl"]}]})
        .to_string(),
    );
    let out = env.cmd("ok").stdout(Stdio::piped()).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let why = format!("gate {gate:?} exited 101 (runstate/p.impl.gate.log)");
    // The terminal: one line per task as it ends, then the run's with the reason.
    let stdout = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(
        lines,
        [
            format!("impl halted: {why}"),
            "docs halted: not started: dependency impl is halted".to_string(),
            format!("p failed (0 of 2 tasks committed): impl halted: {why}"),
        ],
        "{stdout}"
    );
    // The gate's stdout and stderr are in its log, not on the terminal.
    let log = std::fs::read_to_string(env.p("runstate/p.impl.gate.log")).unwrap();
    assert!(log.contains("checking the build") && log.contains("could not find `Cargo.toml`"), "{log:?}");
    assert!(!String::from_utf8_lossy(&out.stderr).contains("Cargo.toml"));
    // `runs list` and `runs show` give the reason; show gives each task's detail.
    let reason = format!("impl halted: {why}");
    let list = runs_cmd(&env, &["list", "--json"]);
    let item: Value = serde_json::from_slice(list.stdout.split(|&b| b == b'\n').next().unwrap()).unwrap();
    assert_eq!((item["status"].as_str(), item["reason"].as_str()), (Some("failed"), Some(reason.as_str())));
    // The table (a terminal's view) has it under the rows.
    let table = String::from_utf8_lossy(&runs_cmd(&env, &["list", "--table"]).stdout).into_owned();
    assert!(table.lines().any(|l| l == format!("p: {reason}")), "{table}");
    let show: Value = serde_json::from_slice(&runs_cmd(&env, &["show", &run_id(&env)]).stdout).unwrap();
    assert_eq!(show["run"]["reason"], reason.as_str());
    assert_eq!(show["tasks"]["impl"]["detail"], why.as_str());
    // The feed: the task's event has the detail, the run's end the reason.
    let feed = runs_cmd(&env, &["watch", "--no-follow", "--since", "0"]);
    let evs: Vec<Value> =
        String::from_utf8_lossy(&feed.stdout).lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let ended = evs.iter().find(|e| e["type"] == "ended").expect("an ended event");
    assert_eq!((ended["status"].as_str(), ended["reason"].as_str()), (Some("failed"), Some(reason.as_str())));
    assert!(evs.iter().any(|e| e["task"] == "impl" && e["state"] == "halted" && e["detail"] == why.as_str()));
    no_stub_left(&env);
}

#[test]
fn a_run_that_commits_says_so_in_one_line_per_task_and_no_reason() {
    let env = Env::new("whyok");
    env.plan(r#"{"v":"plan/v1","tasks":[{"id":"a","adapter":"claude","prompt":"x","gate":"echo fine >&2"}]}"#);
    let out = env.cmd("ok").stdout(Stdio::piped()).output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "a committed\np done: 1 of 1 tasks committed\n");
    assert_eq!(std::fs::read_to_string(env.p("runstate/p.a.gate.log")).unwrap(), "fine\n");
    let item: Value = serde_json::from_slice(&runs_cmd(&env, &["list", "--json"]).stdout).unwrap();
    assert_eq!((item["status"].as_str(), item["reason"].clone()), (Some("done"), Value::Null));
}

/// A slug another run owns in the runstate directory (registered from
/// another repository) is refused before anything is written: exit 2,
/// naming the owner, the other run's files untouched.
#[test]
fn a_slug_another_run_owns_in_the_runstate_directory_is_refused() {
    let env = Env::new("owned");
    env.plan(r#"{"v":"plan/v1","tasks":[{"id":"a","adapter":"claude","prompt":"x"}]}"#);
    let rs = env.p("runstate");
    let out = Command::new(env!("CARGO_BIN_EXE_runs"))
        .env("HARNESS_HOME", env.p("home"))
        .args(["register", "--slug", "p", "--repo-root", "/elsewhere", "--runstate-dir", rs.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let owner = serde_json::from_slice::<Value>(&out.stdout).unwrap()["runId"].as_str().unwrap().to_string();
    let mut cmd = env.cmd("ok");
    cmd.stderr(Stdio::piped());
    let out = cmd.output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("already owned") && err.contains(&owner), "{err}");
    assert!(!rs.join("p.plan.json").exists(), "nothing written");
    assert_eq!(std::fs::read(rs.join("p.jsonl")).unwrap(), b"", "the owner's journal untouched");
    assert!(env.argv().is_empty(), "no agent ran");
}

/// A supervisor that registered its run and then could not start it (here
/// its control socket's path is taken by a directory) says why in the
/// journal: the run lists as `failed` with that reason, not as `registered`
/// for ever with nothing running it; once the cause is gone, the same
/// command runs the plan. (The run id comes from a first start that could
/// not copy the plan: a directory had the plan's name.)
#[test]
fn a_start_that_fails_after_registration_leaves_the_run_failed_with_why() {
    let env = Env::new("nostart");
    env.plan(r#"{"v":"plan/v1","tasks":[{"id":"a","adapter":"claude","prompt":"x"}]}"#);
    let plan_taken = env.p("runstate/p.plan.json");
    std::fs::create_dir_all(&plan_taken).unwrap();
    assert_eq!(env.cmd("ok").status().unwrap().code(), Some(3));
    std::fs::remove_dir(&plan_taken).unwrap();
    let id = run_id(&env);
    let sock_taken = env.p(&format!("home/sock/{id}.sock"));
    std::fs::create_dir_all(&sock_taken).unwrap();
    let mut cmd = env.cmd("ok");
    cmd.stderr(Stdio::piped());
    let out = cmd.output().unwrap();
    assert_eq!(out.status.code(), Some(3), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.starts_with("runwire-supervise: ") && err.contains(&format!("{id}.sock")), "{err}");
    assert!(env.argv().is_empty(), "no agent ran");
    let show = runs_cmd(&env, &["show", &id]);
    let run = &serde_json::from_slice::<Value>(&show.stdout).unwrap()["run"];
    assert_eq!(run["status"], "failed", "{run}");
    let reason = run["reason"].as_str().unwrap_or_default();
    assert!(reason.contains("could not start") && reason.contains(&format!("{id}.sock")), "{reason}");
    std::fs::remove_dir(&sock_taken).unwrap();
    assert_eq!(env.start("ok").wait(), 0);
    assert_eq!(env.last("a").as_deref(), Some("committed"));
    let show = runs_cmd(&env, &["show", &id]);
    assert_eq!(serde_json::from_slice::<Value>(&show.stdout).unwrap()["run"]["status"], "done");
}

// ---- one supervisor a run: ownership is a lock, registration is atomic ----

/// A task whose gate waits for `ok.flag`: the run stays live until the test lets it end.
const WAITING: &str = r#"{"v":"plan/v1","tasks":[{"id":"a","adapter":"claude","prompt":"x","gate":"while ! test -f ok.flag; do sleep 0.05; done"}]}"#;

/// The run records of a journal, by name (`started`, `finished`, …).
fn run_records(journal: &[Value], what: &str) -> usize {
    journal.iter().filter(|r| r["run"] == what).count()
}

/// Every file left in `$HARNESS_HOME/sock/` (none once every supervisor has exited).
fn sock_files(env: &Env) -> Vec<String> {
    std::fs::read_dir(env.p("home/sock"))
        .map(|rd| rd.flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect())
        .unwrap_or_default()
}

/// A second supervisor of a live run, with another plan of the same slug
/// and runstate directory, is refused before it writes anything: exit 3,
/// the live run's plan, pointer and owner record byte for byte as they
/// were, and the live run ends as its own plan says.
#[test]
fn a_second_supervisor_of_a_live_run_exits_3_and_writes_nothing() {
    let env = Env::new("second");
    env.plan(WAITING);
    let mut first = env.start("ok");
    let owner_of = |id: &str| -> Value {
        std::fs::read(env.p(&format!("home/sock/{id}.owner.json")))
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or(Value::Null)
    };
    // Its gate running (its group recorded): nothing of the run changes until the flag.
    until("the first supervisor's gate", || {
        env.last("a").as_deref() == Some("implemented")
            && owner_of(&run_id(&env))["groups"]["a"].is_object()
            && UnixStream::connect(env.sock()).is_ok()
    });
    let id = run_id(&env);
    let files = [
        env.p("runstate/p.plan.json"),
        env.p(&format!("home/runs/{id}.json")),
        env.p(&format!("home/sock/{id}.owner.json")),
    ];
    let before: Vec<Vec<u8>> = files.iter().map(|f| std::fs::read(f).unwrap()).collect();
    std::fs::create_dir_all(env.p("other")).unwrap();
    std::fs::write(
        env.p("other/p.plan.json"),
        r#"{"v":"plan/v1","tasks":[{"id":"z","adapter":"claude","prompt":"other"}]}"#,
    )
    .unwrap();
    let out = env.cmd_in("ok", &env.dir, "other/p.plan.json").stderr(Stdio::piped()).output().unwrap();
    assert_eq!(out.status.code(), Some(3), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("another supervisor of this run is live"), "{err}");
    for (f, b) in files.iter().zip(&before) {
        assert_eq!(&std::fs::read(f).unwrap(), b, "{} unchanged", f.display());
    }
    assert!(UnixStream::connect(env.sock()).is_ok(), "the first supervisor still answers");
    std::fs::write(env.p("ok.flag"), "").unwrap();
    assert_eq!(first.wait(), 0);
    assert_eq!(env.states("a"), ["leased", "implemented", "gated", "committed"]);
    assert!(env.states("z").is_empty(), "the second plan never ran");
    assert_eq!(run_records(&env.journal(), "started"), 1);
    let item: Value = serde_json::from_slice(&runs_cmd(&env, &["list", "--json"]).stdout).unwrap();
    assert_eq!(item["status"], "done", "{item}");
    assert_eq!(std::fs::read(&files[0]).unwrap(), before[0], "the plan is the first run's");
    assert!(sock_files(&env).is_empty(), "{:?}", sock_files(&env));
    no_stub_left(&env);
}

/// Supervisors of one slug started at the same moment from two worktrees
/// (two runs) on one shared runstate directory: exactly one runs the plan,
/// the others are refused (exit 2: another registered run owns the slug)
/// and leave nothing behind (no socket, no owner record, no pointer).
/// Several rounds, each on a fresh runstate directory, to make the race likely.
#[test]
fn supervisors_of_one_slug_started_at_once_on_a_shared_runstate_let_one_run() {
    let env = Env::new("race");
    let plan = r#"{"v":"plan/v1","tasks":[{"id":"a","adapter":"claude","prompt":"x"},{"id":"b","adapter":"claude","prompt":"y","deps":["a"]}]}"#;
    for round in 0..6 {
        // Worktrees of their own each round: a run id keeps the runstate
        // directory it was registered with (another one is refused).
        let wts: Vec<PathBuf> = (0..3).map(|i| env.p(&format!("wt{round}{i}"))).collect();
        for wt in &wts {
            std::fs::create_dir_all(wt).unwrap();
            std::fs::write(wt.join("p.plan.json"), plan).unwrap();
        }
        let shared = env.p(&format!("shared/{round}"));
        let mut sups: Vec<Sup> = wts
            .iter()
            .map(|wt| {
                let mut c = env.cmd_in("ok", wt, "p.plan.json");
                c.arg("--runstate").arg(&shared);
                Sup { child: Some(c.spawn().unwrap()) }
            })
            .collect();
        let mut codes: Vec<i32> = sups.iter_mut().map(Sup::wait).collect();
        codes.sort();
        assert_eq!(codes, [0, 2, 2], "round {round}: one runs, the others are refused");
        let journal: Vec<Value> = std::fs::read_to_string(shared.join("p.jsonl"))
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(run_records(&journal, "started"), 1, "round {round}: {journal:?}");
        for t in ["a", "b"] {
            let states: Vec<&str> =
                journal.iter().filter(|r| r["task"] == t).filter_map(|r| r["state"].as_str()).collect();
            assert_eq!(states, ["leased", "implemented", "committed"], "round {round}: task {t}");
        }
        let pointers = std::fs::read_dir(env.p("home/runs"))
            .unwrap()
            .flatten()
            .filter(|e| {
                let p: Value = serde_json::from_slice(&std::fs::read(e.path()).unwrap()).unwrap();
                p["runstateDir"].as_str().map(PathBuf::from) == shared.canonicalize().ok()
            })
            .count();
        assert_eq!(pointers, 1, "round {round}: one run registered");
        assert!(sock_files(&env).is_empty(), "round {round}: {:?}", sock_files(&env));
    }
    no_stub_left(&env);
}

/// After a supervisor is killed with -9 (its socket file left, nobody
/// answering), restarts at the same moment (four, so that two of them
/// meet in the replacement of the stale socket more often): one takes the
/// run over, every other exits 3, and the one that runs is the one that
/// answers on the socket. Several rounds (the survivor killed again).
#[test]
fn restarts_at_once_after_a_kill_9_one_runs_and_the_others_exit_3() {
    const AT_ONCE: usize = 4;
    let env = Env::new("stale2");
    env.plan(WAITING);
    let mut sup = env.start("ok");
    let rounds = 4;
    for round in 0..rounds {
        until("a supervisor running the gate", || {
            env.last("a").as_deref() == Some("implemented")
                && pid_of(&env, "a").is_some()
                && UnixStream::connect(env.sock()).is_ok()
        });
        let reaper = pid_of(&env, "a").unwrap();
        sup.kill9();
        until("the gate's reaper to die with its supervisor", || {
            !std::path::Path::new(&format!("/proc/{reaper}")).exists()
        });
        assert!(sock_files(&env).iter().any(|f| f.ends_with(".sock")), "a stale socket is left");
        let mut all: Vec<Sup> = (0..AT_ONCE).map(|_| env.start("ok")).collect();
        let mut codes = Vec::new();
        let end = Instant::now() + Duration::from_secs(10);
        while codes.len() < AT_ONCE - 1 {
            codes.extend(all.iter_mut().filter_map(Sup::exited));
            assert!(Instant::now() < end, "round {round}: {} restarts are running the run", AT_ONCE - codes.len());
            std::thread::sleep(Duration::from_millis(20));
        }
        assert_eq!(codes, [3; AT_ONCE - 1], "round {round}: all but one restart are refused");
        sup = all.into_iter().find(|s| s.child.is_some()).unwrap();
        std::thread::sleep(Duration::from_millis(300));
        assert!(sup.exited().is_none(), "round {round}: the other restart runs");
        until("the restart's socket", || UnixStream::connect(env.sock()).is_ok());
        let owner: Value =
            serde_json::from_slice(&std::fs::read(env.p(&format!("home/sock/{}.owner.json", run_id(&env)))).unwrap())
                .unwrap();
        assert_eq!(owner["supervisor"]["pid"], sup.pid(), "round {round}: the one running owns the run");
        let status = env.call(serde_json::json!({"verb":"status"}));
        assert_eq!(status["ok"], true, "{status}");
    }
    std::fs::write(env.p("ok.flag"), "").unwrap();
    assert_eq!(sup.wait(), 0);
    let journal = env.journal();
    assert_eq!(run_records(&journal, "started"), 1 + rounds, "one start a supervisor that ran: {journal:?}");
    assert_eq!(env.states("a").iter().filter(|s| *s == "committed").count(), 1);
    assert!(sock_files(&env).is_empty(), "{:?}", sock_files(&env));
    no_stub_left(&env);
}

// ---- a steer accepted outlives its supervisor ----

/// A task whose gate records each run and waits for `ok.flag`.
const GATED: &str = r#"{"v":"plan/v1","tasks":[{"id":"a","adapter":"claude","prompt":"first","gate":"echo g >> gates.txt; while ! test -f ok.flag; do sleep 0.05; done"}]}"#;

/// Starts [`GATED`], queues a steer while its gate runs (a turn boundary:
/// the steer waits for the gate), then SIGKILLs the supervisor and waits
/// for its task's processes to be gone. Returns the session id the steer
/// was for.
fn steer_then_kill_9(env: &Env) -> String {
    env.plan(GATED);
    let mut sup = env.start("ok");
    until("the gate", || env.p("gates.txt").exists() && pid_of(env, "a").is_some());
    let sid = env.live()["tasks"]["a"]["session_id"].as_str().unwrap().to_string();
    let r = env.call(serde_json::json!({"verb":"steer","task":"a","msg":"now fix the tests"}));
    assert_eq!(r["ok"], true, "{r}");
    assert!(r["detail"].as_str().unwrap().contains("next turn boundary"), "queued, not live: {r}");
    let reaper = pid_of(env, "a").unwrap();
    sup.kill9();
    // Gone entirely (not a zombie), as `liveness reap` judges by signal 0.
    until("the gate's reaper to die with its supervisor", || {
        !std::path::Path::new(&format!("/proc/{reaper}")).exists()
    });
    sid
}

/// A steer the supervisor said `ok` to at a turn boundary is in the
/// journal with its text before the reply: the supervisor SIGKILLed before
/// the boundary, the same command started again applies it at that
/// boundary (the gate that was running, run again), once; a third start
/// does not apply it again.
#[test]
fn a_queued_steer_outlives_a_kill_9_of_its_supervisor_and_reaches_the_agent_once() {
    let env = Env::new("steer9");
    let sid = steer_then_kill_9(&env);
    assert_eq!(env.argv().len(), 1, "the steer has not reached the agent yet: {:?}", env.argv());
    std::fs::write(env.p("ok.flag"), "").unwrap();
    assert_eq!(env.start("ok").wait(), 0);
    let argv = env.argv();
    assert_eq!(argv.iter().filter(|l| l.contains("now\\ fix\\ the\\ tests")).count(), 1, "{argv:?}");
    assert_eq!(argv.len(), 2, "{argv:?}");
    assert!(
        argv[1].contains(&format!("--resume {sid}")) && argv[1].ends_with("-- now\\ fix\\ the\\ tests "),
        "{argv:?}"
    );
    // The gate in flight at the kill runs again, then the steered turn and its gate.
    assert_eq!(env.states("a"), ["leased", "implemented", "gated", "leased", "implemented", "gated", "committed"]);
    assert_eq!(std::fs::read_to_string(env.p("gates.txt")).unwrap(), "g\ng\ng\n");
    let j = env.journal();
    let queued: Vec<&Value> = j.iter().filter(|r| r["run"] == "steer-queued").collect();
    assert_eq!(queued.len(), 1, "{j:?}");
    assert_eq!(
        (queued[0]["steer"]["task"].as_str(), queued[0]["steer"]["msg"].as_str()),
        (Some("a"), Some("now fix the tests"))
    );
    assert_eq!(j.iter().filter(|r| r["state"] == "leased" && r["steer"]["task"] == "a").count(), 1, "{j:?}");
    // Ended: started again, it applies nothing again.
    env.start("ok").wait();
    assert_eq!(env.argv().len(), 2, "{:?}", env.argv());
    no_stub_left(&env);
}

/// A steer accepted by a supervisor that was then SIGKILLed, whose task's
/// session a restart cannot find (its log emptied, liveness reaped), is not
/// lost in silence: the journal says it was not delivered and why, and the
/// run goes on without it.
#[test]
fn a_queued_steer_a_restart_cannot_deliver_is_journaled_as_not_delivered() {
    let env = Env::new("steerlost");
    steer_then_kill_9(&env);
    std::fs::write(env.p("runstate/p.a.log"), "").unwrap();
    let r = Command::new(env!("CARGO_BIN_EXE_liveness"))
        .args(["--runstate", env.p("runstate").to_str().unwrap(), "reap", "p"])
        .output()
        .unwrap();
    assert!(r.status.success(), "{r:?}");
    std::fs::write(env.p("ok.flag"), "").unwrap();
    assert_eq!(env.start("ok").wait(), 0);
    assert_eq!(env.argv().len(), 1, "{:?}", env.argv());
    let j = env.journal();
    let dropped: Vec<&Value> = j.iter().filter(|r| r["run"] == "steer-dropped").collect();
    assert_eq!(dropped.len(), 1, "{j:?}");
    let d = dropped[0]["detail"].as_str().unwrap();
    assert!(d.starts_with("task a: 17 bytes not delivered: ") && d.contains("no session id"), "{d}");
    assert_eq!(env.states("a"), ["leased", "implemented", "gated", "committed"]);
    // The run's status is not the drop's: it lists done.
    let show = runs_cmd(&env, &["show", &run_id(&env)]);
    assert_eq!(serde_json::from_slice::<Value>(&show.stdout).unwrap()["run"]["status"], "done");
    no_stub_left(&env);
}

// ---- a run id keeps its runstate directory ----

/// The same plan (same repository and slug: the same run id) started again
/// with another `--runstate` is refused before anything is written: exit 2,
/// naming the registered runstate directory and how to go on; the first
/// run's pointer and journal are as they were, and nothing ran again.
#[test]
fn a_second_start_with_another_runstate_is_refused_and_the_first_run_is_untouched() {
    let env = Env::new("rs2");
    env.plan(r#"{"v":"plan/v1","tasks":[{"id":"a","adapter":"claude","prompt":"x"}]}"#);
    assert_eq!(env.start("ok").wait(), 0);
    let id = run_id(&env);
    let pointer = env.p(&format!("home/runs/{id}.json"));
    let before = (std::fs::read(&pointer).unwrap(), std::fs::read(env.p("runstate/p.jsonl")).unwrap());
    let first = std::fs::canonicalize(env.p("runstate")).unwrap();
    let mut cmd = env.cmd("ok");
    cmd.args(["--runstate", "other"]).stderr(Stdio::piped());
    let out = cmd.output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.starts_with("runwire-supervise: "), "{err}");
    for want in [format!("--runstate {}", first.display()), format!("runs rm {id}"), "--slug".into()] {
        assert!(err.contains(&want), "{want:?} in {err}");
    }
    assert_eq!((std::fs::read(&pointer).unwrap(), std::fs::read(env.p("runstate/p.jsonl")).unwrap()), before);
    assert!(!env.p("other").exists(), "nothing written");
    assert_eq!(env.argv().len(), 1, "nothing ran again: {:?}", env.argv());
    assert!(sock_files(&env).is_empty(), "{:?}", sock_files(&env));
    // The same --runstate is the same run: accepted (it has nothing left to do).
    let mut cmd = env.cmd("ok");
    cmd.args(["--runstate", "runstate"]);
    assert_eq!(cmd.status().unwrap().code(), Some(0));
    assert_eq!(env.argv().len(), 1);
}

/// A steer taken at a boundary while the run is paused (its `leased` is
/// journaled, its turn waits for `resume`) is not lost by a SIGKILL then:
/// the restarted supervisor, still paused, runs that steered turn on
/// `resume`, resuming the task's session, rather than the task afresh.
#[test]
fn a_steer_taken_while_paused_outlives_a_kill_9_and_runs_on_resume() {
    let env = Env::new("steerpause");
    env.plan(GATED);
    let mut sup = env.start("ok");
    until("the gate", || env.p("gates.txt").exists());
    let sid = env.live()["tasks"]["a"]["session_id"].as_str().unwrap().to_string();
    assert_eq!(env.call(serde_json::json!({"verb":"pause"}))["ok"], true);
    let r = env.call(serde_json::json!({"verb":"steer","task":"a","msg":"now fix the tests"}));
    assert_eq!(r["ok"], true, "{r}");
    std::fs::write(env.p("ok.flag"), "").unwrap();
    until("the steer taken at the gate's end", || {
        env.journal()
            .iter()
            .any(|r| r["state"] == "leased" && r["detail"].as_str().is_some_and(|d| d.starts_with("steered")))
    });
    // Paused: its turn waits.
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(env.argv().len(), 1, "{:?}", env.argv());
    sup.kill9();
    let mut again = env.start("ok");
    until("the restarted supervisor's socket", || UnixStream::connect(env.sock()).is_ok());
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(env.argv().len(), 1, "still paused: {:?}", env.argv());
    assert_eq!(env.call(serde_json::json!({"verb":"resume"}))["ok"], true);
    assert_eq!(again.wait(), 0);
    let argv = env.argv();
    assert_eq!(argv.len(), 2, "{argv:?}");
    assert!(
        argv[1].contains(&format!("--resume {sid}")) && argv[1].ends_with("-- now\\ fix\\ the\\ tests "),
        "{argv:?}"
    );
    assert_eq!(env.last("a").as_deref(), Some("committed"));
    no_stub_left(&env);
}
