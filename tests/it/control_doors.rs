//! Issue 34: every door to a live agent keeps the same promises. The agent
//! is `examples/trust-agent` (ACP), a stand-in that numbers its permission
//! requests from 0 in every process and logs every line runwire writes to
//! it (`{"process": N, "line": …}`), so each test sees exactly what reached
//! the agent.
//!
//! - Defect 1, through the real binaries: under `runwire-supervise
//!   --interactive`, the task's first process asks request "0" and the
//!   answer allows it; a steer during the gate starts a second process,
//!   which asks its own "0"; the same answer replayed through `POST
//!   /runs/RUN/tasks/a/answer` and through the control socket sends nothing
//!   to the second process.
//! - A table naming each door (AG-UI resume, task route, control route,
//!   supervisor socket, session input line): a replayed, a stale (earlier
//!   process), a duplicate, an expired answer and one beyond what the
//!   agent offered each send nothing. The offer is the session's one rule
//!   (`Agent::check_answer`), met by every door's answer alike. The doors
//!   that outlive one agent process (task route, control route, supervisor
//!   socket) also send nothing for the open request named by the agent's
//!   own id ("0"), which the next process reuses.
//! - Idempotency keys: a steer (and an AG-UI run, and a link's POST)
//!   retried with its key acts once on each door: the HTTP doors'
//!   `Idempotency-Key`, the supervisor socket's and the session input
//!   line's `"idempotency_key"`.

use crate::support;
use support::server::{agui_events as agui, request as http};
use support::Server;

use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const LIMIT: Duration = Duration::from_secs(40);

/// Every line runwire wrote to the stand-in (`TRUST_LOG` in `dir`): (process, line).
fn agent_input(dir: &Path) -> Vec<(u64, Value)> {
    crate::support::complete_json_lines(&dir.join("agent-input.jsonl"))
        .into_iter()
        .map(|v| (v["process"].as_u64().unwrap(), v["line"].clone()))
        .collect()
}

/// The permission answers that reached the stand-in: (process, optionId or outcome).
fn acp_answers(dir: &Path) -> Vec<(u64, String)> {
    agent_input(dir)
        .into_iter()
        .filter(|(_, l)| l.get("method").is_none() && l.get("result").is_some())
        .map(|(p, l)| {
            let o = &l["result"]["outcome"];
            (p, o["optionId"].as_str().or(o["outcome"].as_str()).unwrap_or("?").to_string())
        })
        .collect()
}

fn until(what: &str, mut f: impl FnMut() -> bool, why: impl Fn() -> String) {
    let t = Instant::now();
    while !f() {
        assert!(t.elapsed() < LIMIT, "{what} did not happen; {}", why());
        std::thread::sleep(Duration::from_millis(30));
    }
}

/// A row of a door's table: the case, and whether the door sent nothing
/// (`Ok(what the door answered)`) or did something (`Err`).
type Row = (&'static str, &'static str, Result<String, String>);

/// "Nothing sent": the reply is a refusal, or an acknowledgement saying so.
fn nothing_sent(door: &'static str, case: &'static str, code: u16, v: &Value) -> Row {
    let said = format!("{code} {v}");
    let refused = code == 409 || code == 400 || v["ok"] == false;
    let acknowledged = code == 200 && v["ok"] == true && v["sent"] == false;
    (door, case, if refused || acknowledged { Ok(said) } else { Err(said) })
}

// ---------------------------------------------------------------------------
// The supervisor: its control socket and the server's control route to it.

/// `runwire-supervise --interactive` over one `acp` task run by the
/// stand-in, with a gate that waits for the file `go`.
struct Sup(support::Supervised);

impl std::ops::Deref for Sup {
    type Target = support::Supervised;
    fn deref(&self) -> &support::Supervised {
        &self.0
    }
}

impl Sup {
    fn start(name: &str) -> Sup {
        Sup::start_with(name, None)
    }

    /// `answer_timeout`: the sessions' (`RUNWIRE_ANSWER_TIMEOUT`), else theirs by default.
    fn start_with(name: &str, answer_timeout: Option<&str>) -> Sup {
        Sup::start_args(name, answer_timeout, &[])
    }

    /// [`Sup::start_with`], the supervisor given `args` too.
    fn start_args(name: &str, answer_timeout: Option<&str>, args: &[&str]) -> Sup {
        let dir = support::scratch(name);
        std::fs::create_dir_all(dir.join("home")).unwrap();
        std::fs::create_dir_all(dir.join(".git")).unwrap();
        std::fs::create_dir_all(dir.join("no-wrappers")).unwrap();
        let task = json!({"id": "a", "adapter": "acp", "prompt": "touch a file",
            "cmd": [support::example("trust-agent"), "acp"],
            "gate": "while [ ! -e go ]; do sleep 0.05; done"});
        std::fs::write(dir.join("p.plan.json"), json!({"v": "plan/v1", "tasks": [task]}).to_string()).unwrap();
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_runwire-supervise"));
        cmd.env("HARNESS_HOME", dir.join("home"))
            .env("RUNWIRE_SESSION_BIN", env!("CARGO_BIN_EXE_runwire-session"))
            .env("TRUST_PROTO", "acp")
            .env("TRUST_LOG", dir.join("agent-input.jsonl"))
            .env("TRUST_STATE", dir.join("processes"))
            .args(["--plan", "p.plan.json", "--kill-grace", "2", "--interactive", "--wrapper-dir"])
            .arg(dir.join("no-wrappers"))
            .args(args);
        if let Some(t) = answer_timeout {
            cmd.env("RUNWIRE_ANSWER_TIMEOUT", t);
        }
        Sup(support::Supervised::spawn(dir, cmd))
    }

    fn why(&self) -> String {
        format!(
            "journal {:?}\nagent input {:?}\nlog:\n{}\nstderr:\n{}",
            self.journal(),
            agent_input(&self.dir),
            self.log(),
            self.stderr()
        )
    }

    fn until(&self, what: &str, f: impl Fn(&Sup) -> bool) {
        until(what, || f(self), || self.why());
    }

    fn call(&self, req: Value) -> Value {
        self.0.call(req, LIMIT)
    }

    /// The journal's `requested` records, in order.
    fn requested(&self) -> Vec<Value> {
        self.journal().into_iter().filter(|r| r["input"] == "requested").collect()
    }

    fn run_id(&self) -> String {
        let run = std::fs::read_dir(self.dir.join("home/runs")).unwrap().flatten().next().unwrap();
        run.path().file_stem().unwrap().to_string_lossy().to_string()
    }
}

/// How a client names a journaled request: runwire's id where the record
/// has one (a writer before issue 34 had none: the agent's id, which is
/// how the defect showed).
fn name_of(rec: &Value) -> String {
    rec["interrupt"].as_str().or(rec["request"].as_str()).unwrap().to_string()
}

/// Defect 1's scene: the first process's request answered (allow), a steer
/// during the gate, the second process asking its own "0". Returns the two
/// names the answers use.
fn second_process_asks(s: &Sup) -> (String, String) {
    s.until("the first request in the journal", |s| !s.requested().is_empty());
    let first = s.requested()[0].clone();
    assert_eq!(first["request"], "0", "{first}");
    let old = name_of(&first);
    let r = s.call(json!({"verb": "answer", "task": "a", "actor": "ana",
        "answer": {"id": old, "decision": "allow"}}));
    assert_eq!(r["ok"], true, "{r}");
    s.until("the answer to reach the first process", |s| acp_answers(&s.dir) == [(1, "allow-once".to_string())]);
    s.until("the gate", |s| s.states().contains(&"implemented".to_string()));
    let r = s.call(json!({"verb": "steer", "task": "a", "actor": "ana", "msg": "touch another one"}));
    assert_eq!(r["ok"], true, "{r}");
    assert!(r["detail"].as_str().unwrap().contains("next turn boundary"), "{r}");
    std::fs::write(s.dir.join("go"), "").unwrap();
    s.until("the second process's request", |s| s.requested().len() == 2);
    let second = s.requested()[1].clone();
    assert_eq!(second["request"], "0", "the new process numbers its requests again: {second}");
    let new = name_of(&second);
    // The next gate waits again: the supervisor stays until the test lets it go.
    std::fs::remove_file(s.dir.join("go")).unwrap();
    (old, new)
}

/// Defect 1: the same answer replayed through the control route and the
/// control socket never reaches the second process; a different answer to
/// the old request and the agent's raw id are refused; the new request is
/// answered by its own id only.
#[test]
fn a_replayed_answer_never_approves_the_next_processes_request_through_the_supervisor() {
    let mut s = Sup::start("doors-defect-1");
    let (old, new) = second_process_asks(&s);
    let srv = Server::start(&s.dir.join("home"));
    let route = format!("/runs/{}/tasks/a/answer", s.run_id());
    // A stale studio card and a client retry replay the first answer, on the route and the socket.
    let (code, v) = srv.post(&route, &json!({"request": old, "decision": "allow"}).to_string());
    let r = s.call(json!({"verb": "answer", "task": "a", "answer": {"id": old, "decision": "allow"}}));
    // Whatever was written would be in the stand-in's log by now.
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(acp_answers(&s.dir), [(1, "allow-once".to_string())], "nothing reached the new process: {}", s.why());
    let asked = agent_input(&s.dir).iter().filter(|(p, l)| *p == 2 && l["method"] == "session/prompt").count();
    assert_eq!(asked, 1, "{}", s.why());
    // Both acknowledged as the replay they are, saying nothing was sent.
    assert_eq!((code, v["ok"].as_bool(), v["sent"].as_bool()), (200, Some(true), Some(false)), "{v}");
    assert!(v["detail"].as_str().unwrap().contains("nothing sent"), "{v}");
    assert_eq!((r["ok"].as_bool(), r["sent"].as_bool()), (Some(true), Some(false)), "{r}");
    // The ids are runwire's, distinct, and another process (the server) names the open one from the journal.
    assert!(old.starts_with("rw-") && old.len() == 35 && new.starts_with("rw-") && new != old, "{old} {new}");
    let (code, shown) = srv.get(&format!("/runs/{}", s.run_id()));
    assert_eq!(code, 200, "{shown}");
    let open: Vec<&str> =
        shown["inputRequests"].as_array().unwrap().iter().filter_map(|r| r["interrupt"].as_str()).collect();
    assert_eq!(open, [new.as_str()], "{shown}");
    // A different answer to the old request, and the agent's own id: refused.
    let (code, v) = srv.post(&route, &json!({"request": old, "decision": "deny"}).to_string());
    assert_eq!(code, 409, "{v}");
    assert!(v["detail"].as_str().unwrap().contains("earlier agent process"), "{v}");
    let (code, v) = srv.post(&route, &json!({"request": "0", "decision": "allow"}).to_string());
    assert_eq!(code, 400, "the agent's own id names no process: {v}");
    let r = s.call(json!({"verb": "answer", "task": "a", "answer": {"id": "0", "decision": "allow"}}));
    assert_eq!(r["ok"], false, "{r}");
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(acp_answers(&s.dir), [(1, "allow-once".to_string())], "nothing reached the new process: {}", s.why());
    // Its own id answers it.
    let (code, v) = srv.post(&route, &json!({"request": new, "decision": "deny"}).to_string());
    assert_eq!((code, v["ok"].as_bool()), (200, Some(true)), "{v}");
    s.until("the deny to reach the second process", |s| acp_answers(&s.dir).len() == 2);
    assert_eq!(acp_answers(&s.dir), [(1, "allow-once".to_string()), (2, "reject-once".to_string())]);
    std::fs::write(s.dir.join("go"), "").unwrap();
    assert_eq!(s.0.wait(LIMIT, |s| s.stderr()), 0, "{}", s.why());
    let answered: Vec<Value> = s.journal().into_iter().filter(|r| r["input"] == "answered").collect();
    let summary: Vec<(&str, &str, &str)> = answered
        .iter()
        .map(|r| (r["interrupt"].as_str().unwrap(), r["decision"].as_str().unwrap(), r["door"].as_str().unwrap()))
        .collect();
    assert_eq!(summary, [(old.as_str(), "allow", "supervisor-socket"), (new.as_str(), "deny", "task-route")]);
    // The steer is journaled with what it did, its actor and its door.
    let steer = s.journal().into_iter().find(|r| r["run"] == "steer-queued").unwrap();
    assert_eq!((steer["actor"].as_str(), steer["door"].as_str()), (Some("ana"), Some("supervisor-socket")), "{steer}");
}

/// The `runwire-session` processes of a supervisor started in `dir`.
fn sessions_of(dir: &Path) -> Vec<i32> {
    let bin = std::path::PathBuf::from(env!("CARGO_BIN_EXE_runwire-session"));
    let home = format!("HARNESS_HOME={}", dir.join("home").display());
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|p| std::fs::read_link(format!("/proc/{p}/exe")).is_ok_and(|e| e == bin))
        .filter(|p| {
            let env = std::fs::read(format!("/proc/{p}/environ")).unwrap_or_default();
            env.split(|&b| b == 0).any(|v| v == home.as_bytes())
        })
        .collect()
}

/// Two doors answer one request at once (their lines both written before
/// the session takes the first: it is held with SIGSTOP meanwhile): the
/// first line wins, and the journal's `answered` record names its door and
/// its person. It named the door of the last line written (a door that was
/// only acknowledged), or none when their people differed.
#[test]
fn answers_through_two_doors_at_once_journal_the_door_that_won() {
    let s = Sup::start("doors-race");
    s.until("the request in the journal", |s| !s.requested().is_empty());
    let id = name_of(&s.requested()[0]);
    let srv = Server::start(&s.dir.join("home"));
    let route = format!("/runs/{}/tasks/a/answer", s.run_id());
    let session = sessions_of(&s.dir);
    assert_eq!(session.len(), 1, "{session:?}");
    let signal = |sig| nix::sys::signal::kill(nix::unistd::Pid::from_raw(session[0]), sig).unwrap();
    signal(nix::sys::signal::Signal::SIGSTOP);
    let (socket, route_reply) = std::thread::scope(|sc| {
        let first = sc.spawn(|| {
            s.call(json!({"verb": "answer", "task": "a", "actor": "ana", "answer": {"id": id, "decision": "allow"}}))
        });
        std::thread::sleep(Duration::from_millis(300));
        let second =
            sc.spawn(|| srv.post(&route, &json!({"request": id, "decision": "allow", "by": "bob"}).to_string()));
        std::thread::sleep(Duration::from_millis(300));
        signal(nix::sys::signal::Signal::SIGCONT);
        (first.join().unwrap(), second.join().unwrap())
    });
    assert_eq!((socket["ok"].as_bool(), socket["sent"].as_bool()), (Some(true), Some(true)), "{socket}");
    assert_eq!(route_reply.1["sent"], false, "the second is acknowledged, not sent: {route_reply:?}");
    s.until("the answer to reach the agent", |s| acp_answers(&s.dir).len() == 1);
    let answered: Vec<Value> = s.journal().into_iter().filter(|r| r["input"] == "answered").collect();
    assert_eq!(answered.len(), 1, "{answered:?}");
    assert_eq!(
        (answered[0]["by"].as_str(), answered[0]["door"].as_str()),
        (Some("ana"), Some("supervisor-socket")),
        "{answered:?}"
    );
    std::fs::write(s.dir.join("go"), "").unwrap();
}

/// The public address approval links are minted for in these tests.
const PUBLIC: &str = "https://rw.example.test";

/// A link secret file in `dir`.
fn link_secret(dir: &Path) -> std::path::PathBuf {
    let f = dir.join("link-secret");
    std::fs::write(&f, "0123456789abcdef0123456789abcdef-secret\n").unwrap();
    f
}

/// A form POST of an approval link: its status and page.
fn link_form(port: u16, path: &str, body: &str) -> (u16, String) {
    let r = support::server::request_with(port, "POST", path, "application/x-www-form-urlencoded", "", body);
    (r.status, String::from_utf8_lossy(&r.body).to_string())
}

/// Approval links for supervised tasks (`runwire-supervise --public-url
/// --link-secret-file`, the server's two flags): the supervisor journals a
/// link with each approval its task's agent raises; a `runwire-serve` with
/// the same settings shows it, and one POST answers it once through the
/// supervisor (door `link`, by `link`); the agent gets exactly that allow.
/// The link is bound to that one request of that process: used, it is
/// refused; changed, it names nothing; a server with another secret (or
/// none) acts on nothing.
#[test]
fn a_supervised_tasks_approval_link_answers_it_once_through_its_supervisor() {
    let dir = support::scratch("doors-supervised-link");
    let secret = link_secret(&dir);
    let other = dir.join("other-secret");
    std::fs::write(&other, "another secret of at least thirty-two bytes\n").unwrap();
    let flags = ["--public-url", PUBLIC, "--link-secret-file", secret.to_str().unwrap()];
    let mut s = Sup::start_args("doors-supervised-link-sup", None, &flags);
    s.until("the first request in the journal", |s| !s.requested().is_empty());
    let requested = s.requested()[0].clone();
    let link = requested["links"][0].as_str().unwrap_or_else(|| panic!("no link: {requested}")).to_string();
    assert!(link.starts_with(&format!("{PUBLIC}/a/")), "{link}");
    let path = &link[PUBLIC.len()..];
    let home = s.dir.join("home");
    // Before any server ran: the supervisor recorded where its links live,
    // so the run's view (`runs show`, no server) passes its link on.
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_runs"))
        .env("HARNESS_HOME", &home)
        .args(["show", &s.run_id()])
        .output()
        .unwrap();
    let shown: Value = serde_json::from_slice(&o.stdout).unwrap_or_else(|_| panic!("{o:?}"));
    assert_eq!(shown["inputRequests"][0]["links"][0], json!(link), "{shown}");
    let serve = |args: &[&str]| {
        let mut cmd = Server::command();
        cmd.env("HARNESS_HOME", &home).args(args);
        Server::spawn(cmd)
    };
    let form = link_form;
    // A server with another secret, or none, names nothing and sends nothing.
    for (args, code) in
        [(vec!["--public-url", PUBLIC, "--link-secret-file", other.to_str().unwrap()], 403), (vec![], 404)]
    {
        let srv = serve(&args);
        assert_eq!(form(srv.port, path, "decision=allow").0, code, "{args:?}");
    }
    let srv = serve(&flags);
    // The run's open request shows it (the studio's "Copy approval link").
    let (code, shown) = srv.get(&format!("/runs/{}", s.run_id()));
    assert_eq!((code, &shown["inputRequests"][0]["links"][0]), (200, &json!(link)), "{shown}");
    let (code, page) = http(srv.port, "GET", path, "");
    let page = String::from_utf8_lossy(&page).to_string();
    assert_eq!(code, 200, "{page}");
    assert!(page.contains("value=\"allow\"") && page.contains("value=\"deny\""), "{page}");
    // A changed token names nothing.
    let (head, tail) = path.split_at(10);
    let tampered = format!("{head}{}{}", if tail.starts_with('A') { 'B' } else { 'A' }, &tail[1..]);
    assert_eq!(form(srv.port, &tampered, "decision=allow").0, 403);
    std::thread::sleep(Duration::from_millis(300));
    assert!(acp_answers(&s.dir).is_empty(), "GET and a changed token act on nothing: {}", s.why());
    let (code, page) = form(srv.port, path, "decision=allow");
    assert_eq!(code, 200, "{page}");
    assert!(page.contains("Approved"), "{page}");
    s.until("the allow to reach the agent", |s| !acp_answers(&s.dir).is_empty());
    // Used: refused, and nothing more reaches the agent.
    let (code, page) = form(srv.port, path, "decision=deny");
    assert_eq!(code, 410, "{code} {page}");
    let (code, _) = http(srv.port, "GET", path, "");
    assert_eq!(code, 410);
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(acp_answers(&s.dir), [(1, "allow-once".to_string())], "{}", s.why());
    let answered: Vec<Value> = s.journal().into_iter().filter(|r| r["input"] == "answered").collect();
    assert_eq!(answered.len(), 1, "{answered:?}");
    let a = &answered[0];
    assert_eq!(
        (a["interrupt"].as_str(), a["decision"].as_str(), a["by"].as_str(), a["door"].as_str()),
        (requested["interrupt"].as_str(), Some("allow"), Some("link"), Some("link")),
        "{a}"
    );
    // What it granted: this call only (a link allows once), as asked.
    assert_eq!((a["scope"].as_str(), a.get("updated_input")), (Some("once"), None), "{a}");
    std::fs::write(s.dir.join("go"), "").unwrap();
    assert_eq!(s.0.wait(LIMIT, |s| s.stderr()), 0, "{}", s.why());
    // The run's supervisor gone, its link (an open one would too) says so.
    let (code, page) = form(srv.port, path, "decision=allow");
    assert_eq!(code, 410, "{code} {page}");
    assert_eq!(http(srv.port, "GET", path, "").0, 410);
}

/// A used link: its page is gone (410, no form), its POST refused, and no
/// answer reaches the agent (`dir`'s).
fn link_offers_and_sends_nothing(port: u16, path: &str, dir: &Path) {
    let (code, page) = http(port, "GET", path, "");
    let page = String::from_utf8_lossy(&page).to_string();
    assert_eq!(code, 410, "{page}");
    assert!(!page.contains("value=\"allow\""), "{page}");
    let (code, page) = link_form(port, path, "decision=allow");
    assert_eq!(code, 410, "{code} {page}");
    std::thread::sleep(Duration::from_millis(300));
    assert!(acp_answers(dir).is_empty(), "an answer reached the agent");
}

/// A link to a request whose supervisor was killed (SIGKILL: the journal
/// still says the request is open) offers no form and sends nothing: the
/// process that asked is gone, and a new supervisor's socket would refuse
/// an earlier process's request anyway.
#[test]
fn a_link_to_a_request_whose_supervisor_was_killed_offers_nothing_and_sends_nothing() {
    let dir = support::scratch("doors-supervised-link-killed");
    let secret = link_secret(&dir);
    let flags = ["--public-url", PUBLIC, "--link-secret-file", secret.to_str().unwrap()];
    let mut s = Sup::start_args("doors-supervised-link-killed-sup", None, &flags);
    s.until("the first request in the journal", |s| !s.requested().is_empty());
    let requested = s.requested()[0].clone();
    let link = requested["links"][0].as_str().unwrap_or_else(|| panic!("no link: {requested}")).to_string();
    let path = link[PUBLIC.len()..].to_string();
    let mut srv = Server::command();
    srv.env("HARNESS_HOME", s.dir.join("home")).args(flags);
    let srv = Server::spawn(srv);
    assert_eq!(http(srv.port, "GET", &path, "").0, 200, "open, its supervisor there: the form");
    // The supervisor and everything it started, killed without a word.
    let mut child = s.0.child.take().unwrap();
    let _ = nix::sys::signal::killpg(nix::unistd::Pid::from_raw(child.id() as i32), nix::sys::signal::Signal::SIGKILL);
    let _ = child.wait();
    assert!(s.journal().iter().all(|r| r["input"] != "answered"), "nothing answered it: {:?}", s.journal());
    link_offers_and_sends_nothing(srv.port, &path, &s.dir);
}

/// A task's agent killed (SIGKILL to its process group) with a request
/// open, its supervisor alive: the supervisor closes the request in the
/// journal, withdrawn (`cancelled`, by runwire, with the interrupt id it
/// was asked under), so its link offers nothing and sends nothing. Before:
/// the journal kept it open for as long as the run lived.
#[test]
fn a_request_whose_agent_was_killed_is_closed_in_the_journal_and_its_link_offers_nothing() {
    let dir = support::scratch("doors-supervised-agent-killed");
    let secret = link_secret(&dir);
    let flags = ["--public-url", PUBLIC, "--link-secret-file", secret.to_str().unwrap()];
    let s = Sup::start_args("doors-supervised-agent-killed-sup", None, &flags);
    s.until("the first request in the journal", |s| !s.requested().is_empty());
    let requested = s.requested()[0].clone();
    let link = requested["links"][0].as_str().unwrap_or_else(|| panic!("no link: {requested}")).to_string();
    let path = link[PUBLIC.len()..].to_string();
    // The task's process group, as its supervisor registered it.
    let owner = runwire::supervise::socket::Owner::read(&s.dir.join("home"), &s.run_id()).expect("the owner record");
    let leader = owner.groups.get("a").unwrap_or_else(|| panic!("no group for task a: {owner:?}")).pid;
    nix::sys::signal::killpg(nix::unistd::Pid::from_raw(leader), nix::sys::signal::Signal::SIGKILL).unwrap();
    s.until("the request closed in the journal", |s| {
        s.journal().iter().any(|r| r["input"] == "answered" && r["request"] == requested["request"])
    });
    let closed = s.journal().into_iter().find(|r| r["input"] == "answered").unwrap();
    assert_eq!(closed["decision"], "cancelled", "{closed}");
    assert_eq!(closed["interrupt"], requested["interrupt"], "{closed}");
    assert!(closed.get("by").is_none_or(|b| b.is_null()), "nobody answered it: {closed}");
    let mut srv = Server::command();
    srv.env("HARNESS_HOME", s.dir.join("home")).args(flags);
    let srv = Server::spawn(srv);
    link_offers_and_sends_nothing(srv.port, &path, &s.dir);
}

/// A supervised claude task's approval answered through the supervisor's
/// socket with edits and for the session: the journal's `answered` record
/// (written by the supervisor from the session's answer line) says so, the
/// edited input redacted as the events redact it. Before, it said `allow`
/// and who only.
#[test]
fn a_supervised_answer_through_the_socket_journals_its_scope_and_edits() {
    let dir = support::scratch("doors-supervised-grants");
    std::fs::create_dir_all(dir.join("home")).unwrap();
    std::fs::create_dir_all(dir.join(".git")).unwrap();
    let task = json!({"id": "a", "adapter": "claude", "prompt": "test it"});
    std::fs::write(dir.join("p.plan.json"), json!({"v": "plan/v1", "tasks": [task]}).to_string()).unwrap();
    let ask = json!([{"request_id": "b1", "tool_name": "Bash", "input": {"command": "npm test"},
        "permission_suggestions": [{"type": "addRules", "rules": [{"toolName": "Bash", "ruleContent": "npm test:*"}],
            "behavior": "allow", "destination": "localSettings"}]}]);
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_runwire-supervise"));
    cmd.env("HARNESS_HOME", dir.join("home"))
        .env("RUNWIRE_SESSION_BIN", env!("CARGO_BIN_EXE_runwire-session"))
        .env("RUNWIRE_CLAUDE_BIN", support::example("trust-agent"))
        .env("TRUST_PROTO", "claude")
        .env("TRUST_LOG", dir.join("agent-input.jsonl"))
        .env("TRUST_STATE", dir.join("processes"))
        .env("TRUST_REQUESTS", ask.to_string())
        .args(["--plan", "p.plan.json", "--kill-grace", "2", "--interactive", "--wrapper-dir"])
        .arg(std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("wrappers"));
    let mut s = support::Supervised::spawn(dir, cmd);
    let why =
        |s: &support::Supervised| format!("journal {:?}\nlog:\n{}\nstderr:\n{}", s.journal(), s.log(), s.stderr());
    until("the request in the journal", || s.journal().iter().any(|r| r["input"] == "requested"), || why(&s));
    let requested = s.journal().into_iter().find(|r| r["input"] == "requested").unwrap();
    let edited = json!({"command": "npm test -- --ci", "env": {"API_TOKEN": "t0ps3cret-value"}});
    let r = s.call(
        json!({"verb": "answer", "task": "a", "actor": "ana",
               "answer": {"id": requested["interrupt"], "decision": "allow", "scope": "session", "updated_input": edited}}),
        LIMIT,
    );
    assert_eq!(r["ok"], true, "{r}");
    until("the answer in the journal", || s.journal().iter().any(|r| r["input"] == "answered"), || why(&s));
    let a = s.journal().into_iter().find(|r| r["input"] == "answered").unwrap();
    assert_eq!(
        (a["by"].as_str(), a["door"].as_str(), a["scope"].as_str()),
        (Some("ana"), Some("supervisor-socket"), Some("session")),
        "{a}"
    );
    let shown = a["updated_input"].as_str().unwrap_or_else(|| panic!("no edited input: {a}"));
    assert!(shown.contains("npm test -- --ci") && !shown.contains("t0ps3cret"), "{shown}");
    assert_eq!(s.wait(LIMIT, |s| s.stderr()), 0, "{}", why(&s));
}

/// A supervised claude task's question (AskUserQuestion) gets a link too:
/// the journal keeps its questions, so the server's page lists the choices,
/// and the form's answer reaches the agent once through the supervisor.
#[test]
fn a_supervised_tasks_question_link_offers_its_choices_and_answers_once() {
    let dir = support::scratch("doors-supervised-question");
    let secret = link_secret(&dir);
    std::fs::create_dir_all(dir.join("home")).unwrap();
    std::fs::create_dir_all(dir.join(".git")).unwrap();
    let task = json!({"id": "a", "adapter": "claude", "prompt": "ask me"});
    std::fs::write(dir.join("p.plan.json"), json!({"v": "plan/v1", "tasks": [task]}).to_string()).unwrap();
    let ask = json!([{"request_id": "q1", "tool_name": "AskUserQuestion", "requires_user_interaction": true,
        "input": {"questions": [{"question": "Tabs or spaces?", "header": "Indent",
            "options": [{"label": "tabs"}, {"label": "spaces"}], "multiSelect": false}]}}]);
    let flags = ["--public-url", PUBLIC, "--link-secret-file", secret.to_str().unwrap()];
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_runwire-supervise"));
    cmd.env("HARNESS_HOME", dir.join("home"))
        .env("RUNWIRE_SESSION_BIN", env!("CARGO_BIN_EXE_runwire-session"))
        .env("RUNWIRE_CLAUDE_BIN", support::example("trust-agent"))
        .env("TRUST_PROTO", "claude")
        .env("TRUST_LOG", dir.join("agent-input.jsonl"))
        .env("TRUST_STATE", dir.join("processes"))
        .env("TRUST_REQUESTS", ask.to_string())
        .args(["--plan", "p.plan.json", "--kill-grace", "2", "--interactive", "--wrapper-dir"])
        .arg(std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("wrappers"))
        .args(flags);
    let mut s = support::Supervised::spawn(dir, cmd);
    let why =
        |s: &support::Supervised| format!("journal {:?}\nlog:\n{}\nstderr:\n{}", s.journal(), s.log(), s.stderr());
    until("the question in the journal", || s.journal().iter().any(|r| r["input"] == "requested"), || why(&s));
    let requested = s.journal().into_iter().find(|r| r["input"] == "requested").unwrap();
    assert_eq!(requested["kind"], "question", "{requested}");
    assert_eq!(requested["questions"][0]["question"], "Tabs or spaces?", "{requested}");
    let link = requested["links"][0].as_str().unwrap_or_else(|| panic!("no link: {requested}")).to_string();
    let path = &link[PUBLIC.len()..];
    let mut srv = Server::command();
    srv.env("HARNESS_HOME", s.dir.join("home")).args(flags);
    let srv = Server::spawn(srv);
    let (code, page) = http(srv.port, "GET", path, "");
    let page = String::from_utf8_lossy(&page).to_string();
    assert_eq!(code, 200, "{page}");
    assert!(page.contains("Indent: Tabs or spaces?") && page.contains(r#"value="spaces""#), "{page}");
    let form = |body: &str| link_form(srv.port, path, body);
    // An answer to a question not asked: refused, nothing sent.
    assert_eq!(form("decision=answer&q0=spaces&q1=x").0, 400);
    // Given as JSON, the supervisor's session checks it: still a 400 that
    // says what to correct, and the link still works (before: 410, used).
    let r = support::server::request_with(
        srv.port,
        "POST",
        path,
        "application/json",
        "",
        &json!({"decision": "answer", "answers": {"Tabs or spaces or what?": "tabs"}}).to_string(),
    );
    let page = String::from_utf8_lossy(&r.body).to_string();
    assert_eq!(r.status, 400, "{page}");
    assert!(page.contains("no question") && page.contains("was asked"), "{page}");
    let (code, page) = form("decision=answer&q0=spaces");
    assert_eq!(code, 200, "{page}");
    assert!(page.contains("Answered"), "{page}");
    let responses = || support::control_responses(&s.dir.join("agent-input.jsonl"));
    until("the answer at the agent", || !responses().is_empty(), || why(&s));
    let (code, _) = form("decision=answer&q0=tabs");
    assert_eq!(code, 410, "{code}");
    std::thread::sleep(Duration::from_millis(300));
    let a = support::answered_spaces_once(&responses(), s.journal());
    assert_eq!(a["by"], "link", "{a}");
    assert_eq!(s.wait(LIMIT, |s| s.stderr()), 0, "{}", why(&s));
}

/// The supervisor's two doors, each with a replayed, a stale and a duplicate answer.
fn supervisor_doors(rows: &mut Vec<Row>) {
    let mut s = Sup::start("doors-supervisor");
    let (old, new) = second_process_asks(&s);
    let srv = Server::start(&s.dir.join("home"));
    let route = format!("/runs/{}/tasks/a/answer", s.run_id());
    let post = |body: Value| srv.post(&route, &body.to_string());
    let sock = |answer: Value| {
        let r = s.call(json!({"verb": "answer", "task": "a", "answer": answer}));
        (
            if r["ok"] == true {
                200
            } else if r["code"] == "bad_request" {
                400
            } else {
                409
            },
            r,
        )
    };
    let (c, v) = post(json!({"request": old, "decision": "allow"}));
    rows.push(nothing_sent("control-route", "replayed", c, &v));
    let (c, v) = sock(json!({"id": old, "decision": "allow"}));
    rows.push(nothing_sent("supervisor-socket", "replayed", c, &v));
    let (c, v) = post(json!({"request": old, "decision": "deny"}));
    rows.push(nothing_sent("control-route", "stale", c, &v));
    let (c, v) = sock(json!({"id": old, "decision": "deny"}));
    rows.push(nothing_sent("supervisor-socket", "stale", c, &v));
    // The open request named by the agent's own id ("0": every process of
    // the task numbers from 0), not runwire's.
    let (c, v) = post(json!({"request": "0", "decision": "allow"}));
    rows.push(nothing_sent("control-route", "agent's own id", c, &v));
    let (c, v) = sock(json!({"id": "0", "decision": "allow"}));
    rows.push(nothing_sent("supervisor-socket", "agent's own id", c, &v));
    // Beyond what the agent offered (ACP runs a call as asked: no edited input).
    let (c, v) = post(json!({"request": new, "decision": "allow", "updated_input": {"command": "rm -rf /"}}));
    rows.push(nothing_sent("control-route", "beyond the offer", c, &v));
    let (c, v) = sock(json!({"id": new, "decision": "allow", "updated_input": {"command": "rm -rf /"}}));
    rows.push(nothing_sent("supervisor-socket", "beyond the offer", c, &v));
    // The new request answered once, then the same answer again on each door.
    let (c, v) = post(json!({"request": new, "decision": "deny"}));
    assert_eq!((c, v["sent"].as_bool()), (200, Some(true)), "{v}");
    s.until("the deny to reach the second process", |s| acp_answers(&s.dir).len() == 2);
    let (c, v) = post(json!({"request": new, "decision": "deny"}));
    rows.push(nothing_sent("control-route", "duplicate", c, &v));
    let (c, v) = sock(json!({"id": new, "decision": "deny"}));
    rows.push(nothing_sent("supervisor-socket", "duplicate", c, &v));
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(acp_answers(&s.dir), [(1, "allow-once".to_string()), (2, "reject-once".to_string())], "{}", s.why());
    std::fs::write(s.dir.join("go"), "").unwrap();
    assert_eq!(s.0.wait(LIMIT, |s| s.stderr()), 0, "{}", s.why());
}

// ---------------------------------------------------------------------------
// The server's own sessions: the AG-UI resume and the task routes.

fn interrupts(ev: &[Value]) -> Vec<Value> {
    let end = ev.last().unwrap();
    assert_eq!(end["outcome"]["type"], "interrupt", "{end}");
    end["outcome"]["interrupts"].as_array().unwrap().clone()
}

fn session_run(ev: &[Value]) -> String {
    ev.iter()
        .find(|e| e["type"] == "CUSTOM" && e["name"] == "runwire.session")
        .and_then(|e| e["value"]["run"].as_str())
        .expect("runwire.session names the recorded run")
        .to_string()
}

/// "Nothing sent" for an AG-UI run: it ended refused, or it acknowledged
/// the replay (`runwire.resume_skipped`) and is still waiting.
fn agui_nothing_sent(case: &'static str, ev: &[Value]) -> Row {
    let end = ev.last().unwrap();
    let refused = end["type"] == "RUN_ERROR";
    // Skipped, saying nothing was sent, or that runwire raised no such
    // interrupt (an id that is not runwire's, the agent's own).
    let acknowledged = end["outcome"]["type"] == "interrupt"
        && ev.iter().any(|e| {
            let w = e["value"]["warning"].to_string();
            e["name"] == "runwire.resume_skipped"
                && (w.contains("nothing sent") || w.contains("runwire raised no such interrupt"))
        });
    ("agui-resume", case, if refused || acknowledged { Ok(end.to_string()) } else { Err(format!("{ev:?}")) })
}

fn server_doors(rows: &mut Vec<Row>) {
    let dir = support::scratch("doors-server");
    let mut cmd = Server::command();
    cmd.args(["--agent", "cursor", "--interactive", "--agent-cmd"])
        .arg(support::example("trust-agent"))
        .current_dir(&dir)
        .env("HARNESS_HOME", dir.join("harness"))
        .env("RUNWIRE_KEEPALIVE_MS", "60000")
        .env("TRUST_PROTO", "acp")
        .env("TRUST_LOG", dir.join("agent-input.jsonl"))
        .env("TRUST_STATE", dir.join("processes"))
        .env("TRUST_REQUESTS", "[]");
    let s = Server::spawn(cmd).owning(dir.clone());
    let resume = |run: &str, entries: Value| json!({"threadId": "t", "runId": run, "messages": [], "resume": entries});
    let run = |run: &str, prompt: &str| json!({"threadId": "t", "runId": run, "messages": [{"id": format!("m-{run}"), "role": "user", "content": prompt}]});
    let ev = agui(s.port, run("r1", "touch a file"));
    let old = interrupts(&ev)[0]["id"].as_str().unwrap().to_string();
    let record = session_run(&ev);
    let allow = |id: &str| json!([{"interruptId": id, "status": "resolved", "payload": {"approved": true}}]);
    let ev = agui(s.port, resume("r2", allow(&old)));
    assert_eq!(ev.last().unwrap()["type"], "RUN_FINISHED", "{ev:?}");
    // The agent restarts and asks its own "0".
    let (code, _) = http(s.port, "POST", &format!("/runs/{record}/tasks/agent/kill"), "{}");
    assert_eq!(code, 200);
    let ev = agui(s.port, run("r3", "touch another file"));
    let new = interrupts(&ev)[0]["id"].as_str().unwrap().to_string();
    let current = session_run(&ev);
    let post = |rec: &str, body: Value| {
        let (c, b) = http(s.port, "POST", &format!("/runs/{rec}/tasks/agent/answer"), &body.to_string());
        (c, serde_json::from_slice::<Value>(&b).unwrap_or_default())
    };
    rows.push(agui_nothing_sent("replayed", &agui(s.port, resume("r4", allow(&old)))));
    let deny_old = json!([{"interruptId": old, "status": "resolved", "payload": {"approved": false}},
                          {"interruptId": new, "status": "resolved", "payload": {"approved": true}}]);
    rows.push(agui_nothing_sent("stale", &agui(s.port, resume("r5", deny_old))));
    let twice = json!([{"interruptId": new, "status": "resolved", "payload": {"approved": true}},
                       {"interruptId": new, "status": "resolved", "payload": {"approved": true}}]);
    rows.push(agui_nothing_sent("duplicate", &agui(s.port, resume("r6", twice))));
    let (c, v) = post(&current, json!({"request": old, "decision": "allow"}));
    rows.push(nothing_sent("task-route", "replayed", c, &v));
    let (c, v) = post(&record, json!({"request": "0", "decision": "allow"}));
    rows.push(nothing_sent("task-route", "stale", c, &v));
    // The current process's open request by the agent's own id: a route
    // outlives processes, so it takes runwire's id only; so does a resume.
    let (c, v) = post(&current, json!({"request": "0", "decision": "allow"}));
    rows.push(nothing_sent("task-route", "agent's own id", c, &v));
    rows.push(agui_nothing_sent("agent's own id", &agui(s.port, resume("r5b", allow("0")))));
    let edited = json!([{"interruptId": new, "status": "resolved",
        "payload": {"approved": true, "editedArgs": {"command": "rm -rf /"}}}]);
    rows.push(agui_nothing_sent("beyond the offer", &agui(s.port, resume("r7", edited))));
    let (c, v) = post(&current, json!({"request": new, "decision": "allow", "updated_input": {"command": "rm -rf /"}}));
    rows.push(nothing_sent("task-route", "beyond the offer", c, &v));
    let (c, v) = post(&current, json!({"request": new, "decision": "deny"}));
    assert_eq!((c, v["sent"].as_bool()), (200, Some(true)), "{v}");
    until("the deny to reach the second process", || acp_answers(&dir).len() == 2, || s.stderr());
    let (c, v) = post(&current, json!({"request": new, "decision": "deny"}));
    rows.push(nothing_sent("task-route", "duplicate", c, &v));
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(acp_answers(&dir), [(1, "allow-once".to_string()), (2, "reject-once".to_string())]);
}

// ---------------------------------------------------------------------------
// runwire-session's input lines.

/// `runwire-session acp` over the stand-in, its input and output piped.
struct Session {
    child: std::process::Child,
    input: std::process::ChildStdin,
    output: std::sync::mpsc::Receiver<Value>,
    lines: u64,
}

impl Session {
    fn start(dir: &Path) -> Session {
        Session::start_with(dir, &[])
    }

    fn start_with(dir: &Path, extra: &[&str]) -> Session {
        let mut child = Command::new(env!("CARGO_BIN_EXE_runwire-session"))
            .args(["acp", "--prompt", "touch a file"])
            .args(extra)
            .arg("--")
            .arg(support::example("trust-agent"))
            .arg("acp")
            .current_dir(dir)
            .env("TRUST_PROTO", "acp")
            .env("TRUST_LOG", dir.join("agent-input.jsonl"))
            .env("TRUST_STATE", dir.join("processes"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start runwire-session");
        let input = child.stdin.take().unwrap();
        let out = child.stdout.take().unwrap();
        let (tx, output) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for l in BufReader::new(out).lines().map_while(Result::ok) {
                if let Ok(v) = serde_json::from_str::<Value>(&l) {
                    let _ = tx.send(v);
                }
            }
        });
        Session { child, input, output, lines: 0 }
    }

    /// The next output line of type `ty`.
    fn next(&self, ty: &str) -> Value {
        let t = Instant::now() + LIMIT;
        loop {
            let v = self.output.recv_timeout(t.saturating_duration_since(Instant::now())).expect(ty);
            if v["type"] == ty {
                return v;
            }
        }
    }

    /// Writes one input line; returns the session's ack of it.
    fn send(&mut self, line: Value) -> Value {
        writeln!(self.input, "{line}").unwrap();
        self.lines += 1;
        loop {
            let a = self.next("runwire.ack");
            if a["line"] == self.lines {
                return a;
            }
        }
    }

    fn end(mut self) {
        let _ = self.send(json!({"type": "end"}));
        drop(self.input);
        let _ = self.child.wait();
    }
}

fn session_row(case: &'static str, ack: &Value) -> Row {
    let ok = ack.get("refused").is_some() || ack["ack"] == "replay";
    ("session-input", case, if ok { Ok(ack.to_string()) } else { Err(ack.to_string()) })
}

fn session_doors(rows: &mut Vec<Row>) {
    let dir = support::scratch("doors-session");
    let mut first = Session::start(&dir);
    let old = first.next("runwire.request")["interrupt_id"].as_str().unwrap().to_string();
    let a = first.send(json!({"type": "answer", "id": old, "decision": "allow"}));
    assert_eq!(a["ack"], "taken", "{a}");
    first.end();
    // A second process of the same agent asks its own "0".
    let mut second = Session::start(&dir);
    let req = second.next("runwire.request");
    assert_eq!(req["id"], "0");
    let new = req["interrupt_id"].as_str().unwrap().to_string();
    rows.push(session_row("replayed", &second.send(json!({"type": "answer", "id": old, "decision": "allow"}))));
    let stale = second.send(json!({"type": "answer", "id": old, "decision": "deny"}));
    // Refused for the session's state, not as wrong in itself (409, not 400, where passed on).
    assert!(stale.get("invalid").is_none(), "{stale}");
    rows.push(session_row("stale", &stale));
    let edited = json!({"type": "answer", "id": new, "decision": "allow", "updated_input": {"command": "rm -rf /"}});
    let beyond = second.send(edited);
    // Wrong in itself: the acknowledgement says so, for a door to say 400.
    assert_eq!(beyond["invalid"], true, "{beyond}");
    rows.push(session_row("beyond the offer", &beyond));
    let a = second.send(json!({"type": "answer", "id": new, "decision": "deny"}));
    assert_eq!(a["ack"], "taken", "{a}");
    rows.push(session_row("duplicate", &second.send(json!({"type": "answer", "id": new, "decision": "deny"}))));
    second.end();
    assert_eq!(acp_answers(&dir), [(1, "allow-once".to_string()), (2, "reject-once".to_string())]);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The expired case on the supervisor's two doors: the request denied on
/// its deadline, then an allow on each door sends nothing.
fn supervisor_expired(rows: &mut Vec<Row>) {
    let mut s = Sup::start_with("doors-supervisor-expired", Some("1s"));
    s.until("the first request in the journal", |s| !s.requested().is_empty());
    let id = name_of(&s.requested()[0]);
    s.until("the request's expiry", |s| s.journal().iter().any(|r| r["input"] == "answered"));
    s.until("the expiry's deny to reach the agent", |s| acp_answers(&s.dir).len() == 1);
    let srv = Server::start(&s.dir.join("home"));
    let (c, v) = srv.post(
        &format!("/runs/{}/tasks/a/answer", s.run_id()),
        &json!({"request": id, "decision": "allow"}).to_string(),
    );
    rows.push(nothing_sent("control-route", "expired", c, &v));
    let r = s.call(json!({"verb": "answer", "task": "a", "answer": {"id": id, "decision": "allow"}}));
    rows.push(nothing_sent("supervisor-socket", "expired", if r["ok"] == true { 200 } else { 409 }, &r));
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(acp_answers(&s.dir).len(), 1, "only the expiry's deny reached the agent: {}", s.why());
    let answered: Vec<Value> = s.journal().into_iter().filter(|r| r["input"] == "answered").collect();
    assert_eq!(answered.len(), 1, "{answered:?}");
    assert_eq!(answered[0]["decision"], "expired", "{answered:?}");
    std::fs::write(s.dir.join("go"), "").unwrap();
    let _ = s.0.wait(LIMIT, |s| s.stderr());
}

/// The expired case on the server's AG-UI resume and task route.
fn server_expired(rows: &mut Vec<Row>) {
    let dir = support::scratch("doors-server-expired");
    let mut cmd = Server::command();
    cmd.args(["--agent", "cursor", "--interactive", "--answer-timeout", "1", "--agent-cmd"])
        .arg(support::example("trust-agent"))
        .current_dir(&dir)
        .env("HARNESS_HOME", dir.join("harness"))
        .env("RUNWIRE_KEEPALIVE_MS", "60000")
        .env("TRUST_PROTO", "acp")
        .env("TRUST_LOG", dir.join("agent-input.jsonl"))
        .env("TRUST_STATE", dir.join("processes"))
        .env("TRUST_REQUESTS", "[]");
    let s = Server::spawn(cmd).owning(dir.clone());
    let run =
        json!({"threadId": "t", "runId": "r1", "messages": [{"id": "m1", "role": "user", "content": "touch a file"}]});
    let ev = agui(s.port, run);
    let id = interrupts(&ev)[0]["id"].as_str().unwrap().to_string();
    let record = session_run(&ev);
    until("the expiry's deny to reach the agent", || acp_answers(&dir).len() == 1, || s.stderr());
    let allow = json!([{"interruptId": id, "status": "resolved", "payload": {"approved": true}}]);
    let resume = json!({"threadId": "t", "runId": "r2", "messages": [], "resume": allow});
    rows.push(agui_nothing_sent("expired", &agui(s.port, resume)));
    let (c, b) = http(
        s.port,
        "POST",
        &format!("/runs/{record}/tasks/agent/answer"),
        &json!({"request": id, "decision": "allow"}).to_string(),
    );
    rows.push(nothing_sent("task-route", "expired", c, &serde_json::from_slice(&b).unwrap_or_default()));
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(acp_answers(&dir).len(), 1, "only the expiry's deny reached the agent: {:?}", agent_input(&dir));
}

/// The expired case on runwire-session's input lines.
fn session_expired(rows: &mut Vec<Row>) {
    let dir = support::scratch("doors-session-expired");
    let mut s = Session::start_with(&dir, &["--answer-timeout", "1"]);
    let id = s.next("runwire.request")["interrupt_id"].as_str().unwrap().to_string();
    let closed = s.next("runwire.answer");
    assert_eq!(closed["decision"], "expired", "{closed}");
    until(
        "the expiry's deny to reach the agent",
        || acp_answers(&dir).len() == 1,
        || format!("{:?}", agent_input(&dir)),
    );
    rows.push(session_row("expired", &s.send(json!({"type": "answer", "id": id, "decision": "allow"}))));
    s.end();
    assert_eq!(acp_answers(&dir).len(), 1, "only the expiry's deny reached the agent: {:?}", agent_input(&dir));
    let _ = std::fs::remove_dir_all(&dir);
}

/// The table: each door, each case (a replayed answer, a stale one of an
/// earlier process, a duplicate, one beyond what the agent offered, one
/// after the request expired),
/// nothing sent. The agent's log is
/// checked inside each door's scene (only the answers the test meant reach it).
#[test]
fn every_door_sends_nothing_for_a_replayed_stale_duplicate_excessive_or_expired_answer() {
    // Each scene plays one or two doors against one agent stand-in.
    type Scene = fn(&mut Vec<Row>);
    let scenes: [(&[&str], Scene); 6] = [
        (&["agui-resume", "task-route"], server_doors),
        (&["control-route", "supervisor-socket"], supervisor_doors),
        (&["session-input"], session_doors),
        (&["agui-resume", "task-route"], server_expired),
        (&["control-route", "supervisor-socket"], supervisor_expired),
        (&["session-input"], session_expired),
    ];
    let mut rows = Vec::new();
    for (_, scene) in scenes {
        scene(&mut rows);
    }
    let named: Vec<(&str, &str)> = rows.iter().map(|(d, c, _)| (*d, *c)).collect();
    for door in scenes.iter().flat_map(|(doors, _)| doors.iter()) {
        let door = *door;
        for case in ["replayed", "stale", "duplicate", "beyond the offer", "expired"] {
            assert!(named.contains(&(door, case)), "no row for {door} / {case}: {named:?}");
        }
    }
    // Only a session's own input lines (one process) take the agent's id.
    for door in ["agui-resume", "task-route", "control-route", "supervisor-socket"] {
        assert!(named.contains(&(door, "agent's own id")), "no row for {door} / agent's own id: {named:?}");
    }
    let bad: Vec<&Row> = rows.iter().filter(|(_, _, r)| r.is_err()).collect();
    assert!(bad.is_empty(), "sent something: {bad:#?}");
}

// ---------------------------------------------------------------------------
// Idempotency keys: a key is executed once on any door.

/// A POST with an `Idempotency-Key`: status, whether the reply says it is a
/// replay, and the body.
fn keyed(port: u16, path: &str, key: &str, content_type: &str, body: &str) -> (u16, bool, String) {
    let r =
        support::server::request_with(port, "POST", path, content_type, &format!("Idempotency-Key: {key}\r\n"), body);
    let replayed = r.header("idempotent-replayed") == Some("true");
    (r.status, replayed, String::from_utf8_lossy(&r.body).to_string())
}

/// The supervisor's doors that take a keyed steer.
#[derive(Clone, Copy, Debug)]
enum SteerDoor {
    /// `POST /runs/RUN/tasks/a/steer` with `Idempotency-Key`, through a server.
    ControlRoute,
    /// The control socket's `"idempotency_key"` (spec/SUPERVISOR.md).
    Socket,
}

/// A keyed steer at `door`: status (the socket's reply read as the route
/// would answer it), whether it says it is a replay, and the reply without
/// that mark.
fn keyed_steer(s: &Sup, srv: &Option<Server>, door: SteerDoor, key: &str, msg: &str) -> (u16, bool, String) {
    match door {
        SteerDoor::ControlRoute => {
            let route = format!("/runs/{}/tasks/a/steer", s.run_id());
            let port = srv.as_ref().unwrap().port;
            keyed(port, &route, key, "application/json", &json!({"msg": msg}).to_string())
        }
        SteerDoor::Socket => {
            let mut r = s.call(json!({"verb": "steer", "task": "a", "msg": msg, "idempotency_key": key}));
            let replayed = r.as_object_mut().unwrap().remove("replayed") == Some(Value::Bool(true));
            let code = match (r["ok"].as_bool(), r["code"].as_str()) {
                (Some(true), _) => 200,
                (_, Some("idempotency_key_conflict")) => 422,
                _ => 409,
            };
            (code, replayed, r.to_string())
        }
    }
}

/// A supervised run whose task's first request was allowed, at its gate
/// (a turn boundary: a steer is queued for the next turn), and the server
/// whose route is the `door` (none for the socket).
fn at_the_gate(name: &str, door: SteerDoor) -> (Sup, Option<Server>) {
    let s = Sup::start(name);
    s.until("the first request in the journal", |s| !s.requested().is_empty());
    let first = name_of(&s.requested()[0]);
    let r = s.call(json!({"verb": "answer", "task": "a", "answer": {"id": first, "decision": "allow"}}));
    assert_eq!(r["ok"], true, "{r}");
    s.until("the gate", |s| s.states().contains(&"implemented".to_string()));
    let srv = matches!(door, SteerDoor::ControlRoute).then(|| Server::start(&s.dir.join("home")));
    (s, srv)
}

/// The steers the run's journal says were queued (`steer-queued`).
fn queued(s: &Sup) -> usize {
    s.journal().into_iter().filter(|r| r["run"] == "steer-queued").count()
}

/// A steer retried with its key at a supervisor's `door` gives one
/// `steer-queued` record and the agent one prompt; the same key with another
/// steer is refused (422 on HTTP), naming the key, and queues nothing.
fn a_retried_steer_with_its_key_is_queued_once(name: &str, door: SteerDoor) {
    let (mut s, srv) = at_the_gate(name, door);
    let (c1, r1, b1) = keyed_steer(&s, &srv, door, "click-steer-1", "touch the keyed file");
    assert!(c1 == 200 || c1 == 202, "{door:?}: {c1} {b1}");
    assert!(!r1, "{door:?}: the first is no replay");
    let (c2, r2, b2) = keyed_steer(&s, &srv, door, "click-steer-1", "touch the keyed file");
    assert_eq!((c2, r2, &b2), (c1, true, &b1), "{door:?}: the retry replays the first reply");
    let (c3, _, b3) = keyed_steer(&s, &srv, door, "click-steer-1", "something else");
    assert_eq!(c3, 422, "{door:?}: {b3}");
    assert!(b3.contains("click-steer-1"), "{door:?}: the refusal names the key: {b3}");
    if let SteerDoor::Socket = door {
        // The key is its caller's: another actor's command under it runs.
        let r = s.call(json!({"verb": "status", "actor": "someone-else", "idempotency_key": "click-steer-1"}));
        assert_eq!((r["ok"].as_bool(), r.get("replayed")), (Some(true), None), "another actor's own key: {r}");
    }
    assert_eq!(queued(&s), 1, "{door:?}: {}", s.why());
    std::fs::write(s.dir.join("go"), "").unwrap();
    s.until("the second process's request", |s| s.requested().len() == 2);
    let prompts: Vec<String> = agent_input(&s.dir)
        .into_iter()
        .filter(|(p, l)| *p == 2 && l["method"] == "session/prompt")
        .map(|(_, l)| l.to_string())
        .collect();
    assert_eq!(prompts.len(), 1, "{door:?}: {prompts:?}");
    assert!(prompts[0].contains("touch the keyed file") && !prompts[0].contains("something else"), "{prompts:?}");
    let new = name_of(&s.requested()[1]);
    let r = s.call(json!({"verb": "answer", "task": "a", "answer": {"id": new, "decision": "deny"}}));
    assert_eq!(r["ok"], true, "{r}");
    assert_eq!(s.0.wait(LIMIT, |s| s.stderr()), 0, "{}", s.why());
    assert_eq!(queued(&s), 1, "{door:?}: {}", s.why());
}

#[test]
fn a_retried_steer_with_its_key_is_queued_once_through_the_control_route() {
    a_retried_steer_with_its_key_is_queued_once("keys-supervisor", SteerDoor::ControlRoute);
}

#[test]
fn a_retried_steer_with_its_key_is_queued_once_through_the_supervisor_socket() {
    a_retried_steer_with_its_key_is_queued_once("keys-socket", SteerDoor::Socket);
}

/// A queued steer's text is kept in the journal (`steer-queued`): at a
/// supervisor's `door`, a steer whose record would take the journal past
/// the budget steers may fill (half of the 16 MiB a view of the run reads)
/// is refused, saying so, and nothing is queued; a shorter one that still
/// fits is queued.
fn a_steer_the_journal_cannot_take_is_refused(name: &str, door: SteerDoor) {
    const BUDGET: u64 = 8 * 1024 * 1024;
    let (s, srv) = at_the_gate(name, door);
    // Lines no reader takes for a record (skipped, as a torn line is), up
    // to 600 bytes short of the budget.
    let path = s.dir.join("runstate/p.jsonl");
    let mut pad = BUDGET - 600 - std::fs::metadata(&path).unwrap().len();
    let mut f = std::fs::OpenOptions::new().append(true).open(&path).unwrap();
    while pad > 0 {
        let n = pad.min(4096) as usize;
        let mut line = vec![b'x'; n - 1];
        line.push(b'\n');
        f.write_all(&line).unwrap();
        pad -= n as u64;
    }
    drop(f);
    let (c, _, b) = keyed_steer(&s, &srv, door, "full-1", &"y".repeat(2000));
    assert_eq!(c, 409, "{door:?}: {b}");
    assert!(
        b.contains("could not be journaled") && b.contains("8388608") && b.contains("nothing was queued"),
        "{door:?}: {b}"
    );
    assert_eq!(queued(&s), 0, "{door:?}: {}", s.stderr());
    assert!(std::fs::metadata(&path).unwrap().len() <= BUDGET, "{door:?}: the journal stays within the budget");
    let (c, _, b) = keyed_steer(&s, &srv, door, "full-2", "touch the keyed file");
    assert!(c == 200 || c == 202, "{door:?}: a steer that fits is queued: {c} {b}");
    assert_eq!(queued(&s), 1, "{door:?}: {}", s.stderr());
}

#[test]
fn a_steer_the_journal_cannot_take_is_refused_through_the_control_route() {
    a_steer_the_journal_cannot_take_is_refused("full-supervisor", SteerDoor::ControlRoute);
}

#[test]
fn a_steer_the_journal_cannot_take_is_refused_through_the_supervisor_socket() {
    a_steer_the_journal_cannot_take_is_refused("full-socket", SteerDoor::Socket);
}

/// `runwire-session`'s input lines: a steer line retried with its
/// `idempotency_key` gets the first line's ack again, marked `replayed`, and
/// reaches the agent once; the same key on another line is refused, naming
/// the key, and reaches it never.
#[test]
fn a_retried_steer_line_with_its_key_reaches_the_agent_once() {
    let dir = support::scratch("keys-session");
    let mut s = Session::start(&dir);
    let id = s.next("runwire.request")["interrupt_id"].as_str().unwrap().to_string();
    let a = s.send(json!({"type": "answer", "id": id, "decision": "allow"}));
    assert_eq!(a["ack"], "taken", "{a}");
    let steer = json!({"type": "steer", "text": "touch the keyed file", "idempotency_key": "click-line-1"});
    let first = s.send(steer.clone());
    assert!(first.get("ack").is_some() && first.get("replayed").is_none(), "{first}");
    let again = s.send(steer);
    assert_eq!(again["replayed"], true, "{again}");
    assert_eq!((&again["ack"], &again["detail"]), (&first["ack"], &first["detail"]), "the first line's ack: {again}");
    let other = s.send(json!({"type": "steer", "text": "something else", "idempotency_key": "click-line-1"}));
    assert!(other["refused"].as_str().is_some_and(|r| r.contains("click-line-1")), "{other}");
    let prompts = |text: &str| {
        agent_input(&dir)
            .iter()
            .filter(|(_, l)| l["method"] == "session/prompt" && l.to_string().contains(text))
            .count()
    };
    until(
        "the steer to reach the agent",
        || prompts("touch the keyed file") == 1,
        || format!("{:?}", agent_input(&dir)),
    );
    // Whatever else was written would be in the stand-in's log by now.
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!((prompts("touch the keyed file"), prompts("something else")), (1, 0), "{:?}", agent_input(&dir));
    s.end();
    let _ = std::fs::remove_dir_all(&dir);
}

/// A key is its caller's: two people with named tokens who pick the same
/// `Idempotency-Key` neither refuse nor replay each other's commands, on
/// the routes whose reply is kept and on `POST /agui`, whose key binds its
/// body; each one's own retry still replays, and their own other command
/// under it is still refused.
#[test]
fn an_idempotency_key_is_its_callers_and_never_meets_anothers() {
    let dir = support::scratch("keys-callers");
    std::fs::write(dir.join("tokens"), "ana:ana-token-0123456789\nbob:bob-token-0123456789\n").unwrap();
    let mut cmd = Server::command();
    cmd.args(["--demo", "--token-file"]).arg(dir.join("tokens")).env("HARNESS_HOME", dir.join("harness"));
    let s = Server::spawn(cmd).owning(dir.clone());
    let keyed = |key: &str, who: &str, path: &str, body: &str| {
        let headers = format!("Authorization: Bearer {who}-token-0123456789\r\nIdempotency-Key: {key}\r\n");
        let r = support::server::request_with(s.port, "POST", path, "application/json", &headers, body);
        (r.status, r.header("idempotent-replayed") == Some("true"), String::from_utf8_lossy(&r.body).to_string())
    };
    let post = |who: &str, path: &str, body: &str| keyed("same-key", who, path, body);
    // A kept reply (no such run: 404, the command ran and said so).
    let (c, replayed, a) = post("ana", "/runs/no-such-run/pause", "");
    assert_eq!((c, replayed), (404, false), "{a}");
    let (c, replayed, b) = post("bob", "/runs/no-such-run/pause", "");
    assert_eq!((c, replayed), (404, false), "bob's command runs as his own: {b}");
    let (c, replayed, _) = post("bob", "/runs/no-such-run/pause", "");
    assert_eq!((c, replayed), (404, true), "bob's retry is his replay");
    let (c, _, b) = post("bob", "/runs/another-run/pause", "");
    assert_eq!(c, 422, "bob's own key, another command: {b}");
    let (c, replayed, _) = post("ana", "/runs/no-such-run/pause", "");
    assert_eq!((c, replayed), (404, true), "ana's retry is hers");
    // POST /agui: the key binds each caller's own body.
    let post = |who: &str, path: &str, body: &str| keyed("run-key", who, path, body);
    let run = |run: &str| {
        json!({"threadId": run, "runId": run, "messages": [{"id": "m", "role": "user", "content": "hi"}]}).to_string()
    };
    let (c, _, t) = post("ana", "/agui", &run("ana-1"));
    assert_eq!(c, 200, "{t}");
    let (c, _, t) = post("bob", "/agui", &run("bob-1"));
    assert_eq!(c, 200, "another caller's body under the same key: {t}");
    let (c, _, t) = post("bob", "/agui", &run("bob-2"));
    assert_eq!(c, 422, "{t}");
}

/// The server's own session: the task route's steer, the AG-UI run and the
/// approval link's POST, each retried with its key, act once.
#[test]
fn a_retried_command_with_its_key_acts_once_on_the_servers_doors() {
    let dir = support::scratch("keys-server");
    let secret = link_secret(&dir);
    let requests = json!([{"request_id": "b1", "tool_name": "Bash", "input": {"command": "npm test"}}]);
    let mut cmd = Server::command();
    cmd.args(["--agent", "claude", "--interactive", "--agent-cmd"])
        .arg(support::example("trust-agent"))
        .args(["--public-url", "https://rw.example.test", "--link-secret-file"])
        .arg(&secret)
        .current_dir(&dir)
        .env("HARNESS_HOME", dir.join("harness"))
        .env("RUNWIRE_KEEPALIVE_MS", "60000")
        .env("TRUST_PROTO", "claude")
        .env("TRUST_LOG", dir.join("agent-input.jsonl"))
        .env("TRUST_STATE", dir.join("processes"))
        .env("TRUST_REQUESTS", requests.to_string());
    let s = Server::spawn(cmd).owning(dir.clone());
    let lines = || -> Vec<Value> { agent_input(&dir).into_iter().map(|(_, l)| l).collect() };
    let users = |text: &str| lines().iter().filter(|l| l["type"] == "user" && l.to_string().contains(text)).count();
    let allows =
        || lines().iter().filter(|l| l["type"] == "control_response" && l.to_string().contains("\"allow\"")).count();
    // AG-UI: the same key with the same body is the same run (its runId
    // replays it); with another body it is refused before anything runs.
    let run = json!({"threadId": "t", "runId": "r1", "messages": [{"id": "m1", "role": "user", "content": "test it"}]});
    let (c, _, text) = keyed(s.port, "/agui", "click-run-1", "application/json", &run.to_string());
    assert_eq!(c, 200, "{text}");
    let ev = support::sse::events(&text);
    assert_eq!(ev.last().unwrap()["outcome"]["type"], "interrupt", "{ev:?}");
    let record = session_run(&ev);
    let other = json!({"threadId": "t", "runId": "r2", "messages": [{"id": "m2", "role": "user", "content": "other"}]});
    let (c, _, text) = keyed(s.port, "/agui", "click-run-1", "application/json", &other.to_string());
    assert_eq!(c, 422, "{text}");
    assert_eq!((users("test it"), users("other")), (1, 0), "{:?}", lines());
    // The link: the same form posted twice under one key approves once;
    // the retry gets the first page again.
    let mut link = None;
    until(
        "the link in the journal",
        || {
            link = s
                .journal()
                .into_iter()
                .find(|r| r["input"] == "requested")
                .and_then(|r| r["links"][0].as_str().map(str::to_string));
            link.is_some()
        },
        || s.stderr(),
    );
    let path = link.unwrap()["https://rw.example.test".len()..].to_string();
    let form = "application/x-www-form-urlencoded";
    let (c1, r1, p1) = keyed(s.port, &path, "click-link-1", form, "decision=allow");
    assert_eq!((c1, r1), (200, false), "{p1}");
    let (c2, r2, p2) = keyed(s.port, &path, "click-link-1", form, "decision=allow");
    assert_eq!((c2, r2, &p2), (200, true, &p1), "the retry replays the first page");
    let (c3, _, p3) = keyed(s.port, &path, "click-link-1", form, "decision=deny");
    assert_eq!(c3, 422, "{p3}");
    until("the allow to reach the agent", || allows() == 1, || format!("{:?}", lines()));
    // The task route: a steer retried under its key is written once.
    let route = format!("/runs/{record}/tasks/agent/steer");
    let body = json!({"msg": "keyed steer"}).to_string();
    let (c1, r1, b1) = keyed(s.port, &route, "click-steer-2", "application/json", &body);
    assert_eq!((c1, r1), (200, false), "{b1}");
    let (c2, r2, b2) = keyed(s.port, &route, "click-steer-2", "application/json", &body);
    assert_eq!((c2, r2, &b2), (200, true, &b1), "the retry replays the first reply");
    let (c3, _, b3) = keyed(s.port, &route, "click-steer-2", "application/json", r#"{"msg":"another steer"}"#);
    assert_eq!(c3, 422, "{b3}");
    until("the steer to reach the agent", || users("keyed steer") == 1, || format!("{:?}", lines()));
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!((users("keyed steer"), users("another steer"), allows()), (1, 0, 1), "{:?}", lines());
}

/// A hub's command reaches its node's server through the node's cluster
/// sidecar, which uses the token file's `cluster` token and says whom the
/// command is for (`Rw-Actor`, the caller's token name at the hub): it is
/// journaled as that person's, through the hub's door. The header is
/// honoured from the `cluster` token only: another person cannot answer in
/// someone else's name with it.
#[test]
fn a_hubs_command_is_journaled_as_its_callers_and_only_the_sidecar_may_say_so() {
    let dir = support::scratch("doors-actor");
    let tokens = dir.join("tokens");
    std::fs::write(&tokens, "ana:0123456789abcdef-ana\ncluster:0123456789abcdef-cluster\n").unwrap();
    let requests = json!([{"request_id": "b1", "tool_name": "Bash", "input": {"command": "npm test"}}]);
    let mut cmd = Server::command();
    cmd.args(["--agent", "claude", "--interactive", "--agent-cmd"])
        .arg(support::example("trust-agent"))
        .arg("--token-file")
        .arg(&tokens)
        .current_dir(&dir)
        .env("HARNESS_HOME", dir.join("harness"))
        .env("RUNWIRE_KEEPALIVE_MS", "60000")
        .env("TRUST_PROTO", "claude")
        .env("TRUST_LOG", dir.join("agent-input.jsonl"))
        .env("TRUST_STATE", dir.join("processes"))
        .env("TRUST_REQUESTS", requests.to_string());
    let s = Server::spawn(cmd).owning(dir.clone());
    // Each turn asks once: ana's turn, then another.
    let ask = |run: &str| {
        let body = json!({"threadId": "t", "runId": run, "messages": [{"id": format!("m-{run}"), "role": "user", "content": "test it"}]});
        let r = s.request(
            "POST",
            "/agui",
            "Authorization: Bearer 0123456789abcdef-ana\r\nContent-Type: application/json\r\n",
            &body.to_string(),
        );
        assert_eq!(r.status, 200, "{}", r.text());
        let ev = r.events();
        (interrupts(&ev)[0]["id"].as_str().unwrap().to_string(), session_run(&ev))
    };
    let answer = |token: &str, record: &str, id: &str, decision: &str| {
        let (c, v) = s.post_with(
            &format!("/runs/{record}/tasks/agent/answer"),
            &format!("Authorization: Bearer {token}\r\nRw-Actor: bob\r\nContent-Type: application/json\r\n"),
            &json!({"request": id, "decision": decision}).to_string(),
        );
        assert_eq!(c, 200, "{v}");
    };
    // ana names bob: ignored, the answer is ana's.
    let (id, record) = ask("r1");
    answer("0123456789abcdef-ana", &record, &id, "allow");
    until("the first answer journaled", || s.journal().iter().any(|r| r["input"] == "answered"), || s.stderr());
    // The sidecar names bob: the answer is bob's, through the hub.
    let (id, record) = ask("r2");
    answer("0123456789abcdef-cluster", &record, &id, "deny");
    let mut answered = Vec::new();
    until(
        "both answers journaled",
        || {
            answered = s.journal().into_iter().filter(|r| r["input"] == "answered").collect();
            answered.len() == 2
        },
        || s.stderr(),
    );
    let who: Vec<(String, String, String)> = answered
        .iter()
        .map(|r| {
            let f = |k: &str| r[k].as_str().unwrap_or("").to_string();
            (f("decision"), f("by"), f("door"))
        })
        .collect();
    assert_eq!(
        who,
        [
            ("allow".to_string(), "ana".to_string(), "task-route".to_string()),
            ("deny".to_string(), "bob".to_string(), "hub".to_string())
        ]
    );
}

/// The supervisor's socket, out of threads (its address space full, by
/// `prlimit` on the running supervisor): a caller no thread can be started
/// for is refused with a reply saying so and the supervisor says it on
/// stderr; the socket goes on answering once there is room (a spawn that
/// panicked ended the accepting thread: the socket then took no caller).
#[test]
fn a_supervisor_call_no_thread_can_be_started_for_is_refused_and_the_socket_lives_on() {
    use std::io::{Read, Write};
    let s = Sup::start("doors-socket-no-thread");
    s.until("the first request in the journal", |s| !s.requested().is_empty());
    // Answered once first: that thread's stack is kept for the next one.
    assert_eq!(s.call(json!({"verb": "status", "actor": "ana"}))["ok"], true);
    let sock = runwire::supervise::socket::sock_path(&s.dir.join("home"), &s.run_id());
    // No room for a new thread's stack; callers whose line never ends hold
    // the kept ones, until one gets no thread.
    let squeezed = support::squeeze_address_space(s.0.child.as_ref().unwrap().id());
    let mut held = Vec::new();
    let mut refused = None;
    for _ in 0..32 {
        let mut c = std::os::unix::net::UnixStream::connect(&sock).unwrap();
        c.write_all(br#"{"verb":"status""#).unwrap();
        c.set_read_timeout(Some(Duration::from_secs(1))).unwrap();
        let mut out = Vec::new();
        let _ = c.read_to_end(&mut out);
        if out.is_empty() {
            held.push(c);
        } else {
            refused = Some(String::from_utf8_lossy(&out).to_string());
            break;
        }
    }
    drop(squeezed);
    drop(held);
    let refused: Value =
        serde_json::from_str(refused.expect("every caller got a thread under the limit").trim()).unwrap();
    assert_eq!(refused["ok"], false, "{refused}");
    assert!(refused["detail"].as_str().unwrap_or_default().contains("no thread"), "{refused}");
    s.until("the supervisor to say it", |s| s.stderr().contains("control socket: no thread for a caller"));
    assert_eq!(s.call(json!({"verb": "status", "actor": "ana"}))["ok"], true, "{}", s.stderr());
}

/// A caller that drips its request line a byte at a time, never ending it:
/// the supervisor closes it once the socket's deadline from the accept has
/// passed (`READ_TIMEOUT` in all, not per read), and no later. Before, each
/// byte gave it another 5 s: it held a thread and its descriptors for as
/// long as it dripped.
#[test]
fn a_supervisor_caller_dripping_its_request_is_cut_off_at_the_deadline() {
    use runwire::supervise::socket::READ_TIMEOUT;
    use std::io::{Read, Write};
    let s = Sup::start("doors-socket-drip");
    s.until("the first request in the journal", |s| !s.requested().is_empty());
    let sock = runwire::supervise::socket::sock_path(&s.dir.join("home"), &s.run_id());
    let mut c = std::os::unix::net::UnixStream::connect(&sock).unwrap();
    let start = Instant::now();
    c.set_read_timeout(Some(Duration::from_millis(150))).unwrap();
    let drip = br#"{"verb":"status","actor":"#;
    let mut closed = None;
    let mut sent = 0;
    // The longest wait between two bytes: a per-read timeout would have
    // closed the caller only after a wait of READ_TIMEOUT.
    let (mut last, mut gap) = (start, Duration::ZERO);
    while start.elapsed() < READ_TIMEOUT + Duration::from_secs(8) {
        let byte = [*drip.get(sent).unwrap_or(&b' ')];
        if let Err(e) = c.write_all(&byte) {
            closed = Some((start.elapsed(), format!("write: {e}")));
            break;
        }
        gap = gap.max(last.elapsed());
        last = Instant::now();
        sent += 1;
        let mut got = [0u8; 256];
        match c.read(&mut got) {
            Ok(0) => {
                closed = Some((start.elapsed(), "read: end of stream".to_string()));
                break;
            }
            Ok(n) => panic!("a reply to a request never ended: {}", String::from_utf8_lossy(&got[..n])),
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {}
            Err(e) => {
                closed = Some((start.elapsed(), format!("read: {e}")));
                break;
            }
        }
    }
    // How the caller saw its connection end, for a close that comes early.
    let (closed, how) =
        closed.unwrap_or_else(|| panic!("still open after {:?} and {sent} bytes dripped", start.elapsed()));
    // On a loaded machine the test's own thread may drip slower than a
    // byte each 150 ms; what matters is that it never paused for a whole
    // READ_TIMEOUT (which would close it under a per-read timeout too).
    assert!(sent >= 3 && gap < READ_TIMEOUT / 2, "the caller dripped {sent} bytes, at most {gap:?} apart");
    assert!(
        // The upper bound leaves room for a loaded machine (the accept and
        // the caller's thread may run late); a per-read timeout never closes
        // a caller dripping a byte each 150 ms at all.
        closed >= READ_TIMEOUT - Duration::from_millis(100) && closed < READ_TIMEOUT + Duration::from_secs(4),
        "closed after {closed:?} ({how}; {sent} bytes dripped, at most {gap:?} apart; deadline {READ_TIMEOUT:?}): {}",
        s.stderr()
    );
    assert_eq!(s.call(json!({"verb": "status", "actor": "ana"}))["ok"], true, "{}", s.stderr());
}

/// As many idle callers as the socket serves at once (`MAX_CALLERS`, none
/// sending a byte) hold it: the next ones are refused at once by the
/// accepting thread, with a reply saying so, and a request works again as
/// soon as the idle callers are gone. Before, each extra caller got a
/// thread and two descriptors, with no bound.
#[test]
fn supervisor_callers_beyond_the_limit_are_refused_at_once_and_the_socket_serves_again() {
    use runwire::supervise::socket::{BUSY, MAX_CALLERS};
    use std::io::Read;
    let s = Sup::start("doors-socket-limit");
    s.until("the first request in the journal", |s| !s.requested().is_empty());
    let sock = runwire::supervise::socket::sock_path(&s.dir.join("home"), &s.run_id());
    let held: Vec<_> = (0..MAX_CALLERS).map(|_| std::os::unix::net::UnixStream::connect(&sock).unwrap()).collect();
    // Each held one taken (a thread each) before the extra ones come.
    std::thread::sleep(Duration::from_millis(300));
    for _ in 0..3 {
        let mut c = std::os::unix::net::UnixStream::connect(&sock).unwrap();
        c.set_read_timeout(Some(Duration::from_secs(1))).unwrap();
        let asked = Instant::now();
        let mut out = Vec::new();
        let _ = c.read_to_end(&mut out);
        let took = asked.elapsed();
        let out = String::from_utf8_lossy(&out).to_string();
        let v: Value = serde_json::from_str(out.trim()).unwrap_or_else(|_| panic!("no refusal within 1 s: {out:?}"));
        assert_eq!((v["ok"].as_bool(), v["detail"].as_str()), (Some(false), Some(BUSY)), "{v}");
        assert!(took < Duration::from_millis(500), "refused after {took:?}");
    }
    // Through the client too (it writes its request first).
    let home = s.dir.join("home");
    let status = runwire::supervise::socket::Request { verb: "status".into(), ..Default::default() };
    let r = runwire::supervise::socket::call(&home, &s.run_id(), &status, Duration::from_secs(2)).unwrap();
    assert_eq!((r.ok, r.detail.as_str(), r.code.as_deref()), (false, BUSY, Some("supervisor_busy")), "{r:?}");
    // Through the task route: nothing was done, so 503 and when to try
    // again, not a 409 that reads as "the run refused it" (a hub passes
    // the node's status on with the same header).
    let srv = Server::start(&home);
    let r = srv.request(
        "POST",
        &format!("/runs/{}/tasks/a/steer", s.run_id()),
        "Content-Type: application/json\r\n",
        r#"{"msg":"later"}"#,
    );
    let v: Value = serde_json::from_slice(&r.body).unwrap_or_default();
    assert_eq!((r.status, v["code"].as_str()), (503, Some("supervisor_busy")), "{v}");
    assert!(r.headers.iter().any(|(n, v)| n.eq_ignore_ascii_case("retry-after") && v == "1"), "{:?}", r.headers);
    drop(held);
    until(
        "a request served once the idle callers are gone",
        || runwire::supervise::socket::call(&home, &s.run_id(), &status, Duration::from_secs(2)).is_ok_and(|r| r.ok),
        || s.why(),
    );
}

/// A supervisor with no room for one more caller did nothing, so an
/// approval link says "not now" (503) and stays usable: it said "no longer
/// valid" (410) before, for a link that was still good. Once the callers
/// are gone, the same link answers the request once.
#[test]
fn an_approval_link_to_a_busy_supervisor_says_not_now_and_still_works() {
    use runwire::supervise::socket::MAX_CALLERS;
    let dir = support::scratch("doors-busy-link");
    let secret = link_secret(&dir);
    let flags = ["--public-url", PUBLIC, "--link-secret-file", secret.to_str().unwrap()];
    let s = Sup::start_args("doors-busy-link-sup", None, &flags);
    s.until("the first request in the journal", |s| !s.requested().is_empty());
    let link = s.requested()[0]["links"][0].as_str().unwrap_or_default().to_string();
    assert!(link.starts_with(&format!("{PUBLIC}/a/")), "{link}");
    let path = &link[PUBLIC.len()..];
    let home = s.dir.join("home");
    let mut cmd = Server::command();
    cmd.env("HARNESS_HOME", &home).args(flags);
    let srv = Server::spawn(cmd);
    let sock = runwire::supervise::socket::sock_path(&home, &s.run_id());
    let held: Vec<_> = (0..MAX_CALLERS).map(|_| std::os::unix::net::UnixStream::connect(&sock).unwrap()).collect();
    std::thread::sleep(Duration::from_millis(300));
    let (code, page) = link_form(srv.port, path, "decision=allow");
    assert_eq!(code, 503, "{page}");
    assert!(page.contains("Not now") && page.contains("try again later"), "{page}");
    drop(held);
    std::thread::sleep(Duration::from_millis(300));
    assert!(acp_answers(&s.dir).is_empty(), "nothing reached the agent: {}", s.why());
    let mut last = (0, String::new());
    until(
        "the link to answer once the callers are gone",
        || {
            last = link_form(srv.port, path, "decision=allow");
            last.0 != 503
        },
        || s.why(),
    );
    assert_eq!(last.0, 200, "{}", last.1);
    s.until("the allow to reach the agent", |s| !acp_answers(&s.dir).is_empty());
    assert_eq!(acp_answers(&s.dir), [(1, "allow-once".to_string())], "{}", s.why());
}

/// An answer that does not fit its request (ACP runs a call as asked: no
/// edited input), through the supervisor's doors, is a bad request as on
/// the server's own sessions: the socket's reply says `bad_request` with
/// the session's reason, the task route answers 400 with it (the hub's
/// forward is that route); nothing reaches the agent and the request stays
/// open for a fitting answer. Before, the session's refusal came back on its
/// acknowledgement with no kind, and both said 409.
#[test]
fn an_answer_that_does_not_fit_its_request_is_a_bad_request_through_the_supervisors_doors() {
    let mut s = Sup::start("doors-invalid-answer");
    s.until("the first request in the journal", |s| !s.requested().is_empty());
    let iid = name_of(&s.requested()[0]);
    let edited = json!({"command": "rm -rf /"});
    let r = s.call(json!({"verb": "answer", "task": "a", "actor": "ana",
        "answer": {"id": iid, "decision": "allow", "updated_input": edited}}));
    assert_eq!((r["ok"].as_bool(), r["code"].as_str()), (Some(false), Some("bad_request")), "{r}");
    assert!(r["detail"].as_str().unwrap().contains("ACP takes no edited input"), "{r}");
    let srv = Server::start(&s.dir.join("home"));
    let route = format!("/runs/{}/tasks/a/answer", s.run_id());
    let (code, v) =
        srv.post(&route, &json!({"request": iid, "decision": "allow", "updated_input": edited}).to_string());
    assert_eq!(code, 400, "{v}");
    assert!(v["detail"].as_str().unwrap_or_default().contains("ACP takes no edited input"), "{v}");
    std::thread::sleep(Duration::from_millis(300));
    assert!(acp_answers(&s.dir).is_empty(), "{}", s.why());
    let (code, v) = srv.post(&route, &json!({"request": iid, "decision": "allow"}).to_string());
    assert_eq!((code, v["sent"].as_bool()), (200, Some(true)), "{v}");
    s.until("the allow to reach the agent", |s| acp_answers(&s.dir) == [(1, "allow-once".to_string())]);
    // Decided: another answer is refused for the request's state, 409.
    let (code, v) = srv.post(&route, &json!({"request": iid, "decision": "deny"}).to_string());
    assert_eq!((code, v["code"].as_str()), (409, None), "{v}");
    std::fs::write(s.dir.join("go"), "").unwrap();
    assert_eq!(s.0.wait(LIMIT, |s| s.stderr()), 0, "{}", s.why());
}

/// A supervisor stopped (SIGSTOP: a Ctrl-Z, a debugger) when a command
/// comes: its caller gives up (502 through the route, once
/// `RUNWIRE_CONTROL_TIMEOUT_MS` has passed, saying it will not start now),
/// and when the supervisor runs again the command does not start: it came
/// past the deadline its caller set (`late`, nothing done). Before, the
/// steer was queued as soon as the supervisor ran again, long after its
/// caller had been told it failed. At the socket itself, a request past its
/// `deadline` is refused `late` with its key freed; one with none runs.
#[test]
fn a_command_whose_caller_gave_up_on_a_stopped_supervisor_never_runs() {
    use nix::sys::signal::{kill, Signal};
    let (s, _) = at_the_gate("doors-late", SteerDoor::Socket);
    let mut cmd = Server::command();
    cmd.env("HARNESS_HOME", s.dir.join("home")).env("RUNWIRE_CONTROL_TIMEOUT_MS", "1500");
    let srv = Server::spawn(cmd);
    let pid = nix::unistd::Pid::from_raw(s.0.child.as_ref().expect("running").id() as i32);
    kill(pid, Signal::SIGSTOP).unwrap();
    let (code, body) = srv.post(&format!("/runs/{}/tasks/a/steer", s.run_id()), r#"{"msg":"too late"}"#);
    // Run again only once the caller has its answer.
    kill(pid, Signal::SIGCONT).unwrap();
    assert_eq!(code, 502, "{body}");
    assert!(body["detail"].as_str().is_some_and(|d| d.contains("will not start now")), "{body}");
    // The socket takes the waiting request as soon as it runs again (a
    // thread a caller, so given a second to reach the loop).
    let r = s.call(json!({"verb": "status"}));
    assert_eq!(r["ok"], true, "{r}");
    std::thread::sleep(Duration::from_secs(1));
    assert_eq!(queued(&s), 0, "the steer its caller gave up on never ran: {}", s.why());
    let (code, body) = srv.post(&format!("/runs/{}/tasks/a/steer", s.run_id()), r#"{"msg":"in time"}"#);
    assert!(code == 200 || code == 202, "{code} {body}");
    assert_eq!(queued(&s), 1, "{}", s.why());
    // At the socket: past its deadline (1 ms after boot), refused, nothing
    // queued, the key free for the same command without one.
    let late = json!({"verb": "steer", "task": "a", "msg": "past", "idempotency_key": "k-late", "deadline": 1});
    let r = s.call(late);
    assert_eq!((r["ok"].as_bool(), r["code"].as_str()), (Some(false), Some("late")), "{r}");
    assert_eq!(queued(&s), 1, "{}", s.why());
    let r = s.call(json!({"verb": "steer", "task": "a", "msg": "past", "idempotency_key": "k-late"}));
    assert_eq!((r["ok"].as_bool(), r.get("replayed")), (Some(true), None), "{r}");
    assert_eq!(queued(&s), 2, "{}", s.why());
    std::fs::write(s.dir.join("go"), "").unwrap();
}
