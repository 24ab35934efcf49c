//! Reading the change feed's log: a cursor over its lines from an event
//! id and the filters `runs feed` and `GET /feed` take (following it,
//! which extends the log as it goes, is [`super::follow`]).

use super::super::view;
use super::paths::{open_log, Paths, MAX_EVENT, TYPES};
use serde::Deserialize;
use std::io;
use std::path::{Path, PathBuf};

/// One line of the log, as a [`Cursor`] hands it out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Line<'a> {
    /// A whole event, without its newline.
    Event(&'a [u8]),
    /// A line over [`MAX_EVENT`] (not written by a feed writer: corrupt, or
    /// from elsewhere), skipped unread: its length, newline excluded.
    TooLong(u64),
}

/// Reads the log on from an id: whole lines only, a buffer at a time, so
/// memory is bounded whatever the log holds.
pub struct Cursor {
    file: Option<std::fs::File>,
    path: PathBuf,
    /// The id of the last line handed out (where the next read starts).
    pub pos: u64,
    /// Inside a line over the bound: how far its end has been looked for.
    long: Option<u64>,
    buf: Vec<u8>,
}

impl Cursor {
    pub fn new(paths: &Paths, since: u64) -> Cursor {
        Cursor { file: None, path: paths.log.clone(), pos: since, long: None, buf: Vec::new() }
    }

    /// A cursor on a log already open.
    pub(super) fn on(file: std::fs::File, since: u64) -> Cursor {
        Cursor { file: Some(file), path: PathBuf::new(), pos: since, long: None, buf: Vec::new() }
    }

    /// Calls `f(id, line)` for each whole line past `pos`, in order, until
    /// the end of the log.
    pub fn read(&mut self, mut f: impl FnMut(u64, Line)) -> io::Result<()> {
        while self.read_some(&mut f)? {}
        Ok(())
    }

    /// Reads one buffer ([`MAX_EVENT`] bytes) on: calls `f(id, line)` for
    /// each whole line in it; returns whether there may be more to read.
    /// A log that is not a regular file is an error, never read.
    pub fn read_some(&mut self, mut f: impl FnMut(u64, Line)) -> io::Result<bool> {
        if self.file.is_none() {
            match open_log(&self.path) {
                Ok(file) => self.file = Some(file),
                Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
                Err(e) => return Err(e),
            }
        }
        let Some(file) = self.file.as_ref() else { return Ok(false) };
        use std::os::unix::fs::FileExt;
        self.buf.resize(MAX_EVENT, 0);
        let at = self.long.unwrap_or(self.pos);
        let n = loop {
            match file.read_at(&mut self.buf, at) {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                r => break r?,
            }
        };
        if n == 0 {
            return Ok(false);
        }
        let full = n == self.buf.len();
        let chunk = &self.buf[..n];
        if self.long.is_some() {
            // Looking for the end of a line too long to read: its bytes are not kept.
            match memchr::memchr(b'\n', chunk) {
                Some(i) => {
                    let end = at + i as u64 + 1;
                    f(end, Line::TooLong(end - 1 - self.pos));
                    self.pos = end;
                    self.long = None;
                    return Ok(true);
                }
                None => {
                    self.long = Some(at + n as u64);
                    return Ok(full);
                }
            }
        }
        let mut start = 0;
        for i in memchr::memchr_iter(b'\n', chunk) {
            f(self.pos + i as u64 + 1, Line::Event(&chunk[start..i]));
            start = i + 1;
        }
        self.pos += start as u64;
        if start == 0 && full {
            // A whole buffer and no newline: longer than any event.
            self.long = Some(at + n as u64);
        }
        Ok(full)
    }
}

/// Which events a reader wants (empty lists match everything).
#[derive(Debug, Clone, Default)]
pub struct Filter {
    pub runs: Vec<String>,
    pub statuses: Vec<String>,
    pub repos: Vec<String>,
    pub types: Vec<String>,
}

impl Filter {
    pub fn is_empty(&self) -> bool {
        self.runs.is_empty() && self.statuses.is_empty() && self.repos.is_empty() && self.types.is_empty()
    }

    /// Checks the values that come from a fixed list.
    pub fn validate(&self) -> Result<(), String> {
        for t in &self.types {
            if !TYPES.contains(&t.as_str()) {
                return Err(format!("unknown event type {t:?} (expected one of {})", TYPES.join(", ")));
            }
        }
        for s in &self.statuses {
            if !view::STATUSES.contains(&s.as_str()) {
                return Err(format!("unknown status {s:?} (expected one of {})", view::STATUSES.join(", ")));
            }
        }
        for r in &self.runs {
            super::super::check_run_id("run", r)?;
        }
        Ok(())
    }

    /// Whether the event line passes: its run, its run's status after it,
    /// its repository (name or root) and its type each in their list. A
    /// hub's `node` event (a node lost or up again) has no run: it passes
    /// the run list when it names the node of a run there (`<node>.<run>`),
    /// as that run's state changed with it (the studio's run page).
    pub fn matches(&self, line: &[u8]) -> bool {
        if self.is_empty() {
            return true;
        }
        #[derive(Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct Ev<'a> {
            #[serde(borrow, default)]
            run_id: &'a str,
            #[serde(borrow, default)]
            status: &'a str,
            #[serde(borrow, default)]
            repo: Option<&'a str>,
            #[serde(borrow, default)]
            repo_root: Option<&'a str>,
            #[serde(borrow, default, rename = "type")]
            ty: &'a str,
            #[serde(borrow, default)]
            node: Option<&'a str>,
        }
        let Ok(e) = serde_json::from_slice::<Ev>(line) else { return false };
        let any = |list: &[String], v: &str| list.is_empty() || list.iter().any(|x| x == v);
        let of_node = |r: &String| e.ty == "node" && e.node.is_some() && super::super::node_of(r) == e.node;
        (any(&self.runs, e.run_id) || self.runs.iter().any(of_node))
            && any(&self.statuses, e.status)
            && any(&self.types, e.ty)
            && (self.repos.is_empty()
                || self.repos.iter().any(|r| Some(r.as_str()) == e.repo || Some(r.as_str()) == e.repo_root))
    }
}

/// The report of a skipped line: `<log>: …`.
pub fn too_long(log: &Path, id: u64, len: u64) -> String {
    format!(
        "{}: the line ending at {id} is {len} bytes, over the {} KiB an event takes (skipped)",
        log.display(),
        MAX_EVENT / 1024
    )
}
