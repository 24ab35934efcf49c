//! The operators' sample configuration, examples/cluster/: three servers
//! with TLS (clients and routes) and runwire's accounts. Its certificates
//! are made by its own script (examples/cluster/make-certs.sh) in a scratch
//! copy, and nats-server's configuration test (`-t`, which also loads the
//! certificates and the included accounts) accepts each server's file, as
//! Debian's nats-server 2.9 reads it. A file it names that is missing is
//! refused: the check is real.

use crate::common::*;
use std::path::Path;
use std::process::{Command, Output};

const PASSWORDS: [&str; 4] =
    ["RUNWIRE_ADMIN_PASSWORD", "RUNWIRE_HUB_PASSWORD", "RUNWIRE_NODE_ALPHA_PASSWORD", "RUNWIRE_NODE_BETA_PASSWORD"];

fn config_test(dir: &Path, conf: &str) -> Output {
    let mut c = Command::new("nats-server");
    c.args(["-t", "-c", conf]).current_dir(dir);
    for v in PASSWORDS {
        c.env(v, "sample-password");
    }
    c.output().unwrap()
}

#[test]
#[cfg_attr(not(tool = "nats-server"), ignore = "needs nats-server: apt-get install nats-server")]
#[cfg_attr(not(tool = "openssl"), ignore = "needs openssl: apt-get install openssl")]
fn the_sample_three_server_configuration_with_tls_and_accounts_passes_nats_servers_config_test() {
    need(&["nats-server", "openssl"]);
    let dir = scratch("examples-config");
    let src = root().join("examples/cluster");
    let confs = ["server-1.conf", "server-2.conf", "server-3.conf"];
    for f in confs.iter().chain(&["accounts.conf"]) {
        std::fs::copy(src.join(f), dir.join(f)).unwrap();
    }
    let out = Command::new("bash")
        .arg(src.join("make-certs.sh"))
        .args(["certs", "s1.example.internal", "s2.example.internal", "s3.example.internal"])
        .current_dir(&*dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "make-certs.sh: {}", String::from_utf8_lossy(&out.stderr));
    // The keys are their owner's only.
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(dir.join("certs/s1-key.pem")).unwrap().permissions().mode();
    assert_eq!(mode & 0o077, 0, "a key readable by others: {mode:o}");
    for conf in confs {
        let out = config_test(&dir, conf);
        let said = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success() && said.contains("is valid"), "nats-server -t -c {conf}: {said}");
    }
    // Each server's certificate is for its host, signed by the CA (the routes verify each other).
    for (i, host) in ["s1.example.internal", "s2.example.internal", "s3.example.internal"].iter().enumerate() {
        let cert = format!("certs/s{}.pem", i + 1);
        let out = Command::new("openssl")
            .args(["verify", "-CAfile", "certs/ca.pem", "-verify_hostname", host, &cert])
            .current_dir(&*dir)
            .output()
            .unwrap();
        assert!(out.status.success(), "{cert}: {}", String::from_utf8_lossy(&out.stdout));
    }
    // Refused: a certificate missing, and a password not in the environment.
    std::fs::remove_file(dir.join("certs/s2.pem")).unwrap();
    let out = config_test(&dir, "server-2.conf");
    assert!(!out.status.success(), "a missing certificate passed the config test");
    let out = Command::new("nats-server").args(["-t", "-c", "server-1.conf"]).current_dir(&*dir).output().unwrap();
    assert!(!out.status.success(), "server-1.conf passed without its users' passwords");
}
