//! Helpers shared by integration tests: example binaries, the official
//! AG-UI client.
#![allow(dead_code)] // each test crate uses part of it

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::Command;
use std::sync::Mutex;

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

/// Node and the official AG-UI client's packages (`conformance/`, installed
/// with `npm ci` once per test process); false when node is absent and CI is
/// not set (CI fails instead).
pub fn official_client_ready() -> bool {
    static READY: std::sync::OnceLock<Result<bool, String>> = std::sync::OnceLock::new();
    let ready = READY.get_or_init(|| {
        if !Command::new("node").arg("--version").output().is_ok_and(|o| o.status.success()) {
            return Ok(false);
        }
        let conf = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("conformance");
        if !conf.join("node_modules/@ag-ui/client").is_dir() {
            let out = Command::new("npm")
                .args(["ci", "--no-audit", "--no-fund", "--loglevel=error"])
                .current_dir(&conf)
                .output()
                .map_err(|e| format!("cannot run npm: {e}"))?;
            if !out.status.success() {
                return Err(format!("npm ci failed:\n{}", String::from_utf8_lossy(&out.stderr)));
            }
        }
        Ok(true)
    });
    match ready {
        Ok(true) => true,
        Ok(false) if std::env::var_os("CI").is_none() => {
            eprintln!("SKIPPED: node is not installed (interrupts.mjs runs the official AG-UI client)");
            false
        }
        Ok(false) => panic!("CI is set and node is not installed"),
        Err(e) => panic!("{e}"),
    }
}
