//! A node's idempotency keys: every forwarded command carries one, and a
//! key runs once. The keys are remembered in a small append-only file,
//! `$HARNESS_HOME/cluster/control-keys.jsonl`, so a node restarted between
//! a command and its retry still answers the retry with the first answer
//! and acts on nothing twice. A key is its caller's (`Rw-Actor`), as at
//! every door: two people who pick the same key never get each other's
//! answer; `k` is the key as held ([`held_as`]: the pair's hash). A key
//! names one command (its method, route, content type and body: `fp`, the
//! [`command`] fingerprint), as at the node's server: the same key with
//! another command is refused 422, at any hub and after a restart (the
//! node answered it with the first command's reply). One line per event:
//! `{"k":HELD,"t":MS,"actor":…,"key":KEY,"fp":HEX}` when the command starts (before
//! anything is done), `{"k":HELD,"t":MS,"status":N,"body":…}` when it is
//! answered, `{"k":HELD,"t":MS,"status":N,"gone":true}` when its answer is
//! one no door keeps (`runwire::control::keys::kept`: a 502, 503 or 504; a
//! retry asks the node's server again, whose own keys know). A key
//! that started and never got its answer (the node died in between) is
//! answered 409: it may have run, so it is not run again.
//!
//! Bounded: keys older than [`KEEP`] (far longer than any command's budget)
//! are forgotten, at most [`MAX_KEYS`] are kept, and the file is rewritten
//! (atomically) when most of its lines are forgotten ones.

use crate::wire::Answer;
use runwire::control::keys::{fingerprint, from_hex, to_hex, Claim, Fingerprint, Limits};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use runwire::control::keys::held_as;
/// The rule's parts every door shares (`runwire::control::keys`): what a
/// key may be, how long it is remembered (a command's budget is at most a
/// minute), the store itself. This file adds the disk: a key is said
/// "started" before its command runs, and a node restarted in between
/// answers its retry 409.
pub use runwire::control::keys::{valid, KEEP, MAX_KEY};
/// The most keys remembered at once (the oldest go first).
pub const MAX_KEYS: usize = 20_000;

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Line {
    k: String,
    t: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    actor: Option<String>,
    /// The key as its caller gave it (`k` is held as the caller's), for a
    /// person reading the file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    key: Option<String>,
    /// The command the key names ([`command`], hex); a line of an older
    /// node has none, and its key then names no command this one sends.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    fp: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    status: Option<u16>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    body: Option<String>,
    /// The answer's type when it is not JSON (a link's page).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    ctype: Option<String>,
    /// The key was let go: its answer is not kept.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    gone: bool,
}

/// The keys seen, and the file that remembers them.
pub struct Keys {
    path: PathBuf,
    keys: runwire::control::keys::Keys<Answer>,
    /// Lines in the file.
    lines: usize,
}

/// What a key names: the command's method, route, content type and body
/// (the caller is in the key as held). A hub that forwards a retry sends
/// the same bytes; another command under the key is refused.
pub fn command(method: &str, path: &str, content_type: &str, body: &[u8]) -> Fingerprint {
    fingerprint(&[method.as_bytes(), path.as_bytes(), content_type.as_bytes(), body])
}

/// The command of a line that names none (written by an older node).
fn unbound() -> Fingerprint {
    fingerprint(&[])
}

fn limits() -> Limits {
    // Every answer is kept (a control reply; at most the largest body a route takes).
    Limits { max_keys: MAX_KEYS, max_reply: crate::wire::MAX_BODY, ..Limits::default() }
}

fn size(a: &Answer) -> usize {
    a.body.len() + 16
}

impl Keys {
    /// The keys of `home`'s file still in their time (a missing or damaged
    /// line is skipped: the file is a cache of promises, not of data).
    pub fn open(home: &Path) -> Keys {
        let path = home.join("cluster").join("control-keys.jsonl");
        let mut k = Keys { path, keys: runwire::control::keys::Keys::new(limits()), lines: 0 };
        let now = crate::util::now_ms();
        let text = std::fs::read_to_string(&k.path).unwrap_or_default();
        // A key's first line (its start) dates it; a later line with a status is its answer.
        let mut seen: HashMap<String, (u64, Fingerprint, Option<Answer>)> = HashMap::new();
        let mut order = Vec::new();
        for l in text.lines() {
            k.lines += 1;
            let Ok(line) = serde_json::from_str::<Line>(l) else { continue };
            if now.saturating_sub(line.t) > KEEP.as_millis() as u64 || !valid(&line.k) {
                continue;
            }
            if line.gone {
                seen.remove(&line.k);
                continue;
            }
            let answer = line.status.map(|s| Answer {
                status: s,
                body: line.body.unwrap_or_default(),
                content_type: line.ctype,
            });
            let fp = line.fp.as_deref().and_then(from_hex).unwrap_or_else(unbound);
            let e = seen.entry(line.k.clone()).or_insert_with(|| {
                order.push(line.k);
                (line.t, fp, None)
            });
            if answer.is_some() {
                e.2 = answer;
            }
        }
        for key in order {
            if let Some((t, fp, a)) = seen.remove(&key) {
                let age = Duration::from_millis(now.saturating_sub(t));
                k.keys.restore(&key, fp, age, a.map(|a| (a.clone(), size(&a))));
            }
        }
        if k.lines > 2 * k.keys.len() + 64 {
            k.rewrite();
        }
        k
    }

    /// `actor`'s key seen before: its first answer; 422 when it named
    /// another command (`fp`, [`command`]); 409 when it started and was
    /// never answered (the node ended in between: it may have run).
    pub fn get(&self, actor: &str, key: &str, fp: Fingerprint) -> Option<Answer> {
        match self.keys.peek(&held_as(actor, key), fp)? {
            Claim::Replay(a) => Some(a),
            Claim::Conflict => Some(Answer::error(422, runwire::control::keys::conflict_text(key))),
            _ => Some(Answer::error(
                409,
                format!(
                    "the command of idempotency key {key:?} was started and the node ended before it was \
                     answered: it may have run, so it is not run again"
                ),
            )),
        }
    }

    /// The command `fp` of `actor`'s `key` starts (said on disk before anything is done).
    pub fn started(&mut self, actor: &str, key: &str, fp: Fingerprint) {
        let held = held_as(actor, key);
        self.keys.claim(&held, fp, false);
        let line = Line {
            k: held,
            t: crate::util::now_ms(),
            actor: Some(actor.into()),
            key: Some(key.into()),
            fp: Some(to_hex(&fp)),
            status: None,
            body: None,
            ctype: None,
            gone: false,
        };
        self.append(line);
    }

    /// Its answer; one no door keeps ([`runwire::control::keys::kept`])
    /// lets the key go, so a retry runs it (the hub kept a node's 502 for
    /// ever: every retry got it again).
    pub fn done(&mut self, actor: &str, key: &str, a: &Answer) {
        let held = held_as(actor, key);
        let gone = !runwire::control::keys::kept(Some(a.status));
        if gone {
            self.keys.forget(&held);
        } else {
            self.keys.done(&held, a.clone(), size(a));
        }
        let line = Line {
            k: held,
            t: crate::util::now_ms(),
            actor: None,
            key: None,
            fp: None,
            status: Some(a.status),
            body: (!gone).then(|| a.body.clone()),
            ctype: a.content_type.clone(),
            gone,
        };
        self.append(line);
    }

    fn append(&mut self, line: Line) {
        let text = serde_json::to_string(&line).unwrap_or_default();
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
        if self.lines > 2 * self.keys.len() + 1024 {
            self.rewrite();
        }
    }

    /// The file again with the remembered keys only.
    fn rewrite(&mut self) {
        let now = crate::util::now_ms();
        let mut text = String::new();
        let entries = self.keys.entries();
        for (k, age, fp, a) in &entries {
            let line = Line {
                k: k.clone(),
                t: now.saturating_sub(age.as_millis() as u64),
                actor: None,
                key: None,
                fp: Some(to_hex(fp)),
                status: a.as_ref().map(|a| a.status),
                body: a.as_ref().map(|a| a.body.clone()),
                ctype: a.as_ref().and_then(|a| a.content_type.clone()),
                gone: false,
            };
            text.push_str(&serde_json::to_string(&line).unwrap_or_default());
            text.push('\n');
        }
        if runwire::runs::write_atomic(&self.path, text.as_bytes()).is_ok() {
            self.lines = entries.len();
        }
    }

    /// How many keys are remembered.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A command (the same one each time, unless a test says otherwise).
    fn c() -> Fingerprint {
        command("POST", "/runs/r/tasks/t/steer", "application/json", b"{\"msg\":\"go\"}")
    }

    /// A key names its command: the same key with another command (another
    /// route, another body: a kill after a steer) is refused 422, not
    /// answered with the first command's reply, across a reopen too; a
    /// line of an older node (no `fp`) names no command this one sends.
    #[test]
    fn a_key_with_another_command_is_refused_across_a_reopen() {
        let home = std::env::temp_dir().join(format!("rw-keys-cmd-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&home);
        let mut k = Keys::open(&home);
        k.started("ana", "q1", c());
        k.done("ana", "q1", &Answer::json(200, "{\"ok\":true}".into()));
        let kill = command("POST", "/runs/r/tasks/t/kill", "application/json", b"");
        let other_body = command("POST", "/runs/r/tasks/t/steer", "application/json", b"{\"msg\":\"stop\"}");
        for k in [&k, &Keys::open(&home)] {
            assert_eq!(k.get("ana", "q1", c()).map(|a| a.status), Some(200), "the same command: its reply");
            for other in [kill, other_body] {
                let a = k.get("ana", "q1", other).unwrap();
                assert_eq!(a.status, 422, "{a:?}");
                assert!(a.body.contains("used for another command"), "{a:?}");
            }
        }
        let path = home.join("cluster/control-keys.jsonl");
        let old = format!(
            "{{\"k\":\"{}\",\"t\":{},\"status\":200,\"body\":\"{{}}\"}}\n",
            held_as("bob", "k"),
            crate::util::now_ms()
        );
        std::fs::write(&path, old).unwrap();
        assert_eq!(Keys::open(&home).get("bob", "k", c()).map(|a| a.status), Some(422));
        std::fs::remove_dir_all(&home).unwrap();
    }

    #[test]
    fn a_key_is_answered_once_across_a_reopen_and_a_started_one_is_never_run_again() {
        let home = std::env::temp_dir().join(format!("rw-keys-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&home);
        let mut k = Keys::open(&home);
        assert!(k.get("hub", "a", c()).is_none());
        k.started("hub", "a", c());
        k.done("hub", "a", &Answer::json(200, "{\"ok\":true}".into()));
        k.started("hub", "b", c());
        let k = Keys::open(&home);
        assert_eq!(k.get("hub", "a", c()), Some(Answer::json(200, "{\"ok\":true}".into())));
        assert_eq!(k.get("hub", "b", c()).map(|a| a.status), Some(409));
        assert_eq!(k.len(), 2);
        // Old lines are forgotten, and the file is compacted.
        let old = crate::util::now_ms() - KEEP.as_millis() as u64 - 1000;
        let mut text = String::new();
        for i in 0..200 {
            text.push_str(&format!("{{\"k\":\"old{i}\",\"t\":{old},\"status\":200,\"body\":\"\"}}\n"));
        }
        text.push_str("not json\n");
        std::fs::write(home.join("cluster/control-keys.jsonl"), text).unwrap();
        let k = Keys::open(&home);
        assert!(k.is_empty() && k.get("hub", "old1", c()).is_none());
        let after = std::fs::read_to_string(home.join("cluster/control-keys.jsonl")).unwrap();
        assert!(after.is_empty(), "{after}");
        assert!(valid("hub-0a1b") && !valid("") && !valid("a b") && !valid(&"x".repeat(MAX_KEY + 1)));
        std::fs::remove_dir_all(&home).unwrap();
    }

    /// An answer no door keeps (the node's server said 502: its supervisor
    /// took the command and did not answer) lets the key go, across a
    /// reopen too: a retry asks the node's server again, whose own keys
    /// know, instead of getting the 502 for ever.
    #[test]
    fn an_answer_no_door_keeps_lets_the_key_go_across_a_reopen() {
        let home = std::env::temp_dir().join(format!("rw-keys-gone-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&home);
        let mut k = Keys::open(&home);
        for (key, status) in [("bad-gateway", 502), ("unavailable", 503), ("timeout", 504)] {
            k.started("ana", key, c());
            k.done("ana", key, &Answer::error(status, "the supervisor did not answer".into()));
            assert!(k.get("ana", key, c()).is_none(), "{status} kept");
        }
        k.started("ana", "conflict", c());
        k.done("ana", "conflict", &Answer::error(409, "already decided".into()));
        let k = Keys::open(&home);
        assert!(["bad-gateway", "unavailable", "timeout"].iter().all(|key| k.get("ana", key, c()).is_none()));
        assert_eq!(k.get("ana", "conflict", c()).map(|a| a.status), Some(409), "a refusal is kept");
        std::fs::remove_dir_all(&home).unwrap();
    }

    #[test]
    fn a_key_is_held_as_its_callers_across_a_reopen() {
        // Ana's answered key is not Bob's, across a reopen too.
        let home = std::env::temp_dir().join(format!("rw-keys-callers-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&home);
        let mut k = Keys::open(&home);
        k.started("ana", "click-1", c());
        k.done("ana", "click-1", &Answer::json(200, "{}".into()));
        let k = Keys::open(&home);
        assert!(k.get("ana", "click-1", c()).is_some() && k.get("bob", "click-1", c()).is_none());
        std::fs::remove_dir_all(&home).unwrap();
    }
}
