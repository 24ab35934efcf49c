//! Where runwire's own approval links live: `$HARNESS_HOME/links/prefixes`,
//! one `<public-url>/a/` a line, recorded by each process that mints links
//! (`runwire-serve --public-url --link-secret-file`, a hub's `--public-url`,
//! `runwire-supervise --public-url --link-secret-file`) before it mints one.
//!
//! A run's journal is its agent's to write (spec/SUPERVISOR.md, "Trust"),
//! so a `links` field in a `requested` record proves nothing: an agent can
//! journal its own "approve" link. The readers that pass links on (the
//! change feed, the run views, `runs notify`) have no link secret to check
//! a token with; they pass on only a link that is a recorded prefix
//! followed by a token's characters ([`LinkPrefixes::passes`]), and drop
//! every other. A forged token under a recorded prefix reaches only the
//! operator's own server, which refuses a bad MAC (403) with nothing done.
//! The file lies in the home, which no agent writes.
//!
//! A prefix is trusted only while a process that recorded it lives: each
//! line names its recorder (`<prefix>\t<pid> <start> <boot id>`,
//! [`crate::util::procid::Ident`]). A server restarted with another
//! `--public-url` leaves its old address behind, where a dead tunnel's name
//! or another user's port may answer now; a link under it is no longer
//! runwire's to vouch for. A link minted by a process that is gone could not
//! act anyway: nothing of runwire serves it.

use crate::control::links::{valid_token_text, Public, PREFIX};
use crate::util::procid::Ident;
use serde_json::Value;
use std::io::{self, Read};
use std::path::{Path, PathBuf};

/// Most prefixes the file keeps: recording one more drops the oldest.
pub const MAX_PREFIXES: usize = 64;
/// Longest prefix recorded or taken, in bytes.
pub const MAX_PREFIX: usize = 2048;

/// `$HARNESS_HOME/links/prefixes`.
pub fn path(home: &Path) -> PathBuf {
    home.join("links").join("prefixes")
}

/// The prefix links minted under `public` start with: `<public-url>/a/`.
pub fn prefix_of(public: &Public) -> String {
    format!("{}{PREFIX}", public.url)
}

/// The prefixes recorded in a home by processes still alive: links under them pass.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LinkPrefixes(Vec<String>);

impl LinkPrefixes {
    /// These prefixes (each `<public-url>/a/`), taken as they are.
    pub fn new(prefixes: impl IntoIterator<Item = String>) -> LinkPrefixes {
        LinkPrefixes(prefixes.into_iter().filter(|p| p.len() <= MAX_PREFIX && p.ends_with(PREFIX)).collect())
    }

    /// The home's prefixes whose recorder lives; none when the file is
    /// absent or cannot be read (then no link passes). It is opened without
    /// blocking and read only when a regular file; at most
    /// [`MAX_PREFIXES`] lines of at most [`MAX_PREFIX`] bytes are read.
    pub fn read(home: &Path) -> LinkPrefixes {
        match read_lines(&path(home)) {
            Ok(lines) => {
                let mut live: Vec<String> = Vec::new();
                for (prefix, _) in lines.into_iter().filter(|(_, by)| by.mismatch().is_none()) {
                    if !live.contains(&prefix) {
                        live.push(prefix);
                    }
                }
                LinkPrefixes(live)
            }
            Err(_) => LinkPrefixes::default(),
        }
    }

    /// Whether `link` is a recorded prefix followed by a token's characters.
    pub fn passes(&self, link: &str) -> bool {
        self.0.iter().any(|p| link.strip_prefix(p.as_str()).is_some_and(|t| !t.is_empty() && valid_token_text(t)))
    }

    /// The links of a record's `links` that pass (strings only: runwire
    /// journals its links as strings); `None` when none does.
    pub fn keep(&self, links: &Value) -> Option<Value> {
        let kept: Vec<Value> =
            links.as_array()?.iter().filter(|l| l.as_str().is_some_and(|l| self.passes(l))).cloned().collect();
        (!kept.is_empty()).then_some(Value::Array(kept))
    }

    /// SSE frames of feed events with each event's `links` kept to those
    /// that pass (the key gone when none does); a line that is no JSON
    /// object is left as it is.
    pub fn scrub_sse(&self, frames: &[u8]) -> Vec<u8> {
        let mut out = Vec::with_capacity(frames.len());
        for line in frames.split_inclusive(|b| *b == b'\n') {
            let scrubbed = line
                .strip_prefix(b"data: ")
                .and_then(|d| serde_json::from_slice::<serde_json::Map<String, Value>>(d.trim_ascii_end()).ok())
                .filter(|ev| ev.contains_key("links"))
                .map(|mut ev| {
                    match ev.get("links").and_then(|l| self.keep(l)) {
                        Some(kept) => ev.insert("links".into(), kept),
                        None => ev.remove("links"),
                    };
                    format!("data: {}\n", Value::Object(ev))
                });
            match scrubbed {
                Some(l) => out.extend_from_slice(l.as_bytes()),
                None => out.extend_from_slice(line),
            }
        }
        out
    }

    /// The links of an open request (as the journal's fold keeps them) that pass.
    pub fn keep_strings(&self, links: &[String]) -> Vec<String> {
        links.iter().filter(|l| self.passes(l)).cloned().collect()
    }
}

/// The file's lines that are a prefix and its recorder, at most the last
/// [`MAX_PREFIXES`]; `Ok(empty)` when there is no file.
fn read_lines(file: &Path) -> io::Result<Vec<(String, Ident)>> {
    use std::os::unix::fs::OpenOptionsExt;
    let f = match std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NONBLOCK | nix::libc::O_NOFOLLOW)
        .open(file)
    {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    if !f.metadata()?.is_file() {
        return Err(io::Error::other("not a regular file"));
    }
    let mut text = String::new();
    let cap = (MAX_PREFIXES * (MAX_PREFIX + 128)) as u64;
    f.take(cap).read_to_string(&mut text)?;
    let mut v: Vec<(String, Ident)> = text.lines().filter_map(parse_line).collect();
    let extra = v.len().saturating_sub(MAX_PREFIXES);
    v.drain(..extra);
    Ok(v)
}

/// `<prefix>\t<pid> <start> <boot id>`.
fn parse_line(l: &str) -> Option<(String, Ident)> {
    let (prefix, by) = l.split_once('\t')?;
    if prefix.is_empty() || prefix.len() > MAX_PREFIX || !prefix.ends_with(PREFIX) || !prefix.contains("://") {
        return None;
    }
    let mut f = by.split(' ');
    let by = Ident { pid: f.next()?.parse().ok()?, start: f.next()?.parse().ok()?, boot_id: f.next()?.to_string() };
    Some((prefix.to_string(), by))
}

/// Records `public`'s prefix in `home` as this process's, under
/// `links/lock`: the file rewritten by temp file + rename, the lines of
/// recorders that are gone dropped, the oldest dropped past [`MAX_PREFIXES`].
pub fn record(home: &Path, public: &Public) -> io::Result<()> {
    let prefix = prefix_of(public);
    if prefix.len() > MAX_PREFIX || prefix.contains(['\n', '\r', '\t']) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("the public URL is over {} bytes", MAX_PREFIX - PREFIX.len()),
        ));
    }
    let me = Ident::me().ok_or_else(|| io::Error::other("cannot read this process's identity in /proc"))?;
    let file = path(home);
    let dir = file.parent().unwrap_or(home);
    std::fs::create_dir_all(dir)?;
    let _one_at_a_time = super::lock_exclusive(&dir.join("lock"))?;
    let mut v = read_lines(&file)?;
    v.retain(|(_, by)| by.mismatch().is_none());
    if !v.iter().any(|(p, by)| *p == prefix && *by == me) {
        v.push((prefix, me));
    }
    let extra = v.len().saturating_sub(MAX_PREFIXES);
    v.drain(..extra);
    let out: String = v.iter().map(|(p, by)| format!("{p}\t{} {} {}\n", by.pid, by.start, by.boot_id)).collect();
    super::write_atomic(&file, out.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn home(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("rw-link-prefixes-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    #[test]
    fn only_links_under_a_recorded_prefix_pass() {
        let h = home("pass");
        assert!(!LinkPrefixes::read(&h).passes("https://rw.example/a/abc.def"), "nothing recorded: nothing passes");
        record(&h, &Public::parse("https://rw.example/base/").unwrap()).unwrap();
        let p = LinkPrefixes::read(&h);
        assert!(p.passes("https://rw.example/base/a/eyJy.c2ln"));
        for bad in [
            "http://evil.example/approve",
            "https://rw.example/a/eyJy.c2ln",
            "https://rw.example/base/a/",
            "https://rw.example/base/a/x/../../../evil",
            "https://rw.example/base/a/eyJy.c2ln?then=http://evil",
            "https://rw.example.evil/base/a/eyJy.c2ln",
        ] {
            assert!(!p.passes(bad), "{bad}");
        }
        let kept = p.keep(&serde_json::json!(["https://rw.example/base/a/t.m", "http://evil/a/t.m", {"url": "x"}]));
        assert_eq!(kept, Some(serde_json::json!(["https://rw.example/base/a/t.m"])));
        assert_eq!(p.keep(&serde_json::json!([{"url": "https://rw.example/base/a/t.m"}])), None);
        let _ = std::fs::remove_dir_all(&h);
    }

    #[test]
    fn recording_is_idempotent_and_bounded() {
        let h = home("bound");
        let public = |i: usize| Public::parse(&format!("https://n{i}.example")).unwrap();
        for i in 0..MAX_PREFIXES + 3 {
            record(&h, &public(i)).unwrap();
            record(&h, &public(i)).unwrap();
        }
        let p = LinkPrefixes::read(&h);
        assert_eq!(p.0.len(), MAX_PREFIXES);
        assert!(
            !p.passes("https://n0.example/a/t.m") && p.passes(&format!("https://n{}.example/a/t.m", MAX_PREFIXES + 2))
        );
        let long = Public::parse(&format!("https://x.example/{}", "p".repeat(MAX_PREFIX))).unwrap();
        assert!(record(&h, &long).is_err());
        let _ = std::fs::remove_dir_all(&h);
    }
    /// A prefix is trusted only while its recorder lives: a server restarted
    /// with another `--public-url` leaves its old address behind, untrusted,
    /// and the next record drops its line.
    #[test]
    fn a_prefix_whose_recorder_is_gone_passes_nothing_and_is_dropped() {
        let h = home("gone");
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let dead = Ident::of(child.id() as i32);
        child.wait().unwrap();
        // Its identity as recorded while it lived (a zombie has none: the
        // start time is read now, which a reaped pid no longer has).
        let dead = dead.unwrap_or(Ident { pid: child.id() as i32, start: 1, boot_id: "b".into() });
        let old = "https://old-tunnel.example/a/";
        std::fs::create_dir_all(h.join("links")).unwrap();
        std::fs::write(path(&h), format!("{old}\t{} {} {}\n", dead.pid, dead.start, dead.boot_id)).unwrap();
        assert!(!LinkPrefixes::read(&h).passes("https://old-tunnel.example/a/eyJy.c2ln"));
        record(&h, &Public::parse("https://new.example").unwrap()).unwrap();
        let p = LinkPrefixes::read(&h);
        assert!(p.passes("https://new.example/a/eyJy.c2ln") && !p.passes("https://old-tunnel.example/a/eyJy.c2ln"));
        assert!(!std::fs::read_to_string(path(&h)).unwrap().contains(old), "the dead recorder's line stays");
        let _ = std::fs::remove_dir_all(&h);
    }

    /// A FIFO (or anything but a regular file) where the prefixes belong
    /// blocks no reader and no recorder: none pass, recording says why.
    #[test]
    fn a_fifo_for_the_prefixes_blocks_nothing() {
        let h = home("fifo");
        std::fs::create_dir_all(h.join("links")).unwrap();
        nix::unistd::mkfifo(&path(&h), nix::sys::stat::Mode::S_IRUSR | nix::sys::stat::Mode::S_IWUSR).unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let h2 = h.clone();
        std::thread::spawn(move || {
            let read = LinkPrefixes::read(&h2);
            let recorded = record(&h2, &Public::parse("https://rw.example").unwrap());
            let _ = tx.send((read, recorded.is_err()));
        });
        let (read, refused) = rx.recv_timeout(std::time::Duration::from_secs(5)).expect("a FIFO blocked a reader");
        assert_eq!(read, LinkPrefixes::default());
        assert!(refused, "a FIFO was recorded into");
        let _ = std::fs::remove_dir_all(&h);
    }
    #[test]
    fn a_relayed_feed_frame_keeps_only_links_that_pass() {
        let p = LinkPrefixes::new(["https://hub.example/a/".to_string()]);
        let frames = concat!(
            "id: 7\nevent: needs_input\ndata: {\"id\":7,\"links\":[\"https://hub.example/a/t.m\",\"http://evil.example/a/t.m\"]}\n\n",
            "id: 8\nevent: needs_input\ndata: {\"id\":8,\"links\":[\"http://evil.example/a/t.m\"]}\n\n",
            ": keep-alive\n\n"
        );
        let out = String::from_utf8(p.scrub_sse(frames.as_bytes())).unwrap();
        assert!(!out.contains("evil"), "{out}");
        assert!(out.contains(r#"data: {"id":7,"links":["https://hub.example/a/t.m"]}"#), "{out}");
        assert!(out.contains("id: 8\nevent: needs_input\ndata: {\"id\":8}\n\n"), "{out}");
        assert!(out.ends_with(": keep-alive\n\n"), "{out}");
    }
}
