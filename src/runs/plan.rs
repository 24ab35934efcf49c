//! The plan a run executes (`spec/plan.schema.json`), kept beside the
//! journal as `<slug>.plan.json`: tasks with their adapter, prompt,
//! dependencies, optional gate command and review seat, grouped in waves.
//! Waves may be given; otherwise they are computed from the dependencies
//! (a task's wave is one more than its deepest dependency's).

use super::FastHash;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;

pub const VERSION: &str = "plan/v1";

/// Up to this many tasks, ids are looked up by a linear scan: cheaper than
/// building and hashing into a map for the few tasks most plans have.
const FEW: usize = 16;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
/// A task; `S` holds its text: `String`, or `&str` borrowed from the
/// plan's bytes (a listing reads thousands of plans and keeps none).
pub struct Task<S = String> {
    pub id: S,
    /// `claude`, `cursor` or `codex`: how its log is normalized and which
    /// wrapper runs it; `acp`: any ACP agent, run as given by `cmd` (its log
    /// normalized as cursor's, the ACP normalizer).
    pub adapter: S,
    pub prompt: S,
    #[serde(default)]
    pub deps: Vec<S>,
    /// A command that must pass before the task may be committed.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub gate: Option<S>,
    /// Who reviews the task (an adapter or a person), when anyone does.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub review: Option<S>,
    /// adapter `acp` only, and required there: the agent's whole command
    /// line (program, then arguments), run exactly as given.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub cmd: Option<Vec<S>>,
}

/// `cmd` is given for adapter `acp`, and only for it, naming a program.
fn check_cmd<S: AsRef<str>>(id: &str, adapter: &str, cmd: Option<&[S]>) -> Result<(), String> {
    match (adapter == "acp", cmd) {
        (true, None) => Err(format!("task {id:?}: adapter \"acp\" needs cmd, the agent's command line")),
        (true, Some(c)) if c.first().is_none_or(|p| p.as_ref().is_empty()) => {
            Err(format!("task {id:?}: cmd must start with the agent's program (a non-empty string)"))
        }
        (false, Some(_)) => Err(format!("task {id:?}: cmd is only for adapter \"acp\" (this task's is {adapter:?})")),
        _ => Ok(()),
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Plan<S = String> {
    pub v: S,
    pub tasks: Vec<Task<S>>,
    /// Task ids by wave, first wave first; computed when absent.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub waves: Option<Vec<Vec<S>>>,
}

impl Plan {
    /// Parses and checks a plan: known version, valid unique ids, known
    /// adapters, dependencies that exist and form no cycle, waves (when
    /// given) that name every task once and respect the dependencies.
    ///
    /// Strict, as `spec/plan.schema.json` is (`additionalProperties: false`):
    /// the plan and each task must be JSON objects of known keys, so a
    /// misspelt key (`"gates"` for `"gate"`) is refused, not run as a task
    /// without a gate. serde alone would ignore unknown keys and read a
    /// JSON array into the structs by position.
    pub fn parse(bytes: &[u8]) -> Result<Plan, String> {
        check_shape(bytes)?;
        Plan::read(bytes)
    }

    /// [`Plan::parse`] without the check of its keys: what a listing shows
    /// of a plan on disk (a run registered with a plan this runwire would
    /// not start is still listed with its tasks).
    pub fn read(bytes: &[u8]) -> Result<Plan, String> {
        let p: Plan = serde_json::from_slice(bytes).map_err(|e| format!("not a plan: {e}"))?;
        p.validate()?;
        Ok(p)
    }
}

const PLAN_KEYS: [&str; 3] = ["v", "tasks", "waves"];
const TASK_KEYS: [&str; 7] = ["id", "adapter", "prompt", "deps", "gate", "review", "cmd"];

/// The plan is an object of [`PLAN_KEYS`], each task an object of [`TASK_KEYS`].
fn check_shape(bytes: &[u8]) -> Result<(), String> {
    let v: serde_json::Value = serde_json::from_slice(bytes).map_err(|e| format!("not a plan: {e}"))?;
    let plan = v.as_object().ok_or("not a plan: a plan is a JSON object")?;
    if let Some(k) = plan.keys().find(|k| !PLAN_KEYS.contains(&k.as_str())) {
        return Err(format!("unknown key {k:?} (a plan has {})", PLAN_KEYS.join(", ")));
    }
    let Some(tasks) = plan.get("tasks").and_then(|t| t.as_array()) else { return Ok(()) };
    for (i, t) in tasks.iter().enumerate() {
        let Some(task) = t.as_object() else { return Err(format!("task {}: a task is a JSON object", i + 1)) };
        if let Some(k) = task.keys().find(|k| !TASK_KEYS.contains(&k.as_str())) {
            let which = task
                .get("id")
                .and_then(|id| id.as_str())
                .map_or(format!("task {}", i + 1), |id| format!("task {id:?}"));
            return Err(format!("{which}: unknown key {k:?} (a task has {})", TASK_KEYS.join(", ")));
        }
    }
    Ok(())
}

impl<S: AsRef<str>> Plan<S> {
    pub fn validate(&self) -> Result<(), String> {
        if self.v.as_ref() != VERSION {
            return Err(format!("v is {:?}, expected {VERSION:?}", self.v.as_ref()));
        }
        let few = self.tasks.len() <= FEW;
        // Past FEW tasks, a map with std's seeded hasher, as before.
        let mut seen = HashMap::new();
        for (i, t) in self.tasks.iter().enumerate() {
            let (id, adapter) = (t.id.as_ref(), t.adapter.as_ref());
            super::check_id("task", id)?;
            if !matches!(adapter, "claude" | "cursor" | "codex" | "acp") {
                return Err(format!("task {id:?}: unknown adapter {adapter:?} (claude, cursor, codex, acp)"));
            }
            check_cmd(id, adapter, t.cmd.as_deref())?;
            let twice =
                if few { self.tasks[..i].iter().any(|u| u.id.as_ref() == id) } else { seen.insert(id, i).is_some() };
            if twice {
                return Err(format!("task {id:?} appears twice"));
            }
        }
        let known = |id: &str| if few { self.tasks.iter().any(|t| t.id.as_ref() == id) } else { seen.contains_key(id) };
        for t in &self.tasks {
            if let Some(d) = t.deps.iter().map(AsRef::as_ref).find(|d| !known(d)) {
                return Err(format!("task {:?} depends on unknown task {d:?}", t.id.as_ref()));
            }
        }
        self.depths()?;
        self.check_waves(known)
    }

    /// Each task's 0-based wave from the dependencies ([`Plan::relax`]);
    /// `Err` names a task on a cycle.
    fn depths(&self) -> Result<Vec<usize>, String> {
        let depth = self.relax().into_iter().zip(&self.tasks);
        depth.map(|(d, t)| d.ok_or_else(|| format!("task {:?} is on a dependency cycle", t.id.as_ref()))).collect()
    }

    /// `waves`, when given, names each task once, each after its dependencies.
    fn check_waves(&self, known: impl Fn(&str) -> bool) -> Result<(), String> {
        if let Some(waves) = &self.waves {
            let mut wave_of = HashMap::new();
            for (w, ids) in waves.iter().enumerate() {
                for id in ids.iter().map(AsRef::as_ref) {
                    if !known(id) {
                        return Err(format!("waves name unknown task {id:?}"));
                    }
                    if wave_of.insert(id, w).is_some() {
                        return Err(format!("waves name task {id:?} twice"));
                    }
                }
            }
            for t in &self.tasks {
                let Some(&w) = wave_of.get(t.id.as_ref()) else {
                    return Err(format!("waves do not name task {:?}", t.id.as_ref()));
                };
                if let Some(d) = t.deps.iter().map(AsRef::as_ref).find(|d| wave_of.get(d).is_some_and(|&dw| dw >= w)) {
                    return Err(format!("task {:?} is in a wave no later than its dependency {d:?}", t.id.as_ref()));
                }
            }
        }
        Ok(())
    }

    /// Waves from the dependencies; `Err` names a task on a cycle.
    pub fn compute_waves(&self) -> Result<Vec<Vec<String>>, String> {
        let depth = self.depths()?;
        let n = depth.iter().max().map_or(0, |m| m + 1);
        let mut waves = vec![Vec::new(); n];
        for (t, d) in self.tasks.iter().zip(depth) {
            waves[d].push(t.id.as_ref().to_string());
        }
        Ok(waves)
    }

    /// Each task's 0-based wave from the dependencies (one more than its
    /// deepest dependency's), `None` for a task on a cycle or after an
    /// unknown dependency. Allocates only the result (and, for a large
    /// plan, an id index): listings compute this once for every run.
    fn relax(&self) -> Vec<Option<usize>> {
        let n = self.tasks.len();
        // A repeated id (only in a plan `validate` refuses) finds its last
        // task, as the map collected from all of them does.
        let index: HashMap<&str, usize, FastHash> = if n <= FEW {
            HashMap::default()
        } else {
            self.tasks.iter().enumerate().map(|(i, t)| (t.id.as_ref(), i)).collect()
        };
        let find = |id: &str| {
            if n <= FEW {
                self.tasks.iter().rposition(|t| t.id.as_ref() == id)
            } else {
                index.get(id).copied()
            }
        };
        // Not `vec![None; n]`: that is a calloc, dearer than malloc for these few bytes.
        let mut depth: Vec<Option<usize>> = (0..n).map(|_| None).collect();
        // Kahn-style relaxation: at most n rounds; a task still unplaced after them is on a cycle.
        for _ in 0..=n {
            let mut changed = false;
            for (i, t) in self.tasks.iter().enumerate() {
                if depth[i].is_some() {
                    continue;
                }
                // The deepest dependency's depth, or None while one is unplaced (or unknown).
                let deepest = t.deps.iter().try_fold(None::<usize>, |m, d| {
                    let dd = find(d.as_ref()).and_then(|j| depth[j])?;
                    Some(Some(m.map_or(dd, |m| m.max(dd))))
                });
                if let Some(deepest) = deepest {
                    depth[i] = Some(deepest.map_or(0, |d| d + 1));
                    changed = true;
                }
            }
            if !changed {
                break;
            }
        }
        depth
    }

    /// The given waves, else the computed ones (empty on a cycle, which
    /// [`Plan::parse`] refuses anyway).
    pub fn waves(&self) -> Vec<Vec<String>> {
        let given = self
            .waves
            .as_ref()
            .map(|w| w.iter().map(|ids| ids.iter().map(|i| i.as_ref().to_string()).collect()).collect());
        given.unwrap_or_else(|| self.compute_waves().unwrap_or_default())
    }

    /// Each task's 0-based wave, in task order, as [`Plan::waves`] groups
    /// them (`None` for a task given waves do not name), without building
    /// the groups.
    pub fn wave_indices(&self) -> Vec<Option<usize>> {
        match &self.waves {
            Some(waves) => {
                let has = |w: &[S], id: &str| w.iter().any(|i| i.as_ref() == id);
                self.tasks.iter().map(|t| waves.iter().position(|w| has(w, t.id.as_ref()))).collect()
            }
            None => {
                let depth = self.relax();
                // On a cycle `waves()` is empty: no task has a wave.
                if depth.iter().all(Option::is_some) {
                    depth
                } else {
                    vec![None; depth.len()]
                }
            }
        }
    }

    pub fn task(&self, id: &str) -> Option<&Task<S>> {
        self.tasks.iter().find(|t| t.id.as_ref() == id)
    }
}

/// What the views read of a plan, whatever holds its text.
pub trait View {
    fn task_count(&self) -> usize;
    /// The id of task `i` (in plan order).
    fn task_id(&self, i: usize) -> &str;
    fn task_adapter(&self, i: usize) -> &str;
    /// As [`Plan::wave_indices`].
    fn wave_indices(&self) -> std::borrow::Cow<'_, [Option<usize>]>;
}

impl<S: AsRef<str>> View for Plan<S> {
    fn task_count(&self) -> usize {
        self.tasks.len()
    }

    fn task_id(&self, i: usize) -> &str {
        self.tasks[i].id.as_ref()
    }

    fn task_adapter(&self, i: usize) -> &str {
        self.tasks[i].adapter.as_ref()
    }

    fn wave_indices(&self) -> std::borrow::Cow<'_, [Option<usize>]> {
        Plan::wave_indices(self).into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use proptest::sample::Index;
    use proptest::strategy::ValueTree;

    fn plan(tasks: &str) -> Result<Plan, String> {
        Plan::parse(format!(r#"{{"v":"plan/v1","tasks":{tasks}}}"#).as_bytes())
    }

    #[test]
    fn waves_from_deps() {
        let p = plan(
            r#"[{"id":"a","adapter":"claude","prompt":"x"},{"id":"c","adapter":"codex","prompt":"x","deps":["b","a"]},
                {"id":"b","adapter":"cursor","prompt":"x","deps":["a"],"gate":"make test","review":"claude"}]"#,
        )
        .unwrap();
        assert_eq!(p.waves(), vec![vec!["a".to_string()], vec!["b".into()], vec!["c".into()]]);
    }

    #[test]
    fn wave_indices_place_each_task_where_waves_groups_it() {
        let computed = plan(
            r#"[{"id":"d","adapter":"claude","prompt":"x","deps":["c","a"]},{"id":"a","adapter":"claude","prompt":"x"},
                {"id":"c","adapter":"codex","prompt":"x","deps":["b"]},{"id":"b","adapter":"cursor","prompt":"x","deps":["a"]},
                {"id":"e","adapter":"claude","prompt":"x"}]"#,
        )
        .unwrap();
        let given = Plan::parse(
            br#"{"v":"plan/v1","tasks":[{"id":"a","adapter":"claude","prompt":"x"},
                {"id":"b","adapter":"claude","prompt":"x","deps":["a"]},{"id":"c","adapter":"claude","prompt":"x"}],
                "waves":[["a"],["c"],["b"]]}"#,
        )
        .unwrap();
        for p in [&computed, &given] {
            let waves = p.waves();
            let idx = p.wave_indices();
            assert_eq!(idx.len(), p.tasks.len());
            for (t, w) in p.tasks.iter().zip(&idx) {
                assert_eq!(*w, waves.iter().position(|ids| ids.contains(&t.id)), "task {}", t.id);
            }
        }
        assert_eq!(computed.wave_indices(), vec![Some(3), Some(0), Some(2), Some(1), Some(0)]);
        assert_eq!(given.wave_indices(), vec![Some(0), Some(2), Some(1)]);
    }

    #[test]
    fn an_acp_task_keeps_its_command_line() {
        let text =
            r#"{"v":"plan/v1","tasks":[{"id":"a","adapter":"acp","prompt":"x","cmd":["opencode","acp","--x y"]}]}"#;
        let p = Plan::parse(text.as_bytes()).unwrap();
        assert_eq!(p.tasks[0].cmd.as_deref(), Some(&["opencode".to_string(), "acp".into(), "--x y".into()][..]));
        // Written back as it was read.
        assert_eq!(Plan::parse(serde_json::to_string(&p).unwrap().as_bytes()).unwrap(), p);
        // Other tasks write no cmd.
        let q = plan(r#"[{"id":"a","adapter":"claude","prompt":"x"}]"#).unwrap();
        assert!(!serde_json::to_string(&q).unwrap().contains("cmd"));
    }

    #[test]
    fn bad_plans_are_named() {
        for (t, needle) in [
            (r#"[{"id":"a","adapter":"claude","prompt":"x","deps":["a"]}]"#, "cycle"),
            (r#"[{"id":"a","adapter":"claude","prompt":"x","deps":["z"]}]"#, "unknown task"),
            (r#"[{"id":"a","adapter":"gpt","prompt":"x"}]"#, "adapter"),
            (r#"[{"id":"../x","adapter":"claude","prompt":"x"}]"#, "valid id"),
            (r#"[{"id":"a","adapter":"claude","prompt":"x"},{"id":"a","adapter":"claude","prompt":"x"}]"#, "twice"),
            (r#"[{"id":"a","adapter":"acp","prompt":"x"}]"#, r#"adapter "acp" needs cmd"#),
            (r#"[{"id":"a","adapter":"acp","prompt":"x","cmd":null}]"#, r#"adapter "acp" needs cmd"#),
            (r#"[{"id":"a","adapter":"acp","prompt":"x","cmd":[]}]"#, "cmd must start with the agent's program"),
            (r#"[{"id":"a","adapter":"acp","prompt":"x","cmd":["","acp"]}]"#, "cmd must start"),
            (r#"[{"id":"a","adapter":"claude","prompt":"x","cmd":["claude"]}]"#, r#"cmd is only for adapter "acp""#),
            (r#"[{"id":"a","adapter":"cursor","prompt":"x","cmd":["x"]}]"#, r#"this task's is "cursor""#),
            (r#"[{"id":"a","adapter":"acp","prompt":"x","cmd":"opencode acp"}]"#, "not a plan"),
        ] {
            let e = plan(t).unwrap_err();
            assert!(e.contains(needle), "{t}: {e}");
        }
        let given = r#"{"v":"plan/v1","tasks":[{"id":"a","adapter":"claude","prompt":"x"},
            {"id":"b","adapter":"claude","prompt":"x","deps":["a"]}],"waves":[["a","b"]]}"#;
        assert!(Plan::parse(given.as_bytes()).unwrap_err().contains("no later"));
    }
    /// Plan values: mostly valid, sometimes with a repeated or bad id, an
    /// unknown adapter or dependency, a cycle, given waves right or wrong;
    /// up to 40 tasks, so both id lookups (scan and map) are used.
    fn plan_value() -> impl Strategy<Value = Plan> {
        let task = (0..100u8, 0..20u8, prop::collection::vec((0..100u8, any::<Index>()), 0..3));
        let n = prop_oneof![3 => 0..6usize, 1 => 0..40usize];
        (n.prop_flat_map(move |n| prop::collection::vec(task.clone(), n)), 0..10u8, any::<Index>(), any::<Index>())
            .prop_map(|(tasks, waves, i, j)| {
                let n = tasks.len();
                let tasks = tasks.into_iter().enumerate().map(|(i, (k, a, deps))| Task {
                    id: match k {
                        0..=89 => format!("t{i}"),
                        90..=95 => format!("t{}", k % 3),
                        _ => "../x".into(),
                    },
                    adapter: if a == 0 { "gpt" } else { ["claude", "codex", "cursor"][usize::from(a % 3)] }.into(),
                    prompt: "p".into(),
                    deps: deps
                        .into_iter()
                        .map(|(m, d)| match m {
                            0..=84 if i > 0 => format!("t{}", d.index(i)),
                            0..=94 => format!("t{}", d.index(n + 1)),
                            _ => "zz".into(),
                        })
                        .collect(),
                    gate: None,
                    review: None,
                    cmd: None,
                });
                let mut p = Plan { v: VERSION.into(), tasks: tasks.collect(), waves: None };
                if waves >= 6 {
                    let mut w = old_compute_waves(&p).unwrap_or_default();
                    let all: Vec<String> = w.iter().flatten().cloned().collect();
                    match (waves, all.is_empty()) {
                        (7, false) => {
                            // One task moved to another wave.
                            let id = &all[i.index(all.len())];
                            w.iter_mut().for_each(|ids| ids.retain(|t| t != id));
                            let k = j.index(w.len());
                            w[k].push(id.clone());
                        }
                        (8, false) => w[0].push(all[i.index(all.len())].clone()),
                        (9, false) => drop(w.remove(j.index(w.len()))),
                        _ => {}
                    }
                    p.waves = Some(w);
                }
                p
            })
    }

    proptest! {
        #[test]
        fn checks_and_waves_are_as_before(p in plan_value()) {
            prop_assert_eq!(p.validate(), old_validate(&p));
            prop_assert_eq!(p.compute_waves(), old_compute_waves(&p));
            prop_assert_eq!(p.wave_indices(), old_wave_indices(&p));
        }
    }

    /// The property test above compares something: many generated plan
    /// values are valid.
    #[test]
    fn generated_plans_are_often_valid() {
        let mut runner = proptest::test_runner::TestRunner::deterministic();
        let values = plan_value();
        let valid = (0..500).filter(|_| values.new_tree(&mut runner).unwrap().current().validate().is_ok()).count();
        assert!(valid > 100, "of 500 plan values, {valid} valid");
    }

    // The checks and waves as they were before ids were looked up by a
    // linear scan in small plans, to compare with; depths by their
    // recursive definition.
    fn old_validate(p: &Plan) -> Result<(), String> {
        if p.v != VERSION {
            return Err(format!("v is {:?}, expected {VERSION:?}", p.v));
        }
        let mut seen = HashMap::new();
        for (i, t) in p.tasks.iter().enumerate() {
            super::super::check_id("task", &t.id)?;
            if !matches!(t.adapter.as_str(), "claude" | "cursor" | "codex" | "acp") {
                return Err(format!("task {:?}: unknown adapter {:?} (claude, cursor, codex, acp)", t.id, t.adapter));
            }
            super::check_cmd(&t.id, &t.adapter, t.cmd.as_deref())?;
            if seen.insert(t.id.as_str(), i).is_some() {
                return Err(format!("task {:?} appears twice", t.id));
            }
        }
        for t in &p.tasks {
            if let Some(d) = t.deps.iter().find(|d| !seen.contains_key(d.as_str())) {
                return Err(format!("task {:?} depends on unknown task {d:?}", t.id));
            }
        }
        depths_by_definition(p)?;
        // Unchanged: the check of `waves` is the plan's own.
        p.check_waves(|id| seen.contains_key(id))
    }

    fn old_compute_waves(p: &Plan) -> Result<Vec<Vec<String>>, String> {
        let depth = depths_by_definition(p)?;
        let n = depth.iter().max().map_or(0, |m| m + 1);
        let mut waves = vec![Vec::new(); n];
        for (t, &d) in p.tasks.iter().zip(&depth) {
            waves[d].push(t.id.clone());
        }
        Ok(waves)
    }

    /// Each task's depth by its definition, recursively (no dependency: 0;
    /// else one more than its deepest dependency): a check of `relax`'s
    /// rounds that shares none of their code. `Err` names the first task,
    /// in plan order, on a cycle or depending on one.
    fn depths_by_definition(p: &Plan) -> Result<Vec<usize>, String> {
        // A repeated id finds its last task, as `relax` does.
        let index: HashMap<&str, usize> = p.tasks.iter().enumerate().map(|(i, t)| (t.id.as_str(), i)).collect();
        /// `memo[i]`: `None` not visited; `Some(None)` being visited (a
        /// cycle back to it finds no depth) or without one.
        fn depth(
            i: usize,
            p: &Plan,
            index: &HashMap<&str, usize>,
            memo: &mut [Option<Option<usize>>],
        ) -> Option<usize> {
            if let Some(d) = memo[i] {
                return d;
            }
            memo[i] = Some(None);
            let mut deepest: Option<usize> = None;
            for d in &p.tasks[i].deps {
                let dd = depth(*index.get(d.as_str())?, p, index, memo)?;
                deepest = Some(deepest.map_or(dd, |m| m.max(dd)));
            }
            let got = Some(deepest.map_or(0, |d| d + 1));
            memo[i] = Some(got);
            got
        }
        let mut memo = vec![None; p.tasks.len()];
        (0..p.tasks.len())
            .map(|i| {
                depth(i, p, &index, &mut memo)
                    .ok_or_else(|| format!("task {:?} is on a dependency cycle", p.tasks[i].id))
            })
            .collect()
    }

    fn old_wave_indices(p: &Plan) -> Vec<Option<usize>> {
        match &p.waves {
            Some(waves) => p.tasks.iter().map(|t| waves.iter().position(|w| w.contains(&t.id))).collect(),
            None => match depths_by_definition(p) {
                Ok(d) => d.into_iter().map(Some).collect(),
                Err(_) => vec![None; p.tasks.len()],
            },
        }
    }
}
