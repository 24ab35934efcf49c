//! The official AG-UI 1.0.0 client (`@ag-ui/client` from the npm registry)
//! judges the pipeline's output for every fixture, and Ajv checks every
//! intermediate events/v1 stream against `spec/events.schema.json`
//! (`conformance/run.sh`); `conformance/selftest.sh` first proves the checker
//! rejects known-bad streams. Needs node and npm: ignored without them, failed
//! under CI (`tests/support/tools.rs`).

use crate::support;

use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn run(script: &str) {
    let bin_dir = Path::new(env!("CARGO_BIN_EXE_normalize-events")).parent().unwrap();
    let out = Command::new("bash")
        .arg(root().join(script))
        .env("RUNWIRE_BIN", bin_dir)
        .current_dir(root())
        .output()
        .expect("bash runs");
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{script} failed:\n{text}");
    // The scripts end with `N passed, M failed`: make sure something was checked.
    let last =
        text.lines().rev().find(|l| l.contains(" passed, ")).unwrap_or_else(|| panic!("{script}: no summary\n{text}"));
    assert!(last.contains(" 0 failed") && !last.contains(": 0 passed"), "{last}");
}

#[test]
#[cfg_attr(not(tool = "agui-client"), ignore = "needs node, npm (official AG-UI client): apt-get install nodejs npm")]
fn official_client_accepts_every_fixture_and_events_match_their_schema() {
    support::need(&["agui-client"]);
    run("conformance/run.sh");
    run("conformance/selftest.sh");
}
