//! Helpers shared by integration tests: example binaries, the official
//! AG-UI client, the servers ([`Server`]) and supervisors they start, and the one rule
//! for tests that need a tool from outside the crate ([`need`], `tools.rs`).
#![allow(dead_code)] // each test crate uses part of it

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::Command;
use std::sync::Mutex;

pub mod server;
pub mod sse;
pub mod tools;
pub mod verify;

pub use server::Server;

/// [`Server`]'s old name, for a test file written before the one binary
/// (`tests/it/`); the same fixture.
pub type Serve = Server;

/// The example `name`, built for this test run. `cargo test --all-targets`
/// (the README's test command, and CI's) builds examples only as test
/// harnesses, never as the programs themselves, so the test builds it with
/// the cargo that is running the tests, into the same target directory (it
/// waits for that build lock like any cargo; once per test process).
pub fn example(name: &'static str) -> PathBuf {
    static BUILT: Mutex<Option<HashMap<&'static str, Result<PathBuf, String>>>> = Mutex::new(None);
    let mut built = BUILT.lock().unwrap_or_else(|e| e.into_inner());
    let built = built.get_or_insert_with(HashMap::new).entry(name).or_insert_with(|| {
        let exe = std::env::current_exe().map_err(|e| e.to_string())?;
        // target/<profile>/deps/<test>: the profile dir and the target dir above it.
        let profile_dir = exe.parent().and_then(|d| d.parent()).ok_or("no profile dir")?.to_path_buf();
        let target_dir = profile_dir.parent().ok_or("no target dir")?;
        let mut cmd = Command::new(env!("CARGO"));
        cmd.args(["build", "--quiet", "--example", name, "--manifest-path"])
            .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml"))
            .arg("--target-dir")
            .arg(target_dir);
        if profile_dir.file_name().is_some_and(|p| p == "release") {
            cmd.arg("--release");
        }
        let out = cmd.output().map_err(|e| format!("cannot run cargo: {e}"))?;
        if !out.status.success() {
            return Err(format!("cargo build --example {name} failed: {}", String::from_utf8_lossy(&out.stderr)));
        }
        Ok(profile_dir.join("examples").join(name))
    });
    match built {
        Ok(p) => p.clone(),
        Err(e) => panic!("{e}"),
    }
}

/// Fails the test, saying what is missing and how to install it, unless
/// every tool in `names` ([`tools::TOOLS`]) is here; installs the npm
/// packages a tool names (`npm ci`, once per test process) when they are
/// missing. The test carries the matching
/// `#[cfg_attr(not(tool = "NAME"), ignore = "...")]`, so outside CI it only
/// runs where the build found the tool: this is the one skip rule (see
/// `tools.rs`), and a test never returns early instead.
pub fn need(names: &[&str]) {
    static INSTALLED: Mutex<Vec<&'static str>> = Mutex::new(Vec::new());
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let missing: Vec<String> = names
        .iter()
        .map(|n| tools::tool(n))
        .filter_map(|t| Some(format!("needs {}: {}; install: {}", t.name, tools::missing(root, t)?, t.install)))
        .collect();
    if !missing.is_empty() {
        let found_at_build = env!("RUNWIRE_TOOLS_FOUND").split(',').collect::<Vec<_>>();
        let why = if tools::in_ci() {
            "CI is set, so a missing tool fails the test instead of skipping it"
        } else if names.iter().all(|n| found_at_build.contains(n)) {
            "the build found it, it has gone since: rebuild, and the test is ignored"
        } else {
            "the test is ignored without it, unless run with --ignored"
        };
        panic!("{}\n({why})", missing.join("\n"));
    }
    for name in names {
        let t = tools::tool(name);
        let Some((dir, marker)) = t.packages else { continue };
        let mut done = INSTALLED.lock().unwrap_or_else(|e| e.into_inner());
        if done.contains(&dir) || root.join(dir).join(marker).is_file() {
            continue;
        }
        eprintln!("installing the pinned npm packages of {dir}/ (npm ci)");
        let out = Command::new("npm")
            .args(["ci", "--no-audit", "--no-fund", "--loglevel=error"])
            .current_dir(root.join(dir))
            .output()
            .unwrap_or_else(|e| panic!("needs {name}: cannot run npm: {e}"));
        assert!(
            out.status.success(),
            "needs {name}: `npm ci` in {dir}/ failed (offline? run it once online):\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        done.push(dir);
    }
}

/// A `runwire-supervise` running plan `p` in `dir` (task `a`'s log and the
/// journal under `dir/runstate`, its stderr in `dir/stderr`), in a process
/// group of its own that is killed when this is dropped; `dir` is removed
/// then unless the test failed (kept for a look).
pub struct Supervised {
    pub dir: PathBuf,
    pub child: Option<std::process::Child>,
}

impl Supervised {
    /// Starts `cmd` (runwire-supervise with its arguments and environment).
    pub fn spawn(dir: PathBuf, mut cmd: Command) -> Supervised {
        use std::os::unix::process::CommandExt;
        let child = cmd
            .current_dir(&dir)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::fs::File::create(dir.join("stderr")).unwrap())
            .process_group(0)
            .spawn()
            .expect("start runwire-supervise");
        Supervised { dir, child: Some(child) }
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("runstate/p.a.log")).unwrap_or_default()
    }

    /// The journal's records (a torn line skipped).
    pub fn journal(&self) -> Vec<serde_json::Value> {
        std::fs::read_to_string(self.dir.join("runstate/p.jsonl"))
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }

    /// The task states in the journal, in order.
    pub fn states(&self) -> Vec<String> {
        self.journal().iter().filter_map(|r| r["state"].as_str().map(str::to_string)).collect()
    }

    pub fn stderr(&self) -> String {
        std::fs::read_to_string(self.dir.join("stderr")).unwrap_or_default()
    }

    /// One request on the supervisor's control socket, and its reply.
    pub fn call(&self, req: serde_json::Value, limit: std::time::Duration) -> serde_json::Value {
        use std::io::{BufRead, Write};
        let live = std::fs::read_to_string(self.dir.join("runstate/p.live.json")).unwrap();
        let live: serde_json::Value = serde_json::from_str(&live).unwrap();
        let mut s = std::os::unix::net::UnixStream::connect(live["sock"].as_str().unwrap()).expect("control socket");
        s.set_read_timeout(Some(limit)).unwrap();
        writeln!(s, "{req}").unwrap();
        let mut line = String::new();
        std::io::BufReader::new(s).read_line(&mut line).unwrap();
        serde_json::from_str(&line).unwrap()
    }

    /// Waits up to `limit` for the supervisor's exit code; `why` says what
    /// to show when it does not come.
    pub fn wait(&mut self, limit: std::time::Duration, why: impl Fn(&Supervised) -> String) -> i32 {
        let t = std::time::Instant::now();
        let code = loop {
            if let Some(s) = self.child.as_mut().unwrap().try_wait().unwrap() {
                break s.code().unwrap_or(-1);
            }
            assert!(t.elapsed() < limit, "the supervisor did not finish; {}", why(self));
            std::thread::sleep(std::time::Duration::from_millis(50));
        };
        self.child = None;
        code
    }
}

impl Drop for Supervised {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            // SAFETY: kill(2) on the process group this test started.
            unsafe { nix::libc::kill(-(c.id() as i32), nix::libc::SIGKILL) };
            let _ = c.wait();
        }
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// The replaying stand-in's next exchange that waits for the person
/// (`examples/replay-agent --state`): polls `state` until the stand-in waits
/// at an index not in `handled` (that index and the whole state) or has
/// replayed everything (`None`). Panics when it found a wrong line, or at
/// `deadline` with `why()`.
pub fn next_exchange(
    state: impl Fn() -> serde_json::Value,
    handled: &[u64],
    deadline: std::time::Instant,
    why: impl Fn() -> String,
) -> Option<(u64, serde_json::Value)> {
    loop {
        assert!(std::time::Instant::now() < deadline, "no progress: {}", why());
        let st = state();
        match (st["state"].as_str(), st["index"].as_u64()) {
            (Some("done"), _) => return None,
            (Some("fail"), _) => panic!("the replay failed: {st}\n{}", why()),
            (Some("wait"), Some(i)) if !handled.contains(&i) => return Some((i, st)),
            _ => std::thread::sleep(std::time::Duration::from_millis(20)),
        }
    }
}

/// Waits up to `limit` for `child` to exit on its own (it is killed, and
/// the test fails naming `what`, when it does not): its status and its
/// piped stderr.
pub fn exit_within(
    child: &mut std::process::Child,
    limit: std::time::Duration,
    what: &str,
) -> (std::process::ExitStatus, String) {
    let end = std::time::Instant::now() + limit;
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if std::time::Instant::now() > end {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{what}: still running after {limit:?}");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    let mut err = String::new();
    if let Some(mut e) = child.stderr.take() {
        std::io::Read::read_to_string(&mut e, &mut err).unwrap();
    }
    (status, err)
}

/// A fresh, empty scratch directory `<temp>/rw/<pid>-<module>-<name>` for this test
/// process. It is removed when the test process ends, unless the test that
/// made it failed (then the process says on stderr where it kept what, for a
/// look); see [`keep_on_failure`]. The first call of a process also removes
/// what processes that are gone left over an hour ago (a run that was
/// killed). Short, because unix socket paths under it are limited to 108
/// bytes. All the test modules share one process, so the name is the calling
/// module's (`<pid>-<module>-<name>`, the module being the caller's file).
#[track_caller]
pub fn scratch(name: &str) -> PathBuf {
    static SWEPT: std::sync::Once = std::sync::Once::new();
    let module = std::path::Path::new(std::panic::Location::caller().file())
        .file_stem()
        .map(|m| m.to_string_lossy().into_owned())
        .unwrap_or_default();
    let root = std::env::temp_dir().join("rw");
    SWEPT.call_once(|| {
        for e in std::fs::read_dir(&root).into_iter().flatten().flatten() {
            let file = e.file_name();
            let pid = file.to_str().and_then(|n| n.split('-').next()).and_then(|p| p.parse::<u32>().ok());
            let gone =
                pid.is_some_and(|p| p != std::process::id() && !std::path::Path::new(&format!("/proc/{p}")).exists());
            let age = e.metadata().ok().and_then(|m| m.modified().ok()).and_then(|t| t.elapsed().ok());
            if gone && age.is_some_and(|a| a > std::time::Duration::from_secs(3600)) {
                let _ = std::fs::remove_dir_all(e.path());
            }
        }
    });
    let dir = root.join(format!("{}-{module}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    keep_on_failure(&dir);
    dir
}

/// What the test process made to remove at its end, and which tests failed.
struct Leftovers {
    /// A path and the test (its thread's name) that made it.
    paths: Vec<(PathBuf, Option<String>)>,
    /// The threads that panicked: a test that failed, or a thread of one.
    failed: Vec<Option<String>>,
}

static LEFTOVERS: Mutex<Leftovers> = Mutex::new(Leftovers { paths: Vec::new(), failed: Vec::new() });

/// Removes `path` (a directory or a file the test made under the temp dir)
/// when the test process ends, unless the test that called this failed:
/// then it is kept and named on stderr. A test is its thread (libtest runs
/// each test on a thread named after it); a panic on a thread of no test
/// keeps the paths made on threads of no test. Needs no guard in the test,
/// so an early `?` or `unwrap` cannot leave anything behind.
pub fn keep_on_failure(path: &std::path::Path) {
    static HOOKED: std::sync::Once = std::sync::Once::new();
    HOOKED.call_once(|| {
        let earlier = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let me = std::thread::current().name().map(str::to_string);
            LEFTOVERS.lock().unwrap_or_else(|e| e.into_inner()).failed.push(me);
            earlier(info);
        }));
        extern "C" fn at_exit() {
            let left = std::mem::replace(
                &mut *LEFTOVERS.lock().unwrap_or_else(|e| e.into_inner()),
                Leftovers { paths: Vec::new(), failed: Vec::new() },
            );
            // A path made again by another test is kept when either failed.
            let mut done: Vec<&PathBuf> = Vec::new();
            for (path, _) in &left.paths {
                if done.contains(&path) {
                    continue;
                }
                done.push(path);
                let makers = left.paths.iter().filter(|(p, _)| p == path).map(|(_, t)| t);
                if let Some(test) = makers.into_iter().find(|t| left.failed.contains(t)) {
                    let who = test.as_deref().unwrap_or("a thread of no test");
                    eprintln!("kept for a look, as {who} failed: {}", path.display());
                } else if path.is_dir() && !path.is_symlink() {
                    let _ = std::fs::remove_dir_all(path);
                } else {
                    let _ = std::fs::remove_file(path);
                }
            }
            // The scratch root too, once nothing is left in it (other test
            // processes may still use it: remove_dir only takes an empty one).
            let _ = std::fs::remove_dir(std::env::temp_dir().join("rw"));
        }
        // SAFETY: atexit(3) with a function that takes nothing; it runs once, as the process exits.
        unsafe { nix::libc::atexit(at_exit) };
    });
    let test = std::thread::current().name().map(str::to_string);
    LEFTOVERS.lock().unwrap_or_else(|e| e.into_inner()).paths.push((path.to_path_buf(), test));
}

/// A recorded interactive cell of codex or cursor
/// (`fixtures/interactive/{codex,acp-cursor}/<name>`); a hand-made cell
/// (`synthetic.*`, fixtures/SOURCES.md) sits beside the agents' directories.
pub fn cell(agent: &str, name: &str) -> PathBuf {
    let all = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures/interactive");
    if name.starts_with("synthetic.") {
        return all.join(name);
    }
    all.join(if agent == "codex" { "codex" } else { "acp-cursor" }).join(name)
}

/// The person's prompt of a recorded client line (`turn/start`,
/// `turn/steer`, `session/prompt`): its last text block (the recording
/// client put its own instructions first).
pub fn prompt_of(line: &serde_json::Value) -> String {
    let p = &line["params"];
    let blocks = p.get("input").or_else(|| p.get("prompt")).and_then(|b| b.as_array()).expect("a prompt");
    blocks.last().unwrap()["text"].as_str().unwrap().to_string()
}

/// The first prompt the recording client of the cell in `dir` sent.
pub fn first_prompt(dir: &std::path::Path) -> String {
    use serde_json::Value;
    std::fs::read_to_string(dir.join("to-agent.ndjson"))
        .unwrap()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter_map(|e| serde_json::from_str::<Value>(e["line"].as_str()?).ok())
        .find(|v| matches!(v["method"].as_str(), Some("turn/start" | "session/prompt")))
        .map(|v| prompt_of(&v))
        .expect("a recorded prompt")
}

/// The official AG-UI client's interrupt checks (`conformance/interrupts.mjs`)
/// against the server on `port`: a run with `prompt`, its interrupt answered
/// with `answer`, then the `extra` checks; every line it prints must say ok,
/// one per check (two, plus one for each of `extra`). `why` gives the
/// server's side of a failure.
pub fn official_interrupts(
    port: u16,
    prompt: &str,
    answer: &str,
    extra: &[&str],
    timeout_ms: u32,
    why: impl Fn() -> String,
) {
    let out = Command::new("node")
        .arg(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("conformance/interrupts.mjs"))
        .arg(format!("http://127.0.0.1:{port}/agui"))
        .args(["--prompt", prompt, "--answer", answer])
        .args(extra)
        .env("LIVE_TIMEOUT_MS", timeout_ms.to_string())
        .output()
        .expect("run node");
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let lines: Vec<serde_json::Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert!(
        out.status.success() && lines.iter().all(|l| l["ok"] == true),
        "interrupts.mjs {answer}:\n{text}\n{}\nserver:\n{}",
        String::from_utf8_lossy(&out.stderr),
        why()
    );
    assert_eq!(lines.len(), 2 + extra.len(), "{text}");
}

/// The user messages the recording client of a Claude Code cell wrote, in
/// order (what the person said; tool results, whose content is not a plain
/// string, are left out).
pub fn user_messages(cell_dir: &std::path::Path) -> Vec<String> {
    use serde_json::Value;
    std::fs::read_to_string(cell_dir.join("to-agent.ndjson"))
        .unwrap()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter_map(|env| serde_json::from_str::<Value>(env["line"].as_str()?).ok())
        .filter(|v| v["type"] == "user")
        .filter_map(|v| v["message"]["content"].as_str().map(str::to_string))
        .collect()
}

/// A child's stderr kept out of the test output: read into memory (its last
/// 64 KiB) and printed only when the test fails, that is when this is
/// dropped while the test panics (libtest then shows it with the failure).
/// The child must have been spawned with `stderr(Stdio::piped())`.
pub struct Quiet {
    name: String,
    buf: std::sync::Arc<Mutex<Vec<u8>>>,
    done: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl Quiet {
    const KEEP: usize = 64 * 1024;

    pub fn capture(name: &str, child: &mut std::process::Child) -> Quiet {
        use std::io::Read;
        use std::sync::atomic::{AtomicBool, Ordering};
        let mut err = child.stderr.take().expect("the child's stderr is piped");
        let buf = std::sync::Arc::new(Mutex::new(Vec::new()));
        let done = std::sync::Arc::new(AtomicBool::new(false));
        let (b, d) = (buf.clone(), done.clone());
        std::thread::spawn(move || {
            let mut chunk = [0u8; 8192];
            while let Ok(n @ 1..) = err.read(&mut chunk) {
                let mut b = b.lock().unwrap_or_else(|e| e.into_inner());
                b.extend_from_slice(&chunk[..n]);
                if b.len() > Self::KEEP {
                    let cut = b.len() - Self::KEEP;
                    b.drain(..cut);
                }
            }
            d.store(true, Ordering::Release);
        });
        Quiet { name: name.to_string(), buf, done }
    }

    /// What the child wrote so far (its last 64 KiB).
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.buf.lock().unwrap_or_else(|e| e.into_inner())).into_owned()
    }
}

impl Drop for Quiet {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            return;
        }
        // The child is usually stopped by now; a grandchild holding the pipe
        // must not hold the failure up.
        let t = std::time::Instant::now();
        while !self.done.load(std::sync::atomic::Ordering::Acquire) && t.elapsed().as_millis() < 500 {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        eprintln!("--- stderr of {} ---\n{}--- end of its stderr ---", self.name, self.text());
    }
}

/// The complete JSON lines of a log another process appends to (a stand-in's
/// record of what it was sent): a last line still being written (no newline
/// yet) is left for the next read, not parsed half-way.
pub fn complete_json_lines(path: &std::path::Path) -> Vec<serde_json::Value> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    text.split_inclusive('\n')
        .filter(|l| l.ends_with('\n'))
        .map(|l| {
            serde_json::from_str(l).unwrap_or_else(|e| panic!("{}: a line that is not JSON ({e}): {l}", path.display()))
        })
        .collect()
}

/// Process `pid` left 1.5 MiB of address space beyond what it has mapped
/// (its soft `RLIMIT_AS`, set by `prlimit`): room for a new thread's signal
/// stack (std maps one for each thread; without it the thread panics and the
/// process aborts) and small maps, none for a new thread's 2 MiB stack. The
/// limit is lifted when this is dropped.
pub struct Squeezed(String);

pub fn squeeze_address_space(pid: u32) -> Squeezed {
    let vm_size = || -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmSize:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .expect("VmSize")
    };
    // Settled: two looks 50 ms apart agree (a thread may still be mapping).
    let mut kb = vm_size();
    for _ in 0..100 {
        std::thread::sleep(std::time::Duration::from_millis(50));
        let now = vm_size();
        if now == kb {
            break;
        }
        kb = now;
    }
    let s = Squeezed(pid.to_string());
    s.limit(&format!("{}:", (kb + 1536) * 1024));
    s
}

impl Squeezed {
    fn limit(&self, soft: &str) {
        let o = std::process::Command::new("prlimit")
            .args(["--pid", &self.0, &format!("--as={soft}")])
            .output()
            .expect("prlimit (util-linux)");
        assert!(o.status.success(), "prlimit: {}", String::from_utf8_lossy(&o.stderr));
    }
}

impl Drop for Squeezed {
    fn drop(&mut self) {
        self.limit("unlimited:");
    }
}

/// The `control_response` lines a Claude stand-in was sent (`log`: its
/// record of its input).
pub fn control_responses(log: &std::path::Path) -> Vec<serde_json::Value> {
    complete_json_lines(log)
        .into_iter()
        .map(|v| v["line"].clone())
        .filter(|l| l["type"] == "control_response")
        .collect()
}

/// The question "Tabs or spaces?" answered "spaces" once through its
/// approval link: one `control_response` (`sent`) carrying it, one
/// `answered` record in `journal` with decision `answer` by door `link`,
/// which is returned.
pub fn answered_spaces_once(sent: &[serde_json::Value], journal: Vec<serde_json::Value>) -> serde_json::Value {
    assert_eq!(sent.len(), 1, "{sent:?}");
    assert!(sent[0].to_string().contains(r#""Tabs or spaces?":"spaces""#), "{sent:?}");
    let answered: Vec<serde_json::Value> = journal.into_iter().filter(|r| r["input"] == "answered").collect();
    assert_eq!(answered.len(), 1, "{answered:?}");
    let a = answered.into_iter().next().unwrap();
    assert_eq!((a["decision"].as_str(), a["door"].as_str()), (Some("answer"), Some("link")), "{a}");
    a
}

/// A plan of one claude task `a`.
pub const ONE_TASK_PLAN: &str = r#"{"v":"plan/v1","tasks":[{"id":"a","adapter":"claude","prompt":"p"}]}"#;

/// A run registered as a runner registers it: `runs register` in another
/// process (so this one holds no mark of it), for `repo_root`, with `plan`
/// written as `<slug>.plan.json` in its runstate directory. Its run id and
/// runstate directory.
pub fn register_run(home: &std::path::Path, slug: &str, repo_root: &std::path::Path, plan: &str) -> (String, PathBuf) {
    let o = Command::new(env!("CARGO_BIN_EXE_runs"))
        .env("HARNESS_HOME", home)
        .args(["register", "--slug", slug, "--repo-root"])
        .arg(repo_root)
        .output()
        .unwrap();
    assert!(o.status.success(), "runs register: {}", String::from_utf8_lossy(&o.stderr));
    let p: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let rs = PathBuf::from(p["runstateDir"].as_str().unwrap());
    std::fs::create_dir_all(&rs).unwrap();
    std::fs::write(rs.join(format!("{slug}.plan.json")), plan).unwrap();
    (p["runId"].as_str().unwrap().to_string(), rs)
}

/// A small tmpfs mounted over `dir` (root only: the full-disk tests),
/// `opts` its mount options (`size=1m,nr_inodes=64`); unmounted when
/// dropped. Lazily (`-l`): a panic leaves files of the filesystem open in
/// the test process until it ends, and a plain umount was then refused as
/// busy, leaving a mount behind on the machine for every such run.
pub struct Tmpfs(pub PathBuf);

impl Tmpfs {
    pub fn mount(dir: &std::path::Path, opts: &str) -> Tmpfs {
        std::fs::create_dir_all(dir).unwrap();
        let st =
            std::process::Command::new("mount").args(["-t", "tmpfs", "-o", opts, "tmpfs"]).arg(dir).status().unwrap();
        assert!(st.success(), "mount a tmpfs over {}", dir.display());
        Tmpfs(dir.to_path_buf())
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount").arg("-l").arg(&self.0).status();
    }
}
