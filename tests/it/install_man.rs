//! `scripts/install-man.sh`, the way `cargo install` users get the man
//! pages: every page lands in PREFIX/share/man/manN, where man-db looks for
//! a PREFIX/bin on PATH, and `--uninstall` takes them away again.

use std::path::Path;
use std::process::{Command, Stdio};

fn script(prefix: &Path, args: &[&str]) -> std::process::Output {
    Command::new(concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/install-man.sh"))
        .arg("--prefix")
        .arg(prefix)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

#[test]
fn every_man_page_installs_beside_the_binaries_and_uninstalls() {
    let prefix = std::env::temp_dir().join(format!("runwire-install-man-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&prefix);
    let pages: Vec<String> = std::fs::read_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/man"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(pages.len() >= 11 && pages.iter().any(|p| p == "runwire.7"), "{pages:?}");
    let installed = |p: &str| prefix.join(format!("share/man/man{}/{p}", &p[p.len() - 1..]));

    let o = script(&prefix, &[]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    for p in &pages {
        let want = std::fs::read(format!("{}/man/{p}", env!("CARGO_MANIFEST_DIR"))).unwrap();
        assert_eq!(std::fs::read(installed(p)).ok(), Some(want), "{p}");
    }
    assert!(String::from_utf8_lossy(&o.stdout).contains(&format!("installed {} pages", pages.len())));
    // man-db finds them through PREFIX/bin on PATH, with no MANPATH (where man-db is).
    if Command::new("manpath").stdout(Stdio::null()).stderr(Stdio::null()).status().is_ok_and(|s| s.success()) {
        std::fs::create_dir_all(prefix.join("bin")).unwrap();
        let path = format!("{}:{}", prefix.join("bin").display(), std::env::var("PATH").unwrap_or_default());
        let o = Command::new("manpath").env("PATH", path).env_remove("MANPATH").output().unwrap();
        let manpath = String::from_utf8_lossy(&o.stdout).to_string();
        let mandir = prefix.join("share/man").display().to_string();
        assert!(manpath.trim().split(':').any(|d| d == mandir), "{mandir} not in {manpath}");
    }

    let o = script(&prefix, &["--uninstall"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(pages.iter().all(|p| !installed(p).exists()));
    assert_eq!(script(&prefix, &["--bogus"]).status.code(), Some(2));
    let _ = std::fs::remove_dir_all(&prefix);
}

/// runwire(7) is the map: it describes every binary's page and lists it
/// under SEE ALSO (runwire-cluster(1) was once missing from both).
#[test]
fn the_overview_page_names_every_binarys_page() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/man");
    let overview = std::fs::read_to_string(format!("{dir}/runwire.7")).unwrap();
    let (body, see_also) = overview.split_once(".SH SEE ALSO").expect("a SEE ALSO section");
    let mut checked = 0;
    for e in std::fs::read_dir(dir).unwrap() {
        let name = e.unwrap().file_name().to_string_lossy().into_owned();
        let Some(bin) = name.strip_suffix(".1") else { continue };
        let reference = format!(".BR {} (1)", bin.replace('-', "\\-"));
        assert!(body.contains(&reference), "runwire.7 does not describe {bin}(1)");
        assert!(see_also.contains(&reference), "runwire.7's SEE ALSO does not list {bin}(1)");
        checked += 1;
    }
    assert!(checked >= 12, "{checked} pages");
}
