//! Embeds the studio (`studio/app/**`) in the binary: writes
//! `$OUT_DIR/studio_assets.rs`, a table of `(relative path, bytes, etag)`
//! read by `runwire::serve::studio`. Any file added under `studio/app/` is
//! served without a Rust change; nothing is fetched at run time.
//!
//! Also probes the tools some tests need (node, Chromium, jq, ...) and sets
//! `cfg(tool = "NAME")` for each one found, or for all of them under CI: the
//! project's one skip rule, described in `tests/support/tools.rs`.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

#[path = "tests/support/tools.rs"]
mod tools;

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

/// Sets `cfg(tool = "NAME")` for each tool a test may run with (every one
/// under CI, where a missing tool must fail the test, not skip it).
fn probe_tools(root: &Path) {
    let names: Vec<String> = tools::TOOLS.iter().map(|t| format!("{:?}", t.name)).collect();
    println!("cargo::rustc-check-cfg=cfg(tool, values({}))", names.join(", "));
    for var in tools::ENV.iter().chain(&["CARGO_HOME", "HOME"]) {
        println!("cargo:rerun-if-env-changed={var}");
    }
    let ci = tools::in_ci();
    let mut any_missing = false;
    let mut found = Vec::new();
    let mut watched = std::collections::BTreeSet::new();
    for t in tools::TOOLS {
        // A found tool that changes or goes away re-runs the probe.
        watched.extend(tools::found(t));
        let missing = tools::missing(root, t).is_some();
        any_missing |= missing;
        // The pinned agents arrive by `npm ci` in realagents/ (not on PATH):
        // watch that directory, small until they are there.
        if missing && !ci && t.name == "real-agents" {
            watched.insert(root.join("realagents"));
        }
        if !missing {
            found.push(t.name);
        }
        if ci || !missing {
            println!("cargo:rustc-cfg=tool={:?}", t.name);
        }
    }
    // A missing tool installed later lands in a directory on PATH (whose
    // mtime changes): watch those, only while something is missing and the
    // answer matters, and only flat directories of programs (cargo walks a
    // watched directory whole, so no trees). Not cargo's own bin, which every
    // `cargo install` rewrites (and would rebuild the crate after).
    if any_missing && !ci {
        let home = std::env::var_os("CARGO_HOME")
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo")));
        let cargo_bin = home.and_then(|h| h.join("bin").canonicalize().ok());
        watched.extend(
            tools::path_dirs()
                .into_iter()
                .filter_map(|d| d.canonicalize().ok())
                .filter(|d| Some(d) != cargo_bin.as_ref() && tools::flat(d)),
        );
    }
    for path in watched {
        println!("cargo:rerun-if-changed={}", path.display());
    }
    // What was found (whatever CI says), for the tests' messages.
    println!("cargo:rustc-env=RUNWIRE_TOOLS_FOUND={}", found.join(","));
}

fn main() {
    let root = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    probe_tools(&root);
    let app = root.join("studio").join("app");
    println!("cargo:rerun-if-changed=studio/app");
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
