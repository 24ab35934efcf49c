//! The studio (the page `runwire-serve` serves at `/`), tested from `cargo test`:
//!
//! - `studio/test/*.test.mjs`: node's built-in test runner on the pure state
//!   modules (AG-UI and events/v1 reducers, tool cards, compare model, SSE);
//! - `studio/e2e/*.test.mjs`: `playwright-core` (pinned in
//!   `studio/package-lock.json`, installed here with `npm ci` when missing)
//!   driving the system Chromium headless against this build's
//!   `runwire-serve` with the stub engines (and, for the live controls, this
//!   build's `runwire-supervise` running a plan). No browser is ever downloaded.
//!
//! Both assert that node reported every test defined in the files as passed
//! (so a runner that found nothing cannot pass). Without node, npm or
//! Chromium they are ignored (`cargo test` says so and why), and under `CI`
//! they fail: the one skip rule of `tests/support/tools.rs`.

use crate::support;

use std::path::{Path, PathBuf};
use std::process::Command;

fn studio() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("studio")
}

/// How many `test(` cases the files matching `dir/*.test.mjs` define.
fn defined_tests(dir: &Path) -> usize {
    let mut n = 0;
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.to_string_lossy().ends_with(".test.mjs") {
            let text = std::fs::read_to_string(&p).unwrap();
            n += text.lines().filter(|l| l.trim_start().starts_with("test(")).count();
        }
    }
    n
}

/// The `# name N` summary line of node's TAP output.
fn tap_count(out: &str, name: &str) -> Option<usize> {
    let prefix = format!("# {name} ");
    out.lines().rev().find_map(|l| l.strip_prefix(&prefix)).and_then(|v| v.trim().parse().ok())
}

fn run_node_tests(dir: &str, envs: &[(&str, &std::ffi::OsStr)]) {
    let mut cmd = Command::new("node");
    cmd.args(["--test", "--test-reporter=tap", "--test-concurrency=1", "--test-timeout=240000", &format!("{dir}/")])
        .current_dir(studio());
    for (k, v) in envs {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("node runs");
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "node --test {dir}/ failed:\n{text}");
    let expected = defined_tests(&studio().join(dir));
    assert!(expected > 0, "no tests defined in studio/{dir}");
    let (pass, fail) = (tap_count(&text, "pass"), tap_count(&text, "fail"));
    let (skipped, cancelled) = (tap_count(&text, "skipped"), tap_count(&text, "cancelled"));
    assert_eq!(fail, Some(0), "{text}");
    assert_eq!(skipped, Some(0), "{text}");
    assert_eq!(cancelled, Some(0), "{text}");
    // node may count more than the `test(` cases (a helper module under test/ is
    // reported as one passing file), never fewer.
    let pass = pass.unwrap_or_else(|| panic!("no summary from node:\n{text}"));
    assert!(pass >= expected, "node passed {pass} tests, the files define {expected}:\n{text}");
    eprintln!("studio/{dir}: {pass} passed");
}

#[test]
#[cfg_attr(not(tool = "node"), ignore = "needs node: apt-get install nodejs npm")]
fn state_modules_pass_their_node_unit_tests() {
    support::need(&["node"]);
    run_node_tests("test", &[]);
}

#[test]
#[cfg_attr(not(tool = "chromium"), ignore = "needs Chromium: apt-get install chromium (or STUDIO_CHROMIUM=/path)")]
#[cfg_attr(all(tool = "chromium", not(tool = "playwright")), ignore = "needs node and npm: apt-get install nodejs npm")]
fn the_page_works_in_chromium_against_the_server() {
    support::need(&["playwright", "chromium"]);
    let browser = support::tools::chromium().expect("found by need");
    let shots = std::env::temp_dir().join(format!("runwire-studio-screenshots-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&shots);
    // The interactive-agent pages run examples/replay-agent beside the server binary.
    let replay = support::example("replay-agent");
    // The grants card's page runs examples/trust-agent, found the same way.
    support::example("trust-agent");
    run_node_tests(
        "e2e",
        &[
            ("RUNWIRE_SERVE", env!("CARGO_BIN_EXE_runwire-serve").as_ref()),
            ("RUNWIRE_SUPERVISE", env!("CARGO_BIN_EXE_runwire-supervise").as_ref()),
            ("STUDIO_CHROMIUM", browser.as_os_str()),
            ("STUDIO_SCREENSHOTS", shots.as_os_str()),
            ("RUNWIRE_REPLAY_AGENT", replay.as_os_str()),
        ],
    );
    for view in ["runs", "task", "chat", "compare", "subagents"] {
        for size in ["desktop", "390"] {
            let p = shots.join(format!("{view}-{size}.png"));
            let len = std::fs::metadata(&p).map(|m| m.len()).unwrap_or(0);
            assert!(len > 1000, "{}: screenshot missing or empty", p.display());
        }
    }
    let _ = std::fs::remove_dir_all(&shots);
}
