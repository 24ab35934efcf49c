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
    for var in tools::ENV {
        println!("cargo:rerun-if-env-changed={var}");
    }
    let ci = tools::in_ci();
    let t = tools::tool("nats-server");
    let missing = tools::missing(&root, t).is_some();
    if ci || !missing {
        println!("cargo:rustc-cfg=tool=\"nats-server\"");
    }
    for p in tools::found(t) {
        println!("cargo:rerun-if-changed={}", p.display());
    }
    // Installed later: a directory on PATH changes.
    if missing && !ci {
        for d in tools::path_dirs().into_iter().filter(|d| d.is_dir()) {
            println!("cargo:rerun-if-changed={}", d.display());
        }
    }
}
