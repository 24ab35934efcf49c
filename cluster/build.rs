//! Probes `nats-server` for the cluster tests: the project's one skip rule
//! (tests/support/tools.rs, compiled here too). Sets `cfg(tool = "NAME")`
//! for each tool found, or for every tool under CI, where a missing tool
//! fails its test instead of leaving it ignored.

use std::path::PathBuf;

#[path = "../tests/support/tools.rs"]
mod tools;

fn main() {
    let root = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR")).join("..");
    let names: Vec<String> = tools::TOOLS.iter().map(|t| format!("{:?}", t.name)).collect();
    println!("cargo::rustc-check-cfg=cfg(tool, values({}))", names.join(", "));
    for var in tools::ENV.iter().chain(&["CARGO_HOME", "HOME"]) {
        println!("cargo:rerun-if-env-changed={var}");
    }
    let ci = tools::in_ci();
    let mut missing = false;
    // nats-server for every cluster test; the studio's tools for the hub's
    // browser test; openssl for the sample configuration's certificates.
    for name in ["nats-server", "node", "chromium", "playwright", "openssl"] {
        let t = tools::tool(name);
        let gone = tools::missing(&root, t).is_some();
        if ci || !gone {
            println!("cargo:rustc-cfg=tool=\"{name}\"");
        }
        missing |= gone;
        for p in tools::found(t) {
            println!("cargo:rerun-if-changed={}", p.display());
        }
    }
    // Installed later: a directory on PATH changes. As the root build
    // script does: flat directories of programs only (cargo walks a watched
    // directory whole), and not cargo's own bin (every `cargo install`
    // rewrites it).
    if missing && !ci {
        let home = std::env::var_os("CARGO_HOME")
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo")));
        let cargo_bin = home.and_then(|h| h.join("bin").canonicalize().ok());
        for d in tools::path_dirs().into_iter().filter_map(|d| d.canonicalize().ok()) {
            if Some(&d) != cargo_bin.as_ref() && tools::flat(&d) {
                println!("cargo:rerun-if-changed={}", d.display());
            }
        }
    }
}
