//! Keeps the exit codes written down in `spec/exit-codes.md` and
//! `man/runwire.7` in step with `runwire::util::cli::Exit`, the codes the binaries
//! actually return.

use runwire::util::cli::Exit;
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
fn verdict_check_uses_codes_0_to_3() {
    let doc = read("spec/exit-codes.md");
    assert_eq!(table_codes(&doc, "## verdict-check"), vec![0, 1, 2, 3]);
}

#[test]
fn agui_check_uses_codes_0_to_3() {
    let doc = read("spec/exit-codes.md");
    assert_eq!(table_codes(&doc, "## agui-check"), vec![0, 1, 2, 3]);
    let man = read("man/agui-check.1");
    let status = man.split(".SH EXIT STATUS").nth(1).expect("agui-check(1) has an EXIT STATUS");
    let status = status.split("\n.SH").next().unwrap_or_default();
    let lines: Vec<&str> = status.lines().collect();
    let codes: Vec<&str> =
        lines.windows(2).filter(|w| w[0] == ".TP").filter_map(|w| w[1].strip_prefix(".B ")).collect();
    assert_eq!(codes, ["0", "1", "2", "3"], "agui-check(1) and spec/exit-codes.md give the same codes");
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

/// Every binary's `--help` ends with its exit statuses; the filters' say
/// the one rule of spec/exit-codes.md, as their man pages do.
#[test]
fn every_help_ends_with_its_exit_statuses_and_the_filters_agree() {
    let bins = [
        env!("CARGO_BIN_EXE_normalize-events"),
        env!("CARGO_BIN_EXE_agui-translate"),
        env!("CARGO_BIN_EXE_sse-encode"),
        env!("CARGO_BIN_EXE_runs"),
        env!("CARGO_BIN_EXE_liveness"),
        env!("CARGO_BIN_EXE_verdict-check"),
        env!("CARGO_BIN_EXE_agui-check"),
        env!("CARGO_BIN_EXE_runwire-serve"),
        env!("CARGO_BIN_EXE_runwire-supervise"),
        env!("CARGO_BIN_EXE_runwire-session"),
        env!("CARGO_BIN_EXE_runwire-reaper"),
    ];
    for bin in bins {
        let out = std::process::Command::new(bin).arg("--help").output().unwrap();
        assert!(out.status.success(), "{bin}");
        let help = String::from_utf8(out.stdout).unwrap();
        let tail: Vec<&str> = help.trim_end().lines().rev().take(3).collect();
        assert!(tail.iter().any(|l| l.starts_with("Exit status")), "{bin}: help ends with {tail:?}");
    }
    for name in ["normalize-events", "agui-translate", "sse-encode"] {
        let bin = match name {
            "normalize-events" => env!("CARGO_BIN_EXE_normalize-events"),
            "agui-translate" => env!("CARGO_BIN_EXE_agui-translate"),
            _ => env!("CARGO_BIN_EXE_sse-encode"),
        };
        let help = String::from_utf8(std::process::Command::new(bin).arg("--help").output().unwrap().stdout).unwrap();
        assert!(help.contains("1 some input lines were unusable"), "{name}: {help}");
        let man = read(&format!("man/{name}.1"));
        let status = man.split(".SH EXIT STATUS").nth(1).unwrap_or_else(|| panic!("{name}(1) has no EXIT STATUS"));
        let status = status.split("\n.SH").next().unwrap_or_default();
        assert!(status.contains("unusable"), "{name}(1)'s EXIT STATUS gives the rule: {status}");
        assert!(!status.contains("exits 0 even"), "{name}(1)");
    }
}

/// `liveness get` on a runstate directory that does not exist: exit 3, as
/// the spec's table says, not an empty sidecar.
#[test]
fn liveness_get_on_a_missing_runstate_exits_3() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_liveness"))
        .args(["get", "feat", "--runstate", "/nonexistent/runstate"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3));
    assert!(out.stdout.is_empty());
    assert!(String::from_utf8_lossy(&out.stderr).starts_with("liveness: /nonexistent/runstate: "));
}

/// A usage error is said as every other error of the binaries is, `<bin>:
/// usage: <what>` (in a pipeline of three filters, which one failed), exit
/// 2, nothing on stdout; a flag before a reaper's program is a flag, not
/// the program.
#[test]
fn every_binary_says_a_usage_error_with_its_name_and_exits_2() {
    let bins: [(&str, &str, &[&str]); 12] = [
        ("normalize-events", env!("CARGO_BIN_EXE_normalize-events"), &["gemini"]),
        ("agui-translate", env!("CARGO_BIN_EXE_agui-translate"), &["--bogus"]),
        ("sse-encode", env!("CARGO_BIN_EXE_sse-encode"), &["--bogus"]),
        ("agui-check", env!("CARGO_BIN_EXE_agui-check"), &["--bogus"]),
        ("verdict-check", env!("CARGO_BIN_EXE_verdict-check"), &["--bogus"]),
        ("liveness", env!("CARGO_BIN_EXE_liveness"), &["--bogus"]),
        ("runs", env!("CARGO_BIN_EXE_runs"), &["list", "--bogus"]),
        ("runwire-serve", env!("CARGO_BIN_EXE_runwire-serve"), &["--listen", "nope"]),
        ("runwire-supervise", env!("CARGO_BIN_EXE_runwire-supervise"), &["--bogus"]),
        ("runwire-session", env!("CARGO_BIN_EXE_runwire-session"), &["gemini"]),
        ("runwire-reaper", env!("CARGO_BIN_EXE_runwire-reaper"), &["--bogus", "true"]),
        ("runwire-reaper", env!("CARGO_BIN_EXE_runwire-reaper"), &["--grace-ms", "10", "--bogus", "--", "true"]),
    ];
    let home = crate::support::scratch("usage");
    for (name, bin, args) in bins {
        let o = std::process::Command::new(bin)
            .args(args)
            .env("HARNESS_HOME", &home)
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{name} {args:?}: {err}");
        assert!(err.starts_with(&format!("{name}: usage: ")), "{name} {args:?}: {err}");
        assert!(o.stdout.is_empty(), "{name} {args:?}");
    }
    let _ = std::fs::remove_dir_all(&home);
}

/// A usage error a binary finds itself (a value out of range, an id outside
/// the strict set, a patch of unknown keys) reads as clap's do: `<bin>:
/// usage: <what>`, exit 2. They said `<bin>: <what>` only.
#[test]
fn usage_errors_found_by_the_binary_read_as_claps() {
    let dir = crate::support::scratch("usage-form");
    let rs = dir.to_str().unwrap();
    for (bin, args, what) in [
        (env!("CARGO_BIN_EXE_runs"), vec!["list", "--limit", "0"], "runs: usage: limit \"0\""),
        (env!("CARGO_BIN_EXE_runs"), vec!["show", "../x"], "runs: usage: "),
        (
            env!("CARGO_BIN_EXE_liveness"),
            vec!["--runstate", rs, "set", "feat", "t", r#"{"bogus":1}"#],
            "liveness: usage: set t: ",
        ),
        (
            env!("CARGO_BIN_EXE_liveness"),
            vec!["--runstate", rs, "set", "feat", "t", "[1, 2]"],
            "liveness: usage: set t: ",
        ),
        (env!("CARGO_BIN_EXE_liveness"), vec!["--runstate", rs, "get", "../feat"], "liveness: usage: slug"),
        (
            env!("CARGO_BIN_EXE_runwire-session"),
            vec!["claude", "--permission-mode", "bogus", "--", "true"],
            "runwire-session: usage: ",
        ),
    ] {
        let out = std::process::Command::new(bin).args(&args).env("HARNESS_HOME", dir.join("home")).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.starts_with(what), "{args:?}: {err}");
    }
}

/// `--help` whose write fails (a full disk) is an I/O error, said as one
/// (it exited 0, nothing written); a reader that left is still a success.
#[test]
fn help_that_cannot_be_written_exits_3() {
    for bin in [env!("CARGO_BIN_EXE_normalize-events"), env!("CARGO_BIN_EXE_runwire-supervise")] {
        let full = std::fs::OpenOptions::new().write(true).open("/dev/full").unwrap();
        let out = std::process::Command::new(bin).arg("--help").stdout(full).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(3), "{bin}: {err}");
        assert!(err.contains(": stdout: "), "{bin}: {err}");
    }
}

/// An empty id is no id: `agui-translate --run-id ""` made message ids
/// like `:m:msg_1`; refused as usage, as `sse-encode --id-from ""` is.
#[test]
fn empty_ids_are_usage_errors() {
    for (bin, args) in [
        (env!("CARGO_BIN_EXE_agui-translate"), ["--run-id", ""]),
        (env!("CARGO_BIN_EXE_agui-translate"), ["--thread-id", ""]),
        (env!("CARGO_BIN_EXE_sse-encode"), ["--id-from", ""]),
    ] {
        let out = std::process::Command::new(bin).args(args).stdin(std::process::Stdio::null()).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(": usage: "), "{args:?}: {err}");
    }
}

/// A directory named by a file: `runs` with `$HARNESS_HOME` a file (it
/// listed nothing, exit 0) and `runwire-supervise --runstate` a file (it
/// said "File exists") say "not a directory", exit 3.
#[test]
fn a_file_where_a_directory_belongs_is_said_so() {
    let dir = crate::support::scratch("not-a-dir");
    let file = dir.join("file");
    std::fs::write(&file, "").unwrap();
    let out =
        std::process::Command::new(env!("CARGO_BIN_EXE_runs")).arg("list").env("HARNESS_HOME", &file).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert!(err.starts_with(&format!("runs: {}: not a directory", file.display())), "{err}");
    let plan = dir.join("p.plan.json");
    std::fs::write(&plan, r#"{"v":"plan/v1","tasks":[]}"#).unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_runwire-supervise"))
        .arg("--plan")
        .arg(&plan)
        .arg("--runstate")
        .arg(&file)
        .env("HARNESS_HOME", dir.join("home"))
        .current_dir(&dir)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert!(err.starts_with(&format!("runwire-supervise: {}: not a directory", file.display())), "{err}");
    assert!(!dir.join("home/runs").exists(), "nothing registered");
}
