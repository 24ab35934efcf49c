//! `verdict-check` end to end: the real sample (with golden outputs), one negative case per rule of
//! `spec/verdict-recompute.md` (each a small edit of the sample), synthesized verdicts for every
//! decision branch, hostile input, and the exit codes. `UPDATE_GOLDEN=1` rewrites the goldens.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use assert_cmd::prelude::*;
use proptest::prelude::*;
use serde_json::{json, Value};

const SAMPLE: &str = include_str!("../../fixtures/verdict/accept.verdict.json");

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/verdict")
}

fn sample() -> Value {
    serde_json::from_str(SAMPLE).unwrap()
}

fn bin() -> assert_cmd::Command {
    assert_cmd::Command::cargo_bin("verdict-check").unwrap()
}

/// The plain `std` command, for tests that manage the child's pipes themselves.
fn std_bin() -> Command {
    Command::cargo_bin("verdict-check").unwrap()
}

/// A fresh directory for one test under cargo's scratch space.
fn scratch(name: &str) -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join("verdict_check").join(name);
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

fn run(args: &[&str], stdin: &[u8]) -> Run {
    let out = bin().args(args).write_stdin(stdin.to_vec()).output().unwrap();
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// Runs on `input` from stdin and asserts exit 2 with `finding` among the findings.
fn rejects(input: &[u8], finding: &str) -> Run {
    let r = run(&[], input);
    assert_eq!(r.code, 2, "exit code; stderr:\n{}", r.stderr);
    let line = format!("verdict-check: stdin: {finding}\n");
    assert!(r.stderr.contains(&line), "missing finding {line:?} in stderr:\n{}", r.stderr);
    assert!(r.stdout.is_empty(), "no summary for an invalid verdict: {}", r.stdout);
    r
}

fn rejects_edit(edit: impl FnOnce(&mut Value), finding: &str) -> Run {
    let mut v = sample();
    edit(&mut v);
    rejects(v.to_string().as_bytes(), finding)
}

// ---- the real sample ------------------------------------------------------------------------

#[test]
fn the_sample_matches_the_goldens() {
    for format in ["table", "json", "tsv"] {
        let r = run(&["--format", format, fixtures().join("accept.verdict.json").to_str().unwrap()], b"");
        assert_eq!(r.code, 0, "{format}: {}", r.stderr);
        assert!(r.stderr.is_empty(), "{}", r.stderr);
        let golden = fixtures().join("golden").join(format!("accept.{format}"));
        if std::env::var_os("UPDATE_GOLDEN").is_some() {
            std::fs::write(&golden, &r.stdout).unwrap();
        }
        let want = std::fs::read_to_string(&golden)
            .unwrap_or_else(|e| panic!("{}: {e} (run with UPDATE_GOLDEN=1 to create it)", golden.display()));
        assert_eq!(r.stdout, want, "{format} output differs from {}", golden.display());
    }
}

#[test]
fn the_json_summary_is_one_object_with_the_evidence() {
    let r = run(&["--format", "json"], SAMPLE.as_bytes());
    let lines: Vec<&str> = r.stdout.lines().collect();
    assert_eq!(lines.len(), 1);
    let v: Value = serde_json::from_str(lines[0]).unwrap();
    assert_eq!(v["status"], "accept");
    assert_eq!(v["candidate"]["costPerCompletedTrialUsd"], json!(0.007));
    assert_eq!(v["evidence"]["costRatio"], json!(1.272727));
    assert_eq!(v["evidence"]["withinCostGuardrail"], json!(true));
}

#[test]
fn stdin_dash_and_absent_are_the_same() {
    let a = run(&[], SAMPLE.as_bytes());
    let b = run(&["-"], SAMPLE.as_bytes());
    assert_eq!((a.code, &a.stdout), (0, &b.stdout));
}

#[test]
fn an_evidence_directory_passes_with_matching_revisions() {
    let d = scratch("dir_ok");
    write_dir(&d, SAMPLE, "hr_baseline", "hr_candidate");
    let r = run(&["--dir", d.to_str().unwrap(), "--expect", "accept"], b"");
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.starts_with("status    accept\n"));
}

fn write_dir(d: &Path, verdict: &str, h0: &str, h1: &str) {
    std::fs::write(d.join("verdict.json"), verdict).unwrap();
    for (sub, id) in [("H0", h0), ("H1", h1)] {
        std::fs::create_dir_all(d.join(sub)).unwrap();
        std::fs::write(d.join(sub).join("revision.json"), json!({ "revisionId": id }).to_string()).unwrap();
    }
}

// ---- --expect ---------------------------------------------------------------------------------

#[test]
fn expect_turns_the_check_into_a_gate() {
    let r = run(&["--expect", "accept"], SAMPLE.as_bytes());
    assert_eq!(r.code, 0);
    let r = run(&["--expect", "need_more_work"], SAMPLE.as_bytes());
    assert_eq!(r.code, 1, "a valid verdict with another status exits 1");
    assert!(r.stdout.starts_with("status    accept\n"), "the summary is still printed");
    assert_eq!(r.stderr, "verdict-check: stdin: status is accept, but --expect asked for need_more_work\n");
    // An invalid verdict stays 2 whatever is expected.
    let r = run(&["--expect", "accept"], b"{}");
    assert_eq!(r.code, 2);
}

#[test]
fn expect_refuses_an_unknown_status() {
    assert_eq!(run(&["--expect", "maybe"], SAMPLE.as_bytes()).code, 2);
}

// ---- one negative case per rule (each a single edit of the sample) -------------------------------

#[test]
fn edited_aggregate() {
    // candidate.meanScore 90 → 95, nothing else touched.
    rejects_edit(
        |v| v["candidate"]["meanScore"] = json!(95),
        "candidate.meanScore is 95, but the trial rows compute 90",
    );
    // baseline.totalCredits 1.5 → 1.2.
    rejects_edit(
        |v| v["baseline"]["totalCredits"] = json!(1.2),
        "baseline.totalCredits is 1.2, but the trial rows compute 1.5",
    );
}

#[test]
fn wrong_pass_rate() {
    // candidate.passRate 1 → 0.5: both the aggregate's own arithmetic and the rows disagree.
    let r = rejects_edit(
        |v| v["candidate"]["passRate"] = json!(0.5),
        "candidate.passRate is 0.5, but the trial rows compute 1",
    );
    assert!(r
        .stderr
        .contains("verdict-check: stdin: candidate.passRate is 0.5, but passedTrials / completedTrials is 1\n"));
}

#[test]
fn wrong_pass_rate_names_the_file() {
    // The issue's own example, with the file given by name.
    let d = scratch("named");
    let mut v = sample();
    v["candidate"]["passRate"] = json!(0.5);
    std::fs::write(d.join("verdict.json"), v.to_string()).unwrap();
    let out = bin().current_dir(&d).arg("verdict.json").output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(
        stderr.contains("verdict-check: verdict.json: candidate.passRate is 0.5, but the trial rows compute 1\n"),
        "{stderr}"
    );
}

#[test]
fn row_count_mismatch() {
    // The last candidate row removed; the aggregate still declares 2.
    let r = rejects_edit(
        |v| {
            v["trials"].as_array_mut().unwrap().pop();
        },
        "trials has 1 candidate row(s), but candidate.trials is 2",
    );
    assert!(r.stderr.contains("candidate.completedTrials is 2, but the trial rows compute 1"));
    assert!(r.stderr.contains("matchedPairs.pairs is 2, but the trial rows compute 1"));
}

#[test]
fn pairs_that_do_not_add_up() {
    // matchedPairs.ties 0 → 1: wins + ties no longer equal pairs.
    let r = rejects_edit(
        |v| v["matchedPairs"]["ties"] = json!(1),
        "matchedPairs.candidateWins + baselineWins + ties is 3, but matchedPairs.pairs is 2",
    );
    assert!(r.stderr.contains("matchedPairs.ties is 1, but the trial rows compute 0"));
}

#[test]
fn pairs_that_the_rows_do_not_support() {
    // A consistent-looking edit: one win moved to a tie.
    rejects_edit(
        |v| {
            v["matchedPairs"]["candidateWins"] = json!(1);
            v["matchedPairs"]["ties"] = json!(1);
        },
        "matchedPairs.candidateWins is 1, but the trial rows compute 2",
    );
}

#[test]
fn status_the_rows_do_not_support() {
    // status accept → reject, reason left as the (correct) accept sentence.
    let r = rejects_edit(
        |v| v["status"] = json!("reject"),
        r#"status is "reject", but the trial rows and policy compute "accept""#,
    );
    assert_eq!(r.stderr.lines().count(), 1, "the untouched reason is not a finding:\n{}", r.stderr);
}

#[test]
fn status_after_a_policy_edit() {
    // policy.minimumMatchedPairs 2 → 3: the same rows are now insufficient evidence.
    let r = rejects_edit(
        |v| v["policy"]["minimumMatchedPairs"] = json!(3),
        r#"status is "accept", but the trial rows and policy compute "insufficient_evidence""#,
    );
    assert!(r.stderr.contains(
        "reason is \"Candidate won 2/2 matched pairs (mean score delta 48) within the 1.3x cost-per-completed-trial \
         guardrail.\", but the trial rows and policy give \"2 matched pair(s) completed, below the 3 this comparison \
         requires; the outcome is a smoke test, not evidence of improvement.\""
    ));
}

#[test]
fn reason_mismatch() {
    // The reason's delta 48 → 50: same status, wrong sentence.
    rejects_edit(
        |v| {
            v["reason"] = json!(
                "Candidate won 2/2 matched pairs (mean score delta 50) within the 1.3x cost-per-completed-trial guardrail."
            )
        },
        "reason is \"Candidate won 2/2 matched pairs (mean score delta 50) within the 1.3x cost-per-completed-trial \
         guardrail.\", but the trial rows and policy give \"Candidate won 2/2 matched pairs (mean score delta 48) \
         within the 1.3x cost-per-completed-trial guardrail.\"",
    );
}

#[test]
fn bad_enum() {
    // treatmentAxis harness → model.
    rejects_edit(
        |v| v["treatmentAxis"] = json!("model"),
        r#"treatmentAxis is "model", but must be one of "harness", "runtime-profile""#,
    );
    // trials[2].classification passed → success.
    rejects_edit(
        |v| v["trials"][2]["classification"] = json!("success"),
        r#"trials[2].classification is "success", but must be one of "passed", "failed", "infrastructure_error""#,
    );
    // status not one of the five.
    rejects_edit(
        |v| v["status"] = json!("approve"),
        r#"status is "approve", but must be one of "accept", "need_more_work", "reject", "insufficient_evidence", "infrastructure_error""#,
    );
}

#[test]
fn negative_cost() {
    // baseline.totalCostUsd 0.011 → -0.011.
    rejects_edit(
        |v| v["baseline"]["totalCostUsd"] = json!(-0.011),
        "baseline.totalCostUsd is -0.011, but must be a number >= 0",
    );
    // trials[0].metrics.costUsd 0.0055 → -0.0055.
    rejects_edit(
        |v| v["trials"][0]["metrics"]["costUsd"] = json!(-0.0055),
        "trials[0].metrics.costUsd is -0.0055, but must be a number >= 0",
    );
}

#[test]
fn missing_field() {
    // trials[1].grade.score deleted.
    rejects_edit(
        |v| drop(v["trials"][1]["grade"].as_object_mut().unwrap().remove("score")),
        "trials[1].grade.score is missing",
    );
    // matchedPairs deleted.
    rejects_edit(|v| drop(v.as_object_mut().unwrap().remove("matchedPairs")), "matchedPairs is missing");
}

#[test]
fn wrong_type_and_range() {
    rejects_edit(|v| v["trials"][0]["trial"] = json!(0), "trials[0].trial is 0, but must be an integer >= 1");
    rejects_edit(|v| v["trials"][0]["trial"] = json!(1.5), "trials[0].trial is 1.5, but must be an integer >= 1");
    rejects_edit(
        |v| v["policy"]["maxInfrastructureErrorRatio"] = json!(0.6),
        "policy.maxInfrastructureErrorRatio is 0.6, but must be a number in [0, 0.5]",
    );
    rejects_edit(
        |v| v["policy"]["minimumMatchedPairs"] = json!(1),
        "policy.minimumMatchedPairs is 1, but must be an integer >= 2",
    );
    rejects_edit(|v| v["reason"] = json!(""), r#"reason is "", but must be a non-empty string"#);
    rejects_edit(|v| v["sandbox"] = json!([]), "sandbox is an array, but must be an object");
    rejects_edit(
        |v| v["schemaVersion"] = json!("harness-compare-result.v2"),
        r#"schemaVersion is "harness-compare-result.v2", but must be "harness-compare-result.v1""#,
    );
    rejects(b"[1]", "the top level is an array, but must be an object");
}

#[test]
fn duplicate_trial_row() {
    // trials[0] appended again: a second baseline row for trial 1.
    rejects_edit(
        |v| {
            let first = v["trials"][0].clone();
            v["trials"].as_array_mut().unwrap().push(first);
        },
        "trials[4].trial is 1, but trials[0] is already the baseline row for that trial",
    );
}

#[test]
fn wrong_revision_id_in_a_directory() {
    // H0/revision.json names another revision than the baseline rows carry.
    let d = scratch("dir_bad");
    write_dir(&d, SAMPLE, "hr_other", "hr_candidate");
    let r = run(&["--dir", d.to_str().unwrap()], b"");
    assert_eq!(r.code, 2);
    let name = d.join("verdict.json").display().to_string();
    for i in [0, 1] {
        let line = format!(
            "verdict-check: {name}: trials[{i}].revisionId is \"hr_baseline\", but H0/revision.json has \"hr_other\"\n"
        );
        assert!(r.stderr.contains(&line), "{}", r.stderr);
    }
    // A revision.json without revisionId is named by its own path.
    std::fs::write(d.join("H1/revision.json"), "{}").unwrap();
    let r = run(&["--dir", d.to_str().unwrap()], b"");
    let line = format!("verdict-check: {}: revisionId is missing\n", d.join("H1/revision.json").display());
    assert!(r.stderr.contains(&line), "{}", r.stderr);
    // A missing one is unreadable input: 2.
    std::fs::remove_file(d.join("H0/revision.json")).unwrap();
    let r = run(&["--dir", d.to_str().unwrap()], b"");
    assert_eq!(r.code, 2);
    assert!(r.stderr.contains("H0/revision.json: No such file"), "{}", r.stderr);
}

#[test]
fn not_json() {
    rejects(b"{", "not JSON: EOF while parsing an object at line 1 column 1");
    rejects(b"verdict", "not JSON: expected value at line 1 column 1");
    rejects(b"{\"a\":1}{}", "not JSON: trailing characters at line 1 column 8");
    rejects(&SAMPLE.as_bytes()[..SAMPLE.len() / 2], "not JSON: EOF while parsing a value at line 84 column 6");
}

#[test]
fn empty_file() {
    let d = scratch("empty");
    std::fs::write(d.join("verdict.json"), "").unwrap();
    let out = bin().current_dir(&d).arg("verdict.json").output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        String::from_utf8(out.stderr).unwrap(),
        "verdict-check: verdict.json: empty input: expected a JSON object\n"
    );
    rejects(b"", "empty input: expected a JSON object");
}

#[test]
fn many_findings_in_one_pass() {
    // Three unrelated edits, three findings.
    let mut v = sample();
    v["treatmentAxis"] = json!("model");
    v["baseline"]["meanScore"] = json!(41);
    v["trials"][3]["grade"]["kind"] = json!("other");
    let r = rejects(
        v.to_string().as_bytes(),
        "treatmentAxis is \"model\", but must be one of \"harness\", \"runtime-profile\"",
    );
    assert!(r.stderr.contains("baseline.meanScore is 41"));
    assert!(r.stderr.contains("trials[3].grade.kind is \"other\", but must be \"readme-package-v1\""));
}

// ---- hostile input --------------------------------------------------------------------------------

#[test]
fn findings_are_capped() {
    let mut v = sample();
    v["trials"] = Value::Array(vec![json!("row"); 5000]);
    let r = rejects(v.to_string().as_bytes(), "trials[0] is \"row\", but must be an object");
    assert_eq!(r.stderr.lines().count(), 51);
    assert!(r.stderr.ends_with("verdict-check: stdin: … and 4950 more findings\n"), "{}", r.stderr);
}

#[test]
fn deep_nesting_is_a_clean_error() {
    let deep = format!("{{\"a\":{}{}}}", "[".repeat(100_000), "]".repeat(100_000));
    rejects(deep.as_bytes(), "not JSON: recursion limit exceeded at line 1 column 132");
}

#[test]
fn a_huge_string_is_not_echoed() {
    let mut v = sample();
    // Huge, though under the 32 MiB bound on what is read at all.
    v["status"] = Value::String("x".repeat(16 << 20));
    let r = run(&[], v.to_string().as_bytes());
    assert_eq!(r.code, 2);
    assert!(r.stderr.starts_with("verdict-check: stdin: status is \"xxxx"), "{}", &r.stderr[..100]);
    assert!(r.stderr.len() < 1024, "{} bytes of stderr", r.stderr.len());
    assert!(r.stderr.contains("…\" (16777216 bytes), but must be one of"), "{}", r.stderr);
}

#[test]
fn numbers_beyond_f64_and_nan_literals() {
    let s = SAMPLE.replacen("\"meanScore\": 42", "\"meanScore\": 1e400", 1);
    assert_ne!(s, SAMPLE);
    let r = run(&[], s.as_bytes());
    assert_eq!(r.code, 2);
    assert!(r.stderr.contains("not JSON: number out of range"), "{}", r.stderr);
    let s = SAMPLE.replacen("\"meanScore\": 42", "\"meanScore\": NaN", 1);
    assert_eq!(run(&[], s.as_bytes()).code, 2);
    let s = SAMPLE.replacen("\"meanScore\": 42", "\"meanScore\": 42e-400", 1);
    rejects(s.as_bytes(), "baseline.meanScore is 0, but the trial rows compute 42");
}

#[test]
fn duplicate_keys() {
    let s = SAMPLE.replacen("\"status\": \"accept\",", "\"status\": \"accept\", \"status\": \"accept\",", 1);
    rejects(s.as_bytes(), r#"the top level has the key "status" more than once"#);
}

#[test]
fn invalid_utf8() {
    let mut b = SAMPLE.as_bytes().to_vec();
    let at = SAMPLE.find("sha256:manifest").unwrap();
    b[at] = 0xff;
    let r = run(&[], &b);
    assert_eq!(r.code, 2);
    assert!(r.stderr.contains("not JSON: invalid unicode code point"), "{}", r.stderr);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn the_checker_never_panics_on_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        let _ = runwire::tools::verdict::check(&bytes, Some((&bytes, b"{}")));
    }

    #[test]
    fn the_checker_never_panics_on_a_mutated_sample(at in 0..SAMPLE.len(), byte in any::<u8>()) {
        let mut b = SAMPLE.as_bytes().to_vec();
        b[at] = byte;
        if let Ok(s) = runwire::tools::verdict::check(&b, None) {
            let mut out = Vec::new();
            runwire::tools::verdict::render::table(&s, &mut out).unwrap();
        }
    }
}

// ---- synthesized verdicts: every decision branch --------------------------------------------------

/// A trial row as the reference's runner writes it.
fn row(variant: &str, trial: u64, class: &str, score: f64, cost: f64, credits: f64) -> Value {
    json!({
        "variant": variant, "harnessId": format!("h-{variant}"), "runtimeProfile": "qoder-default-v1",
        "trial": trial, "classification": class, "changedFiles": ["README.md"],
        "grade": { "kind": "readme-package-v1", "passed": class == "passed", "score": score, "checks": [] },
        "executorExitCode": 0, "executorError": "", "revisionId": format!("rev-{variant}"), "durationMs": 1000,
        "artifactDirectory": format!("{variant}/trial-{trial}"),
        "sandbox": sample()["sandbox"],
        "metrics": { "costUsd": cost, "credits": credits },
    })
}

/// The aggregate of one variant, computed here independently of the library. The test data keeps
/// every quotient exact at 6 places, so plain rounding is enough.
fn aggregate(rows: &[Value], variant: &str) -> Value {
    let mine: Vec<&Value> = rows.iter().filter(|r| r["variant"] == variant).collect();
    let completed: Vec<&&Value> = mine.iter().filter(|r| r["classification"] != "infrastructure_error").collect();
    let passed = mine.iter().filter(|r| r["classification"] == "passed").count();
    let r6 = |x: f64| (x * 1e6).round() / 1e6;
    let per = |t: f64, n: usize| if n == 0 { 0.0 } else { r6(t / n as f64) };
    let cost = r6(mine.iter().map(|r| r["metrics"]["costUsd"].as_f64().unwrap()).sum());
    let credits = r6(mine.iter().map(|r| r["metrics"]["credits"].as_f64().unwrap()).sum());
    let n = completed.len();
    let score: f64 = completed.iter().map(|r| r["grade"]["score"].as_f64().unwrap()).sum();
    json!({
        "trials": mine.len(), "completedTrials": n, "infrastructureErrors": mine.len() - n, "passedTrials": passed,
        "passRate": if n == 0 { 0.0 } else { passed as f64 / n as f64 },
        "meanScore": if n == 0 { 0.0 } else { (score / n as f64 * 100.0).round() / 100.0 },
        "totalCostUsd": cost, "totalCredits": credits,
        "costPerAttemptedTrialUsd": per(cost, mine.len()), "costPerCompletedTrialUsd": per(cost, n),
        "costPerPassedTrialUsd": per(cost, passed),
    })
}

fn pairs(rows: &[Value]) -> Value {
    let done = |v: &str, t: u64| {
        rows.iter().find(|r| r["variant"] == v && r["trial"] == t && r["classification"] != "infrastructure_error")
    };
    let (mut n, mut cw, mut bw, mut ties, mut delta) = (0, 0, 0, 0, 0.0);
    for t in 1..=20 {
        let (Some(b), Some(c)) = (done("baseline", t), done("candidate", t)) else { continue };
        n += 1;
        delta += c["grade"]["score"].as_f64().unwrap() - b["grade"]["score"].as_f64().unwrap();
        match (b["grade"]["passed"].as_bool().unwrap(), c["grade"]["passed"].as_bool().unwrap()) {
            (x, y) if x == y => ties += 1,
            (_, true) => cw += 1,
            _ => bw += 1,
        }
    }
    let mean = if n == 0 { 0.0 } else { (delta / n as f64 * 100.0).round() / 100.0 };
    json!({ "pairs": n, "candidateWins": cw, "baselineWins": bw, "ties": ties, "meanScoreDelta": mean })
}

fn synthesize(rows: Vec<Value>, status: &str, reason: &str) -> Value {
    let mut v = sample();
    v["status"] = json!(status);
    v["reason"] = json!(reason);
    v["policy"] = json!({ "minimumMatchedPairs": 3, "maxInfrastructureErrorRatio": 0.25, "maxCostRatio": 1.5, "minimumMeanScoreGain": 5 });
    v["baseline"] = aggregate(&rows, "baseline");
    v["candidate"] = aggregate(&rows, "candidate");
    v["matchedPairs"] = pairs(&rows);
    v["trials"] = Value::Array(rows);
    v
}

/// `n` matched trials; `b`/`c` give each side's (classification, score, cost).
fn paired(n: u64, b: (&str, f64, f64), c: (&str, f64, f64)) -> Vec<Value> {
    (1..=n).flat_map(|t| [row("baseline", t, b.0, b.1, b.2, 0.5), row("candidate", t, c.0, c.1, c.2, 0.5)]).collect()
}

fn accepts_as(v: &Value, status: &str) {
    let d = scratch(&format!("branch_{status}_{}", v["trials"].as_array().unwrap().len()));
    write_dir(&d, &v.to_string(), "rev-baseline", "rev-candidate");
    let r = run(&["--dir", d.to_str().unwrap(), "--expect", status, "--format", "tsv"], b"");
    assert_eq!(r.code, 0, "{status}: {}", r.stderr);
    assert!(r.stdout.starts_with(&format!("status\t{status}\n")), "{}", r.stdout);
    // The same rows under any other persisted status are rejected.
    let mut wrong = v.clone();
    wrong["status"] = json!(if status == "reject" { "accept" } else { "reject" });
    rejects(
        wrong.to_string().as_bytes(),
        &format!("status is {}, but the trial rows and policy compute \"{status}\"", wrong["status"]),
    );
}

#[test]
fn branch_accept() {
    let v = synthesize(
        paired(4, ("failed", 40.0, 0.01), ("passed", 80.5, 0.012)),
        "accept",
        "Candidate won 4/4 matched pairs (mean score delta 40.5) within the 1.5x cost-per-completed-trial guardrail.",
    );
    accepts_as(&v, "accept");
}

#[test]
fn branch_reject() {
    // Candidate loses one pair and ties the rest.
    let mut rows = paired(3, ("passed", 90.0, 0.01), ("passed", 90.0, 0.01));
    rows[1] = row("candidate", 1, "failed", 60.0, 0.01, 0.5);
    let v = synthesize(rows, "reject", "Candidate regressed paired outcomes or deterministic score.");
    accepts_as(&v, "reject");
}

#[test]
fn branch_need_more_work_over_the_cost_guardrail() {
    let v = synthesize(
        paired(3, ("failed", 40.0, 0.01), ("passed", 90.0, 0.02)),
        "need_more_work",
        "Candidate improved outcomes but exceeded the cost-per-completed-trial guardrail.",
    );
    accepts_as(&v, "need_more_work");
}

#[test]
fn branch_need_more_work_without_improvement() {
    let v = synthesize(
        paired(3, ("failed", 40.0, 0.01), ("failed", 42.0, 0.01)),
        "need_more_work",
        "No regression, but the candidate did not clear the paired improvement threshold.",
    );
    accepts_as(&v, "need_more_work");
}

#[test]
fn branch_insufficient_evidence() {
    let v = synthesize(
        paired(2, ("failed", 40.0, 0.01), ("passed", 90.0, 0.01)),
        "insufficient_evidence",
        "2 matched pair(s) completed, below the 3 this comparison requires; the outcome is a smoke test, not evidence of improvement.",
    );
    accepts_as(&v, "insufficient_evidence");
}

#[test]
fn branch_infrastructure_error_without_completions() {
    let mut rows = paired(3, ("failed", 40.0, 0.01), ("passed", 90.0, 0.01));
    for r in rows.iter_mut().filter(|r| r["variant"] == "candidate") {
        r["classification"] = json!("infrastructure_error");
        r["grade"]["passed"] = json!(false);
        r["grade"]["score"] = json!(0);
    }
    let v = synthesize(rows, "infrastructure_error", "At least one variant has no completed trial.");
    accepts_as(&v, "infrastructure_error");
}

#[test]
fn branch_infrastructure_error_over_the_ratio() {
    // 2 of 6 attempts (33%) failed for infrastructure reasons, above the 25% threshold.
    let mut rows = paired(3, ("failed", 40.0, 0.01), ("passed", 90.0, 0.01));
    for i in [0, 1] {
        rows[i]["classification"] = json!("infrastructure_error");
        rows[i]["grade"]["passed"] = json!(false);
        rows[i]["grade"]["score"] = json!(0);
    }
    let v = synthesize(
        rows,
        "infrastructure_error",
        "2/6 trials failed for infrastructure reasons, above the 25% threshold; the run measures the harness setup, not the harnesses.",
    );
    accepts_as(&v, "infrastructure_error");
}

// ---- exit codes and the process boundary --------------------------------------------------------

#[test]
fn help_and_version_exit_0_without_reading_stdin() {
    for flag in ["--help", "--version"] {
        let out = std_bin().arg(flag).stdin(Stdio::null()).output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{flag}");
        assert!(!out.stdout.is_empty());
    }
}

#[test]
fn usage_errors_exit_2() {
    assert_eq!(run(&["--format", "xml"], SAMPLE.as_bytes()).code, 2);
    assert_eq!(run(&["a.json", "--dir", "d"], SAMPLE.as_bytes()).code, 2);
    assert_eq!(run(&["a.json", "b.json"], SAMPLE.as_bytes()).code, 2);
}

#[test]
fn unreadable_input_exits_2() {
    let r = run(&["/nonexistent/verdict.json"], b"");
    assert_eq!(r.code, 2);
    assert!(
        r.stderr.starts_with("verdict-check: /nonexistent/verdict.json: No such file or directory"),
        "{}",
        r.stderr
    );
    let r = run(&["--dir", "/nonexistent"], b"");
    assert_eq!(r.code, 2);
    assert!(r.stderr.starts_with("verdict-check: /nonexistent/verdict.json: "), "{}", r.stderr);
}

#[cfg(target_os = "linux")]
#[test]
fn a_failed_write_exits_3() {
    let full = std::fs::OpenOptions::new().write(true).open("/dev/full").unwrap();
    let out = std_bin().arg(fixtures().join("accept.verdict.json")).stdout(full).output().unwrap();
    assert_eq!(out.status.code(), Some(3));
    assert!(String::from_utf8_lossy(&out.stderr).starts_with("verdict-check: stdout: No space left on device"));
}

#[test]
fn a_closed_stdout_is_a_quiet_success() {
    let mut child = std_bin()
        .arg(fixtures().join("accept.verdict.json"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take()); // the reader leaves before anything is written
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert!(out.stderr.is_empty(), "{}", String::from_utf8_lossy(&out.stderr));
}

// ---- the schema -----------------------------------------------------------------------------------

/// A small subset of JSON Schema, enough to hold the sample to the schema's `required`, `const`,
/// `enum`, `type` and numeric bounds, following local `$ref`s. Returns what did not hold.
fn schema_errors(root: &Value, schema: &Value, v: &Value, path: &str, out: &mut Vec<String>) {
    if let Some(r) = schema["$ref"].as_str() {
        let name = r.strip_prefix("#/$defs/").expect("only local $defs references");
        schema_errors(root, &root["$defs"][name], v, path, out);
    }
    if let Some(c) = schema.get("const") {
        if c != v {
            out.push(format!("{path}: {v} is not {c}"));
        }
    }
    if let Some(e) = schema["enum"].as_array() {
        if !e.contains(v) {
            out.push(format!("{path}: {v} is not in the enum"));
        }
    }
    let type_ok = match schema["type"].as_str() {
        Some("object") => v.is_object(),
        Some("array") => v.is_array(),
        Some("string") => v.is_string(),
        Some("boolean") => v.is_boolean(),
        Some("number") => v.is_number(),
        Some("integer") => v.as_f64().is_some_and(|x| x.fract() == 0.0),
        _ => true,
    };
    if !type_ok {
        out.push(format!("{path}: {v} is not of type {}", schema["type"]));
    }
    if let (Some(min), Some(x)) = (schema["minimum"].as_f64(), v.as_f64()) {
        if x < min {
            out.push(format!("{path}: {x} < {min}"));
        }
    }
    if let (Some(max), Some(x)) = (schema["maximum"].as_f64(), v.as_f64()) {
        if x > max {
            out.push(format!("{path}: {x} > {max}"));
        }
    }
    for key in schema["required"].as_array().into_iter().flatten() {
        if v.get(key.as_str().unwrap()).is_none() {
            out.push(format!("{path}: required key {key} is missing"));
        }
    }
    for (key, sub) in schema["properties"].as_object().into_iter().flatten() {
        if let Some(x) = v.get(key) {
            schema_errors(root, sub, x, &format!("{path}.{key}"), out);
        }
    }
    if let (Some(items), Some(a)) = (schema.get("items"), v.as_array()) {
        for (i, x) in a.iter().enumerate() {
            schema_errors(root, items, x, &format!("{path}[{i}]"), out);
        }
    }
}

#[test]
fn the_schema_accepts_the_sample() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("spec/harness-compare-result.v1.schema.json");
    let schema: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    assert_eq!(schema["$schema"], "https://json-schema.org/draft/2020-12/schema");
    let mut errors = Vec::new();
    schema_errors(&schema, &schema, &sample(), "$", &mut errors);
    assert!(errors.is_empty(), "{errors:#?}");
    // And the walk does catch an edit, so the pass above means something.
    let mut v = sample();
    v["trials"][0]["grade"].as_object_mut().unwrap().remove("score");
    v["baseline"]["totalCostUsd"] = json!(-1);
    errors.clear();
    schema_errors(&schema, &schema, &v, "$", &mut errors);
    assert_eq!(errors, ["$.baseline.totalCostUsd: -1 < 0", "$.trials[0].grade: required key \"score\" is missing"]);
}

#[test]
fn unbounded_or_odd_inputs_are_refused_with_a_bound() {
    // /dev/zero never ends: refused at once as not a regular file (it used to be read until 3 GB).
    let t = std::time::Instant::now();
    let out = std_bin().arg("/dev/zero").stdin(Stdio::null()).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("/dev/zero: not a regular file"), "{err}");
    assert!(t.elapsed() < std::time::Duration::from_secs(10));
    // A FIFO nobody writes to: refused, not waited on.
    let d = scratch("odd-inputs");
    let fifo = d.join("verdict.json");
    assert!(Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    let out = std_bin().arg(&fifo).stdin(Stdio::null()).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not a regular file"));
    let out = std_bin().arg("--dir").arg(&d).stdin(Stdio::null()).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    // A file over the bound (sparse: no disk used) is refused by its size; so is stdin past the bound.
    let big = d.join("big.json");
    std::fs::File::create(&big).unwrap().set_len(runwire::tools::verdict::MAX_EVIDENCE_BYTES + 1).unwrap();
    let out = std_bin().arg(&big).stdin(Stdio::null()).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("larger than"), "{}", String::from_utf8_lossy(&out.stderr));
    let out = std_bin().stdin(std::fs::File::open("/dev/zero").unwrap()).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("stdin: larger than"));
}
