//! Keeps the exit codes written down in `spec/exit-codes.md` and
//! `man/runwire.7` in step with `runwire::cli::Exit`, the codes the binaries
//! actually return.

use runwire::cli::Exit;
use std::path::Path;

fn read(rel: &str) -> String {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join(rel);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("cannot read {}: {e}", p.display()))
}

/// The first column of every row of the Markdown table under `heading`.
fn table_codes(doc: &str, heading: &str) -> Vec<u8> {
    let section = doc.split(heading).nth(1).unwrap_or_else(|| panic!("no section {heading:?}"));
    let section = section.split("\n## ").next().unwrap_or_default();
    section
        .lines()
        .filter(|l| l.starts_with('|'))
        .filter_map(|l| l.trim_start_matches('|').split('|').next())
        .filter_map(|cell| cell.trim().parse::<u8>().ok())
        .collect()
}

#[test]
fn spec_table_lists_exactly_the_codes_the_filters_use() {
    let doc = read("spec/exit-codes.md");
    let want: Vec<u8> = Exit::ALL.iter().map(|e| e.code()).collect();
    assert_eq!(table_codes(&doc, "## normalize-events, agui-translate, sse-encode"), want);
}

#[test]
fn spec_names_each_code_as_the_code_does() {
    let doc = read("spec/exit-codes.md");
    for (exit, name) in [(Exit::Ok, "ok"), (Exit::Flagged, "flagged"), (Exit::Usage, "usage"), (Exit::Io, "I/O error")]
    {
        let row = format!("| {} | {} |", exit.code(), name);
        assert!(doc.contains(&row), "spec/exit-codes.md has no row starting {row:?} for {exit:?}");
    }
}

#[test]
fn verdict_check_uses_codes_0_to_2() {
    let doc = read("spec/exit-codes.md");
    assert_eq!(table_codes(&doc, "## verdict-check"), vec![0, 1, 2]);
}

#[test]
fn overview_man_page_lists_every_code() {
    let man = read("man/runwire.7");
    let table = man.split(".TS").nth(1).and_then(|t| t.split(".TE").next()).expect("man/runwire.7 has an exit table");
    let codes: Vec<u8> = table.lines().filter_map(|l| l.split('\t').next()?.trim().parse().ok()).collect();
    let want: Vec<u8> = Exit::ALL.iter().map(|e| e.code()).collect();
    assert_eq!(codes, want);
}

#[test]
fn runs_and_liveness_use_codes_0_to_3() {
    let doc = read("spec/exit-codes.md");
    assert_eq!(table_codes(&doc, "## runs, liveness"), vec![0, 1, 2, 3]);
}

#[test]
fn runwire_supervise_uses_codes_0_to_3() {
    let doc = read("spec/exit-codes.md");
    assert_eq!(table_codes(&doc, "## runwire-supervise"), vec![0, 1, 2, 3]);
}

#[test]
fn runwire_session_uses_codes_0_to_3() {
    let doc = read("spec/exit-codes.md");
    assert_eq!(table_codes(&doc, "## runwire-session"), vec![0, 1, 2, 3]);
}
