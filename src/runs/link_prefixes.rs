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

use crate::control::links::{valid_token_text, Public, PREFIX};
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

/// The prefixes recorded in a home: links under them pass.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LinkPrefixes(Vec<String>);

impl LinkPrefixes {
    /// These prefixes (each `<public-url>/a/`), as a home would record them.
    pub fn new(prefixes: impl IntoIterator<Item = String>) -> LinkPrefixes {
        LinkPrefixes(parse(&prefixes.into_iter().collect::<Vec<_>>().join("\n")))
    }

    /// The home's recorded prefixes; none when the file is absent or
    /// cannot be read (then no link passes). At most [`MAX_PREFIXES`] lines
    /// of at most [`MAX_PREFIX`] bytes are read.
    pub fn read(home: &Path) -> LinkPrefixes {
        let mut text = String::new();
        let cap = (MAX_PREFIXES * (MAX_PREFIX + 1)) as u64;
        let read = std::fs::File::open(path(home)).and_then(|f| f.take(cap).read_to_string(&mut text));
        if read.is_err() {
            return LinkPrefixes::default();
        }
        LinkPrefixes(parse(&text))
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

    /// The links of an open request (as the journal's fold keeps them) that pass.
    pub fn keep_strings(&self, links: &[String]) -> Vec<String> {
        links.iter().filter(|l| self.passes(l)).cloned().collect()
    }
}

/// The lines that can be prefixes, at most the last [`MAX_PREFIXES`].
fn parse(text: &str) -> Vec<String> {
    let mut v: Vec<String> = text
        .lines()
        .filter(|l| !l.is_empty() && l.len() <= MAX_PREFIX && l.ends_with(PREFIX) && l.contains("://"))
        .map(str::to_string)
        .collect();
    let extra = v.len().saturating_sub(MAX_PREFIXES);
    v.drain(..extra);
    v
}

/// Records `public`'s prefix in `home` (nothing when it is there already):
/// under `links/lock`, the file rewritten by temp file + rename, the
/// oldest prefix dropped past [`MAX_PREFIXES`].
pub fn record(home: &Path, public: &Public) -> io::Result<()> {
    let prefix = prefix_of(public);
    if prefix.len() > MAX_PREFIX || prefix.contains(['\n', '\r']) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("the public URL is over {} bytes", MAX_PREFIX - PREFIX.len()),
        ));
    }
    let file = path(home);
    let dir = file.parent().unwrap_or(home);
    std::fs::create_dir_all(dir)?;
    let _one_at_a_time = super::lock_exclusive(&dir.join("lock"))?;
    let text = match std::fs::read_to_string(&file) {
        Ok(t) => t,
        Err(e) if e.kind() == io::ErrorKind::NotFound => String::new(),
        Err(e) => return Err(e),
    };
    let mut v = parse(&text);
    if v.contains(&prefix) {
        return Ok(());
    }
    v.push(prefix);
    let extra = v.len().saturating_sub(MAX_PREFIXES);
    v.drain(..extra);
    let mut out = v.join("\n");
    out.push('\n');
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
}
