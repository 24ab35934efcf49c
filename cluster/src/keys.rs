//! A node's idempotency keys: every forwarded command carries one, and a
//! key runs once. The keys are remembered in a small append-only file,
//! `$HARNESS_HOME/cluster/control-keys.jsonl`, so a node restarted between
//! a command and its retry still answers the retry with the first answer
//! and acts on nothing twice. One line per event:
//! `{"k":KEY,"t":MS,"actor":…}` when the command starts (before anything is
//! done), `{"k":KEY,"t":MS,"status":N,"body":…}` when it is answered. A key
//! that started and never got its answer (the node died in between) is
//! answered 409: it may have run, so it is not run again.
//!
//! Bounded: keys older than [`KEEP`] (far longer than any command's budget)
//! are forgotten, at most [`MAX_KEYS`] are kept, and the file is rewritten
//! (atomically) when most of its lines are forgotten ones.

use crate::forward::Answer;
use serde::{Deserialize, Serialize};
use std::collections::{HashMap, VecDeque};
use std::io::Write;
use std::path::{Path, PathBuf};

/// The rule's parts every door shares (`runwire::control::keys`): what a
/// key may be and how long it is remembered (a command's budget is at most
/// a minute). This store keeps its own map because its keys live on disk,
/// are said "started" before the command runs and carry no fingerprint (a
/// large body arrives after the key is looked up); the node passes the key
/// on to its server, whose store binds it to the request.
pub use runwire::control::keys::{valid, KEEP, MAX_KEY};
/// The most keys remembered at once (the oldest go first).
pub const MAX_KEYS: usize = 20_000;

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Line {
    k: String,
    t: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    actor: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    status: Option<u16>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    body: Option<String>,
}

/// The keys seen, and the file that remembers them.
pub struct Keys {
    path: PathBuf,
    map: HashMap<String, (u64, Option<Answer>)>,
    order: VecDeque<(u64, String)>,
    /// Lines in the file.
    lines: usize,
}

impl Keys {
    /// The keys of `home`'s file still in their time (a missing or damaged
    /// line is skipped: the file is a cache of promises, not of data).
    pub fn open(home: &Path) -> Keys {
        let path = home.join("cluster").join("control-keys.jsonl");
        let mut k = Keys { path, map: HashMap::new(), order: VecDeque::new(), lines: 0 };
        let now = crate::node::now_ms();
        let text = std::fs::read_to_string(&k.path).unwrap_or_default();
        for l in text.lines() {
            k.lines += 1;
            let Ok(line) = serde_json::from_str::<Line>(l) else { continue };
            if now.saturating_sub(line.t) > KEEP.as_millis() as u64 || !valid(&line.k) {
                continue;
            }
            k.remember(line);
        }
        k.prune(now);
        if k.lines > 2 * k.map.len() + 64 {
            k.rewrite();
        }
        k
    }

    fn remember(&mut self, line: Line) {
        let answer = line.status.map(|s| Answer { status: s, body: line.body.unwrap_or_default() });
        if !self.map.contains_key(&line.k) {
            self.order.push_back((line.t, line.k.clone()));
        }
        let e = self.map.entry(line.k).or_insert((line.t, None));
        if answer.is_some() {
            e.1 = answer;
        }
    }

    /// A key seen before: its first answer; 409 when it started and was
    /// never answered (the node ended in between: it may have run).
    pub fn get(&self, key: &str) -> Option<Answer> {
        let (_, a) = self.map.get(key)?;
        Some(a.clone().unwrap_or_else(|| {
            Answer {
                status: 409,
                body: serde_json::json!({"error": format!(
                    "the command of idempotency key {key:?} was started and the node ended before it was \
                     answered: it may have run, so it is not run again"
                )})
                .to_string(),
            }
        }))
    }

    /// The command of `key` starts (said on disk before anything is done).
    pub fn started(&mut self, key: &str, actor: &str) {
        let line =
            Line { k: key.into(), t: crate::node::now_ms(), actor: Some(actor.into()), status: None, body: None };
        self.append(line);
    }

    /// Its answer.
    pub fn done(&mut self, key: &str, a: &Answer) {
        let line = Line {
            k: key.into(),
            t: crate::node::now_ms(),
            actor: None,
            status: Some(a.status),
            body: Some(a.body.clone()),
        };
        self.append(line);
    }

    fn append(&mut self, line: Line) {
        let text = serde_json::to_string(&line).unwrap_or_default();
        let t = line.t;
        self.remember(line);
        let w = (|| {
            if let Some(d) = self.path.parent() {
                std::fs::create_dir_all(d)?;
            }
            let mut f = std::fs::OpenOptions::new().create(true).append(true).open(&self.path)?;
            f.write_all(format!("{text}\n").as_bytes())
        })();
        if let Err(e) = w {
            crate::report(format!("control: {}: {e} (keys kept in memory only)", self.path.display()));
        }
        self.lines += 1;
        self.prune(t);
        if self.lines > 2 * self.map.len() + 1024 {
            self.rewrite();
        }
    }

    fn prune(&mut self, now: u64) {
        while let Some((t, k)) = self.order.front() {
            if now.saturating_sub(*t) <= KEEP.as_millis() as u64 && self.order.len() <= MAX_KEYS {
                break;
            }
            self.map.remove(k);
            self.order.pop_front();
        }
    }

    /// The file again with the remembered keys only.
    fn rewrite(&mut self) {
        let mut text = String::new();
        for (t, k) in &self.order {
            if let Some((_, a)) = self.map.get(k) {
                let line = Line {
                    k: k.clone(),
                    t: *t,
                    actor: None,
                    status: a.as_ref().map(|a| a.status),
                    body: a.as_ref().map(|a| a.body.clone()),
                };
                text.push_str(&serde_json::to_string(&line).unwrap_or_default());
                text.push('\n');
            }
        }
        if runwire::runs::write_atomic(&self.path, text.as_bytes()).is_ok() {
            self.lines = self.map.len();
        }
    }

    /// How many keys are remembered.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_is_answered_once_across_a_reopen_and_a_started_one_is_never_run_again() {
        let home = std::env::temp_dir().join(format!("rw-keys-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&home);
        let mut k = Keys::open(&home);
        assert!(k.get("a").is_none());
        k.started("a", "hub");
        k.done("a", &Answer { status: 200, body: "{\"ok\":true}".into() });
        k.started("b", "hub");
        let k = Keys::open(&home);
        assert_eq!(k.get("a"), Some(Answer { status: 200, body: "{\"ok\":true}".into() }));
        assert_eq!(k.get("b").map(|a| a.status), Some(409));
        assert_eq!(k.len(), 2);
        // Old lines are forgotten, and the file is compacted.
        let old = crate::node::now_ms() - KEEP.as_millis() as u64 - 1000;
        let mut text = String::new();
        for i in 0..200 {
            text.push_str(&format!("{{\"k\":\"old{i}\",\"t\":{old},\"status\":200,\"body\":\"\"}}\n"));
        }
        text.push_str("not json\n");
        std::fs::write(home.join("cluster/control-keys.jsonl"), text).unwrap();
        let k = Keys::open(&home);
        assert!(k.is_empty() && k.get("old1").is_none());
        let after = std::fs::read_to_string(home.join("cluster/control-keys.jsonl")).unwrap();
        assert!(after.is_empty(), "{after}");
        assert!(valid("hub-0a1b") && !valid("") && !valid("a b") && !valid(&"x".repeat(MAX_KEY + 1)));
        std::fs::remove_dir_all(&home).unwrap();
    }
}
