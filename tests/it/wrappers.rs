//! The agent wrappers (`wrappers/*.sh`, spec/WRAPPER-CONTRACT.md) against the stub
//! engines in `fixtures/stub-engines/`: the contract probe passes, and each wrapper's
//! output read by `normalize-events <adapter>` ends in an `exit` event with rc 0 whose
//! events carry the session id of the status line.

use crate::support;

use assert_cmd::Command;
use serde_json::Value;
use std::path::PathBuf;
use std::process::Command as Process;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

#[test]
#[cfg_attr(not(all(tool = "bash", tool = "jq")), ignore = "needs bash and jq: apt-get install bash jq")]
fn contract_probe_passes() {
    support::need(&["bash", "jq"]);
    let out = Process::new("bash")
        .arg(root().join("wrappers/_contract-probe.sh"))
        .env("RUNWIRE_SESSION_BIN", env!("CARGO_BIN_EXE_runwire-session"))
        .current_dir(root())
        .output()
        .expect("run the contract probe");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    // A `# skip` would pass a check that did not run.
    let failed: Vec<&str> = stdout
        .lines()
        .filter(|l| l.starts_with("not ok") || l.starts_with("#   ") || l.starts_with("# skip"))
        .collect();
    assert!(
        out.status.success() && failed.is_empty(),
        "contract probe failed ({}):\n{}\n--- full output ---\n{stdout}\n--- stderr ---\n{stderr}",
        out.status,
        failed.join("\n")
    );
    let passed = stdout.lines().filter(|l| l.starts_with("ok - ")).count();
    assert!(passed >= 90, "only {passed} checks ran:\n{stdout}");
}

/// Run `wrappers/<adapter>.sh` with the stub engine in mode ok; return its stdout.
fn wrapper_stdout(adapter: &str, extra: &[&str]) -> String {
    let stubs = root().join("fixtures/stub-engines");
    let path = format!("{}:{}", stubs.display(), std::env::var("PATH").unwrap_or_default());
    let out = Process::new("bash")
        .arg(root().join(format!("wrappers/{adapter}.sh")))
        .args(["--prompt", "say hi"])
        .args(extra)
        .env("PATH", path)
        .env("STUB_MODE", "ok")
        .env_remove("RUNWIRE_CLAUDE_BIN")
        .env_remove("RUNWIRE_CURSOR_BIN")
        .env_remove("RUNWIRE_CODEX_BIN")
        .env_remove("STUB_STREAM")
        .env_remove("STUB_DELAY")
        .current_dir(std::env::temp_dir())
        .output()
        .expect("run the wrapper");
    assert!(out.status.success(), "{adapter}.sh failed ({}): {}", out.status, String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).expect("utf-8 output")
}

fn check_normalized(adapter: &str, extra: &[&str], want_session: Option<&str>) {
    let raw = wrapper_stdout(adapter, extra);
    let status: Value = serde_json::from_str(raw.lines().last().expect("some output")).expect("status line is JSON");
    assert_eq!(status["type"], "runwire.status", "{adapter}: last line {status}");
    assert_eq!(status["rc"], 0, "{adapter}: {status}");
    let session = status["session_id"].as_str().unwrap_or_else(|| panic!("{adapter}: no session_id in {status}"));
    if let Some(w) = want_session {
        assert_eq!(session, w, "{adapter}: status {status}");
    }

    let out = Command::cargo_bin("normalize-events").unwrap().arg(adapter).write_stdin(raw.clone()).output().unwrap();
    assert!(out.status.success(), "normalize-events {adapter}: {}", String::from_utf8_lossy(&out.stderr));
    let events: Vec<Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{adapter}: bad event {l}: {e}")))
        .collect();
    let last = events.last().unwrap_or_else(|| panic!("{adapter}: no events"));
    assert_eq!(last["type"], "exit", "{adapter}: last event {last}");
    assert_eq!(last["data"]["rc"], 0, "{adapter}: {last}");
    assert_eq!(last["data"]["ok"], true, "{adapter}: {last}");
    assert_eq!(last["session"], session, "{adapter}: the exit event carries the session id: {last}");
    let exits = events.iter().filter(|e| e["type"] == "exit").count();
    assert_eq!(exits, 1, "{adapter}: one exit event");
    for e in &events {
        if let Some(s) = e.get("session") {
            assert_eq!(s, session, "{adapter}: event with another session: {e}");
        }
    }
    assert!(
        events.iter().any(|e| e["type"] == "turn_end"),
        "{adapter}: the stub's stream ends its turn before the status line"
    );
}

#[test]
#[cfg_attr(not(tool = "bash"), ignore = "needs bash: apt-get install bash")]
fn wrapper_output_normalizes_to_an_exit_event_with_the_session() {
    support::need(&["bash"]);
    check_normalized("claude", &[], None);
    check_normalized(
        "claude",
        &["--session-id", "5e55a1d0-0000-4000-8000-00000000abcd"],
        Some("5e55a1d0-0000-4000-8000-00000000abcd"),
    );
    check_normalized("cursor", &[], Some("c0ffee00-0000-4000-8000-000000000001"));
    check_normalized("codex", &[], Some("0199a213-81c0-7800-8aa1-bbab2a035a53"));
    for adapter in ["claude", "cursor", "codex"] {
        check_normalized(
            adapter,
            &["--resume", "7e5a0b1c-1111-4222-8333-444455556666"],
            Some("7e5a0b1c-1111-4222-8333-444455556666"),
        );
    }
}

/// codex.sh outside a git work tree: `--skip-git-repo-check` only when the
/// caller asks for it (`RUNWIRE_CODEX_SKIP_GIT_REPO_CHECK=1`), for a new
/// turn and a resumed one; the stub engine logs the arguments it got.
#[test]
#[cfg_attr(not(tool = "bash"), ignore = "needs bash: apt-get install bash")]
fn codex_skips_its_git_repo_check_only_when_asked() {
    support::need(&["bash"]);
    let dir = support::scratch("codex-skip-git");
    let log = dir.join("argv");
    let run = |skip: Option<&str>, extra: &[&str]| {
        let _ = std::fs::remove_file(&log);
        let mut cmd = Process::new("bash");
        cmd.arg(root().join("wrappers/codex.sh"))
            .args(["--prompt", "say hi", "--cwd"])
            .arg(&dir)
            .args(extra)
            .env("RUNWIRE_CODEX_BIN", root().join("fixtures/stub-engines/codex"))
            .env("STUB_MODE", "ok")
            .env("STUB_ARGV_LOG", &log)
            .env_remove("STUB_STREAM")
            .env_remove("STUB_DELAY")
            .env_remove("RUNWIRE_CODEX_SKIP_GIT_REPO_CHECK");
        if let Some(v) = skip {
            cmd.env("RUNWIRE_CODEX_SKIP_GIT_REPO_CHECK", v);
        }
        let out = cmd.output().expect("run codex.sh");
        assert!(out.status.success(), "codex.sh: {}", String::from_utf8_lossy(&out.stderr));
        std::fs::read_to_string(&log).unwrap()
    };
    let resume = ["--resume", "7e5a0b1c-1111-4222-8333-444455556666"];
    assert_eq!(run(None, &[]).trim_end(), "codex exec --json -- say\\ hi");
    assert_eq!(run(Some("0"), &[]).trim_end(), "codex exec --json -- say\\ hi");
    assert_eq!(run(Some("1"), &[]).trim_end(), "codex exec --json --skip-git-repo-check -- say\\ hi");
    assert_eq!(
        run(Some("1"), &resume).trim_end(),
        "codex exec resume --json --skip-git-repo-check -- 7e5a0b1c-1111-4222-8333-444455556666 say\\ hi"
    );
    assert_eq!(
        run(None, &resume).trim_end(),
        "codex exec resume --json -- 7e5a0b1c-1111-4222-8333-444455556666 say\\ hi"
    );
}

/// `claude.sh --interactive` over the replay stub of the recorded `approval-allow` session:
/// the request appears in the stream, an answer written to the wrapper's stdin reaches the
/// engine as the recording shows (the stub checks it), and the status line closes the turn.
#[test]
#[cfg_attr(not(all(tool = "bash", tool = "jq")), ignore = "needs bash and jq: apt-get install bash jq")]
fn claude_interactive_takes_an_answer_on_stdin() {
    use std::io::{BufRead, BufReader, Write};
    support::need(&["bash", "jq"]);
    let cell = root().join("fixtures/interactive/claude-code/approval-allow");
    let dir = support::scratch("runwire-wrap-live");
    let engine = dir.join("replay-claude");
    std::fs::write(
        &engine,
        format!(
            "#!/usr/bin/env bash\nexec '{}' claude '{}' \"$@\"\n",
            root().join("fixtures/stub-engines/replay").display(),
            cell.display()
        ),
    )
    .unwrap();
    Process::new("chmod").arg("755").arg(&engine).status().unwrap();
    let prompt = "Run `curl -sI https://example.com | head -n 1` in the shell (it needs network access), then reply with the single word done.";
    let mut child = Process::new("bash")
        .arg(root().join("wrappers/claude.sh"))
        .args(["--interactive", "--prompt", prompt])
        .env("RUNWIRE_CLAUDE_BIN", &engine)
        .env("RUNWIRE_SESSION_BIN", env!("CARGO_BIN_EXE_runwire-session"))
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .current_dir(&dir)
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut out = Vec::new();
    for l in lines.by_ref() {
        let l = l.unwrap();
        out.push(l.clone());
        if l.starts_with(r#"{"type":"runwire.request""#) {
            let req: Value = serde_json::from_str(&l).unwrap();
            writeln!(stdin, r#"{{"type":"answer","id":{},"decision":"allow","by":"probe"}}"#, req["id"]).unwrap();
            break;
        }
    }
    drop(stdin);
    out.extend(lines.map(|l| l.unwrap()));
    let st = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&st.stderr);
    assert!(st.status.success() && !err.contains("replay stub:"), "{}\n{err}\n{}", st.status, out.join("\n"));
    let status: Value = serde_json::from_str(out.last().unwrap()).unwrap();
    assert_eq!(
        (status["ok"].as_bool(), status["session_id"].as_str()),
        (Some(true), Some("0e70de90-9b5d-47f6-96b1-1d2711dbcade"))
    );
    assert!(out.iter().any(|l| l.starts_with(r#"{"type":"runwire.answer""#)
        && l.contains(r#""decision":"allow","scope":"once","by":"probe""#)));
    let _ = std::fs::remove_dir_all(&dir);
}

// ---- where wrappers are taken from (spec/WRAPPER-CONTRACT.md, "Where wrappers are found") ----

/// runwire-serve placed at `exe` (a link or copy of the built one), as an installed binary.
fn place_server(exe: &std::path::Path) {
    std::fs::create_dir_all(exe.parent().unwrap()).unwrap();
    let built = env!("CARGO_BIN_EXE_runwire-serve");
    if std::fs::hard_link(built, exe).is_err() {
        std::fs::copy(built, exe).unwrap();
    }
}

/// A wrapper that leaves `marker` behind when it runs (what an attacker plants).
fn planted(path: &std::path::Path, marker: &std::path::Path) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, format!("#!/bin/sh\ntouch '{}'\n", marker.display())).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// `exe --agent claude` with the cache at `cache`, no PREFIX and no claude on
/// PATH; its stderr goes to `<cache>.stderr`. One POST /agui runs the
/// wrapper once; returns the server's stderr so far.
fn one_run(exe: &std::path::Path, cache: &std::path::Path, between: impl FnOnce()) -> String {
    let err = PathBuf::from(format!("{}.stderr", cache.display()));
    let mut cmd = Process::new(exe);
    cmd.args(["--agent", "claude"])
        .env("XDG_CACHE_HOME", cache)
        .env_remove("PREFIX")
        .env("HARNESS_HOME", cache.with_extension("home"))
        .env("PATH", "/usr/bin:/bin")
        .stderr(std::fs::File::create(&err).unwrap());
    let srv = support::Server::spawn(cmd);
    between();
    let body = r#"{"threadId":"t","runId":"r","messages":[{"id":"m","role":"user","content":"hi"}]}"#;
    let (code, _) = srv.post("/agui", body);
    assert_eq!(code, 200);
    drop(srv);
    std::fs::read_to_string(&err).unwrap()
}

#[test]
fn a_wrapper_planted_above_the_executable_never_runs() {
    use std::os::unix::fs::PermissionsExt;
    let base = support::scratch("plant");
    let open = base.join("open");
    let checkout = open.join("co");
    let exe = checkout.join("target/debug/runwire-serve");
    place_server(&exe);
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
    // Any directory above the executable is no longer searched.
    planted(&open.join("wrappers/claude.sh"), &base.join("ran-above"));
    one_run(&exe, &base.join("cache"), || ());
    assert!(!base.join("ran-above").exists(), "a wrapper in an ancestor of the executable ran");
    // A checkout's own wrappers/ counts, but not under a directory others can write.
    std::fs::write(checkout.join("Cargo.toml"), "[package]\nname = \"runwire\"\n").unwrap();
    planted(&checkout.join("wrappers/claude.sh"), &base.join("ran-checkout"));
    let err = one_run(&exe, &base.join("cache2"), || ());
    assert!(!base.join("ran-checkout").exists(), "a checkout's wrapper under a 0777 directory ran");
    assert!(err.contains(&format!("{}: writable by group or others (mode 777)", open.display())), "{err}");
    // The same checkout, once nobody else can write above it, is used.
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o755)).unwrap();
    one_run(&exe, &base.join("cache3"), || ());
    assert!(base.join("ran-checkout").exists(), "the checkout's own wrapper is the one run");
}

#[test]
#[cfg_attr(not(tool = "root"), ignore = "needs root, to make a directory another user owns (CI runs as root)")]
fn a_cache_directory_another_user_made_is_refused() {
    use std::os::unix::fs::PermissionsExt;
    support::need(&["root"]);
    let base = support::scratch("cacheown");
    let exe = base.join("bin/runwire-serve");
    place_server(&exe);
    let cache = base.join("cache");
    let dir = cache.join(format!("runwire/wrappers-{}", runwire::session::wrappers::content_hash()));
    std::fs::create_dir_all(&dir).unwrap();
    // An exact copy, made by another user (nobody), open to all.
    for (name, bytes) in runwire::session::wrappers::FILES {
        std::fs::write(dir.join(name), bytes).unwrap();
        std::fs::set_permissions(dir.join(name), std::fs::Permissions::from_mode(0o777)).unwrap();
        std::os::unix::fs::chown(dir.join(name), Some(65534), Some(65534)).unwrap();
    }
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).unwrap();
    std::os::unix::fs::chown(&dir, Some(65534), Some(65534)).unwrap();
    let marker = base.join("ran");
    // Its owner swaps the wrapper once the server has started.
    let err = one_run(&exe, &cache, || planted(&dir.join("claude.sh"), &marker));
    assert!(!marker.exists(), "another user's cached wrapper ran");
    assert!(err.contains("owned by uid 65534, neither you nor root"), "{err}");
}

#[test]
fn a_cached_wrapper_changed_after_start_is_not_run() {
    let base = support::scratch("cacheswap");
    let exe = base.join("bin/runwire-serve");
    place_server(&exe);
    let cache = base.join("cache");
    let dir = cache.join(format!("runwire/wrappers-{}", runwire::session::wrappers::content_hash()));
    let marker = base.join("ran");
    one_run(&exe, &cache, || {
        assert!(dir.join("claude.sh").is_file(), "the server wrote its wrappers at start");
        planted(&dir.join("claude.sh"), &marker);
    });
    assert!(!marker.exists(), "a cached wrapper changed after start ran");
    assert_eq!(std::fs::read(dir.join("claude.sh")).unwrap(), runwire::session::wrappers::FILES[1].1, "written again");
}

/// In `--interactive`, claude.sh starts runwire-session with the settings of
/// its environment (spec/WRAPPER-CONTRACT.md), the plan's exit mode included.
#[test]
#[cfg_attr(not(tool = "bash"), ignore = "needs bash: apt-get install bash")]
fn claude_interactive_passes_its_session_settings_on() {
    use std::os::unix::fs::PermissionsExt;
    support::need(&["bash"]);
    let dir = support::scratch("settings");
    let session = dir.join("session");
    std::fs::write(&session, format!("#!/bin/sh\nprintf '%s\\n' \"$@\" > '{}'\n", dir.join("argv").display())).unwrap();
    std::fs::set_permissions(&session, std::fs::Permissions::from_mode(0o755)).unwrap();
    let stubs = root().join("fixtures/stub-engines");
    let _ = Process::new("bash")
        .arg(root().join("wrappers/claude.sh"))
        .args(["--interactive", "--prompt", "hi"])
        .env("PATH", format!("{}:{}", stubs.display(), std::env::var("PATH").unwrap_or_default()))
        .env("RUNWIRE_SESSION_BIN", &session)
        .env("RUNWIRE_PERMISSION_MODE", "plan")
        .env("RUNWIRE_PLAN_EXIT_MODE", "acceptEdits")
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let argv = std::fs::read_to_string(dir.join("argv")).unwrap();
    let argv: Vec<&str> = argv.lines().collect();
    let after = |flag: &str| argv.iter().position(|a| *a == flag).map(|i| argv[i + 1]);
    assert_eq!(
        (after("--permission-mode"), after("--plan-exit-mode")),
        (Some("plan"), Some("acceptEdits")),
        "{argv:?}"
    );
    assert!(!argv.contains(&"--grant-all"), "{argv:?}");
}
