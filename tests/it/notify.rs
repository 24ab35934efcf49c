//! `runs notify` end to end, through the real binaries: a webhook receiver
//! (`fixtures/webhooks/receiver.py`, Python's http.server) checks every
//! delivery's signature with the `standardwebhooks` package from PyPI (the
//! specification's reference library, not runwire's code), for a
//! `needs_input` from a `runwire-serve --demo` chat and for journals
//! appended to while `runs notify` and the receiver come and go. Ground
//! truth is the feed itself (`runs watch --since 0 --no-follow`). Every
//! wait has a limit.

use crate::support;
use support::{Quiet, Server};

use serde_json::Value;
use std::collections::BTreeSet;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

const WAIT: Duration = Duration::from_secs(30);

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn runs(home: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_runs"));
    c.env("HARNESS_HOME", home);
    c
}

/// A secret in the specification's `whsec_` form, written where the test keeps its files.
fn secret(dir: &Path) -> PathBuf {
    let p = dir.join("secret");
    std::fs::write(&p, "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw\n").unwrap();
    p
}

/// The receiver: its deliveries (one JSON object each) arrive on a channel.
struct Receiver {
    child: Child,
    port: u16,
    rx: mpsc::Receiver<Value>,
}

impl Receiver {
    fn start(dir: &Path, port: u16, extra: &[&str]) -> Receiver {
        let mut child = Command::new("python3")
            .arg(root().join("fixtures/webhooks/receiver.py"))
            .args(["--port", &port.to_string(), "--secret-file"])
            .arg(secret(dir))
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start python3");
        let mut out = BufReader::new(child.stdout.take().unwrap());
        let mut first = String::new();
        out.read_line(&mut first).unwrap();
        let port = first.trim().strip_prefix("listening ").and_then(|p| p.parse().ok());
        let port = port.unwrap_or_else(|| panic!("the receiver said {first:?}"));
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for l in out.lines() {
                let Ok(l) = l else { return };
                if tx.send(serde_json::from_str::<Value>(&l).unwrap()).is_err() {
                    return;
                }
            }
        });
        Receiver { child, port, rx }
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}/hook", self.port)
    }

    /// The next delivery; its signature checked by `standardwebhooks`.
    fn next(&self) -> Value {
        let d = self.rx.recv_timeout(WAIT).expect("a delivery in time");
        assert_eq!(d["verified"], true, "standardwebhooks refused the signature: {d}");
        d
    }

    /// The next `n` deliveries, then any more that come within `quiet`.
    fn take(&self, n: usize, quiet: Duration) -> Vec<Value> {
        let mut v: Vec<Value> = (0..n).map(|_| self.next()).collect();
        v.extend(self.rest(quiet));
        v
    }

    /// Deliveries until none comes for `quiet`.
    fn rest(&self, quiet: Duration) -> Vec<Value> {
        let mut v = Vec::new();
        while let Ok(d) = self.rx.recv_timeout(quiet) {
            assert_eq!(d["verified"], true, "standardwebhooks refused the signature: {d}");
            v.push(d);
        }
        v
    }

    fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A `runs notify` child (stderr kept [`Quiet`]), started once its state file is written.
struct Notify {
    child: Child,
    stderr: Quiet,
}

impl Notify {
    fn start(home: &Path, state: &Path, dir: &Path, url: &str) -> Notify {
        Notify::start_with(home, state, dir, url, &[])
    }

    fn start_with(home: &Path, state: &Path, dir: &Path, url: &str, extra: &[&str]) -> Notify {
        // Its inode and change time: a file system may give the new file the
        // number of one freed a moment ago, never with the same change time.
        let stamp = |p: &Path| std::fs::metadata(p).ok().map(|m| (m.ino(), m.ctime(), m.ctime_nsec()));
        let before = stamp(state);
        let mut child = runs(home)
            .args(["notify", "--webhook", url, "--secret-file"])
            .arg(secret(dir))
            .arg("--state")
            .arg(state)
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stderr = Quiet::capture("runs notify", &mut child);
        // It writes its state once it has brought the feed up to date: a new
        // file renamed over the old one (a new inode, whatever the clock's grain).
        let end = Instant::now() + WAIT;
        while stamp(state) == before {
            if let Ok(Some(st)) = child.try_wait() {
                panic!("runs notify exited with {st}:\n{}", stderr.text());
            }
            if Instant::now() >= end {
                // Not left running after the test: it is not a Notify yet, whose drop would stop it.
                let _ = child.kill();
                let _ = child.wait();
                panic!("runs notify did not write its state:\n{}", stderr.text());
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        Notify { child, stderr }
    }

    /// SIGTERM: it must exit 0 within a few seconds.
    fn terminate(&mut self) {
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(self.child.id() as i32), nix::sys::signal::Signal::SIGTERM)
            .unwrap();
        let end = Instant::now() + Duration::from_secs(15);
        loop {
            if let Some(st) = self.child.try_wait().unwrap() {
                assert_eq!(st.code(), Some(0), "runs notify after SIGTERM:\n{}", self.stderr.text());
                return;
            }
            assert!(Instant::now() < end, "runs notify did not exit on SIGTERM");
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for Notify {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Registers a run with a one-task plan; returns its id and journal.
fn register(home: &Path, base: &Path, slug: &str) -> (String, PathBuf) {
    let (id, rs) = support::register_run(home, slug, &base.join("repo"), support::ONE_TASK_PLAN);
    (id, rs.join(format!("{slug}.jsonl")))
}

/// Appends journal records, each in one write as a journal writer does.
fn append(journal: &Path, records: &[String]) {
    let mut f = std::fs::OpenOptions::new().create(true).append(true).open(journal).unwrap();
    for r in records {
        f.write_all(format!("{r}\n").as_bytes()).unwrap();
    }
}

fn asks(n: std::ops::Range<usize>) -> Vec<String> {
    n.map(|i| {
        format!(
            r#"{{"v":"runstate/v1","ts":"2026-03-01T10:00:{:02}.000Z","actor":"runwire-session","task":"a","input":"requested","request":"req-{i}","kind":"tool_approval","tool":"Bash","detail":"step {i}"}}"#,
            i % 60
        )
    })
    .collect()
}

fn answer(i: usize) -> String {
    format!(
        r#"{{"v":"runstate/v1","ts":"2026-03-01T10:01:00.000Z","actor":"runwire-serve","task":"a","input":"answered","request":"req-{i}","decision":"allow","by":"studio"}}"#
    )
}

const COMMITTED: &str =
    r#"{"v":"runstate/v1","ts":"2026-03-01T10:02:00.000Z","actor":"runner","task":"a","state":"committed","rc":0}"#;

/// The webhook-ids the feed's needs_input and ended events must be sent as.
fn expected(home: &Path) -> Vec<String> {
    let o = runs(home).args(["watch", "--since", "0", "--no-follow", "--type", "needs_input,ended"]).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let ino = std::fs::metadata(home.join("feed/events.log")).unwrap().ino();
    String::from_utf8(o.stdout)
        .unwrap()
        .lines()
        .map(|l| format!("msg_{ino:x}_{}", serde_json::from_str::<Value>(l).unwrap()["id"]))
        .collect()
}

fn ids(got: &[Value]) -> Vec<String> {
    got.iter().map(|d| d["id"].as_str().unwrap().to_string()).collect()
}

/// Each webhook-id once, and exactly the feed's.
fn once_each(got: &[Value], want: &[String]) {
    let got = ids(got);
    let unique: BTreeSet<&String> = got.iter().collect();
    assert_eq!(unique.len(), got.len(), "an event was sent twice: {got:?}");
    assert_eq!(unique, want.iter().collect::<BTreeSet<_>>(), "got {got:?}, the feed has {want:?}");
}

/// The demo agent asks to run Bash: the receiver gets a `needs_input`
/// whose signature `standardwebhooks` accepts, naming the run, the tool
/// and the request, with the webhook-id of its feed event.
#[test]
#[cfg_attr(not(tool = "standardwebhooks"), ignore = "needs standardwebhooks: pip install standardwebhooks==1.3.0")]
fn a_demo_chats_approval_request_reaches_the_webhook_signed() {
    support::need(&["standardwebhooks"]);
    let dir = support::scratch("demo");
    let home = dir.join("home");
    let mut cmd = Server::command();
    cmd.arg("--demo").env("HARNESS_HOME", &home);
    let server = Server::spawn(cmd);
    let rcv = Receiver::start(&dir, 0, &[]);
    let _n = Notify::start(&home, &dir.join("state.json"), &dir, &rcv.url());
    let mut c = server.send(
        "POST",
        "/agui",
        "Content-Type: application/json\r\n",
        r#"{"threadId":"d","runId":"r1","messages":[{"id":"m1","role":"user","content":"hello demo"}]}"#,
    );
    let mut stream = String::new();
    c.read_to_string(&mut stream).unwrap();
    assert!(stream.contains(r#""type":"interrupt""#), "the demo asks: {stream}");
    let d = rcv.next();
    let body = &d["body"];
    assert_eq!(body["type"], "needs_input", "{d}");
    assert_eq!(body["data"]["tool"], "Bash", "{d}");
    assert_eq!(body["data"]["kind"], "tool_approval", "{d}");
    assert!(body["data"]["runId"].as_str().unwrap().ends_with("agui-r1"), "{d}");
    assert!(!body["data"]["request"].as_str().unwrap_or_default().is_empty(), "{d}");
    assert_eq!(d["headers"]["content-type"], "application/json");
    assert_eq!(ids(std::slice::from_ref(&d)), expected(&home), "the webhook-id is the feed event's");
    // The timestamp is now (seconds), as the library also checked.
    let ts: i64 = d["timestamp"].as_str().unwrap().parse().unwrap();
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() as i64;
    assert!((now - ts).abs() < 60, "{ts} vs {now}");
}

/// Stopped with SIGTERM and started again with its state file: nothing is
/// sent twice, and what happened while it was down is delivered.
#[test]
#[cfg_attr(not(tool = "standardwebhooks"), ignore = "needs standardwebhooks: pip install standardwebhooks==1.3.0")]
fn a_graceful_restart_repeats_nothing_and_delivers_what_happened_meanwhile() {
    support::need(&["standardwebhooks"]);
    let dir = support::scratch("restart");
    let home = dir.join("home");
    let state = dir.join("state.json");
    let (_, journal) = register(&home, &dir, "s");
    let rcv = Receiver::start(&dir, 0, &[]);
    let mut n = Notify::start(&home, &state, &dir, &rcv.url());
    append(&journal, &asks(0..1));
    let mut got = vec![rcv.next()];
    assert_eq!(got[0]["body"]["data"]["request"], "req-0");
    n.terminate();
    // While it is down: an answer (not chosen), two asks and the end.
    let mut down = vec![answer(0)];
    down.extend(asks(1..3));
    down.push(answer(1));
    down.push(answer(2));
    down.push(COMMITTED.to_string());
    append(&journal, &down);
    let (_, other) = register(&home, &dir, "t");
    let _n = Notify::start(&home, &state, &dir, &rcv.url());
    append(&other, &asks(7..8));
    got.extend(rcv.take(4, Duration::from_secs(1)));
    let kinds: Vec<String> = got
        .iter()
        .map(|d| {
            format!("{} {}", d["body"]["type"].as_str().unwrap(), d["body"]["data"]["request"].as_str().unwrap_or(""))
        })
        .collect();
    assert_eq!(kinds, ["needs_input req-0", "needs_input req-1", "needs_input req-2", "ended ", "needs_input req-7"]);
    assert_eq!(got[3]["body"]["data"]["status"], "done");
    once_each(&got, &expected(&home));
}

/// A receiver that is down when the events happen, then up: it gets every
/// one, none twice, in order; `runs notify` said it retried.
#[test]
#[cfg_attr(not(tool = "standardwebhooks"), ignore = "needs standardwebhooks: pip install standardwebhooks==1.3.0")]
fn a_receiver_down_then_up_gets_every_event_once() {
    support::need(&["standardwebhooks"]);
    let dir = support::scratch("down");
    let home = dir.join("home");
    let (_, journal) = register(&home, &dir, "s");
    let mut first = Receiver::start(&dir, 0, &[]);
    let port = first.port;
    first.stop();
    let n = Notify::start(&home, &dir.join("state.json"), &dir, &format!("http://127.0.0.1:{port}/hook"));
    let mut records = Vec::new();
    for (i, ask) in asks(0..20).into_iter().enumerate() {
        records.push(ask);
        records.push(answer(i));
    }
    records.push(COMMITTED.to_string());
    append(&journal, &records);
    std::thread::sleep(Duration::from_millis(1500));
    let rcv = Receiver::start(&dir, port, &[]);
    let got = rcv.take(21, Duration::from_secs(1));
    once_each(&got, &expected(&home));
    let order: Vec<&str> = got.iter().filter_map(|d| d["body"]["data"]["request"].as_str()).collect();
    assert_eq!(order, (0..20).map(|i| format!("req-{i}")).collect::<Vec<_>>(), "in the feed's order");
    let err = n.stderr.text();
    assert!(err.contains("attempt 1 failed") && err.contains("delivered after"), "{err}");
}

/// Two webhooks, one of them dead: the live one gets every event at once,
/// in order, while the dead one's position stays where it was (nothing of
/// it is dropped).
#[test]
#[cfg_attr(not(tool = "standardwebhooks"), ignore = "needs standardwebhooks: pip install standardwebhooks==1.3.0")]
fn a_dead_webhook_holds_up_no_other() {
    support::need(&["standardwebhooks"]);
    let dir = support::scratch("dead");
    let home = dir.join("home");
    let state = dir.join("state.json");
    let (_, journal) = register(&home, &dir, "s");
    let mut gone = Receiver::start(&dir, 0, &[]);
    let dead = format!("http://127.0.0.1:{}/hook", gone.port);
    gone.stop();
    let rcv = Receiver::start(&dir, 0, &[]);
    let n = Notify::start_with(&home, &state, &dir, &rcv.url(), &["--webhook", &dead]);
    let start: Value = serde_json::from_slice(&std::fs::read(&state).unwrap()).unwrap();
    append(&journal, &asks(0..5));
    let got = rcv.take(5, Duration::from_millis(500));
    let order: Vec<&str> = got.iter().filter_map(|d| d["body"]["data"]["request"].as_str()).collect();
    assert_eq!(order, ["req-0", "req-1", "req-2", "req-3", "req-4"]);
    once_each(&got, &expected(&home));
    let end = Instant::now() + WAIT;
    loop {
        let now: Value = serde_json::from_slice(&std::fs::read(&state).unwrap()).unwrap();
        let live = now["webhooks"][rcv.url()].as_u64().unwrap();
        if live > start["webhooks"][rcv.url()].as_u64().unwrap() {
            assert_eq!(now["webhooks"][&dead], start["webhooks"][&dead], "the dead webhook's position moved");
            break;
        }
        assert!(Instant::now() < end, "the live webhook's position was not written: {now}");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(n.stderr.text().contains(&format!("notify: {dead}: event ")), "{}", n.stderr.text());
}

/// Killed (SIGKILL) after the receiver got an event but before its answer:
/// started again, it sends that event again with the same webhook-id (the
/// receiver can drop it), and then nothing more.
#[test]
#[cfg_attr(not(tool = "standardwebhooks"), ignore = "needs standardwebhooks: pip install standardwebhooks==1.3.0")]
fn after_a_sigkill_a_repeat_carries_the_same_webhook_id() {
    support::need(&["standardwebhooks"]);
    let dir = support::scratch("kill");
    let home = dir.join("home");
    let state = dir.join("state.json");
    let (_, journal) = register(&home, &dir, "s");
    let rcv = Receiver::start(&dir, 0, &["--delay-first", "2"]);
    let mut n = Notify::start(&home, &state, &dir, &rcv.url());
    append(&journal, &asks(0..1));
    let first = rcv.next();
    n.child.kill().unwrap();
    n.child.wait().unwrap();
    let _n = Notify::start(&home, &state, &dir, &rcv.url());
    // A second one on the same state file is refused (it would repeat what the first sends).
    let o = runs(&home).args(["notify", "--webhook", &rcv.url(), "--state"]).arg(&state).output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("another runs notify is using it"), "{err}");
    let again = rcv.next();
    assert_eq!(again["id"], first["id"], "{first}\n{again}");
    assert_eq!(again["body"], first["body"]);
    assert!(rcv.rest(Duration::from_secs(1)).is_empty(), "sent more than once again");
}

/// SIGTERM while the receiver has an event but has not answered yet: the
/// request is finished first, so the restart does not send it again.
#[test]
#[cfg_attr(not(tool = "standardwebhooks"), ignore = "needs standardwebhooks: pip install standardwebhooks==1.3.0")]
fn sigterm_during_a_delivery_waits_for_its_answer_and_repeats_nothing() {
    support::need(&["standardwebhooks"]);
    let dir = support::scratch("term");
    let home = dir.join("home");
    let state = dir.join("state.json");
    let (_, journal) = register(&home, &dir, "s");
    let rcv = Receiver::start(&dir, 0, &["--delay-first", "2"]);
    let mut n = Notify::start(&home, &state, &dir, &rcv.url());
    append(&journal, &asks(0..1));
    let first = rcv.next();
    let t = Instant::now();
    n.terminate();
    assert!(t.elapsed() > Duration::from_millis(1000), "it exited without waiting for the answer");
    append(&journal, &asks(1..2));
    let _n = Notify::start(&home, &state, &dir, &rcv.url());
    let next = rcv.next();
    assert_eq!(next["body"]["data"]["request"], "req-1", "{first}\n{next}");
    assert!(rcv.rest(Duration::from_secs(1)).is_empty());
    once_each(&[first, next], &expected(&home));
}

/// The ready-made bodies, through two `runs notify` processes following
/// one feed: ntfy gets the text with its title, tags and priority headers,
/// a Slack-style webhook `{"text"}`; both signed all the same.
#[test]
#[cfg_attr(not(tool = "standardwebhooks"), ignore = "needs standardwebhooks: pip install standardwebhooks==1.3.0")]
fn ntfy_and_slack_style_receivers_get_their_own_bodies() {
    support::need(&["standardwebhooks"]);
    let dir = support::scratch("formats");
    let home = dir.join("home");
    let (_, journal) = register(&home, &dir, "feat");
    let (ntfy, slack) = (Receiver::start(&dir, 0, &[]), Receiver::start(&dir, 0, &[]));
    let _a = Notify::start_with(&home, &dir.join("ntfy.state"), &dir, &ntfy.url(), &["--format", "ntfy"]);
    let _b = Notify::start_with(&home, &dir.join("slack.state"), &dir, &slack.url(), &["--format", "slack"]);
    append(&journal, &asks(0..1));
    let n = ntfy.next();
    assert_eq!(n["body"], "Allow Bash? step 0", "{n}");
    assert_eq!(n["headers"]["title"], "feat (repo) needs input, task a", "{n}");
    assert_eq!((n["headers"]["priority"].as_str(), n["headers"]["tags"].as_str()), (Some("high"), Some("question")));
    let sl = slack.next();
    assert_eq!(sl["body"]["text"], "*feat (repo) needs input, task a*\nAllow Bash? step 0", "{sl}");
    assert_eq!(n["id"], sl["id"], "one event, one webhook-id");
    append(&journal, &[answer(0), COMMITTED.to_string()]);
    let done = slack.next();
    assert_eq!(done["body"]["text"], "*feat (repo) done*\nRun done: exit code 0", "{done}");
}

/// What runs notify refuses, before it starts: exit 2 and `runs: notify: <where>: <what>`.
#[test]
fn bad_webhooks_secrets_and_state_files_are_usage_errors() {
    let dir = support::scratch("usage");
    let home = dir.join("home");
    std::fs::create_dir_all(&home).unwrap();
    std::fs::write(dir.join("empty"), "").unwrap();
    std::fs::write(dir.join("bad64"), "whsec_!!!").unwrap();
    std::fs::write(dir.join("state"), r#"{"v":"runwire-notify-state/v1","feed":1,"webhooks":{}}"#).unwrap();
    let e = |f: &str| dir.join(f).display().to_string();
    let cases: Vec<(Vec<String>, &str)> = vec![
        (
            vec!["--webhook".into(), "https://ntfy.sh/x".into()],
            "runs: usage: notify: --webhook https://ntfy.sh/x: https is not supported",
        ),
        (vec!["--webhook".into(), "ftp://h/".into()], "runs: usage: notify: --webhook ftp://h/: not an http:// URL"),
        (vec!["--webhook".into(), "http://h/".into(), "--secret-file".into(), e("empty")], "the secret is empty"),
        (vec!["--webhook".into(), "http://h/".into(), "--secret-file".into(), e("bad64")], "not base64"),
        (vec!["--webhook".into(), "http://h/".into(), "--format".into(), "xml".into()], "unknown format"),
        (vec!["--webhook".into(), "http://h/".into(), "--type".into(), "nope".into()], "unknown event type"),
        (vec!["--webhook".into(), "http://h/".into(), "--webhook".into(), "http://h/".into()], "given twice"),
        (vec!["--webhook".into(), "http://h/".into(), "--state".into(), e("state")], "another feed log"),
        (vec!["--webhook".into(), "http://h/".into(), "--since".into(), "3".into()], "not an event id"),
    ];
    for (args, want) in cases {
        let o = runs(&home).arg("notify").args(&args).stdin(Stdio::null()).output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.starts_with("runs: usage: notify: ") && err.contains(want), "{args:?}: {err}");
        assert!(o.stdout.is_empty());
    }
}

/// A receiver of the test's own, over raw TCP (no tool needed): each
/// request it takes, read to its body's end, comes on a channel, and
/// `answer(n, conn)` (n from 0) writes what it likes as the answer.
struct Raw {
    port: u16,
    rx: mpsc::Receiver<String>,
}

impl Raw {
    fn start(answer: impl Fn(usize, &mut std::net::TcpStream) + Send + 'static) -> Raw {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for (n, c) in l.incoming().enumerate() {
                let Ok(mut c) = c else { return };
                c.set_read_timeout(Some(WAIT)).unwrap();
                let mut req = Vec::new();
                let mut buf = [0u8; 4096];
                // The head, then as many bytes as Content-Length says.
                let whole = |r: &[u8]| {
                    let text = String::from_utf8_lossy(r);
                    let Some(end) = text.find("\r\n\r\n") else { return false };
                    let len = text[..end]
                        .lines()
                        .find_map(|l| {
                            l.to_ascii_lowercase().strip_prefix("content-length:").map(|v| v.trim().to_string())
                        })
                        .and_then(|v| v.parse::<usize>().ok())
                        .unwrap_or(0);
                    r.len() >= end + 4 + len
                };
                while !whole(&req) {
                    match c.read(&mut buf) {
                        Ok(0) | Err(_) => break,
                        Ok(k) => req.extend_from_slice(&buf[..k]),
                    }
                }
                if tx.send(String::from_utf8_lossy(&req).into_owned()).is_err() {
                    return;
                }
                answer(n, &mut c);
            }
        });
        Raw { port, rx }
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}/hook", self.port)
    }

    /// The next request, whole (head and body).
    fn next(&self) -> String {
        self.rx.recv_timeout(WAIT).expect("a request in time")
    }
}

/// The value of header `name` in a request's head.
fn header<'a>(req: &'a str, name: &str) -> Option<&'a str> {
    let head = req.split("\r\n\r\n").next().unwrap_or_default();
    head.lines().find_map(|l| l.split_once(':').filter(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.trim()))
}

/// The public address approval links are minted under in this test.
const PUBLIC: &str = "https://rw.example.test";

/// The journal is its agent's to write: links it puts in a `requested`
/// record (another address, an object with its own "approve", a path
/// that climbs out of `/a/`) reach no webhook, no feed event and no run
/// view; a link under the address a link-minting server recorded at its
/// start (`$HARNESS_HOME/links/prefixes`) does, at each of the three.
#[test]
fn only_links_under_a_minting_servers_address_leave_the_journal() {
    let dir = support::scratch("forged-links");
    let home = dir.join("home");
    let (run, journal) = register(&home, &dir, "feat");
    let secret = dir.join("link-secret");
    std::fs::write(&secret, "0123456789abcdef0123456789abcdef-secret\n").unwrap();
    let mut cmd = Server::command();
    cmd.env("HARNESS_HOME", &home).args(["--public-url", PUBLIC, "--link-secret-file"]).arg(&secret);
    let server = Server::spawn(cmd);
    let rcv = Raw::start(|_, c| {
        let _ = c.write_all(b"HTTP/1.1 204 No Content\r\n\r\n");
    });
    let _n = Notify::start_with(&home, &dir.join("state.json"), &dir, &rcv.url(), &["--format", "ntfy"]);
    // Shaped as runwire's (its MAC is checked only when the link is used).
    let ours = format!("{PUBLIC}/a/eyJyIjoiYSJ9.c2ln");
    let record = |req: &str, links: Value| {
        format!(
            r#"{{"v":"runstate/v1","ts":"2026-03-01T10:00:00.000Z","actor":"runwire-session","task":"a","input":"requested","request":"{req}","kind":"tool_approval","tool":"Bash","detail":"d","links":{links}}}"#
        )
    };
    append(
        &journal,
        &[
            record(
                "req-0",
                serde_json::json!(["http://evil.example/approve", ours, format!("{PUBLIC}/a/../../evil/a.b")]),
            ),
            record("req-1", serde_json::json!([{"url": "http://evil.example/approve", "decision": "approve"}])),
        ],
    );
    // runs notify: the runwire link in the ntfy headers and text; nothing else.
    let (first, second) = (rcv.next(), rcv.next());
    for r in [&first, &second] {
        assert!(!r.contains("evil") && !r.contains("approve"), "{r}");
    }
    assert_eq!(header(&first, "Click"), Some(ours.as_str()), "{first}");
    assert_eq!(header(&first, "Actions"), Some(format!("view, Open, {ours}").as_str()), "{first}");
    assert!(first.ends_with(&format!("\nOpen: {ours}")), "{first}");
    assert_eq!((header(&second, "Click"), header(&second, "Actions")), (None, None), "{second}");
    // The feed (runs watch): the same links.
    let o = runs(&home).args(["watch", "--since", "0", "--no-follow", "--type", "needs_input"]).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let events: Vec<Value> =
        String::from_utf8(o.stdout).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let links: Vec<(&str, &Value)> = events.iter().map(|e| (e["request"].as_str().unwrap(), &e["links"])).collect();
    assert_eq!(links, [("req-0", &serde_json::json!([ours])), ("req-1", &Value::Null)], "{events:?}");
    // GET /runs/:id: the open request's links (the studio's "Copy approval link").
    let (code, shown) = server.get(&format!("/runs/{run}"));
    assert_eq!(code, 200, "{shown}");
    let req0 = shown["inputRequests"].as_array().unwrap().iter().find(|r| r["request"] == "req-0").cloned();
    assert_eq!(req0.map(|r| r["links"].clone()), Some(serde_json::json!([ours])), "{shown}");
    assert!(!shown["inputRequests"].to_string().contains("evil"), "{shown}");
}

/// A receiver that sends its status line a byte at a time, never ending
/// it: the answer's 10 s are in all, not per read, so the attempt is
/// given up within them, and a SIGTERM meanwhile ends runs notify in time.
#[test]
fn a_trickled_answer_is_given_up_on_within_its_timeout() {
    let dir = support::scratch("trickle");
    let home = dir.join("home");
    let (_, journal) = register(&home, &dir, "s");
    let rcv = Raw::start(|_, c| {
        let _ = c.write_all(b"HTTP/1.1 200 OK");
        // A space every half second for a minute (never a CRLF), unless the connection goes.
        for _ in 0..120 {
            std::thread::sleep(Duration::from_millis(500));
            if c.write_all(b" ").is_err() {
                return;
            }
        }
    });
    let mut n = Notify::start(&home, &dir.join("state.json"), &dir, &rcv.url());
    append(&journal, &asks(0..1));
    rcv.next();
    let sent = Instant::now();
    std::thread::sleep(Duration::from_secs(1));
    // Exits 0 within 15 s, so the trickle held it no longer than the answer's timeout.
    n.terminate();
    let took = sent.elapsed();
    let err = n.stderr.text();
    assert!(err.contains("attempt 1 failed: reading the answer: no end within 10 s"), "{err}");
    assert!(took >= Duration::from_secs(9), "gave up after {took:?}, before the timeout");
}

/// An interim `100 Continue` is passed over and the final answer judged:
/// a 503 after it is retried, a 204 after it is delivered.
#[test]
fn an_interim_answer_is_passed_over_for_the_final_one() {
    let dir = support::scratch("interim");
    let home = dir.join("home");
    let (_, journal) = register(&home, &dir, "s");
    let rcv = Raw::start(|n, c| {
        if n == 0 {
            // In two writes: the final answer comes in a read of its own.
            let _ = c.write_all(b"HTTP/1.1 100 Continue\r\n\r\n");
            std::thread::sleep(Duration::from_millis(200));
            let _ = c.write_all(b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n\r\n");
        } else {
            let _ = c.write_all(b"HTTP/1.1 100 Continue\r\nX-Note: wait\r\n\r\nHTTP/1.1 103 Early Hints\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n");
        }
    });
    let n = Notify::start(&home, &dir.join("state.json"), &dir, &rcv.url());
    append(&journal, &asks(0..1));
    let (first, again) = (rcv.next(), rcv.next());
    assert_eq!(header(&first, "webhook-id"), header(&again, "webhook-id"), "the same event again");
    let end = Instant::now() + WAIT;
    while !n.stderr.text().contains("delivered after 2 attempts") {
        assert!(Instant::now() < end, "{}", n.stderr.text());
        std::thread::sleep(Duration::from_millis(20));
    }
    let err = n.stderr.text();
    assert!(err.contains("attempt 1 failed: HTTP 503") && !err.contains("refused"), "{err}");
    assert!(rcv.rx.recv_timeout(Duration::from_secs(1)).is_err(), "sent a third time");
}
