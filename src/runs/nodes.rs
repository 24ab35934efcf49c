//! A hub's judgement of its nodes' liveness (spec/CLUSTER.md, "Nodes"), as
//! its cluster sidecar keeps it in `$HARNESS_HOME/cluster/nodes.json`, and
//! the fields a hub's runs carry from it (`node`, `nodeState`,
//! `nodeLostSince`): one format and one reading for the hub's server
//! (`GET /runs`, `/api/info`) and for `runs` run at the hub's home.
//!
//! The file names the sidecar that wrote it (its [`Ident`]). A judgement is
//! current only while that process runs: it rewrites the file on every
//! change, and nothing does once it is gone. So a file whose writer is gone
//! (the hub stopped, or killed) is read as no judgement at all, and every
//! node is `unknown`, rather than `up` for as long as the file stays.

use crate::util::procid::Ident;
use serde_json::{json, Map, Value};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The file's format, its `v`.
pub const VERSION: &str = "nodes/v1";

/// Each node's state (`up`, `lost`) and since when (ms since the epoch).
pub type NodeStates = HashMap<String, (String, u64)>;

/// Where a hub's sidecar keeps its judgement.
pub fn path(home: &Path) -> PathBuf {
    home.join("cluster").join("nodes.json")
}

/// Whether `home` is a hub's (it mirrors nodes' runs under
/// `cluster/nodes/`): where `runs` adds the node fields.
pub fn is_hub_home(home: &Path) -> bool {
    home.join("cluster").join("nodes").is_dir()
}

/// The file's text: `{"v":"nodes/v1","by":IDENT,"nodes":{"alpha":{"state":"lost","since":MS}}}`.
pub fn encode(by: &Ident, nodes: &NodeStates) -> String {
    let mut names: Vec<&String> = nodes.keys().collect();
    names.sort();
    let nodes: Map<String, Value> =
        names.into_iter().map(|n| (n.clone(), json!({"state": nodes[n].0, "since": nodes[n].1}))).collect();
    format!("{}\n", json!({"v": VERSION, "by": by, "nodes": nodes}))
}

/// The states in `home`'s file, when the sidecar that wrote them still
/// runs; `None` when there is no current judgement (no file, another
/// format, or its writer gone).
pub fn read(home: &Path) -> Option<NodeStates> {
    decode(&std::fs::read(path(home)).ok()?, |by| by.mismatch().is_none())
}

/// What this home's hub said last, whether or not its sidecar still runs:
/// the states and when the file was written (ms since the epoch). A hub's
/// sidecar starts from it, to say what changed while none watched.
pub fn last_said(home: &Path) -> Option<(NodeStates, u64)> {
    let p = path(home);
    let written = std::fs::metadata(&p).ok()?.modified().ok()?;
    let ms = written.duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64);
    Some((decode(&std::fs::read(&p).ok()?, |_| true)?, ms))
}

/// A sidecar's record (`nodes.json`, `node.json`): its fields when it is
/// of format `version` and its writer (`by`) still runs (`current`).
fn current_record(bytes: &[u8], version: &str, current: impl Fn(&Ident) -> bool) -> Option<Value> {
    let v: Value = serde_json::from_slice(bytes).ok()?;
    let by: Ident = serde_json::from_value(v.get("by")?.clone()).ok()?;
    (v["v"] == version && current(&by)).then_some(v)
}

/// [`read`]'s parsing, `current` telling whether the writer still runs.
fn decode(bytes: &[u8], current: impl Fn(&Ident) -> bool) -> Option<NodeStates> {
    let v = current_record(bytes, VERSION, current)?;
    let nodes = v["nodes"].as_object()?;
    Some(
        nodes
            .iter()
            .filter_map(|(n, s)| {
                Some((n.clone(), (s["state"].as_str()?.to_string(), s["since"].as_u64().unwrap_or(0))))
            })
            .collect(),
    )
}

/// Where a node's cluster sidecar says which node this home is, while it
/// holds the name: `{"v":"node/v1","node":"alpha","by":IDENT}`.
pub fn home_node_path(home: &Path) -> PathBuf {
    home.join("cluster").join("node.json")
}

/// The record's format, its `v`.
pub const HOME_NODE_VERSION: &str = "node/v1";

/// The record's text.
pub fn encode_home_node(by: &Ident, node: &str) -> String {
    format!("{}\n", json!({"v": HOME_NODE_VERSION, "node": node, "by": by}))
}

/// The node this home is, while the sidecar that holds its name runs:
/// what a `runwire-supervise` beside it names in its approval links (a
/// hub forwards a link to the node it names). `None` without a current
/// record (no node here, or its sidecar gone).
pub fn home_node(home: &Path) -> Option<String> {
    decode_home_node(&std::fs::read(home_node_path(home)).ok()?, |by| by.mismatch().is_none())
}

fn decode_home_node(bytes: &[u8], current: impl Fn(&Ident) -> bool) -> Option<String> {
    let v = current_record(bytes, HOME_NODE_VERSION, current)?;
    v["node"].as_str().filter(|n| super::valid_node(n)).map(str::to_string)
}

/// The statuses of a run still going, which a lost node's run has only as
/// its node's last word (the studio's rule too: `staleOnLostNode`).
pub use super::view::GOING;

/// A run's status as people read it at a hub: `node lost (running)` for a
/// run still going on a node that is lost, else `status` as it is.
pub fn shown_status(status: &str, node_state: Option<&str>) -> String {
    if node_state == Some("lost") && GOING.contains(&status) {
        format!("node lost ({status})")
    } else {
        status.to_string()
    }
}

/// A listing of `node`'s runs only (at a hub their ids are `<node>.<run>`):
/// `GET /runs?node=` and `runs list --node`.
pub fn by_node(mut q: super::list::Query, node: &str) -> Result<super::list::Query, String> {
    if !super::valid_node(node) {
        return Err(format!("node {node:?}: a node name is {}", super::NODE_RULE));
    }
    q.id_prefix = Some(format!("{node}."));
    Ok(q)
}

/// A node's liveness as a hub's runs carry it: `nodeState` (`up`, `lost`,
/// or `unknown`: no heartbeat seen, or no current judgement) and, when
/// lost, `nodeLostSince` (the time of its last heartbeat).
pub fn state(node: &str, states: Option<&NodeStates>) -> (&'static str, Option<u64>) {
    match states.and_then(|s| s.get(node)) {
        Some((s, since)) if s == "lost" => ("lost", Some(*since)),
        Some((s, _)) if s == "up" => ("up", None),
        _ => ("unknown", None),
    }
}

/// A hub's run summary (a listing's item) with its `node` (its id is
/// `<node>.<run>`: node names have no `.`) and the node's liveness, first:
/// `{"node":"alpha","nodeState":"lost","nodeLostSince":…,"activityMs":…`.
/// A summary whose id names no node is returned as it is.
pub fn with_node(summary: &Arc<str>, states: Option<&NodeStates>) -> Arc<str> {
    let node = summary.split_once(r#""runId":""#).and_then(|(_, rest)| super::node_of(rest.split_once('"')?.0));
    match (node, summary.strip_prefix('{')) {
        (Some(n), Some(rest)) => {
            let sep = if rest.starts_with('}') { "" } else { "," };
            let state = match state(n, states) {
                (s, Some(since)) => format!(r#""nodeState":"{s}","nodeLostSince":{since}"#),
                (s, None) => format!(r#""nodeState":"{s}""#),
            };
            format!(r#"{{"node":"{n}",{state}{sep}{rest}"#).into()
        }
        _ => summary.clone(),
    }
}

/// A hub's listing (`GET /runs`, `runs list`): each item [`with_node`].
pub fn add_to_page(page: &mut super::list::Page, states: Option<&NodeStates>) {
    for item in &mut page.items {
        *item = with_node(item, states);
    }
}

/// A hub's run view (`GET /runs/:id`, `runs show`) of run `id`
/// (`<node>.<run>`): its `run` gets `node`, `nodeState` and (lost)
/// `nodeLostSince`, the same fields as [`with_node`]'s.
pub fn add_to_view(view: &mut Value, id: &str, states: Option<&NodeStates>) {
    let (Some(node), Some(run)) = (super::node_of(id), view.get_mut("run").and_then(Value::as_object_mut)) else {
        return;
    };
    let (state, since) = state(node, states);
    run.insert("node".into(), node.into());
    run.insert("nodeState".into(), state.into());
    if let Some(since) = since {
        run.insert("nodeLostSince".into(), since.into());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn states() -> NodeStates {
        NodeStates::from([("alpha".into(), ("lost".into(), 1_700_000_000_000)), ("beta".into(), ("up".into(), 5))])
    }

    #[test]
    fn a_judgement_is_read_while_its_writer_runs_and_not_after() {
        let me = Ident::me().unwrap();
        let text = encode(&me, &states());
        assert_eq!(decode(text.as_bytes(), |by| by.mismatch().is_none()), Some(states()));
        // Its writer gone (a pid that names no process now): no judgement.
        let gone = Ident { pid: i32::MAX, ..me.clone() };
        assert_eq!(decode(encode(&gone, &states()).as_bytes(), |by| by.mismatch().is_none()), None);
        // The unversioned map an older sidecar wrote: no judgement either.
        assert_eq!(decode(br#"{"alpha":{"state":"up","since":1}}"#, |_| true), None);
        assert_eq!(decode(b"not json", |_| true), None);
    }

    #[test]
    fn what_a_hub_said_last_is_read_after_its_writer_is_gone() {
        let home = std::env::temp_dir().join(format!("rw-nodes-last-{}", std::process::id()));
        std::fs::create_dir_all(home.join("cluster")).unwrap();
        assert_eq!(last_said(&home), None);
        let gone = Ident { pid: i32::MAX, ..Ident::me().unwrap() };
        std::fs::write(path(&home), encode(&gone, &states())).unwrap();
        let before = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as u64;
        let (said, at) = last_said(&home).unwrap();
        // No current judgement, but the last one, and when it was written.
        assert_eq!(read(&home), None);
        assert_eq!(said, states());
        assert!(at <= before + 1000 && at + 60_000 > before, "{at} vs {before}");
        std::fs::remove_dir_all(&home).unwrap();
    }

    #[test]
    fn a_homes_node_is_read_while_its_sidecar_runs_and_not_after() {
        let me = Ident::me().unwrap();
        let text = encode_home_node(&me, "alpha");
        assert_eq!(decode_home_node(text.as_bytes(), |by| by.mismatch().is_none()).as_deref(), Some("alpha"));
        let gone = Ident { pid: i32::MAX, ..me.clone() };
        assert_eq!(decode_home_node(encode_home_node(&gone, "alpha").as_bytes(), |by| by.mismatch().is_none()), None);
        // Not a node's name: nothing (it would go into every link).
        assert_eq!(decode_home_node(encode_home_node(&me, "al.pha").as_bytes(), |_| true), None);
        assert_eq!(decode_home_node(b"{}", |_| true), None);
    }

    /// A run's own page (`GET /runs/:id`) at a hub says what its listing item says.
    #[test]
    fn a_hubs_run_view_names_its_node_and_its_liveness_as_the_listing_does() {
        let s = states();
        for id in ["alpha.abc--x", "beta.abc--x", "gamma.abc--x", "abc--x"] {
            for states in [Some(&s), None] {
                let item: Arc<str> = format!(r#"{{"runId":"{id}","status":"running"}}"#).into();
                let listed: Value = serde_json::from_str(&with_node(&item, states)).unwrap();
                let mut view = json!({"run": serde_json::from_str::<Value>(&item).unwrap()});
                add_to_view(&mut view, id, states);
                assert_eq!(view["run"], listed, "{id}");
            }
        }
    }

    #[test]
    fn a_hubs_summaries_name_their_node_and_filter_by_it() {
        let s: Arc<str> = r#"{"activityMs":1,"runId":"alpha.abc--x.y","status":"done"}"#.into();
        assert_eq!(
            &*with_node(&s, None),
            r#"{"node":"alpha","nodeState":"unknown","activityMs":1,"runId":"alpha.abc--x.y","status":"done"}"#
        );
        // The node's liveness, as the hub's sidecar judged it.
        let mut states = states();
        let lost = with_node(&s, Some(&states));
        assert!(lost.starts_with(r#"{"node":"alpha","nodeState":"lost","nodeLostSince":1700000000000,"activityMs":1,"#));
        states.insert("alpha".into(), ("up".into(), 1800));
        assert!(with_node(&s, Some(&states)).starts_with(r#"{"node":"alpha","nodeState":"up","activityMs":1,"#));
        // A node with no beat seen.
        states.remove("alpha");
        assert!(with_node(&s, Some(&states)).starts_with(r#"{"node":"alpha","nodeState":"unknown","activityMs":1,"#));
        // Not a node's run (no `<node>.`): left as it is.
        let local: Arc<str> = r#"{"runId":"abc--x","status":"done"}"#.into();
        assert_eq!(&*with_node(&local, Some(&states)), &*local);
        assert_eq!(shown_status("running", Some("lost")), "node lost (running)");
        assert_eq!(shown_status("done", Some("lost")), "done");
        assert_eq!(shown_status("running", Some("up")), "running");
        assert_eq!(shown_status("running", None), "running");
        let q = by_node(super::super::list::Query::default(), "beta").unwrap();
        assert_eq!(q.id_prefix.as_deref(), Some("beta."));
        assert!(by_node(super::super::list::Query::default(), "a.b").is_err());
        assert!(by_node(super::super::list::Query::default(), "").is_err());
    }
}
