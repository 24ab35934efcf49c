//! Helpers shared by the integration tests that run example binaries.

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
