//! A verdict's terms (status, variants, findings, trials, aggregates,
//! pairs, the policy and its decision) and the recomputation the checker
//! holds a verdict to.

use super::num::{self, js_num, ratio, round2, round6};
use std::collections::HashMap;
use std::fmt;

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
    pub(super) const FIELDS: [Field<Aggregate>; 11] = [
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
    pub(super) const FIELDS: [Field<Pairs>; 5] = [
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
