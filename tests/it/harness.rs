//! The test harness's own rules: the one skip rule (`tests/support/tools.rs`)
//! holds for every test file, the build's probe agrees with the tools that
//! are here, and a child's stderr shows only when its test fails.

use crate::support;

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::process::Command;

/// The test modules (`tests/it/`), and any test file still beside them
/// (`tests/*.rs`, a new one not yet moved into the binary).
fn test_files() -> Vec<PathBuf> {
    let tests = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests");
    let mut files = Vec::new();
    for dir in [tests.join("it"), tests] {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "rs")
                && !path.ends_with("harness.rs")
                && !path.ends_with("main.rs")
            {
                files.push(path);
            }
        }
    }
    files
}

/// One function of a test file: its attributes and body.
struct Func {
    attrs: String,
    body: String,
}

/// The functions and methods of `src` by name (methods of the same name
/// merged); a body ends at the first `}` alone on a line at the indent of
/// its `fn`, rustfmt's layout.
fn functions(src: &str) -> BTreeMap<String, Func> {
    let mut out: BTreeMap<String, Func> = BTreeMap::new();
    let lines: Vec<&str> = src.lines().collect();
    for (i, l) in lines.iter().enumerate() {
        let indent = &l[..l.len() - l.trim_start().len()];
        let Some(rest) = l.trim_start().strip_prefix("fn ").or_else(|| l.trim_start().strip_prefix("pub fn ")) else {
            continue;
        };
        let name = rest.split(['(', '<']).next().unwrap_or("").to_string();
        let attrs: Vec<&str> =
            lines[..i].iter().rev().take_while(|a| a.trim_start().starts_with(['#', '/'])).copied().collect();
        let close = format!("{indent}}}");
        let end = lines[i..].iter().position(|b| *b == close).map_or(lines.len(), |e| i + e);
        let f = out.entry(name).or_insert(Func { attrs: String::new(), body: String::new() });
        f.attrs.push_str(&attrs.into_iter().rev().collect::<Vec<_>>().join("\n"));
        f.body.push_str(&lines[i + 1..end].join("\n"));
    }
    out
}

/// Whether `body` calls `name` (not a longer name ending the same way).
fn calls(body: &str, name: &str) -> bool {
    body.match_indices(&format!("{name}(")).any(|(at, _)| {
        !body[..at].chars().next_back().is_some_and(|c| c.is_alphanumeric() || c == '_') && !body[..at].ends_with("fn ")
    })
}

/// The tools `body` asks for directly (`support::need(&[..])`, `need_jq!()`,
/// the replaying stub, which runs jq).
fn direct_needs(body: &str) -> BTreeSet<String> {
    let mut needs = BTreeSet::new();
    for call in body.split("need(&[").skip(1) {
        let list = call.split(']').next().unwrap_or("");
        needs.extend(list.split(',').map(|t| t.trim().trim_matches('"').to_string()).filter(|t| !t.is_empty()));
    }
    if body.contains("need_jq!()") || body.contains("stub-engines/replay") {
        needs.insert("jq".into());
    }
    needs
}

/// Every test that needs a tool, directly or through the file's helpers,
/// is ignored without it (`cfg_attr(not(.. tool = "NAME" ..), ignore = ..)`),
/// and no test skips the old way: returning early, after printing so.
#[test]
fn every_test_that_needs_a_tool_carries_the_guard_and_none_skips_by_returning() {
    let mut problems = Vec::new();
    let mut guarded = 0;
    for path in test_files() {
        let file = path.file_name().unwrap().to_string_lossy().to_string();
        let src = std::fs::read_to_string(&path).unwrap();
        for bad in ["SKIPPED", "official_client_ready", "fn have_jq", "fn have_node", "fn have_bash"] {
            if src.contains(bad) {
                problems.push(format!("{file}: `{bad}`: a skip that passes; use support::need and the cfg guard"));
            }
        }
        let funcs = functions(&src);
        // What each function needs, through the helpers it calls (to a fixed point).
        let mut needs: BTreeMap<&str, BTreeSet<String>> =
            funcs.iter().map(|(n, f)| (n.as_str(), direct_needs(&f.body))).collect();
        loop {
            let mut changed = false;
            for (name, f) in &funcs {
                let inherited: BTreeSet<String> = funcs
                    .keys()
                    .filter(|callee| *callee != name && calls(&f.body, callee))
                    .flat_map(|callee| needs[callee.as_str()].clone())
                    .collect();
                let mine = needs.get_mut(name.as_str()).unwrap();
                let before = mine.len();
                mine.extend(inherited);
                changed |= mine.len() != before;
            }
            if !changed {
                break;
            }
        }
        for (name, f) in &funcs {
            if !f.attrs.contains("#[test]") || needs[name.as_str()].is_empty() {
                continue;
            }
            guarded += 1;
            let guards: Vec<&str> = f.attrs.split("cfg_attr(").skip(1).filter(|g| g.contains("ignore = \"")).collect();
            let guard = guards.join("\n");
            for tool in &needs[name.as_str()] {
                support::tools::tool(tool); // a tool the probe knows
                if !guard.contains(&format!("tool = \"{tool}\"")) {
                    problems.push(format!(
                        "{file}: {name} needs {tool} without #[cfg_attr(not(tool = \"{tool}\"), ignore = \"...\")]"
                    ));
                }
            }
        }
    }
    assert!(problems.is_empty(), "the skip rule (tests/support/tools.rs) is broken:\n{}", problems.join("\n"));
    // The scan found the guarded tests (conformance, studio, session, ...): it reads what it should.
    assert!(guarded >= 30, "only {guarded} guarded tests found");
}

/// The cfgs this test was built with say what the tools here are: the build
/// script re-ran when PATH, CI or STUDIO_CHROMIUM changed. Under CI every
/// cfg is set, whatever is missing.
#[test]
fn the_build_probe_agrees_with_the_tools_here() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let built: Vec<(&str, bool)> = vec![
        ("bash", cfg!(tool = "bash")),
        ("jq", cfg!(tool = "jq")),
        ("curl", cfg!(tool = "curl")),
        ("root", cfg!(tool = "root")),
        ("node", cfg!(tool = "node")),
        ("agui-client", cfg!(tool = "agui-client")),
        ("playwright", cfg!(tool = "playwright")),
        ("chromium", cfg!(tool = "chromium")),
        ("real-agents", cfg!(tool = "real-agents")),
        ("nats-server", cfg!(tool = "nats-server")),
        ("standardwebhooks", cfg!(tool = "standardwebhooks")),
        ("git", cfg!(tool = "git")),
        ("iproute2", cfg!(tool = "iproute2")),
        ("python3", cfg!(tool = "python3")),
        ("caddy", cfg!(tool = "caddy")),
        ("certutil", cfg!(tool = "certutil")),
        ("openssl", cfg!(tool = "openssl")),
    ];
    assert_eq!(built.len(), support::tools::TOOLS.len(), "a tool of tools.rs is not checked here");
    for (name, set) in built {
        let here = support::tools::missing(root, support::tools::tool(name)).is_none();
        let want = here || support::tools::in_ci();
        assert_eq!(set, want, "{name}: built with cfg(tool) {set}, but here: {here} (CI: {})", support::tools::in_ci());
    }
}

/// Run by [`a_childs_stderr_shows_only_when_its_test_fails`] in a process of
/// its own (and by `cargo test` as it is): a child's stderr is captured,
/// not passed through; with `RUNWIRE_QUIET_FAIL` set the test then fails.
#[test]
fn quiet_captures_a_childs_stderr() {
    let mut child =
        Command::new("sh").args(["-c", "echo chatter-7f3a >&2"]).stderr(std::process::Stdio::piped()).spawn().unwrap();
    let quiet = support::Quiet::capture("the chatty child", &mut child);
    child.wait().unwrap();
    let t = std::time::Instant::now();
    while !quiet.text().contains("chatter-7f3a") {
        assert!(t.elapsed().as_secs() < 10, "the child's stderr was not captured: {:?}", quiet.text());
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    assert!(std::env::var_os("RUNWIRE_QUIET_FAIL").is_none(), "failing on purpose");
}

#[test]
fn a_childs_stderr_shows_only_when_its_test_fails() {
    let run = |fail: bool| {
        let mut cmd = Command::new(std::env::current_exe().unwrap());
        cmd.args(["--exact", "harness::quiet_captures_a_childs_stderr", "--test-threads=1"]);
        if fail {
            cmd.env("RUNWIRE_QUIET_FAIL", "1");
        }
        let out = cmd.output().unwrap();
        let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        (out.status.success(), text)
    };
    let (ok, text) = run(false);
    assert!(ok && text.contains("1 passed"), "{text}");
    assert!(!text.contains("chatter-7f3a"), "a passing test printed its child's stderr:\n{text}");
    let (ok, text) = run(true);
    assert!(!ok && text.contains("failing on purpose"), "{text}");
    assert!(
        text.contains("--- stderr of the chatty child ---\nchatter-7f3a\n"),
        "a failing test did not show its child's stderr:\n{text}"
    );
}

/// The tests' SSE reader takes what a browser takes: frames split by CRLF or
/// LF, an `id:` or `event:` line before the data, multi-line data,
/// keep-alive comments; an unterminated last frame is not a frame.
#[test]
fn the_sse_reader_reads_frames_as_a_browser_does() {
    use support::sse::{events, frames, Frame};
    let body = ": keep-alive\n\nid: 7\nevent: run\ndata: {\"a\":1}\n\ndata:{\"b\":\r\ndata: 2}\r\n\r\ndata: {\"torn\"";
    let f = frames(body);
    assert_eq!(
        f,
        [
            Frame { id: Some("7".into()), event: Some("run".into()), data: r#"{"a":1}"#.into() },
            Frame { id: None, event: None, data: "{\"b\":\n2}".into() },
        ]
    );
    assert_eq!(events(body), [serde_json::json!({"a": 1}), serde_json::json!({"b": 2})]);
}

/// One `runwire-serve` fixture (`support::Server`) and one SSE reader
/// (`support::sse`) for the whole binary: no module of it grows its own.
#[test]
fn the_modules_share_one_server_fixture_and_one_sse_reader() {
    let mut problems = Vec::new();
    let it = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/it");
    let modules: Vec<PathBuf> = test_files().into_iter().filter(|p| p.starts_with(&it)).collect();
    assert!(modules.len() > 30, "only {} modules found in {}", modules.len(), it.display());
    for path in modules {
        let src = std::fs::read_to_string(&path).unwrap();
        let file = path.file_name().unwrap().to_string_lossy().to_string();
        for own in
            ["struct Server ", "struct Server(", "fn sse_events", "fn frames_until_exit", "fn dechunk", "struct Sse "]
        {
            if src.contains(own) {
                problems.push(format!("{file}: `{own}`: use support::Server / support::sse"));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// The live reader gives what [`support::sse::frames`] gives however the
/// bytes arrive (here one at a time, a CRLF split between reads), counts
/// the keep-alive comments, and `http_events` reads a chunked response.
#[test]
fn the_live_sse_reader_reads_frames_split_anywhere() {
    use support::sse::{frames, http_events, Frame, Reader};
    struct Drip<'a>(&'a [u8]);
    impl std::io::Read for Drip<'_> {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            let Some((first, rest)) = self.0.split_first() else { return Ok(0) };
            buf[0] = *first;
            self.0 = rest;
            Ok(1)
        }
    }
    let head = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n";
    let body = ": keep-alive\n\nid: 7\nevent: run\ndata: {\"a\":1}\n\ndata:{\"b\":\r\ndata: 2}\r\n\r\n: keep-alive\r\n\r\ndata: {\"torn\"";
    let raw = format!("{head}{body}");
    let mut r = Reader::new(Drip(raw.as_bytes()));
    assert_eq!(r.status(), 200);
    let got: Vec<Frame> = std::iter::from_fn(|| r.next_frame()).collect();
    assert_eq!(got, frames(body));
    assert_eq!(got.len(), 2);
    assert_eq!(got[0].kind(), "run");
    assert_eq!(r.comments(), 2);
    // The same frames, chunked at odd places, then the last chunk.
    let whole = "data: {\"a\":1}\n\ndata: {\"b\":2}\n\n";
    let (x, y) = whole.split_at(9);
    let chunked = format!(
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n{:x}\r\n{x}\r\n{:x}\r\n{y}\r\n0\r\n\r\n",
        x.len(),
        y.len()
    );
    assert_eq!(http_events(chunked.as_bytes()), [serde_json::json!({"a": 1}), serde_json::json!({"b": 2})]);
}

/// Run by [`scratch_is_gone_after_a_pass_and_kept_and_named_after_a_failure`]
/// in a process of its own (and by `cargo test` as it is): writes into a
/// scratch directory; with `RUNWIRE_SCRATCH_FAIL` set the test then fails.
#[test]
fn a_test_writes_into_its_scratch() {
    let dir = support::scratch("kept");
    std::fs::write(dir.join("what.txt"), "for a look").unwrap();
    assert!(std::env::var_os("RUNWIRE_SCRATCH_FAIL").is_none(), "failing on purpose");
}

#[test]
fn scratch_is_gone_after_a_pass_and_kept_and_named_after_a_failure() {
    let run = |fail: bool| {
        let tmp = std::env::temp_dir().join(format!("rw-harness-tmp-{}-{fail}", std::process::id()));
        let _ = std::fs::remove_dir_all(&tmp);
        std::fs::create_dir_all(&tmp).unwrap();
        let mut cmd = Command::new(std::env::current_exe().unwrap());
        cmd.args(["--exact", "harness::a_test_writes_into_its_scratch", "--test-threads=1"]).env("TMPDIR", &tmp);
        if fail {
            cmd.env("RUNWIRE_SCRATCH_FAIL", "1");
        }
        let out = cmd.output().unwrap();
        let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        let left: Vec<PathBuf> = walk(&tmp);
        let _ = std::fs::remove_dir_all(&tmp);
        (out.status.success(), text, left, tmp)
    };
    fn walk(d: &std::path::Path) -> Vec<PathBuf> {
        let mut out = Vec::new();
        for e in std::fs::read_dir(d).into_iter().flatten().flatten() {
            out.push(e.path());
            if e.path().is_dir() {
                out.extend(walk(&e.path()));
            }
        }
        out
    }
    let (ok, text, left, _) = run(false);
    assert!(ok && text.contains("1 passed"), "{text}");
    assert!(left.is_empty(), "a passing test left {left:?} in its temp dir:\n{text}");
    let (ok, text, left, tmp) = run(true);
    assert!(!ok && text.contains("failing on purpose"), "{text}");
    let kept =
        left.iter().find(|p| p.ends_with("what.txt")).unwrap_or_else(|| panic!("kept nothing: {left:?}\n{text}"));
    let dir = kept.parent().unwrap();
    assert!(dir.starts_with(tmp.join("rw")), "{}", dir.display());
    assert!(
        text.contains(&format!(
            "kept for a look, as harness::a_test_writes_into_its_scratch failed: {}",
            dir.display()
        )),
        "a failing test did not say where it kept what:\n{text}"
    );
}
