//! The hub: mirrors the cluster into a harness home, one run directory per
//! node and run, so the ordinary `runwire-serve` (started with `--hub`)
//! serves every node's runs and their task streams with its own, unchanged
//! code. Its change feed is the cluster's: [`crate::fanout::Fanout`] reads `RUNWIRE_FEED`
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
use async_nats::jetstream::{self, kv};
use async_nats::HeaderMap;
use futures_util::StreamExt;
use runwire::runs::registry::{Pointer, Registry};
use std::collections::HashMap;
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
    /// Each task file's `(inode, generation)` as the stream's last chunk of
    /// it gave them: a live chunk is written only when it continues that.
    /// Held while any chunk is written, so the stream's and the live
    /// tail's writes never interleave.
    streamed: std::sync::Mutex<HashMap<String, (u64, u64)>>,
    /// The summary of each run being removed at its node, as it was when
    /// its first tombstone came (its files go one by one before its key
    /// does): the `removed` event says the run's last status, not
    /// `missing`. Taken under `streamed`'s lock, as the files change.
    removing: std::sync::Mutex<HashMap<String, serde_json::Value>>,
}

/// Most runs whose removal may wait for their key at once (a node killed
/// between its tombstones and its key's deletion leaves one until it is back).
const MAX_REMOVING: usize = 1024;

fn hdr<T: std::str::FromStr>(h: Option<&HeaderMap>, name: &str) -> Option<T> {
    h?.get(name)?.as_str().parse().ok()
}

/// Whether `f` and `payload` agree on their common start (the file holds
/// a prefix of the payload, or the payload is the file's start).
fn starts_alike(f: &std::fs::File, payload: &[u8]) -> std::io::Result<bool> {
    use std::os::unix::fs::FileExt;
    let len = f.metadata()?.len().min(payload.len() as u64) as usize;
    let mut have = vec![0u8; len];
    f.read_exact_at(&mut have, 0)?;
    Ok(have == payload[..len])
}

fn set_mtime(f: &std::fs::File, ns: i64) {
    if ns > 0 {
        let t = SystemTime::UNIX_EPOCH + Duration::from_nanos(ns as u64);
        let _ = f.set_modified(t);
    }
}

impl Mirror {
    pub fn new(home: &Path) -> Mirror {
        Mirror {
            home: home.to_path_buf(),
            reg: Registry::at(home),
            streamed: Default::default(),
            removing: Default::default(),
        }
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
        // Always within MAX_RUN_ID (a node name and a node's run id at their
        // limits), and refused here if not, before any path is built.
        runwire::runs::check_run_id("hub run id", &id).map_err(|e| anyhow::anyhow!("run {run} of node {node}: {e}"))?;
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
        self.reg.register_mirror(&q).with_context(|| format!("registry: {id}"))
    }

    /// A mirrored run's summary as its files say now.
    fn summary(p: Pointer) -> serde_json::Value {
        runwire::runs::view::load(p).summary()
    }

    /// A new plan changes the run's summary without a journal record: the
    /// journal's stamp is changed (`runs::journal::touch`), so listings
    /// read the run again (a journal chunk changes it by itself).
    fn note(&self, mark: &runwire::runs::marks::Run, dir: &Path, file: &str) {
        let journal = match (file.strip_suffix(".plan.json"), file.ends_with(".jsonl")) {
            (Some(slug), _) => dir.join(format!("{slug}.jsonl")),
            (None, true) => dir.join(file),
            _ => return,
        };
        if journal.is_file() {
            let _ = runwire::runs::journal::touch(mark, &journal);
        }
    }

    /// A run deleted from the bucket (removed at its node): out of the
    /// hub's home, and its own feed (`runs watch` there) says `removed`,
    /// as the node's did, with the run's summary as it was and its node.
    pub fn remove(&self, node: &str, run: &str) {
        let id = names::hub_run_id(node, run);
        let summary = {
            let mut streamed = self.streamed.lock().unwrap_or_else(|e| e.into_inner());
            let kept = self.removing.lock().unwrap_or_else(|e| e.into_inner()).remove(&id);
            // None when the hub had no such run (a deletion seen again after
            // a restart says nothing twice).
            let summary = self.reg.read(&id).ok().map(|p| kept.unwrap_or_else(|| Self::summary(p)));
            let _ = std::fs::remove_file(self.reg.path(&id));
            let _ = std::fs::remove_file(self.reg.link_path(&id));
            let _ = std::fs::remove_dir_all(self.dir(node, run));
            let prefix = names::file_subject(node, run, "");
            streamed.retain(|s, _| !s.starts_with(&prefix));
            summary
        };
        if let Some(mut summary) = summary {
            if let Some(o) = summary.as_object_mut() {
                o.insert("node".into(), node.into());
            }
            let now = runwire::util::time::format_ms(crate::util::now_ms() as i64);
            if let Err(e) = runwire::runs::remove::feed_removed(&self.home, summary, &now) {
                crate::report(format!("feed: {id}: {e}"));
            }
        }
    }

    /// One chunk of a file: applied, or a gap (the file's earlier chunks
    /// are not in the stream: the caller asks the node for the file again).
    pub fn chunk(&self, subject: &str, h: Option<&HeaderMap>, payload: &[u8]) -> anyhow::Result<Applied> {
        let Some((node, run, file)) = names::parse_file_subject(subject) else {
            bail!("{subject}: not a file subject (ignored)");
        };
        // The node cannot publish the file whole (another hub asked): nothing
        // to write, and nothing to say when this mirror has it already.
        if let Some(size) = hdr::<u64>(h, header::UNFIT) {
            let have = std::fs::metadata(self.dir(&node, &run).join(&file)).map_or(0, |m| m.len());
            return Ok(if have >= size { Applied::Done } else { Applied::Unfit { node, run, file, size } });
        }
        let mut streamed = self.streamed.lock().unwrap_or_else(|e| e.into_inner());
        // Live chunks continue only what a plain chunk of the stream leaves.
        let seen = streamed.remove(subject);
        let dir = self.dir(&node, &run);
        let path = dir.join(&file);
        // The run's mark, held before any of its files changes (listings
        // read it from its files meanwhile: `runwire::runs::marks`).
        let mark = runwire::runs::marks::Run::new(&self.home, &names::hub_run_id(&node, &run));
        mark.hold().with_context(|| format!("{subject}: the run's mark"))?;
        // A run removed at its node: its files' tombstones.
        if h.and_then(|h| h.get(header::REMOVED)).is_some() {
            let id = names::hub_run_id(&node, &run);
            let mut removing = self.removing.lock().unwrap_or_else(|e| e.into_inner());
            if !removing.contains_key(&id) && removing.len() < MAX_REMOVING {
                if let Ok(p) = self.reg.read(&id) {
                    removing.insert(id, Self::summary(p));
                }
            }
            drop(removing);
            let _ = std::fs::remove_file(&path);
            let _ = std::fs::remove_file(dir.join(format!("{file}.part")));
            let _ = std::fs::remove_dir(&dir); // when it was the last
            return Ok(Applied::Done);
        }
        let off: u64 = hdr(h, header::OFFSET).ok_or_else(|| anyhow!("{subject}: no {} header", header::OFFSET))?;
        let mtime: i64 = hdr(h, header::MTIME).unwrap_or(0);
        let reset = h.and_then(|h| h.get(header::RESET)).is_some();
        std::fs::create_dir_all(&dir).with_context(|| dir.display().to_string())?;
        if let Some(total) = hdr::<u64>(h, header::WHOLE) {
            // Published again for another hub: a mirror that has it keeps it
            // (an append-only file, the same bytes: readers see no change).
            if h.and_then(|h| h.get(header::REPUBLISH)).is_some()
                && std::fs::metadata(&path).is_ok_and(|m| m.len() >= total)
            {
                return Ok(Applied::Done);
            }
            let part = dir.join(format!("{file}.part"));
            let f = std::fs::OpenOptions::new().create(true).truncate(false).read(true).write(true).open(&part)?;
            if off == 0 {
                f.set_len(0)?;
            }
            let len = f.metadata()?.len();
            if len < off {
                // Its start expired: asked for again.
                return Ok(Applied::Gap { node, run, file });
            }
            if len > off {
                return Ok(Applied::Done); // a chunk of a generation already replaced
            }
            f.write_all_at(payload, off)?;
            if off + payload.len() as u64 == total {
                set_mtime(&f, mtime);
                drop(f);
                std::fs::rename(&part, &path)?;
                self.note(&mark, &dir, &file);
            }
            return Ok(Applied::Done);
        }
        let mut f = std::fs::OpenOptions::new().create(true).truncate(false).read(true).write(true).open(&path)?;
        let at = hdr::<u64>(h, header::INO).map(|ino| (ino, hdr::<u64>(h, header::GEN).unwrap_or(0)));
        if reset && off == 0 {
            // A new generation replaces the file; a generation's first chunk
            // applied again (a hub restarted behind the last message it
            // applied) changes nothing. Truncating then made the file shrink
            // under its readers: the home feed took the run for a new one and
            // announced it again (notifications included). Known to be
            // another generation: this hub saw the file's current one since
            // it started. Else the bytes tell: the same start is the same
            // generation (its later chunks carry timestamps and ids, so two
            // generations of one file do not share a whole chunk).
            let other = at.is_some() && seen.is_some_and(|seen| Some(seen) != at);
            if other || !starts_alike(&f, payload)? {
                f.set_len(0)?;
            }
        }
        let len = f.metadata()?.len();
        if len < off {
            // The chunks before it expired (retention) or were lost: the
            // node is asked for the file whole; nothing is written meanwhile.
            return Ok(Applied::Gap { node, run, file });
        }
        // Applied already, or in part by the live tail (the same bytes of an
        // append-only file): what is past the file's length is written.
        if let Some(rest) = payload.get((len - off) as usize..).filter(|r| !r.is_empty()) {
            use std::io::{Seek, SeekFrom};
            f.seek(SeekFrom::Start(len))?;
            f.write_all(rest)?;
            set_mtime(&f, mtime);
            drop(f);
            self.note(&mark, &dir, &file);
        }
        if let Some(at) = at {
            streamed.insert(subject.to_string(), at);
        }
        Ok(Applied::Done)
    }

    /// One chunk of the live tail (`rwlive.<node>.<run>.<file>`, core NATS):
    /// written when it continues a task file as the stream's last chunk of
    /// it left it (the same inode and generation, starting at or before the
    /// file's length); otherwise dropped, the stream bringing it. Whether
    /// it wrote anything.
    pub fn live(&self, subject: &str, h: Option<&HeaderMap>, payload: &[u8]) -> anyhow::Result<bool> {
        let file_subject = names::file_of_live(subject).unwrap_or_default();
        let Some((node, run, file)) = names::parse_file_subject(&file_subject) else {
            bail!("{subject}: not a live subject (ignored)");
        };
        if !names::live_file(&file) {
            bail!("{subject}: not a task's log or arrival times (ignored)");
        }
        let streamed = self.streamed.lock().unwrap_or_else(|e| e.into_inner());
        let (Some(off), Some(ino)) = (hdr::<u64>(h, header::OFFSET), hdr::<u64>(h, header::INO)) else {
            bail!("{subject}: no {} or {} header", header::OFFSET, header::INO);
        };
        let gen = hdr::<u64>(h, header::GEN).unwrap_or(0);
        if streamed.get(&file_subject) != Some(&(ino, gen)) {
            return Ok(false);
        }
        let path = self.dir(&node, &run).join(&file);
        let Ok(f) = std::fs::OpenOptions::new().write(true).open(&path) else { return Ok(false) };
        let len = f.metadata()?.len();
        let Some(rest) = payload.get(len.saturating_sub(off) as usize..).filter(|r| off <= len && !r.is_empty()) else {
            return Ok(false);
        };
        runwire::runs::marks::Run::new(&self.home, &names::hub_run_id(&node, &run))
            .hold()
            .with_context(|| format!("{subject}: the run's mark"))?;
        f.write_all_at(rest, len)?;
        set_mtime(&f, hdr(h, header::MTIME).unwrap_or(0));
        Ok(true)
    }

    /// The runs of the mirror whose journal it lacks, `(node, run,
    /// journal's name)`: none,
    /// or empty (the mirror makes an empty one with the run's pointer).
    /// Each chunk of their journals expired, or never came: their nodes are
    /// asked for all of their files again.
    pub fn without_journal(&self) -> Vec<(String, String, String)> {
        let mut out = Vec::new();
        for id in self.reg.ids() {
            let Some((node, run)) = id.split_once('.') else { continue };
            let Ok(p) = self.reg.read(&id) else { continue };
            if !names::valid_node(node) || !runwire::runs::valid_id(&p.slug) {
                continue;
            }
            let journal = format!("{}.jsonl", p.slug);
            if std::fs::metadata(self.dir(node, run).join(&journal)).map_or(true, |m| m.len() == 0) {
                out.push((node.to_string(), run.to_string(), journal));
            }
        }
        out
    }
}

/// What a chunk did to the mirror.
#[derive(Debug, PartialEq, Eq)]
pub enum Applied {
    Done,
    /// The file's earlier bytes are missing: nothing written.
    Gap {
        node: String,
        run: String,
        file: String,
    },
    /// Its node cannot publish the file whole (`Rw-Unfit`, its size):
    /// nothing written.
    Unfit {
        node: String,
        run: String,
        file: String,
        size: u64,
    },
}

/// The hub's requests to nodes to publish files again
/// (`rwsync.<node>`), each at most every [`ASK_EVERY`] while wanted.
#[derive(Default)]
pub struct Asks {
    last: std::collections::HashMap<(String, String, Option<String>), std::time::Instant>,
    /// Said on stderr once each.
    said: std::collections::HashSet<(String, String, Option<String>)>,
    swept: Option<std::time::Instant>,
    /// The runs the sweep asked for (their journal missing or empty):
    /// whether a chunk of theirs came since. One that came answered: the
    /// node has published what it has, and the run is not asked for again
    /// by the sweep (a run whose node has no journal is asked for once).
    sweep_asked: HashMap<(String, String), bool>,
    /// Files their nodes cannot publish whole (`Rw-Unfit`): said once, and
    /// a gap in one is not asked for.
    unfit: std::collections::HashSet<(String, String, String)>,
}

/// Most files kept as unfit, and runs as asked for by the sweep (past it,
/// the oldest are not told apart: a hub that mirrors more asks again).
const MAX_KEPT: usize = 100_000;

/// How often a hub asks again for a file it still lacks (its node may have
/// been away when it asked).
pub const ASK_EVERY: Duration = Duration::from_secs(5);

impl Asks {
    /// Whether the mirror's runs are due to be looked at for a missing journal.
    fn sweep_due(&mut self) -> bool {
        if self.swept.is_some_and(|t| t.elapsed() < ASK_EVERY) {
            return false;
        }
        self.swept = Some(std::time::Instant::now());
        true
    }

    /// A chunk of `(node, run)` came: a sweep's question answered.
    fn heard(&mut self, subject: &str) {
        if self.sweep_asked.is_empty() {
            return;
        }
        if let Some((node, run, _)) = names::parse_file_subject(subject) {
            if let Some(answered) = self.sweep_asked.get_mut(&(node, run)) {
                *answered = true;
            }
        }
    }

    /// Whether the sweep asks for `(node, run)` (a run without a journal):
    /// not once its node answered, nor when its journal cannot come whole.
    fn sweep_wants(&mut self, node: &str, run: &str, journal: &str) -> bool {
        let key = (node.to_string(), run.to_string());
        if self.sweep_asked.get(&key) == Some(&true) {
            return false;
        }
        if !self.gap_wanted(node, run, journal) {
            return false;
        }
        if self.sweep_asked.len() >= MAX_KEPT {
            self.sweep_asked.clear();
        }
        self.sweep_asked.insert(key, false);
        true
    }

    /// A file its node cannot publish whole: said once (a file its node
    /// says so of again is not said again).
    fn unfit(&mut self, node: String, run: String, file: String, size: u64) {
        if self.unfit.len() >= MAX_KEPT {
            self.unfit.clear();
        }
        if self.unfit.insert((node.clone(), run.clone(), file.clone())) {
            crate::report(format!(
                "mirror: run {run} of node {node}: {file} ({size} bytes) is too big for {} to carry whole \
                 (more than three quarters of its byte limit): its start expired, and the mirror lacks it \
                 (raise --files-max-bytes with runwire-cluster setup); not asked for again",
                names::FILES_STREAM
            ));
        }
    }

    /// Whether a gap in `file` is asked for: not in a file its node cannot publish whole.
    fn gap_wanted(&self, node: &str, run: &str, file: &str) -> bool {
        !self.unfit.contains(&(node.to_string(), run.to_string(), file.to_string()))
    }

    /// Asks `node` for `run`'s `file` (all its files: `None`), unless asked
    /// within [`ASK_EVERY`].
    pub async fn ask(&mut self, client: &async_nats::Client, node: &str, run: &str, file: Option<&str>) {
        let key = (node.to_string(), run.to_string(), file.map(str::to_string));
        if self.last.get(&key).is_some_and(|t| t.elapsed() < ASK_EVERY) {
            return;
        }
        self.last.retain(|_, t| t.elapsed() < ASK_EVERY);
        let body = serde_json::json!({"run": run, "file": file}).to_string();
        match client.publish(names::sync_subject(node), body.into()).await {
            Ok(()) => {
                if self.said.len() < 10_000 && self.said.insert(key.clone()) {
                    let what = file.map_or_else(|| "its journal".to_string(), |f| f.to_string());
                    crate::report(format!("mirror: run {run} of node {node}: {what} lacks its start: asked for again"));
                }
                self.last.insert(key, std::time::Instant::now());
            }
            Err(e) => crate::report(format!("mirror: {}: {e}", names::sync_subject(node))),
        }
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
    let js = crate::conn::hub_js(client.clone());
    // Bound first (waiting, saying so, while the admin has not made it).
    let _files = crate::util::retry("bind", || async {
        js.get_stream(names::FILES_STREAM)
            .await
            .map_err(|e| anyhow!("stream {}: {e} (an admin creates it: runwire-cluster setup)", names::FILES_STREAM))
    })
    .await;
    let runs = crate::util::retry("bind", || async {
        js.get_key_value(names::RUNS_BUCKET)
            .await
            .map_err(|e| anyhow!("bucket {}: {e} (an admin creates it: runwire-cluster setup)", names::RUNS_BUCKET))
    })
    .await;
    let mirror = std::sync::Arc::new(Mirror::new(&o.home));
    let m2 = mirror.clone();
    let watcher = tokio::spawn(async move { watch_runs(runs, &m2).await });
    let m3 = mirror.clone();
    let live = tokio::spawn(live_tail(client.clone(), m3));
    let files_loop = follow_files(client, js.clone(), &mirror);
    tokio::select! {
        r = files_loop => r,
        r = watcher => r.map_err(|e| anyhow!("{e}"))?,
        r = live => r.map_err(|e| anyhow!("{e}"))?,
    }
}

/// The nodes' live tails into the mirror (core NATS: what the hub misses
/// while it is away or cut off, the stream brings).
async fn live_tail(client: async_nats::Client, mirror: std::sync::Arc<Mirror>) -> anyhow::Result<()> {
    use futures_util::FutureExt;
    let mut said = false;
    loop {
        match client.subscribe("rwlive.>").await {
            Ok(mut sub) => {
                while let Some(m) = sub.next().await {
                    // What else has come meanwhile, written with it: a
                    // burst's lines arrive one message each, and a file's
                    // run of them is one write.
                    let mut batch = vec![m];
                    while batch.len() < 256 {
                        match sub.next().now_or_never() {
                            Some(Some(m)) => batch.push(m),
                            _ => break,
                        }
                    }
                    for (subject, h, payload) in joined(batch) {
                        if let Err(e) = mirror.live(&subject, h.as_ref(), &payload) {
                            if !said {
                                crate::report(format!("mirror: live: {e:#}"));
                                said = true;
                            }
                        }
                    }
                }
            }
            Err(e) => crate::report(format!("mirror: live: subscribe: {e}")),
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// Live chunks in order, each one's successors of the same file and
/// generation that follow it byte for byte joined to it.
fn joined(batch: Vec<async_nats::Message>) -> Vec<(String, Option<HeaderMap>, Vec<u8>)> {
    let key = |h: Option<&HeaderMap>| {
        let get = |n: &str| h.and_then(|h| h.get(n)).map(|v| v.to_string());
        (get(header::INO), get(header::GEN), hdr::<u64>(h, header::OFFSET))
    };
    let mut out: Vec<(String, Option<HeaderMap>, Vec<u8>)> = Vec::new();
    for m in batch {
        let (ino, gen, off) = key(m.headers.as_ref());
        if let Some((subject, h, payload)) = out.last_mut() {
            let (lino, lgen, loff) = key(h.as_ref());
            let follows = loff.zip(off).is_some_and(|(lo, o)| lo + payload.len() as u64 == o);
            if *subject == m.subject.as_str() && (lino, lgen) == (ino, gen) && follows {
                payload.extend_from_slice(&m.payload);
                // The later chunk's modification time.
                if let (Some(h), Some(t)) = (h.as_mut(), m.headers.as_ref().and_then(|x| x.get(header::MTIME))) {
                    h.insert(header::MTIME, t.clone());
                }
                continue;
            }
        }
        out.push((m.subject.to_string(), m.headers, m.payload.to_vec()));
    }
    out
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

async fn follow_files(client: async_nats::Client, js: jetstream::Context, mirror: &Mirror) -> anyhow::Result<()> {
    let mut asks = Asks::default();
    let mut seq = mirror.load_seq();
    let mut saved = seq;
    let mut last_save = std::time::Instant::now();
    let mut f = crate::follow::Follow::new(js, names::FILES_STREAM, seq);
    loop {
        match f.next(Duration::from_millis(500)).await {
            Some(m) => {
                let r = mirror.chunk(&m.subject, m.headers.as_ref(), &m.payload);
                match r {
                    Ok(Applied::Done) => {}
                    // The whole run: its other files' starts (the plan's, published
                    // once) went with this one's, oldest first.
                    Ok(Applied::Gap { node, run, file }) => {
                        if asks.gap_wanted(&node, &run, &file) {
                            asks.ask(&client, &node, &run, None).await;
                        }
                    }
                    Ok(Applied::Unfit { node, run, file, size }) => asks.unfit(node, run, file, size),
                    Err(e) => crate::report(format!("mirror: {e:#}")),
                }
                asks.heard(&m.subject);
                seq = f.pos;
            }
            None if asks.sweep_due() => {
                // Quiet, caught up: runs whose journal never came (or is
                // empty: every chunk of it expired) are asked for, each
                // until its node answers.
                for (node, run, journal) in mirror.without_journal() {
                    if asks.sweep_wants(&node, &run, &journal) {
                        asks.ask(&client, &node, &run, None).await;
                    }
                }
            }
            None => {}
        }
        if seq != saved && last_save.elapsed() >= Duration::from_millis(500) {
            if let Err(e) = mirror.save_seq(seq) {
                crate::report(format!("mirror: files.seq: {e}"));
            }
            saved = seq;
            last_save = std::time::Instant::now();
        }
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
    fn live_chunks_continue_only_what_the_stream_left_and_no_byte_is_written_twice() {
        let tmp = std::env::temp_dir().join(format!("rw-mirror-live-{}", std::process::id()));
        let m = Mirror::new(&tmp);
        let (run, file) = ("ab--x.y", "x.y.t.log");
        let s = names::file_subject("n1", run, file);
        let live = names::live_subject("n1", run, file);
        let path = m.dir("n1", run).join(file);
        let at = |off: &str| headers(&[("Rw-Offset", off), ("Rw-Ino", "7")]);
        // Nothing from the stream yet: a live chunk has nothing to continue.
        assert!(!m.live(&live, Some(&at("0")), b"one\n").unwrap());
        assert!(!path.exists());
        m.chunk(&s, Some(&headers(&[("Rw-Offset", "0"), ("Rw-Ino", "7"), ("Rw-Reset", "1")])), b"one\n").unwrap();
        // It continues the file: written; again (a duplicate): not.
        assert!(m.live(&live, Some(&at("4")), b"two\n").unwrap());
        assert!(!m.live(&live, Some(&at("4")), b"two\n").unwrap());
        // Overlapping the file's end: only what is past it.
        assert!(m.live(&live, Some(&at("4")), b"two\nthree\n").unwrap());
        assert_eq!(std::fs::read(&path).unwrap(), b"one\ntwo\nthree\n");
        // Past the end (a live chunk lost): not written, the stream brings it.
        assert!(!m.live(&live, Some(&at("100")), b"x").unwrap());
        // Another inode or generation than the stream's: not written.
        let other = headers(&[("Rw-Offset", "14"), ("Rw-Ino", "8")]);
        assert!(!m.live(&live, Some(&other), b"x").unwrap());
        let gen = headers(&[("Rw-Offset", "14"), ("Rw-Ino", "7"), ("Rw-Gen", "3")]);
        assert!(!m.live(&live, Some(&gen), b"x").unwrap());
        // The stream's chunks of what live wrote: applied already, or only their rest.
        m.chunk(&s, Some(&at("4")), b"two\n").unwrap();
        m.chunk(&s, Some(&at("8")), b"three\nfour\n").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"one\ntwo\nthree\nfour\n");
        // A new generation from the stream: live chunks of the old one are refused.
        m.chunk(&s, Some(&headers(&[("Rw-Offset", "0"), ("Rw-Ino", "9"), ("Rw-Reset", "1")])), b"new\n").unwrap();
        assert!(!m.live(&live, Some(&at("4")), b"old\n").unwrap());
        assert!(m.live(&live, Some(&headers(&[("Rw-Offset", "4"), ("Rw-Ino", "9")])), b"more\n").unwrap());
        assert_eq!(std::fs::read(&path).unwrap(), b"new\nmore\n");
        // Removed at its node: no live chunk brings it back.
        m.chunk(&s, Some(&headers(&[("Rw-Removed", "1"), ("Nats-Rollup", "sub")])), b"").unwrap();
        assert!(!m.live(&live, Some(&headers(&[("Rw-Offset", "9"), ("Rw-Ino", "9")])), b"x").unwrap());
        assert!(!path.exists());
        // Only a task's log and its arrival times come live; never a path.
        let journal = names::file_subject("n1", run, "x.y.jsonl");
        m.chunk(&journal, Some(&headers(&[("Rw-Offset", "0"), ("Rw-Ino", "1"), ("Rw-Reset", "1")])), b"{}\n").unwrap();
        let jlive = names::live_subject("n1", run, "x.y.jsonl");
        assert!(m.live(&jlive, Some(&headers(&[("Rw-Offset", "3"), ("Rw-Ino", "1")])), b"{}\n").is_err());
        assert!(m.live("rwlive.n1.run.=2E=2E", Some(&at("0")), b"x").is_err());
        assert!(m.live(&s, Some(&at("0")), b"x").is_err());
        std::fs::remove_dir_all(&tmp).unwrap();
    }

    #[test]
    fn a_files_consecutive_live_chunks_are_joined_and_others_kept_apart() {
        let msg = |subject: &str, pairs: &[(&str, &str)], payload: &'static [u8]| async_nats::Message {
            subject: subject.into(),
            reply: None,
            payload: bytes::Bytes::from_static(payload),
            headers: Some(headers(pairs)),
            status: None,
            description: None,
            length: payload.len(),
        };
        let a = "rwlive.n1.r.a=2Elog";
        let b = "rwlive.n1.r.b=2Elog";
        let out = joined(vec![
            msg(a, &[("Rw-Offset", "0"), ("Rw-Ino", "1"), ("Rw-Mtime", "1")], b"ab"),
            msg(a, &[("Rw-Offset", "2"), ("Rw-Ino", "1"), ("Rw-Mtime", "2")], b"cd"),
            msg(b, &[("Rw-Offset", "0"), ("Rw-Ino", "2")], b"x"),
            msg(a, &[("Rw-Offset", "4"), ("Rw-Ino", "1")], b"e"),
            // Not following byte for byte, or another generation: apart.
            msg(a, &[("Rw-Offset", "9"), ("Rw-Ino", "1")], b"z"),
            msg(a, &[("Rw-Offset", "10"), ("Rw-Ino", "1"), ("Rw-Gen", "5")], b"y"),
        ]);
        let got: Vec<(&str, Option<&str>, &[u8])> = out
            .iter()
            .map(|(s, h, p)| {
                (s.as_str(), h.as_ref().and_then(|h| h.get("Rw-Offset")).map(|v| v.as_str()), p.as_slice())
            })
            .collect();
        assert_eq!(
            got,
            vec![
                (a, Some("0"), &b"abcd"[..]),
                (b, Some("0"), &b"x"[..]),
                (a, Some("4"), &b"e"[..]),
                (a, Some("9"), &b"z"[..]),
                (a, Some("10"), &b"y"[..]),
            ]
        );
        // The joined chunk carries its last part's modification time.
        assert_eq!(out[0].1.as_ref().and_then(|h| h.get("Rw-Mtime")).map(|v| v.as_str()), Some("2"));
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

    /// A run removed at its node: its tombstones and its key's deletion
    /// come on two streams, in either order; the hub's home's feed says
    /// `removed` once, with the run's last status, whichever came first.
    #[test]
    fn a_run_removed_at_its_node_is_said_removed_once_with_its_last_status_in_either_order() {
        use runwire::runs::feed::{Cursor, Extender, Line, Paths, Scope};
        let tmp = std::env::temp_dir().join(format!("rw-mirror-removed-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&tmp);
        let m = Mirror::new(&tmp);
        let leased = b"{\"v\":\"runstate/v1\",\"ts\":\"2026-01-01T00:00:00.000Z\",\"actor\":\"runner\",\"task\":\"t\",\"state\":\"leased\"}\n";
        let plan = br#"{"v":"plan/v1","tasks":[{"id":"t","adapter":"claude","prompt":"p"}]}"#;
        for run in ["ab--x", "cd--x"] {
            let p = Pointer {
                run_id: run.into(),
                slug: "x".into(),
                repo_root: format!("/{run}"),
                project: "r".into(),
                repo: "r".into(),
                branch: None,
                worktree: format!("/{run}"),
                runstate_dir: "/r/runstate".into(),
                created: "2026-01-01T00:00:00.000Z".into(),
            };
            m.pointer("n1", run, &p).unwrap();
            let whole = plan.len().to_string();
            let sub = |f: &str| names::file_subject("n1", run, f);
            m.chunk(&sub("x.plan.json"), Some(&headers(&[("Rw-Offset", "0"), ("Rw-Whole", &whole)])), plan).unwrap();
            m.chunk(&sub("x.jsonl"), Some(&headers(&[("Rw-Offset", "0")])), leased).unwrap();
        }
        // The home's feed, started (`runs watch` there).
        Extender::new(&tmp).extend(Scope::All).unwrap();
        let tomb = headers(&[("Rw-Removed", "1")]);
        let tombstones = |run: &str| {
            for f in ["x.jsonl", "x.plan.json"] {
                m.chunk(&names::file_subject("n1", run, f), Some(&tomb), b"").unwrap();
            }
        };
        // ab--x: its files' tombstones first, then its key.
        tombstones("ab--x");
        m.remove("n1", "ab--x");
        // cd--x: its key first, then its tombstones; and the key's deletion seen again.
        m.remove("n1", "cd--x");
        tombstones("cd--x");
        m.remove("n1", "cd--x");
        let mut said = Vec::new();
        Cursor::new(&Paths::at(&tmp), 0)
            .read(|_, l| {
                if let Line::Event(l) = l {
                    let v: serde_json::Value = serde_json::from_slice(l).unwrap();
                    if v["type"] == "removed" {
                        said.push((v["runId"].as_str().unwrap().to_string(), v["previous"].clone(), v["node"].clone()));
                    }
                }
            })
            .unwrap();
        assert_eq!(
            said,
            [
                ("n1.ab--x".to_string(), "running".into(), "n1".into()),
                ("n1.cd--x".to_string(), "running".into(), "n1".into())
            ]
        );
        assert!(m.removing.lock().unwrap().is_empty(), "nothing kept after the key went");
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
        // A duplicate (replayed) chunk changes nothing: the file never
        // shrinks under its readers, not even between the replayed chunks.
        m.chunk(&s, Some(&headers(&[("Rw-Offset", "0"), ("Rw-Reset", "1")])), b"one\n").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"one\ntwo\n");
        m.chunk(&s, Some(&headers(&[("Rw-Offset", "4")])), b"two\n").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"one\ntwo\n");
        // A generation known to be another (its inode) replaces the file,
        // even when its first chunk is the old one's start.
        let gen = |ino: &'static str| [("Rw-Offset", "0"), ("Rw-Reset", "1"), ("Rw-Ino", ino)];
        m.chunk(&s, Some(&headers(&gen("5"))), b"one\n").unwrap();
        m.chunk(&s, Some(&headers(&[("Rw-Offset", "4"), ("Rw-Ino", "5")])), b"two\n").unwrap();
        m.chunk(&s, Some(&headers(&gen("6"))), b"one\n").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"one\n");
        m.chunk(&s, Some(&headers(&[("Rw-Offset", "4"), ("Rw-Ino", "6")])), b"two\n").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"one\ntwo\n");
        // A gap writes nothing, and says which file (asked for again).
        let gap = m.chunk(&s, Some(&headers(&[("Rw-Offset", "100")])), b"x").unwrap();
        assert_eq!(gap, Applied::Gap { node: "n1".into(), run: "ab--x.y".into(), file: "x.y.t.log".into() });
        assert_eq!(std::fs::read(&path).unwrap(), b"one\ntwo\n");
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
        // Published again whole for a hub that lacked the log: this mirror has it, and keeps it.
        let again = [("Rw-Offset", "0"), ("Rw-Whole", "3"), ("Rw-Republish", "1"), ("Rw-Gen", "7")];
        assert_eq!(m.chunk(&s, Some(&headers(&again)), b"xyz").unwrap(), Applied::Done);
        assert_eq!(std::fs::read(&path).unwrap(), b"new");
        // A mirror that lacks it gets it whole, then the appends after it.
        let log2 = names::file_subject("n1", "ab--x.y", "x.y.u.log");
        let path2 = m.dir("n1", "ab--x.y").join("x.y.u.log");
        assert!(matches!(m.chunk(&log2, Some(&headers(&[("Rw-Offset", "3")])), b"d").unwrap(), Applied::Gap { .. }));
        assert!(m.chunk(&log2, Some(&headers(&again)), b"abc").is_ok());
        m.chunk(&log2, Some(&headers(&[("Rw-Offset", "3"), ("Rw-Gen", "7")])), b"d").unwrap();
        assert_eq!(std::fs::read(&path2).unwrap(), b"abcd");
        // A file its node cannot publish whole: nothing written; said only
        // by a mirror that lacks it.
        let unfit = |size: &'static str| headers(&[("Rw-Unfit", size), ("Rw-Offset", "4"), ("Rw-Ino", "7")]);
        assert_eq!(m.chunk(&log2, Some(&unfit("4")), b"").unwrap(), Applied::Done);
        let lacks = m.chunk(&log2, Some(&unfit("900000")), b"").unwrap();
        let (node, run, file) = ("n1".into(), "ab--x.y".into(), "x.y.u.log".into());
        assert_eq!(lacks, Applied::Unfit { node, run, file, size: 900_000 });
        assert_eq!(std::fs::read(&path2).unwrap(), b"abcd");
        // A tombstone (the run removed at its node) removes the file.
        m.chunk(&log2, Some(&headers(&[("Rw-Removed", "1"), ("Nats-Rollup", "sub")])), b"").unwrap();
        assert!(!path2.exists() && path.exists());
        // Subjects that are not paths are refused.
        assert!(m.chunk("rwfile.n1.run.=2E=2E", Some(&headers(&[("Rw-Offset", "0")])), b"x").is_err());
        std::fs::remove_dir_all(&tmp).unwrap();
    }
}
