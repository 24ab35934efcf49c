//! The agent wrappers (`wrappers/*.sh`) carried inside the binary, so an
//! installed `runwire-serve` or `runwire-supervise` (`cargo install`, no
//! checkout) still has them: on first use they are written to
//! `$XDG_CACHE_HOME/runwire/wrappers-<hash>/` (default `~/.cache/runwire/…`),
//! where `<hash>` is a hash of their content. A binary with other wrappers
//! uses another directory, so a stale copy is never used; a copy whose files
//! were changed since is written again before use.

use std::io;
use std::path::{Path, PathBuf};

/// Each wrapper file, by name: the agents' wrappers and the library they source.
pub static FILES: &[(&str, &[u8])] = &[
    ("_common.sh", include_bytes!("../wrappers/_common.sh")),
    ("claude.sh", include_bytes!("../wrappers/claude.sh")),
    ("codex.sh", include_bytes!("../wrappers/codex.sh")),
    ("cursor.sh", include_bytes!("../wrappers/cursor.sh")),
];

/// A hash of every file's name and bytes: the cache directory's name.
pub fn content_hash() -> String {
    let mut h = crate::agui::FNV_OFFSET;
    for (name, bytes) in FILES {
        h = crate::agui::fnv1a64_extend(h, name.as_bytes());
        h = crate::agui::fnv1a64_extend(h, &[0]);
        h = crate::agui::fnv1a64_extend(h, &(bytes.len() as u64).to_le_bytes());
        h = crate::agui::fnv1a64_extend(h, bytes);
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
/// first use never sees half of them).
pub fn materialize() -> Result<PathBuf, String> {
    let root = cache_root().ok_or("neither XDG_CACHE_HOME nor HOME is set to an absolute path")?;
    let dir = root.join(format!("wrappers-{}", content_hash()));
    if intact(&dir) {
        return Ok(dir);
    }
    write_fresh(&root, &dir)
        .map_err(|e| format!("cannot write the embedded wrappers under {}: {e}", root.display()))?;
    if intact(&dir) {
        Ok(dir)
    } else {
        Err(format!("{}: the wrappers written there do not read back as written", dir.display()))
    }
}

fn write_fresh(root: &Path, dir: &Path) -> io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::create_dir_all(root)?;
    let tmp = root.join(format!(".wrappers-{}.{}", content_hash(), std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    std::fs::create_dir(&tmp)?;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_embedded_wrappers_are_the_checkout_s() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("wrappers");
        assert!(intact(&dir), "wrappers/ and the embedded copies differ");
        assert_eq!(content_hash().len(), 16);
    }
}
