//! `runs notify`: the change feed's chosen events (default `needs_input`
//! and `ended`) POSTed to webhooks, signed per the Standard Webhooks
//! specification (<https://www.standardwebhooks.com/>).
//!
//! Each webhook has a worker thread with its own [`Cursor`] on the feed
//! log, so the log itself is the durable queue: the in-memory queue is one
//! read of the log (at most [`feed::MAX_EVENT`] bytes of events), and while
//! a receiver is down its worker stops reading (its cursor stops advancing)
//! instead of dropping anything. Nothing is lost and memory stays bounded
//! however long a receiver is away; another webhook, the feed and the
//! server are never slowed by it (this is a process of its own, the log is
//! a file any number of readers share). Dropping the oldest event when a
//! queue is full would have lost exactly what a person was asked
//! (`needs_input`) while their phone was unreachable.
//!
//! The main thread only follows the feed ([`feed::follow`]: it extends the
//! log from the journals, as `runs watch` does) and wakes the workers.
//! Each event's `webhook-id` is derived from the feed log's inode and the
//! event's id (its offset), so a retry, and a repeat after a SIGKILL, carry
//! the same one and a receiver can drop the duplicate. A worker records how
//! far it has delivered after each event; a writer thread of its own puts
//! that in `--state` (temp file + rename), off the delivery path. A
//! SIGINT/SIGTERM lets the request in flight finish before the last write:
//! a graceful restart repeats nothing.

mod message;
mod webhook;

pub use message::{message, webhook_id, Format, Message};
use webhook::MAX_BACKOFF;
pub use webhook::{backoff, judge, key, parse_url, post, request, sign, Outcome, Url};

use crate::runs::feed::{self, Cursor, Filter, Line, Paths};
use crate::runs::link_prefixes::LinkPrefixes;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, VecDeque};
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

/// The event types sent when `--type` is not given.
/// `node` is a hub's (a node lost, or up again): only a hub's home has them.
pub const DEFAULT_TYPES: [&str; 3] = ["needs_input", "ended", "node"];

const STATE_VERSION: &str = "runwire-notify-state/v1";
/// The state file: how far each webhook has been delivered, in this feed log.
#[derive(Debug, Default, Serialize, Deserialize)]
struct State {
    v: String,
    /// The feed log's inode: event ids mean nothing in another log.
    feed: u64,
    /// Webhook URL → the event id up to which everything is handled
    /// (delivered, refused or not chosen).
    webhooks: BTreeMap<String, u64>,
}

/// What `runs notify` is asked.
#[derive(Debug, Clone)]
pub struct Options {
    pub home: PathBuf,
    pub webhooks: Vec<String>,
    pub secret_file: Option<PathBuf>,
    pub state: Option<PathBuf>,
    pub since: Option<u64>,
    pub format: String,
    pub filter: Filter,
}

/// Why [`run`] could not go on.
#[derive(Debug)]
pub enum NotifyError {
    /// A bad option, secret, state file or id (exit 2).
    Usage(String),
    /// The feed or the state could not be read or written (exit 3).
    Io(String),
}

/// What the workers share.
struct Shared {
    /// The positions, and whether they changed since the last write.
    state: Mutex<(State, bool)>,
    /// Signalled when the positions change (the writer thread waits on it).
    changed: Condvar,
    /// Held while the state file is written: writes go out one at a time,
    /// each with the positions as of its start, so an older one never lands last.
    writing: Mutex<()>,
    path: Option<PathBuf>,
    /// The feed's generation (bumped as the log grows) and whether to stop.
    wake: Mutex<(u64, bool)>,
    cv: Condvar,
    /// Whether the last state write failed (said once until one succeeds).
    write_failed: Mutex<bool>,
}

impl Shared {
    fn generation(&self) -> (u64, bool) {
        *self.wake.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn bump(&self) {
        self.wake.lock().unwrap_or_else(|e| e.into_inner()).0 += 1;
        self.cv.notify_all();
    }

    fn stop(&self) {
        self.wake.lock().unwrap_or_else(|e| e.into_inner()).1 = true;
        self.cv.notify_all();
    }

    /// Waits until the generation moves past `seen`, or a stop.
    fn wait(&self, seen: u64) {
        let g = self.wake.lock().unwrap_or_else(|e| e.into_inner());
        let _g = self.cv.wait_while(g, |w| w.0 == seen && !w.1).unwrap_or_else(|e| e.into_inner());
    }

    /// Sleeps `d` unless stopped first; true when stopped.
    fn sleep(&self, d: Duration) -> bool {
        let g = self.wake.lock().unwrap_or_else(|e| e.into_inner());
        let (g, _) = self.cv.wait_timeout_while(g, d, |w| !w.1).unwrap_or_else(|e| e.into_inner());
        g.1
    }

    /// Records a webhook's position, for the writer thread to write (off
    /// the delivery path: a slow disk does not delay the next event).
    fn save(&self, url: &str, pos: u64) {
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if st.0.webhooks.get(url) != Some(&pos) {
            st.0.webhooks.insert(url.to_string(), pos);
            st.1 = true;
            self.changed.notify_all();
        }
    }

    /// The writer thread: writes the state file whenever positions changed.
    fn writer(&self) {
        loop {
            {
                let g = self.state.lock().unwrap_or_else(|e| e.into_inner());
                let _g = self.changed.wait_while(g, |st| !st.1).unwrap_or_else(|e| e.into_inner());
            }
            if self.flush().is_err() {
                // Said once by flush; tried again a second later, the positions marked as changed.
                std::thread::sleep(Duration::from_secs(1));
                self.state.lock().unwrap_or_else(|e| e.into_inner()).1 = true;
            }
        }
    }

    /// Writes the positions as they are now (temp file + rename).
    fn flush(&self) -> io::Result<()> {
        let _w = self.writing.lock().unwrap_or_else(|e| e.into_inner());
        let bytes = {
            let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
            st.1 = false;
            serde_json::to_vec(&st.0)
        };
        let Some(path) = &self.path else { return Ok(()) };
        let r = bytes.map_err(io::Error::other).and_then(|b| crate::runs::write_atomic(path, &b));
        let mut failed = self.write_failed.lock().unwrap_or_else(|e| e.into_inner());
        match &r {
            Err(e) if !*failed => {
                crate::util::cli::report(
                    "runs",
                    format!("notify: {}: {e} (a restart may repeat events)", path.display()),
                );
                *failed = true;
            }
            Ok(()) => *failed = false,
            Err(_) => {}
        }
        r
    }
}

/// One webhook's worker: reads the log from `pos`, delivers each chosen
/// event in order (retrying until it is delivered or refused), records
/// each one, and waits for the log to grow.
fn worker(ctx: Arc<Shared>, url: Url, paths: Paths, filter: Filter, m: (u64, Format), key: Option<Vec<u8>>, pos: u64) {
    let (feed_ino, format) = m;
    let mut cursor = Cursor::new(&paths, pos);
    let mut queue: VecDeque<(u64, Vec<u8>)> = VecDeque::new();
    let mut read_failed = false;
    loop {
        let (seen, stop) = ctx.generation();
        if stop {
            return;
        }
        // The queue: one buffer of the log. Lines over the event bound are
        // skipped here silently (the main thread's follow reports them).
        let more = match cursor.read_some(|id, line| {
            if let Line::Event(l) = line {
                if filter.matches(l) {
                    queue.push_back((id, feed::with_id(l, id)));
                }
            }
        }) {
            Ok(more) => {
                read_failed = false;
                more
            }
            Err(e) => {
                if !read_failed {
                    crate::util::cli::report(
                        "runs",
                        format!("notify: {}: {e} (tried again each second)", paths.log.display()),
                    );
                    read_failed = true;
                }
                if ctx.sleep(Duration::from_secs(1)) {
                    return;
                }
                continue;
            }
        };
        while let Some((id, line)) = queue.front() {
            if ctx.generation().1 {
                return; // stopped between two events: the next one is not started
            }
            // The home's link prefixes as of this event (a server started since records its own).
            let prefixes = paths.dir.parent().map(LinkPrefixes::read).unwrap_or_default();
            let Some(msg) = message(line, feed_ino, format, &prefixes) else {
                queue.pop_front();
                continue;
            };
            if !deliver(&ctx, &url, &msg, key.as_deref(), *id) {
                return; // stopped: what is not delivered stays after the saved position
            }
            let id = *id;
            queue.pop_front();
            ctx.save(&url.text, id);
        }
        // Everything read so far is handled: chosen events delivered, others skipped.
        ctx.save(&url.text, cursor.pos);
        if !more {
            ctx.wait(seen);
        }
    }
}

/// Sends one event until it is delivered or refused (true), or until a stop
/// (false; a request in flight is finished first).
fn deliver(ctx: &Shared, url: &Url, msg: &Message, key: Option<&[u8]>, id: u64) -> bool {
    let mut attempt = 0u32;
    loop {
        attempt += 1;
        match post(url, msg, key) {
            Outcome::Delivered(_) => {
                if attempt > 1 {
                    crate::util::cli::report(
                        "runs",
                        format!("notify: {}: event {id} ({}) delivered after {attempt} attempts", url.text, msg.id),
                    );
                }
                return true;
            }
            Outcome::Refused(code) => {
                crate::util::cli::report(
                    "runs",
                    format!("notify: {}: event {id} ({}) refused with HTTP {code}: not sent again", url.text, msg.id),
                );
                return true;
            }
            Outcome::Retry(why) => {
                let wait = backoff(attempt);
                // Said on the first failure and then at most once a minute (the backoff's cap).
                if attempt == 1 || wait >= MAX_BACKOFF || attempt.is_power_of_two() {
                    crate::util::cli::report(
                        "runs",
                        format!(
                            "notify: {}: event {id} ({}): attempt {attempt} failed: {why}; next in {:.1} s",
                            url.text,
                            msg.id,
                            wait.as_secs_f64()
                        ),
                    );
                }
                if ctx.sleep(wait) {
                    return false;
                }
            }
        }
    }
}

/// The feed log's inode (it exists once the feed has been extended).
fn log_inode(paths: &Paths) -> io::Result<u64> {
    std::fs::metadata(&paths.log).map(|m| m.ino())
}

/// `runs notify`: runs until SIGINT or SIGTERM (then exits 0 from its
/// signal thread, after the requests in flight), or an error.
pub fn run(o: Options) -> Result<(), NotifyError> {
    use NotifyError::{Io, Usage};
    let format = Format::parse(&o.format).map_err(Usage)?;
    let mut filter = o.filter.clone();
    if filter.types.is_empty() {
        filter.types = DEFAULT_TYPES.iter().map(|t| t.to_string()).collect();
    }
    filter.validate().map_err(Usage)?;
    if o.webhooks.is_empty() {
        return Err(Usage("no --webhook given".into()));
    }
    let mut urls = Vec::new();
    for w in &o.webhooks {
        let u = parse_url(w).map_err(|e| Usage(format!("--webhook {e}")))?;
        if urls.iter().any(|x: &Url| x.text == u.text) {
            return Err(Usage(format!("--webhook {w}: given twice")));
        }
        urls.push(u);
    }
    let key = match &o.secret_file {
        None => None,
        Some(p) => {
            let b = std::fs::read(p).map_err(|e| Io(format!("--secret-file {}: {e}", p.display())))?;
            Some(key(&b).map_err(|e| Usage(format!("--secret-file {}: {e}", p.display())))?)
        }
    };
    // Signals are waited for by one thread: blocked here, before any thread
    // starts (the feed's watcher, the workers), so every thread inherits it.
    let mut signals = nix::sys::signal::SigSet::empty();
    signals.add(nix::sys::signal::Signal::SIGINT);
    signals.add(nix::sys::signal::Signal::SIGTERM);
    signals.thread_block().map_err(|e| Io(format!("cannot block SIGINT/SIGTERM: {e}")))?;

    // The feed as of now (it takes in what happened while nobody followed).
    let paths = Paths::at(&o.home);
    let end = feed::Extender::new(&o.home).extend(feed::Scope::All).map_err(|e| Io(format!("feed: {e}")))?;
    let ino = log_inode(&paths).map_err(|e| Io(format!("{}: {e}", paths.log.display())))?;
    let mut state = State { v: STATE_VERSION.into(), feed: ino, webhooks: BTreeMap::new() };
    // One process per state file (two would each repeat what the other sent):
    // `FILE.lock`, held until exit.
    let _held = match &o.state {
        None => None,
        Some(p) => {
            use nix::fcntl::{Flock, FlockArg};
            let mut lock = p.clone().into_os_string();
            lock.push(".lock");
            let f = std::fs::OpenOptions::new()
                .create(true)
                .truncate(false)
                .write(true)
                .open(&lock)
                .map_err(|e| Io(format!("--state {}: {e}", PathBuf::from(&lock).display())))?;
            Some(
                Flock::lock(f, FlockArg::LockExclusiveNonblock)
                    .map_err(|_| Usage(format!("--state {}: another runs notify is using it", p.display())))?,
            )
        }
    };
    if let Some(p) = &o.state {
        match std::fs::read(p) {
            Ok(b) => {
                let bad = |why: String| Usage(format!("--state {}: {why}", p.display()));
                let saved: State =
                    serde_json::from_slice(&b).map_err(|e| bad(format!("not a runs notify state file: {e}")))?;
                if saved.v != STATE_VERSION {
                    return Err(bad(format!("version {:?}, expected {STATE_VERSION:?}", saved.v)));
                }
                if saved.feed != ino {
                    return Err(bad(format!(
                        "it is for another feed log (inode {}, this one's is {ino}): remove it, or start with --since",
                        saved.feed
                    )));
                }
                state.webhooks = saved.webhooks;
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(Io(format!("--state {}: {e}", p.display()))),
        }
    }
    let mut starts = Vec::new();
    for u in &urls {
        // A webhook the state knows resumes there; a new one at --since, else from now.
        let pos = state.webhooks.get(&u.text).copied().or(o.since).unwrap_or(end);
        feed::check_since(&paths, pos).map_err(|e| Usage(format!("webhook {}: {e}", u.text)))?;
        state.webhooks.insert(u.text.clone(), pos);
        starts.push(pos);
    }
    let ctx = Arc::new(Shared {
        state: Mutex::new((state, false)),
        changed: Condvar::new(),
        writing: Mutex::new(()),
        path: o.state.clone(),
        wake: Mutex::new((0, false)),
        cv: Condvar::new(),
        write_failed: Mutex::new(false),
    });
    // Written once now: a state file that cannot be written is said at start.
    if let (Some(p), Err(e)) = (&o.state, ctx.flush()) {
        return Err(Io(format!("--state {}: {e}", p.display())));
    }
    if o.state.is_some() {
        let ctx = ctx.clone();
        std::thread::spawn(move || ctx.writer());
    }
    let mut workers = Vec::new();
    for (u, pos) in urls.into_iter().zip(starts.iter().copied()) {
        let (ctx, paths, filter, key) = (ctx.clone(), paths.clone(), filter.clone(), key.clone());
        workers.push(std::thread::spawn(move || worker(ctx, u, paths, filter, (ino, format), key, pos)));
    }
    {
        let ctx = ctx.clone();
        std::thread::spawn(move || {
            let _ = signals.wait();
            // Requests in flight finish (bounded by their timeouts), then each
            // worker has recorded its position: a restart repeats nothing.
            ctx.stop();
            for w in workers {
                let _ = w.join();
            }
            let _ = ctx.flush();
            std::process::exit(0);
        });
    }
    // This thread follows the feed from the earliest worker's position (so
    // whatever the workers have not read wakes them), extending the log.
    let since = starts.iter().copied().min().unwrap_or(end);
    let r = feed::follow(&o.home, Some(since), &filter, true, |_| {
        ctx.bump();
        Ok(())
    });
    match r {
        Ok(()) => Ok(()),
        Err(feed::FollowError::Usage(m)) => Err(Usage(m)),
        Err(feed::FollowError::Io(e)) => Err(Io(format!("feed: {e}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    #[test]
    fn urls_parse_and_https_is_refused_with_the_proxy_recipe() {
        let u = parse_url("http://127.0.0.1:8080/hook?x=1").unwrap();
        assert_eq!((u.host.as_str(), u.port, u.target.as_str()), ("127.0.0.1", 8080, "/hook?x=1"));
        let u = parse_url("http://[::1]/").unwrap();
        assert_eq!((u.host.as_str(), u.port, u.authority.as_str()), ("::1", 80, "[::1]"));
        assert_eq!(parse_url("http://h?q").unwrap().target, "/?q");
        assert!(parse_url("https://ntfy.sh/x").unwrap_err().contains("TLS proxy"));
        for bad in ["ftp://x", "http://", "http://h:0/", "http://u:p@h/", "http://h/a b", "http://h:99999"] {
            assert!(parse_url(bad).is_err(), "{bad}");
        }
    }

    /// The Standard Webhooks specification's own example (its repository's
    /// test vector): this secret, id, timestamp and body sign to this.
    #[test]
    fn signs_the_specifications_example() {
        let k = key(b"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").unwrap();
        let body = br#"{"test": 2432232314}"#;
        assert_eq!(
            sign(&k, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, body),
            "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
        );
        assert_eq!(key(b"raw\n").unwrap(), b"raw\n");
        assert!(key(b"whsec_!!").is_err() && key(b"").is_err());
    }

    #[test]
    fn backoff_doubles_to_a_minute() {
        assert_eq!(backoff(1), Duration::from_millis(500));
        assert_eq!(backoff(2), Duration::from_secs(1));
        assert_eq!(backoff(40), MAX_BACKOFF);
        assert_eq!(judge(204), Outcome::Delivered(204));
        assert!(matches!(judge(503), Outcome::Retry(_)) && matches!(judge(429), Outcome::Retry(_)));
        assert_eq!(judge(400), Outcome::Refused(400));
    }

    #[test]
    fn bodies_carry_the_event_its_words_and_its_links() {
        let line = br#"{"id":42,"type":"needs_input","ts":"t","slug":"s","repo":"r","tool":"Bash","detail":"rm -rf b","links":["http://x/a/t.m"]}"#;
        let ours = LinkPrefixes::new(["http://x/a/".to_string()]);
        let m = message(line, 7, Format::Json, &ours).unwrap();
        assert_eq!(m.id, "msg_7_42");
        let v: Value = serde_json::from_slice(&m.body).unwrap();
        assert_eq!((v["type"].as_str(), v["data"]["id"].as_u64()), (Some("needs_input"), Some(42)));
        assert_eq!(v["data"]["links"], serde_json::json!(["http://x/a/t.m"]));
        let n = message(line, 7, Format::Ntfy, &ours).unwrap();
        assert_eq!(String::from_utf8(n.body).unwrap(), "Allow Bash? rm -rf b\nOpen: http://x/a/t.m");
        assert!(n.headers.contains(&("Actions", "view, Open, http://x/a/t.m".into())), "{:?}", n.headers);
        let sl: Value = serde_json::from_slice(&message(line, 7, Format::Slack, &ours).unwrap().body).unwrap();
        assert_eq!(sl["text"], "*s (r) needs input*\nAllow Bash? rm -rf b\n<http://x/a/t.m|Open>");
        let ended = br#"{"id":9,"type":"ended","status":"failed","slug":"s","detail":"tests fail"}"#;
        let ap: Value = serde_json::from_slice(&message(ended, 7, Format::Apprise, &ours).unwrap().body).unwrap();
        assert_eq!(
            (ap["title"].as_str(), ap["body"].as_str(), ap["type"].as_str()),
            (Some("s failed"), Some("Run failed: tests fail"), Some("failure"))
        );
        let done = br#"{"id":10,"type":"ended","status":"done","slug":"s"}"#;
        let ap: Value = serde_json::from_slice(&message(done, 7, Format::Apprise, &ours).unwrap().body).unwrap();
        assert_eq!((ap["title"].as_str(), ap["type"].as_str()), (Some("s done"), Some("success")));
    }

    /// The journal is the agent's to write: a link it put there (another
    /// address, or runwire's objects with a label of its own) is in no body.
    #[test]
    fn links_not_under_a_recorded_prefix_are_in_no_body() {
        let line = br#"{"id":1,"type":"needs_input","tool":"Bash","links":["http://evil.example/a/t.m",{"url":"http://x/a/t.m","decision":"approve"},"http://x/a/t.m?go=http://evil"]}"#;
        for prefixes in [LinkPrefixes::default(), LinkPrefixes::new(["http://x/a/".to_string()])] {
            for f in [Format::Json, Format::Ntfy, Format::Slack, Format::Apprise] {
                let m = message(line, 7, f, &prefixes).unwrap();
                let all = format!("{:?} {}", m.headers, String::from_utf8_lossy(&m.body));
                assert!(!all.contains("evil") && !all.contains("http://x") && !all.contains("approve"), "{f:?}: {all}");
                assert!(!m.headers.iter().any(|(h, _)| *h == "Click" || *h == "Actions"), "{f:?}: {all}");
            }
        }
    }

    /// A hub's judgement of a node, as an operator's phone shows it.
    #[test]
    fn a_lost_node_is_a_warning_and_its_return_a_success() {
        let lost = br#"{"id":5,"type":"node","node":"alpha","state":"lost","since":1754166531710,"ts":"t"}"#;
        let n = message(lost, 7, Format::Ntfy, &LinkPrefixes::default()).unwrap();
        assert!(n.headers.contains(&("Title", "Node alpha lost".into())), "{:?}", n.headers);
        assert!(n.headers.contains(&("Priority", "high".into())) && n.headers.contains(&("Tags", "warning".into())));
        let body = String::from_utf8(n.body).unwrap();
        assert!(body.starts_with("No heartbeat from node alpha since 2025-08-02T20:28:51.710Z: "), "{body}");
        let up = br#"{"id":6,"type":"node","node":"alpha","state":"up","since":1754166531710,"ts":"t"}"#;
        let ap: Value =
            serde_json::from_slice(&message(up, 7, Format::Apprise, &LinkPrefixes::default()).unwrap().body).unwrap();
        assert_eq!((ap["title"].as_str(), ap["type"].as_str()), (Some("Node alpha is up"), Some("success")));
        let sl: Value =
            serde_json::from_slice(&message(lost, 7, Format::Slack, &LinkPrefixes::default()).unwrap().body).unwrap();
        assert!(sl["text"].as_str().unwrap().starts_with("*Node alpha lost*\nNo heartbeat"), "{sl}");
        let js: Value =
            serde_json::from_slice(&message(lost, 7, Format::Json, &LinkPrefixes::default()).unwrap().body).unwrap();
        assert_eq!((js["type"].as_str(), js["data"]["node"].as_str()), (Some("node"), Some("alpha")));
    }

    #[test]
    fn a_request_is_signed_and_carries_the_ids() {
        let u = parse_url("http://127.0.0.1:9/h").unwrap();
        let m =
            Message { id: "msg_1_2".into(), content_type: "application/json", headers: vec![], body: b"{}".to_vec() };
        let r = String::from_utf8(request(&u, &m, 100, Some(b"k"))).unwrap();
        assert!(r.starts_with("POST /h HTTP/1.1\r\nHost: 127.0.0.1:9\r\n"), "{r}");
        assert!(r.contains("webhook-id: msg_1_2\r\nwebhook-timestamp: 100\r\n"), "{r}");
        assert!(r.contains(&format!("webhook-signature: {}\r\n", sign(b"k", "msg_1_2", 100, b"{}"))), "{r}");
        assert!(r.ends_with("\r\n\r\n{}"), "{r}");
    }
}
