//! The plan a run executes (`spec/plan.schema.json`), kept beside the
//! journal as `<slug>.plan.json`: tasks with their adapter, prompt,
//! dependencies, optional gate command and review seat, grouped in waves.
//! Waves may be given; otherwise they are computed from the dependencies
//! (a task's wave is one more than its deepest dependency's).

use serde::{Deserialize, Serialize};
use std::collections::HashMap;

pub const VERSION: &str = "plan/v1";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Task {
    pub id: String,
    /// `claude`, `cursor` or `codex`: how its log is normalized.
    pub adapter: String,
    pub prompt: String,
    #[serde(default)]
    pub deps: Vec<String>,
    /// A command that must pass before the task may be committed.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub gate: Option<String>,
    /// Who reviews the task (an adapter or a person), when anyone does.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub review: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    pub v: String,
    pub tasks: Vec<Task>,
    /// Task ids by wave, first wave first; computed when absent.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub waves: Option<Vec<Vec<String>>>,
}

impl Plan {
    /// Parses and checks a plan: known version, valid unique ids, known
    /// adapters, dependencies that exist and form no cycle, waves (when
    /// given) that name every task once and respect the dependencies.
    pub fn parse(bytes: &[u8]) -> Result<Plan, String> {
        let p: Plan = serde_json::from_slice(bytes).map_err(|e| format!("not a plan: {e}"))?;
        p.validate()?;
        Ok(p)
    }

    pub fn validate(&self) -> Result<(), String> {
        if self.v != VERSION {
            return Err(format!("v is {:?}, expected {VERSION:?}", self.v));
        }
        let mut seen = HashMap::new();
        for (i, t) in self.tasks.iter().enumerate() {
            super::check_id("task", &t.id)?;
            if !matches!(t.adapter.as_str(), "claude" | "cursor" | "codex") {
                return Err(format!("task {:?}: unknown adapter {:?} (claude, cursor, codex)", t.id, t.adapter));
            }
            if seen.insert(t.id.as_str(), i).is_some() {
                return Err(format!("task {:?} appears twice", t.id));
            }
        }
        for t in &self.tasks {
            if let Some(d) = t.deps.iter().find(|d| !seen.contains_key(d.as_str())) {
                return Err(format!("task {:?} depends on unknown task {d:?}", t.id));
            }
        }
        self.depths()?;
        if let Some(waves) = &self.waves {
            let mut wave_of = HashMap::new();
            for (w, ids) in waves.iter().enumerate() {
                for id in ids {
                    if !seen.contains_key(id.as_str()) {
                        return Err(format!("waves name unknown task {id:?}"));
                    }
                    if wave_of.insert(id.as_str(), w).is_some() {
                        return Err(format!("waves name task {id:?} twice"));
                    }
                }
            }
            for t in &self.tasks {
                let Some(&w) = wave_of.get(t.id.as_str()) else {
                    return Err(format!("waves do not name task {:?}", t.id));
                };
                if let Some(d) = t.deps.iter().find(|d| wave_of.get(d.as_str()).is_some_and(|&dw| dw >= w)) {
                    return Err(format!("task {:?} is in a wave no later than its dependency {d:?}", t.id));
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
        for (t, &d) in self.tasks.iter().zip(&depth) {
            waves[d].push(t.id.clone());
        }
        Ok(waves)
    }

    /// Each task's 0-based wave from the dependencies (one more than its
    /// deepest dependency's); `Err` names a task on a cycle. Allocates only
    /// the result and an id index: listings compute this for every run.
    fn depths(&self) -> Result<Vec<usize>, String> {
        let index: HashMap<&str, usize, super::FastHash> =
            self.tasks.iter().enumerate().map(|(i, t)| (t.id.as_str(), i)).collect();
        let mut depth: Vec<Option<usize>> = vec![None; self.tasks.len()];
        // Kahn-style relaxation: at most n rounds; a task still unplaced after them is on a cycle.
        for _ in 0..=self.tasks.len() {
            let mut changed = false;
            for (i, t) in self.tasks.iter().enumerate() {
                if depth[i].is_some() {
                    continue;
                }
                // The deepest dependency's depth, or None while one is unplaced (or unknown).
                let deepest = t.deps.iter().try_fold(None::<usize>, |m, d| {
                    let dd = index.get(d.as_str()).and_then(|&j| depth[j])?;
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
            .iter()
            .enumerate()
            .map(|(i, d)| d.ok_or_else(|| format!("task {:?} is on a dependency cycle", self.tasks[i].id)))
            .collect()
    }

    /// The given waves, else the computed ones (empty on a cycle, which
    /// [`Plan::parse`] refuses anyway).
    pub fn waves(&self) -> Vec<Vec<String>> {
        self.waves.clone().unwrap_or_else(|| self.compute_waves().unwrap_or_default())
    }

    /// Each task's 0-based wave, in task order, as [`Plan::waves`] groups
    /// them (`None` for a task given waves do not name), without building
    /// the groups.
    pub fn wave_indices(&self) -> Vec<Option<usize>> {
        match &self.waves {
            Some(waves) => self.tasks.iter().map(|t| waves.iter().position(|w| w.contains(&t.id))).collect(),
            None => match self.depths() {
                Ok(d) => d.into_iter().map(Some).collect(),
                Err(_) => vec![None; self.tasks.len()],
            },
        }
    }

    pub fn task(&self, id: &str) -> Option<&Task> {
        self.tasks.iter().find(|t| t.id == id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn bad_plans_are_named() {
        for (t, needle) in [
            (r#"[{"id":"a","adapter":"claude","prompt":"x","deps":["a"]}]"#, "cycle"),
            (r#"[{"id":"a","adapter":"claude","prompt":"x","deps":["z"]}]"#, "unknown task"),
            (r#"[{"id":"a","adapter":"gpt","prompt":"x"}]"#, "adapter"),
            (r#"[{"id":"../x","adapter":"claude","prompt":"x"}]"#, "valid id"),
            (r#"[{"id":"a","adapter":"claude","prompt":"x"},{"id":"a","adapter":"claude","prompt":"x"}]"#, "twice"),
        ] {
            let e = plan(t).unwrap_err();
            assert!(e.contains(needle), "{t}: {e}");
        }
        let given = r#"{"v":"plan/v1","tasks":[{"id":"a","adapter":"claude","prompt":"x"},
            {"id":"b","adapter":"claude","prompt":"x","deps":["a"]}],"waves":[["a","b"]]}"#;
        assert!(Plan::parse(given.as_bytes()).unwrap_err().contains("no later"));
    }
}
