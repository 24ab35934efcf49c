//! `normalize-events --follow` through what happens to log files: removal
//! ends the follow, a file renamed over the path is followed from its start
//! (like `tail -F`), a truncated file is read again from its start; each is
//! said on stderr. And the server's task streams, which follow a log the
//! same way: one reader and normalizer per task however many watch, each
//! client with its own resume point; an over-cap line skimmed, not lost.

use crate::support;

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

const LIMIT: Duration = Duration::from_secs(10);

fn tmp(name: &str) -> PathBuf {
    support::scratch(name)
}

fn text(t: &str) -> String {
    format!(
        "{{\"type\":\"assistant\",\"message\":{{\"id\":\"{t}\",\"role\":\"assistant\",\"content\":[{{\"type\":\"text\",\"text\":\"{t}\"}}]}}}}\n"
    )
}

const STATUS: &str =
    "{\"type\":\"runwire.status\",\"ok\":true,\"rc\":0,\"session_id\":null,\"detail\":null,\"files\":[]}\n";

struct Follower {
    child: Child,
    lines: mpsc::Receiver<String>,
    seen: Vec<String>,
}

impl Follower {
    fn start(log: &Path) -> Follower {
        let mut child = Command::new(env!("CARGO_BIN_EXE_normalize-events"))
            .args(["claude", "--follow", "--input"])
            .arg(log)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let out = child.stdout.take().unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for l in BufReader::new(out).lines() {
                let Ok(l) = l else { return };
                if tx.send(l).is_err() {
                    return;
                }
            }
        });
        Follower { child, lines: rx, seen: Vec::new() }
    }

    /// Waits for an event line containing `what`.
    fn expect(&mut self, what: &str) {
        let until = Instant::now() + LIMIT;
        while !self.seen.iter().any(|l| l.contains(what)) {
            let left = until.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(l) => self.seen.push(l),
                Err(_) => panic!("no event with {what:?}; got {:?}", self.seen),
            }
        }
    }

    /// Waits for the exit; returns (code, stderr, the event lines).
    fn end(mut self) -> (i32, String, Vec<String>) {
        let until = Instant::now() + LIMIT;
        loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                let mut err = String::new();
                std::io::Read::read_to_string(&mut self.child.stderr.take().unwrap(), &mut err).unwrap();
                self.seen.extend(self.lines.try_iter());
                return (s.code().unwrap_or(-1), err, self.seen);
            }
            if Instant::now() > until {
                let _ = self.child.kill();
                panic!("the follow did not end; events: {:?}", self.seen);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

fn append(p: &Path, s: &str) {
    std::fs::OpenOptions::new().create(true).append(true).open(p).unwrap().write_all(s.as_bytes()).unwrap();
}

#[test]
fn removal_ends_the_follow() {
    let dir = tmp("rm");
    let log = dir.join("a.log");
    append(&log, &text("first"));
    let mut f = Follower::start(&log);
    f.expect("first");
    std::fs::remove_file(&log).unwrap();
    let (code, err, _) = f.end();
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("a.log: removed"), "{err}");
}

#[test]
fn a_file_renamed_over_the_path_is_followed_from_its_start() {
    let dir = tmp("mv");
    let log = dir.join("a.log");
    append(&log, &text("old-one"));
    let mut f = Follower::start(&log);
    f.expect("old-one");
    // The old file's last line has no newline yet: it must not run into the new file's first.
    append(&log, "{\"type\":\"assistant\",\"message\":{\"id\":\"cut\",\"role\":\"assistant\",\"content\":[{\"type\":\"text\",\"text\":\"cut\"}]}}");
    let new = dir.join("new.log");
    append(&new, &text("new-one"));
    append(&new, &text("new-two"));
    std::fs::rename(&new, &log).unwrap();
    f.expect("new-one");
    f.expect("new-two");
    f.expect("\"cut\"");
    // The follow goes on in the new file, to its status line.
    append(&log, &text("new-three"));
    f.expect("new-three");
    append(&log, STATUS);
    f.expect("\"exit\"");
    let (code, err, _) = f.end();
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("a.log: replaced"), "{err}");
}

#[test]
fn a_truncated_file_is_read_again_from_its_start() {
    let dir = tmp("trunc");
    let log = dir.join("a.log");
    append(&log, &text("before-one"));
    append(&log, &text("before-two"));
    let mut f = Follower::start(&log);
    f.expect("before-two");
    // Truncate, then rewrite shorter content.
    std::fs::write(&log, text("after")).unwrap();
    f.expect("\"after\"");
    append(&log, STATUS);
    f.expect("\"exit\"");
    let (code, err, seen) = f.end();
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("a.log: truncated"), "{err}");
    // seq goes on from the old content, so ids never repeat.
    let seq = |what: &str| {
        let l = seen.iter().find(|l| l.contains(what)).unwrap();
        let v: serde_json::Value = serde_json::from_str(l).unwrap();
        v["seq"].as_u64().unwrap()
    };
    assert!(seq("\"after\"") > seq("before-two"), "{seen:?}");
}

/// A live run registered under `home`: its claude task `t`'s log, empty.
fn live_run(base: &Path) -> (PathBuf, String, PathBuf) {
    let home = base.join("home");
    let plan = r#"{"v":"plan/v1","tasks":[{"id":"t","adapter":"claude","prompt":"p"}]}"#;
    let (id, rs) = support::register_run(&home, "live", &base.join("repo"), plan);
    std::fs::write(rs.join("live.t.log"), "").unwrap();
    (home, id, rs.join("live.t.log"))
}

/// A task stream ([`support::sse::Reader`]) past its `200` head: its
/// frames as (id, data).
struct Stream(support::sse::Reader<std::net::TcpStream>);

impl Stream {
    fn open(port: u16, path: &str, last_id: Option<&str>) -> Stream {
        use std::io::Write;
        let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        s.set_read_timeout(Some(LIMIT)).unwrap();
        let resume = last_id.map(|i| format!("Last-Event-ID: {i}\r\n")).unwrap_or_default();
        write!(s, "GET {path} HTTP/1.0\r\n{resume}\r\n").unwrap();
        let mut r = support::sse::Reader::new(s);
        let head = r.head();
        assert!(head.starts_with("HTTP/1.1 200"), "{head}");
        Stream(r)
    }

    /// The next frame with data: its id (if any) and its data as JSON.
    fn next_frame(&mut self) -> Option<(Option<String>, serde_json::Value)> {
        self.0.next_frame().map(|f| (f.id.clone(), f.json()))
    }

    /// The number of framed events (frames with an id) left, counted as they come.
    fn count_rest(&mut self) -> usize {
        std::iter::from_fn(|| self.0.next_frame()).filter(|f| f.id.is_some()).count()
    }

    fn rest(&mut self) -> Vec<(Option<String>, serde_json::Value)> {
        std::iter::from_fn(|| self.next_frame()).collect()
    }
}

fn claude_text(id: &str) -> String {
    text(id)
}

/// A 5 MB tool result line, over the 4 MiB line cap, closes its tool call
/// in a task stream as in normalize-events: cut, flagged, with its size.
#[test]
fn a_task_stream_closes_a_5_mb_tool_result_with_its_id() {
    let base = tmp("stream-5mb");
    let (home, id, log) = live_run(&base);
    let srv = support::Server::start(&home);
    let size = 5_000_000;
    let call = serde_json::json!({"type":"assistant","message":{"id":"m1","role":"assistant","content":[
        {"type":"tool_use","id":"toolu_big","name":"Read","input":{"file_path":"/big"}}]}});
    let result = serde_json::json!({"type":"user","message":{"role":"user","content":[
        {"type":"tool_result","tool_use_id":"toolu_big","content":"q".repeat(size)}]}});
    append(&log, &format!("{call}\n{result}\n{STATUS}"));
    for format in ["events", "agui"] {
        let mut st = Stream::open(srv.port, &format!("/runs/{id}/tasks/t/stream?format={format}"), None);
        let frames = st.rest();
        if format == "events" {
            let r: Vec<_> = frames.iter().filter(|(_, d)| d["type"] == "tool_result").collect();
            assert_eq!(r.len(), 1, "{frames:?}");
            let d = &r[0].1["data"];
            assert_eq!(
                (d["id"].as_str(), d["truncated"].as_bool(), d["bytes"].as_u64()),
                (Some("toolu_big"), Some(true), Some(size as u64))
            );
            assert_eq!(d["output"].as_str().unwrap().len(), 64 * 1024);
        } else {
            let r: Vec<_> = frames.iter().filter(|(_, d)| d["type"] == "TOOL_CALL_RESULT").collect();
            assert_eq!(r.len(), 1, "{frames:?}");
            assert!(r[0].1["toolCallId"].as_str().unwrap().ends_with("toolu_big"), "{}", r[0].1);
        }
    }
}

/// Many clients of one task stream get the same frames, each from where it
/// asked (Last-Event-ID), and a client that joins a live task late gets its
/// first frame at once, from the start.
#[test]
fn many_clients_of_one_task_stream_each_get_every_frame_from_their_own_point() {
    let base = tmp("stream-fanout");
    let (home, id, log) = live_run(&base);
    let srv = support::Server::start(&home);
    let path = format!("/runs/{id}/tasks/t/stream");
    let mut first = String::new();
    for i in 0..2000 {
        first.push_str(&claude_text(&format!("a{i}")));
    }
    append(&log, &first);
    let mut early: Vec<Stream> = (0..8).map(|_| Stream::open(srv.port, &path, None)).collect();
    let mut resumed = Stream::open(srv.port, &path, Some("1500"));
    for s in early.iter_mut() {
        let (id, d) = s.next_frame().unwrap();
        assert_eq!((id.as_deref(), d["data"]["text"].as_str()), (Some("1"), Some("a0")));
    }
    let (rid, _) = resumed.next_frame().unwrap();
    assert_eq!(rid.as_deref(), Some("1501"));
    // More lines while they watch; then a late client, which starts from line 1 at once.
    append(&log, &claude_text("b"));
    let t0 = Instant::now();
    let mut late = Stream::open(srv.port, &path, None);
    let (lid, _) = late.next_frame().unwrap();
    assert_eq!(lid.as_deref(), Some("1"));
    assert!(t0.elapsed() < Duration::from_secs(2), "first frame after {:?}", t0.elapsed());
    append(&log, STATUS);
    let want: Vec<String> = (1..=2002).map(|n| n.to_string()).collect();
    for (k, s) in early.iter_mut().chain([&mut late]).enumerate() {
        let ids: Vec<String> = s.rest().into_iter().filter_map(|(id, _)| id).collect();
        assert_eq!(ids, want[1..], "client {k}");
    }
    let ids: Vec<String> = resumed.rest().into_iter().filter_map(|(id, _)| id).collect();
    assert_eq!(ids, want[1501..]);
}

/// The server's user CPU time so far, in clock ticks (/proc/PID/stat).
fn user_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let fields: Vec<&str> = stat.rsplit_once(')').unwrap().1.split_whitespace().collect();
    fields[11].parse().unwrap()
}

/// A server whose task streams keep only `retain` bytes of frames for
/// clients behind the fastest.
fn serve_retaining(home: &Path, retain: &str) -> support::Server {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_runwire-serve"));
    cmd.env("HARNESS_HOME", home).env("RUNWIRE_STREAM_RETAIN", retain).stderr(Stdio::null());
    support::Server::spawn(cmd)
}

/// Clients that come when the shared frames have moved on (a late client,
/// a resume from far back) catch up from the log with a reader of their
/// own, then rejoin the others: every frame once, in order.
#[test]
fn clients_behind_the_shared_frames_catch_up_from_the_log() {
    let base = tmp("stream-catch-up");
    let (home, id, log) = live_run(&base);
    let srv = serve_retaining(&home, "20000");
    let path = format!("/runs/{id}/tasks/t/stream");
    let mut first = String::new();
    for i in 0..3000 {
        first.push_str(&claude_text(&format!("a{i}")));
    }
    append(&log, &first);
    let mut lead = Stream::open(srv.port, &path, None);
    for n in 1..=3000 {
        assert_eq!(lead.next_frame().unwrap().0, Some(n.to_string()));
    }
    // The shared frames now hold only the last few: these read the log themselves first.
    let mut late = Stream::open(srv.port, &path, None);
    let mut resumed = Stream::open(srv.port, &path, Some("10"));
    let mut more = String::new();
    for i in 0..500 {
        more.push_str(&claude_text(&format!("b{i}")));
    }
    append(&log, &more);
    append(&log, STATUS);
    let all: Vec<String> = (1..=3501).map(|n| n.to_string()).collect();
    let ids = |s: &mut Stream| s.rest().into_iter().filter_map(|(id, _)| id).collect::<Vec<String>>();
    assert_eq!(ids(&mut lead), all[3000..]);
    assert_eq!(ids(&mut late), all);
    assert_eq!(ids(&mut resumed), all[10..]);
}

/// Twenty clients of one task stream cost the server about what one does:
/// the log is read and normalized once, not once a client.
#[test]
fn twenty_clients_of_one_task_stream_cost_about_what_one_does() {
    let base = tmp("stream-cpu");
    let (home, id, log) = live_run(&base);
    let mut text = String::new();
    for i in 0..4000 {
        text.push_str(&claude_text(&format!("line {i} {}", "x".repeat(100))));
    }
    text.push_str(STATUS);
    append(&log, &text);
    let path = format!("/runs/{id}/tasks/t/stream");
    let cost = |n: usize| {
        let srv = support::Server::start(&home);
        let before = user_ticks(srv.child.id());
        let mut clients: Vec<Stream> = (0..n).map(|_| Stream::open(srv.port, &path, None)).collect();
        let readers: Vec<_> = clients.drain(..).map(|mut c| std::thread::spawn(move || c.count_rest())).collect();
        for r in readers {
            assert_eq!(r.join().unwrap(), 4001, "every event, to the exit");
        }
        user_ticks(srv.child.id()) - before
    };
    let one = cost(1).max(1);
    let twenty = cost(20);
    eprintln!("user CPU: 1 client {one} ticks, 20 clients {twenty}");
    assert!(twenty <= 5 * one, "20 clients cost {twenty} ticks, 1 client {one}");
}
