//! The checkers of the README's claims (`.ci/run`'s "claims" step) find what
//! they are for: a link to a file that is not there, an anchor no heading
//! makes, a sh block that does not parse; and the claims hold today.

use crate::support;

use std::path::Path;
use std::process::Command;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

fn check_docs(files: &[&Path]) -> (bool, String) {
    let out = Command::new("python3").arg(Path::new(ROOT).join("scripts/check-docs.py")).args(files).output().unwrap();
    (out.status.success(), format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)))
}

#[test]
#[cfg_attr(not(tool = "python3"), ignore = "needs python3: apt-get install python3")]
#[cfg_attr(not(tool = "bash"), ignore = "needs bash: apt-get install bash")]
fn the_docs_checker_finds_broken_links_anchors_and_blocks() {
    support::need(&["python3", "bash"]);
    let dir = support::scratch("docs");
    std::fs::create_dir_all(dir.join("docs")).unwrap();
    std::fs::write(dir.join("docs/OTHER.md"), "# Other\n\n## The `runs` tool: a heading\n\nText.\n").unwrap();
    let readme = dir.join("README.md");
    let good = "# Top\n\n## Quick start\n\n[a](docs/OTHER.md), [b](docs/OTHER.md#the-runs-tool-a-heading), \
                [c](#quick-start), [web](https://example.invalid/x), `[not](a-link.md)`\n\n\
                ```sh\nfor f in *; do echo \"$f\"; done   # fine\n```\n\n```text\nif then\n```\n";
    std::fs::write(&readme, good).unwrap();
    let (ok, text) = check_docs(&[&readme]);
    assert!(ok, "a good file is refused:\n{text}");
    let bad = format!(
        "{good}\n[gone](docs/GONE.md) [anchor](docs/OTHER.md#nowhere) [here](#quick-starts)\n\n```sh\nif true; then echo\n```\n"
    );
    std::fs::write(&readme, bad).unwrap();
    let (ok, text) = check_docs(&[&readme]);
    assert!(!ok, "a broken file passes:\n{text}");
    for want in [
        "docs/GONE.md: no such file",
        "docs/OTHER.md#nowhere: no heading or anchor #nowhere",
        "#quick-starts: no heading or anchor #quick-starts",
        "the sh block does not parse",
        "4 problems",
    ] {
        assert!(text.contains(want), "{want:?} not said:\n{text}");
    }
}

/// The repository's own docs, and each crate's rust-version against its
/// locked dependencies (computed with `cargo metadata`): what CI checks.
#[test]
#[cfg_attr(not(tool = "python3"), ignore = "needs python3: apt-get install python3")]
#[cfg_attr(not(tool = "bash"), ignore = "needs bash: apt-get install bash")]
fn the_readme_claims_hold() {
    support::need(&["python3", "bash"]);
    let (ok, text) = check_docs(&[]);
    assert!(ok, "{text}");
    let out = Command::new("python3")
        .arg(Path::new(ROOT).join("scripts/check-rust-version.py"))
        .arg("--print")
        .current_dir(ROOT)
        .env("CARGO", env!("CARGO"))
        .output()
        .unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{text}");
    assert!(text.contains("runwire: declared ") && text.contains("runwire-cluster: declared "), "{text}");
}
