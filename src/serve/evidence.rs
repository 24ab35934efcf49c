//! `GET /api/evidence`: the compare evidence named by `--evidence`, checked
//! by the same `verdict::check` as `verdict-check` and summarized by the
//! same `render::summary_value` as its `--format json`, plus the policy and
//! the trial rows for the studio's Compare view.
//!
//! Read afresh on every request (evidence is rewritten between trials, and a
//! stale verdict would be worse than a slow one), each file bounded in size.
//! Evidence that fails the check is a `422` whose body names every finding,
//! so the page always has something readable to show.

use super::http::{method_not_allowed, respond, respond_error, Close, Request};
use super::state::Shared;
use crate::tools::verdict::{self, render, Source, Summary, Variant};
use serde_json::{json, Value};
use std::net::TcpStream;
use std::path::{Path, PathBuf};

pub use crate::tools::verdict::MAX_EVIDENCE_BYTES;

/// What `--evidence` names: a directory (`verdict.json`, with `H0/` and `H1/`
/// `revision.json` checked when present) or a verdict file.
#[derive(Debug)]
struct Inputs {
    verdict: (PathBuf, Vec<u8>),
    revisions: Option<[(PathBuf, Vec<u8>); 2]>,
}

fn read_bounded(path: &Path) -> Result<Vec<u8>, String> {
    crate::tools::verdict::read_evidence(path)
}

fn read_inputs(at: &Path) -> Result<Inputs, String> {
    if !at.is_dir() {
        return Ok(Inputs { verdict: (at.to_path_buf(), read_bounded(at)?), revisions: None });
    }
    let v = at.join("verdict.json");
    let verdict = (v.clone(), read_bounded(&v)?);
    let rev = |x: Variant| at.join(x.revision_dir()).join("revision.json");
    let (h0, h1) = (rev(Variant::Baseline), rev(Variant::Candidate));
    let revisions = match (h0.exists(), h1.exists()) {
        (false, false) => None,
        (true, true) => Some([(h0.clone(), read_bounded(&h0)?), (h1.clone(), read_bounded(&h1)?)]),
        (true, false) => return Err(format!("{} exists but {} does not", h0.display(), h1.display())),
        (false, true) => return Err(format!("{} exists but {} does not", h1.display(), h0.display())),
    };
    Ok(Inputs { verdict, revisions })
}

/// The `200` body for checked evidence.
fn summary_body(inputs: &Inputs, s: &Summary) -> Value {
    let mut body = render::summary_value(s);
    // The check passed, so the verdict parses; only its trial rows are taken as they are.
    let trials = serde_json::from_slice::<Value>(&inputs.verdict.1)
        .ok()
        .and_then(|mut v| v.get_mut("trials").map(Value::take))
        .unwrap_or(Value::Array(Vec::new()));
    if let Value::Object(m) = &mut body {
        m.insert("ok".into(), Value::Bool(true));
        m.insert("source".into(), Value::String(inputs.verdict.0.display().to_string()));
        m.insert("revisionsChecked".into(), Value::Bool(inputs.revisions.is_some()));
        m.insert(
            "policy".into(),
            json!({
                "minimumMatchedPairs": s.policy.minimum_matched_pairs,
                "maxInfrastructureErrorRatio": s.policy.max_infrastructure_error_ratio,
                "maxCostRatio": s.policy.max_cost_ratio,
                "minimumMeanScoreGain": s.policy.minimum_mean_score_gain,
            }),
        );
        m.insert("trials".into(), trials);
    }
    body
}

/// The evidence at `at`, checked: `(HTTP status, JSON body)`.
pub fn evaluate(at: &Path) -> (u16, Value) {
    let inputs = match read_inputs(at) {
        Ok(i) => i,
        Err(e) => {
            return (
                422,
                json!({ "ok": false, "error": format!("cannot read the evidence: {e}"), "findings": [], "total": 0 }),
            )
        }
    };
    let revisions = inputs.revisions.as_ref().map(|[h0, h1]| (h0.1.as_slice(), h1.1.as_slice()));
    match verdict::check(&inputs.verdict.1, revisions) {
        Ok(s) => (200, summary_body(&inputs, &s)),
        Err(rejection) => {
            let file = |src: Source| match (src, &inputs.revisions) {
                (Source::Revision(v), Some(r)) => r[v as usize].0.display().to_string(),
                _ => inputs.verdict.0.display().to_string(),
            };
            let findings: Vec<Value> = rejection
                .findings
                .iter()
                .map(|f| json!({ "source": file(f.source), "path": f.path, "message": f.message }))
                .collect();
            let first = rejection.findings.first().map(|f| format!("{}: {}", file(f.source), f.message));
            let error = match (first, rejection.total) {
                (Some(m), 1) => format!("invalid evidence: {m}"),
                (Some(m), 2) => format!("invalid evidence: {m} (and 1 more finding)"),
                (Some(m), n) => format!("invalid evidence: {m} (and {} more findings)", n - 1),
                (None, _) => "invalid evidence".to_string(),
            };
            (422, json!({ "ok": false, "error": error, "findings": findings, "total": rejection.total }))
        }
    }
}

/// Answers `GET /api/evidence`.
pub fn get(shared: &Shared, stream: &mut TcpStream, req: &Request, cors: &[(&'static str, String)]) -> Close {
    if req.method != "GET" {
        return method_not_allowed(stream, cors, "GET");
    }
    let Some(at) = &shared.cfg.evidence else {
        respond_error(stream, 404, cors, "no evidence: start runwire-serve with --evidence DIR");
        return Close::Linger;
    };
    let (code, body) = evaluate(at);
    let _ = respond(stream, code, cors, &body.to_string());
    Close::Linger
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Vec<u8> {
        std::fs::read(concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/verdict/accept.verdict.json")).unwrap()
    }

    fn tmp(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("runwire-evidence-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn a_valid_directory_gives_the_summary_policy_and_trials() {
        let d = tmp("ok");
        std::fs::write(d.join("verdict.json"), sample()).unwrap();
        let (code, body) = evaluate(&d);
        assert_eq!(code, 200, "{body}");
        let raw: Value = serde_json::from_slice(&sample()).unwrap();
        assert_eq!(body["status"], raw["status"]);
        assert_eq!(body["reason"], raw["reason"]);
        assert_eq!(body["trials"], raw["trials"]);
        assert_eq!(body["policy"]["maxCostRatio"], raw["policy"]["maxCostRatio"]);
        assert_eq!(body["revisionsChecked"], false);
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn revisions_are_checked_when_present_and_both_are_required() {
        let d = tmp("rev");
        std::fs::write(d.join("verdict.json"), sample()).unwrap();
        std::fs::create_dir_all(d.join("H0")).unwrap();
        std::fs::write(d.join("H0/revision.json"), r#"{"revisionId":"hr_baseline"}"#).unwrap();
        let (code, body) = evaluate(&d);
        assert_eq!(code, 422);
        assert!(body["error"].as_str().unwrap().contains("H1"), "{body}");
        std::fs::create_dir_all(d.join("H1")).unwrap();
        std::fs::write(d.join("H1/revision.json"), r#"{"revisionId":"not-the-candidate"}"#).unwrap();
        let (code, body) = evaluate(&d);
        assert_eq!(code, 422, "{body}");
        assert!(body["findings"][0]["message"].as_str().unwrap().contains("not-the-candidate"), "{body}");
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn malformed_evidence_names_each_finding() {
        let d = tmp("bad");
        let bad = String::from_utf8(sample()).unwrap().replacen("\"meanScore\": 42", "\"meanScore\": 43", 1);
        assert_ne!(bad.as_bytes(), sample().as_slice(), "the edit applies");
        std::fs::write(d.join("verdict.json"), &bad).unwrap();
        let (code, body) = evaluate(&d);
        assert_eq!(code, 422);
        assert!(body["total"].as_u64().unwrap() >= 1);
        assert!(body["findings"][0]["path"].as_str().unwrap().contains("meanScore"), "{body}");
        assert!(body["error"].as_str().unwrap().starts_with("invalid evidence: "));
        std::fs::write(d.join("verdict.json"), "{").unwrap();
        assert_eq!(evaluate(&d).0, 422);
        std::fs::remove_file(d.join("verdict.json")).unwrap();
        let (code, body) = evaluate(&d);
        assert_eq!(code, 422);
        assert!(body["error"].as_str().unwrap().contains("verdict.json"), "{body}");
        std::fs::remove_dir_all(&d).unwrap();
    }
}
