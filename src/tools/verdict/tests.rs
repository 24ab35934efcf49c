use super::*;

const SAMPLE: &[u8] = include_bytes!("../../../fixtures/verdict/accept.verdict.json");

fn policy() -> Policy {
    Policy {
        minimum_matched_pairs: 2,
        max_infrastructure_error_ratio: 0.2,
        max_cost_ratio: 1.3,
        minimum_mean_score_gain: 5.0,
    }
}

fn row(variant: Variant, trial: u64, class: &str, score: f64, cost: f64) -> Trial {
    Trial {
        variant,
        trial,
        completed: class != "infrastructure_error",
        passed: class == "passed",
        grade_passed: class == "passed",
        score,
        cost_usd: cost,
        credits: 0.0,
    }
}

fn decide_rows(rows: &[Trial]) -> (Status, String) {
    let of = |v: Variant| aggregate(&rows.iter().filter(|r| r.variant == v).collect::<Vec<_>>());
    decide(&of(Variant::Baseline), &of(Variant::Candidate), &match_pairs(rows), &policy())
}

#[test]
fn the_sample_passes_with_its_numbers() {
    let s = check(SAMPLE, None).unwrap();
    assert_eq!(s.status, Status::Accept);
    assert_eq!(s.pairs.candidate_wins, 2);
    assert_eq!(s.cost_ratio(), Some(1.272727));
    assert!(s.within_cost_guardrail() && s.within_credit_guardrail());
}

#[test]
fn the_sample_checks_against_revisions() {
    let ok = check(SAMPLE, Some((br#"{"revisionId":"hr_baseline"}"#, br#"{"revisionId":"hr_candidate"}"#)));
    assert!(ok.is_ok());
    let bad = check(SAMPLE, Some((br#"{"revisionId":"hr_baseline"}"#, br#"{"revisionId":"other"}"#))).unwrap_err();
    assert_eq!(bad.total, 2);
    assert_eq!(bad.findings[0].path, "trials[2].revisionId");
    assert_eq!(bad.findings[0].message, r#"trials[2].revisionId is "hr_candidate", but H1/revision.json has "other""#);
    let missing = check(SAMPLE, Some((b"{}", b"[]"))).unwrap_err();
    assert_eq!(missing.findings[0].source, Source::Revision(Variant::Baseline));
    assert_eq!(missing.findings[0].message, "revisionId is missing");
    assert_eq!(missing.findings[1].message, "the top level is an array, but must be an object");
}

#[test]
fn every_decision_branch() {
    use Variant::{Baseline as B, Candidate as C};
    let infra = |t| row(B, t, "infrastructure_error", 0.0, 0.0);
    assert_eq!(decide_rows(&[infra(1), row(C, 1, "passed", 90.0, 0.0)]).0, Status::InfrastructureError);
    let (s, r) = decide_rows(&[
        infra(1),
        row(B, 2, "failed", 10.0, 0.0),
        row(C, 1, "passed", 90.0, 0.0),
        row(C, 2, "passed", 90.0, 0.0),
    ]);
    assert_eq!(s, Status::InfrastructureError);
    assert_eq!(r, "1/4 trials failed for infrastructure reasons, above the 20% threshold; the run measures the harness setup, not the harnesses.");
    let (s, r) = decide_rows(&[row(B, 1, "failed", 10.0, 0.0), row(C, 1, "passed", 90.0, 0.0)]);
    assert_eq!(s, Status::InsufficientEvidence);
    assert!(r.starts_with("1 matched pair(s) completed, below the 2 this comparison requires;"));
    let pair = |b: (&str, f64), c: (&str, f64), cost: (f64, f64)| {
        (1..=2).flat_map(move |t| [row(B, t, b.0, b.1, cost.0), row(C, t, c.0, c.1, cost.1)]).collect::<Vec<_>>()
    };
    assert_eq!(decide_rows(&pair(("passed", 90.0), ("failed", 40.0), (1.0, 1.0))).0, Status::Reject);
    let (s, r) = decide_rows(&pair(("failed", 40.0), ("passed", 90.0), (1.0, 1.0)));
    assert_eq!(s, Status::Accept);
    assert_eq!(
        r,
        "Candidate won 2/2 matched pairs (mean score delta 50) within the 1.3x cost-per-completed-trial guardrail."
    );
    let (s, r) = decide_rows(&pair(("failed", 40.0), ("passed", 90.0), (1.0, 2.0)));
    assert_eq!(
        (s, r.as_str()),
        (Status::NeedMoreWork, "Candidate improved outcomes but exceeded the cost-per-completed-trial guardrail.")
    );
    let (s, r) = decide_rows(&pair(("failed", 40.0), ("failed", 42.0), (1.0, 1.0)));
    assert_eq!(
        (s, r.as_str()),
        (Status::NeedMoreWork, "No regression, but the candidate did not clear the paired improvement threshold.")
    );
}

#[test]
fn pairs_follow_the_reference() {
    use Variant::{Baseline as B, Candidate as C};
    // Infrastructure rows never pair; unpaired indexes are ignored; the delta is rounded to 2 places.
    let rows = [
        row(B, 1, "failed", 10.0, 0.0),
        row(C, 1, "failed", 10.0 + 1.0 / 3.0, 0.0),
        row(B, 2, "passed", 50.0, 0.0),
        row(C, 2, "infrastructure_error", 0.0, 0.0),
        row(C, 3, "passed", 50.0, 0.0),
    ];
    let p = match_pairs(&rows);
    assert_eq!(p, Pairs { pairs: 1, candidate_wins: 0, baseline_wins: 0, ties: 1, mean_score_delta: 0.33 });
}

#[test]
fn findings_are_capped_and_counted() {
    let mut v: serde_json::Value = serde_json::from_slice(SAMPLE).unwrap();
    v["trials"] = serde_json::Value::Array(vec![serde_json::json!(1); 500]);
    let r = check(v.to_string().as_bytes(), None).unwrap_err();
    assert_eq!(r.findings.len(), MAX_FINDINGS);
    assert_eq!(r.total, 500);
    assert_eq!(r.findings[0].message, "trials[0] is 1, but must be an object");
}

#[test]
fn quoting_is_bounded_and_escaped() {
    assert_eq!(quote("a\"b\n"), r#""a\"b\n""#);
    let long = "é".repeat(1000);
    let q = quote(&long);
    assert!(q.ends_with("…\" (2000 bytes)"), "{q}");
    assert_eq!(q.chars().count(), MAX_QUOTE + 2 + " (2000 bytes)".len() + 1);
    assert_eq!(child("a", "b c"), r#"a["b c"]"#);
    assert_eq!(child("", "status"), "status");
}

#[test]
fn duplicate_keys_are_findings() {
    let r = check(br#"{"status":"accept","status":"reject"}"#, None).unwrap_err();
    assert_eq!(r.findings[0].message, r#"the top level has the key "status" more than once"#);
}

/// Every leaf of the sample, by JSON pointer.
fn leaves(v: &serde_json::Value, at: String, out: &mut Vec<String>) {
    match v {
        serde_json::Value::Object(m) => m.iter().for_each(|(k, x)| leaves(x, format!("{at}/{k}"), out)),
        serde_json::Value::Array(a) => a.iter().enumerate().for_each(|(i, x)| leaves(x, format!("{at}/{i}"), out)),
        _ => out.push(at),
    }
}

#[test]
fn every_finding_starts_with_its_path() {
    let sample: serde_json::Value = serde_json::from_slice(SAMPLE).unwrap();
    let mut pointers = Vec::new();
    leaves(&sample, String::new(), &mut pointers);
    let bad = [
        serde_json::json!(null),
        serde_json::json!("x"),
        serde_json::json!(-1),
        serde_json::json!(1e9),
        serde_json::json!({}),
    ];
    let mut rejected = 0;
    for p in &pointers {
        for b in &bad {
            let mut v = sample.clone();
            *v.pointer_mut(p).unwrap() = b.clone();
            let Err(r) = check(v.to_string().as_bytes(), None) else { continue };
            rejected += 1;
            assert!(!r.findings.is_empty());
            for f in &r.findings {
                assert!(!f.path.is_empty(), "{p} = {b}: {f}");
                assert!(f.message.starts_with(&f.path), "{p} = {b}: {:?} does not start with {:?}", f.message, f.path);
            }
        }
    }
    // Nearly every edit is caught; the exceptions are free-form strings such as executorError.
    assert!(rejected > pointers.len() * 4, "{rejected} of {} edits rejected", pointers.len() * 5);
}
