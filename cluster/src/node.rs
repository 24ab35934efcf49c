//! The node: publishes a harness home to the cluster, from its files (the
//! source of truth), exactly once across restarts.
//!
//! A round runs as soon as inotify says a file changed (the registry, the
//! feed's log, a run's runstate directory: `runwire::util::watch`, the crate's one
//! watcher), for the runs whose files changed; a full round, over every
//! registered run, runs at start, after an inotify overflow and every
//! `--poll-ms` as a safety net (a runstate directory created after its
//! pointer, one that could not be watched). A round:
//! 1. publishes the runs' files (journal, plan, each task's log and its
//!    arrival-time sidecar) from the byte offset already published to their
//!    end, in chunks, to `rwfile.<node>.<run>.<file>`, message id
//!    `<node>/<run>/<file>/<inode>/<offset>`;
//! 2. extends the home's change feed (the node is a feed writer like
//!    `runs watch`: `runwire::runs::feed::Extender`) and publishes every
//!    event past the published position to `rwfeed.<node>`, message id
//!    `<node>/feed/<id>`;
//! 3. puts each run's pointer and latest feed event into the KV bucket
//!    `runwire-runs`, key `<node>.<run>`.
//!
//! A message counts as published once JetStream acknowledges it; only then
//! does the position move. The position is not kept locally: at start, and
//! the first time a file is seen, it is read back from the last message of
//! the subject (its offset and length, or its feed id), so a node killed
//! at any point resumes exactly where the cluster is, and a message
//! published twice (killed between the store and the acknowledgement) is
//! dropped by JetStream's duplicate window on its message id. A node that
//! cannot reach the cluster keeps its files (nothing here writes them but
//! the feed, as any reader does) and retries; when the cluster is back the
//! files are published from the position on.

use crate::names::{self, header};
use crate::wake::{Dirty, Wake, Wakes};
use anyhow::{anyhow, Context as _};
use async_nats::jetstream::{self, kv, stream::Stream};
use async_nats::HeaderMap;
use bytes::Bytes;
use runwire::runs::feed::{Cursor, Extender, Line, Scope};
use runwire::runs::registry::{Pointer, Registry};
use runwire::runs::safe;
use runwire::util::watch;
use serde_json::{json, Value};
use std::collections::{BTreeSet, HashMap};
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The node's settings.
pub struct Opts {
    pub node: String,
    pub home: PathBuf,
    /// How often every run is looked at even without an inotify event.
    pub poll: Duration,
    pub heartbeat: Duration,
}

/// How far one file is published.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Track {
    ino: u64,
    /// Bytes published (an append-only file), or the size published whole.
    off: u64,
    mtime: i64,
    /// The generation of its message ids: 0, or the time of the last
    /// republish a hub asked for (`Rw-Gen`).
    gen: u64,
}

/// What the node knows of one run.
#[derive(Default)]
struct RunState {
    /// The run's latest feed event.
    summary: Option<Value>,
    /// The KV value last written.
    written: Option<String>,
    /// Its tasks (from the journal and the plan), and the journal's
    /// `(inode, size)` they were read at.
    tasks: BTreeSet<String>,
    tasks_at: (u64, u64),
}

pub struct Node {
    o: Opts,
    js: jetstream::Context,
    files: Stream,
    feed: Stream,
    runs: kv::Store,
    reg: Registry,
    extender: Extender,
    /// Most payload bytes a chunk carries (under the server's max_payload,
    /// and a sixteenth of the files stream's byte limit: [`chunk_size`]).
    chunk: usize,
    /// The files stream's byte limit (0: none), and when it was read.
    max_bytes: u64,
    limits_at: Instant,
    tracks: HashMap<String, Track>,
    feed_pos: Option<u64>,
    state: HashMap<String, RunState>,
    /// Problems of local files, said once each.
    noted: BTreeSet<String>,
    /// inotify (`None`: none to be had; every round is a full one).
    wake: Option<Wake>,
    /// File chunks sent, their acknowledgements not yet awaited.
    pending: std::collections::VecDeque<(String, usize, async_nats::jetstream::context::PublishAckFuture)>,
    pending_bytes: usize,
    /// Files hubs asked to have published again, whole: `(run, None)` for
    /// all of a run's files (`rwsync.<node>`).
    republish: BTreeSet<(String, Option<String>)>,
    /// What inotify said (the node's watcher's), and what it said while a
    /// round waited for acknowledgements: the next round's.
    wakes: Wakes,
    deferred: Dirty,
    live: Live,
}

/// The live tail (spec/CLUSTER.md, "Live tail"): what is appended to a
/// task's log and its arrival times, sent on core NATS as it is read, while
/// the stream's copy waits for its replicas. A burst's lines reach a hub's
/// viewers without waiting for a round's acknowledgement and the replicas'
/// commit; the stream stays the record (a hub applies a live chunk only
/// where it continues what the stream gave it).
struct Live {
    client: async_nats::Client,
    /// By file subject.
    files: HashMap<String, LiveFile>,
    /// By run.
    runs: HashMap<String, LiveRun>,
}

struct LiveRun {
    /// Its runstate directory (opened once a look).
    dir: PathBuf,
    /// Its file subjects, in the order they are sent: a task's arrival
    /// times before its log, as in the stream.
    order: Vec<String>,
}

struct LiveFile {
    subject: String,
    name: String,
    ino: u64,
    gen: u64,
    /// Bytes sent, live or in the stream.
    pos: u64,
}

/// More than this appended since the last look is a backlog, not a live
/// line: the stream carries it alone (a bulk write is not sent twice).
const LIVE_MAX: u64 = 256 * 1024;

/// The least time between two wakes of the node, and so between two
/// sendings of the live tail: the node's watcher reads inotify at most once
/// a `LIVE_GAP` ([`runwire::util::watch::Hub::paced`]). A line after a
/// pause goes at once; a burst's lines go at most once a millisecond, each
/// file's in one message, not one message per write: measured
/// (docs/PERFORMANCE.md, session 12), the servers' work per message, not
/// the bytes, is what kept a burst's lines from a hub's viewers. Paced at
/// the watcher, a burst also costs the node one wake a millisecond instead
/// of one per line (session 13: its share of a core during a burst fell
/// from 24-30 % to under 10 %). A tokio timer cannot pace it: its sleeps end on a
/// millisecond tick, so a wait of 0.3 ms took 1 to 2 (sendings came about
/// 2.5 ms apart).
const LIVE_GAP: Duration = Duration::from_millis(1);

/// While only what the live tail carries changes (task logs and arrival
/// times, sent live), a round waits for a pause in the writes of this
/// long, and [`DEFER_MAX`] at most: a burst goes into the stream in a few
/// large chunks instead of one per acknowledgement. Each chunk costs the
/// three servers a replicated write whatever its size, and that work, on
/// the machine's cores, is what delayed a burst's lines on their way to a
/// hub's viewers (docs/PERFORMANCE.md, session 12). Anything else (a
/// journal record, a plan, a pointer, the feed, a hub's request, a backlog
/// the live tail leaves to the stream, the full round) is not put off.
const QUIET: Duration = Duration::from_millis(5);
const DEFER_MAX: Duration = Duration::from_millis(250);

fn note(noted: &mut BTreeSet<String>, msg: String) {
    if noted.insert(msg.clone()) {
        crate::report(msg);
    }
}

fn hdr<T: std::str::FromStr>(h: Option<&HeaderMap>, name: &str) -> Option<T> {
    h?.get(name)?.as_str().parse().ok()
}

/// Binds the node to the cluster's streams and buckets (made by `setup`).
pub async fn bind(js: &jetstream::Context) -> anyhow::Result<(Stream, Stream, kv::Store, kv::Store)> {
    let hint = "(an admin creates them: runwire-cluster setup)";
    let files =
        js.get_stream(names::FILES_STREAM).await.map_err(|e| anyhow!("stream {}: {e} {hint}", names::FILES_STREAM))?;
    let feed =
        js.get_stream(names::FEED_STREAM).await.map_err(|e| anyhow!("stream {}: {e} {hint}", names::FEED_STREAM))?;
    let runs =
        js.get_key_value(names::RUNS_BUCKET).await.map_err(|e| anyhow!("bucket {}: {e} {hint}", names::RUNS_BUCKET))?;
    let nodes = js
        .get_key_value(names::NODES_BUCKET)
        .await
        .map_err(|e| anyhow!("bucket {}: {e} {hint}", names::NODES_BUCKET))?;
    Ok((files, feed, runs, nodes))
}

/// Runs the node until the process is stopped.
pub async fn run(client: async_nats::Client, o: Opts) -> anyhow::Result<()> {
    let js = jetstream::new(client.clone());
    let (files, feed, runs, nodes) = retry("bind", || bind(&js)).await;
    let max_bytes = stream_max_bytes(&files);
    let chunk = chunk_size(&client, max_bytes);
    // The name is a lease, taken before anything is published under it.
    let me = crate::liveness::Me::new(&o.node, &o.home, o.heartbeat)?;
    let rev = loop {
        match crate::liveness::take(&nodes, &me).await {
            Ok(rev) => break rev,
            Err(e) if e.is::<crate::liveness::Refused>() => return Err(e),
            Err(e) => {
                crate::report(format!("cluster: lease: {e:#} (retrying)"));
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }
    };
    // The home says which node it is while this process holds the name:
    // a supervisor beside it names the node in its approval links.
    crate::liveness::say_home_node(&o.home, &o.node);
    tokio::spawn(async move {
        if let Err(e) = crate::liveness::heartbeat(nodes, me, rev).await {
            // Another machine has the name now: nothing more is published under it.
            crate::report(format!("{e:#}"));
            std::process::exit(runwire::util::cli::Exit::Usage as i32);
        }
    });
    let mut asks = sync_requests(&client, &o.node).await;
    // Watching starts before the first round reads anything, so no change falls between.
    let (wake, wakes) = match Wake::start(&o.home, LIVE_GAP) {
        Ok((w, wakes)) => (Some(w), wakes),
        Err(e) => {
            crate::report(format!("cluster: inotify: {e} (looking at the files every {:?} instead)", o.poll));
            (None, Wakes::none())
        }
    };
    let live = Live { client: client.clone(), files: HashMap::new(), runs: HashMap::new() };
    let mut n = Node {
        wake,
        reg: Registry::at(&o.home),
        extender: Extender::new(&o.home),
        o,
        js,
        files,
        feed,
        runs,
        chunk,
        max_bytes,
        limits_at: Instant::now(),
        tracks: HashMap::new(),
        feed_pos: None,
        state: HashMap::new(),
        noted: BTreeSet::new(),
        republish: BTreeSet::new(),
        pending: std::collections::VecDeque::new(),
        pending_bytes: 0,
        wakes,
        deferred: Dirty::default(),
        live,
    };
    let mut failing: Option<String> = None;
    let mut full_at = Instant::now();
    loop {
        // What came while the last round waited for its acknowledgements.
        let mut d = std::mem::take(&mut n.deferred);
        if Instant::now() >= full_at || n.wake.is_none() {
            d.all = true;
        } else if !d.all && d.runs.is_empty() {
            tokio::select! {
                t = tokio::time::timeout_at(full_at.into(), n.wakes.recv()) => match t {
                    Ok(Some(t)) => n.absorb(t, &mut d),
                    // No watcher, or the safety net is due.
                    Ok(None) | Err(_) => d.all = true,
                },
                Some(ask) = asks.recv() => n.ask(ask, &mut d),
            }
        }
        // Whatever else came meanwhile, in the same round.
        while let Some(t) = n.wakes.try_recv() {
            n.absorb(t, &mut d);
        }
        while let Ok(ask) = asks.try_recv() {
            n.ask(ask, &mut d);
        }
        n.send_live(&mut d).await;
        n.gather(&mut asks, &mut d).await;
        // The full look due meanwhile is this round, not another after it.
        if Instant::now() >= full_at {
            d.all = true;
        }
        if d.all {
            full_at = Instant::now() + n.o.poll;
            // An admin may change the stream's limits (setup again) meanwhile.
            if n.limits_at.elapsed() >= LIMITS_EVERY {
                n.read_limits().await;
            }
        }
        match n.round(&d).await {
            Ok(()) => {
                if failing.take().is_some() {
                    crate::report("cluster: publishing again (caught up from the files)");
                }
            }
            Err(e) => {
                let m = format!("{e:#}");
                if failing.as_deref() != Some(m.as_str()) {
                    crate::report(format!("cluster: {m} (retrying; the local files keep everything)"));
                }
                failing = Some(m);
                // Positions are re-read from the cluster after a failure,
                // and every run looked at again.
                n.tracks.clear();
                n.feed_pos = None;
                full_at = Instant::now();
                tokio::time::sleep(Duration::from_secs(1)).await;
                n.read_limits().await;
            }
        }
        if n.wake.is_none() {
            tokio::time::sleep(n.o.poll).await;
        }
    }
}

/// Most payload bytes a chunk carries: the server's `max_payload` less 8 KiB
/// for headers, at most 1 MiB, and at most a [`STREAM_SHARE`]th of the
/// files stream's byte limit (`max_bytes`, 0: none), at least 1 KiB. Every
/// chunk costs a round trip to the stream's leader and its replicas (the
/// position moves only on an acknowledgement), so the larger the chunks,
/// the faster a backlog is published; but a message larger than the
/// stream's byte limit empties the stream (discard old: every other
/// message goes to make room, and then the message itself).
pub fn chunk_size(client: &async_nats::Client, max_bytes: u64) -> usize {
    let payload = client.server_info().max_payload.saturating_sub(8 * 1024).clamp(4 * 1024, 1 << 20);
    match max_bytes {
        0 => payload,
        b => payload.min(usize::try_from(b / STREAM_SHARE).unwrap_or(usize::MAX).max(1024)),
    }
}

/// A chunk is at most this fraction of the files stream's byte limit
/// (`setup` refuses a limit below [`crate::setup::MIN_FILES_BYTES`], which
/// keeps a chunk at 4 KiB or more).
pub const STREAM_SHARE: u64 = 16;

/// How often the node reads the files stream's limits again.
const LIMITS_EVERY: Duration = Duration::from_secs(30);

/// The byte limit of a stream as its info says (0: none).
fn stream_max_bytes(s: &Stream) -> u64 {
    u64::try_from(s.cached_info().config.max_bytes).unwrap_or(0)
}

/// Whether a file of `size` bytes can be published whole into a stream
/// that keeps `max_bytes` (0: no limit): at most three quarters of it, so
/// that its first chunk is still there when its last is stored (the rest,
/// and the chunks' subjects and headers, fit in the last quarter) and a hub
/// reading the stream gets it all.
pub fn fits_whole(size: u64, max_bytes: u64) -> bool {
    max_bytes == 0 || size <= max_bytes / 4 * 3
}

/// The run of a feed's `removed` event (a valid id), if it is one.
fn removed_run(ev: Option<&Value>) -> Option<String> {
    let ev = ev?;
    if ev.get("type").and_then(Value::as_str) != Some("removed") {
        return None;
    }
    ev.get("runId").and_then(Value::as_str).filter(|r| runwire::runs::valid_id(r)).map(str::to_string)
}

/// A hub's request to publish files again (`rwsync.<node>`), checked:
/// `(run, file)`, `None` for every file of the run.
pub type Ask = (String, Option<String>);

/// The hubs' requests to publish files again, as they come: a hub that
/// finds a gap in a file (its first chunks expired) asks for it whole.
/// Core NATS, no reply: a request lost while the node is away is asked
/// again by the hub.
async fn sync_requests(client: &async_nats::Client, node: &str) -> tokio::sync::mpsc::UnboundedReceiver<Ask> {
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let subject = names::sync_subject(node);
    let sub =
        retry("subscribe", || async { client.subscribe(subject.clone()).await.map_err(|e| anyhow!("{subject}: {e}")) })
            .await;
    tokio::spawn(async move {
        let mut sub = sub;
        while let Some(m) = futures_util::StreamExt::next(&mut sub).await {
            if let Some(ask) = parse_ask(&m.payload) {
                if tx.send(ask).is_err() {
                    return;
                }
            }
        }
    });
    rx
}

/// `{"run": RUN}` or `{"run": RUN, "file": FILE}`: `None` for anything else
/// (ids and file names checked, as the hub checks what it mirrors).
pub fn parse_ask(payload: &[u8]) -> Option<Ask> {
    let v: Value = serde_json::from_slice(payload).ok()?;
    let run = v.get("run")?.as_str()?;
    if !runwire::runs::valid_id(run) {
        return None;
    }
    let file = match v.get("file") {
        None | Some(Value::Null) => None,
        Some(f) => Some(f.as_str().filter(|f| names::valid_file(f))?.to_string()),
    };
    Some((run.to_string(), file))
}

pub use crate::util::{now_ms, retry};

impl Node {
    /// A hub's request: the run looked at this round, the file (or all of
    /// the run's) published again whole.
    fn ask(&mut self, ask: Ask, d: &mut Dirty) {
        if self.reg.path(&ask.0).exists() {
            d.urgent = true;
            d.runs.insert(ask.0.clone());
            self.republish.insert(ask);
        }
    }

    /// The files stream's byte limit read again (kept as it was when the
    /// cluster does not answer), and the chunks' size with it.
    async fn read_limits(&mut self) {
        self.limits_at = Instant::now();
        if let Ok(Ok(i)) = tokio::time::timeout(Duration::from_secs(2), self.files.info()).await {
            let b = u64::try_from(i.config.max_bytes).unwrap_or(0);
            if b != self.max_bytes {
                self.max_bytes = b;
                self.chunk = chunk_size(&self.live.client, b);
            }
        }
    }

    fn absorb(&mut self, t: watch::Taken, d: &mut Dirty) {
        if let Some(w) = &mut self.wake {
            w.absorb(t, d);
        }
    }

    /// The round `d` put off while only what the live tail carries changes
    /// ([`QUIET`], [`DEFER_MAX`]): what inotify says meanwhile goes out
    /// live at once and joins the round.
    async fn gather(&mut self, asks: &mut tokio::sync::mpsc::UnboundedReceiver<Ask>, d: &mut Dirty) {
        let until = Instant::now() + DEFER_MAX;
        // The time is checked here, not left to the timeout: it returns what
        // is ready even past its deadline, and a burst always has a wake ready.
        while !(d.all || d.urgent) && Instant::now() < until {
            let pause = (Instant::now() + QUIET).min(until);
            let mut more = Dirty::default();
            tokio::select! {
                t = tokio::time::timeout_at(pause.into(), self.wakes.recv()) => match t {
                    Ok(Some(t)) => self.absorb(t, &mut more),
                    // A pause (or no watcher: the round finds out).
                    Ok(None) | Err(_) => return,
                },
                Some(ask) = asks.recv() => {
                    // A hub waits for it.
                    self.ask(ask, d);
                    return;
                }
            }
            self.send_live(&mut more).await;
            d.merge(more);
        }
    }

    /// One round: the files first (what a client at a hub waits for), then the feed.
    async fn round(&mut self, d: &Dirty) -> anyhow::Result<()> {
        let ids: Vec<String> = if d.all { self.reg.ids() } else { d.runs.iter().cloned().collect() };
        for id in &ids {
            self.sync_run(id).await?;
        }
        // Runs whose pointer is gone (runs rm, prune, reap): out of the bucket.
        // Found before the feed is read: its `removed` event forgets the run,
        // and a run forgotten first would never be taken out.
        let gone: Vec<String> = if d.all {
            self.state.keys().filter(|k| ids.binary_search(k).is_err()).cloned().collect()
        } else {
            ids.iter().filter(|id| self.state.contains_key(*id) && !self.reg.path(id).exists()).cloned().collect()
        };
        let scope = if d.all { Scope::All } else { Scope::Runs(&d.runs) };
        self.sync_feed(scope).await?;
        for id in gone {
            // Taken out already, as its feed's `removed` event went out.
            if self.state.contains_key(&id) {
                self.take_out(&id).await?;
            }
        }
        Ok(())
    }

    /// A run whose pointer is gone: its files tombstoned, then its key out
    /// of the bucket, then forgotten.
    async fn take_out(&mut self, id: &str) -> anyhow::Result<()> {
        self.remove_files(id).await?;
        self.runs.delete(names::run_key(&self.o.node, id)).await.map_err(|e| anyhow!("bucket: delete {id}: {e}"))?;
        self.state.remove(id);
        if let Some(r) = self.live.runs.remove(id) {
            for s in r.order {
                self.live.files.remove(&s);
            }
        }
        if let Some(w) = &mut self.wake {
            w.forget(id);
        }
        Ok(())
    }

    /// A run removed here (`runs rm`, prune): each of its files in the
    /// stream replaced by one empty tombstone (`Nats-Rollup: sub`, on the
    /// node's own subjects: nodes may not purge), so a hub started later
    /// does not rebuild it.
    async fn remove_files(&mut self, run: &str) -> anyhow::Result<()> {
        use futures_util::TryStreamExt;
        let prefix = format!("rwfile.{}.{}.", self.o.node, names::token(run));
        let mut subjects = Vec::new();
        let mut info =
            self.files.info_with_subjects(format!("{prefix}*")).await.map_err(|e| anyhow!("{prefix}*: {e}"))?;
        while let Some((subject, _)) = info.try_next().await.map_err(|e| anyhow!("{prefix}*: {e}"))? {
            subjects.push(subject);
        }
        subjects.sort();
        for subject in subjects {
            let Some((_, _, file)) = names::parse_file_subject(&subject) else { continue };
            let mut h = HeaderMap::new();
            h.insert(async_nats::header::NATS_ROLLUP, "sub");
            h.insert(header::REMOVED, "1");
            let id = format!("{}/{run}/{file}/removed/{}", self.o.node, now_ms());
            self.publish(subject.clone(), id, h, Bytes::new()).await?;
        }
        self.tracks.retain(|s, _| !s.starts_with(&prefix));
        Ok(())
    }

    async fn publish(&self, subject: String, msg_id: String, mut h: HeaderMap, payload: Bytes) -> anyhow::Result<()> {
        h.insert(async_nats::header::NATS_MESSAGE_ID, msg_id.as_str());
        let ack =
            self.js.publish_with_headers(subject.clone(), h, payload).await.map_err(|e| anyhow!("{subject}: {e}"))?;
        ack.await.map_err(|e| anyhow!("{subject}: {e}"))?;
        Ok(())
    }

    /// A file chunk sent without waiting for its acknowledgement: a run's
    /// chunks (its arrival times, then its log, ...) go out back to back,
    /// and [`Node::flush`] waits for them all, before the feed events that
    /// name them. Lines that arrive in a burst thus cost one round trip to
    /// the replicas per round, not one per file or chunk. A chunk that
    /// fails fails the round: the positions are read back from the
    /// cluster, and what was stored is dropped as a duplicate (its id).
    async fn send(&mut self, subject: String, msg_id: String, mut h: HeaderMap, payload: Bytes) -> anyhow::Result<()> {
        h.insert(async_nats::header::NATS_MESSAGE_ID, msg_id.as_str());
        let n = payload.len();
        let ack =
            self.js.publish_with_headers(subject.clone(), h, payload).await.map_err(|e| anyhow!("{subject}: {e}"))?;
        self.pending.push_back((subject, n, ack));
        self.pending_bytes += n;
        // At most this much unacknowledged, as a window: the oldest
        // acknowledgement is awaited, not all of them, so a backlog keeps
        // the replicas busy instead of draining them every few chunks.
        while self.pending.len() > 64 || self.pending_bytes > 8 << 20 {
            self.settle_oldest().await?;
        }
        Ok(())
    }

    /// The oldest acknowledgement awaited. On a failure the round fails,
    /// and the rest are not waited for.
    async fn settle_oldest(&mut self) -> anyhow::Result<()> {
        if let Some((subject, n, ack)) = self.pending.pop_front() {
            self.pending_bytes -= n;
            let ack = std::future::IntoFuture::into_future(ack);
            tokio::pin!(ack);
            // Lines written meanwhile go out live at once; the stream has
            // them next round.
            let r = loop {
                tokio::select! {
                    // The acknowledgement first when both are ready: a burst
                    // always has a wake ready, and the round must go on.
                    biased;
                    r = &mut ack => break r,
                    Some(t) = self.wakes.recv(), if self.wake.is_some() => {
                        let mut d = Dirty::default();
                        self.absorb(t, &mut d);
                        self.send_live(&mut d).await;
                        self.deferred.merge(d);
                    }
                }
            };
            if let Err(e) = r {
                self.pending.clear();
                self.pending_bytes = 0;
                return Err(anyhow!("{subject}: {e}"));
            }
        }
        Ok(())
    }

    /// Waits for every chunk sent to be acknowledged.
    async fn flush(&mut self) -> anyhow::Result<()> {
        while !self.pending.is_empty() {
            self.settle_oldest().await?;
        }
        Ok(())
    }

    /// The feed: extended from the journals, then published past the position.
    async fn sync_feed(&mut self, scope: Scope<'_>) -> anyhow::Result<()> {
        match self.extender.extend(scope) {
            Ok(_) => {}
            Err(e) => note(&mut self.noted, format!("feed: {e}")),
        }
        for r in self.extender.take_reports() {
            note(&mut self.noted, format!("feed: {r}"));
        }
        let subject = names::feed_subject(&self.o.node);
        let pos = match self.feed_pos {
            Some(p) => p,
            None => match self.feed.get_last_raw_message_by_subject(&subject).await {
                Ok(m) => hdr(Some(&m.headers), header::ID).unwrap_or(0),
                Err(e) if e.kind() == jetstream::stream::LastRawMessageErrorKind::NoMessageFound => 0,
                Err(e) => return Err(anyhow!("{subject}: last message: {e}")),
            },
        };
        self.feed_pos = Some(pos);
        let mut cursor = Cursor::new(self.extender.paths(), pos);
        loop {
            let mut batch: Vec<(u64, Vec<u8>)> = Vec::new();
            let mut skipped_to = None;
            let more = cursor
                .read_some(|id, line| match line {
                    Line::Event(b) => batch.push((id, b.to_vec())),
                    Line::TooLong(_) => skipped_to = Some(id),
                })
                .map_err(|e| anyhow!("feed: {e}"));
            let more = match more {
                Ok(m) => m,
                Err(e) => {
                    note(&mut self.noted, format!("{e:#}"));
                    return Ok(());
                }
            };
            for (id, bytes) in batch {
                let mut h = HeaderMap::new();
                h.insert(header::ID, id.to_string().as_str());
                let ev: Option<Value> = serde_json::from_slice(&bytes).ok();
                // A run removed (`runs rm`, prune), its pointer gone: taken
                // out of the streams and the bucket before its `removed`
                // event is published, so a node that was down when it went
                // (or was killed while taking it out) finds the event past
                // its position when it starts and takes the run out then.
                if let Some(run) = removed_run(ev.as_ref()).filter(|r| !self.reg.path(r).exists()) {
                    self.take_out(&run).await?;
                }
                self.publish(subject.clone(), names::feed_id(&self.o.node, id), h, Bytes::from(bytes)).await?;
                self.feed_pos = Some(id);
                if let Some(ev) = ev {
                    self.event(ev).await?;
                }
            }
            if let Some(id) = skipped_to {
                self.feed_pos = Some(self.feed_pos.unwrap_or(0).max(id));
            }
            if !more {
                return Ok(());
            }
        }
    }

    /// A feed event: the run's summary in the bucket follows it.
    async fn event(&mut self, ev: Value) -> anyhow::Result<()> {
        let Some(run) = ev.get("runId").and_then(Value::as_str).map(str::to_string) else { return Ok(()) };
        if !runwire::runs::valid_id(&run) {
            return Ok(());
        }
        if ev.get("type").and_then(Value::as_str) == Some("removed") {
            self.state.remove(&run);
            return Ok(());
        }
        self.state.entry(run.clone()).or_default().summary = Some(ev);
        if let Ok(p) = self.reg.read(&run) {
            self.put_run(&run, &p).await?;
        }
        Ok(())
    }

    async fn put_run(&mut self, run: &str, p: &Pointer) -> anyhow::Result<()> {
        let st = self.state.entry(run.to_string()).or_default();
        let v = json!({"node": self.o.node, "runId": run, "pointer": p, "summary": st.summary}).to_string();
        if st.written.as_deref() == Some(v.as_str()) {
            return Ok(());
        }
        let key = names::run_key(&self.o.node, run);
        self.runs
            .put(&key, Bytes::from(v.clone()))
            .await
            .map_err(|e| anyhow!("bucket {}: {key}: {e}", names::RUNS_BUCKET))?;
        if let Some(st) = self.state.get_mut(run) {
            st.written = Some(v);
        }
        Ok(())
    }

    async fn sync_run(&mut self, run: &str) -> anyhow::Result<()> {
        let r = self.sync_run_files(run).await;
        // Acknowledged before anything names them (the feed, the next run).
        let f = self.flush().await;
        r?;
        f?;
        // What hubs asked of this run is done.
        self.republish.retain(|(r, _)| r != run);
        Ok(())
    }

    async fn sync_run_files(&mut self, run: &str) -> anyhow::Result<()> {
        let p = match self.reg.read(run) {
            Ok(p) => p,
            Err(e) if e.absent => return Ok(()),
            Err(e) => {
                note(&mut self.noted, format!("run {run}: {e}"));
                return Ok(());
            }
        };
        if let Some(w) = &mut self.wake {
            w.track(run, &p);
        }
        self.put_run(run, &p).await?;
        let dir = match safe::open_dir(Path::new(&p.runstate_dir)) {
            Ok(d) => d,
            Err(nix::errno::Errno::ENOENT) => return Ok(()),
            Err(e) => {
                note(&mut self.noted, format!("run {run}: {}: {e}", p.runstate_dir));
                return Ok(());
            }
        };
        let files = runwire::runs::RunFiles::new(&p.runstate_dir, &p.slug);
        let journal = format!("{}.jsonl", p.slug);
        let plan = format!("{}.plan.json", p.slug);
        self.sync_file(run, dir.as_fd(), &journal, false, None).await?;
        self.sync_file(run, dir.as_fd(), &plan, true, None).await?;
        // The tasks, again when the journal changed.
        let jstat = stat(dir.as_fd(), &journal);
        let st = self.state.entry(run.to_string()).or_default();
        if jstat.is_some_and(|s| s != st.tasks_at) {
            let l = runwire::runs::view::load(p.clone());
            st.tasks.extend(l.journal.tasks.keys().cloned());
            if let Some(plan) = &l.plan {
                st.tasks.extend(plan.tasks.iter().map(|t| t.id.clone()));
            }
            st.tasks_at = jstat.unwrap_or_default();
        }
        let tasks: Vec<String> = st.tasks.iter().filter(|t| runwire::runs::valid_id(t)).cloned().collect();
        for task in tasks {
            let log = files.log(&task).file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
            // The log's size first, then its sidecar whole: every line
            // published has its arrival time published before it.
            let limit = stat(dir.as_fd(), &log).map(|s| s.1);
            let at = format!("{log}.at");
            self.sync_file(run, dir.as_fd(), &at, false, None).await?;
            self.live_from_stream(run, &p.runstate_dir, &at);
            if let Some(limit) = limit {
                self.sync_file(run, dir.as_fd(), &log, false, Some(limit)).await?;
                self.live_from_stream(run, &p.runstate_dir, &log);
            }
            // The gate's and the reviewer's output (the reason of a failed
            // task names them), when the supervisor wrote them.
            for step in ["gate", "review"] {
                self.sync_file(run, dir.as_fd(), &format!("{}.{task}.{step}.log", p.slug), false, None).await?;
            }
        }
        Ok(())
    }

    /// A task file the stream has up to its track: the live tail starts
    /// there (the first time, or for a new inode or generation).
    fn live_from_stream(&mut self, run: &str, dir: &str, name: &str) {
        let subject = names::file_subject(&self.o.node, run, name);
        let Some(t) = self.tracks.get(&subject).copied() else { return };
        if t.off == u64::MAX {
            return;
        }
        let l = self.live.files.entry(subject.clone()).or_insert_with(|| LiveFile {
            subject: names::live_subject(&self.o.node, run, name),
            name: name.to_string(),
            ino: t.ino,
            gen: t.gen,
            pos: t.off,
        });
        // Otherwise the live tail keeps its own position, even behind the
        // stream's: its chunks then follow each other byte for byte, and a
        // hub whose stream copy lags behind them still has each one's start.
        if (l.ino, l.gen) != (t.ino, t.gen) {
            (l.ino, l.gen, l.pos) = (t.ino, t.gen, t.off);
        }
        let r = self.live.runs.entry(run.to_string()).or_insert_with(|| LiveRun { dir: dir.into(), order: Vec::new() });
        r.dir = dir.into();
        if !r.order.contains(&subject) {
            r.order.push(subject);
            // Arrival times before their log, whichever appeared first.
            let files = &self.live.files;
            r.order.sort_by_key(|s| files.get(s).map(|l| send_order(&l.name)));
        }
    }

    /// What `d`'s runs' task files gained since they were last sent, on
    /// core NATS. Nothing waits for anyone: a chunk a hub does not get
    /// (none listening, a server lost) it has from the stream a moment later.
    /// When not all of it went (cut off, a backlog left to the stream, a
    /// file the live tail does not know yet), `d` is urgent: its round is
    /// not put off.
    async fn send_live(&mut self, d: &mut Dirty) {
        if !self.carry_live(&d.runs).await {
            d.urgent = true;
        }
    }

    /// [`Node::send_live`]'s sending: whether all of it went.
    async fn carry_live(&mut self, runs: &BTreeSet<String>) -> bool {
        if runs.is_empty() {
            return true;
        }
        // Cut off, nothing is sent: the client would keep it all in memory
        // meanwhile, and the stream brings it when the cluster is back.
        if self.live.client.connection_state() != async_nats::connection::State::Connected {
            return false;
        }
        let mut all = true;
        for run in runs {
            // A run the live tail does not know yet: its first round tells it.
            let Some(r) = self.live.runs.get(run) else {
                all = false;
                continue;
            };
            let Ok(dir) = safe::open_dir(&r.dir) else {
                all = false;
                continue;
            };
            let subjects = r.order.clone();
            // Each log's size first, then the arrival times to their end,
            // then the logs up to that size: every line sent has its
            // arrival time sent before it (as in the stream's rounds).
            let limits: HashMap<&String, u64> = subjects
                .iter()
                .filter_map(|s| {
                    let l = self.live.files.get(s).filter(|l| l.name.ends_with(".log"))?;
                    Some((s, stat(dir.as_fd(), &l.name)?.1))
                })
                .collect();
            for subject in &subjects {
                let Some(l) = self.live.files.get_mut(subject) else { continue };
                let Ok((file, st)) = safe::open_beneath(dir.as_fd(), Path::new(&l.name)) else { continue };
                let size = (st.st_size.max(0) as u64).min(limits.get(subject).copied().unwrap_or(u64::MAX));
                // Another file, or shorter: the stream's round tells the hub.
                if st.st_ino != l.ino || size < l.pos {
                    all = false;
                    continue;
                }
                if size == l.pos {
                    continue;
                }
                if size - l.pos > LIVE_MAX {
                    l.pos = size;
                    all = false;
                    continue;
                }
                let mtime = st.st_mtime * 1_000_000_000 + st.st_mtime_nsec;
                let mut buf = vec![0u8; (size - l.pos) as usize];
                let Ok(n) = read_full(&file, &mut buf, l.pos) else { continue };
                buf.truncate(n);
                for piece in buf.chunks(self.chunk.max(1)) {
                    let mut h = HeaderMap::new();
                    h.insert(header::OFFSET, l.pos.to_string().as_str());
                    h.insert(header::INO, l.ino.to_string().as_str());
                    h.insert(header::MTIME, mtime.to_string().as_str());
                    if l.gen > 0 {
                        h.insert(header::GEN, l.gen.to_string().as_str());
                    }
                    let payload = Bytes::copy_from_slice(piece);
                    if self.live.client.publish_with_headers(l.subject.clone(), h, payload).await.is_err() {
                        return false; // the connection is closing: the rounds say so
                    }
                    l.pos += piece.len() as u64;
                }
            }
        }
        all
    }

    /// Where the cluster has a file up to: the last message of its subject.
    async fn resume(&self, subject: &str) -> anyhow::Result<Track> {
        match self.files.get_last_raw_message_by_subject(subject).await {
            Ok(m) => {
                let h = Some(&m.headers);
                let off: u64 = hdr(h, header::OFFSET).unwrap_or(0) + m.payload.len() as u64;
                let whole: Option<u64> = hdr(h, header::WHOLE);
                Ok(Track {
                    ino: hdr(h, header::INO).unwrap_or(0),
                    // A file published whole but not to its end is published again.
                    off: match whole {
                        Some(w) if w != off => u64::MAX,
                        _ => off,
                    },
                    mtime: hdr(h, header::MTIME).unwrap_or(0),
                    gen: hdr(h, header::GEN).unwrap_or(0),
                })
            }
            Err(e) if e.kind() == jetstream::stream::LastRawMessageErrorKind::NoMessageFound => Ok(Track::default()),
            Err(e) => Err(anyhow!("{subject}: last message: {e}")),
        }
    }

    /// A file too big to be published whole into the stream
    /// ([`fits_whole`]): instead of it, one empty message on its subject,
    /// `Rw-Unfit: <size>`, so the hubs that lack it say so and stop asking
    /// for it (and the node's stderr says it once). It carries the file's
    /// position (`Rw-Offset`, `Rw-Ino`, `Rw-Mtime`, `Rw-Gen`), read back as
    /// any last message is: an append-only file goes on from where it was
    /// published to; a whole file, or one whose republish was cut short,
    /// from its end. Its id names the file's size and mtime: the
    /// same notice asked for again within the duplicate window is dropped.
    /// The track that follows.
    async fn unfit(
        &mut self,
        run: &str,
        name: &str,
        subject: &str,
        track: Track,
        (ino, mtime, size): (u64, i64, u64),
        whole: bool,
    ) -> anyhow::Result<Track> {
        note(
            &mut self.noted,
            format!(
                "run {run}: {name}: {size} bytes, more than three quarters of the files stream's byte limit \
                 ({} bytes): not published whole again (a hub that lacks its start goes without it; \
                 raise --files-max-bytes with runwire-cluster setup)",
                self.max_bytes
            ),
        );
        // An append-only file keeps its track (the round goes on with it as
        // with any: its appends, or from 0 when it was replaced).
        let keep = !whole && track.off != u64::MAX;
        let t = if keep { track } else { Track { ino, off: size, mtime, gen: track.gen } };
        let mut h = HeaderMap::new();
        h.insert(header::UNFIT, size.to_string().as_str());
        h.insert(header::OFFSET, t.off.to_string().as_str());
        h.insert(header::INO, t.ino.to_string().as_str());
        h.insert(header::MTIME, t.mtime.to_string().as_str());
        if t.gen > 0 {
            h.insert(header::GEN, t.gen.to_string().as_str());
        }
        let id = format!("{}/{run}/{name}/{ino}/unfit.{size}.{mtime}.{}", self.o.node, t.off);
        self.send(subject.to_string(), id, h, Bytes::new()).await?;
        Ok(t)
    }

    /// Publishes what the cluster lacks of one file: the bytes past the
    /// position (an append-only file, up to `limit`), or the whole file
    /// when it changed (`whole`: the plan, rewritten by rename).
    async fn sync_file(
        &mut self,
        run: &str,
        dir: BorrowedFd<'_>,
        name: &str,
        whole: bool,
        limit: Option<u64>,
    ) -> anyhow::Result<()> {
        let (file, st) = match safe::open_beneath(dir, Path::new(name)) {
            Ok(x) => x,
            Err(e) if e.absent => return Ok(()),
            Err(e) => {
                note(&mut self.noted, format!("run {run}: {e}"));
                return Ok(());
            }
        };
        let subject = names::file_subject(&self.o.node, run, name);
        let mut track = match self.tracks.get(&subject) {
            Some(t) => *t,
            None => self.resume(&subject).await?,
        };
        let ino = st.st_ino;
        let mtime = st.st_mtime * 1_000_000_000 + st.st_mtime_nsec;
        let size = (st.st_size.max(0) as u64).min(limit.unwrap_or(u64::MAX));
        // Asked for by a hub, or a republish that did not reach its end:
        // the file again, whole, in a new generation of ids.
        let mut again = self.republish.contains(&(run.to_string(), Some(name.to_string())))
            || self.republish.contains(&(run.to_string(), None))
            || (!whole && track.off == u64::MAX);
        let changed = !whole || track.ino != ino || track.off != size || track.mtime != mtime;
        if (again || (whole && changed)) && !fits_whole(size, self.max_bytes) {
            // Too big to go whole: said, in the stream (a hub says it and
            // stops asking), and the file goes on from where it is.
            track = self.unfit(run, name, &subject, track, (ino, mtime, size), whole).await?;
            self.tracks.insert(subject.clone(), track);
            if whole {
                return Ok(());
            }
            again = false;
        }
        if again {
            track.gen = now_ms().max(track.gen + 1);
        }
        let whole_now = whole || again;
        let (start, reset) = if again {
            (0, true)
        } else if whole {
            if track.ino == ino && track.off == size && track.mtime == mtime {
                self.tracks.insert(subject, track);
                return Ok(());
            }
            (0, true)
        } else if track.ino != ino || size < track.off {
            (0, true)
        } else {
            (track.off, false)
        };
        if start == size && !reset {
            self.tracks.insert(subject, track);
            return Ok(());
        }
        // No bigger than what there is to publish (a line, usually).
        let mut buf = vec![0u8; ((size - start) as usize).min(self.chunk)];
        let mut off = start;
        let mut first = true;
        while off < size || (first && reset) {
            let want = ((size - off) as usize).min(self.chunk);
            let n = read_full(&file, &mut buf[..want], off).with_context(|| format!("run {run}: {name}"))?;
            if n < want && !whole_now {
                // Shorter than it was a moment ago: published again from 0 next round.
                break;
            }
            let mut h = HeaderMap::new();
            h.insert(header::OFFSET, off.to_string().as_str());
            h.insert(header::INO, ino.to_string().as_str());
            h.insert(header::MTIME, mtime.to_string().as_str());
            if first && reset {
                h.insert(header::RESET, "1");
            }
            if whole_now {
                h.insert(header::WHOLE, size.to_string().as_str());
            }
            // An append-only file (not the plan, rewritten whole: always applied).
            if again && !whole {
                h.insert(header::REPUBLISH, "1");
            }
            if track.gen > 0 {
                h.insert(header::GEN, track.gen.to_string().as_str());
            }
            // A file published whole again keeps its inode: its generation is its mtime.
            let mut gen = if whole { format!("{ino}.{mtime}") } else { ino.to_string() };
            // Published again at a hub's request (and what follows): ids of their own.
            if track.gen > 0 {
                gen.push_str(&format!(".g{}", track.gen));
            }
            let mut id = format!("{}/{run}/{name}/{gen}/{off}", self.o.node);
            // The first chunk of a generation of an appended file is told
            // apart by its mtime: an empty file published, then its first
            // bytes, or a file truncated in place, would otherwise repeat an
            // id the duplicate window drops.
            if first && reset && !whole_now {
                id.push_str(&format!("/reset.{mtime}"));
            }
            self.send(subject.clone(), id, h, Bytes::copy_from_slice(&buf[..n])).await?;
            off += n as u64;
            first = false;
            track = Track { ino, off, mtime, gen: track.gen };
            self.tracks.insert(subject.clone(), track);
            if n == 0 {
                break;
            }
        }
        Ok(())
    }
}

/// Where a task file goes in a run's live sends: by its log's name, the
/// arrival times (`<log>.at`) before the log.
fn send_order(name: &str) -> (&str, bool) {
    match name.strip_suffix(".at") {
        Some(log) => (log, false),
        None => (name, true),
    }
}

/// `(inode, size)` of a file in the run's directory.
fn stat(dir: BorrowedFd, name: &str) -> Option<(u64, u64)> {
    safe::open_beneath(dir, Path::new(name)).ok().map(|(_, st)| (st.st_ino, st.st_size.max(0) as u64))
}

fn read_full(f: &std::fs::File, buf: &mut [u8], at: u64) -> std::io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match f.read_at(&mut buf[n..], at + n as u64) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}
