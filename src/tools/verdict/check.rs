//! The walk over a verdict document: each reader records why a value is
//! wrong and the walk goes on, so one pass reports every finding.

use super::json::{self, Json};
use super::model::*;
use super::num::js_num;
use std::collections::{HashMap, HashSet};

/// Largest integer a JavaScript number holds exactly; integers above it are not counts.
const MAX_SAFE_INTEGER: f64 = 9_007_199_254_740_991.0;

/// Checks a `verdict.json` and, for an evidence directory, the `revisionId` of
/// `H0/revision.json` (baseline) and `H1/revision.json` (candidate) against every trial row.
/// Returns the summary, or every finding (at most [`MAX_FINDINGS`] kept, all counted).
pub fn check(verdict: &[u8], revisions: Option<(&[u8], &[u8])>) -> Result<Summary, Rejection> {
    let mut c = Checker { findings: Vec::new(), total: 0, source: Source::Verdict };
    let revision_ids =
        revisions.map(|(h0, h1)| [c.revision(Variant::Baseline, h0), c.revision(Variant::Candidate, h1)]);
    c.source = Source::Verdict;
    let root = match json::parse(verdict) {
        Ok(v) => v,
        Err(e) => {
            c.push("", e);
            return Err(c.rejection());
        }
    };
    c.duplicate_keys(&root, "");
    let summary = c.verdict(&root, revision_ids.as_ref());
    match summary {
        Some(s) if c.total == 0 => Ok(s),
        _ => Err(c.rejection()),
    }
}

/// Collects findings while walking the document. Each reader (`string`, `integer`, `one_of`, ...)
/// returns `None` after recording why, and the walk goes on, so one pass reports all it can.
struct Checker {
    findings: Vec<Finding>,
    total: usize,
    source: Source,
}

impl Checker {
    fn push(&mut self, path: &str, message: String) {
        self.total += 1;
        if self.findings.len() < MAX_FINDINGS {
            self.findings.push(Finding { source: self.source, path: path.to_owned(), message });
        }
    }

    fn rejection(self) -> Rejection {
        Rejection { findings: self.findings, total: self.total }
    }

    /// Reads `revisionId` from one `revision.json`.
    fn revision(&mut self, v: Variant, bytes: &[u8]) -> Option<String> {
        self.source = Source::Revision(v);
        match json::parse(bytes) {
            Ok(root) => {
                self.duplicate_keys(&root, "");
                self.object(&root, "")?;
                self.string(&root, "", "revisionId", false).map(str::to_owned)
            }
            Err(e) => {
                self.push("", e);
                None
            }
        }
    }

    fn duplicate_keys(&mut self, v: &Json, path: &str) {
        match v {
            Json::Obj(m) => {
                let mut seen = HashSet::with_capacity(m.len());
                for (k, x) in m {
                    if !seen.insert(k.as_str()) {
                        self.push(path, format!("{} has the key {} more than once", label(path), quote(k)));
                    }
                    if matches!(x, Json::Obj(_) | Json::Arr(_)) {
                        self.duplicate_keys(x, &child(path, k));
                    }
                }
            }
            Json::Arr(a) => {
                for (i, x) in a.iter().enumerate() {
                    if matches!(x, Json::Obj(_) | Json::Arr(_)) {
                        self.duplicate_keys(x, &format!("{path}[{i}]"));
                    }
                }
            }
            _ => {}
        }
    }

    fn wrong(&mut self, path: &str, v: &Json, want: &str) {
        self.push(path, format!("{} is {}, but must be {want}", label(path), show(v)));
    }

    fn object<'j>(&mut self, v: &'j Json, path: &str) -> Option<&'j Json> {
        if matches!(v, Json::Obj(_)) {
            Some(v)
        } else {
            self.wrong(path, v, "an object");
            None
        }
    }

    fn get<'j>(&mut self, obj: &'j Json, path: &str, key: &str) -> Option<(String, &'j Json)> {
        let p = child(path, key);
        match obj.get(key) {
            Some(v) => Some((p, v)),
            None => {
                self.push(&p, format!("{p} is missing"));
                None
            }
        }
    }

    fn string<'j>(&mut self, obj: &'j Json, path: &str, key: &str, allow_empty: bool) -> Option<&'j str> {
        let (p, v) = self.get(obj, path, key)?;
        self.string_value(v, &p, allow_empty)
    }

    fn string_value<'j>(&mut self, v: &'j Json, p: &str, allow_empty: bool) -> Option<&'j str> {
        match v {
            Json::Str(s) if allow_empty || !s.is_empty() => Some(s),
            _ => {
                self.wrong(p, v, if allow_empty { "a string" } else { "a non-empty string" });
                None
            }
        }
    }

    fn one_of(&mut self, obj: &Json, path: &str, key: &str, allowed: &[&'static str]) -> Option<&'static str> {
        let (p, v) = self.get(obj, path, key)?;
        if let Json::Str(s) = v {
            if let Some(a) = allowed.iter().find(|a| **a == s) {
                return Some(a);
            }
        }
        let list: Vec<String> = allowed.iter().map(|a| format!("\"{a}\"")).collect();
        let want = if list.len() == 1 { list[0].clone() } else { format!("one of {}", list.join(", ")) };
        self.wrong(&p, v, &want);
        None
    }

    fn boolean(&mut self, obj: &Json, path: &str, key: &str) -> Option<bool> {
        let (p, v) = self.get(obj, path, key)?;
        match v {
            Json::Bool(b) => Some(*b),
            _ => {
                self.wrong(&p, v, "a boolean");
                None
            }
        }
    }

    fn integer(&mut self, obj: &Json, path: &str, key: &str, min: u64) -> Option<u64> {
        let (p, v) = self.get(obj, path, key)?;
        self.integer_value(v, &p, min)
    }

    fn integer_value(&mut self, v: &Json, p: &str, min: u64) -> Option<u64> {
        match v {
            Json::Num(x) if x.fract() == 0.0 && *x >= min as f64 && *x <= MAX_SAFE_INTEGER => Some(*x as u64),
            _ => {
                self.wrong(p, v, &format!("an integer >= {min}"));
                None
            }
        }
    }

    fn number(&mut self, obj: &Json, path: &str, key: &str, min: f64, max: f64) -> Option<f64> {
        let (p, v) = self.get(obj, path, key)?;
        self.number_value(v, &p, min, max)
    }

    fn number_value(&mut self, v: &Json, p: &str, min: f64, max: f64) -> Option<f64> {
        match v {
            Json::Num(x) if x.is_finite() && *x >= min && *x <= max => Some(*x),
            _ => {
                let want = if max.is_finite() {
                    format!("a number in [{}, {}]", js_num(min), js_num(max))
                } else {
                    format!("a number >= {}", js_num(min))
                };
                self.wrong(p, v, &want);
                None
            }
        }
    }

    fn array<'j>(&mut self, obj: &'j Json, path: &str, key: &str) -> Option<(String, &'j [Json])> {
        let (p, v) = self.get(obj, path, key)?;
        match v {
            Json::Arr(a) => Some((p, a)),
            _ => {
                self.wrong(&p, v, "an array");
                None
            }
        }
    }

    /// An array of strings.
    fn strings(&mut self, obj: &Json, path: &str, key: &str) {
        if let Some((p, a)) = self.array(obj, path, key) {
            for (i, x) in a.iter().enumerate() {
                self.string_value(x, &format!("{p}[{i}]"), true);
            }
        }
    }

    fn verdict(&mut self, root: &Json, revision_ids: Option<&[Option<String>; 2]>) -> Option<Summary> {
        self.object(root, "")?;
        self.one_of(root, "", "schemaVersion", &[SCHEMA_VERSION]);
        let status = self.one_of(root, "", "status", &Status::NAMES).and_then(Status::from_name);
        let reason = self.string(root, "", "reason", false);
        self.one_of(root, "", "treatmentAxis", &["harness", "runtime-profile"]);
        let policy = self.get(root, "", "policy").and_then(|(p, v)| self.policy(v, &p));
        for key in ["manifestHash", "fixtureHash", "harnessHash"] {
            self.string(root, "", key, false);
        }
        if let Some((p, v)) = self.get(root, "", "sandbox") {
            self.sandbox(v, &p);
        }
        let mut aggregates = [None; 2];
        let mut clean = [false; 2];
        for v in Variant::BOTH {
            let before = self.total;
            aggregates[v as usize] = self.get(root, "", v.name()).and_then(|(p, x)| self.aggregate(x, &p));
            clean[v as usize] = self.total == before;
        }
        let pairs = self.get(root, "", "matchedPairs").and_then(|(p, v)| self.pairs(v, &p));
        let rows = self.trials(root, revision_ids);

        // Recompute only from a complete set of rows: a partial set would report every aggregate
        // as wrong, burying the real finding.
        let rows = rows?;
        let mut recomputed = [Aggregate::default(); 2];
        for v in Variant::BOTH {
            let mine: Vec<&Trial> = rows.iter().filter(|r| r.variant == v).collect();
            recomputed[v as usize] = aggregate(&mine);
            let Some(persisted) = aggregates[v as usize] else { continue };
            let before = self.total;
            if persisted.trials != mine.len() as u64 {
                self.push(
                    "trials",
                    format!(
                        "trials has {} {} row(s), but {}.trials is {}",
                        mine.len(),
                        v.name(),
                        v.name(),
                        persisted.trials
                    ),
                );
            }
            // `trials` itself was just reported as a row count; the other fields are their own facts.
            for (name, get) in &Aggregate::FIELDS[1..] {
                self.compare(&format!("{}.{name}", v.name()), get(&persisted), get(&recomputed[v as usize]));
            }
            clean[v as usize] &= self.total == before;
        }
        let recomputed_pairs = match_pairs(&rows);
        if let Some(p) = pairs {
            for (name, get) in &Pairs::FIELDS {
                self.compare(&format!("matchedPairs.{name}"), get(&p), get(&recomputed_pairs));
            }
        }
        let policy = policy?;
        // Decide on the persisted aggregates when they held up (as the reference does), else on
        // the recomputed ones, so a wrong status is still named next to the wrong numbers.
        let pick = |v: Variant| match (clean[v as usize], aggregates[v as usize]) {
            (true, Some(a)) => a,
            _ => recomputed[v as usize],
        };
        let (b, c) = (pick(Variant::Baseline), pick(Variant::Candidate));
        let (want_status, want_reason) = decide(&b, &c, &recomputed_pairs, &policy);
        if let Some(s) = status {
            if s != want_status {
                self.push(
                    "status",
                    format!("status is \"{s}\", but the trial rows and policy compute \"{want_status}\""),
                );
            }
        }
        if let Some(r) = reason {
            if r != want_reason {
                self.push(
                    "reason",
                    format!("reason is {}, but the trial rows and policy give {}", quote(r), quote(&want_reason)),
                );
            }
        }
        Some(Summary { status: status?, reason: reason?.to_owned(), policy, baseline: b, candidate: c, pairs: pairs? })
    }

    fn compare(&mut self, path: &str, persisted: f64, recomputed: f64) {
        if (persisted - recomputed).abs() > TOLERANCE {
            self.push(
                path,
                format!("{path} is {}, but the trial rows compute {}", js_num(persisted), js_num(recomputed)),
            );
        }
    }

    fn policy(&mut self, v: &Json, p: &str) -> Option<Policy> {
        self.object(v, p)?;
        let min_pairs = self.integer(v, p, "minimumMatchedPairs", 2);
        let infra = self.number(v, p, "maxInfrastructureErrorRatio", 0.0, 0.5);
        let cost = self.number(v, p, "maxCostRatio", 1.0, f64::INFINITY);
        let gain = self.number(v, p, "minimumMeanScoreGain", 0.0, f64::INFINITY);
        Some(Policy {
            minimum_matched_pairs: min_pairs?,
            max_infrastructure_error_ratio: infra?,
            max_cost_ratio: cost?,
            minimum_mean_score_gain: gain?,
        })
    }

    fn sandbox(&mut self, v: &Json, p: &str) {
        if self.object(v, p).is_none() {
            return;
        }
        self.one_of(v, p, "policy", &["trusted-fixture", "isolated"]);
        self.one_of(v, p, "envPolicy", &["allowlist", "inherited"]);
        self.strings(v, p, "envKeys");
        self.one_of(v, p, "networkPolicy", &["denied", "unverified"]);
        self.one_of(v, p, "fsScope", &["trial-root", "host"]);
        self.strings(v, p, "permissionFlags");
    }

    fn aggregate(&mut self, v: &Json, p: &str) -> Option<Aggregate> {
        self.object(v, p)?;
        let trials = self.integer(v, p, "trials", 0);
        let completed = self.integer(v, p, "completedTrials", 0);
        let infra = self.integer(v, p, "infrastructureErrors", 0);
        let passed = self.integer(v, p, "passedTrials", 0);
        let pass_rate = self.number(v, p, "passRate", 0.0, 1.0);
        let mean_score = self.number(v, p, "meanScore", 0.0, 100.0);
        let mut money = [None; 5];
        for (i, key) in [
            "totalCostUsd",
            "totalCredits",
            "costPerAttemptedTrialUsd",
            "costPerCompletedTrialUsd",
            "costPerPassedTrialUsd",
        ]
        .into_iter()
        .enumerate()
        {
            money[i] = self.number(v, p, key, 0.0, f64::INFINITY);
        }
        // The aggregate's own arithmetic, checked even when the rows cannot be.
        if let (Some(t), Some(c), Some(i)) = (trials, completed, infra) {
            if c + i != t {
                self.push(p, format!("{p}.completedTrials + infrastructureErrors is {}, but {p}.trials is {t}", c + i));
            }
        }
        if let (Some(c), Some(n)) = (completed, passed) {
            if n > c {
                self.push(
                    &child(p, "passedTrials"),
                    format!("{p}.passedTrials is {n}, but must not exceed {p}.completedTrials ({c})"),
                );
            }
        }
        if let (Some(c), Some(n), Some(r)) = (completed, passed, pass_rate) {
            let want = if c == 0 { 0.0 } else { n as f64 / c as f64 };
            if (r - want).abs() > f64::EPSILON * 4.0 {
                self.push(
                    &child(p, "passRate"),
                    format!("{p}.passRate is {}, but passedTrials / completedTrials is {}", js_num(r), js_num(want)),
                );
            }
        }
        Some(Aggregate {
            trials: trials?,
            completed_trials: completed?,
            infrastructure_errors: infra?,
            passed_trials: passed?,
            pass_rate: pass_rate?,
            mean_score: mean_score?,
            total_cost_usd: money[0]?,
            total_credits: money[1]?,
            cost_per_attempted_trial_usd: money[2]?,
            cost_per_completed_trial_usd: money[3]?,
            cost_per_passed_trial_usd: money[4]?,
        })
    }

    fn pairs(&mut self, v: &Json, p: &str) -> Option<Pairs> {
        self.object(v, p)?;
        let pairs = self.integer(v, p, "pairs", 0);
        let cw = self.integer(v, p, "candidateWins", 0);
        let bw = self.integer(v, p, "baselineWins", 0);
        let ties = self.integer(v, p, "ties", 0);
        let delta = self.number(v, p, "meanScoreDelta", -100.0, 100.0);
        if let (Some(n), Some(cw), Some(bw), Some(t)) = (pairs, cw, bw, ties) {
            if cw + bw + t != n {
                self.push(
                    p,
                    format!("{p}.candidateWins + baselineWins + ties is {}, but {p}.pairs is {n}", cw + bw + t),
                );
            }
        }
        Some(Pairs { pairs: pairs?, candidate_wins: cw?, baseline_wins: bw?, ties: ties?, mean_score_delta: delta? })
    }

    /// Every trial row; `None` unless every row's recomputation inputs are valid.
    fn trials(&mut self, root: &Json, revision_ids: Option<&[Option<String>; 2]>) -> Option<Vec<Trial>> {
        let (p, rows) = self.array(root, "", "trials")?;
        let mut out = Vec::with_capacity(rows.len());
        let mut all = true;
        let mut first: HashMap<(Variant, u64), usize> = HashMap::new();
        for (i, v) in rows.iter().enumerate() {
            let rp = format!("{p}[{i}]");
            let Some((t, revision)) = self.trial(v, &rp) else {
                all = false;
                continue;
            };
            if let (Some(ids), Some(revision)) = (revision_ids, revision) {
                if let Some(want) = &ids[t.variant as usize] {
                    if revision != want {
                        self.push(
                            &format!("{rp}.revisionId"),
                            format!(
                                "{rp}.revisionId is {}, but {}/revision.json has {}",
                                quote(revision),
                                t.variant.revision_dir(),
                                quote(want)
                            ),
                        );
                    }
                }
            }
            // A run records each index once per variant; a second row would make the pairing
            // ambiguous (the reference silently keeps the last one).
            if let Some(j) = first.get(&(t.variant, t.trial)) {
                self.push(
                    &format!("{rp}.trial"),
                    format!(
                        "{rp}.trial is {}, but trials[{j}] is already the {} row for that trial",
                        t.trial,
                        t.variant.name()
                    ),
                );
            } else {
                first.insert((t.variant, t.trial), i);
            }
            out.push(t);
        }
        all.then_some(out)
    }

    /// A row's recomputation inputs, when those are valid (its other fields may still have
    /// findings: they do not stop the arithmetic), and its `revisionId`.
    fn trial<'j>(&mut self, v: &'j Json, p: &str) -> Option<(Trial, Option<&'j str>)> {
        self.object(v, p)?;
        let variant = self.one_of(v, p, "variant", &["baseline", "candidate"]);
        self.string(v, p, "harnessId", false);
        self.string(v, p, "runtimeProfile", false);
        let trial = self.integer(v, p, "trial", 1);
        let class = self.one_of(v, p, "classification", &["passed", "failed", "infrastructure_error"]);
        self.strings(v, p, "changedFiles");
        let grade = self.get(v, p, "grade").and_then(|(gp, g)| self.grade(g, &gp));
        self.integer(v, p, "executorExitCode", 0);
        self.string(v, p, "executorError", true);
        let revision = self.string(v, p, "revisionId", false);
        self.number(v, p, "durationMs", 0.0, f64::INFINITY);
        self.string(v, p, "artifactDirectory", false);
        if let Some((sp, s)) = self.get(v, p, "sandbox") {
            self.sandbox(s, &sp);
        }
        let (cost_usd, credits) = match v.get("metrics") {
            Some(m) => self.metrics(m, &child(p, "metrics"))?,
            None => (0.0, 0.0),
        };
        let (grade_passed, score) = grade?;
        let t = Trial {
            variant: if variant? == "baseline" { Variant::Baseline } else { Variant::Candidate },
            trial: trial?,
            completed: class? != "infrastructure_error",
            passed: class? == "passed",
            grade_passed,
            score,
            cost_usd,
            credits,
        };
        Some((t, revision))
    }

    /// `(grade.passed, grade.score)`, when both are valid.
    fn grade(&mut self, v: &Json, p: &str) -> Option<(bool, f64)> {
        self.object(v, p)?;
        self.one_of(v, p, "kind", &["readme-package-v1"]);
        let passed = self.boolean(v, p, "passed");
        let score = self.number(v, p, "score", 0.0, 100.0);
        if let Some((cp, checks)) = self.array(v, p, "checks") {
            for (i, c) in checks.iter().enumerate() {
                let cp = format!("{cp}[{i}]");
                if self.object(c, &cp).is_none() {
                    continue;
                }
                self.string(c, &cp, "id", false);
                self.boolean(c, &cp, "passed");
                self.boolean(c, &cp, "hard");
                self.number(c, &cp, "weight", 0.0, f64::INFINITY);
                self.string(c, &cp, "detail", true);
                if let Some(cmd) = c.get("command") {
                    self.command(cmd, &child(&cp, "command"));
                }
            }
        }
        Some((passed?, score?))
    }

    fn command(&mut self, v: &Json, p: &str) {
        if self.object(v, p).is_none() {
            return;
        }
        self.strings(v, p, "command");
        self.integer(v, p, "exitCode", 0);
        self.string(v, p, "stdout", true);
        self.string(v, p, "stderr", true);
        self.boolean(v, p, "timedOut");
        self.number(v, p, "durationMs", 0.0, f64::INFINITY);
    }

    /// `(costUsd, credits)` of valid metrics, each 0 when absent.
    fn metrics(&mut self, v: &Json, p: &str) -> Option<(f64, f64)> {
        self.object(v, p)?;
        let opt_number = |c: &mut Checker, key: &str| match v.get(key) {
            Some(x) => c.number_value(x, &child(p, key), 0.0, f64::INFINITY).map(Some),
            None => Some(None),
        };
        let _ = opt_number(self, "durationMs");
        let _ = opt_number(self, "durationApiMs");
        let cost = opt_number(self, "costUsd");
        let credits = opt_number(self, "credits");
        if let Some(x) = v.get("turns") {
            self.integer_value(x, &child(p, "turns"), 0);
        }
        for key in ["usage", "modelUsage"] {
            if let Some(x) = v.get(key) {
                self.object(x, &child(p, key));
            }
        }
        if let Some(x) = v.get("permissionDenials") {
            if !matches!(x, Json::Arr(_)) {
                self.wrong(&child(p, "permissionDenials"), x, "an array");
            }
        }
        for key in ["sessionId", "stopReason", "terminalReason"] {
            if let Some(x) = v.get(key) {
                self.string_value(x, &child(p, key), true);
            }
        }
        Some((cost?.unwrap_or(0.0), credits?.unwrap_or(0.0)))
    }
}

/// `path.key`, or `path["odd key"]` for a key that is not a plain identifier.
pub(super) fn child(path: &str, key: &str) -> String {
    let plain = key.len() <= 64
        && key.chars().next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == '$')
        && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '$');
    match (plain, path.is_empty()) {
        (true, true) => key.to_owned(),
        (true, false) => format!("{path}.{key}"),
        (false, _) => format!("{path}[{}]", quote(key)),
    }
}

/// The subject of a sentence about `path`.
fn label(path: &str) -> &str {
    if path.is_empty() {
        "the top level"
    } else {
        path
    }
}

/// A value as a finding shows it: scalars in full (strings quoted and capped), containers by kind.
fn show(v: &Json) -> String {
    match v {
        Json::Null => "null".into(),
        Json::Bool(b) => b.to_string(),
        Json::Num(x) => js_num(*x),
        Json::Str(s) => quote(s),
        Json::Arr(_) => "an array".into(),
        Json::Obj(_) => "an object".into(),
    }
}

/// A string quoted with escapes and capped at [`MAX_QUOTE`] characters, so a 100 MB value or a
/// control character never reaches the terminal as is.
pub fn quote(s: &str) -> String {
    let mut chars = s.char_indices();
    match chars.nth(MAX_QUOTE) {
        None => format!("{s:?}"),
        Some((cut, _)) => {
            let q = format!("{:?}", &s[..cut]);
            format!("{}…\" ({} bytes)", &q[..q.len() - 1], s.len())
        }
    }
}
