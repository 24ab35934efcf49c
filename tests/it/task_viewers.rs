//! Issue 24, "one normalizer per task, however many watch", for an
//! interactive thread: the thread's session is driven by one AG-UI run at a
//! time (a second one at once is refused `busy`), and everyone else watches
//! it through the recorded run's task stream. Those viewers share one
//! reader and one normalizer (and translator, for `?format=agui`) per
//! framing, however many they are: the server holds the session's log open
//! once per framing, never once per viewer, and every viewer gets the
//! session's new output live from that one reader.

use crate::support;
use crate::support::Server;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

/// `runwire-serve --demo` (an interactive, recorded session per thread with
/// the built-in demo agent) on a free port with a home of its own.
fn demo(name: &str) -> Server {
    let home = support::scratch(name);
    let mut cmd = Server::command();
    cmd.args(["--demo"]).env("HARNESS_HOME", &home).env("RUNWIRE_KEEPALIVE_MS", "60000");
    Server::spawn(cmd).owning(home)
}

/// One AG-UI run on `thread`; its whole body (it ends with the run).
fn agui(s: &Server, thread: &str, run: &str, extra: &str) -> String {
    let body = format!(
        r#"{{"threadId":"{thread}","runId":"{run}","messages":[{{"id":"m1","role":"user","content":"hello demo"}}]{extra}}}"#
    );
    let mut c = TcpStream::connect(&s.addr).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    write!(
        c,
        "POST /agui HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        s.addr,
        body.len()
    )
    .unwrap();
    let mut r = String::new();
    c.read_to_string(&mut r).unwrap();
    r
}

fn field<'a>(body: &'a str, key: &str) -> Option<&'a str> {
    let at = body.find(&format!("\"{key}\":\""))? + key.len() + 4;
    Some(&body[at..at + body[at..].find('"')?])
}

/// A viewer of a task stream: the socket and all it has read.
struct Viewer {
    sock: TcpStream,
    got: Vec<u8>,
}

impl Viewer {
    fn open(s: &Server, path: &str) -> Viewer {
        let mut sock = TcpStream::connect(&s.addr).unwrap();
        // HTTP/1.0: the body is the SSE text itself, no chunk framing.
        write!(sock, "GET {path} HTTP/1.0\r\nHost: {}\r\n\r\n", s.addr).unwrap();
        Viewer { sock, got: Vec::new() }
    }

    /// Reads until `what` has arrived (30 s at most).
    fn until(&mut self, what: &str) {
        let deadline = Instant::now() + Duration::from_secs(30);
        let mut buf = [0u8; 65536];
        while !String::from_utf8_lossy(&self.got).contains(what) {
            let left = deadline.saturating_duration_since(Instant::now());
            assert!(!left.is_zero(), "no {what:?} within 30 s; got:\n{}", String::from_utf8_lossy(&self.got));
            self.sock.set_read_timeout(Some(left)).unwrap();
            match self.sock.read(&mut buf) {
                Ok(0) => panic!("the stream ended before {what:?}:\n{}", String::from_utf8_lossy(&self.got)),
                Ok(n) => self.got.extend_from_slice(&buf[..n]),
                Err(e) => panic!("reading the stream: {e}"),
            }
        }
    }

    /// The first frame's id line.
    fn first_id(&self) -> String {
        let text = String::from_utf8_lossy(&self.got);
        text.lines().find(|l| l.starts_with("id: ")).expect("a frame with an id").to_string()
    }
}

/// How many descriptors the server holds on the session's task log.
fn log_fds(s: &Server) -> usize {
    let dir = format!("/proc/{}/fd", s.pid());
    std::fs::read_dir(dir)
        .expect("the server's descriptors")
        .flatten()
        .filter_map(|e| std::fs::read_link(e.path()).ok())
        .filter(|t| t.to_string_lossy().ends_with(".agent.log"))
        .count()
}

/// Waits (5 s at most) until the server holds `want` descriptors on the log.
fn settle_fds(s: &Server, want: usize) -> usize {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let n = log_fds(s);
        if n == want || Instant::now() > deadline {
            return n;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Nine viewers of one interactive thread (six of events/v1, three of
/// AG-UI) cost the server one reader per framing: the same descriptors
/// on the session's log as one viewer, plus one for the AG-UI framing. Each
/// gets the thread's history from its first frame, and the next turn's
/// output live.
#[test]
#[cfg(target_os = "linux")]
fn the_viewers_of_an_interactive_thread_share_one_reader_per_framing() {
    let s = demo("frame-viewers");
    // The thread's first run: the demo agent asks for an approval.
    let first = agui(&s, "v", "r1", "");
    assert!(first.contains(r#""type":"RUN_FINISHED""#), "{first}");
    let record = field(&first, "run").expect("the session's recorded run, in runwire.session").to_string();
    let interrupt = field(&first[first.find("\"interrupts\"").expect("an interrupt")..], "id").unwrap().to_string();
    let events = format!("/runs/{record}/tasks/agent/stream");
    let agui_path = format!("{events}?format=agui");

    let mut viewers = vec![Viewer::open(&s, &events)];
    viewers[0].until("\ndata: ");
    let one = log_fds(&s);
    assert!(one >= 1, "the tap's reader holds the log open");
    for _ in 0..5 {
        let mut v = Viewer::open(&s, &events);
        v.until("\ndata: ");
        viewers.push(v);
    }
    assert_eq!(settle_fds(&s, one), one, "six events/v1 viewers: the log is read once, as for one viewer");
    for _ in 0..3 {
        let mut v = Viewer::open(&s, &agui_path);
        v.until("\ndata: ");
        viewers.push(v);
    }
    assert_eq!(settle_fds(&s, one + 1), one + 1, "three AG-UI viewers add one reader (and translator), not three");
    let ids: Vec<String> = viewers.iter().map(Viewer::first_id).collect();
    assert!(ids[..6].iter().all(|i| *i == ids[0]), "the events/v1 viewers start at the same first frame: {ids:?}");
    assert!(ids[6..].iter().all(|i| *i == ids[6]), "the AG-UI viewers start at the same first frame: {ids:?}");

    // The next turn (the approval granted) reaches every viewer live.
    let resume =
        format!(r#","resume":[{{"interruptId":"{interrupt}","status":"resolved","payload":{{"approved":true}}}}]"#);
    let second = agui(&s, "v", "r2", &resume);
    assert!(second.contains("(demo: nothing ran)"), "{second}");
    for v in &mut viewers {
        v.until("(demo: nothing ran)");
    }
    assert_eq!(settle_fds(&s, one + 1), one + 1, "still one reader per framing after the turn");
}
