//! Whether a run still going has a process working on it: the `supervisor`
//! field of its views (`runs list|show`, `GET /runs`, `GET /runs/:id`;
//! spec/LAYOUT.md, "Who runs a run").
//!
//! A run's status is its journal's (spec/LAYOUT.md, "Run statuses"): a
//! supervisor killed with SIGKILL, or a machine rebooted, journals nothing,
//! so its run stays `running` (or `needs_input`, `paused`…) until a
//! supervisor starts on it again. The status stays so; beside it, a run not
//! ended whose owner record (`$HARNESS_HOME/sock/<runId>.owner.json`,
//! [`Owner`]) names a process gone (pid, start time and boot id, never the
//! run's own directory: spec/SUPERVISOR.md, "Trust") gets
//! `"supervisor":"gone"` and a `reason` that says so and what to do;
//! `"supervisor":"live"` while that process runs. A run with no owner
//! record (registered for another runner, or ended) gets no field. Judged
//! at read time, never kept in the run index: only the listing's rows not
//! ended pay for it (one small file and `/proc`).
//!
//! A death is also news: `runwire-serve` looks every [`WATCH_EVERY`] for
//! owners gone ([`Watch`]) and journals one `supervisor-gone` run record
//! for each (its detail the reason), so the change feed carries it and a
//! hub's mirror of the journal says it too: a run's summary is
//! `"supervisor":"gone"` from its journal while no `started` follows that
//! record (`runs::view`), which an owner record found live overrides.

use super::socket::Owner;
use crate::runs::list::Page;
use crate::runs::nodes::GOING;
use serde_json::{Map, Value};
use std::path::Path;
use std::sync::Arc;

/// What a run's owner record says of its owner now.
#[derive(Debug, Clone, PartialEq)]
pub enum Judged {
    Live,
    /// There but stopped (SIGSTOP, a terminal's Ctrl-Z), and the one line
    /// that says so: it takes no command and runs nothing on until continued.
    Stopped(String),
    /// Gone, and the one line that says so.
    Gone(String),
}

/// The judgement of run `run_id` with status `status`: `None` for a run
/// ended (or of a status that is no run's going on) or with no owner record.
pub fn judge(home: &Path, run_id: &str, status: &str) -> Option<Judged> {
    if !GOING.contains(&status) || !crate::runs::valid_id(run_id) {
        return None;
    }
    let owner = Owner::read(home, run_id)?;
    let pid = owner.supervisor.pid;
    // runwire-serve records its own runs' owner too (itself): another way to carry them on.
    let by_server = || {
        let ours = home.join("serve").join("runstate");
        crate::runs::registry::Registry::at(home).read(run_id).is_ok_and(|p| Path::new(&p.runstate_dir) == ours)
    };
    if owner.supervisor.mismatch().is_none() {
        if !owner.supervisor.stopped() {
            return Some(Judged::Live);
        }
        let who = if by_server() { "server" } else { "supervisor" };
        return Some(Judged::Stopped(format!(
            "its {who} (pid {pid}) is stopped (SIGSTOP, or Ctrl-Z in its terminal): it takes no command and runs \
             nothing on until it continues (kill -CONT {pid}, or fg)"
        )));
    }
    Some(Judged::Gone(if by_server() {
        format!(
            "its server (pid {pid}) is gone: nothing runs it; start runwire-serve on this home again to journal how it ended"
        )
    } else {
        format!(
            "its supervisor (pid {pid}) is gone: nothing runs it; start runwire-supervise on its plan again to continue"
        )
    }))
}

/// Adds the judgement to a run's summary (a listing's item, a view's
/// `run`): `supervisor`, and when stopped or gone a `reason` (a summary not ended has
/// none of its own: spec/LAYOUT.md, "Run statuses"). Whether it added any.
pub fn annotate(home: &Path, run: &mut Map<String, Value>) -> bool {
    let (Some(id), Some(status)) =
        (run.get("runId").and_then(Value::as_str), run.get("status").and_then(Value::as_str))
    else {
        return false;
    };
    match judge(home, id, status) {
        None => return false,
        Some(Judged::Live) => {
            // Over a journal's `supervisor-gone` (its summary's field and
            // reason): a supervisor started again, its `started` not yet written.
            if run.get("supervisor").and_then(Value::as_str) == Some("gone") {
                run.insert("reason".into(), Value::Null);
            }
            run.insert("supervisor".into(), "live".into());
        }
        Some(Judged::Stopped(why)) => {
            // Over a journal's note that it was gone, as for live.
            let noted_gone = run.get("supervisor").and_then(Value::as_str) == Some("gone");
            if noted_gone || run.get("reason").is_none_or(Value::is_null) {
                run.insert("reason".into(), why.into());
            }
            run.insert("supervisor".into(), "stopped".into());
        }
        Some(Judged::Gone(why)) => {
            run.insert("supervisor".into(), "gone".into());
            if run.get("reason").is_none_or(Value::is_null) {
                run.insert("reason".into(), why.into());
            }
        }
    }
    true
}

/// The status of a summary's text, read without parsing it whole (its keys
/// are sorted, and a string's quotes are escaped: the first `"status":"`
/// is the key's).
fn status_of(summary: &str) -> Option<&str> {
    let (_, rest) = summary.split_once(r#""status":""#)?;
    Some(rest.split_once('"')?.0)
}

/// A listing (`GET /runs`, `runs list`): each item not ended [`annotate`]d.
pub fn add_to_page(home: &Path, page: &mut Page) {
    for item in &mut page.items {
        if !status_of(item).is_some_and(|s| GOING.contains(&s)) {
            continue;
        }
        let Ok(Value::Object(mut run)) = serde_json::from_str::<Value>(item) else { continue };
        if annotate(home, &mut run) {
            *item = Arc::from(Value::Object(run).to_string());
        }
    }
}

/// A run's view (`GET /runs/:id`, `runs show`): its `run` [`annotate`]d.
pub fn add_to_view(home: &Path, view: &mut Value) {
    if let Some(run) = view.get_mut("run").and_then(Value::as_object_mut) {
        annotate(home, run);
    }
}

/// How often `runwire-serve` looks for owners gone ([`Watch`]).
pub const WATCH_EVERY: std::time::Duration = std::time::Duration::from_secs(2);

/// An owner as [`Watch`] remembers it: the run, and the process's pid and start.
type Seen = (String, i32, u64);

/// `runwire-serve`'s look for owners gone: each round lists
/// `$HARNESS_HOME/sock/*.owner.json` (exactly the runs with an owner) and
/// reads each record; an owner that runs costs nothing more. One gone is
/// [`judge`]d once (its run's files read then, not each round): a run still
/// going gets one `supervisor-gone` run record, its detail the reason,
/// through the journal's one writer and under its lock, and not when its
/// journal already says so for that reason with no `started` since (two
/// servers on one home write it once).
#[derive(Default)]
pub struct Watch {
    /// Owners gone already judged (noted, found noted, or nothing to note).
    seen: std::collections::HashSet<Seen>,
    /// Owners whose note could not be written: tried again each round, said once.
    failed: std::collections::HashSet<Seen>,
}

/// What a [`Watch`] round did for one run.
#[derive(Debug)]
pub enum Noted {
    /// Its `supervisor-gone` record was written, with this reason.
    Wrote { run: String, why: String },
    /// It could not be (said once per owner): the run and why.
    Failed { run: String, error: String },
}

impl Watch {
    /// One round over `home`'s owner records; `actor` is the notes' writer.
    pub fn round(&mut self, home: &Path, actor: &str) -> Vec<Noted> {
        use crate::runs::journal::{self, Journal, Record, SUPERVISOR_GONE};
        let Ok(rd) = std::fs::read_dir(home.join("sock")) else {
            self.seen.clear();
            return Vec::new();
        };
        let reg = crate::runs::registry::Registry::at(home);
        let mut now = std::collections::HashSet::new();
        let mut out = Vec::new();
        for e in rd.flatten() {
            let name = e.file_name();
            let Some(id) = name.to_str().and_then(|n| n.strip_suffix(".owner.json")) else { continue };
            if !crate::runs::valid_id(id) {
                continue;
            }
            let Some(owner) = Owner::read(home, id) else { continue };
            if owner.supervisor.mismatch().is_none() {
                continue;
            }
            let key: Seen = (id.to_string(), owner.supervisor.pid, owner.supervisor.start);
            now.insert(key.clone());
            if self.seen.contains(&key) {
                continue;
            }
            let Ok(p) = reg.read(id) else { continue };
            let l = crate::runs::view::load(p);
            // A run not started (`registered`: its journal holds no record
            // yet) gets no note: a first record would make it read started
            // (and a supervisor started again would take it for a restart).
            // Its views still say gone, judged when read.
            let status = l.status();
            let Some(Judged::Gone(why)) = judge(home, id, status).filter(|_| status != "registered") else {
                self.seen.insert(key);
                continue;
            };
            let mut r = Record::run(actor, SUPERVISOR_GONE);
            r.detail = Some(why.clone());
            let noted = |b: &[u8]| Journal::parse(b).supervisor_gone.as_deref() == Some(why.as_str());
            let run = crate::runs::marks::Run::new(home, id);
            let wrote = journal::append_unless(&run, &l.files.journal(), &r, &noted);
            crate::runs::marks::release(home, id);
            match wrote {
                Ok(wrote) => {
                    self.failed.remove(&key);
                    self.seen.insert(key);
                    if wrote {
                        out.push(Noted::Wrote { run: id.to_string(), why });
                    }
                }
                Err(e) => {
                    if self.failed.insert(key) {
                        out.push(Noted::Failed { run: id.to_string(), error: e.to_string() });
                    }
                }
            }
        }
        // Owners no longer recorded are forgotten: the memory stays as small as sock/.
        self.seen.retain(|k| now.contains(k));
        self.failed.retain(|k| now.contains(k));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::util::procid::Ident;

    fn owned_by(home: &Path, id: &str, who: Ident) {
        std::fs::create_dir_all(home.join("sock")).unwrap();
        let mut o = Owner::me().unwrap();
        o.supervisor = who;
        o.write(home, id).unwrap();
    }

    #[test]
    fn a_run_going_says_whether_its_owner_runs_and_an_ended_one_says_nothing() {
        let home = std::env::temp_dir().join(format!("rw-owned-{}", std::process::id()));
        let me = Ident::me().unwrap();
        owned_by(&home, "r-live", me.clone());
        owned_by(&home, "r-gone", Ident { pid: i32::MAX, ..me.clone() });
        // A reused pid is not its owner: this process, started at another tick.
        owned_by(&home, "r-reused", Ident { start: me.start.wrapping_sub(1), ..me });
        let item = |id: &str, status: &str| -> Arc<str> {
            format!(r#"{{"reason":null,"runId":"{id}","slug":"\"status\":\"running\"","status":"{status}"}}"#).into()
        };
        let mut page = Page {
            items: vec![
                item("r-live", "running"),
                item("r-gone", "needs_input"),
                item("r-reused", "paused"),
                item("r-gone", "done"),
                item("r-none", "running"),
            ],
            total: 5,
            next: None,
            from_files: 0,
        };
        let before = page.items.clone();
        add_to_page(&home, &mut page);
        let v: Vec<Value> = page.items.iter().map(|i| serde_json::from_str(i).unwrap()).collect();
        assert_eq!(v[0]["supervisor"], "live");
        assert_eq!(v[0]["reason"], Value::Null);
        for gone in [&v[1], &v[2]] {
            assert_eq!(gone["supervisor"], "gone", "{gone}");
            let why = gone["reason"].as_str().unwrap();
            assert!(why.starts_with("its supervisor (pid ") && why.contains("is gone: nothing runs it"), "{why}");
        }
        // The status stays the journal's.
        assert_eq!((v[1]["status"].as_str(), v[2]["status"].as_str()), (Some("needs_input"), Some("paused")));
        // Ended, or no owner record: as it was, byte for byte.
        assert_eq!(&page.items[3..], &before[3..]);
        let mut view = serde_json::json!({"run": serde_json::from_str::<Value>(&item("r-gone", "running")).unwrap()});
        add_to_view(&home, &mut view);
        assert_eq!((view["run"]["supervisor"].as_str(), &view["run"]["reason"]), (Some("gone"), &v[1]["reason"]));
        std::fs::remove_dir_all(&home).unwrap();
    }
}
