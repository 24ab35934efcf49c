//! No agent process outlives its run, and a lingering grandchild does not
//! hold a run open (`session::proc`, `runwire-reaper`): real servers and
//! supervisors, real signals, and a wrapper (`fixtures/escape-wrapper`) that
//! ignores SIGTERM, forks a child that ignores it too, and leaves a `setsid`
//! orphan that ignores it and holds the wrapper's stdout.

use crate::support;
use support::Server;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn escape_dir() -> PathBuf {
    root().join("fixtures/escape-wrapper")
}

fn tmp(name: &str) -> PathBuf {
    support::scratch(name)
}

/// Alive and not a zombie (a reaper orphaned by a SIGKILLed caller may be
/// left a zombie by an init that does not reap; it runs nothing).
fn alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| s.rsplit(')').next().is_some_and(|r| !r.trim_start().starts_with('Z')))
        .unwrap_or(false)
}

fn pids(file: &Path) -> Vec<i32> {
    std::fs::read_to_string(file).unwrap_or_default().lines().filter_map(|l| l.trim().parse().ok()).collect()
}

/// The wrapper, its child and its setsid orphan, once all three run.
fn escapers(file: &Path) -> Vec<i32> {
    let until = Instant::now() + Duration::from_secs(10);
    loop {
        let p = pids(file);
        if p.len() >= 3 && p.iter().all(|&p| alive(p)) {
            return p;
        }
        assert!(Instant::now() < until, "the escape wrapper did not start its processes: {p:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Waits until none of `pids` runs; returns how long that took.
fn all_gone(pids: &[i32], limit: Duration) -> Duration {
    let t = Instant::now();
    while pids.iter().any(|&p| alive(p)) {
        let left: Vec<_> = pids.iter().filter(|&&p| alive(p)).collect();
        assert!(t.elapsed() < limit, "still running after {limit:?}: {left:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
    t.elapsed()
}

/// Kills a test's leftovers so a failure does not leak sleeps.
struct Cleanup(PathBuf);

impl Drop for Cleanup {
    fn drop(&mut self) {
        // Only a process this test started (its environment names this
        // test's pid file): a recorded pid that exited may be another
        // process's by now (pids wrap at 32768 here).
        let file = self.0.join("pids");
        let mine = format!("ESCAPE_PIDS={}", file.display()).into_bytes();
        for p in pids(&file) {
            let ours = std::fs::read(format!("/proc/{p}/environ"))
                .is_ok_and(|env| env.split(|&b| b == 0).any(|v| v == mine.as_slice()));
            if ours {
                let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(p), nix::sys::signal::Signal::SIGKILL);
            }
        }
    }
}

/// runwire-serve over the escaping wrapper in `mode`.
fn serve(dir: &Path, mode: &str) -> Server {
    let mut cmd = Server::command();
    cmd.args(["--agent", "claude", "--agent-cmd"])
        .arg(escape_dir().join("claude.sh"))
        .env("HARNESS_HOME", dir.join("home"))
        .env("ESCAPE_PIDS", dir.join("pids"))
        .env("ESCAPE_MODE", mode);
    Server::spawn(cmd)
}

fn post(port: u16, run: &str) -> TcpStream {
    let body = serde_json::json!({
        "threadId": run, "runId": run, "messages": [{"id": "u1", "role": "user", "content": "hi"}]
    })
    .to_string();
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    write!(
        s,
        "POST /agui HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    s
}

#[test]
fn serve_client_disconnect_leaves_no_process() {
    let dir = tmp("disc");
    let _c = Cleanup(dir.clone());
    let s = serve(&dir, "hang");
    let sock = post(s.port, "r1");
    let p = escapers(&dir.join("pids"));
    drop(sock);
    // SIGTERM is ignored by all three: SIGKILL after the 2 s grace.
    let took = all_gone(&p, Duration::from_secs(8));
    assert!(took >= Duration::from_millis(1500), "killed before the grace: {took:?}");
}

#[test]
fn serve_killed_with_sigkill_leaves_no_process() {
    let dir = tmp("kill9");
    let _c = Cleanup(dir.clone());
    let mut s = serve(&dir, "hang");
    let _sock = post(s.port, "r1");
    let p = escapers(&dir.join("pids"));
    s.kill();
    all_gone(&p, Duration::from_secs(8));
}

/// The server's last resort at its exit (`kill_remaining`): a run whose
/// stream is stuck writing to a client that reads nothing cannot stop its
/// own agent, so the server, told to stop (SIGTERM), kills it after the
/// streams' grace: the wrapper, its child and its setsid orphan (all
/// ignoring SIGTERM), and the run's scratch directory in `$TMPDIR`.
#[test]
fn serve_stopped_with_a_stuck_stream_kills_its_run_and_leaves_nothing() {
    let dir = tmp("stuck");
    let _c = Cleanup(dir.clone());
    let tmpdir = dir.join("tmp");
    std::fs::create_dir_all(&tmpdir).unwrap();
    let mut cmd = Server::command();
    cmd.args(["--agent", "claude", "--agent-cmd"])
        .arg(escape_dir().join("claude.sh"))
        .env("HARNESS_HOME", dir.join("home"))
        .env("ESCAPE_PIDS", dir.join("pids"))
        .env("ESCAPE_MODE", "flood")
        .env("TMPDIR", &tmpdir);
    let mut s = Server::spawn(cmd);
    let sock = post(s.port, "r1");
    let p = escapers(&dir.join("pids"));
    assert!(tree(&tmpdir).iter().any(|f| f.starts_with("runwire-run.")), "{:?}", tree(&tmpdir));
    // Nothing read: the client's buffers fill, then the server's send
    // queue, which stops growing once the stream's write blocks.
    let client = sock.local_addr().unwrap().port();
    let until = Instant::now() + Duration::from_secs(30);
    let mut last = 0;
    loop {
        std::thread::sleep(Duration::from_millis(300));
        let now = send_queue(s.port, client);
        if now == last && now > 0 {
            break;
        }
        assert!(Instant::now() < until, "the server's send queue never filled: {now}");
        last = now;
    }
    let (took, code) = s.terminate(Duration::from_secs(20));
    assert_eq!(code, Some(0), "the server exits by itself: {}", s.stderr());
    // Gone when the server is (not later, by the reaper's own grace).
    all_gone(&p, Duration::from_millis(300));
    assert_eq!(tree(&tmpdir), Vec::<String>::new(), "left in $TMPDIR after the server (took {took:?})");
    drop(sock);
}

/// The bytes the loopback connection from `port` to `peer` holds unsent
/// (`/proc/net/tcp`'s tx_queue).
fn send_queue(port: u16, peer: u16) -> u64 {
    let table = std::fs::read_to_string("/proc/net/tcp").unwrap_or_default();
    let (local, remote) = (format!(":{port:04X}"), format!(":{peer:04X}"));
    table
        .lines()
        .skip(1)
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .find(|f| f.len() > 4 && f[1].ends_with(&local) && f[2].ends_with(&remote))
        .and_then(|f| u64::from_str_radix(f[4].split(':').next()?, 16).ok())
        .unwrap_or(0)
}

#[test]
fn serve_run_ends_when_the_wrapper_exits_though_an_orphan_holds_its_stdout() {
    let dir = tmp("linger");
    let _c = Cleanup(dir.clone());
    let s = serve(&dir, "exit");
    let t = Instant::now();
    let mut sock = post(s.port, "r1");
    let mut body = Vec::new();
    // The server closes the connection after the run's last chunk.
    sock.read_to_end(&mut body).unwrap();
    let took = t.elapsed();
    let body = String::from_utf8_lossy(&body);
    assert!(body.contains("\"RUN_ERROR\""), "{body}");
    assert!(body.contains("without a status line"), "{body}");
    // The wrapper lives 0.3 s; then the reaper's drain grace (0.5 s) and the
    // stream's drain grace (0.5 s) at most.
    assert!(took < Duration::from_secs(3), "the run waited for the orphan: {took:?}");
    all_gone(&pids(&dir.join("pids")), Duration::from_secs(2));
}

struct Sup {
    child: Child,
}

impl Sup {
    fn start(dir: &Path, mode: &str) -> Sup {
        Sup::escaping(dir, mode, "2", None)
    }

    /// The supervisor of a one-task plan over the escape wrapper in `mode`,
    /// with `--kill-grace` `grace` (seconds) and `tmpdir` its `$TMPDIR`.
    fn escaping(dir: &Path, mode: &str, grace: &str, tmpdir: Option<&Path>) -> Sup {
        Sup::spawn(dir, tmpdir, |cmd| {
            cmd.args(["--kill-grace", grace])
                .env("RUNWIRE_WRAPPER_DIR", escape_dir())
                .env("ESCAPE_PIDS", dir.join("pids"))
                .env("ESCAPE_MODE", mode);
        })
    }

    /// The supervisor of a one-task plan over the real claude wrapper and
    /// the stub engine that hangs (`args`: more flags; `tmpdir`: its `$TMPDIR`).
    fn hanging(dir: &Path, args: &[&str], tmpdir: Option<&Path>) -> Sup {
        let path =
            format!("{}:{}", root().join("fixtures/stub-engines").display(), std::env::var("PATH").unwrap_or_default());
        Sup::spawn(dir, tmpdir, |cmd| {
            cmd.args(args)
                .env("RUNWIRE_WRAPPER_DIR", root().join("wrappers"))
                .env("PATH", path)
                .env("STUB_MODE", "hang")
                .env("STUB_PID_FILE", dir.join("pids"));
        })
    }

    /// `runwire-supervise` of a one-task claude plan in `dir` (its home
    /// `dir/home`, its `$TMPDIR` `tmpdir`), in a process group of its own,
    /// with what `wrapper` adds: the wrapper it runs and its settings.
    fn spawn(dir: &Path, tmpdir: Option<&Path>, wrapper: impl FnOnce(&mut Command)) -> Sup {
        std::fs::create_dir_all(dir.join(".git")).unwrap();
        std::fs::write(
            dir.join("p.plan.json"),
            r#"{"v":"plan/v1","tasks":[{"id":"a","adapter":"claude","prompt":"x"}]}"#,
        )
        .unwrap();
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_runwire-supervise"));
        cmd.current_dir(dir)
            .args(["--plan", "p.plan.json"])
            .env("HARNESS_HOME", dir.join("home"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0);
        if let Some(t) = tmpdir {
            cmd.env("TMPDIR", t);
        }
        wrapper(&mut cmd);
        Sup { child: cmd.spawn().unwrap() }
    }

    fn wait(&mut self, limit: Duration) -> Option<i32> {
        let until = Instant::now() + limit;
        while Instant::now() < until {
            if let Some(s) = self.child.try_wait().unwrap() {
                return s.code();
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!("the supervisor did not finish in {limit:?}");
    }
}

impl Drop for Sup {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn journal(dir: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(dir.join("runstate/p.jsonl"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

#[test]
fn supervise_kill_leaves_no_process() {
    let dir = tmp("supkill");
    let _c = Cleanup(dir.clone());
    let mut sup = Sup::start(&dir, "hang");
    let p = escapers(&dir.join("pids"));
    let live: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("runstate/p.live.json")).unwrap()).unwrap();
    let mut s = UnixStream::connect(live["sock"].as_str().unwrap()).unwrap();
    writeln!(s, r#"{{"verb":"kill","task":"a","actor":"test"}}"#).unwrap();
    let mut reply = String::new();
    BufReader::new(s).read_line(&mut reply).unwrap();
    assert!(reply.contains("\"ok\":true"), "{reply}");
    // The reply comes once the run is over: nothing of it may be left.
    assert!(p.iter().all(|&p| !alive(p)), "left after the kill's reply: {:?}", pids(&dir.join("pids")));
    assert_eq!(sup.wait(Duration::from_secs(10)), Some(1));
}

#[test]
fn supervise_killed_with_sigkill_leaves_no_process() {
    let dir = tmp("supkill9");
    let _c = Cleanup(dir.clone());
    let mut sup = Sup::start(&dir, "hang");
    let p = escapers(&dir.join("pids"));
    sup.child.kill().unwrap();
    sup.child.wait().unwrap();
    all_gone(&p, Duration::from_secs(8));
}

#[test]
fn supervise_step_ends_when_the_wrapper_exits_and_its_orphan_goes() {
    let dir = tmp("suplinger");
    let _c = Cleanup(dir.clone());
    let mut sup = Sup::start(&dir, "exit");
    assert_eq!(sup.wait(Duration::from_secs(10)), Some(1));
    let halted = journal(&dir).into_iter().find(|r| r["state"] == "halted").expect("the task halted");
    assert_eq!(halted["detail"], "wrapper exited 1", "{halted}");
    all_gone(&pids(&dir.join("pids")), Duration::from_secs(2));
    // The supervisor wrote the wrapper's output itself, with arrival times.
    let log = std::fs::read_to_string(dir.join("runstate/p.a.log")).unwrap();
    assert_eq!(log.lines().count(), 2, "{log}");
    let at = std::fs::read_to_string(dir.join("runstate/p.a.log.at")).unwrap();
    let ordinals: Vec<&str> = at.lines().map(|l| l.split(' ').next().unwrap()).collect();
    assert_eq!(ordinals, ["1", "2"], "{at}");
}

#[test]
fn a_recorder_that_cannot_write_journals_the_run_failed_with_the_reason() {
    let dir = tmp("full");
    let _c = Cleanup(dir.clone());
    // The run's log is /dev/full: every write fails with ENOSPC, as on a full disk.
    let runstate = dir.join("home/serve/runstate");
    std::fs::create_dir_all(&runstate).unwrap();
    std::os::unix::fs::symlink("/dev/full", runstate.join("agui-full.agent.log")).unwrap();
    let mut cmd = Server::command();
    cmd.args(["--agent", "claude", "--agent-cmd"])
        .arg(root().join("fixtures/stub-wrapper/agent.sh"))
        .env("HARNESS_HOME", dir.join("home"));
    let s = Server::spawn(cmd);
    let mut sock = post(s.port, "full");
    let mut body = Vec::new();
    sock.read_to_end(&mut body).unwrap();
    // The client still got the whole run.
    assert!(String::from_utf8_lossy(&body).contains("RUN_FINISHED"));
    let journal: Vec<serde_json::Value> = std::fs::read_to_string(runstate.join("agui-full.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let end = journal.iter().rev().find(|r| r["task"] == "agent").unwrap();
    assert_eq!(end["state"], "failed", "{journal:?}");
    assert!(end["detail"].as_str().unwrap().contains("No space left on device"), "{end}");
    assert_eq!(journal.last().unwrap()["run"], "finished");
}

#[test]
fn a_supervised_step_whose_log_cannot_be_written_is_halted_with_the_reason() {
    let dir = tmp("supfull");
    let _c = Cleanup(dir.clone());
    std::fs::create_dir_all(dir.join("runstate")).unwrap();
    std::os::unix::fs::symlink("/dev/full", dir.join("runstate/p.a.log")).unwrap();
    let mut sup = Sup::start(&dir, "hang");
    assert_eq!(sup.wait(Duration::from_secs(15)), Some(1));
    let halted = journal(&dir).into_iter().find(|r| r["state"] == "halted").expect("the task halted");
    let detail = halted["detail"].as_str().unwrap();
    assert!(detail.contains("could not be written") && detail.contains("No space left on device"), "{halted}");
    all_gone(&pids(&dir.join("pids")), Duration::from_secs(2));
}

#[test]
fn a_killed_wrapper_gets_sigterm_and_its_status_line_reaches_the_log() {
    // The real claude wrapper over the stub engine that hangs: on SIGTERM
    // it stops the engine and writes its status line. A signal mask passed
    // on by the reaper (SIGTERM blocked) made it wait for SIGKILL instead.
    let dir = tmp("term");
    let _c = Cleanup(dir.clone());
    let mut sup = Sup::hanging(&dir, &["--kill-grace", "20"], None);
    let until = Instant::now() + Duration::from_secs(20);
    let sock = loop {
        let live: serde_json::Value = std::fs::read(dir.join("runstate/p.live.json"))
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or_default();
        if pids(&dir.join("pids")).len() >= 2 && live["tasks"]["a"]["session_id"].is_string() {
            break live["sock"].as_str().unwrap().to_string();
        }
        assert!(Instant::now() < until, "the task never hung");
        std::thread::sleep(Duration::from_millis(20));
    };
    let t = Instant::now();
    let mut s = UnixStream::connect(sock).unwrap();
    writeln!(s, r#"{{"verb":"kill","task":"a","actor":"test"}}"#).unwrap();
    let mut reply = String::new();
    BufReader::new(s).read_line(&mut reply).unwrap();
    // Well inside the 20 s grace: SIGTERM did it.
    assert!(t.elapsed() < Duration::from_secs(10), "{reply} after {:?}", t.elapsed());
    assert!(reply.contains("rc 143"), "{reply}");
    let log = std::fs::read_to_string(dir.join("runstate/p.a.log")).unwrap();
    assert!(log.trim_end().ends_with(r#""detail":"stopped: the wrapper got SIGTERM","files":[]}"#), "{log}");
    assert_eq!(sup.wait(Duration::from_secs(10)), Some(1));
}

/// The files under `dir`, as paths relative to it (directories too).
fn tree(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            out.push(e.path().strip_prefix(dir).unwrap().display().to_string());
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                stack.push(e.path());
            }
        }
    }
    out.sort();
    out
}

/// A run's scratch directory (`$RUNWIRE_RUN_TMPDIR`, made by the reaper in
/// `$TMPDIR`) goes with the run, whatever the program left in it, also when
/// the program was SIGKILLed.
#[test]
fn a_runs_scratch_directory_goes_with_the_run() {
    let dir = tmp("runtmp");
    let tmpdir = dir.join("tmp");
    std::fs::create_dir_all(&tmpdir).unwrap();
    let said = dir.join("said");
    let out = Command::new(env!("CARGO_BIN_EXE_runwire-reaper"))
        .args(["--grace-ms", "200", "--", "bash", "-c"])
        .arg(r#"mkdir "$RUNWIRE_RUN_TMPDIR/w" && : > "$RUNWIRE_RUN_TMPDIR/w/f" && echo "$RUNWIRE_RUN_TMPDIR" > "$1" && kill -KILL $$"#)
        .arg("sh")
        .arg(&said)
        .env("TMPDIR", &tmpdir)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(128 + 9), "{}", String::from_utf8_lossy(&out.stderr));
    let run_tmp = PathBuf::from(std::fs::read_to_string(&said).unwrap().trim());
    assert_eq!(run_tmp.parent(), Some(tmpdir.as_path()), "{}", run_tmp.display());
    assert!(run_tmp.file_name().unwrap().to_string_lossy().starts_with("runwire-run."), "{}", run_tmp.display());
    assert!(!run_tmp.exists(), "the run's scratch directory outlived it");
    assert_eq!(tree(&tmpdir), Vec::<String>::new());
}

/// The real claude wrapper keeps its temporary files (its FIFOs, the marks)
/// in the run's scratch directory: SIGKILLed with its hanging engine (the
/// reaper's SIGUSR1, "kill now"), it leaves nothing in `$TMPDIR`. Before,
/// its `runwire-wrap.XXXXXX` stayed there, as after any SIGKILL.
#[test]
fn a_sigkilled_wrapper_leaves_no_temporary_files() {
    let dir = tmp("wraptmp");
    let _c = Cleanup(dir.clone());
    let tmpdir = dir.join("tmp");
    std::fs::create_dir_all(&tmpdir).unwrap();
    let work = dir.join("work");
    std::fs::create_dir_all(work.join(".git")).unwrap();
    let path =
        format!("{}:{}", root().join("fixtures/stub-engines").display(), std::env::var("PATH").unwrap_or_default());
    let mut reaper = Command::new(env!("CARGO_BIN_EXE_runwire-reaper"))
        .args(["--grace-ms", "10000", "--"])
        .arg(root().join("wrappers/claude.sh"))
        .args(["--prompt", "x"])
        .current_dir(&work)
        .env("PATH", path)
        .env("TMPDIR", &tmpdir)
        .env("STUB_MODE", "hang")
        .env("STUB_PID_FILE", dir.join("pids"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // The engine hangs, and the wrapper's files are in the run's directory.
    let until = Instant::now() + Duration::from_secs(20);
    let wrap = loop {
        let t = tree(&tmpdir);
        let w = t.iter().find(|p| p.contains("/runwire-wrap.") && p.ends_with("/marks")).cloned();
        if let (Some(w), false) = (w, pids(&dir.join("pids")).is_empty()) {
            break w;
        }
        assert!(Instant::now() < until, "the wrapper never made its files in the run's directory: {t:?}");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(wrap.starts_with("runwire-run."), "{wrap}");
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(reaper.id() as i32), nix::sys::signal::Signal::SIGUSR1).unwrap();
    let status = reaper.wait().unwrap();
    assert_eq!(status.code(), Some(128 + 9), "the wrapper was SIGKILLed: {status:?}");
    assert_eq!(tree(&tmpdir), Vec::<String>::new(), "left in $TMPDIR after the run");
}

/// Task `a`'s process group leader (its reaper), as the run's owner
/// record names it, once there is one.
fn task_leader(dir: &Path) -> Option<i32> {
    let owner = std::fs::read_dir(dir.join("home/sock"))
        .into_iter()
        .flatten()
        .flatten()
        .find(|e| e.file_name().to_string_lossy().ends_with(".owner.json"))?;
    let owner: serde_json::Value = serde_json::from_slice(&std::fs::read(owner.path()).ok()?).ok()?;
    owner["groups"]["a"]["pid"].as_i64().map(|p| p as i32)
}

/// Task `a`'s process group as its supervisor recorded it (its reaper
/// leads it), once the wrapper's files are in the run's directory in
/// `tmpdir`: the leader's pid.
fn hung_task(dir: &Path, tmpdir: &Path) -> i32 {
    let until = Instant::now() + Duration::from_secs(20);
    loop {
        let leader = task_leader(dir);
        let files = tree(tmpdir).iter().any(|p| p.starts_with("runwire-run.") && p.ends_with("/marks"));
        if let (Some(l), true) = (leader, files) {
            return l;
        }
        assert!(Instant::now() < until, "the task never hung in its run's directory: {:?}", tree(tmpdir));
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A run whose whole process group, its reaper included, is SIGKILLed from
/// outside (the reaper removes nothing then): its caller, reaping the
/// reaper, removes the run's scratch directory and the wrapper's files in
/// it. Before, both stayed in `$TMPDIR`.
#[test]
fn a_run_killed_with_its_reaper_leaves_no_temporary_files() {
    let dir = tmp("reapertmp");
    let _c = Cleanup(dir.clone());
    let tmpdir = dir.join("tmp");
    std::fs::create_dir_all(tmpdir.clone()).unwrap();
    let mut sup = Sup::hanging(&dir, &[], Some(&tmpdir));
    let leader = hung_task(&dir, &tmpdir);
    nix::sys::signal::killpg(nix::unistd::Pid::from_raw(leader), nix::sys::signal::Signal::SIGKILL).unwrap();
    assert_eq!(sup.wait(Duration::from_secs(20)), Some(1), "the task failed, the run ended");
    assert_eq!(tree(&tmpdir), Vec::<String>::new(), "left in $TMPDIR after the run");
}

/// A supervisor SIGKILLed while its task's wrapper ignores SIGTERM (the
/// escape wrapper, with a child and a setsid orphan that do too): the
/// reaper, told by its caller's death, waits out the run's long grace, so
/// the next supervisor of the run finds that group still running and stops
/// it (SIGTERM, its own short grace, then the kill). Nothing of the old run
/// is left: not the orphan in a session of its own, and not the run's
/// scratch directory, which a SIGKILLed reaper never removes itself.
#[test]
fn a_stale_group_a_restarted_supervisor_stops_leaves_nothing() {
    let dir = tmp("staletmp");
    let _c = Cleanup(dir.clone());
    let tmpdir = dir.join("tmp");
    std::fs::create_dir_all(tmpdir.clone()).unwrap();
    let mut sup = Sup::escaping(&dir, "hang", "60", Some(&tmpdir));
    let old = escapers(&dir.join("pids"));
    let leader = task_leader(&dir).expect("task a's group in the run's owner record");
    let theirs = format!("runwire-run.{leader}.");
    sup.child.kill().unwrap();
    sup.child.wait().unwrap();
    std::thread::sleep(Duration::from_millis(300));
    assert!(alive(leader), "the reaper waits out its grace");
    assert!(tree(&tmpdir).iter().any(|p| p.starts_with(&theirs)), "{:?}", tree(&tmpdir));
    // The run again: its supervisor stops the stale group before it starts the task anew.
    let again = Sup::escaping(&dir.clone(), "hang", "1", Some(&tmpdir));
    let until = Instant::now() + Duration::from_secs(20);
    let left = || {
        let procs: Vec<i32> = old.iter().copied().chain([leader]).filter(|&p| alive(p)).collect();
        let files: Vec<String> = tree(&tmpdir).into_iter().filter(|p| p.starts_with(&theirs)).collect();
        (procs, files)
    };
    while left() != (vec![], vec![]) {
        assert!(Instant::now() < until, "left of the stale run (processes, files): {:?}", left());
        std::thread::sleep(Duration::from_millis(50));
    }
    drop(again);
}
