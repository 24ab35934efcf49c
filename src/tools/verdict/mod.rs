//! `harness-compare-result.v1` verdicts, checked as evidence.
//!
//! The trial rows are the evidence and every aggregate in a verdict is a summary of them, so a
//! file with a legal shape but invented numbers must fail. [`check`] validates the shape, then
//! recomputes the aggregates, the matched pairs and the decision from the rows and the policy,
//! following `spec/verdict-recompute.md` (itself taken from the reference implementation,
//! QoderAI/better-harness `packages/harness/src/compare/`). It is pure: bytes in, a [`Summary`] or
//! every [`Finding`] out. Rendering lives in [`render`].

mod json;
mod num;
pub mod render;

use std::collections::{HashMap, HashSet};
use std::fmt;

use json::Json;
pub use num::{js_num, js_round, ratio, round2, round6};

/// The only `schemaVersion` this module knows.
pub const SCHEMA_VERSION: &str = "harness-compare-result.v1";
/// Findings kept in full; the rest are only counted, so hostile input cannot flood the output.
pub const MAX_FINDINGS: usize = 50;
/// Longest quoted value in a finding, in characters.
pub const MAX_QUOTE: usize = 200;
/// Persisted and recomputed numbers agree when they differ by at most this.
pub const TOLERANCE: f64 = 1e-9;

/// Largest evidence file read (a verdict with thousands of trials is a few MB).
pub const MAX_EVIDENCE_BYTES: u64 = 32 * 1024 * 1024;

/// Reads an evidence file with a bound: only a regular file (opened without
/// blocking, so a FIFO cannot hang the reader, and its type checked on the
/// open file), at most [`MAX_EVIDENCE_BYTES`]. The error names the path.
pub fn read_evidence(path: &std::path::Path) -> Result<Vec<u8>, String> {
    use std::os::unix::fs::OpenOptionsExt;
    let name = path.display();
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NONBLOCK | nix::libc::O_NOCTTY)
        .open(path)
        .map_err(|e| format!("{name}: {e}"))?;
    let meta = f.metadata().map_err(|e| format!("{name}: {e}"))?;
    if !meta.file_type().is_file() {
        return Err(format!("{name}: not a regular file; not read"));
    }
    if meta.len() > MAX_EVIDENCE_BYTES {
        return Err(format!("{name}: {} bytes, larger than {MAX_EVIDENCE_BYTES}; not read", meta.len()));
    }
    read_evidence_from(f, &name.to_string())
}

/// Reads at most [`MAX_EVIDENCE_BYTES`] from `r` (stdin, or a file that
/// grows while read); more is an error naming `name`.
pub fn read_evidence_from(r: impl std::io::Read, name: &str) -> Result<Vec<u8>, String> {
    use std::io::Read;
    let mut buf = Vec::new();
    r.take(MAX_EVIDENCE_BYTES + 1).read_to_end(&mut buf).map_err(|e| format!("{name}: {e}"))?;
    if buf.len() as u64 > MAX_EVIDENCE_BYTES {
        return Err(format!("{name}: larger than {MAX_EVIDENCE_BYTES} bytes; not read"));
    }
    Ok(buf)
}
/// Largest integer a JavaScript number holds exactly; integers above it are not counts.
const MAX_SAFE_INTEGER: f64 = 9_007_199_254_740_991.0;

/// The five verdict statuses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Status {
    Accept,
    NeedMoreWork,
    Reject,
    InsufficientEvidence,
    InfrastructureError,
}

impl Status {
    pub const NAMES: [&'static str; 5] =
        ["accept", "need_more_work", "reject", "insufficient_evidence", "infrastructure_error"];
    const ALL: [Status; 5] = [
        Status::Accept,
        Status::NeedMoreWork,
        Status::Reject,
        Status::InsufficientEvidence,
        Status::InfrastructureError,
    ];

    pub fn name(self) -> &'static str {
        Status::NAMES[self as usize]
    }

    pub fn from_name(s: &str) -> Option<Status> {
        Status::NAMES.iter().position(|n| *n == s).map(|i| Status::ALL[i])
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The two arms of a comparison.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Variant {
    Baseline,
    Candidate,
}

impl Variant {
    pub const BOTH: [Variant; 2] = [Variant::Baseline, Variant::Candidate];

    pub fn name(self) -> &'static str {
        match self {
            Variant::Baseline => "baseline",
            Variant::Candidate => "candidate",
        }
    }

    /// The evidence directory holding this variant's `revision.json`.
    pub fn revision_dir(self) -> &'static str {
        match self {
            Variant::Baseline => "H0",
            Variant::Candidate => "H1",
        }
    }
}

/// Which input a finding is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    Verdict,
    Revision(Variant),
}

/// One thing wrong with the input. `message` is a whole sentence that starts with the JSON path
/// (`baseline.passRate is 0.5, but the trial rows compute 1`); `path` is that path alone.
#[derive(Debug, Clone, PartialEq)]
pub struct Finding {
    pub source: Source,
    pub path: String,
    pub message: String,
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str(&self.message)
    }
}

/// Why an input was rejected: the first [`MAX_FINDINGS`] findings and how many there were.
#[derive(Debug, Clone, PartialEq)]
pub struct Rejection {
    pub findings: Vec<Finding>,
    pub total: usize,
}

/// The decision thresholds a verdict was taken under.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Policy {
    pub minimum_matched_pairs: u64,
    pub max_infrastructure_error_ratio: f64,
    pub max_cost_ratio: f64,
    pub minimum_mean_score_gain: f64,
}

/// One variant's aggregate (`baseline` / `candidate`).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Aggregate {
    pub trials: u64,
    pub completed_trials: u64,
    pub infrastructure_errors: u64,
    pub passed_trials: u64,
    pub pass_rate: f64,
    pub mean_score: f64,
    pub total_cost_usd: f64,
    pub total_credits: f64,
    pub cost_per_attempted_trial_usd: f64,
    pub cost_per_completed_trial_usd: f64,
    pub cost_per_passed_trial_usd: f64,
}

type Field<T> = (&'static str, fn(&T) -> f64);

impl Aggregate {
    /// Every field, by its JSON name, in the order the format lists them.
    const FIELDS: [Field<Aggregate>; 11] = [
        ("trials", |a| a.trials as f64),
        ("completedTrials", |a| a.completed_trials as f64),
        ("infrastructureErrors", |a| a.infrastructure_errors as f64),
        ("passedTrials", |a| a.passed_trials as f64),
        ("passRate", |a| a.pass_rate),
        ("meanScore", |a| a.mean_score),
        ("totalCostUsd", |a| a.total_cost_usd),
        ("totalCredits", |a| a.total_credits),
        ("costPerAttemptedTrialUsd", |a| a.cost_per_attempted_trial_usd),
        ("costPerCompletedTrialUsd", |a| a.cost_per_completed_trial_usd),
        ("costPerPassedTrialUsd", |a| a.cost_per_passed_trial_usd),
    ];
}

/// The matched-pair summary (`matchedPairs`).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Pairs {
    pub pairs: u64,
    pub candidate_wins: u64,
    pub baseline_wins: u64,
    pub ties: u64,
    pub mean_score_delta: f64,
}

impl Pairs {
    const FIELDS: [Field<Pairs>; 5] = [
        ("pairs", |p| p.pairs as f64),
        ("candidateWins", |p| p.candidate_wins as f64),
        ("baselineWins", |p| p.baseline_wins as f64),
        ("ties", |p| p.ties as f64),
        ("meanScoreDelta", |p| p.mean_score_delta),
    ];
}

/// What the recomputation needs from one trial row.
#[derive(Debug, Clone, PartialEq)]
pub struct Trial {
    pub variant: Variant,
    /// The trial index; a baseline and a candidate row with the same index form a pair.
    pub trial: u64,
    /// `classification` is not `infrastructure_error`.
    pub completed: bool,
    /// `classification` is `passed`.
    pub passed: bool,
    pub grade_passed: bool,
    pub score: f64,
    /// `metrics.costUsd`, 0 when absent.
    pub cost_usd: f64,
    /// `metrics.credits`, 0 when absent.
    pub credits: f64,
}

/// A verdict that survived every check: what the summary output shows.
#[derive(Debug, Clone, PartialEq)]
pub struct Summary {
    pub status: Status,
    pub reason: String,
    pub policy: Policy,
    pub baseline: Aggregate,
    pub candidate: Aggregate,
    pub pairs: Pairs,
}

impl Summary {
    /// Candidate over baseline cost per completed trial (round6); `None` when the baseline's is 0.
    pub fn cost_ratio(&self) -> Option<f64> {
        let b = self.baseline.cost_per_completed_trial_usd;
        (b != 0.0).then(|| round6(self.candidate.cost_per_completed_trial_usd / b))
    }

    /// The reference's cost guardrail: candidate ≤ baseline × `maxCostRatio` per completed trial.
    pub fn within_cost_guardrail(&self) -> bool {
        cost_within(&self.baseline, &self.candidate, &self.policy)
    }

    /// The same guardrail on credits per completed trial.
    pub fn within_credit_guardrail(&self) -> bool {
        credits_within(&self.baseline, &self.candidate, &self.policy)
    }
}

/// Recomputes one variant's aggregate from its rows, as `aggregateVariant` does.
pub fn aggregate(rows: &[&Trial]) -> Aggregate {
    let trials = rows.len() as u64;
    let completed: Vec<&&Trial> = rows.iter().filter(|r| r.completed).collect();
    let passed = rows.iter().filter(|r| r.passed).count() as u64;
    let n = completed.len() as u64;
    // Sums start at 0 and add in row order, as `reduce` does, so the doubles come out identical.
    let total_cost_usd = round6(rows.iter().fold(0.0, |s, r| s + r.cost_usd));
    Aggregate {
        trials,
        completed_trials: n,
        infrastructure_errors: trials - n,
        passed_trials: passed,
        pass_rate: if n == 0 { 0.0 } else { passed as f64 / n as f64 },
        mean_score: if n == 0 { 0.0 } else { round2(completed.iter().fold(0.0, |s, r| s + r.score) / n as f64) },
        total_cost_usd,
        total_credits: round6(rows.iter().fold(0.0, |s, r| s + r.credits)),
        cost_per_attempted_trial_usd: ratio(total_cost_usd, trials),
        cost_per_completed_trial_usd: ratio(total_cost_usd, n),
        cost_per_passed_trial_usd: ratio(total_cost_usd, passed),
    }
}

/// Recomputes the matched pairs, as `summarizeMatchedPairs` does: completed rows grouped by trial
/// index in order of first appearance; a later row of the same variant and index replaces an
/// earlier one.
pub fn match_pairs(rows: &[Trial]) -> Pairs {
    let mut order: Vec<u64> = Vec::new();
    let mut by_index: HashMap<u64, [Option<&Trial>; 2]> = HashMap::new();
    for r in rows.iter().filter(|r| r.completed) {
        let slot = by_index.entry(r.trial).or_insert_with(|| {
            order.push(r.trial);
            [None, None]
        });
        slot[r.variant as usize] = Some(r);
    }
    let mut p = Pairs::default();
    let mut delta = 0.0;
    for i in order {
        let [Some(b), Some(c)] = by_index[&i] else { continue };
        p.pairs += 1;
        delta += c.score - b.score;
        if c.grade_passed == b.grade_passed {
            p.ties += 1;
        } else if c.grade_passed {
            p.candidate_wins += 1;
        } else {
            p.baseline_wins += 1;
        }
    }
    p.mean_score_delta = if p.pairs == 0 { 0.0 } else { round2(delta / p.pairs as f64) };
    p
}

fn cost_within(b: &Aggregate, c: &Aggregate, policy: &Policy) -> bool {
    b.cost_per_completed_trial_usd == 0.0
        || c.cost_per_completed_trial_usd <= b.cost_per_completed_trial_usd * policy.max_cost_ratio
}

fn credits_within(b: &Aggregate, c: &Aggregate, policy: &Policy) -> bool {
    b.total_credits == 0.0
        || ratio(c.total_credits, c.completed_trials)
            <= ratio(b.total_credits, b.completed_trials) * policy.max_cost_ratio
}

/// The decision and its reason sentence, as `decideVerdict` takes them, in its order:
/// infrastructure health, evidence volume, regression, then promotion.
pub fn decide(b: &Aggregate, c: &Aggregate, pairs: &Pairs, policy: &Policy) -> (Status, String) {
    let attempted = b.trials + c.trials;
    let infra = b.infrastructure_errors + c.infrastructure_errors;
    let infra_ratio = if attempted == 0 { 1.0 } else { infra as f64 / attempted as f64 };
    if b.completed_trials == 0 || c.completed_trials == 0 {
        return (Status::InfrastructureError, "At least one variant has no completed trial.".into());
    }
    if infra_ratio > policy.max_infrastructure_error_ratio {
        let pct = num::to_fixed0(policy.max_infrastructure_error_ratio * 100.0);
        return (
            Status::InfrastructureError,
            format!(
                "{infra}/{attempted} trials failed for infrastructure reasons, above the {pct}% threshold; \
                 the run measures the harness setup, not the harnesses."
            ),
        );
    }
    if pairs.pairs < policy.minimum_matched_pairs {
        return (
            Status::InsufficientEvidence,
            format!(
                "{} matched pair(s) completed, below the {} this comparison requires; \
                 the outcome is a smoke test, not evidence of improvement.",
                pairs.pairs, policy.minimum_matched_pairs
            ),
        );
    }
    if c.pass_rate < b.pass_rate
        || pairs.baseline_wins > pairs.candidate_wins
        || pairs.mean_score_delta <= -policy.minimum_mean_score_gain
    {
        return (Status::Reject, "Candidate regressed paired outcomes or deterministic score.".into());
    }
    let improved =
        pairs.candidate_wins > pairs.baseline_wins || pairs.mean_score_delta >= policy.minimum_mean_score_gain;
    if improved && cost_within(b, c, policy) && credits_within(b, c, policy) {
        return (
            Status::Accept,
            format!(
                "Candidate won {}/{} matched pairs (mean score delta {}) within the {}x \
                 cost-per-completed-trial guardrail.",
                pairs.candidate_wins,
                pairs.pairs,
                js_num(pairs.mean_score_delta),
                js_num(policy.max_cost_ratio)
            ),
        );
    }
    if improved {
        return (
            Status::NeedMoreWork,
            "Candidate improved outcomes but exceeded the cost-per-completed-trial guardrail.".into(),
        );
    }
    (Status::NeedMoreWork, "No regression, but the candidate did not clear the paired improvement threshold.".into())
}

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
fn child(path: &str, key: &str) -> String {
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

#[cfg(test)]
mod tests;
