//! Where a grant of claude's reaches: the directories and path rules of its
//! `permission_suggestions` resolved against the file system, and the
//! command rules that run any command.
//!
//! The one place that reads the file system for the suggestion filter
//! ([`super::claude::permission_updates`]), read-only: a grant is judged by
//! where it reaches, not by its text. A name inside the worktree can be a
//! symlink to `/`, and `..` or a rule's own anchor (`~/`, `//`) can climb
//! out; each is followed here the way the kernel (for a directory) or
//! claude (for a rule's anchor, `docs.anthropic.com/…/iam`: `//p` from the
//! file system's root, `~/p` from the home directory, `/p` from the
//! settings file's project, `p` or `./p` from the working directory) would.

use std::ffi::OsString;
use std::path::{Component, Path, PathBuf};

/// Symlinks followed in one path before it counts as a loop (Linux's own
/// limit, `MAXSYMLINKS`).
const MAX_LINKS: usize = 40;

/// The places a grant is judged against: the worktree (resolved) and the
/// home directory claude reads `~` as.
#[derive(Debug, Clone)]
pub struct Places {
    /// The directory claude works in, resolved.
    pub worktree: PathBuf,
    /// `$HOME` (resolved), where claude's `~/` rules point; none: every
    /// `~` rule reaches outside.
    pub home: Option<PathBuf>,
}

impl Places {
    /// `worktree` and `home` resolved as [`resolve`] does (a worktree
    /// under a symlinked `/tmp` is still itself).
    pub fn new(worktree: &Path, home: Option<&Path>) -> Places {
        let r = |p: &Path| resolve(p).unwrap_or_else(|| p.to_path_buf());
        Places { worktree: r(worktree), home: home.filter(|h| h.is_absolute()).map(r) }
    }

    /// The process's working directory and `$HOME`.
    pub fn here() -> Places {
        let home = std::env::var_os("HOME").filter(|h| !h.is_empty()).map(PathBuf::from);
        Places::new(&worktree(), home.as_deref())
    }

    /// `p` is the worktree or under it.
    pub fn inside(&self, p: &Path) -> bool {
        p.starts_with(&self.worktree)
    }
}

/// The directory claude works in (it runs in runwire's own): the worktree
/// `addDirectories` is held to.
pub fn worktree() -> PathBuf {
    std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/nonexistent"))
}

/// `path` (absolute) as the kernel would reach it: each symlink followed
/// where it stands (so `link/..` is the parent of the link's target, not
/// the link's directory), `.` and `..` applied; past the first name that
/// does not exist the rest is read lexically (nothing there can be a link
/// yet). `None` for a relative path or a symlink loop.
pub fn resolve(path: &Path) -> Option<PathBuf> {
    if !path.is_absolute() {
        return None;
    }
    // Components still to walk, the next one last.
    let mut todo: Vec<OsString> = Vec::new();
    push_components(&mut todo, path);
    let mut out = PathBuf::from("/");
    let mut links = 0;
    let mut exists = true;
    while let Some(c) = todo.pop() {
        if c == "." || c.is_empty() {
            continue;
        }
        if c == ".." {
            out.pop();
            continue;
        }
        let next = out.join(&c);
        if exists {
            match std::fs::symlink_metadata(&next) {
                Ok(m) if m.file_type().is_symlink() => {
                    links += 1;
                    let target = std::fs::read_link(&next).ok()?;
                    if links > MAX_LINKS {
                        return None;
                    }
                    if target.is_absolute() {
                        out = PathBuf::from("/");
                    }
                    push_components(&mut todo, &target);
                    continue;
                }
                Ok(_) => {}
                Err(_) => exists = false,
            }
        }
        out = next;
    }
    Some(out)
}

/// Pushes `p`'s components so that its first is popped first.
fn push_components(todo: &mut Vec<OsString>, p: &Path) {
    let parts: Vec<OsString> = p
        .components()
        .filter_map(|c| match c {
            Component::Normal(n) => Some(n.to_os_string()),
            Component::ParentDir => Some("..".into()),
            Component::CurDir => Some(".".into()),
            Component::RootDir | Component::Prefix(_) => None,
        })
        .collect();
    todo.extend(parts.into_iter().rev());
}

/// A directory of an `addDirectories` (absolute, or relative to the
/// worktree), resolved; `None`: it cannot be placed (empty, a loop).
pub fn directory(dir: &str, places: &Places) -> Option<PathBuf> {
    if dir.is_empty() {
        return None;
    }
    let p = Path::new(dir);
    let p = if p.is_absolute() { p.to_path_buf() } else { places.worktree.join(p) };
    resolve(&p)
}

/// The tools whose rule content is a path pattern (claude applies `Edit`
/// rules to every tool that edits files and `Read` rules to the ones that
/// read; the others are judged the same way in case a rule names them).
pub const PATH_TOOLS: [&str; 9] =
    ["Read", "Edit", "Write", "MultiEdit", "NotebookEdit", "NotebookRead", "Glob", "Grep", "LS"];

/// Where a path rule's pattern `content` reaches, for a suggestion saved to
/// `destination`: the fixed part of the pattern (up to its first glob
/// character) under claude's anchor, resolved. A `/p` rule is relative to
/// its settings file: read as the project's root (the worktree) and, where
/// the worktree's `.claude` leads elsewhere, from there too; for
/// `userSettings` also from the home directory and `~/.claude` (every
/// place it could mean is listed, so each is judged: applied for the
/// session it is the worktree's). `Err`: it cannot be placed (why).
pub fn rule(content: &str, destination: Option<&str>, places: &Places) -> Result<Vec<PathBuf>, String> {
    let (bases, rest): (Vec<Option<PathBuf>>, &str) = if let Some(r) = content.strip_prefix("//") {
        (vec![Some(PathBuf::from("/"))], r)
    } else if content == "~" || content.starts_with("~/") {
        (vec![places.home.clone()], content.trim_start_matches('~').trim_start_matches('/'))
    } else if content.starts_with('~') {
        // `~user/…`: another user's home.
        return Err(format!("{content} names another user's home directory"));
    } else if let Some(r) = content.strip_prefix('/') {
        let mut b = vec![Some(places.worktree.clone())];
        let dot_claude = resolve(&places.worktree.join(".claude"));
        if let Some(d) = dot_claude.filter(|d| !places.inside(d)) {
            b.push(Some(d));
        }
        if destination == Some("userSettings") {
            b.push(places.home.clone());
            b.push(places.home.as_ref().map(|h| h.join(".claude")));
        }
        (b, r)
    } else {
        (vec![Some(places.worktree.clone())], content.strip_prefix("./").unwrap_or(content))
    };
    // The fixed directories before the first glob; a `..` after one can
    // climb anywhere the glob reaches, so it is not placed.
    let parts: Vec<&str> = rest.split('/').collect();
    let glob = parts.iter().position(|p| p.contains(['*', '?', '[', '{']));
    if let Some(g) = glob {
        if parts[g..].contains(&"..") {
            return Err(format!("{content} climbs with .. after a pattern"));
        }
    }
    let fixed = &parts[..glob.unwrap_or(parts.len())];
    let mut out = Vec::new();
    for b in bases {
        let Some(b) = b else { return Err(format!("{content}: no home directory to place ~ in")) };
        let p = fixed.iter().fold(b, |p, c| p.join(c));
        out.push(resolve(&p).ok_or_else(|| format!("{content} cannot be resolved (a symlink loop)"))?);
    }
    Ok(out)
}

/// Programs that run whatever command follows them.
const WRAPPERS: [&str; 32] = [
    "sudo", "doas", "su", "runuser", "pkexec", "env", "xargs", "nohup", "timeout", "nice", "ionice", "time", "watch",
    "exec", "eval", "command", "builtin", "chroot", "setsid", "stdbuf", "strace", "unshare", "nsenter", "parallel",
    "flock", "busybox", "find", "npx", "bunx", "pnpx", "uvx", "script",
];

/// Interpreters that run code given inline (`-c`, `-e`, `eval`…).
const INTERPRETERS: [&str; 23] = [
    "sh",
    "bash",
    "zsh",
    "dash",
    "ksh",
    "fish",
    "csh",
    "tcsh",
    "python",
    "python2",
    "python3",
    "node",
    "nodejs",
    "perl",
    "ruby",
    "php",
    "lua",
    "deno",
    "bun",
    "pwsh",
    "osascript",
    "awk",
    "tclsh",
];

/// A program and subcommand that run any package or command.
const RUNNERS: [(&str, &str); 8] = [
    ("npm", "exec"),
    ("npm", "x"),
    ("pnpm", "dlx"),
    ("pnpm", "exec"),
    ("yarn", "dlx"),
    ("pipx", "run"),
    ("uv", "run"),
    ("git", "-c"),
];

/// Why a command rule's `content` (`Bash(…)`: `prefix:*` or a `*`
/// pattern) lets the agent run any command, if it does: a wildcard where
/// the program goes, a wrapper (`sudo`, `env`, `xargs`…), an interpreter
/// open to inline code (`sh -c`, `python3 -c`, `node -e`, or the
/// interpreter with any arguments), or a runner (`npx`, `npm exec`). An
/// exact command (no wildcard) runs only itself.
pub fn runs_anything(content: &str) -> Option<String> {
    if !content.contains('*') {
        return None;
    }
    let fixed = content.strip_suffix(":*").unwrap_or(content);
    let fixed = &fixed[..fixed.find('*').unwrap_or(fixed.len())];
    let words: Vec<&str> = fixed.split_whitespace().collect();
    // A word cut by the wildcard (`py*`) is no fixed program.
    let whole = |i: usize| i + 1 < words.len() || fixed.ends_with(char::is_whitespace) || content.ends_with(":*");
    let Some(first) = words.first().filter(|_| whole(0)) else {
        return Some(format!("{content} matches any program"));
    };
    let prog = first.rsplit('/').next().unwrap_or(first);
    if WRAPPERS.contains(&prog) {
        return Some(format!("{prog} can run any command (it runs what follows it, or what its arguments name)"));
    }
    if INTERPRETERS.contains(&prog) {
        let next = words.get(1).copied();
        return match next {
            None => Some(format!("{prog} with any arguments runs any code")),
            Some(n) if n.starts_with('-') || matches!(n, "eval" | "exec" | "run" | "x" | "e") => {
                Some(format!("{prog} {n} runs any code given to it"))
            }
            Some(_) => None,
        };
    }
    let next = words.get(1).copied().unwrap_or_default();
    RUNNERS
        .iter()
        .find(|(p, s)| *p == prog && *s == next)
        .map(|(p, s)| format!("{p} {s} runs any command or package given to it"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    fn scratch(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("rw-reach-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        resolve(&d).unwrap()
    }

    /// A symlink to `/` inside the worktree reaches `/`; `link/..` is the
    /// target's parent; `..` climbs out; a name that does not exist yet is
    /// read lexically; a loop cannot be placed.
    #[test]
    fn directories_resolve_symlinks_and_dot_dot() {
        let wt = scratch("dirs");
        std::fs::create_dir_all(wt.join("src/deep")).unwrap();
        std::fs::create_dir_all(wt.join("../rw-reach-outside")).unwrap();
        symlink("/", wt.join("docs")).unwrap();
        symlink("src/deep", wt.join("rel")).unwrap();
        symlink(wt.join("../rw-reach-outside"), wt.join("away")).unwrap();
        symlink("loop", wt.join("loop")).unwrap();
        let places = Places::new(&wt, None);
        let d = |s: &str| directory(s, &places);
        assert_eq!(d(&format!("{}/docs", wt.display())), Some(PathBuf::from("/")));
        assert_eq!(d("docs"), Some(PathBuf::from("/")));
        assert_eq!(d("docs/etc"), Some(PathBuf::from("/etc")));
        assert_eq!(d("src/../src/deep"), Some(wt.join("src/deep")));
        assert_eq!(d("rel/.."), Some(wt.join("src")), "a link's .. is its target's parent");
        assert_eq!(d("src/.."), Some(wt.clone()));
        assert_eq!(d("../.."), wt.parent().and_then(Path::parent).map(Path::to_path_buf));
        assert!(!places.inside(&d("away/x").unwrap()));
        assert_eq!(d("new/dir/../x"), Some(wt.join("new/x")));
        assert_eq!(d("loop"), None);
        assert_eq!(d(""), None);
        assert!(places.inside(&d("src").unwrap()));
        assert!(!places.inside(&d("docs").unwrap()));
        let _ = std::fs::remove_dir_all(wt.join("../rw-reach-outside"));
        let _ = std::fs::remove_dir_all(&wt);
    }

    /// Each of claude's anchors: `//p` absolute, `~/p` home, `/p` the
    /// settings file's project (and home for user settings), `p` and `./p`
    /// the working directory; globs cut at their fixed part.
    #[test]
    fn rules_resolve_by_their_anchor() {
        let wt = scratch("rules");
        let home = scratch("home");
        std::fs::create_dir_all(wt.join("src")).unwrap();
        symlink("/", wt.join("docs")).unwrap();
        let places = Places::new(&wt, Some(&home));
        let r = |c: &str, d: Option<&str>| rule(c, d, &places);
        assert_eq!(r("//etc/**", None), Ok(vec![PathBuf::from("/etc")]));
        assert_eq!(r("~/**", None), Ok(vec![home.clone()]));
        assert_eq!(r("~/.ssh/**", None), Ok(vec![home.join(".ssh")]));
        assert_eq!(r("/src/**/*.ts", Some("localSettings")), Ok(vec![wt.join("src")]));
        assert_eq!(
            r("/src/**", Some("userSettings")),
            Ok(vec![wt.join("src"), home.join("src"), home.join(".claude/src")])
        );
        // A `.claude` that leads out of the worktree is judged too.
        let out = scratch("rules-out");
        symlink(&out, wt.join(".claude")).unwrap();
        assert_eq!(r("/src/**", None), Ok(vec![wt.join("src"), out.join("src")]));
        let _ = std::fs::remove_dir_all(&out);
        assert_eq!(r("src/**", None), Ok(vec![wt.join("src")]));
        assert_eq!(r("./src/a.rs", None), Ok(vec![wt.join("src/a.rs")]));
        assert_eq!(r("*.env", None), Ok(vec![wt.clone()]));
        assert_eq!(r("docs/**", None), Ok(vec![PathBuf::from("/")]));
        assert_eq!(r("../other/**", None), Ok(vec![wt.parent().unwrap().join("other")]));
        assert!(r("src/*/../../..", None).is_err());
        assert!(r("~root/x", None).is_err());
        let homeless = Places::new(&wt, None);
        assert!(rule("~/x", None, &homeless).is_err());
        let _ = std::fs::remove_dir_all(&wt);
        let _ = std::fs::remove_dir_all(&home);
    }

    #[test]
    fn command_rules_that_run_anything_are_named() {
        for c in [
            "sh -c:*",
            "bash -c *",
            "python3 -c:*",
            "node -e:*",
            "sudo:*",
            "env *",
            "xargs:*",
            "/usr/bin/env:*",
            "python3:*",
            "* install",
            "py*",
            "npx:*",
            "npm exec:*",
        ] {
            assert!(runs_anything(c).is_some(), "{c}");
        }
        for c in ["npm test:*", "ls", "sh -c 'make'", "python3 scripts/gen.py:*", "git status:*", "cargo build *"] {
            assert_eq!(runs_anything(c), None, "{c}");
        }
    }
}
