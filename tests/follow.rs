//! `normalize-events --follow` through what happens to log files: removal
//! ends the follow, a file renamed over the path is followed from its start
//! (like `tail -F`), a truncated file is read again from its start; each is
//! said on stderr.

mod support;

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
