//! A new client of a live task stream is served from the task's tap with
//! what its first client resolved, while the run's files are as they were
//! (`src/serve/runs/live.rs`): its resume point is exact in both framings,
//! it follows the task live, and a change to the run's files (liveness
//! naming another log, the run's pointer removed) is seen by the next
//! client as before. The files are let age past the stamps' 2 s racy
//! window first, so what the first client resolved is kept.

use crate::support;
use crate::support::sse::Reader;

use std::io::Write;
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

fn line(i: usize) -> String {
    format!(
        "{{\"type\":\"assistant\",\"message\":{{\"id\":\"m{i}\",\"role\":\"assistant\",\"content\":[{{\"type\":\"text\",\"text\":\"hello {i}\"}}]}}}}\n"
    )
}

fn append(p: &Path, s: &str) {
    std::fs::OpenOptions::new().append(true).open(p).unwrap().write_all(s.as_bytes()).unwrap();
}

/// A live run registered under `base/home`: its claude task `t`'s log holds `lines` lines.
fn live_run(base: &Path, lines: usize) -> (PathBuf, String, PathBuf) {
    let home = base.join("home");
    let plan = r#"{"v":"plan/v1","tasks":[{"id":"t","adapter":"claude","prompt":"p"}]}"#;
    let (id, rs) = support::register_run(&home, "live", &base.join("repo"), plan);
    let log = rs.join("live.t.log");
    std::fs::write(&log, (0..lines).map(line).collect::<String>()).unwrap();
    (home, id, log)
}

/// A client of a task stream: its frames as (id, data), read by the tests'
/// one SSE reader.
struct Client(Reader<TcpStream>);

impl Client {
    /// The response's status line and, for a 200, the stream.
    fn open(port: u16, path: &str, last_id: Option<&str>) -> (String, Client) {
        let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        let resume = last_id.map(|i| format!("Last-Event-ID: {i}\r\n")).unwrap_or_default();
        write!(s, "GET {path} HTTP/1.0\r\n{resume}\r\n").unwrap();
        let mut r = Reader::new(s);
        let head = r.head();
        (head.lines().next().unwrap_or_default().to_string(), Client(r))
    }

    fn frame(&mut self) -> (String, String) {
        let f = self.0.next_frame().expect("the stream went on");
        (f.id.expect("a framed event has an id"), f.data)
    }

    /// Frames up to the one whose data holds `what`.
    fn until(&mut self, what: &str) -> Vec<(String, String)> {
        let mut out = Vec::new();
        loop {
            let f = self.frame();
            let done = f.1.contains(what);
            out.push(f);
            if done {
                return out;
            }
        }
    }
}

/// Lets the run's files age past the stamps' racy window.
fn age() {
    std::thread::sleep(Duration::from_millis(2300));
}

#[test]
fn a_new_client_of_a_live_task_resumes_exactly_in_both_framings_and_follows_it() {
    let base = support::scratch("frame-live-resume");
    let (home, id, log) = live_run(&base, 40);
    age();
    let srv = support::Server::start(&home);
    let path = format!("/runs/{id}/tasks/t/stream");
    for (p, last) in [(path.clone(), "hello 39"), (format!("{path}?format=agui"), "hello 39")] {
        // The first client resolves the task the long way and makes its tap.
        let (status, mut first) = Client::open(srv.port, &p, None);
        assert!(status.contains(" 200 "), "{status}");
        let all = first.until(last);
        assert!(all.len() >= 40, "{} frames", all.len());
        for k in [0, 1, 7, all.len() / 2, all.len() - 2] {
            // Each later client is served from that tap: from its own resume point, exactly.
            let (status, mut next) = Client::open(srv.port, &p, Some(&all[k].0));
            assert!(status.contains(" 200 "), "{status}");
            let got = next.until(last);
            assert_eq!(got, all[k + 1..].to_vec(), "{p}: resumed after {}", all[k].0);
        }
        // A client with no resume point gets the whole history.
        let (_, mut again) = Client::open(srv.port, &p, None);
        assert_eq!(again.until(last), all, "{p}: from the start");
        // And all of them follow the task live.
        append(&log, &line(100));
        let a = first.until("hello 100");
        let b = again.until("hello 100");
        assert!(!a.is_empty() && a == b, "{p}: the same live frames: {a:?} {b:?}");
    }
    let _ = std::fs::remove_dir_all(&base);
}

#[test]
fn a_change_to_the_runs_files_is_seen_by_the_next_client_of_a_live_task() {
    let base = support::scratch("frame-live-change");
    let (home, id, _log) = live_run(&base, 3);
    age();
    let srv = support::Server::start(&home);
    let path = format!("/runs/{id}/tasks/t/stream");
    let (_, mut first) = Client::open(srv.port, &path, None);
    first.until("hello 2");
    let (_, mut second) = Client::open(srv.port, &path, None);
    second.until("hello 2");

    // Liveness now names another log: the next client reads that one.
    let rs = base.join("repo/runstate");
    std::fs::write(rs.join("elsewhere.log"), line(7)).unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_liveness"))
        .env("HARNESS_HOME", &home)
        .arg("--runstate")
        .arg(&rs)
        .args(["set", "live", "t", r#"{"logfile":"elsewhere.log"}"#])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let (status, mut moved) = Client::open(srv.port, &path, None);
    assert!(status.contains(" 200 "), "{status}");
    let (_, data) = moved.frame();
    assert!(data.contains("hello 7"), "the log liveness names now, not the tap's: {data}");

    // The run's pointer is removed: the next client is told there is no such run.
    std::fs::remove_file(home.join("runs").join(format!("{id}.json"))).unwrap();
    let (status, _) = Client::open(srv.port, &path, None);
    assert!(status.contains(" 404 "), "{status}");
    let _ = std::fs::remove_dir_all(&base);
}

/// The response to `GET path` with `Last-Event-ID: last_id`: what came
/// until the server closed it or `limit` passed with nothing new (`None`:
/// nothing came).
fn status_within(port: u16, path: &str, last_id: &str, limit: Duration) -> Option<String> {
    use std::io::Read;
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(limit)).unwrap();
    write!(s, "GET {path} HTTP/1.0\r\nLast-Event-ID: {last_id}\r\n\r\n").unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match s.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => got.extend_from_slice(&buf[..n]),
        }
    }
    let text = String::from_utf8_lossy(&got).into_owned();
    (!text.is_empty()).then_some(text)
}

/// A resume id past everything a live task has written (one from another
/// run or server) is refused at once, as the change feed refuses a `since`
/// past its log: `400` naming how far the log goes, in both framings, the
/// long way (no tap yet) and from the live tap; never a stream that waits.
/// An id of the task's last line still resumes (an empty stream, live).
#[test]
fn a_resume_id_past_a_live_tasks_end_is_refused_at_once() {
    let base = support::scratch("frame-live-past");
    let (home, id, _log) = live_run(&base, 5);
    age();
    let srv = support::Server::start(&home);
    let path = format!("/runs/{id}/tasks/t/stream");
    let limit = Duration::from_secs(5);
    let mut taps = Vec::new();
    for (p, past, last) in [(path.clone(), "9999", "5"), (format!("{path}?format=agui"), "9999/0", "5/0")] {
        for door in ["the long way", "the live tap"] {
            let head = status_within(srv.port, &p, past, limit)
                .unwrap_or_else(|| panic!("{p} ({door}): no answer within {limit:?} for Last-Event-ID {past}"));
            assert!(head.starts_with("HTTP/1.1 400 ") || head.starts_with("HTTP/1.0 400 "), "{p} ({door}): {head}");
            assert!(head.contains("holds 5 lines"), "{p} ({door}): {head}");
            // The next line's id is past the end too.
            let head = status_within(srv.port, &p, if p.contains("agui") { "6/0" } else { "6" }, limit).unwrap();
            assert!(head.contains(" 400 "), "{p} ({door}): {head}");
            // Its last line's: a live stream (it waits for more).
            let (status, _open) = Client::open(srv.port, &p, Some(last));
            assert!(status.contains(" 200 "), "{p} ({door}): {status}");
            if door == "the long way" {
                // A client with no resume point makes the task's live tap.
                let (_, mut first) = Client::open(srv.port, &p, None);
                first.until("hello 4");
                taps.push(first);
            }
        }
    }
    let _ = std::fs::remove_dir_all(&base);
}
