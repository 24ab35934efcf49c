//! The agent wrappers (`wrappers/*.sh`) carried inside the binary, so an
//! installed `runwire-serve` or `runwire-supervise` (`cargo install`, no
//! checkout) still has them: on first use they are written to
//! `$XDG_CACHE_HOME/runwire/wrappers-<hash>/` (default `~/.cache/runwire/…`),
//! where `<hash>` is a hash of their content. A binary with other wrappers
//! uses another directory, so a stale copy is never used; a copy whose files
//! were changed since is written again before use.
//!
//! This module is also the one wrapper lookup ([`find`]) and its trust
//! rules (`spec/WRAPPER-CONTRACT.md`, "Where wrappers are found"): a
//! wrapper runs as the user, so it is taken only from a directory that
//! nobody else can change (it and every ancestor owned by the user or root
//! and not writable by group or others), checked again right before each
//! exec ([`recheck`]), and the cached copy's content with it.

use crate::pipeline::normalize::Adapter;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// Each wrapper file, by name: the agents' wrappers and the library they source.
pub static FILES: &[(&str, &[u8])] = &[
    ("_common.sh", include_bytes!("../../../wrappers/_common.sh")),
    ("claude.sh", include_bytes!("../../../wrappers/claude.sh")),
    ("codex.sh", include_bytes!("../../../wrappers/codex.sh")),
    ("cursor.sh", include_bytes!("../../../wrappers/cursor.sh")),
];

/// A hash of every file's name and bytes: the cache directory's name.
pub fn content_hash() -> String {
    let mut h = crate::util::hash::FNV_OFFSET;
    for (name, bytes) in FILES {
        h = crate::util::hash::fnv1a64_extend(h, name.as_bytes());
        h = crate::util::hash::fnv1a64_extend(h, &[0]);
        h = crate::util::hash::fnv1a64_extend(h, &(bytes.len() as u64).to_le_bytes());
        h = crate::util::hash::fnv1a64_extend(h, bytes);
    }
    format!("{h:016x}")
}

/// `$XDG_CACHE_HOME/runwire`, else `$HOME/.cache/runwire`.
pub fn cache_root() -> Option<PathBuf> {
    let abs = |v: std::ffi::OsString| Some(PathBuf::from(v)).filter(|p| p.is_absolute());
    std::env::var_os("XDG_CACHE_HOME")
        .and_then(abs)
        .or_else(|| std::env::var_os("HOME").and_then(abs).map(|h| h.join(".cache")))
        .map(|c| c.join("runwire"))
}

/// Whether `dir` holds exactly the embedded files.
fn intact(dir: &Path) -> bool {
    FILES.iter().all(|(name, bytes)| std::fs::read(dir.join(name)).is_ok_and(|b| b == *bytes))
}

/// The directory holding the embedded wrappers, written there first if
/// needed (into a temporary directory renamed into place, so a concurrent
/// first use never sees half of them). The cache directory and its
/// ancestors must pass [`trusted_dir`]; a copy there that does not (made by
/// someone else) is refused, never used or replaced.
pub fn materialize() -> Result<PathBuf, String> {
    let root = cache_root().ok_or("neither XDG_CACHE_HOME nor HOME is set to an absolute path")?;
    let dir = root.join(format!("wrappers-{}", content_hash()));
    if !root.exists() {
        create_private(&root).map_err(|e| format!("{}: {e}", root.display()))?;
    }
    trusted_dir(&root)?;
    if dir.exists() {
        trusted_dir(&dir)?;
    }
    if !intact(&dir) {
        write_fresh(&root, &dir)
            .map_err(|e| format!("cannot write the embedded wrappers under {}: {e}", root.display()))?;
    }
    trusted_dir(&dir)?;
    trusted_files(&dir)?;
    if intact(&dir) {
        Ok(dir)
    } else {
        Err(format!("{}: the wrappers written there do not read back as written", dir.display()))
    }
}

/// `create_dir_all` whose new directories are 0700.
fn create_private(dir: &Path) -> io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir)
}

fn write_fresh(root: &Path, dir: &Path) -> io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    create_private(root)?;
    let tmp = root.join(format!(".wrappers-{}.{}", content_hash(), std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    std::fs::create_dir(&tmp)?;
    std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o755))?;
    for (name, bytes) in FILES {
        let p = tmp.join(name);
        std::fs::write(&p, bytes)?;
        let mode = if name.starts_with('_') { 0o644 } else { 0o755 };
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode))?;
    }
    // A copy changed since it was written is moved aside, never used.
    if dir.exists() && !intact(dir) {
        let aside = root.join(format!(".wrappers-{}.stale.{}", content_hash(), std::process::id()));
        std::fs::rename(dir, &aside)?;
        let _ = std::fs::remove_dir_all(&aside);
    }
    match std::fs::rename(&tmp, dir) {
        Ok(()) => Ok(()),
        // Another process put an intact copy in place first.
        Err(_) if intact(dir) => std::fs::remove_dir_all(&tmp),
        Err(e) => {
            let _ = std::fs::remove_dir_all(&tmp);
            Err(e)
        }
    }
}

/// Why `dir` is not a place to run wrappers from, if it is not: it and
/// each ancestor (symbolic links resolved) must be a directory owned by this
/// user or root and not writable by group or others. A sticky directory
/// writable by all (`/tmp`) is allowed only above a directory this user
/// owns: no one else can then rename or replace what is beneath it.
pub fn trusted_dir(dir: &Path) -> Result<(), String> {
    let real = dir.canonicalize().map_err(|e| format!("{}: {e}", dir.display()))?;
    let me = nix::unistd::geteuid().as_raw();
    let mut mine_below = false;
    for a in real.ancestors() {
        let m = std::fs::symlink_metadata(a).map_err(|e| format!("{}: {e}", a.display()))?;
        let refuse = |what: String| Err(format!("{}: {what}, so wrappers under it are not run", a.display()));
        if !m.is_dir() {
            return refuse("not a directory".into());
        }
        if m.uid() != me && m.uid() != 0 {
            return refuse(format!("owned by uid {}, neither you nor root", m.uid()));
        }
        let open = m.mode() & 0o022 != 0;
        let sticky = m.mode() & 0o1000 != 0;
        if open && !(sticky && mine_below) {
            return refuse(format!("writable by group or others (mode {:o})", m.mode() & 0o7777));
        }
        mine_below |= m.uid() == me;
    }
    Ok(())
}

/// Why the wrapper files in `dir` (each a wrapper or the library they
/// source) cannot be run, if they cannot: each present one must be a
/// regular file (not a link) owned by this user or root, not writable by
/// group or others.
fn trusted_files(dir: &Path) -> Result<(), String> {
    let me = nix::unistd::geteuid().as_raw();
    for (name, _) in FILES {
        let p = dir.join(name);
        let m = match std::fs::symlink_metadata(&p) {
            Ok(m) => m,
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(format!("{}: {e}", p.display())),
        };
        if !m.is_file() || (m.uid() != me && m.uid() != 0) || m.mode() & 0o022 != 0 {
            return Err(format!(
                "{}: not a regular file owned by you or root and writable by you alone (uid {}, mode {:o}), so it is not run",
                p.display(),
                m.uid(),
                m.mode() & 0o7777
            ));
        }
    }
    Ok(())
}

/// Where a wrapper was found: what [`recheck`] checks before each exec.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Place {
    Checkout,
    Prefix,
    Cache,
}

/// The directories [`find`] chose, with their kind.
static FOUND: Mutex<Vec<(PathBuf, Place)>> = Mutex::new(Vec::new());

/// The checkout `exe` was built in: `<checkout>/target/[<triple>/]<profile>/[deps|examples/]<bin>`,
/// where `<checkout>/Cargo.toml` is this package's. Nothing else above the
/// executable is looked at.
fn checkout_of(exe: &Path) -> Option<PathBuf> {
    let target = exe.ancestors().skip(2).take(3).find(|d| d.file_name().is_some_and(|n| n == "target"))?;
    let checkout = target.parent()?;
    let toml = std::fs::read_to_string(checkout.join("Cargo.toml")).ok()?;
    is_this_package(&toml).then(|| checkout.to_path_buf())
}

/// `[package]`'s `name` is `runwire`.
fn is_this_package(toml: &str) -> bool {
    let mut in_package = false;
    for line in toml.lines().map(str::trim) {
        if line.starts_with('[') {
            in_package = line == "[package]";
        } else if in_package {
            if let Some((k, v)) = line.split_once('=') {
                if k.trim() == "name" {
                    return v.trim() == "\"runwire\"";
                }
            }
        }
    }
    false
}

/// Checks a found directory and remembers it for [`recheck`].
fn take(dir: PathBuf, name: &str, place: Place) -> Result<PathBuf, String> {
    trusted_dir(&dir)?;
    trusted_files(&dir)?;
    let dir = dir.canonicalize().map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut found = FOUND.lock().unwrap_or_else(|e| e.into_inner());
    if !found.iter().any(|(d, _)| *d == dir) {
        found.push((dir.clone(), place));
    }
    Ok(dir.join(name))
}

/// The default wrapper of `agent`, in this order: the checkout's own
/// `wrappers/` when the executable is in that checkout's `target/`;
/// `$PREFIX/share/runwire/wrappers/` when `PREFIX` is set and has it; else
/// the copy carried in the binary, written to the user's cache directory.
/// The first place that has the wrapper must pass the trust rules
/// ([`trusted_dir`]), else the lookup fails with the reason (it does not
/// fall through to a later place).
pub fn find(agent: Adapter) -> Result<PathBuf, String> {
    let name = format!("{}.sh", agent.name());
    let mut looked = Vec::new();
    if let Some(co) = std::env::current_exe().ok().and_then(|e| e.canonicalize().ok()).and_then(|e| checkout_of(&e)) {
        let dir = co.join("wrappers");
        if dir.join(&name).is_file() {
            return take(dir, &name, Place::Checkout);
        }
        looked.push(dir.join(&name).display().to_string());
    }
    if let Some(prefix) = std::env::var_os("PREFIX") {
        let dir = PathBuf::from(prefix).join("share/runwire/wrappers");
        if dir.join(&name).is_file() {
            return take(dir, &name, Place::Prefix);
        }
        looked.push(dir.join(&name).display().to_string());
    }
    match materialize() {
        Ok(dir) => take(dir, &name, Place::Cache),
        Err(why) => {
            looked.push(format!("the embedded copy ({why})"));
            Err(format!("no wrapper for {} found (looked for {}); use --agent-cmd", agent.name(), looked.join(", ")))
        }
    }
}

/// Checks a wrapper [`find`] returned again, right before it is run: its
/// directory's trust, and for the cached copy its content (a copy changed
/// since is written again). A path `find` did not return (`--agent-cmd`,
/// `--wrapper-dir`: the user's own choice) is not checked.
pub fn recheck(path: &Path) -> Result<(), String> {
    let Some(dir) = path.parent() else { return Ok(()) };
    let place = FOUND.lock().unwrap_or_else(|e| e.into_inner()).iter().find(|(d, _)| d == dir).map(|(_, p)| *p);
    match place {
        None => Ok(()),
        Some(Place::Cache) => {
            let again = materialize()?;
            if again != dir {
                return Err(format!("{}: the cached wrappers moved to {}", dir.display(), again.display()));
            }
            Ok(())
        }
        Some(Place::Checkout | Place::Prefix) => trusted_dir(dir).and_then(|()| trusted_files(dir)),
    }
}

/// The session settings the wrappers take from the environment in
/// `--interactive` (`spec/WRAPPER-CONTRACT.md`): what `runwire-session`
/// will be started with for a task.
pub fn env_launch_options() -> crate::session::io::launch::LaunchOptions {
    let var = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
    let d = crate::session::io::launch::LaunchOptions::default();
    crate::session::io::launch::LaunchOptions {
        grant_all: var("RUNWIRE_GRANT_ALL").as_deref() == Some("1"),
        permission_mode: var("RUNWIRE_PERMISSION_MODE").unwrap_or(d.permission_mode.clone()),
        plan_exit_mode: var("RUNWIRE_PLAN_EXIT_MODE").unwrap_or(d.plan_exit_mode.clone()),
        sandbox: var("RUNWIRE_SANDBOX").unwrap_or(d.sandbox.clone()),
        approval_policy: var("RUNWIRE_APPROVAL_POLICY").unwrap_or(d.approval_policy.clone()),
        // Only checked, never started: a fixed directory spares a lookup.
        cwd: Some("/".into()),
        ..d
    }
}

/// The rules `runwire-session` and `runwire-serve` apply to their flags,
/// applied to the environment the wrappers read for an agent of `kind`
/// (`bypassPermissions` and `danger-full-access` only with
/// `RUNWIRE_GRANT_ALL=1`), so that a supervisor refuses at start what each
/// of its tasks would be refused.
pub fn check_env(kind: crate::session::io::launch::AgentKind) -> Result<(), String> {
    match crate::session::io::launch::launch(kind, &env_launch_options()) {
        Ok(_) => Ok(()),
        Err(e) => Err(e
            .replace("--permission-mode", "RUNWIRE_PERMISSION_MODE")
            .replace("--plan-exit-mode", "RUNWIRE_PLAN_EXIT_MODE")
            .replace("--grant-all", "RUNWIRE_GRANT_ALL=1")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_this_package_s_checkout_counts() {
        assert!(is_this_package("[package]\nname = \"runwire\"\nversion = \"0.1.0\"\n"));
        assert!(!is_this_package("[package]\nname = \"other\"\n[dependencies]\nname = \"runwire\"\n"));
        assert!(!is_this_package("[workspace]\nname = \"runwire\"\n"));
        let exe = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/debug/runwire-serve");
        assert_eq!(checkout_of(&exe).as_deref(), Some(Path::new(env!("CARGO_MANIFEST_DIR"))));
        assert_eq!(checkout_of(Path::new("/usr/bin/runwire-serve")), None);
    }

    #[test]
    fn a_world_writable_ancestor_is_refused_unless_sticky_above_your_own() {
        use std::os::unix::fs::PermissionsExt;
        let base = std::env::temp_dir().join(format!("runwire-trust-{}", std::process::id()));
        let open = base.join("open");
        create_private(&open.join("w")).unwrap();
        std::fs::set_permissions(&base, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
        let e = trusted_dir(&open.join("w")).unwrap_err();
        assert!(e.contains("writable by group or others"), "{e}");
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o1777)).unwrap();
        trusted_dir(&open.join("w")).unwrap();
        // Sticky but nothing of yours beneath it: the directory itself is open.
        assert!(trusted_dir(&open).is_err());
        let _ = std::fs::remove_dir_all(&base);
    }

    #[test]
    fn the_embedded_wrappers_are_the_checkout_s() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("wrappers");
        assert!(intact(&dir), "wrappers/ and the embedded copies differ");
        assert_eq!(content_hash().len(), 16);
    }
}
