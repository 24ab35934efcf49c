//! The hub: mirrors the cluster into a harness home, one run directory per
//! node and run, so the ordinary `runwire-serve` (started with `--hub`)
//! serves every node's runs and their task streams with its own, unchanged
//! code. Its change feed is the cluster's: [`Fanout`] reads `RUNWIRE_FEED`
//! once for every client, ids the stream's sequences (the same at every hub).
//!
//! - Each run of the bucket `runwire-runs` becomes a run of the hub's home
//!   with the id `<node>.<run>`, its pointer rewritten to name that id and the
//!   mirror directory `$HOME/cluster/nodes/<node>/<run>/` (everything else
//!   of the pointer as the node wrote it); a deleted key removes it.
//! - Each chunk of `RUNWIRE_FILES` is written into the mirror at its offset:
//!   a chunk at the file's length is appended, one below it was applied
//!   already (skipped), a reset chunk truncates first; a file published whole
//!   (the plan) is assembled aside and renamed into place, so readers never
//!   see half of one. Each file gets the node's modification time, so
//!   listings order the runs as the node does and a task stream (a pure
//!   function of the log, its arrival-time sidecar and, without one, the
//!   log's mtime: spec/LAYOUT.md) is the node's, event for event.
//! - The stream sequence applied last is kept in `$HOME/cluster/files.seq`;
//!   a restarted hub goes on from there (applying a chunk twice changes
//!   nothing, so the file may lag).

use crate::names::{self, header};
use anyhow::{anyhow, bail, Context as _};
use async_nats::jetstream::{self, consumer, kv};
use async_nats::HeaderMap;
use futures_util::StreamExt;
use runwire::runs::registry::{Pointer, Registry};
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

pub struct Opts {
    pub home: PathBuf,
}

/// The mirror's files under the hub's home.
pub struct Mirror {
    pub home: PathBuf,
    reg: Registry,
}

fn hdr<T: std::str::FromStr>(h: Option<&HeaderMap>, name: &str) -> Option<T> {
    h?.get(name)?.as_str().parse().ok()
}

fn set_mtime(f: &std::fs::File, ns: i64) {
    if ns > 0 {
        let t = SystemTime::UNIX_EPOCH + Duration::from_nanos(ns as u64);
        let _ = f.set_modified(t);
    }
}

impl Mirror {
    pub fn new(home: &Path) -> Mirror {
        Mirror { home: home.to_path_buf(), reg: Registry::at(home) }
    }

    pub fn dir(&self, node: &str, run: &str) -> PathBuf {
        self.home.join("cluster").join("nodes").join(node).join(run)
    }

    fn seq_path(&self) -> PathBuf {
        self.home.join("cluster").join("files.seq")
    }

    pub fn load_seq(&self) -> u64 {
        std::fs::read_to_string(self.seq_path()).ok().and_then(|s| s.trim().parse().ok()).unwrap_or(0)
    }

    pub fn save_seq(&self, seq: u64) -> std::io::Result<()> {
        std::fs::create_dir_all(self.home.join("cluster"))?;
        runwire::runs::write_atomic(&self.seq_path(), format!("{seq}\n").as_bytes())
    }

    /// A run of the bucket: its pointer, rewritten for the hub.
    pub fn pointer(&self, node: &str, run: &str, p: &Pointer) -> anyhow::Result<()> {
        let id = names::hub_run_id(node, run);
        if !runwire::runs::valid_id(&id) {
            bail!("run {run} of node {node}: the hub's id {id:?} is not a valid id (too long?)");
        }
        // The node's names, checked by the one check before any path is
        // built from them (its slug names the run's files in the mirror).
        check_node_pointer(node, run, p)?;
        let dir = self.dir(node, run);
        std::fs::create_dir_all(&dir).with_context(|| dir.display().to_string())?;
        let mut q = p.clone();
        q.run_id = id.clone();
        q.runstate_dir = dir.display().to_string();
        if self.reg.read(&id).is_ok_and(|old| old == q) {
            return Ok(());
        }
        std::fs::create_dir_all(&self.reg.dir)?;
        self.reg.register(&q).with_context(|| format!("registry: {id}"))
    }

    /// A new plan changes the run's summary without a journal record: the
    /// journal's stamp is changed (`runs::journal::touch`), so listings
    /// read the run again (a journal chunk changes it by itself).
    fn note(&self, dir: &Path, file: &str) {
        let journal = match (file.strip_suffix(".plan.json"), file.ends_with(".jsonl")) {
            (Some(slug), _) => dir.join(format!("{slug}.jsonl")),
            (None, true) => dir.join(file),
            _ => return,
        };
        if journal.is_file() {
            let _ = runwire::runs::journal::touch(&journal);
        }
    }

    /// A run deleted from the bucket: out of the hub's home.
    pub fn remove(&self, node: &str, run: &str) {
        let id = names::hub_run_id(node, run);
        let _ = std::fs::remove_file(self.reg.path(&id));
        let _ = std::fs::remove_file(self.reg.link_path(&id));
        let _ = std::fs::remove_dir_all(self.dir(node, run));
    }

    /// One chunk of a file.
    pub fn chunk(&self, subject: &str, h: Option<&HeaderMap>, payload: &[u8]) -> anyhow::Result<()> {
        let Some((node, run, file)) = names::parse_file_subject(subject) else {
            bail!("{subject}: not a file subject (ignored)");
        };
        let off: u64 = hdr(h, header::OFFSET).ok_or_else(|| anyhow!("{subject}: no {} header", header::OFFSET))?;
        let mtime: i64 = hdr(h, header::MTIME).unwrap_or(0);
        let reset = h.and_then(|h| h.get(header::RESET)).is_some();
        let dir = self.dir(&node, &run);
        std::fs::create_dir_all(&dir).with_context(|| dir.display().to_string())?;
        let path = dir.join(&file);
        if let Some(total) = hdr::<u64>(h, header::WHOLE) {
            let part = dir.join(format!("{file}.part"));
            let f = std::fs::OpenOptions::new().create(true).truncate(false).read(true).write(true).open(&part)?;
            if off == 0 {
                f.set_len(0)?;
            }
            if f.metadata()?.len() != off {
                return Ok(()); // a chunk of a generation already replaced
            }
            f.write_all_at(payload, off)?;
            if off + payload.len() as u64 == total {
                set_mtime(&f, mtime);
                drop(f);
                std::fs::rename(&part, &path)?;
                self.note(&dir, &file);
            }
            return Ok(());
        }
        let mut f = std::fs::OpenOptions::new().create(true).truncate(false).read(true).write(true).open(&path)?;
        if reset && off == 0 {
            f.set_len(0)?;
        }
        let len = f.metadata()?.len();
        if len > off {
            return Ok(()); // applied already
        }
        if len < off {
            bail!(
                "{}: a chunk at {off} but the mirror has {len} bytes (a gap: the stream lost messages?)",
                path.display()
            );
        }
        use std::io::{Seek, SeekFrom};
        f.seek(SeekFrom::Start(off))?;
        f.write_all(payload)?;
        set_mtime(&f, mtime);
        drop(f);
        self.note(&dir, &file);
        Ok(())
    }
}

/// A node's pointer for its run `run`, checked as a pointer read from disk
/// is (`runs::registry::check_pointer`: it names its run, its slug is an
/// id, its runstate directory absolute): anything else is refused before
/// the hub builds a path from it.
pub fn check_node_pointer(node: &str, run: &str, p: &Pointer) -> anyhow::Result<()> {
    runwire::runs::registry::check_pointer(p.fields(), run)
        .map_err(|e| anyhow!("run {run} of node {node}: its pointer is refused: {e}"))
}

/// Runs the hub's mirror until the process is stopped.
pub async fn run(client: async_nats::Client, o: Opts) -> anyhow::Result<()> {
    let js = jetstream::new(client);
    let files = crate::node::retry("bind", || async {
        js.get_stream(names::FILES_STREAM)
            .await
            .map_err(|e| anyhow!("stream {}: {e} (an admin creates it: runwire-cluster setup)", names::FILES_STREAM))
    })
    .await;
    let runs = crate::node::retry("bind", || async {
        js.get_key_value(names::RUNS_BUCKET)
            .await
            .map_err(|e| anyhow!("bucket {}: {e} (an admin creates it: runwire-cluster setup)", names::RUNS_BUCKET))
    })
    .await;
    let mirror = std::sync::Arc::new(Mirror::new(&o.home));
    let m2 = mirror.clone();
    let watcher = tokio::spawn(async move { watch_runs(runs, &m2).await });
    let files_loop = follow_files(files, &mirror);
    tokio::select! {
        r = files_loop => r,
        r = watcher => r.map_err(|e| anyhow!("{e}"))?,
    }
}

async fn watch_runs(runs: kv::Store, mirror: &Mirror) -> anyhow::Result<()> {
    loop {
        let mut w = match runs.watch_with_history(">").await {
            Ok(w) => w,
            Err(e) => {
                crate::report(format!("bucket {}: watch: {e} (retrying)", names::RUNS_BUCKET));
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
        };
        while let Some(entry) = w.next().await {
            let entry = match entry {
                Ok(e) => e,
                Err(e) => {
                    crate::report(format!("bucket {}: {e}", names::RUNS_BUCKET));
                    break;
                }
            };
            let Some((node, run)) = names::parse_run_key(&entry.key) else { continue };
            match entry.operation {
                kv::Operation::Put => {
                    let p = serde_json::from_slice::<serde_json::Value>(&entry.value)
                        .ok()
                        .and_then(|v| serde_json::from_value::<Pointer>(v.get("pointer")?.clone()).ok());
                    match p {
                        Some(p) if p.run_id == run => {
                            if let Err(e) = mirror.pointer(&node, &run, &p) {
                                crate::report(format!("mirror: {e:#}"));
                            }
                        }
                        _ => crate::report(format!(
                            "bucket {}: {}: no valid pointer (ignored)",
                            names::RUNS_BUCKET,
                            entry.key
                        )),
                    }
                }
                kv::Operation::Delete | kv::Operation::Purge => mirror.remove(&node, &run),
            }
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

async fn follow_files(files: jetstream::stream::Stream, mirror: &Mirror) -> anyhow::Result<()> {
    let mut seq = mirror.load_seq();
    let mut saved = seq;
    let mut last_save = std::time::Instant::now();
    loop {
        let policy = if seq == 0 {
            consumer::DeliverPolicy::All
        } else {
            consumer::DeliverPolicy::ByStartSequence { start_sequence: seq + 1 }
        };
        let cfg = consumer::pull::OrderedConfig { deliver_policy: policy, ..Default::default() };
        let consumer = match files.create_consumer(cfg).await {
            Ok(c) => c,
            Err(e) => {
                crate::report(format!("stream {}: consumer: {e} (retrying)", names::FILES_STREAM));
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
        };
        let mut msgs = match consumer.messages().await {
            Ok(m) => m,
            Err(e) => {
                crate::report(format!("stream {}: messages: {e} (retrying)", names::FILES_STREAM));
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
        };
        loop {
            let next = tokio::time::timeout(Duration::from_millis(500), msgs.next()).await;
            match next {
                Ok(Some(Ok(m))) => {
                    let s = m.info().map(|i| i.stream_sequence).unwrap_or(seq + 1);
                    if let Err(e) = mirror.chunk(m.subject.as_str(), m.headers.as_ref(), &m.payload) {
                        crate::report(format!("mirror: {e:#}"));
                    }
                    seq = s;
                }
                Ok(Some(Err(e))) => {
                    crate::report(format!("stream {}: {e} (resuming after {seq})", names::FILES_STREAM));
                    break;
                }
                Ok(None) => break,
                Err(_) => {} // quiet: save the position below
            }
            if seq != saved && last_save.elapsed() >= Duration::from_millis(500) {
                if let Err(e) = mirror.save_seq(seq) {
                    crate::report(format!("mirror: files.seq: {e}"));
                }
                saved = seq;
                last_save = std::time::Instant::now();
            }
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The filters and resume point of `GET /runs/events`: the local feed's
/// query, parsed by the same code.
pub fn feed_query(query: &str) -> Result<(runwire::runs::feed::Filter, Option<u64>), String> {
    runwire::serve::feed::query(query)
}

/// One event of `RUNWIRE_FEED` as a hub serves it: the node's feed line
/// with `id` = its stream sequence first (as the local feed frames it),
/// `runId` the hub's (`<node>.<run>`) and `node` added last; the rest as
/// the node wrote it, in its order. `None` for a line that is not a JSON
/// object.
pub fn hub_event(node: &str, seq: u64, line: &[u8]) -> Option<String> {
    let serde_json::Value::Object(o) = serde_json::from_slice(line).ok()? else { return None };
    let text = std::str::from_utf8(line).ok()?.trim();
    // Ids are plain characters: the key and its value appear as they are.
    let rewritten = match o.get("runId") {
        Some(serde_json::Value::String(r)) if runwire::runs::valid_id(r) => {
            let old = format!("\"runId\":{}", serde_json::Value::from(r.as_str()));
            let new = format!("\"runId\":{}", serde_json::Value::from(names::hub_run_id(node, r)));
            (text.matches(&old).count() == 1).then(|| text.replacen(&old, &new, 1))
        }
        Some(_) => None,
        None => Some(text.to_string()),
    };
    let body = match (rewritten, o.contains_key("id") || o.contains_key("node")) {
        (Some(t), false) => t,
        // Anything unusual: rebuilt (keys then sorted).
        _ => {
            let mut o = o;
            o.remove("id");
            if let Some(serde_json::Value::String(r)) = o.get("runId").cloned() {
                o.insert("runId".into(), names::hub_run_id(node, &r).into());
            }
            serde_json::Value::Object(o).to_string()
        }
    };
    let mut out = String::from_utf8(runwire::runs::feed::with_id(body.as_bytes(), seq)).ok()?;
    out.pop(); // the closing brace
    let sep = if out.ends_with('{') { "" } else { "," };
    out.push_str(&format!("{sep}\"node\":{}}}", serde_json::Value::from(node)));
    Some(out)
}

/// A message of `RUNWIRE_FEED`, as the fan-out keeps it.
pub struct FeedMsg {
    pub seq: u64,
    pub subject: String,
    pub payload: bytes::Bytes,
}

/// Messages the fan-out keeps for clients resuming from a recent point.
pub const WINDOW_MSGS: usize = 8192;
/// ... and at most these many payload bytes.
pub const WINDOW_BYTES: usize = 16 * 1024 * 1024;
/// Messages a client may be behind the live feed before it is dropped
/// (told so; it resumes with its Last-Event-ID).
pub const LIVE_QUEUE: usize = 4096;

#[derive(Default)]
struct FanState {
    /// The last sequence the consumer delivered; `None` until it is bound.
    pos: Option<u64>,
    window: std::collections::VecDeque<std::sync::Arc<FeedMsg>>,
    bytes: usize,
}

/// `GET /runs/events` at a hub for every client at once: ONE ordered
/// consumer of `RUNWIRE_FEED` from the stream's end (as the hub starts),
/// fanned out to any number of clients. A client resuming within the
/// recent window (the last [`WINDOW_MSGS`] messages) is served from memory;
/// from further back, it reads the stream itself up to the window, then
/// joins. Each event's id is its stream sequence, so a client resumes at
/// any hub of the cluster.
pub struct Fanout {
    js: jetstream::Context,
    state: std::sync::Mutex<FanState>,
    live: tokio::sync::broadcast::Sender<std::sync::Arc<FeedMsg>>,
    bound: tokio::sync::watch::Sender<bool>,
}

impl Fanout {
    /// The fan-out, its consumer following the stream from now on (and
    /// rebinding after any failure, from where it was).
    pub fn start(client: async_nats::Client) -> std::sync::Arc<Fanout> {
        let (live, _) = tokio::sync::broadcast::channel(LIVE_QUEUE);
        let (bound, _) = tokio::sync::watch::channel(false);
        let f = std::sync::Arc::new(Fanout { js: jetstream::new(client), state: Default::default(), live, bound });
        let f2 = f.clone();
        tokio::spawn(async move { f2.follow().await });
        f
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, FanState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    async fn follow(&self) {
        let mut quiet = false;
        loop {
            let stream = match self.js.get_stream(names::FEED_STREAM).await {
                Ok(s) => s,
                Err(e) => {
                    if !quiet {
                        crate::report(format!("stream {}: {e} (retrying)", names::FEED_STREAM));
                        quiet = true;
                    }
                    tokio::time::sleep(Duration::from_millis(250)).await;
                    continue;
                }
            };
            let pos = match self.lock().pos {
                Some(p) => p,
                None => stream.cached_info().state.last_sequence,
            };
            let cfg = consumer::pull::OrderedConfig {
                deliver_policy: consumer::DeliverPolicy::ByStartSequence { start_sequence: pos + 1 },
                ..Default::default()
            };
            let msgs = match stream.create_consumer(cfg).await {
                Ok(c) => c.messages().await.map_err(|e| anyhow!("{e}")),
                Err(e) => Err(anyhow!("{e}")),
            };
            let mut msgs = match msgs {
                Ok(m) => m,
                Err(e) => {
                    if !quiet {
                        crate::report(format!("stream {}: consumer: {e} (retrying)", names::FEED_STREAM));
                        quiet = true;
                    }
                    tokio::time::sleep(Duration::from_millis(250)).await;
                    continue;
                }
            };
            quiet = false;
            self.lock().pos.get_or_insert(pos);
            self.bound.send_replace(true);
            while let Some(m) = msgs.next().await {
                let m = match m {
                    Ok(m) => m,
                    Err(e) => {
                        crate::report(format!("stream {}: {e} (resuming)", names::FEED_STREAM));
                        break;
                    }
                };
                let Some(seq) = m.info().ok().map(|i| i.stream_sequence) else { continue };
                let msg =
                    std::sync::Arc::new(FeedMsg { seq, subject: m.subject.to_string(), payload: m.payload.clone() });
                // Window and live queue under one lock: a client joining sees each message once.
                let mut st = self.lock();
                if st.pos.is_some_and(|p| seq <= p) {
                    continue;
                }
                st.pos = Some(seq);
                st.bytes += msg.payload.len();
                st.window.push_back(msg.clone());
                while st.window.len() > WINDOW_MSGS || st.bytes > WINDOW_BYTES {
                    if let Some(old) = st.window.pop_front() {
                        st.bytes -= old.payload.len();
                    }
                }
                let _ = self.live.send(msg);
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// One client: the answer (400 for a resume point the stream does not
    /// hold, 503 when the stream cannot be read), then after a 200 the SSE
    /// frames from `since` (`None`: from now), a `ready` frame once caught
    /// up (as the local feed does), until the sink fails. A client that
    /// falls [`LIVE_QUEUE`] messages behind is ended with an error saying
    /// so (it resumes with its Last-Event-ID).
    pub async fn client(&self, query: &str, since: Option<u64>, out: &crate::channel::Sink) {
        use crate::control::Answer;
        let err = |status: u16, msg: &str| Answer::error(status, msg.to_string());
        let (filter, q_since) = match feed_query(query) {
            Ok(q) => q,
            Err(m) => {
                out.answer(&err(400, &m)).await;
                return;
            }
        };
        let since = since.or(q_since);
        let info = async {
            let mut bound = self.bound.subscribe();
            bound.wait_for(|b| *b).await.map_err(|e| anyhow!("{e}"))?;
            let mut s = self.js.get_stream(names::FEED_STREAM).await.map_err(|e| anyhow!("{e}"))?;
            let (first, last) = {
                let i = s.info().await.map_err(|e| anyhow!("{e}"))?;
                (i.state.first_sequence, i.state.last_sequence)
            };
            Ok::<_, anyhow::Error>((s, first, last))
        };
        let (stream, first, last) = match tokio::time::timeout(Duration::from_secs(5), info).await {
            Ok(Ok(x)) => x,
            Ok(Err(e)) => {
                out.answer(&err(503, &format!("stream {}: {e}", names::FEED_STREAM))).await;
                return;
            }
            Err(_) => {
                let m = format!("stream {}: the cluster did not answer within 5 s", names::FEED_STREAM);
                {
                    out.answer(&err(503, &m)).await;
                    return;
                };
            }
        };
        let since = since.unwrap_or(last);
        if since > last {
            let m = format!("Last-Event-ID {since} is not an event id of this feed (its last is {last})");
            {
                out.answer(&err(400, &m)).await;
                return;
            };
        }
        if last > 0 && since + 1 < first {
            let m = format!("Last-Event-ID {since}: the feed keeps events from {first} on (older ones expired)");
            {
                out.answer(&err(400, &m)).await;
                return;
            };
        }
        if !out.answer(&Answer { status: 200, body: String::new() }).await {
            return;
        }
        let mut c = FeedClient { filter, pos: since, last, ready: false, out };
        if since >= last && !c.ready().await {
            return;
        }
        // Joined before anything is read: nothing the consumer delivers from now on is missed.
        let (mut live, recent, fan_pos) = {
            let st = self.lock();
            let recent: Vec<_> = st.window.iter().filter(|m| m.seq > since).cloned().collect();
            (self.live.subscribe(), recent, st.pos.unwrap_or(last))
        };
        let from_window = recent.first().map(|m| m.seq).unwrap_or(fan_pos + 1);
        // Older than the window: read from the stream up to it.
        if c.pos + 1 < from_window {
            let cfg = consumer::pull::OrderedConfig {
                deliver_policy: consumer::DeliverPolicy::ByStartSequence { start_sequence: c.pos + 1 },
                ..Default::default()
            };
            let mut msgs = match stream.create_consumer(cfg).await {
                Ok(cons) => match cons.messages().await {
                    Ok(m) => m,
                    Err(e) => {
                        out.end(Some(format!("stream {}: {e}", names::FEED_STREAM))).await;
                        return;
                    }
                },
                Err(e) => {
                    out.end(Some(format!("stream {}: {e}", names::FEED_STREAM))).await;
                    return;
                }
            };
            while c.pos + 1 < from_window {
                // A gap (messages removed) ends the catch-up: the window follows.
                let m = match tokio::time::timeout(Duration::from_secs(2), msgs.next()).await {
                    Ok(Some(Ok(m))) => m,
                    Ok(Some(Err(e))) => {
                        out.end(Some(format!("stream {}: {e}", names::FEED_STREAM))).await;
                        return;
                    }
                    _ => break,
                };
                let Some(seq) = m.info().ok().map(|i| i.stream_sequence) else { continue };
                let msg = FeedMsg { seq, subject: m.subject.to_string(), payload: m.payload.clone() };
                if !c.send(&msg).await {
                    return;
                }
            }
        }
        for m in &recent {
            if !c.send(m).await {
                return;
            }
        }
        loop {
            match live.recv().await {
                Ok(m) => {
                    if !c.send(&m).await {
                        return;
                    }
                }
                Err(tokio::sync::broadcast::error::RecvError::Lagged(n)) => {
                    let why = format!("this client fell {n} events behind the feed and was dropped: reconnect with its Last-Event-ID ({})", c.pos);
                    out.end(Some(why)).await;
                    return;
                }
                Err(tokio::sync::broadcast::error::RecvError::Closed) => {
                    out.end(Some("the hub's feed consumer ended".into())).await;
                    return;
                }
            }
        }
    }
}

/// One feed client's position and filter.
struct FeedClient<'a> {
    filter: runwire::runs::feed::Filter,
    pos: u64,
    /// The stream's last sequence as it arrived: `ready` once there.
    last: u64,
    ready: bool,
    out: &'a crate::channel::Sink,
}

impl FeedClient<'_> {
    async fn ready(&mut self) -> bool {
        self.ready = true;
        let id = self.pos;
        self.out
            .data(format!("event: ready\nid: {id}\ndata: {{\"type\":\"ready\",\"id\":{id}}}\n\n").into_bytes())
            .await
    }

    /// A message after the client's position, as its frame (filtered).
    async fn send(&mut self, m: &FeedMsg) -> bool {
        if m.seq <= self.pos {
            return true;
        }
        self.pos = m.seq;
        let seq = m.seq;
        let node = m.subject.strip_prefix("rwfeed.").filter(|n| names::valid_node(n));
        // A hub's `node` event (spec/CLUSTER.md, "Nodes"): as published, its id the sequence.
        let liveness = m.subject.strip_prefix("rwnode.").filter(|n| names::valid_node(n)).and_then(|_| {
            let v: serde_json::Value = serde_json::from_slice(&m.payload).ok()?;
            (v.get("type")? == "node").then(|| String::from_utf8(runwire::runs::feed::with_id(&m.payload, seq)).ok())?
        });
        let frame = match liveness.or_else(|| node.and_then(|n| hub_event(n, seq, &m.payload))) {
            Some(json) => self.filter.matches(json.as_bytes()).then(|| format!("id: {seq}\ndata: {json}\n\n")),
            None => {
                let ev = serde_json::json!({"type": "skipped", "id": seq, "size": m.payload.len(),
                    "error": "not_an_event", "message": format!("message {seq} of {} is not a feed event", m.subject)});
                Some(format!("event: skipped\nid: {seq}\ndata: {ev}\n\n"))
            }
        };
        if let Some(f) = frame {
            if !self.out.data(f.into_bytes()).await {
                return false;
            }
        }
        if !self.ready && self.pos >= self.last {
            return self.ready().await;
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, *v);
        }
        h
    }

    #[test]
    fn feed_events_get_the_sequence_the_hubs_run_id_and_the_node() {
        let ev = hub_event("n1", 42, br#"{"type":"run","runId":"ab--x.y","status":"done"}"#).unwrap();
        assert_eq!(ev, r#"{"id":42,"type":"run","runId":"n1.ab--x.y","status":"done","node":"n1"}"#);
        // An odd line is rebuilt: still the sequence, the hub's id and the node.
        let ev = hub_event("n1", 3, br#"{"id":7, "runId" : "r", "b":1}"#).unwrap();
        assert_eq!(ev, r#"{"id":3,"b":1,"runId":"n1.r","node":"n1"}"#);
        assert_eq!(hub_event("n1", 5, b"{}").unwrap(), r#"{"id":5,"node":"n1"}"#);
        assert!(hub_event("n1", 1, b"[1]").is_none() && hub_event("n1", 1, b"nope").is_none());
        let (f, since) = feed_query("run=n1.a%2Eb,n2.c&type=ended&since=9&token=x").unwrap();
        assert_eq!(
            (f.runs, f.types, since),
            (vec!["n1.a.b".to_string(), "n2.c".into()], vec!["ended".to_string()], Some(9))
        );
        assert!(feed_query("type=bogus").is_err() && feed_query("what=1").is_err() && feed_query("since=x").is_err());
    }

    #[test]
    fn a_nodes_pointer_with_a_path_for_a_slug_is_refused_and_writes_nothing() {
        let tmp = std::env::temp_dir().join(format!("rw-mirror-names-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&tmp);
        let home = tmp.join("home");
        let m = Mirror::new(&home);
        let good = Pointer {
            run_id: "ab--x".into(),
            slug: "x".into(),
            repo_root: "/r".into(),
            project: "r".into(),
            repo: "r".into(),
            branch: None,
            worktree: "/r".into(),
            runstate_dir: "/r/runstate".into(),
            created: "2026-01-01T00:00:00.000Z".into(),
        };
        for (slug, dir) in [("../../x", "/r/runstate"), ("a/b", "/r/runstate"), ("..", "/r"), ("x", "relative/dir")] {
            let p = Pointer { slug: slug.into(), runstate_dir: dir.into(), ..good.clone() };
            let e = m.pointer("n1", "ab--x", &p).unwrap_err().to_string();
            assert!(e.contains("refused"), "{slug} {dir}: {e}");
            assert!(check_node_pointer("n1", "ab--x", &p).is_err());
        }
        // Nothing was created: not the mirror, not a file beside or above it.
        assert!(!home.exists(), "{:?}", std::fs::read_dir(&tmp).map(|d| d.count()));
        assert!(!tmp.join("x.jsonl").exists() && !std::env::temp_dir().join("x.jsonl").exists());
        // A pointer naming another run than its key is refused too.
        assert!(check_node_pointer("n1", "ab--y", &good).is_err());
        // The good one is mirrored, inside the mirror only, and indexed.
        m.pointer("n1", "ab--x", &good).unwrap();
        assert!(m.dir("n1", "ab--x").join("x.jsonl").is_file());
        assert!(home.join("runs").join(format!("{}.json", names::hub_run_id("n1", "ab--x"))).is_file());
        std::fs::remove_dir_all(&tmp).unwrap();
    }

    /// A node's chat that was running and then asks: the hub's listing
    /// filtered by status finds it at once, as the unfiltered listing does
    /// (the mirror writes the journal's index row as any writer does;
    /// without it the row a listing made earlier, `running`, was trusted).
    #[test]
    fn the_mirror_keeps_its_index_rows_so_a_filter_sees_what_a_listing_shows() {
        use runwire::runs::list::{page, Query};
        let tmp = std::env::temp_dir().join(format!("rw-mirror-index-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&tmp);
        let m = Mirror::new(&tmp);
        let p = Pointer {
            run_id: "ab--x".into(),
            slug: "x".into(),
            repo_root: "/r".into(),
            project: "r".into(),
            repo: "r".into(),
            branch: None,
            worktree: "/r".into(),
            runstate_dir: "/r/runstate".into(),
            created: "2026-01-01T00:00:00.000Z".into(),
        };
        m.pointer("n1", "ab--x", &p).unwrap();
        let plan = br#"{"v":"plan/v1","tasks":[{"id":"t","adapter":"claude","prompt":"p"}]}"#;
        let n = plan.len().to_string();
        let sub = |f: &str| names::file_subject("n1", "ab--x", f);
        m.chunk(&sub("x.plan.json"), Some(&headers(&[("Rw-Offset", "0"), ("Rw-Whole", &n)])), plan).unwrap();
        let leased = b"{\"v\":\"runstate/v1\",\"ts\":\"2026-01-01T00:00:00.000Z\",\"actor\":\"runner\",\"task\":\"t\",\"state\":\"leased\"}\n";
        m.chunk(&sub("x.jsonl"), Some(&headers(&[("Rw-Offset", "0")])), leased).unwrap();
        let reg = Registry::at(&tmp);
        let total = |status: &str| page(&reg, &Query::parse(Some("10"), None, Some(status), None).unwrap()).total;
        // Past the index's 2 s: the listing trusts the rows it makes from the files.
        std::thread::sleep(Duration::from_millis(2200));
        assert_eq!(total("running"), 1);
        assert_eq!(total("running"), 1);
        let asks = b"{\"v\":\"runstate/v1\",\"ts\":\"2026-01-01T00:00:01.000Z\",\"actor\":\"runner\",\"task\":\"t\",\"input\":\"requested\",\"request\":\"q1\",\"kind\":\"question\"}\n";
        let off = leased.len().to_string();
        m.chunk(&sub("x.jsonl"), Some(&headers(&[("Rw-Offset", &off)])), asks).unwrap();
        assert_eq!(total("needs_input"), 1, "the filter sees the run asking");
        assert_eq!(total("running"), 0);
        // A restarted hub replays the bucket: the run's journal is kept.
        let journal = m.dir("n1", "ab--x").join("x.jsonl");
        let before = std::fs::read(&journal).unwrap();
        std::fs::remove_file(reg.path(&names::hub_run_id("n1", "ab--x"))).unwrap();
        Mirror::new(&tmp).pointer("n1", "ab--x", &p).unwrap();
        assert_eq!(std::fs::read(&journal).unwrap(), before);
        std::fs::remove_dir_all(&tmp).unwrap();
    }

    #[test]
    fn chunks_apply_once_in_order_and_resets_truncate() {
        let tmp = std::env::temp_dir().join(format!("rw-mirror-{}", std::process::id()));
        let m = Mirror::new(&tmp);
        let s = names::file_subject("n1", "ab--x.y", "x.y.t.log");
        let path = m.dir("n1", "ab--x.y").join("x.y.t.log");
        m.chunk(&s, Some(&headers(&[("Rw-Offset", "0"), ("Rw-Reset", "1")])), b"one\n").unwrap();
        m.chunk(&s, Some(&headers(&[("Rw-Offset", "4")])), b"two\n").unwrap();
        // A duplicate (replayed) chunk changes nothing.
        m.chunk(&s, Some(&headers(&[("Rw-Offset", "0"), ("Rw-Reset", "1")])), b"one\n").unwrap();
        m.chunk(&s, Some(&headers(&[("Rw-Offset", "4")])), b"two\n").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"one\ntwo\n");
        // A gap is an error, and writes nothing.
        assert!(m.chunk(&s, Some(&headers(&[("Rw-Offset", "100")])), b"x").is_err());
        // A new generation (reset) replaces the file.
        m.chunk(&s, Some(&headers(&[("Rw-Offset", "0"), ("Rw-Reset", "1"), ("Rw-Mtime", "1000000000000")])), b"new")
            .unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"new");
        let mt = std::fs::metadata(&path).unwrap().modified().unwrap();
        assert_eq!(mt, SystemTime::UNIX_EPOCH + Duration::from_secs(1000));
        // A whole file appears only when complete.
        let plan = names::file_subject("n1", "ab--x.y", "x.y.plan.json");
        let ppath = m.dir("n1", "ab--x.y").join("x.y.plan.json");
        m.chunk(&plan, Some(&headers(&[("Rw-Offset", "0"), ("Rw-Whole", "6"), ("Rw-Reset", "1")])), b"abc").unwrap();
        assert!(!ppath.exists());
        m.chunk(&plan, Some(&headers(&[("Rw-Offset", "3"), ("Rw-Whole", "6")])), b"def").unwrap();
        assert_eq!(std::fs::read(&ppath).unwrap(), b"abcdef");
        // Subjects that are not paths are refused.
        assert!(m.chunk("rwfile.n1.run.=2E=2E", Some(&headers(&[("Rw-Offset", "0")])), b"x").is_err());
        std::fs::remove_dir_all(&tmp).unwrap();
    }
}
