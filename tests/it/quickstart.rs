//! The README's quick start, followed as a newcomer follows it: its blocks
//! (marked `<!-- quickstart:NAME -->` in README.md, read at test time, never
//! copied here) run verbatim by bash in a fresh clone of this checkout's
//! HEAD, with a throwaway `HOME` (so `HARNESS_HOME` is its default,
//! `~/.harness`) and no build directory on `PATH`.
//!
//! Both ways in are followed, each in a clone and home of its own: the
//! installed binaries (the `install` block, then `~/.cargo/bin` on `PATH`
//! as it says), and the binaries used in place (the `in-place` block, run in
//! each terminal as it says, which puts the clone's `target/release` on
//! `PATH`; the test puts no build directory there).
//!
//! Two things differ from a person's machine, both on purpose and said here:
//! - `cargo` is a stand-in that checks it is called as the README calls it
//!   (`install --locked --path .` or `build --release`), from the clone, and
//!   puts this test run's binaries where the real one would (`~/.cargo/bin`,
//!   `target/release`; hard links, else copies): a release build of every
//!   binary with fat LTO would cost CI minutes for the same programs. The
//!   rest of each block (the man pages, the `PATH`) runs as written.
//! - the blocks run in a network namespace of their own (root, as in CI), so
//!   the README's fixed ports 8787 and 8788 are free whatever else this
//!   machine runs, and no port has to be rewritten.
//!
//! A block that "keeps running" (the server) runs in the background, as in a
//! terminal of its own, and is stopped as the README says, with Ctrl-C
//! (SIGINT to its process group); the next block runs meanwhile, as in
//! another terminal.

use crate::support;

use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// Every binary of the crate, as this test run built them: what `cargo
/// install` installs (checked against `src/bin/` below).
const BINARIES: &[(&str, &str)] = &[
    ("agui-check", env!("CARGO_BIN_EXE_agui-check")),
    ("agui-translate", env!("CARGO_BIN_EXE_agui-translate")),
    ("liveness", env!("CARGO_BIN_EXE_liveness")),
    ("normalize-events", env!("CARGO_BIN_EXE_normalize-events")),
    ("runs", env!("CARGO_BIN_EXE_runs")),
    ("runwire-reaper", env!("CARGO_BIN_EXE_runwire-reaper")),
    ("runwire-serve", env!("CARGO_BIN_EXE_runwire-serve")),
    ("runwire-session", env!("CARGO_BIN_EXE_runwire-session")),
    ("runwire-supervise", env!("CARGO_BIN_EXE_runwire-supervise")),
    ("sse-encode", env!("CARGO_BIN_EXE_sse-encode")),
    ("verdict-check", env!("CARGO_BIN_EXE_verdict-check")),
];

/// The README's ```sh block after `<!-- quickstart:NAME` (the marker may go
/// on with words for the reader), as it stands.
fn block(readme: &str, name: &str) -> String {
    let marker = format!("<!-- quickstart:{name}");
    let at = readme.find(&marker).unwrap_or_else(|| panic!("README.md has no {marker} marker"));
    let rest = &readme[at..];
    let after = rest.find("-->").expect("the marker's comment ends") + 3;
    let rest = rest[after..].trim_start_matches(['\n', ' ']);
    assert!(rest.starts_with("```sh\n"), "{marker}: a ```sh block must follow the marker at once:\n{rest:.200}");
    let body = &rest[6..];
    body[..body.find("\n```").expect("the block ends") + 1].to_string()
}

/// Moves this test's thread into a network namespace of its own with only
/// `lo` (up): every process it starts from now on sees only that.
fn own_network() {
    // SAFETY: unshare(2) with CLONE_NEWNET changes this thread's network namespace only.
    let rc = unsafe { nix::libc::unshare(nix::libc::CLONE_NEWNET) };
    assert_eq!(rc, 0, "unshare(CLONE_NEWNET): {}", std::io::Error::last_os_error());
    let st = Command::new("ip").args(["link", "set", "lo", "up"]).status().expect("run ip (iproute2)");
    assert!(st.success(), "ip link set lo up: {st}");
}

/// `first`, then the `PATH` of the tests without the directories that hold
/// this crate's programs (a build directory, an earlier install). A real
/// `cargo` may stay: the stand-in in `first` comes before it.
fn path_with(first: &Path) -> String {
    let kept =
        support::tools::path_dirs().into_iter().filter(|d| BINARIES.iter().all(|(name, _)| !d.join(name).exists()));
    std::env::join_paths(std::iter::once(first.to_path_buf()).chain(kept)).unwrap().to_string_lossy().into_owned()
}

/// The world a newcomer has: a fresh clone, a home of their own, no
/// runwire settings in the environment.
struct Newcomer {
    dir: PathBuf,
    clone: PathBuf,
    home: PathBuf,
}

impl Newcomer {
    fn new(name: &str) -> Newcomer {
        let dir = support::scratch(name);
        let (clone, home) = (dir.join("runwire"), dir.join("home"));
        std::fs::create_dir_all(&home).unwrap();
        let out = Command::new("git")
            .args(["clone", "--quiet", "--depth", "1"])
            .arg(format!("file://{ROOT}"))
            .arg(&clone)
            .output()
            .expect("run git");
        assert!(out.status.success(), "git clone of {ROOT}: {}", String::from_utf8_lossy(&out.stderr));
        Newcomer { dir, clone, home }
    }

    /// bash running `script` in the clone, with `path`; HOME the throwaway
    /// one, nothing of runwire's or cargo's in the environment.
    fn bash(&self, script: &str, path: &str) -> Command {
        let mut cmd = Command::new("bash");
        cmd.arg("-c").arg(script).current_dir(&self.clone).env("HOME", &self.home).env("PATH", path);
        for (k, _) in std::env::vars_os() {
            let k = k.to_string_lossy();
            if k.starts_with("RUNWIRE_") || k.starts_with("HARNESS_") || k.starts_with("CARGO") || k == "XDG_CACHE_HOME"
            {
                cmd.env_remove(&*k);
            }
        }
        cmd.stdin(Stdio::null());
        cmd
    }

    /// Runs `script` to its end: its stdout; panics with both outputs when it fails.
    fn run(&self, name: &str, script: &str, path: &str) -> String {
        let out = self.bash(script, path).output().expect("run bash");
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            out.status.success(),
            "the README's {name} block failed ({}):\n{script}\nstdout:\n{stdout}\nstderr:\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        stdout
    }

    /// `cargo` for the install blocks: checks it is called as the README
    /// calls it, from the clone, and puts this run's binaries where `cargo
    /// install` (`~/.cargo/bin`) or `cargo build --release --workspace` (`target/release`)
    /// would.
    fn cargo_stand_in(&self) -> PathBuf {
        let dir = self.dir.join("stand-in");
        std::fs::create_dir_all(&dir).unwrap();
        let mut script = String::from(
            "#!/bin/sh\n# tests/it/quickstart.rs: cargo as the README calls it, with this test run's binaries.\n\
             set -eu\n\
             case \"$*\" in\n\
             'install --locked --path .') to=\"$HOME/.cargo/bin\" ;;\n\
             'build --release --workspace') to=target/release ;;\n\
             *) echo \"cargo stand-in: not the README's call: $*\" >&2; exit 2 ;;\n\
             esac\n\
             grep -q '^name = \"runwire\"' Cargo.toml || { echo 'cargo stand-in: not in the clone' >&2; exit 2; }\n\
             mkdir -p \"$to\"\n",
        );
        for (name, exe) in BINARIES {
            script += &format!("ln -f '{exe}' \"$to/{name}\" 2>/dev/null || cp '{exe}' \"$to/{name}\"\n");
        }
        let cargo = dir.join("cargo");
        std::fs::write(&cargo, script).unwrap();
        std::fs::set_permissions(&cargo, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
        dir
    }
}

impl Drop for Newcomer {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("quickstart: the clone and home are kept in {}", self.dir.display());
        } else {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// A block that keeps running, as in a terminal of its own: its process
/// group is killed if the test ends before it does.
struct Terminal(std::process::Child);

impl Drop for Terminal {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            let _ = nix::sys::signal::killpg(
                nix::unistd::Pid::from_raw(self.0.id() as i32),
                nix::sys::signal::Signal::SIGKILL,
            );
            let _ = self.0.wait();
        }
    }
}

/// The `RUN_FINISHED` lines of an SSE body.
fn finished(body: &str) -> Vec<&str> {
    body.lines().filter(|l| l.contains(r#""type":"RUN_FINISHED""#)).collect()
}

/// `runs list --all`'s JSON lines (it prints JSON when piped): the status of run `slug`.
fn status_of(listing: &str, slug: &str) -> Option<String> {
    listing
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|r| r["slug"] == slug)
        .and_then(|r| r["status"].as_str().map(str::to_string))
}

/// The quick start after the install: the server in one terminal, the
/// replay in another, Ctrl-C, then the demo block. Each block runs after
/// `terminal` (what the README says to run in each terminal; nothing for
/// installed binaries), with `path`.
fn quick_start(me: &Newcomer, readme: &str, terminal: &str, path: &str) {
    let script = |name: &str| format!("{terminal}{}", block(readme, name));
    // The first terminal: the server, which keeps running.
    let mut server = Terminal(
        me.bash(&script("serve"), path)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .spawn()
            .expect("run bash"),
    );
    let server = &mut server.0;
    let quiet = support::Quiet::capture("the README's serve block", server);
    let (tx, rx) = std::sync::mpsc::channel();
    let out = server.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let first = rx.recv_timeout(Duration::from_secs(30)).unwrap_or_default();
    assert_eq!(first, "listening on http://127.0.0.1:8787", "the serve block's first line (stderr: {})", quiet.text());

    // Another terminal: the replay, and the run it recorded.
    let out = me.run("replay", &script("replay"), path);
    let ends = finished(&out);
    assert_eq!(ends.len(), 1, "one run, ending once:\n{out}");
    assert!(ends[0].contains(r#""runId":"replay-1""#) && out.contains(r#""type":"TOOL_CALL_RESULT""#), "{out}");
    assert_eq!(status_of(&out, "agui-replay-1").as_deref(), Some("done"), "runs list --all:\n{out}");

    // Ctrl-C in the server's terminal: a clean shutdown.
    nix::sys::signal::killpg(nix::unistd::Pid::from_raw(server.id() as i32), nix::sys::signal::Signal::SIGINT).unwrap();
    let t = Instant::now();
    let status = loop {
        if let Some(st) = server.try_wait().unwrap() {
            break st;
        }
        if t.elapsed() > Duration::from_secs(20) {
            let _ = server.kill();
            panic!("the server did not stop on Ctrl-C; stderr:\n{}", quiet.text());
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(status.success(), "Ctrl-C: {status}; stderr:\n{}", quiet.text());

    // The demo block, in one terminal: a server in the background, an
    // approval, a question answered, and the server stopped.
    let out = me.run("demo", &script("demo"), path);
    let ends = finished(&out);
    assert_eq!(ends.len(), 3, "three runs, each ends once:\n{out}");
    assert!(ends[0].contains(r#""id":"rw-"#) && ends[0].contains("Allow Bash?"), "{}", ends[0]);
    assert!(out.contains(r#""type":"TOOL_CALL_RESULT""#) && out.contains("(demo: nothing ran)"), "{out}");
    assert!(
        ends[1].contains(r#""type":"interrupt""#) && ends[1].contains("Which should the demo do next?"),
        "{}",
        ends[1]
    );
    assert!(ends[2].contains(r#""runId":"try-3""#) && !ends[2].contains("interrupt"), "the turn is over: {}", ends[2]);
    assert!(
        out.contains(r#""answers":{"Which should the demo do next?":"Say goodbye"}"#),
        "the answer is recorded:\n{out}"
    );
    // Distinct ids: the first server's run is still there, and both ended cleanly.
    assert_eq!(status_of(&out, "agui-try-1").as_deref(), Some("done"), "runs list --all:\n{out}");
    assert_eq!(status_of(&out, "agui-replay-1").as_deref(), Some("done"), "runs list --all:\n{out}");
    assert!(me.home.join(".harness/runs").is_dir(), "the runs are under the default HARNESS_HOME, ~/.harness");
}

/// The binaries of src/bin/, all in [`BINARIES`] (what `cargo install` installs).
fn every_binary_is_installed() {
    let mut bins: Vec<String> = std::fs::read_dir(Path::new(ROOT).join("src/bin"))
        .unwrap()
        .filter_map(|e| e.ok()?.path().file_stem().map(|s| s.to_string_lossy().into_owned()))
        .collect();
    bins.sort();
    assert_eq!(bins, BINARIES.iter().map(|(n, _)| n.to_string()).collect::<Vec<_>>(), "BINARIES lags src/bin/");
}

/// Installed: the install block as written, then `~/.cargo/bin` on `PATH`.
#[test]
#[cfg_attr(not(tool = "bash"), ignore = "needs bash: apt-get install bash")]
#[cfg_attr(not(tool = "curl"), ignore = "needs curl (the README's commands use it): apt-get install curl")]
#[cfg_attr(not(tool = "git"), ignore = "needs git (a fresh clone): apt-get install git")]
#[cfg_attr(not(tool = "iproute2"), ignore = "needs ip: apt-get install iproute2")]
#[cfg_attr(not(tool = "root"), ignore = "needs root (a network namespace, so the README's ports are free)")]
fn the_readme_quick_start_works_as_written_with_the_binaries_installed() {
    support::need(&["bash", "curl", "git", "iproute2", "root"]);
    every_binary_is_installed();
    let readme = std::fs::read_to_string(Path::new(ROOT).join("README.md")).unwrap();
    let me = Newcomer::new("installed");
    own_network();
    me.run("install", &block(&readme, "install"), &path_with(&me.cargo_stand_in()));
    let bin = me.home.join(".cargo/bin");
    for (name, _) in BINARIES {
        assert!(bin.join(name).is_file(), "~/.cargo/bin/{name} was not installed");
    }
    assert!(me.home.join(".cargo/share/man/man7/runwire.7").is_file(), "the man pages were not installed");
    // "put it on PATH": from here on, ~/.cargo/bin and the system's tools only.
    quick_start(&me, &readme, "", &path_with(&bin));
}

/// In place: the in-place block in each terminal, as the README says; the
/// system's tools (and the `cargo` stand-in) on `PATH`, no build directory.
#[test]
#[cfg_attr(not(tool = "bash"), ignore = "needs bash: apt-get install bash")]
#[cfg_attr(not(tool = "curl"), ignore = "needs curl (the README's commands use it): apt-get install curl")]
#[cfg_attr(not(tool = "git"), ignore = "needs git (a fresh clone): apt-get install git")]
#[cfg_attr(not(tool = "iproute2"), ignore = "needs ip: apt-get install iproute2")]
#[cfg_attr(not(tool = "root"), ignore = "needs root (a network namespace, so the README's ports are free)")]
fn the_readme_quick_start_works_as_written_with_the_binaries_in_place() {
    support::need(&["bash", "curl", "git", "iproute2", "root"]);
    let readme = std::fs::read_to_string(Path::new(ROOT).join("README.md")).unwrap();
    let me = Newcomer::new("in-place");
    own_network();
    let path = path_with(&me.cargo_stand_in());
    quick_start(&me, &readme, &block(&readme, "in-place"), &path);
    assert!(me.clone.join("target/release/runwire-serve").is_file(), "the in-place block built into target/release");
}
