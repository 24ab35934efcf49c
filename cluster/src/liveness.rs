//! Node names as leases, and node liveness (spec/CLUSTER.md, "Nodes").
//!
//! A node's heartbeat is its name's lease: the key `<node>` of the bucket
//! `runwire-nodes`. The node takes it with a KV create (it is free) or an
//! update at the revision it read (it is this machine's own: the same
//! holder id, kept in `$HARNESS_HOME/cluster/node-holder`), and renews it on
//! every beat with an update at the revision of its last beat, so two
//! machines can never both renew one name. nats-server 2.9 has no per-key
//! TTL: the bucket's `max_age` ([`LEASE`]) removes a beat that was not
//! renewed, which frees the name of a dead node; `runwire-cluster nodes
//! --remove NAME` (an admin) frees it at once.
//!
//! A hub watches the bucket: a node whose last beat is older than
//! [`MISSED_BEATS`] of its intervals is `lost` (since its last beat), and
//! `up` again at its next beat. The states are written to
//! `$HUB_HOME/cluster/nodes.json` (read by the hub's `GET /runs` and by `runs`) and each
//! change is published to `rwnode.<node>` of `RUNWIRE_FEED` as a `node`
//! event, with a message id made of the node, the state and the revision
//! of the beat it was judged on, so every hub that sees it publishes the
//! same message and the stream keeps it once. A hub that starts says what
//! changed while it was down: its judge starts from what its home's hub
//! said last ([`Judge::after`], [`Judge::settle`]).

use crate::names;
use anyhow::anyhow;
use async_nats::jetstream::{self, kv};
use bytes::Bytes;
use futures_util::StreamExt;
use runwire::runs::nodes::NodeStates;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The `max_age` of the nodes bucket: a name whose holder has not beaten
/// for this long is free again.
pub const LEASE: Duration = Duration::from_secs(30);
/// A node is lost after this many of its heartbeat intervals without one.
pub const MISSED_BEATS: u64 = 3;
/// A node's heartbeat interval unless it says another (`--heartbeat-ms`).
pub const DEFAULT_HEARTBEAT_MS: u64 = 2000;
/// The longest heartbeat interval: a third of the lease, so two missed beats never lose it.
pub const MAX_HEARTBEAT_MS: u64 = 10_000;

/// Another machine holds the name: a usage error (exit 2), not a cluster one.
#[derive(Debug)]
pub struct Refused(pub String);

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Refused {}

/// This machine's claim on a name.
pub struct Me {
    pub node: String,
    pub holder: String,
    pub home: PathBuf,
    pub started: u64,
    pub interval: Duration,
}

impl Me {
    /// The claim of the node publishing `home`, its holder id read from
    /// (or, the first time, written to) `<home>/cluster/node-holder`.
    pub fn new(node: &str, home: &Path, interval: Duration) -> anyhow::Result<Me> {
        let holder = holder_id(home).map_err(|e| anyhow!("{}: {e}", holder_path(home).display()))?;
        Ok(Me { node: node.into(), holder, home: home.into(), started: crate::util::now_ms(), interval })
    }

    /// A beat: who holds the name, and when it said so.
    pub fn value(&self) -> Bytes {
        let v = json!({"node": self.node, "ts": crate::util::now_ms(), "started": self.started,
            "pid": std::process::id(), "intervalMs": self.interval.as_millis() as u64,
            "version": env!("CARGO_PKG_VERSION"), "host": hostname(), "home": self.home.display().to_string(),
            "holder": self.holder});
        Bytes::from(v.to_string())
    }
}

fn holder_path(home: &Path) -> PathBuf {
    home.join("cluster").join("node-holder")
}

/// The id of this harness home as a holder of node names: random, made once.
fn holder_id(home: &Path) -> std::io::Result<String> {
    let path = holder_path(home);
    if let Ok(s) = std::fs::read_to_string(&path) {
        let s = s.trim();
        if !s.is_empty() {
            return Ok(s.to_string());
        }
    }
    std::fs::create_dir_all(path.parent().unwrap_or(home))?;
    let id = crate::util::new_key();
    // Two sidecars of one home starting at once: the first file written wins.
    let tmp = path.with_extension(format!("{}.tmp", std::process::id()));
    std::fs::write(&tmp, format!("{id}\n"))?;
    match std::fs::hard_link(&tmp, &path) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => {
            let _ = std::fs::remove_file(&tmp);
            return Err(e);
        }
    }
    let _ = std::fs::remove_file(&tmp);
    Ok(std::fs::read_to_string(&path)?.trim().to_string())
}

fn hostname() -> String {
    // The kernel's name of this machine (no feature of nix needed).
    std::fs::read_to_string("/proc/sys/kernel/hostname").map(|h| h.trim().to_string()).unwrap_or_default()
}

/// Who holds a name, for the refusal: host, home, pid and the last beat's age.
pub fn describe(v: &Value, age_ms: Option<u64>) -> String {
    let s = |k: &str| v.get(k).and_then(Value::as_str).unwrap_or("?").to_string();
    let pid = v.get("pid").and_then(Value::as_u64).map(|p| p.to_string()).unwrap_or_else(|| "?".into());
    let age = age_ms.map(|a| format!(", last heartbeat {:.1} s ago", a as f64 / 1000.0)).unwrap_or_default();
    format!("host {} (harness home {}, pid {pid}{age})", s("host"), s("home"))
}

fn age_ms(e: &kv::Entry) -> u64 {
    let now = time_now_ns();
    let created = e.created.unix_timestamp_nanos();
    (now.saturating_sub(created).max(0) / 1_000_000) as u64
}

fn time_now_ns() -> i128 {
    std::time::SystemTime::now()
        .duration_since(std::time::SystemTime::UNIX_EPOCH)
        .map(|d| d.as_nanos() as i128)
        .unwrap_or(0)
}

/// Takes the name: created when free, updated at its revision when this
/// home holds it already (a restart); `Refused` naming the holder when
/// another does. The revision of the beat written.
pub async fn take(nodes: &kv::Store, me: &Me) -> anyhow::Result<u64> {
    for _ in 0..10 {
        let entry = nodes.entry(&me.node).await.map_err(|e| anyhow!("bucket {}: {e}", names::NODES_BUCKET))?;
        match entry {
            Some(e) if e.operation == kv::Operation::Put => {
                let v: Value = serde_json::from_slice(&e.value).unwrap_or(Value::Null);
                // A beat without a holder is an older runwire's: taken over.
                let holder = v.get("holder").and_then(Value::as_str);
                if holder.is_some_and(|h| h != me.holder) {
                    return Err(Refused(format!(
                        "node {}: the name is held by {}; a node name is one machine's: stop that node, or once it \
                         is dead wait {} s for its lease to expire or free it (runwire-cluster nodes --remove {} \
                         with admin credentials)",
                        me.node,
                        describe(&v, Some(age_ms(&e))),
                        LEASE.as_secs(),
                        me.node
                    ))
                    .into());
                }
                match nodes.update(&me.node, me.value(), e.revision).await {
                    Ok(rev) => return Ok(rev),
                    Err(err) if err.kind() == kv::UpdateErrorKind::WrongLastRevision => continue,
                    Err(err) => return Err(anyhow!("bucket {}: {err}", names::NODES_BUCKET)),
                }
            }
            _ => match nodes.create(&me.node, me.value()).await {
                Ok(rev) => return Ok(rev),
                Err(err) if err.kind() == kv::CreateErrorKind::AlreadyExists => continue,
                Err(err) => return Err(anyhow!("bucket {}: {err}", names::NODES_BUCKET)),
            },
        }
    }
    Err(anyhow!("node {}: the name's lease changed under every try", me.node))
}

/// The heartbeat: the lease renewed at the revision of the last beat. A
/// beat refused (the lease expired while the cluster was away, or was
/// freed) takes the name again; a name that another machine took in
/// between ends the node (`Refused`).
pub async fn heartbeat(nodes: kv::Store, me: Me, mut rev: u64) -> anyhow::Result<()> {
    loop {
        tokio::time::sleep(me.interval).await;
        match nodes.update(&me.node, me.value(), rev).await {
            Ok(r) => rev = r,
            Err(e) if e.kind() == kv::UpdateErrorKind::WrongLastRevision => match take(&nodes, &me).await {
                Ok(r) => {
                    crate::report(format!("node {}: the name's lease had expired: taken again", me.node));
                    rev = r;
                }
                Err(e) if e.is::<Refused>() => return Err(e),
                // The next beat's job.
                Err(_) => {}
            },
            // A failed beat is the next one's job; the publisher says what is wrong.
            Err(_) => {}
        }
    }
}

/// A node's state as a hub judges it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeState {
    pub up: bool,
    /// Lost: the time of its last beat (ms since the epoch); up: of the beat that brought it back.
    pub since: u64,
}

/// What a hub knows of one node's beats.
struct Seen {
    rev: u64,
    at: Instant,
    /// The last beat's time (the node's clock), in ms since the epoch.
    beat_ms: u64,
    interval: Duration,
    state: NodeState,
}

/// The hub's judge of the nodes' liveness: pure (the watcher feeds it
/// beats and ticks), so its rules are tested without a cluster.
#[derive(Default)]
pub struct Judge {
    nodes: BTreeMap<String, Seen>,
    /// What this home's hub said last (its `nodes.json`, whoever wrote it),
    /// until the bucket's history is read: a first sight that differs from
    /// it is a change that happened while no hub here watched.
    prior: Option<NodeStates>,
    /// When that was written (ms since the epoch).
    said_at: u64,
}

/// A change the hub says: the node, its new state and the revision it was judged on.
pub type Change = (String, NodeState, u64);

impl Judge {
    /// A judge that starts from what this home's hub said last
    /// ([`runwire::runs::nodes::last_said`]), so that a node lost or back
    /// while the hub was down is said at its start, and one it said already
    /// is not said again. Without it, a first sight of a lost node is a change.
    pub fn after(prior: Option<(NodeStates, u64)>) -> Judge {
        // Names go into subjects: only a node's (the file is a hub's, but a file).
        let (prior, said_at) = match prior {
            Some((p, at)) => (Some(p.into_iter().filter(|(n, _)| names::valid_node(n)).collect()), at),
            None => (None, 0),
        };
        Judge { nodes: BTreeMap::new(), prior, said_at }
    }

    /// A beat of `node` (`rev`), `age` old when it arrived, saying its time and interval.
    pub fn beat(
        &mut self,
        node: &str,
        rev: u64,
        age: Duration,
        beat_ms: u64,
        interval_ms: u64,
        now: Instant,
    ) -> Option<Change> {
        let at = now.checked_sub(age).unwrap_or(now);
        let interval = Duration::from_millis(interval_ms.clamp(100, MAX_HEARTBEAT_MS));
        let fresh = now.duration_since(at) <= interval * MISSED_BEATS as u32;
        match self.nodes.get_mut(node) {
            Some(s) if rev > s.rev => {
                (s.rev, s.at, s.beat_ms, s.interval) = (rev, at, beat_ms, interval);
                if !s.state.up && fresh {
                    s.state = NodeState { up: true, since: beat_ms };
                    return Some((node.to_string(), s.state.clone(), rev));
                }
                None
            }
            Some(_) => None,
            None => {
                // First sight (a hub starting, a new node): a change when it
                // is not what this home's hub said last (a node never said
                // is taken as up: a new one says nothing, a dead one is news).
                let state = NodeState { up: fresh, since: beat_ms };
                let said_up = self.prior.as_mut().and_then(|p| p.remove(node)).is_none_or(|(s, _)| s == "up");
                let change = (said_up != state.up).then(|| (node.to_string(), state.clone(), rev));
                self.nodes.insert(node.to_string(), Seen { rev, at, beat_ms, interval, state });
                change
            }
        }
    }

    /// A name freed (removed from the bucket): forgotten.
    pub fn remove(&mut self, node: &str) -> bool {
        let said = self.prior.as_mut().and_then(|p| p.remove(node)).is_some();
        self.nodes.remove(node).is_some() || said
    }

    /// Whether `node` has been seen (a beat, or settled from what was said).
    pub fn knows(&self, node: &str) -> bool {
        self.nodes.contains_key(node)
    }

    /// Whether the bucket's history has been read ([`Judge::settle`]).
    pub fn settled(&self) -> bool {
        self.prior.is_none()
    }

    /// The bucket's history is read. A node this home's hub said that has
    /// no beat there now (its lease expired while no hub here watched) is
    /// lost: since when it was said lost, or, when it was said up, since
    /// that was said (the last time this home knew it up: its last beat
    /// came later, but nobody here saw when). Said up: a change.
    pub fn settle(&mut self) -> Vec<Change> {
        let mut out = Vec::new();
        for (node, (state, since)) in self.prior.take().unwrap_or_default() {
            let was_up = state == "up";
            let since = if was_up { since.max(self.said_at) } else { since };
            let state = NodeState { up: false, since };
            if was_up {
                out.push((node.clone(), state.clone(), 0));
            }
            // Lost: neither time nor interval is read until its next beat sets them.
            let (at, interval) = (Instant::now(), Duration::from_millis(DEFAULT_HEARTBEAT_MS));
            self.nodes.insert(node, Seen { rev: 0, at, beat_ms: since, interval, state });
        }
        out.sort_by(|a, b| a.0.cmp(&b.0));
        out
    }

    /// The nodes whose beats stopped: lost. `watching_since`: when the
    /// hub's view of the bucket became current (a hub that was itself cut
    /// off judges nobody by the time it could not see).
    pub fn tick(&mut self, now: Instant, watching_since: Instant) -> Vec<Change> {
        let mut out = Vec::new();
        for (node, s) in &mut self.nodes {
            let last = s.at.max(watching_since);
            if s.state.up && now.duration_since(last) > s.interval * MISSED_BEATS as u32 {
                s.state = NodeState { up: false, since: s.beat_ms };
                out.push((node.clone(), s.state.clone(), s.rev));
            }
        }
        out
    }

    /// Each node's state (`up`, `lost`) and since when: what a hub keeps
    /// for its server (it changes on a judgement, not on every beat).
    pub fn states(&self) -> NodeStates {
        let state = |s: &NodeState| if s.up { "up" } else { "lost" }.to_string();
        self.nodes.iter().map(|(n, s)| (n.clone(), (state(&s.state), s.state.since))).collect()
    }
}

/// The feed event of a change: `{"type":"node","node","state","since","ts"}`.
pub fn event(node: &str, st: &NodeState) -> Value {
    json!({"type": "node", "node": node, "state": if st.up { "up" } else { "lost" }, "since": st.since,
        "ts": runwire::util::time::format_ms(crate::util::now_ms() as i64)})
}

/// The message id of a change: the same at every hub that judges it. A
/// change judged on no beat (revision 0: [`Judge::settle`]) is told apart
/// by its time, so that a node lost that way twice is said twice.
pub fn event_id(node: &str, st: &NodeState, rev: u64) -> String {
    let state = if st.up { "up" } else { "lost" };
    match rev {
        0 => format!("{node}/node/{state}/at{}", st.since),
        _ => format!("{node}/node/{state}/{rev}"),
    }
}

/// A hub's watch of the nodes bucket, until the process is stopped.
pub async fn watch(client: async_nats::Client, home: PathBuf) -> anyhow::Result<()> {
    let js = jetstream::new(client.clone());
    let nodes = crate::util::retry("bind", || async {
        js.get_key_value(names::NODES_BUCKET)
            .await
            .map_err(|e| anyhow!("bucket {}: {e} (an admin creates it: runwire-cluster setup)", names::NODES_BUCKET))
    })
    .await;
    // What this home's hub said before this process: what changed while
    // none watched is said once, what it said already is not said again.
    let mut judge = Judge::after(runwire::runs::nodes::last_said(&home));
    let feed = feed_writer(home.clone());
    let mut written: Option<NodeStates> = None;
    // The judgement names its writer: it is current while this process runs.
    let me = runwire::util::procid::Ident::me();
    loop {
        let mut w = match nodes.watch_with_history(">").await {
            Ok(w) => w,
            Err(e) => {
                crate::report(format!("bucket {}: watch: {e} (retrying)", names::NODES_BUCKET));
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
        };
        let mut watching_since = Instant::now();
        // The history is read at its last entry (`delta` 0); an empty
        // bucket has none, and a history that expired under the watch may
        // never end: then after a while.
        let empty = !judge.settled() && bucket_is_empty(&js).await;
        let mut first = std::collections::HashSet::new();
        let mut connected = true;
        let mut tick = tokio::time::interval(Duration::from_millis(250));
        loop {
            // What this hub sees change, and what it catches up on at its
            // start (said while no hub here watched: maybe by another hub).
            let (mut changes, mut caught_up) = (Vec::new(), Vec::new());
            tokio::select! {
                e = w.next() => match e {
                    Some(Ok(e)) => {
                        if !names::valid_node(&e.key) {
                            continue;
                        }
                        match e.operation {
                            kv::Operation::Put => {
                                let v: Value = serde_json::from_slice(&e.value).unwrap_or(Value::Null);
                                let beat = v.get("ts").and_then(Value::as_u64).unwrap_or(0);
                                let every =
                                    v.get("intervalMs").and_then(Value::as_u64).unwrap_or(DEFAULT_HEARTBEAT_MS);
                                // A key's first beat of a watch (its history) is as old as the
                                // server says; a later one is live: now (no clock to compare).
                                let age = if first.insert(e.key.clone()) {
                                    Duration::from_millis(age_ms(&e))
                                } else {
                                    Duration::ZERO
                                };
                                let to = if judge.knows(&e.key) { &mut changes } else { &mut caught_up };
                                to.extend(judge.beat(&e.key, e.revision, age, beat, every, Instant::now()));
                            }
                            kv::Operation::Delete | kv::Operation::Purge => {
                                judge.remove(&e.key);
                            }
                        }
                        if e.delta == 0 {
                            caught_up.extend(judge.settle());
                        }
                    }
                    Some(Err(e)) => {
                        crate::report(format!("bucket {}: {e} (watching again)", names::NODES_BUCKET));
                        break;
                    }
                    None => break,
                },
                _ = tick.tick() => {
                    let now_connected = client.connection_state() == async_nats::connection::State::Connected;
                    if now_connected && !connected {
                        watching_since = Instant::now();
                    }
                    connected = now_connected;
                    // Never on a wait spent cut off: the history may be on its way.
                    if !judge.settled() && connected && (empty || watching_since.elapsed() > HISTORY_WAIT) {
                        caught_up = judge.settle();
                    }
                    if connected {
                        changes = judge.tick(Instant::now(), watching_since);
                    }
                }
            }
            // The states first: whoever the events wake (the studio, on the
            // stream's) reads the hub's judgement from this file.
            let now = judge.states();
            if written.as_ref() != Some(&now) && me.as_ref().is_some_and(|me| write_states(&home, me, &now)) {
                written = Some(now);
            }
            let mut events = Vec::new();
            let all = caught_up.into_iter().map(|c| (c, true)).chain(changes.into_iter().map(|c| (c, false)));
            for ((node, st, rev), catching_up) in all {
                let ev = event(&node, &st);
                publish(&js, format!("rwnode.{node}"), event_id(&node, &st, rev), &ev, catching_up);
                events.push(ev);
            }
            if !events.is_empty() {
                let _ = feed.send(events);
            }
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// `cluster/node.json` ([`runwire::runs::nodes::home_node`]): this home is
/// node `node`, for as long as this process runs (a record of a process
/// gone reads as none). Best effort: without it, links name no node and a
/// hub places them by its mirror.
pub fn say_home_node(home: &Path, node: &str) {
    if let Some(me) = runwire::util::procid::Ident::me() {
        let text = runwire::runs::nodes::encode_home_node(&me, node);
        write_record(home, &runwire::runs::nodes::home_node_path(home), &text);
    }
}

/// The hub's copy, `nodes.json` ([`runwire::runs::nodes`]: the states, their
/// since, and this process as their writer), for its server and `runs`.
fn write_states(home: &Path, me: &runwire::util::procid::Ident, states: &NodeStates) -> bool {
    write_record(home, &runwire::runs::nodes::path(home), &runwire::runs::nodes::encode(me, states))
}

/// One of the sidecar's small records under `home`, written whole (a
/// temporary file renamed over it); a failure is said. Whether it was.
fn write_record(home: &Path, path: &Path, text: &str) -> bool {
    let r = std::fs::create_dir_all(path.parent().unwrap_or(home))
        .and_then(|()| runwire::runs::write_atomic(path, text.as_bytes()));
    if let Err(e) = &r {
        crate::report(format!("{}: {e}", path.display()));
    }
    r.is_ok()
}

/// The hub's home's own feed (`runs watch` and `runs notify` there, which
/// read no stream) gets the changes too, in their order, after what the
/// mirrored journals brought meanwhile: by a thread of its own, so that a
/// slow append (the first, which starts the feed with every run's
/// `created`) holds up no judgement.
fn feed_writer(home: PathBuf) -> std::sync::mpsc::Sender<Vec<Value>> {
    let (tx, rx) = std::sync::mpsc::channel::<Vec<Value>>();
    let writer = std::thread::spawn(move || {
        let mut x = runwire::runs::feed::Extender::new(&home);
        for events in rx {
            if let Err(e) = x.append(&events) {
                crate::report(format!("{}: {e}", x.paths().log.display()));
            }
        }
        // Dropping the extender writes its checkpoint.
    });
    *FEED_WRITER.lock().unwrap_or_else(|e| e.into_inner()) = Some(writer);
    tx
}

/// The home feed's writer thread, which [`wait_for_feed`] lets finish.
static FEED_WRITER: std::sync::Mutex<Option<std::thread::JoinHandle<()>>> = std::sync::Mutex::new(None);

/// On the way out, once the runtime is shut down (its tasks, the writer's
/// senders among them, dropped): lets the home feed's writer append what
/// it was handed and write its checkpoint, for at most `bound`. Exiting
/// under it left the checkpoint stale and its temp file behind.
pub fn wait_for_feed(bound: Duration) {
    let Some(writer) = FEED_WRITER.lock().unwrap_or_else(|e| e.into_inner()).take() else { return };
    let until = std::time::Instant::now() + bound;
    while !writer.is_finished() && std::time::Instant::now() < until {
        std::thread::sleep(Duration::from_millis(5));
    }
    if writer.is_finished() {
        let _ = writer.join();
    }
}

/// How long a hub waits for the nodes bucket's history before it settles
/// what its home said last without it.
const HISTORY_WAIT: Duration = Duration::from_secs(10);

/// Whether the nodes bucket holds nothing (every lease expired): its
/// history has no last entry to wait for. Unknown (the cluster did not
/// answer): not empty, so the wait decides.
async fn bucket_is_empty(js: &jetstream::Context) -> bool {
    match js.get_stream(names::kv_stream(names::NODES_BUCKET)).await {
        Ok(mut s) => s.info().await.is_ok_and(|i| i.state.messages == 0),
        Err(_) => false,
    }
}

/// The state the feed stream last said of a node (`rwnode.<node>`), if any.
async fn last_said_in_stream(js: &jetstream::Context, subject: &str) -> Option<String> {
    let stream = js.get_stream(names::FEED_STREAM).await.ok()?;
    let m = stream.get_last_raw_message_by_subject(subject).await.ok()?;
    let v: Value = serde_json::from_slice(&m.payload).ok()?;
    v["state"].as_str().map(str::to_string)
}

/// Publishes a change to the feed stream (retried for a while: the feed
/// must carry it; the id keeps it once however many hubs publish it). One
/// caught up on at a hub's start is not, when the stream says that state
/// of the node last already: another hub said it, or this home's before a
/// restart, longer ago than the stream's duplicate window. (A change seen
/// live is always published: the stream's last word may be stale, from a
/// time no hub watched.)
fn publish(js: &jetstream::Context, subject: String, id: String, ev: &Value, catching_up: bool) {
    let js = js.clone();
    let body = ev.to_string();
    let state = ev["state"].as_str().unwrap_or_default().to_string();
    tokio::spawn(async move {
        if catching_up && last_said_in_stream(&js, &subject).await.as_deref() == Some(state.as_str()) {
            return;
        }
        for _ in 0..30 {
            let mut h = async_nats::HeaderMap::new();
            h.insert("Nats-Msg-Id", id.as_str());
            let sent = js.publish_with_headers(subject.clone(), h, Bytes::from(body.clone())).await;
            if let Ok(ack) = sent {
                if ack.await.is_ok() {
                    return;
                }
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
        crate::report(format!("{subject}: the node event {id} could not be published"));
    });
}

/// `runwire-cluster nodes --remove NAME`: frees a name (an admin's job:
/// the purge is a stream operation no node or hub may do).
pub async fn remove(client: async_nats::Client, node: &str) -> anyhow::Result<()> {
    let js = jetstream::new(client);
    let nodes =
        js.get_key_value(names::NODES_BUCKET).await.map_err(|e| anyhow!("bucket {}: {e}", names::NODES_BUCKET))?;
    let held = nodes.entry(node).await.map_err(|e| anyhow!("bucket {}: {e}", names::NODES_BUCKET))?;
    let mut stream = js
        .get_stream(names::kv_stream(names::NODES_BUCKET))
        .await
        .map_err(|e| anyhow!("bucket {}: {e}", names::NODES_BUCKET))?;
    stream
        .purge()
        .filter(format!("$KV.{}.{node}", names::NODES_BUCKET))
        .await
        .map_err(|e| anyhow!("bucket {}: purge {node}: {e} (it takes admin credentials)", names::NODES_BUCKET))?;
    let _ = stream.info().await;
    match held {
        Some(e) if e.operation == kv::Operation::Put => {
            let v: Value = serde_json::from_slice(&e.value).unwrap_or(Value::Null);
            println!("{}", json!({"node": node, "removed": true, "heldBy": describe(&v, Some(age_ms(&e)))}));
        }
        _ => println!("{}", json!({"node": node, "removed": false})),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_node_is_lost_after_three_missed_beats_and_up_at_its_next() {
        let t0 = Instant::now();
        let mut j = Judge::default();
        let s = |secs: u64| t0 + Duration::from_secs(secs);
        assert_eq!(j.beat("a", 1, Duration::ZERO, 1000, 2000, t0), None);
        assert!(j.tick(s(5), t0).is_empty());
        assert_eq!(j.beat("a", 2, Duration::ZERO, 6000, 2000, s(5)), None);
        assert!(j.tick(s(10), t0).is_empty());
        // 6 s after its last beat (three 2 s intervals): lost, since that beat.
        let lost = j.tick(s(12), t0);
        assert_eq!(lost, vec![("a".to_string(), NodeState { up: false, since: 6000 }, 2)]);
        assert!(j.tick(s(20), t0).is_empty(), "said once");
        assert_eq!(j.states()["a"].0, "lost");
        // A replayed old beat changes nothing; the next one brings it back.
        assert_eq!(j.beat("a", 2, Duration::ZERO, 6000, 2000, s(21)), None);
        let up = j.beat("a", 3, Duration::ZERO, 30_000, 2000, s(30));
        assert_eq!(up, Some(("a".to_string(), NodeState { up: true, since: 30_000 }, 3)));
        // A hub that could not see the bucket judges nobody for that time.
        assert!(j.tick(s(40), s(36)).is_empty());
        assert_eq!(j.tick(s(43), s(36)).len(), 1);
        // A beat from the history, already old, at a hub that never said
        // anything of the node: lost from the start, said once.
        let mut k = Judge::default();
        let lost = k.beat("b", 9, Duration::from_secs(60), 1, 2000, s(100));
        assert_eq!(lost, Some(("b".to_string(), NodeState { up: false, since: 1 }, 9)));
        assert!(k.tick(s(100), t0).is_empty());
        assert_eq!(k.states()["b"].0, "lost");
        assert!(k.remove("b") && k.states().is_empty());
    }

    /// A hub that restarts says what changed while it was down, and only that.
    #[test]
    fn a_restarted_hub_says_what_changed_while_none_watched_and_nothing_twice() {
        let now = Instant::now();
        let old = Duration::from_secs(60);
        let said = NodeStates::from([
            ("was-lost".into(), ("lost".into(), 100)),
            ("still-lost".into(), ("lost".into(), 200)),
            ("died".into(), ("up".into(), 300)),
            ("still-up".into(), ("up".into(), 400)),
            ("expired".into(), ("up".into(), 500)),
            ("gone-lost".into(), ("lost".into(), 600)),
            ("freed".into(), ("up".into(), 700)),
            ("not.a>node".into(), ("up".into(), 800)),
        ]);
        let mut j = Judge::after(Some((said, 5_000)));
        assert!(!j.settled());
        // The bucket's history: one beat each, fresh or old.
        let up = j.beat("was-lost", 3, Duration::ZERO, 9_000, 2000, now);
        assert_eq!(up, Some(("was-lost".to_string(), NodeState { up: true, since: 9_000 }, 3)));
        assert_eq!(j.beat("still-lost", 4, old, 200, 2000, now), None, "said already");
        let lost = j.beat("died", 5, old, 4_000, 2000, now);
        assert_eq!(lost, Some(("died".to_string(), NodeState { up: false, since: 4_000 }, 5)));
        assert_eq!(j.beat("still-up", 6, Duration::ZERO, 9_000, 2000, now), None);
        assert_eq!(j.beat("new", 7, Duration::ZERO, 9_000, 2000, now), None, "a new node is news only when lost");
        assert!(j.remove("freed"), "a name freed meanwhile is forgotten");
        // The end of the history: a node said up with no beat left (its
        // lease expired) is lost since this home last knew it up; one said
        // lost stays lost, unsaid.
        let settled = j.settle();
        assert_eq!(settled, vec![("expired".to_string(), NodeState { up: false, since: 5_000 }, 0)]);
        assert!(j.settled() && j.settle().is_empty(), "settled once");
        let states = j.states();
        assert_eq!(states["gone-lost"], ("lost".to_string(), 600));
        assert_eq!(states["expired"], ("lost".to_string(), 5_000));
        assert!(!states.contains_key("freed"));
        // A node lost by its lease's end is up at its next beat, whatever its revision.
        let back = j.beat("expired", 1, Duration::ZERO, 20_000, 2000, now);
        assert_eq!(back, Some(("expired".to_string(), NodeState { up: true, since: 20_000 }, 1)));
    }

    #[test]
    fn change_ids_are_the_same_at_every_hub_and_differ_by_state() {
        let lost = NodeState { up: false, since: 5 };
        let up = NodeState { up: true, since: 9 };
        assert_eq!(event_id("a", &lost, 7), "a/node/lost/7");
        assert_ne!(event_id("a", &lost, 7), event_id("a", &up, 7));
        let later = NodeState { up: false, since: 6 };
        assert_ne!(event_id("a", &lost, 0), event_id("a", &later, 0), "judged on no beat: told apart by time");
        let e = event("a", &lost);
        assert_eq!(
            (e["type"].as_str(), e["state"].as_str(), e["since"].as_u64()),
            (Some("node"), Some("lost"), Some(5))
        );
    }

    #[test]
    fn a_home_keeps_one_holder_id() {
        let tmp = std::env::temp_dir().join(format!("rw-holder-{}", std::process::id()));
        let a = holder_id(&tmp).unwrap();
        assert_eq!(holder_id(&tmp).unwrap(), a);
        assert!(a.len() >= 16);
        std::fs::remove_dir_all(&tmp).unwrap();
    }
}
