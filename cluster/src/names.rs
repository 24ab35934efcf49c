//! The cluster's names: streams, buckets, subjects and message ids
//! (spec/CLUSTER.md, "Subjects"), and the encoding of runwire ids into
//! subject tokens and KV keys.
//!
//! Run and task ids may contain `.`, NATS's token separator, so every id is
//! encoded into one token: `=` escapes, `.` becomes `=2E` (and `=` itself
//! `=3D`, though no valid id has one). The result matches both a subject
//! token and a KV key (`[-/_=.a-zA-Z0-9]+` with no `.`).

/// The stream of every node's feed events: subject `rwfeed.<node>`.
pub const FEED_STREAM: &str = "RUNWIRE_FEED";
/// The stream of every node's run files: `rwfile.<node>.<run>.<file>`.
pub const FILES_STREAM: &str = "RUNWIRE_FILES";
/// The KV bucket of run summaries: key `<node>.<run>`.
pub const RUNS_BUCKET: &str = "runwire-runs";
/// The KV bucket of node heartbeats: key `<node>`.
pub const NODES_BUCKET: &str = "runwire-nodes";
/// The KV bucket of AG-UI threads' nodes: key [`thread_key`], value the
/// node's name, so any hub continues a thread another hub started.
pub const THREADS_BUCKET: &str = "runwire-threads";

/// The KV key of an AG-UI thread: 32 hex characters of the SHA-256 of its
/// id (a thread id is the client's: any characters, any length).
pub fn thread_key(thread: &str) -> String {
    runwire::runs::sha256::hex(thread.as_bytes())[..32].to_string()
}

/// Headers carried by the cluster's messages.
pub mod header {
    /// Feed events: the event's id in the node's own feed log.
    pub const ID: &str = "Rw-Id";
    /// File chunks: the byte offset of the chunk in the file.
    pub const OFFSET: &str = "Rw-Offset";
    /// File chunks: the file's inode on the node (a new inode is a new file).
    pub const INO: &str = "Rw-Ino";
    /// File chunks: the file's modification time on the node (ns since the epoch).
    pub const MTIME: &str = "Rw-Mtime";
    /// File chunks: the first chunk of a new generation of the file (truncate first).
    pub const RESET: &str = "Rw-Reset";
    /// File chunks of a file published whole (the plan): its total size.
    pub const WHOLE: &str = "Rw-Whole";
    /// File chunks published again at a hub's request (`rwsync.<node>`),
    /// and every chunk after them: the republish's generation (ms since
    /// the epoch), in the message ids too, so the duplicate window does not
    /// drop them as the chunks they repeat.
    pub const GEN: &str = "Rw-Gen";
    /// A file published again whole at a hub's request: a hub that has it
    /// already (at least this long) keeps its copy.
    pub const REPUBLISH: &str = "Rw-Republish";
    /// A file its node cannot publish whole again: larger than three
    /// quarters of the files stream's byte limit. One empty message, the
    /// file's size; a hub that lacks the file's start says so and stops
    /// asking for it.
    pub const UNFIT: &str = "Rw-Unfit";
    /// The tombstone of a file whose run was removed at its node (`runs
    /// rm`): one empty message rolling up the file's subject.
    pub const REMOVED: &str = "Rw-Removed";
}

/// The subject on which a node takes a hub's requests to publish files
/// again: `{"run": RUN}` (all its files) or `{"run": RUN, "file": FILE}`.
pub fn sync_subject(node: &str) -> String {
    format!("rwsync.{node}")
}

/// Whether `s` is a valid node name: the server's one rule (`runwire::runs::valid_node`).
pub fn valid_node(s: &str) -> bool {
    runwire::runs::valid_node(s)
}

/// Checks a node name, saying what is wrong.
pub fn check_node(s: &str) -> Result<(), String> {
    if valid_node(s) {
        Ok(())
    } else {
        Err(format!("node name {s:?} is not valid: {}", runwire::runs::NODE_RULE))
    }
}

/// One id as one subject token (and KV key part).
pub fn token(id: &str) -> String {
    let mut out = String::with_capacity(id.len());
    for c in id.chars() {
        match c {
            '.' => out.push_str("=2E"),
            '=' => out.push_str("=3D"),
            c => out.push(c),
        }
    }
    out
}

/// The id a [`token`] encodes; `None` for a token no id gives.
pub fn untoken(tok: &str) -> Option<String> {
    if tok.contains(['.', '*', '>', ' ']) {
        return None;
    }
    let mut out = String::with_capacity(tok.len());
    let mut rest = tok;
    while let Some(i) = rest.find('=') {
        out.push_str(&rest[..i]);
        match rest.get(i..i + 3) {
            Some("=2E") => out.push('.'),
            Some("=3D") => out.push('='),
            _ => return None,
        }
        rest = &rest[i + 3..];
    }
    out.push_str(rest);
    (!out.is_empty()).then_some(out)
}

/// The subject of a node's feed events.
pub fn feed_subject(node: &str) -> String {
    format!("rwfeed.{node}")
}

/// The subject of one file of one run.
pub fn file_subject(node: &str, run: &str, file: &str) -> String {
    format!("rwfile.{node}.{}.{}", token(run), token(file))
}

/// The core NATS subject on which a node also sends what it appends to a
/// task's log and arrival times as it reads it (`rwlive.<node>.<run>.<file>`,
/// nothing stored): a hub writes it into its mirror at once when it
/// continues what the stream gave it (spec/CLUSTER.md, "Live tail").
pub fn live_subject(node: &str, run: &str, file: &str) -> String {
    format!("rwlive.{node}.{}.{}", token(run), token(file))
}

/// A file of a runstate directory the live tail may carry: an append-only
/// log (a task's, its gate's, its reviewer's) or a task's arrival times.
pub fn live_file(name: &str) -> bool {
    name.ends_with(".log") || name.ends_with(".log.at")
}

/// The file subject a live subject stands for: `rwlive.` taken for `rwfile.`.
pub fn file_of_live(subject: &str) -> Option<String> {
    subject.strip_prefix("rwlive.").map(|rest| format!("rwfile.{rest}"))
}

/// `(node, run, file)` of a file subject, checked: `None` for anything the
/// hub must not turn into a path.
pub fn parse_file_subject(subject: &str) -> Option<(String, String, String)> {
    let mut it = subject.split('.');
    let (Some("rwfile"), Some(node), Some(run), Some(file), None) =
        (it.next(), it.next(), it.next(), it.next(), it.next())
    else {
        return None;
    };
    let (run, file) = (untoken(run)?, untoken(file)?);
    (valid_node(node) && runwire::runs::valid_id(&run) && valid_file(&file)).then(|| (node.to_string(), run, file))
}

/// A file name the cluster carries: `<slug>.jsonl`, `<slug>.plan.json`,
/// `<slug>.<task>.log`, `<slug>.<task>.log.at`, `<slug>.<task>.gate.log`,
/// `<slug>.<task>.review.log`. The id characters, no `..`,
/// not hidden, at most 300 bytes: never a path.
pub fn valid_file(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 300
        && !s.starts_with('.')
        && !s.contains("..")
        && s.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

/// The stream that holds a KV bucket's values.
pub fn kv_stream(bucket: &str) -> String {
    format!("KV_{bucket}")
}

/// The KV key of a run: `<node>.<run token>`.
pub fn run_key(node: &str, run: &str) -> String {
    format!("{node}.{}", token(run))
}

/// `(node, run)` of a run key, checked.
pub fn parse_run_key(key: &str) -> Option<(String, String)> {
    let (node, run) = key.split_once('.')?;
    let run = untoken(run)?;
    (valid_node(node) && runwire::runs::valid_id(&run)).then(|| (node.to_string(), run))
}

/// The message id of a file chunk: JetStream drops a second message with
/// the same id within its duplicate window.
pub fn chunk_id(node: &str, run: &str, file: &str, ino: u64, offset: u64) -> String {
    format!("{node}/{run}/{file}/{ino}/{offset}")
}

/// The message id of a feed event.
pub fn feed_id(node: &str, id: u64) -> String {
    format!("{node}/feed/{id}")
}

/// The id of a node's run at a hub: `<node>.<run>` (an id too: node names
/// have no dot, and `.` is an id character).
pub fn hub_run_id(node: &str, run: &str) -> String {
    format!("{node}.{run}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_round_trip_and_have_no_dot() {
        for id in ["abc", "a.b", "0123456789ab--feat.x", "x=y", "a..b", "=2E", "-_"] {
            let t = token(id);
            assert!(!t.contains('.'), "{t}");
            assert!(t.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_=".contains(&b)), "{t}");
            assert_eq!(untoken(&t).as_deref(), Some(id), "{id}");
        }
        assert_eq!(token("a.b"), "a=2Eb");
        assert_eq!(untoken("a=2"), None);
        assert_eq!(untoken("a=41"), None);
        assert_eq!(untoken(""), None);
    }

    #[test]
    fn subjects_parse_back_and_refuse_paths() {
        let s = file_subject("n1", "0123456789ab--feat.x", "feat.x.impl.log");
        assert_eq!(s, "rwfile.n1.0123456789ab--feat=2Ex.feat=2Ex=2Eimpl=2Elog");
        assert_eq!(
            parse_file_subject(&s),
            Some(("n1".into(), "0123456789ab--feat.x".into(), "feat.x.impl.log".into()))
        );
        for bad in [
            "rwfile.n1.run.=2E=2E",
            "rwfile.n1.run.a/b",
            "rwfile.n.1.run.f",
            "rwfile.n1.run",
            "rwfeed.n1.run.f",
            "rwfile.n1.=2Erun.f",
            "rwfile.n1.run.f.g",
        ] {
            assert_eq!(parse_file_subject(bad), None, "{bad}");
        }
        assert_eq!(parse_run_key(&run_key("n-1", "ab--x.y")), Some(("n-1".into(), "ab--x.y".into())));
        assert_eq!(parse_run_key("n.1.x"), None);
        assert!(valid_node("a_B-9") && !valid_node("a.b") && !valid_node("") && !valid_node("a*"));
    }
}
