//! Embeds the studio (`studio/app/**`) in the binary: writes
//! `$OUT_DIR/studio_assets.rs`, a table of `(relative path, bytes, etag)`
//! read by `runwire::serve::studio`. Any file added under `studio/app/` is
//! served without a Rust change; nothing is fetched at run time.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(rd) = std::fs::read_dir(dir) else { return };
    let mut entries: Vec<PathBuf> = rd.filter_map(|e| e.ok().map(|e| e.path())).collect();
    entries.sort();
    for p in entries {
        let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
        // Editor droppings and dotfiles are not part of the page.
        if name.starts_with('.') || name.ends_with('~') {
            continue;
        }
        if p.is_dir() {
            walk(&p, out);
        } else if p.is_file() {
            out.push(p);
        }
    }
}

/// FNV-1a, for the ETag: a change of content must change it, nothing more.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3))
}

/// The real-agent matrix (`tests/real_agents.rs`) runs when the pinned
/// agents are installed (`cd realagents && npm ci`), and always under CI,
/// where a missing agent must fail, not skip: cfg `runwire_real_agents`.
fn real_agents_cfg(root: &Path) {
    println!("cargo::rustc-check-cfg=cfg(runwire_real_agents)");
    println!("cargo:rerun-if-changed=realagents");
    println!("cargo:rerun-if-env-changed=CI");
    let bin = root.join("realagents/node_modules/.bin");
    let installed = ["claude", "codex", "claude-agent-acp", "codex-acp"].iter().all(|b| bin.join(b).exists());
    let ci = std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "0" && v != "false");
    if installed || ci {
        println!("cargo:rustc-cfg=runwire_real_agents");
    }
}

fn main() {
    let root = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let app = root.join("studio").join("app");
    println!("cargo:rerun-if-changed=studio/app");
    real_agents_cfg(&root);
    let mut files = Vec::new();
    walk(&app, &mut files);
    let mut src = String::from("pub static ASSETS: &[(&str, &[u8], &str)] = &[\n");
    for f in &files {
        let rel = f.strip_prefix(&app).expect("under studio/app").to_string_lossy().replace('\\', "/");
        let bytes = std::fs::read(f).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
        let etag = format!("\"{:016x}\"", fnv1a(&bytes));
        writeln!(src, "    ({rel:?}, include_bytes!({:?}), {etag:?}),", f.display().to_string()).expect("string");
    }
    src.push_str("];\n");
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR")).join("studio_assets.rs");
    std::fs::write(&out, src).unwrap_or_else(|e| panic!("{}: {e}", out.display()));
}
