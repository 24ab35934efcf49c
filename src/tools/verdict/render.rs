//! The three summary formats: `table` for people, `json` and `tsv` for scripts. Each writes to
//! any `io::Write`; numbers are written as JavaScript writes them, so they read as in the file.

use std::io::{self, Write};

use super::model::{Aggregate, Summary, Variant};
use super::num::{js_num, round2};

fn variants(s: &Summary) -> [(Variant, &Aggregate); 2] {
    [(Variant::Baseline, &s.baseline), (Variant::Candidate, &s.candidate)]
}

fn guardrail_words(ok: bool) -> &'static str {
    if ok {
        "within"
    } else {
        "over"
    }
}

/// Aligned columns: status and reason, one row per variant, then the evidence.
pub fn table(s: &Summary, w: &mut impl Write) -> io::Result<()> {
    writeln!(w, "status    {}", s.status)?;
    writeln!(w, "reason    {}", s.reason)?;
    writeln!(w)?;
    let header = [
        "variant",
        "passed/completed",
        "pass rate",
        "mean score",
        "infra errors",
        "total cost USD",
        "cost/completed USD",
        "credits",
    ];
    let mut rows = vec![header.map(String::from).to_vec()];
    for (v, a) in variants(s) {
        rows.push(vec![
            v.name().to_owned(),
            format!("{}/{}", a.passed_trials, a.completed_trials),
            format!("{}%", js_num(round2(a.pass_rate * 100.0))),
            js_num(a.mean_score),
            a.infrastructure_errors.to_string(),
            js_num(a.total_cost_usd),
            js_num(a.cost_per_completed_trial_usd),
            js_num(a.total_credits),
        ]);
    }
    let widths: Vec<usize> =
        (0..header.len()).map(|i| rows.iter().map(|r| r[i].chars().count()).max().unwrap_or(0)).collect();
    for r in &rows {
        let mut line = String::new();
        for (i, cell) in r.iter().enumerate() {
            let pad = widths[i] - cell.chars().count();
            if i == 0 {
                line.push_str(cell);
                line.push_str(&" ".repeat(pad));
            } else {
                // Numbers read best right-aligned, two spaces apart.
                line.push_str(&" ".repeat(pad + 2));
                line.push_str(cell);
            }
        }
        writeln!(w, "{line}")?;
    }
    writeln!(w)?;
    let p = &s.pairs;
    writeln!(
        w,
        "evidence  {} matched pairs ({} required): candidate wins {}, baseline wins {}, ties {}; mean score delta {}",
        p.pairs,
        s.policy.minimum_matched_pairs,
        p.candidate_wins,
        p.baseline_wins,
        p.ties,
        js_num(p.mean_score_delta)
    )?;
    let ratio = match s.cost_ratio() {
        Some(r) => format!("{}x the baseline's", js_num(r)),
        None => "none (the baseline cost is 0)".to_owned(),
    };
    writeln!(
        w,
        "cost      per completed trial {ratio}, {} the {}x guardrail",
        guardrail_words(s.within_cost_guardrail()),
        js_num(s.policy.max_cost_ratio)
    )?;
    if !s.within_credit_guardrail() {
        writeln!(w, "credits   per completed trial over the {}x guardrail", js_num(s.policy.max_cost_ratio))?;
    }
    Ok(())
}

/// A JSON number that prints integers without a fraction (`42`, not `42.0`).
fn number(x: f64) -> serde_json::Value {
    if x.fract() == 0.0 && x.abs() < 9_007_199_254_740_992.0 {
        serde_json::Value::from(x as i64)
    } else {
        serde_json::Value::from(x)
    }
}

fn variant_json(a: &Aggregate) -> serde_json::Value {
    serde_json::json!({
        "trials": a.trials,
        "completedTrials": a.completed_trials,
        "passedTrials": a.passed_trials,
        "infrastructureErrors": a.infrastructure_errors,
        "passRate": number(a.pass_rate),
        "meanScore": number(a.mean_score),
        "totalCostUsd": number(a.total_cost_usd),
        "costPerCompletedTrialUsd": number(a.cost_per_completed_trial_usd),
        "totalCredits": number(a.total_credits),
    })
}

/// One JSON object on one line.
pub fn json(s: &Summary, w: &mut impl Write) -> io::Result<()> {
    serde_json::to_writer(&mut *w, &summary_value(s))?;
    writeln!(w)
}

/// The summary as a JSON value: what `--format json` prints, and what the
/// server's `GET /api/evidence` builds on.
pub fn summary_value(s: &Summary) -> serde_json::Value {
    let p = &s.pairs;
    serde_json::json!({
        "status": s.status.name(),
        "reason": s.reason,
        "baseline": variant_json(&s.baseline),
        "candidate": variant_json(&s.candidate),
        "evidence": {
            "pairs": p.pairs,
            "minimumMatchedPairs": s.policy.minimum_matched_pairs,
            "candidateWins": p.candidate_wins,
            "baselineWins": p.baseline_wins,
            "ties": p.ties,
            "meanScoreDelta": number(p.mean_score_delta),
            "costRatio": s.cost_ratio().map(number),
            "maxCostRatio": number(s.policy.max_cost_ratio),
            "withinCostGuardrail": s.within_cost_guardrail(),
            "withinCreditGuardrail": s.within_credit_guardrail(),
        },
    })
}

/// `key<TAB>value` lines with dotted keys (`baseline.passRate`), for `awk -F'\t'` and `cut`.
pub fn tsv(s: &Summary, w: &mut impl Write) -> io::Result<()> {
    // The reason is a fixed sentence, but a TSV field must never hold a tab or a newline.
    let reason: String = s.reason.chars().map(|c| if c.is_control() { ' ' } else { c }).collect();
    writeln!(w, "status\t{}", s.status)?;
    writeln!(w, "reason\t{reason}")?;
    for (v, a) in variants(s) {
        let n = v.name();
        writeln!(w, "{n}.trials\t{}", a.trials)?;
        writeln!(w, "{n}.completedTrials\t{}", a.completed_trials)?;
        writeln!(w, "{n}.passedTrials\t{}", a.passed_trials)?;
        writeln!(w, "{n}.infrastructureErrors\t{}", a.infrastructure_errors)?;
        writeln!(w, "{n}.passRate\t{}", js_num(a.pass_rate))?;
        writeln!(w, "{n}.meanScore\t{}", js_num(a.mean_score))?;
        writeln!(w, "{n}.totalCostUsd\t{}", js_num(a.total_cost_usd))?;
        writeln!(w, "{n}.costPerCompletedTrialUsd\t{}", js_num(a.cost_per_completed_trial_usd))?;
        writeln!(w, "{n}.totalCredits\t{}", js_num(a.total_credits))?;
    }
    let p = &s.pairs;
    writeln!(w, "evidence.pairs\t{}", p.pairs)?;
    writeln!(w, "evidence.minimumMatchedPairs\t{}", s.policy.minimum_matched_pairs)?;
    writeln!(w, "evidence.candidateWins\t{}", p.candidate_wins)?;
    writeln!(w, "evidence.baselineWins\t{}", p.baseline_wins)?;
    writeln!(w, "evidence.ties\t{}", p.ties)?;
    writeln!(w, "evidence.meanScoreDelta\t{}", js_num(p.mean_score_delta))?;
    writeln!(w, "evidence.costRatio\t{}", s.cost_ratio().map_or("none".to_owned(), js_num))?;
    writeln!(w, "evidence.maxCostRatio\t{}", js_num(s.policy.max_cost_ratio))?;
    writeln!(w, "evidence.withinCostGuardrail\t{}", s.within_cost_guardrail())?;
    writeln!(w, "evidence.withinCreditGuardrail\t{}", s.within_credit_guardrail())
}
