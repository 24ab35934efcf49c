//! The project's one skip rule, for tests that need a tool from outside the
//! crate (node, Chromium, jq, npm packages, the real agents, nats-server, a
//! Python package).
//!
//! libtest cannot mark a test ignored once it runs, so the decision is made
//! when the tests are built: `build.rs` compiles this file too (`#[path]`),
//! probes each tool of [`TOOLS`] and sets `cfg(tool = "NAME")` for those that
//! are here. A test that needs one says so twice, mechanically:
//!
//! ```ignore
//! #[test]
//! #[cfg_attr(not(tool = "node"), ignore = "needs node: apt-get install nodejs npm")]
//! fn runs_in_node() {
//!     support::need(&["node"]);
//!     ...
//! }
//! ```
//!
//! - Outside CI a missing tool leaves the cfg unset, and `cargo test` reports
//!   `runs_in_node ... ignored, needs node: ...` (never `ok`); `cargo test --
//!   --ignored` runs such tests anyway, and they fail saying what is missing.
//! - Under CI (`CI` set, and not `false` or `0`) every cfg is set, so no test
//!   is ignored: [`need`](super::need) fails it loudly with what is missing
//!   and how to install it. `.ci/run` installs what the guarded tests need.
//! - The probe re-runs when `PATH`, `CI` or `STUDIO_CHROMIUM` change, when a
//!   tool it found changes or goes away, and, while a tool is missing, when a
//!   directory on `PATH` changes (a tool was installed). A re-run rebuilds
//!   the crate's targets, as any change of a build script's output does.
//! - A test that uses a helper needing a tool carries the guard too;
//!   `tests/it/harness.rs` checks every test file for it (following the file's
//!   helpers, and counting the replaying stub as needing jq).
//!
//! No other skip exists: a test never returns early, prints "SKIPPED" and
//! passes. A new tool is a new entry of [`TOOLS`] (and of the list in
//! `tests/it/harness.rs`). Std only: the build script compiles this file.
#![allow(dead_code)] // the build script and each test crate use part of it

use std::path::{Path, PathBuf};

/// A tool some tests need.
pub struct Tool {
    /// The cfg value: `cfg(tool = "NAME")`.
    pub name: &'static str,
    /// The programs it needs on `PATH` (Chromium is found its own way).
    pub programs: &'static [&'static str],
    /// npm packages a test installs with `npm ci` when missing:
    /// (directory under the crate, a file that is there once installed).
    pub packages: Option<(&'static str, &'static str)>,
    /// How to get it.
    pub install: &'static str,
}

pub const TOOLS: &[Tool] = &[
    Tool { name: "bash", programs: &["bash"], packages: None, install: "apt-get install bash" },
    Tool { name: "jq", programs: &["jq"], packages: None, install: "apt-get install jq" },
    Tool { name: "curl", programs: &["curl"], packages: None, install: "apt-get install curl" },
    Tool { name: "root", programs: &[], packages: None, install: "run the tests as root (CI does)" },
    Tool { name: "node", programs: &["node"], packages: None, install: "apt-get install nodejs npm" },
    Tool {
        name: "agui-client",
        programs: &["node", "npm"],
        packages: Some(("conformance", "node_modules/@ag-ui/client/package.json")),
        install: "apt-get install nodejs npm (the test runs `npm ci` in conformance/)",
    },
    Tool {
        name: "playwright",
        programs: &["node", "npm"],
        packages: Some(("studio", "node_modules/playwright-core/package.json")),
        install: "apt-get install nodejs npm (the test runs `npm ci` in studio/)",
    },
    Tool {
        name: "chromium",
        programs: &[],
        packages: None,
        install: "apt-get install chromium, or STUDIO_CHROMIUM=/path/to/chromium",
    },
    Tool {
        name: "real-agents",
        programs: &["node", "python3", "ip", "git", "unshare"],
        packages: None,
        install: "cd realagents && npm ci (the pinned Claude Code, Codex, claude-agent-acp and codex-acp, about 1.1 GB); the tests run as root (network namespaces)",
    },
    Tool { name: "nats-server", programs: &["nats-server"], packages: None, install: "apt-get install nats-server" },
    Tool {
        name: "standardwebhooks",
        programs: &["python3"],
        packages: None,
        install: "pip install standardwebhooks==1.3.0 (the Standard Webhooks reference library; then `touch build.rs`: the probe does not watch Python's packages)",
    },
    Tool { name: "git", programs: &["git"], packages: None, install: "apt-get install git" },
    Tool { name: "iproute2", programs: &["ip"], packages: None, install: "apt-get install iproute2" },
    Tool { name: "python3", programs: &["python3"], packages: None, install: "apt-get install python3" },
    Tool { name: "caddy", programs: &["caddy"], packages: None, install: "apt-get install caddy" },
    Tool { name: "certutil", programs: &["certutil"], packages: None, install: "apt-get install libnss3-tools" },
    Tool { name: "openssl", programs: &["openssl"], packages: None, install: "apt-get install openssl" },
];

/// The pinned agents' binaries under realagents/node_modules/.bin.
pub const REAL_AGENTS: &[&str] = &["claude", "codex", "claude-agent-acp", "codex-acp"];

/// The environment the probe reads: a change re-runs it.
pub const ENV: &[&str] = &["PATH", "CI", "STUDIO_CHROMIUM"];

pub fn tool(name: &str) -> &'static Tool {
    TOOLS.iter().find(|t| t.name == name).unwrap_or_else(|| panic!("no tool {name:?} in tests/support/tools.rs"))
}

/// Whether this is CI, where a missing tool fails instead of skipping.
pub fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "false" && v != "0")
}

/// Whether `dir` holds no directory but links back to itself or above
/// (Debian's `/usr/bin/X11 -> .`), loops that cargo's walk skips: a
/// directory of programs a build script can watch whole.
pub fn flat(dir: &Path) -> bool {
    let Ok(here) = dir.canonicalize() else { return false };
    std::fs::read_dir(dir).is_ok_and(|rd| {
        rd.flatten().all(|e| match e.file_type() {
            Ok(t) if t.is_dir() => false,
            Ok(t) if t.is_symlink() && e.path().is_dir() => {
                e.path().canonicalize().is_ok_and(|target| here.starts_with(target))
            }
            Ok(_) => true,
            Err(_) => false,
        })
    })
}

/// The absolute directories of `PATH`.
pub fn path_dirs() -> Vec<PathBuf> {
    std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).filter(|d| d.is_absolute()).collect())
        .unwrap_or_default()
}

/// `program` as a shell would find it on `PATH`: an executable file.
pub fn on_path(program: &str) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    path_dirs()
        .into_iter()
        .map(|d| d.join(program))
        .find(|p| std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0))
}

/// The Chromium the studio's browser tests drive: `$STUDIO_CHROMIUM` when
/// set (and nothing else then), else `chromium` or `chromium-browser` on `PATH`.
pub fn chromium() -> Option<PathBuf> {
    match std::env::var_os("STUDIO_CHROMIUM") {
        Some(p) => Some(PathBuf::from(p)).filter(|p| p.is_file()),
        None => on_path("chromium").or_else(|| on_path("chromium-browser")),
    }
}

/// The files the tool was found as (watched by the probe).
pub fn found(t: &Tool) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = t.programs.iter().filter_map(|p| on_path(p)).collect();
    if t.name == "real-agents" {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("realagents/node_modules/.bin");
        out.extend(REAL_AGENTS.iter().map(|b| root.join(b)).filter(|p| p.exists()));
    }
    if t.name == "chromium" {
        out.extend(chromium());
    }
    out
}

/// What is missing of `t` here, or `None` when a test can run with it. npm
/// packages count as there when installed, or when npm is there to install
/// them; without npm, installed packages are enough.
pub fn missing(root: &Path, t: &Tool) -> Option<String> {
    if t.name == "root" {
        // Effective uid 0, from /proc (this file is also the build script's: no crates here).
        let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
        let euid = status.lines().find_map(|l| l.strip_prefix("Uid:")).and_then(|u| u.split_whitespace().nth(1));
        return (euid != Some("0")).then(|| "the tests are not run as root".to_string());
    }
    if t.name == "real-agents" {
        // Installed on purpose, never by a test (1.1 GB): the four binaries must be there.
        let bin = root.join("realagents/node_modules/.bin");
        let absent: Vec<&str> = REAL_AGENTS.iter().copied().filter(|b| !bin.join(b).exists()).collect();
        if !absent.is_empty() {
            return Some(format!("realagents/node_modules/.bin lacks {}", absent.join(", ")));
        }
    }
    if t.name == "standardwebhooks" {
        // A Python package: there when python3 imports it (std only: this is also the build script's).
        let imports = std::process::Command::new("python3")
            .args(["-c", "import standardwebhooks.webhooks"])
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if !imports {
            return Some(match on_path("python3") {
                None => "python3 is not on PATH".into(),
                Some(_) => "python3 cannot import standardwebhooks".into(),
            });
        }
    }
    if t.name == "chromium" {
        return match std::env::var_os("STUDIO_CHROMIUM") {
            Some(p) if !Path::new(&p).is_file() => {
                Some(format!("no Chromium at STUDIO_CHROMIUM={}", p.to_string_lossy()))
            }
            Some(_) => None,
            None if chromium().is_none() => Some("neither chromium nor chromium-browser is on PATH".into()),
            None => None,
        };
    }
    let installed = t.packages.is_some_and(|(dir, marker)| root.join(dir).join(marker).is_file());
    let absent: Vec<&str> =
        t.programs.iter().copied().filter(|p| on_path(p).is_none() && !(*p == "npm" && installed)).collect();
    match absent.as_slice() {
        [] => None,
        [one] => Some(format!("{one} is not on PATH")),
        more => Some(format!("{} are not on PATH", more.join(" and "))),
    }
}
