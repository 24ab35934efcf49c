//! The cluster's security (spec/CLUSTER.md, "Security") and a network cut,
//! on real nats-servers running examples/cluster/accounts.conf: a node's
//! credentials publish only as that node (its subjects, its KV keys, its
//! inbox), never to a control subject, and cannot make or remove streams;
//! the hub's credentials send control; a server off loopback is refused
//! without TLS, and a node connects over TLS (with and without a client
//! certificate); a node cut from the cluster for 30 s while its agent works
//! catches up in order, nothing lost or duplicated.
//!
//! Needs `nats-server` (the one skip rule: tests/support/tools.rs);
//! `runwire-serve` is built when missing. The TLS certificates are
//! throwaway fixtures (cluster/tests/tls/gen.sh). `RUNWIRE_CUT_SECS` shortens
//! the cut for a local run; CI runs the real 30 s.
//! `cargo test -p runwire-cluster --test it security::`.

use crate::common::*;
use crate::hub_studio;
use runwire_cluster::names;
use serde_json::Value;
use std::collections::BTreeSet;
use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

fn tls_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/tls")
}

/// The users of examples/cluster/accounts.conf, their passwords (in
/// nats-server's environment) and password files (for runwire-cluster).
const USERS: [(&str, &str); 4] = [
    ("admin", "RUNWIRE_ADMIN_PASSWORD"),
    ("hub", "RUNWIRE_HUB_PASSWORD"),
    ("node-alpha", "RUNWIRE_NODE_ALPHA_PASSWORD"),
    ("node-beta", "RUNWIRE_NODE_BETA_PASSWORD"),
];

fn password(user: &str) -> String {
    format!("pw-of-{user}-{}", std::process::id())
}

/// nats-servers on loopback running the documented accounts: one alone,
/// or three clustered (streams with 3 replicas). Clients learn no other
/// server than the ones they are given (`no_advertise`), so a proxy in
/// front of one server is a node's only way in. (Not common's `Nats`: this
/// one runs the accounts, and TLS.)
struct Nats {
    _servers: Vec<Proc>,
    url: String,
    ports: Vec<u16>,
    dir: PathBuf,
}

impl Nats {
    /// `tls`: the server certificate, and `verify`: client certificates required.
    fn start(dir: &Path, n: usize, tls: bool, verify: bool) -> Nats {
        std::fs::copy(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/cluster/accounts.conf"),
            dir.join("accounts.conf"),
        )
        .unwrap();
        for (user, _) in USERS {
            std::fs::write(dir.join(format!("{user}.pw")), password(user)).unwrap();
        }
        let mut ports = free_ports(2 * n);
        let cports = ports.split_off(n);
        let scheme = if tls { "tls" } else { "nats" };
        let url = ports.iter().map(|p| format!("{scheme}://127.0.0.1:{p}")).collect::<Vec<_>>().join(",");
        let mut servers = Vec::new();
        for i in 0..n {
            let mut conf = format!(
                "server_name: s{i}\nlisten: \"127.0.0.1:{}\"\njetstream {{ store_dir: \"{}\" }}\ninclude ./accounts.conf\n",
                ports[i],
                dir.join(format!("js-{i}")).display()
            );
            if n > 1 {
                let routes: Vec<String> =
                    (0..n).filter(|j| *j != i).map(|j| format!("\"nats://127.0.0.1:{}\"", cports[j])).collect();
                conf += &format!(
                    "cluster {{ name: rwsec, listen: \"127.0.0.1:{}\", routes: [{}], no_advertise: true }}\n",
                    cports[i],
                    routes.join(", ")
                );
            }
            if tls {
                let t = tls_dir();
                conf += &format!(
                    "tls {{ cert_file: \"{}\", key_file: \"{}\", ca_file: \"{}\", verify: {verify} }}\n",
                    t.join("server.pem").display(),
                    t.join("server.key").display(),
                    t.join("ca.pem").display()
                );
            }
            let path = dir.join(format!("s{i}.conf"));
            std::fs::write(&path, conf).unwrap();
            let log = std::fs::File::create(dir.join(format!("nats-{i}.log"))).unwrap();
            let mut cmd = Command::new("nats-server");
            cmd.arg("-c").arg(&path).stdin(Stdio::null()).stdout(Stdio::null()).stderr(log);
            for (user, var) in USERS {
                cmd.env(var, password(user));
            }
            servers.push(Proc(cmd.spawn().expect("start nats-server")));
        }
        let nats = Nats { _servers: servers, url, ports, dir: dir.to_path_buf() };
        // Ready when the admin has made the streams and buckets.
        let mut extra = vec!["--replicas".to_string(), n.to_string()];
        if tls {
            extra.extend(tls_flags(verify));
        }
        until_set_up(|| nats.cluster("admin", &nats.url, &["setup"], &extra));
        nats
    }

    /// One server without any authorization (anyone connects; credentials
    /// are not checked), its streams made.
    fn start_plain(dir: &Path) -> Nats {
        std::fs::create_dir_all(dir).unwrap();
        let port = free_port();
        let conf =
            format!("listen: \"127.0.0.1:{port}\"\njetstream {{ store_dir: \"{}\" }}\n", dir.join("js").display());
        std::fs::write(dir.join("s.conf"), conf).unwrap();
        let log = std::fs::File::create(dir.join("nats-0.log")).unwrap();
        let server = Command::new("nats-server")
            .arg("-c")
            .arg(dir.join("s.conf"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap();
        let url = format!("nats://127.0.0.1:{port}");
        wait_for("setup on the open server", 30, || {
            let out = Command::new(cluster_bin()).args(["setup", "--url", &url]).output().unwrap();
            out.status.success().then_some(())
        });
        Nats { _servers: vec![Proc(server)], url, ports: vec![port], dir: dir.to_path_buf() }
    }

    /// `--user USER --password-file FILE`.
    fn auth(&self, user: &str) -> Vec<String> {
        vec![
            "--user".into(),
            user.into(),
            "--password-file".into(),
            self.dir.join(format!("{user}.pw")).display().to_string(),
        ]
    }

    /// `runwire-cluster <cmd> --url URL <auth of user> <extra>`, run to its end.
    fn cluster(&self, user: &str, url: &str, cmd: &[&str], extra: &[String]) -> Output {
        Command::new(cluster_bin())
            .args(cmd)
            .args(["--url", url])
            .args(self.auth(user))
            .args(extra)
            .stdin(Stdio::null())
            .output()
            .unwrap()
    }

    /// Server logs: every permissions violation they report.
    fn violations(&self) -> Vec<String> {
        let mut out = Vec::new();
        for i in 0..self.ports.len() {
            let log = std::fs::read_to_string(self.dir.join(format!("nats-{i}.log"))).unwrap_or_default();
            out.extend(log.lines().filter(|l| l.contains("Violation")).map(str::to_string));
        }
        out
    }
}

fn tls_flags(client_cert: bool) -> Vec<String> {
    let t = tls_dir();
    let mut v = vec!["--tls-ca".to_string(), t.join("ca.pem").display().to_string()];
    if client_cert {
        v.extend([
            "--tls-cert".to_string(),
            t.join("client.pem").display().to_string(),
            "--tls-key".to_string(),
            t.join("client.key").display().to_string(),
        ]);
    }
    v
}

/// A raw NATS client as `user` (what an agent holding the node's
/// credentials could do), with the errors the server sends it.
struct Raw {
    client: async_nats::Client,
    errors: Arc<Mutex<Vec<String>>>,
}

async fn raw(url: &str, user: &str, inbox: Option<&str>) -> Raw {
    let errors = Arc::new(Mutex::new(Vec::new()));
    let e2 = errors.clone();
    let mut o =
        async_nats::ConnectOptions::with_user_and_password(user.into(), password(user)).event_callback(move |ev| {
            let e2 = e2.clone();
            async move {
                if let async_nats::Event::ServerError(e) = ev {
                    e2.lock().unwrap().push(e.to_string());
                }
            }
        });
    if let Some(p) = inbox {
        o = o.custom_inbox_prefix(p);
    }
    let urls: Vec<&str> = url.split(',').collect();
    Raw { client: o.connect(urls.as_slice()).await.unwrap(), errors }
}

impl Raw {
    /// Waits until the server has refused `subject` (its error names it).
    async fn refused(&self, subject: &str) {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let seen =
                self.errors.lock().unwrap().iter().any(|e| {
                    e.to_lowercase().contains("permissions violation") && e.contains(&format!("\"{subject}\""))
                });
            if seen {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "no permissions violation for {subject}: {:?}",
                self.errors.lock().unwrap()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

/// Every message of `stream` whose subject starts with `prefix`, in order
/// (read as the admin).
fn messages(nats: &Nats, stream: &str, prefix: &str) -> Vec<Msg> {
    block_on(async { stream_messages(raw(&nats.url, "admin", None).await.client, stream, prefix).await })
}

/// `runwire-cluster node` as `node-<name>` (its own inbox by default).
fn node_proc(nats: &Nats, url: &str, name: &str, home: &Path, extra: &[String]) -> Proc {
    Proc(
        Command::new(cluster_bin())
            .args(["node", "--url", url, "--node", name, "--poll-ms", "50", "--local", "127.0.0.1:1", "--home"])
            .arg(home)
            .args(nats.auth(&format!("node-{name}")))
            .args(extra)
            .stdin(Stdio::null())
            .spawn()
            .unwrap(),
    )
}

fn control(nats: &Nats, user: &str, node: &str, timeout_ms: u64) -> (Value, String) {
    let out = nats.cluster(
        user,
        &nats.url,
        &["control"],
        &[
            format!("--node={node}"),
            "--path=/runs/r1/tasks/agent/steer".into(),
            r#"--body={"msg":"hi"}"#.into(),
            format!("--timeout-ms={timeout_ms}"),
        ],
    );
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    (serde_json::from_slice(&out.stdout).unwrap(), String::from_utf8_lossy(&out.stderr).into_owned())
}

#[test]
#[cfg_attr(not(tool = "nats-server"), ignore = "needs nats-server: apt-get install nats-server")]
fn a_nodes_credentials_publish_only_as_that_node_and_only_the_hub_sends_control() {
    need(&["nats-server"]);
    let dir = scratch("security-perms");
    let nats = Nats::start(&dir, 3, false, false);
    let (home, hh) = (dir.join("home-a"), dir.join("home-hub"));
    let mut run = FakeRun::new(&home, &dir.join("repo"));
    run.write(Duration::from_millis(2), |i| i >= 250);
    run.finish();
    // The node and the hub, each with its own user: the minimal
    // permissions let them do their work, with no violation at all.
    let mut alpha_node = node_proc(&nats, &nats.url, "alpha", &home, &[]);
    let _hub = Proc(
        Command::new(cluster_bin())
            .args(["hub", "--url", &nats.url, "--home"])
            .arg(&hh)
            .args(nats.auth("hub"))
            .stdin(Stdio::null())
            .spawn()
            .unwrap(),
    );
    run.mirrored(&hh, "alpha", 90);
    run.published_once(|stream, prefix| messages(&nats, stream, prefix), &home, "alpha");
    let beats = nats.cluster("hub", &nats.url, &["nodes"], &[]);
    assert!(beats.status.success(), "{}", String::from_utf8_lossy(&beats.stderr));
    assert!(String::from_utf8_lossy(&beats.stdout).contains(r#""node":"alpha""#));
    // The hub's credentials send control, and the node answers (its own
    // server is not there: 502 from the node, which proves the way back).
    let (a, _) = control(&nats, "hub", "alpha", 5000);
    assert_eq!(a["status"], 502, "{a}");
    assert!(a["body"].as_str().unwrap().contains("127.0.0.1:1"), "{a}");
    assert_eq!(nats.violations(), Vec::<String>::new(), "the node's and hub's own work hit a permission");

    // What an agent holding alpha's credentials could try.
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    rt.block_on(async {
        use futures_util::StreamExt;
        // A witness (the admin sees every subject of the account).
        let admin = raw(&nats.url, "admin", None).await;
        let mut witness = admin.client.subscribe(">").await.unwrap();
        admin.client.flush().await.unwrap();
        let seen = Arc::new(Mutex::new(BTreeSet::new()));
        let s2 = seen.clone();
        tokio::spawn(async move {
            while let Some(m) = witness.next().await {
                s2.lock().unwrap().insert(m.subject.to_string());
            }
        });
        let alpha = raw(&nats.url, "node-alpha", Some("_INBOX_alpha")).await;
        let forbidden = [
            "rwfeed.beta",
            "rwfile.beta.r1.feat=2Ex.jsonl",
            "rwlive.beta.r1.feat=2Ex.impl=2E1=2Elog",
            "$KV.runwire-runs.beta.r1",
            "$KV.runwire-nodes.beta",
            "rwctl.beta",
            "rwctl.alpha",
            "rwfeed.alpha.extra",
        ];
        for s in forbidden {
            alpha.client.publish(s, "forged".into()).await.unwrap();
        }
        // Its own heartbeat key it may write (a positive control for the witness).
        alpha.client.publish("$KV.runwire-nodes.alpha", r#"{"node":"alpha","ts":1}"#.into()).await.unwrap();
        alpha.client.flush().await.unwrap();
        for s in forbidden {
            alpha.refused(s).await;
        }
        // No control request gets through, as a request either.
        let r = tokio::time::timeout(Duration::from_secs(3), alpha.client.request("rwctl.beta", "{}".into())).await;
        assert!(!matches!(r, Ok(Ok(_))), "a node's control request was answered");
        // Nor can it listen to another node's control or the hub's replies.
        for s in ["rwctl.beta", "_INBOX.>", "_INBOX_beta.>"] {
            let _sub = alpha.client.subscribe(s).await.unwrap();
            alpha.client.flush().await.unwrap();
            alpha.refused(s).await;
        }
        // Streams and buckets: neither made, changed, emptied nor removed by a node.
        let mut js = async_nats::jetstream::new(alpha.client.clone());
        js.set_timeout(Duration::from_secs(2));
        let cfg = async_nats::jetstream::stream::Config {
            name: "EVIL".into(),
            subjects: vec!["evil.>".into()],
            ..Default::default()
        };
        assert!(js.create_stream(cfg).await.is_err(), "a node made a stream");
        alpha.refused("$JS.API.STREAM.CREATE.EVIL").await;
        assert!(js.delete_stream(names::FEED_STREAM).await.is_err(), "a node removed a stream");
        alpha.refused(&format!("$JS.API.STREAM.DELETE.{}", names::FEED_STREAM)).await;
        let feed = js.get_stream(names::FILES_STREAM).await.unwrap();
        assert!(feed.purge().await.is_err(), "a node purged a stream");
        alpha.refused(&format!("$JS.API.STREAM.PURGE.{}", names::FILES_STREAM)).await;
        let kv = js.get_key_value(names::RUNS_BUCKET).await.unwrap();
        assert!(kv.put("beta.r2", "forged".into()).await.is_err(), "a node wrote another node's key");
        alpha.refused("$KV.runwire-runs.beta.r2").await;
        // What reached the account: the allowed publish only.
        tokio::time::sleep(Duration::from_millis(500)).await;
        let seen = seen.lock().unwrap().clone();
        assert!(seen.contains("$KV.runwire-nodes.alpha"), "the witness saw nothing: {seen:?}");
        for s in forbidden.iter().chain(&["$JS.API.STREAM.CREATE.EVIL", "$KV.runwire-runs.beta.r2"]) {
            assert!(!seen.contains(*s), "{s} got through");
        }
        // The admin's view: the streams stand, nothing forged is in them.
        let mut ajs = async_nats::jetstream::new(admin.client.clone());
        ajs.set_timeout(Duration::from_secs(5));
        assert!(ajs.get_stream("EVIL").await.is_err());
        for (stream, subject) in [
            (names::FEED_STREAM.to_string(), "rwfeed.beta".to_string()),
            (names::FILES_STREAM.to_string(), "rwfile.beta.r1.feat=2Ex.jsonl".to_string()),
            ("KV_runwire-runs".to_string(), "$KV.runwire-runs.beta.r1".to_string()),
        ] {
            let s = ajs.get_stream(&stream).await.unwrap();
            assert!(s.get_last_raw_message_by_subject(&subject).await.is_err(), "{subject} is in {stream}");
        }
    });
    // Through runwire-cluster too: a node's user cannot send control (the
    // server refuses it, said on stderr; no node ever answers: 504).
    for node in ["beta", "alpha"] {
        let (a, err) = control(&nats, "node-alpha", node, 1500);
        assert_eq!(a["status"], 504, "{a}");
        assert!(err.to_lowercase().contains("permissions violation"), "{err}");
    }
    // The servers log what they refused (so the clean log above meant something).
    let logged = nats.violations();
    assert!(logged.iter().any(|l| l.contains("rwctl.beta") && l.contains("node-alpha")), "{logged:?}");
    // Names: only an admin frees one (a purge of the nodes bucket).
    for user in ["node-alpha", "hub"] {
        let out = nats.cluster(user, &nats.url, &["nodes", "--remove", "beta"], &[]);
        assert!(!out.status.success(), "{user} freed a node's name");
    }
    // A node lost: the hub says so in the feed with its own permissions (rwnode.<node>), no violation.
    alpha_node.kill();
    let lost = wait_for("the node event in the feed stream", 20, || {
        let m = messages(&nats, names::FEED_STREAM, "rwnode.alpha");
        m.into_iter().find(|(_, _, p)| String::from_utf8_lossy(p).contains(r#""state":"lost""#))
    });
    assert!(String::from_utf8_lossy(&lost.2).contains(r#""type":"node""#));
    let after = nats.violations();
    // (The refused purges above are the only violations about the nodes bucket.)
    assert!(!after.iter().any(|l| l.contains("rwnode") || l.contains("DIRECT.GET")), "{after:?}");
    let out = nats.cluster("admin", &nats.url, &["nodes", "--remove", "alpha"], &[]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    drop(nats);
}

#[test]
fn a_server_off_loopback_is_refused_without_tls_and_credentials_never_ride_in_urls() {
    for url in ["nats://10.20.30.40:4222", "nats://127.0.0.1:4222,nats.example.com:4222"] {
        let out = Command::new(cluster_bin()).args(["node", "--url", url, "--node", "alpha"]).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{url}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.starts_with("runwire-cluster: --url: ") && err.contains("needs TLS"), "{err}");
        let out = Command::new(built("runwire-serve"))
            .args(["--listen", "127.0.0.1:0", "--cluster", url, "--node", "alpha"])
            .env("HARNESS_HOME", std::env::temp_dir().join("rw-security-never"))
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{url}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.starts_with("runwire-serve: --cluster: ") && err.contains("needs TLS"), "{err}");
    }
    // With TLS asked for, the same URL passes the check (and fails later, to connect).
    let out = Command::new(cluster_bin())
        .args(["nodes", "--url", "tls://10.20.30.40:4222", "--user", "hub", "--password-file", "/nonexistent"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3), "{}", String::from_utf8_lossy(&out.stderr));
    // Credentials in a URL: refused, and not echoed.
    let out = Command::new(built("runwire-serve"))
        .args(["--listen", "127.0.0.1:0", "--cluster", "nats://hub:s3cret@127.0.0.1:4222", "--hub"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no credentials in the URL") && !err.contains("s3cret"), "{err}");
    // A user without a password (no file, no environment).
    let out = Command::new(cluster_bin())
        .args(["nodes", "--url", "nats://127.0.0.1:1", "--user", "hub"])
        .env_remove("RUNWIRE_CLUSTER_PASSWORD")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("RUNWIRE_CLUSTER_PASSWORD"));
    // A name that is no node name, refused before any connection, naming the flag that gave it.
    for (args, flag) in [(&["nodes", "--remove", "../x"][..], "--remove"), (&["lease", "--node", "a.b"], "--node")] {
        let out = Command::new(cluster_bin()).args(args).args(["--url", "nats://127.0.0.1:1"]).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.starts_with(&format!("runwire-cluster: {flag}: node name ")), "{args:?}: {err}");
    }
}

/// The heartbeats the hub sees (`runwire-cluster nodes`), over `extra`'s TLS.
fn beats(nats: &Nats, extra: &[String]) -> Option<String> {
    let out = nats.cluster("hub", &nats.url, &["nodes"], extra);
    out.status.success().then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

#[test]
#[cfg_attr(not(tool = "nats-server"), ignore = "needs nats-server: apt-get install nats-server")]
fn a_node_connects_over_tls_and_not_without_the_clusters_ca() {
    need(&["nats-server"]);
    for verify in [false, true] {
        let dir = scratch(&format!("security-tls-{verify}"));
        let nats = Nats::start(&dir, 1, true, verify);
        let home = dir.join("home");
        std::fs::create_dir_all(&home).unwrap();
        let tls = tls_flags(verify);
        let _alpha = node_proc(&nats, &nats.url, "alpha", &home, &tls);
        wait_for("alpha's heartbeat over TLS", 30, || beats(&nats, &tls).filter(|b| b.contains(r#""node":"alpha""#)));
        // Without the CA, the server's certificate is not trusted: no connection.
        let out = nats.cluster("hub", &nats.url, &["nodes"], &[]);
        assert_eq!(out.status.code(), Some(3), "{}", String::from_utf8_lossy(&out.stderr));
        if verify {
            // The server verifies clients: the CA alone is not enough.
            let out = nats.cluster("hub", &nats.url, &["nodes"], &tls_flags(false));
            assert_eq!(out.status.code(), Some(3), "{}", String::from_utf8_lossy(&out.stderr));
        }
        // Plain NATS to a TLS server: refused too.
        let plain = format!("nats://127.0.0.1:{}", nats.ports[0]);
        let out = nats.cluster("hub", &plain, &["nodes"], &[]);
        assert_eq!(out.status.code(), Some(3), "{}", String::from_utf8_lossy(&out.stderr));
        drop(nats);
    }
}

#[test]
#[cfg_attr(not(tool = "nats-server"), ignore = "needs nats-server: apt-get install nats-server")]
fn a_token_comes_from_a_file_or_the_environment_never_the_command_line() {
    need(&["nats-server"]);
    let dir = scratch("security-token");
    let token = format!("tok-{}", std::process::id());
    let port = free_port();
    let conf = format!(
        "listen: \"127.0.0.1:{port}\"\njetstream {{ store_dir: \"{}\" }}\nauthorization {{ token: \"{token}\" }}\n",
        dir.join("js").display()
    );
    let _server = nats_server(&dir, "s", &conf, "nats.log");
    let url = format!("nats://127.0.0.1:{port}");
    let tf = dir.join("token");
    std::fs::write(&tf, format!("{token}\n")).unwrap();
    let run = |args: &[&str], env: Option<&str>| {
        let mut c = Command::new(cluster_bin());
        c.args(args).args(["--url", &url]).env_remove("RUNWIRE_CLUSTER_TOKEN").stdin(Stdio::null());
        if let Some(t) = env {
            c.env("RUNWIRE_CLUSTER_TOKEN", t);
        }
        c.output().unwrap()
    };
    let tfs = tf.display().to_string();
    wait_for("setup with the token file", 30, || {
        run(&["setup", "--token-file", &tfs], None).status.success().then_some(())
    });
    // From the environment; without it, or with a wrong one, refused.
    let ok = run(&["nodes"], Some(&token));
    assert!(ok.status.success(), "{}", String::from_utf8_lossy(&ok.stderr));
    for env in [None, Some("wrong")] {
        let out = run(&["nodes"], env);
        assert_eq!(out.status.code(), Some(3), "{env:?}: {}", String::from_utf8_lossy(&out.stderr));
    }
    // A token in the URL: refused before connecting.
    let out = Command::new(cluster_bin())
        .args(["nodes", "--url", &format!("nats://{token}@127.0.0.1:{port}")])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(!String::from_utf8_lossy(&out.stderr).contains(&token));
}

/// A TCP proxy in front of one NATS server that can cut its clients off:
/// while cut, nothing is forwarded either way and new connections hang
/// (a partition, not a reset); when the cut ends, the connections it held
/// are closed and new ones go through again.
struct Proxy {
    port: u16,
    cut: Arc<AtomicBool>,
    held: Arc<Mutex<Vec<TcpStream>>>,
}

impl Proxy {
    fn start(upstream: u16) -> Proxy {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let cut = Arc::new(AtomicBool::new(false));
        let held: Arc<Mutex<Vec<TcpStream>>> = Arc::new(Mutex::new(Vec::new()));
        let (c2, h2) = (cut.clone(), held.clone());
        std::thread::spawn(move || {
            for client in l.incoming().flatten() {
                h2.lock().unwrap().push(client.try_clone().unwrap());
                if c2.load(Ordering::SeqCst) {
                    continue; // held, never answered
                }
                let Ok(server) = TcpStream::connect(("127.0.0.1", upstream)) else { continue };
                h2.lock().unwrap().push(server.try_clone().unwrap());
                for (from, to) in [(client.try_clone().unwrap(), server.try_clone().unwrap()), (server, client)] {
                    let cut = c2.clone();
                    std::thread::spawn(move || pump(from, to, &cut));
                }
            }
        });
        Proxy { port, cut, held }
    }

    fn cut(&self) {
        self.cut.store(true, Ordering::SeqCst);
    }

    fn heal(&self) {
        for s in self.held.lock().unwrap().drain(..) {
            let _ = s.shutdown(Shutdown::Both);
        }
        self.cut.store(false, Ordering::SeqCst);
    }
}

fn pump(mut from: TcpStream, mut to: TcpStream, cut: &AtomicBool) {
    from.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        if cut.load(Ordering::SeqCst) {
            // Partitioned: nothing read, nothing sent, until the connection is closed.
            std::thread::sleep(Duration::from_millis(20));
            if from.peer_addr().is_err() {
                return;
            }
            continue;
        }
        match from.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                // Read while the cut began: lost with the connection.
                if cut.load(Ordering::SeqCst) || to.write_all(&buf[..n]).is_err() {
                    break;
                }
            }
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {}
            Err(_) => break,
        }
    }
    let _ = to.shutdown(Shutdown::Both);
    let _ = from.shutdown(Shutdown::Both);
}

/// The cut's length: 30 s (issue 29); `RUNWIRE_CUT_SECS` shortens it for a
/// local run, never in CI.
fn cut_secs() -> u64 {
    match std::env::var("RUNWIRE_CUT_SECS").ok().and_then(|s| s.parse().ok()) {
        Some(s) if !tools::in_ci() => s,
        _ => 30,
    }
}

#[test]
#[cfg_attr(not(tool = "nats-server"), ignore = "needs nats-server: apt-get install nats-server")]
fn a_node_cut_from_the_cluster_for_30_s_catches_up_in_order_with_nothing_lost_or_duplicated() {
    need(&["nats-server"]);
    let dir = scratch("security-cut");
    let nats = Nats::start(&dir, 3, false, false);
    let proxy = Proxy::start(nats.ports[0]);
    let (home, hh) = (dir.join("home-a"), dir.join("home-hub"));
    let mut run = FakeRun::new(&home, &dir.join("repo"));
    // The node's server reaches the cluster through the proxy only; the
    // hub's, directly. Each with its own user, through runwire-serve's flags.
    let pw = |u: &str| dir.join(format!("{u}.pw")).display().to_string();
    let flags = |url: String, user: &str| -> Vec<String> {
        vec!["--cluster".into(), url, "--cluster-user".into(), user.into(), "--cluster-password-file".into(), pw(user)]
    };
    let mut nflags = flags(format!("nats://127.0.0.1:{}", proxy.port), "node-alpha");
    nflags.extend(["--node".into(), "alpha".into()]);
    let node = Serve::start(&home, &nflags.iter().map(String::as_str).collect::<Vec<_>>(), &[]);
    let mut hflags = flags(nats.url.clone(), "hub");
    hflags.push("--hub".into());
    let hub = Serve::start(&hh, &hflags.iter().map(String::as_str).collect::<Vec<_>>(), &[]);
    let mirror_log = run.mirror(&hh, "alpha").join("feat.x.impl.1.log");
    let log = run.dir.join("feat.x.impl.1.log");
    let len = |p: &Path| std::fs::metadata(p).map(|m| m.len()).unwrap_or(0);
    // Before the cut: the agent's lines reach the hub.
    run.write(Duration::from_millis(5), |i| i >= 200);
    wait_for("the first lines at the hub", 60, || (len(&mirror_log) == len(&log)).then_some(()));
    // The cut: the agent goes on for 30 s.
    let secs = cut_secs();
    proxy.cut();
    let cut_at = Instant::now();
    let at_cut = len(&mirror_log);
    run.write(Duration::from_millis(10), |_| cut_at.elapsed() >= Duration::from_secs(secs));
    let (during, written) = (len(&mirror_log), len(&log));
    // Nothing passed the cut (a line or two in flight when it began at most).
    assert!(during < at_cut + 4096 && written > at_cut + 20_000, "{at_cut} {during} {written}");
    proxy.heal();
    // After it, the agent goes on and ends.
    let end = run.n + 200;
    run.write(Duration::from_millis(5), |i| i >= end);
    run.finish();
    run.mirrored(&hh, "alpha", 120);
    run.published_once(|stream, prefix| messages(&nats, stream, prefix), &home, "alpha");
    // The hub's task stream is the node's own, event for event (the run's
    // id aside), and no event id comes twice.
    let id = run.pointer.run_id.clone();
    let hub_id = names::hub_run_id("alpha", &id);
    let mine = node.stream(&format!("/runs/{id}/tasks/impl.1/stream"));
    let theirs: Vec<String> = hub
        .stream(&format!("/runs/{hub_id}/tasks/impl.1/stream"))
        .into_iter()
        .map(|l| l.replace(&format!(r#""run":"{hub_id}""#), &format!(r#""run":"{id}""#)))
        .collect();
    assert!(mine.len() as u64 > run.n, "{} events for {} lines", mine.len(), run.n);
    assert_eq!(theirs, mine, "the hub's task stream differs from the node's");
    let ids: Vec<&String> = theirs.iter().filter(|l| l.starts_with("id:")).collect();
    assert_eq!(ids.iter().collect::<BTreeSet<_>>().len(), ids.len(), "an event id twice");
    // Every line of the agent's, once and in order, at the hub.
    let lines: Vec<u64> = std::fs::read_to_string(&mirror_log)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap()["n"].as_u64().unwrap())
        .collect();
    assert_eq!(lines, (1..=run.n).collect::<Vec<_>>());
    assert!(cut_at.elapsed() >= Duration::from_secs(secs));
    // Control through the hub (its user, passed on by runwire-serve) reaches
    // the node (back through the proxy, replying from its own user) and is
    // answered as the node's own route answers it.
    let steer = format!("/runs/{id}/tasks/impl.1/steer");
    let own = node.request("POST", &steer, r#"{"msg":"use the other API"}"#);
    let fwd = hub.request("POST", &format!("/runs/{hub_id}/tasks/impl.1/steer"), r#"{"msg":"use the other API"}"#);
    assert_eq!(fwd, own);
    assert!(![502, 503, 504].contains(&fwd.0), "{} {}", fwd.0, String::from_utf8_lossy(&fwd.1));
    drop((node, hub, nats));
}

/// POST at `srv` with `headers`: status and body.
fn post(srv: &Serve, path: &str, headers: &str, body: &str) -> (u16, String) {
    let mut c = srv.send("POST", path, headers, body);
    c.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let mut raw = Vec::new();
    let _ = c.read_to_end(&mut raw);
    let text = String::from_utf8_lossy(&raw).to_string();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or_else(|| panic!("not an HTTP answer: {text:?}"));
    (head.split(' ').nth(1).and_then(|c| c.parse().ok()).unwrap(), body.to_string())
}

#[test]
#[cfg_attr(not(tool = "nats-server"), ignore = "needs nats-server: apt-get install nats-server")]
fn a_node_whose_server_needs_a_token_has_no_weaker_door_in_the_cluster() {
    need(&["nats-server"]);
    let dir = scratch("security-door");
    let token = format!("a-token-of-the-node-{}", std::process::id());
    let tf = dir.join("token");
    std::fs::write(&tf, &token).unwrap();
    let tfs = tf.display().to_string();
    let bearer = format!("Authorization: Bearer {token}\r\n");
    // A token for HTTP and no credentials for the cluster: refused at start, saying why.
    let out = Command::new(built("runwire-serve"))
        .args(["--listen", "127.0.0.1:0", "--token-file", &tfs, "--cluster", "nats://127.0.0.1:1", "--node", "alpha"])
        .env("HARNESS_HOME", dir.join("never"))
        .env_remove("RUNWIRE_CLUSTER_TOKEN")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.starts_with("runwire-serve: --cluster: ") && err.contains("credentials"), "{err}");

    // Credentials on a cluster that lets anyone in (no authorization
    // configured: a client's credentials are not checked): the node answers
    // no control request, and says so.
    let open = Nats::start_plain(&dir.join("open"));
    let cf = dir.join("cluster-token");
    std::fs::write(&cf, "anything").unwrap();
    let home = dir.join("home-open");
    let node = Serve::start(
        &home,
        &[
            "--token-file",
            &tfs,
            "--cluster",
            &open.url,
            "--cluster-token-file",
            cf.to_str().unwrap(),
            "--node",
            "alpha",
        ],
        &[],
    );
    wait_for("the node to say it refuses control", 30, || node.stderr().contains("control: refused").then_some(()));
    // Anyone: an answer and an AG-UI run over alpha's control subject, unanswered.
    let answer = Command::new(cluster_bin())
        .args(["control", "--url", &open.url, "--node", "alpha", "--path", "/runs/r/tasks/agent/answer"])
        .args(["--body", r#"{"request":"0","behavior":"allow"}"#, "--timeout-ms", "2000"])
        .output()
        .unwrap();
    let a: Value = serde_json::from_slice(&answer.stdout).unwrap();
    assert_eq!(a["status"], 503, "{a}");
    let mut agui = Command::new(cluster_bin())
        .args(["agui", "--url", &open.url, "--node", "alpha", "--timeout-ms", "2000"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    agui.stdin.take().unwrap().write_all(run_input("t", "r", "hi", Value::Null, Value::Null).as_bytes()).unwrap();
    let out = agui.wait_with_output().unwrap();
    let line: Value = serde_json::from_str(String::from_utf8_lossy(&out.stdout).lines().next().unwrap()).unwrap();
    assert_eq!(line["status"], 503, "{line}");
    drop(node);

    // Credentials on a cluster that checks them (the accounts): nobody
    // without credentials gets in, another node's user cannot send control,
    // and the hub's control is answered as the node's own route answers.
    let sec = dir.join("accounts");
    std::fs::create_dir_all(&sec).unwrap();
    let nats = Nats::start(&sec, 3, false, false);
    let pw = |u: &str| sec.join(format!("{u}.pw")).display().to_string();
    let na = pw("node-alpha");
    let node = Serve::start(
        &dir.join("home-alpha"),
        &[
            "--token-file",
            &tfs,
            "--cluster",
            &nats.url,
            "--cluster-user",
            "node-alpha",
            "--cluster-password-file",
            &na,
            "--node",
            "alpha",
        ],
        &[],
    );
    let hp = pw("hub");
    // The hub checks its callers' tokens (alpha takes no hub's command otherwise).
    let hub_tokens = dir.join("hub-tokens");
    std::fs::write(&hub_tokens, "ana:ana-token-0123456789abcdef\n").unwrap();
    let hub = Serve::start(
        &dir.join("home-hub"),
        &["--cluster", &nats.url, "--cluster-user", "hub", "--cluster-password-file", &hp, "--hub"]
            .into_iter()
            .chain(["--token-file", hub_tokens.to_str().unwrap()])
            .collect::<Vec<_>>(),
        &[],
    );
    let anon = Command::new(cluster_bin())
        .args(["control", "--url", &nats.url, "--node", "alpha", "--path", "/runs/r/tasks/agent/answer"])
        .args(["--body", r#"{"request":"0","behavior":"allow"}"#, "--timeout-ms", "2000"])
        .env_remove("RUNWIRE_CLUSTER_TOKEN")
        .output()
        .unwrap();
    assert_eq!(anon.status.code(), Some(3), "{}", String::from_utf8_lossy(&anon.stderr));
    let (a, err) = control(&nats, "node-beta", "alpha", 1500);
    assert_eq!(a["status"], 504, "{a}");
    assert!(err.to_lowercase().contains("permissions violation"), "{err}");
    let own = post(&node, "/runs/nosuch/tasks/agent/steer", &bearer, r#"{"msg":"hi"}"#);
    let fwd = wait_for("alpha's control through the hub", 30, || {
        let f = post(
            &hub,
            "/runs/alpha.nosuch/tasks/agent/steer",
            "Authorization: Bearer ana-token-0123456789abcdef\r\n",
            r#"{"msg":"hi"}"#,
        );
        (f.0 != 503).then_some(f)
    });
    assert_eq!(fwd, own);
    assert_ne!(own.0, 401, "{own:?}");
    drop((node, hub, nats, open));
}

/// A command a hub forwards is recorded at the node with the person the
/// hub's caller is and the hub's name (`<person>@<hub>`, `--hub-name`),
/// both taken from the node's sidecar only: the same headers sent straight
/// to the node with another token change nothing. Before: the record named
/// the person only, not which hub. The inbox's 8 MiB budget holds through
/// the hub as at the node's own routes.
#[test]
#[cfg_attr(not(tool = "nats-server"), ignore = "needs nats-server: apt-get install nats-server")]
fn a_command_forwarded_by_a_hub_is_recorded_with_the_person_and_the_hub() {
    need(&["nats-server"]);
    let dir = scratch("security-actor");
    let sec = dir.join("accounts");
    std::fs::create_dir_all(&sec).unwrap();
    let nats = Nats::start(&sec, 3, false, false);
    let pw = |u: &str| sec.join(format!("{u}.pw")).display().to_string();
    // alpha's server: named tokens, the sidecar's own (`cluster`) among them.
    let node_tokens = dir.join("node-tokens");
    std::fs::write(&node_tokens, "cluster:sidecar-token-0123456789\nops:ops-token-0123456789abcdef\n").unwrap();
    let home = dir.join("home-alpha");
    std::fs::create_dir_all(&home).unwrap();
    let (na, hp) = (pw("node-alpha"), pw("hub"));
    let node = Serve::start(
        &home,
        &["--token-file", node_tokens.to_str().unwrap(), "--cluster", &nats.url, "--cluster-user", "node-alpha"]
            .into_iter()
            .chain(["--cluster-password-file", &na, "--node", "alpha"])
            .collect::<Vec<_>>(),
        &[],
    );
    // A run of alpha's with a steer inbox (no supervisor: the inbox takes a steer, and records who sent it).
    let run = FakeRun::new(&home, &dir.join("repo"));
    let inbox = run.dir.join("feat.x.steer.jsonl");
    std::fs::write(&inbox, "").unwrap();
    // The hub: a person's token, and its name.
    let hub_tokens = dir.join("hub-tokens");
    std::fs::write(&hub_tokens, "ana:ana-token-0123456789abcdef\nbob:bob-token-0123456789abcdef\n").unwrap();
    let hub = Serve::start(
        &dir.join("home-hub"),
        &["--token-file", hub_tokens.to_str().unwrap(), "--cluster", &nats.url, "--cluster-user", "hub"]
            .into_iter()
            .chain(["--cluster-password-file", &hp, "--hub", "--hub-name", "hub-east"])
            .collect::<Vec<_>>(),
        &[],
    );
    let ana = "Authorization: Bearer ana-token-0123456789abcdef\r\n";
    let hub_id = names::hub_run_id("alpha", &run.pointer.run_id);
    let steer = format!("/runs/{hub_id}/tasks/impl.1/steer");
    let (code, body) = wait_for("the steer through the hub", 60, || {
        let (code, body) = post(&hub, &steer, ana, r#"{"msg":"use the other API"}"#);
        (![404, 503].contains(&code)).then_some((code, body))
    });
    assert_eq!(code, 202, "{body}");
    let records = || -> Vec<Value> {
        std::fs::read_to_string(&inbox).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect()
    };
    let got = records();
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!((got[0]["actor"].as_str(), got[0]["verb"].as_str()), (Some("ana@hub-east"), Some("steer")), "{got:?}");
    // The inbox's budget (8 MiB) holds through the hub too: at it, the
    // node's server refuses the steer, 409 through the hub, and writes nothing.
    let line = std::fs::metadata(&inbox).unwrap().len();
    std::fs::File::options().write(true).open(&inbox).unwrap().set_len(8 << 20).unwrap();
    let (code, body) = post(&hub, &steer, ana, r#"{"msg":"past the budget"}"#);
    assert_eq!(code, 409, "{body}");
    assert!(body.contains("8388608") && body.contains("nothing was written"), "{body}");
    assert_eq!(std::fs::metadata(&inbox).unwrap().len(), 8 << 20, "the inbox was written");
    std::fs::File::options().write(true).open(&inbox).unwrap().set_len(line).unwrap();
    // A key is its caller's through the hub and at the node: Ana's keyed
    // steer, then Bob's own under the same key, each acted on once; Ana's
    // retry is her replay. Nobody gets another's answer.
    let keyed = |who: &str, msg: &str| {
        let h = format!("Authorization: Bearer {who}-token-0123456789abcdef\r\nIdempotency-Key: click-same\r\n");
        post(&hub, &steer, &h, &format!(r#"{{"msg":"{msg}"}}"#))
    };
    assert_eq!(keyed("ana", "keyed by ana").0, 202);
    assert_eq!(keyed("bob", "keyed by bob").0, 202);
    assert_eq!(keyed("ana", "keyed by ana").0, 202);
    let got = records();
    let keyed: Vec<(&str, &str)> =
        got[1..].iter().map(|r| (r["actor"].as_str().unwrap(), r["msg"].as_str().unwrap())).collect();
    assert_eq!(keyed, [("ana@hub-east", "keyed by ana"), ("bob@hub-east", "keyed by bob")], "{got:?}");
    // At another hub (whose own keys know nothing), Ana's key with another
    // command is refused by the node, 422, and nothing is done; with the
    // same command it is her replay. The node answered any command under a
    // key it had seen with the first one's reply: a kill said 200 and
    // killed nothing.
    let h = "Authorization: Bearer ana-token-0123456789abcdef\r\nIdempotency-Key: click-same\r\n";
    // A hub of its own for each ask: its own keys know nothing of the key.
    let ask = |name: &str, msg: &str| {
        let other = Serve::start(
            &dir.join(format!("home-{name}")),
            &["--token-file", hub_tokens.to_str().unwrap(), "--cluster", &nats.url, "--cluster-user", "hub"]
                .into_iter()
                .chain(["--cluster-password-file", &hp, "--hub", "--hub-name", name])
                .collect::<Vec<_>>(),
            &[],
        );
        wait_for("the keyed steer through another hub", 60, || {
            let (code, body) = post(&other, &steer, h, &format!(r#"{{"msg":"{msg}"}}"#));
            (![404, 503].contains(&code)).then_some((code, body))
        })
    };
    assert_eq!(ask("hub-west", "keyed by ana").0, 202, "the same command: the replay");
    let (code, body) = ask("hub-north", "another command");
    assert_eq!(code, 422, "{body}");
    assert!(body.contains("used for another command"), "{body}");
    assert_eq!(records().len(), 3, "nothing more reached alpha: {:?}", records());
    // Straight to the node with a person's token: the person, whatever the headers say.
    let own = format!("/runs/{}/tasks/impl.1/steer", run.pointer.run_id);
    let forged = "Authorization: Bearer ops-token-0123456789abcdef\r\nRw-Actor: ana\r\nRw-Hub: hub-east\r\n";
    let (code, body) = post(&node, &own, forged, r#"{"msg":"again"}"#);
    assert_eq!(code, 202, "{body}");
    let got = records();
    assert_eq!(got.len(), 4, "{got:?}");
    assert_eq!(got[3]["actor"], "ops", "{got:?}");
    // A hub that checks no token: alpha's server needs one, so alpha takes
    // neither its commands nor its AG-UI runs (anyone who reached that hub
    // drove alpha). Nothing is done.
    let open = Serve::start(
        &dir.join("home-open-hub"),
        &[
            "--cluster",
            &nats.url,
            "--cluster-user",
            "hub",
            "--cluster-password-file",
            &hp,
            "--hub",
            "--hub-name",
            "hub-open",
        ],
        &[],
    );
    let (code, body) = wait_for("the steer through the open hub", 60, || {
        let (code, body) = post(&open, &steer, "", r#"{"msg":"from anyone"}"#);
        (![404, 503].contains(&code)).then_some((code, body))
    });
    assert_eq!(code, 403, "{body}");
    assert!(body.contains("checks none") && body.contains("--token-file"), "{body}");
    let agui = run_input("open-t", "open-r", "hi", Value::Null, serde_json::json!({"node": "alpha"}));
    let (code, body) = open.request("POST", "/agui", &agui);
    let body = String::from_utf8_lossy(&body);
    assert_eq!(code, 403, "{body}");
    assert!(body.contains("checks none"), "{body}");
    assert_eq!(records().len(), 4, "nothing reached alpha");
    // Nor its thread reads: alpha reads nothing for a hub that checks no token.
    let (code, body) = open.request("GET", "/agui/thread?threadId=open-t", "");
    let body = String::from_utf8_lossy(&body);
    assert_eq!(code, 403, "{body}");
    assert!(body.contains("checks none"), "{body}");
    // A hub that checks its callers' tokens: the caller's token first (the
    // hub's own rule), then alpha's own route answers (its token the
    // sidecar's): no such thread there, said by alpha.
    let q = "/agui/thread?threadId=open-t";
    assert_eq!(hub.request("GET", q, "").0, 401);
    let (code, body) = hub.request_with("GET", q, ana, "");
    let body = String::from_utf8_lossy(&body);
    assert_eq!(code, 404, "{body}");
    assert!(body.contains("node alpha: no thread"), "{body}");
    drop(open);
    // A hub name that is not a name is refused at start.
    let out = Command::new(built("runwire-serve"))
        .args(["--listen", "127.0.0.1:0", "--cluster", &nats.url, "--hub", "--hub-name", "a b"])
        .env("HARNESS_HOME", dir.join("never"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--hub-name"));
    drop((node, hub, nats));
}

/// An AG-UI run a hub forwards acts at the node for the hub's caller too:
/// its answer is journaled `<person>@<hub>` (the sidecar's token alone may
/// say so), as a forwarded command is. Before: the node journaled the name
/// of its sidecar's token, `cluster`.
#[test]
#[cfg_attr(not(tool = "nats-server"), ignore = "needs nats-server: apt-get install nats-server")]
fn an_agui_run_forwarded_by_a_hub_is_journaled_at_the_node_as_the_person_at_the_hub() {
    need(&["nats-server"]);
    let s = Secured::start("security-agui-actor", &[], &[]);
    let (dir, home, hub) = (&s.dir, &s.home, &s.hub);
    let ana = "Authorization: Bearer ana-token-0123456789abcdef\r\n";
    let first = run_input("ta", "ra1", "go", Value::Null, serde_json::json!({"node": "beta"}));
    let body = wait_for("beta to take the run", 60, || {
        let (code, body) = hub.request_with("POST", "/agui", ana, &first);
        assert!(code == 200 || code == 503, "{code} {}", String::from_utf8_lossy(&body));
        (code == 200).then_some(body)
    });
    let ints = hub_studio::interrupts(&events(&body));
    assert_eq!(ints.len(), 1);
    let id = ints[0]["id"].as_str().unwrap().to_string();
    let (code, body) = hub.request_with("POST", "/agui", ana, &hub_studio::answer("ta", "ra2", &id, true));
    assert_eq!(code, 200, "{}", String::from_utf8_lossy(&body));
    assert_eq!(hub_studio::answers_to_agent(dir).len(), 1);
    // beta's journals: the answer is ana's at hub-east, not the sidecar token's name.
    let answered: Vec<Value> = journal(home).into_iter().filter(|r| r["input"] == "answered").collect();
    assert_eq!(answered.len(), 1, "{answered:?}");
    assert_eq!(answered[0]["by"], "ana@hub-east", "{}", answered[0]);
    // Through the door a forwarded command takes too: the hub's.
    assert_eq!(answered[0]["door"], "hub", "{}", answered[0]);
}

/// Node beta (interactive sessions of the stand-in agent, asking once; named
/// tokens, its sidecar's own `cluster` among them, and `ops`) and hub
/// `hub-east` (token `ana`) on a 3-server cluster running
/// examples/cluster/accounts.conf, each with its credentials; `beta_extra`
/// and `hub_extra` are more flags.
struct Secured {
    // Dropped in this order: the servers, then the cluster, then the directory.
    beta: Serve,
    hub: Serve,
    nats: Nats,
    home: PathBuf,
    dir: Scratch,
}

impl Secured {
    fn start(name: &str, beta_extra: &[&str], hub_extra: &[&str]) -> Secured {
        let dir = scratch(name);
        let sec = dir.join("accounts");
        std::fs::create_dir_all(&sec).unwrap();
        let nats = Nats::start(&sec, 3, false, false);
        let pw = |u: &str| sec.join(format!("{u}.pw")).display().to_string();
        let (nb, hp) = (pw("node-beta"), pw("hub"));
        let node_tokens = dir.join("node-tokens");
        std::fs::write(&node_tokens, "cluster:sidecar-token-0123456789\nops:ops-token-0123456789abcdef\n").unwrap();
        let (log, state) = (dir.join("agent-input.jsonl"), dir.join("agent-processes"));
        let agent = built("examples/trust-agent").display().to_string();
        let home = dir.join("home-beta");
        let reqs = hub_studio::requests();
        let beta = Serve::start(
            &home,
            &["--agent", "claude", "--interactive", "--agent-cmd", &agent, "--cluster", &nats.url, "--node", "beta"]
                .into_iter()
                .chain(["--token-file", node_tokens.to_str().unwrap(), "--cluster-user", "node-beta"])
                .chain(["--cluster-password-file", &nb])
                .chain(beta_extra.iter().copied())
                .collect::<Vec<_>>(),
            &[
                ("TRUST_PROTO", "claude"),
                ("TRUST_LOG", log.to_str().unwrap()),
                ("TRUST_STATE", state.to_str().unwrap()),
                ("TRUST_REQUESTS", &reqs),
            ],
        );
        let hub_tokens = dir.join("hub-tokens");
        std::fs::write(&hub_tokens, "ana:ana-token-0123456789abcdef\n").unwrap();
        let hub = Serve::start(
            &dir.join("home-hub"),
            &["--cluster", &nats.url, "--hub", "--hub-name", "hub-east", "--token-file", hub_tokens.to_str().unwrap()]
                .into_iter()
                .chain(["--cluster-user", "hub", "--cluster-password-file", &hp])
                .chain(hub_extra.iter().copied())
                .collect::<Vec<_>>(),
            &[],
        );
        Secured { beta, hub, nats, home, dir }
    }
}

/// The address approval links are minted for in the link tests: the hub's.
const PUBLIC: &str = "https://rw-hub.example.test";

impl Secured {
    /// `start`, with beta minting approval links under the hub's address
    /// (`--public-url` and a link secret, the file's path returned with
    /// the directory holding it) and the hub answering them (`--public-url`
    /// alone).
    fn with_links(name: &str) -> (Secured, (Scratch, PathBuf)) {
        let keep = scratch(&format!("{name}-secret"));
        let secret = keep.join("link-secret");
        std::fs::write(&secret, "0123456789abcdef0123456789abcdef-beta\n").unwrap();
        let s = Secured::start(
            name,
            &["--public-url", PUBLIC, "--link-secret-file", secret.to_str().unwrap()],
            &["--public-url", PUBLIC],
        );
        (s, (keep, secret))
    }
}

/// Every record of every run journal in `home`.
fn journal(home: &Path) -> Vec<Value> {
    let mut v = Vec::new();
    for e in std::fs::read_dir(home.join("serve/runstate")).unwrap().flatten() {
        if e.path().extension().is_some_and(|x| x == "jsonl") {
            for l in std::fs::read_to_string(e.path()).unwrap().lines() {
                v.push(serde_json::from_str(l).unwrap_or_default());
            }
        }
    }
    v
}

/// One request to `srv` with `headers` and a body of `ctype`: the status,
/// the response head and the body.
fn link_request(
    srv: &Serve,
    method: &str,
    path: &str,
    headers: &str,
    ctype: &str,
    body: &str,
) -> (u16, String, String) {
    let mut c = TcpStream::connect(("127.0.0.1", srv.port)).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    write!(
        c,
        "{method} {path} HTTP/1.0\r\nHost: 127.0.0.1\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\n{headers}\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut raw = Vec::new();
    let _ = c.read_to_end(&mut raw);
    let i = raw.windows(4).position(|w| w == b"\r\n\r\n").expect("an HTTP response");
    let head = String::from_utf8_lossy(&raw[..i]).into_owned();
    let code = head.split(' ').nth(1).and_then(|c| c.parse().ok()).unwrap();
    (code, head, String::from_utf8_lossy(&raw[i + 4..]).into_owned())
}

/// Issue 37's open end: an approval link minted at a node behind a hub
/// (the node's `--public-url` is the hub's address, the hub's has no
/// secret) is answered at the hub. The hub reads which node minted it
/// from the token and forwards `GET`/`POST /a/<token>` there as a
/// command (its key, its budget, the node's "go"); the node checks the
/// token with its own secret, acts once, and journals the answer as the
/// link's name at that hub. A hub holds no secret: a changed token is
/// refused by the node, a token naming a node that is not connected is
/// 503 at once, and nothing reaches the agent but the one allow.
#[test]
#[cfg_attr(not(tool = "nats-server"), ignore = "needs nats-server: apt-get install nats-server")]
fn an_approval_link_minted_at_a_node_is_answered_once_at_the_hub() {
    use data_encoding::BASE64URL_NOPAD as B64;
    need(&["nats-server"]);
    // The hub behind the same public name, with no link secret (before: refused, --public-url required one).
    let (s, _secret) = Secured::with_links("security-links-at-hub");
    let (dir, home, beta, hub) = (&s.dir, &s.home, &s.beta, &s.hub);
    // ops chats at beta's own server; the link is minted for ops.
    let ops = "Authorization: Bearer ops-token-0123456789abcdef\r\n";
    let (code, body) = beta.request_with("POST", "/agui", ops, &run_input("tl", "rl1", "go", Value::Null, Value::Null));
    assert_eq!(code, 200, "{}", String::from_utf8_lossy(&body));
    assert_eq!(hub_studio::interrupts(&events(&body)).len(), 1);
    // The hub has it as a node's (its sidecar is connected: the node's page can be asked for).
    wait_for("the hub to list beta's run", 30, || {
        let runs = hub.request_with("GET", "/runs", "Authorization: Bearer ana-token-0123456789abcdef\r\n", "");
        String::from_utf8_lossy(&runs.1).contains("\"beta.").then_some(())
    });
    // The link beta journaled with the request: under the hub's address, naming beta.
    let link = wait_for("the requested record's link", 10, || {
        journal(home)
            .into_iter()
            .find(|r| r["input"] == "requested")
            .and_then(|r| r["links"][0].as_str().map(String::from))
    });
    let path =
        link.strip_prefix(PUBLIC).unwrap_or_else(|| panic!("a link under the hub's address: {link}")).to_string();
    let token = path.strip_prefix("/a/").unwrap();
    let claims: Value =
        serde_json::from_slice(&B64.decode(token.split('.').next().unwrap().as_bytes()).unwrap()).unwrap();
    assert_eq!(claims["o"], "beta", "{claims}");
    // The hub's own view of beta's run offers the link too: the hub recorded
    // its address (`links/prefixes`) at its start, as a server minting links
    // does, and passes on only links under a recorded one.
    let ana = "Authorization: Bearer ana-token-0123456789abcdef\r\n";
    wait_for("the hub's view of beta's run to offer the link", 30, || {
        let (_, runs) = hub.request_with("GET", "/runs", ana, "");
        let text = String::from_utf8_lossy(&runs);
        let at = text.find("\"beta.")? + 1;
        let id = &text[at..at + text[at..].find('"')?];
        let (code, shown) = hub.request_with("GET", &format!("/runs/{id}"), ana, "");
        let shown: Value = serde_json::from_slice(&shown).ok()?;
        (code == 200 && shown["inputRequests"][0]["links"][0].as_str() == Some(link.as_str())).then_some(())
    });
    // The page, at the hub: beta's, relayed as HTML with the link route's headers; GET never acts.
    // (503 until beta's control subscription is known at the hub's server, as for any command.)
    // A chat app's client keys every request: the GET keeps no key (the
    // node kept its page under the key, and the POST that followed with it
    // got the page back, answering nothing).
    let key = "Idempotency-Key: chat-app-1\r\n";
    let (head, page) = wait_for("beta to answer at the hub", 30, || {
        let (code, head, page) = link_request(hub, "GET", &path, key, "text/plain", "");
        assert!(code == 200 || code == 503, "{code} {page}");
        (code == 200).then_some((head, page))
    });
    assert!(head.contains("text/html") && head.contains("Referrer-Policy: same-origin"), "{head}");
    assert!(page.contains("<b>Bash</b>") && page.contains("value=\"allow\""), "{page}");
    // A changed token: the hub cannot tell, beta can, and refuses it.
    let mac = token.rsplit('.').next().unwrap();
    let flipped = if mac.starts_with('A') { 'B' } else { 'A' };
    let tampered = format!("{}{flipped}{}", &path[..path.len() - mac.len()], &mac[1..]);
    let (code, _, page) =
        link_request(hub, "POST", &tampered, "", "application/x-www-form-urlencoded", "decision=allow");
    assert_eq!(code, 403, "{page}");
    assert!(page.contains("not valid"), "{page}");
    // A token naming a node no one runs: 503 at once, from the hub's side.
    let mut other = claims.as_object().cloned().unwrap();
    other.insert("o".into(), "gamma".into());
    let ghost = B64.encode(&serde_json::to_vec(&other).unwrap());
    let (code, _, page) = link_request(hub, "GET", &format!("/a/{ghost}.{mac}"), "", "text/plain", "");
    assert_eq!(code, 503, "{page}");
    assert!(
        page.starts_with("<!doctype html>") && page.contains("gamma") && page.contains("Nothing was done"),
        "{page}"
    );
    assert!(hub_studio::answers_to_agent(dir).is_empty(), "nothing acted yet");
    // The answer, as the page's form posts it (its Origin the public one).
    let origin = format!("Origin: {PUBLIC}\r\n");
    let (code, head, page) = link_request(
        hub,
        "POST",
        &path,
        &format!("{origin}{key}"),
        "application/x-www-form-urlencoded",
        "decision=allow",
    );
    assert_eq!(code, 200, "{page}");
    assert!(head.contains("text/html") && page.contains("Approved"), "{head}\n{page}");
    wait_for("the allow to reach the agent", 10, || (!hub_studio::answers_to_agent(dir).is_empty()).then_some(()));
    // Used: once more, by form or by JSON, nothing is sent.
    let (code, _, page) =
        link_request(hub, "POST", &path, &origin, "application/x-www-form-urlencoded", "decision=allow");
    assert_eq!(code, 410, "{page}");
    let (code, head, page) = link_request(hub, "POST", &path, "", "application/json", r#"{"decision":"deny"}"#);
    assert!(code == 410 && head.contains("application/json"), "{code} {head} {page}");
    std::thread::sleep(Duration::from_millis(300));
    let sent = hub_studio::answers_to_agent(dir);
    assert_eq!(sent.len(), 1, "{sent:?}");
    assert_eq!(sent[0].pointer("/response/response/behavior"), Some(&serde_json::json!("allow")), "{sent:?}");
    // Journaled at beta as the link's person (ops, who sent the message) at
    // the hub it came through, by the link's door.
    let answered: Vec<Value> = journal(home).into_iter().filter(|r| r["input"] == "answered").collect();
    assert_eq!(answered.len(), 1, "{answered:?}");
    assert_eq!((answered[0]["by"].as_str(), answered[0]["door"].as_str()), (Some("ops@hub-east"), Some("link")));

    // The hub's feed passes only links under its own recorded address. beta
    // vouches for one more (recorded in its home by this live process), and
    // its agent journals a request with a link there beside the real one:
    // beta's own feed carries both; the hub's relay of the cluster's feed
    // only the real one.
    let other = runwire::control::links::Public::parse("http://other.example").unwrap();
    runwire::runs::link_prefixes::record(home, &other).unwrap();
    let journal_file = std::fs::read_dir(home.join("serve/runstate"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| {
            p.extension().is_some_and(|x| x == "jsonl") && std::fs::read_to_string(p).unwrap().contains("\"requested\"")
        })
        .expect("the run's journal");
    let mut forged = journal(home).into_iter().find(|r| r["input"] == "requested").unwrap();
    forged["request"] = "forged-1".into();
    forged["links"] = serde_json::json!(["http://other.example/a/eyJ4IjoxfQ.c2ln", link]);
    let mut f = std::fs::OpenOptions::new().append(true).open(&journal_file).unwrap();
    std::io::Write::write_all(&mut f, format!("{forged}\n").as_bytes()).unwrap();
    let c = hub.send("GET", "/runs/events", &format!("{ana}Last-Event-ID: 0\r\n"), "");
    c.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let seen = std::io::BufRead::lines(std::io::BufReader::new(c))
        .map_while(Result::ok)
        .filter_map(|l| l.strip_prefix("data: ").and_then(|d| serde_json::from_str::<Value>(d).ok()))
        .find(|e| e["request"] == "forged-1")
        .expect("the forged request's event at the hub");
    assert_eq!(seen["links"], serde_json::json!([link]), "{seen}");
}

/// A `runwire-supervise` beside node beta (its home, the same
/// `--public-url` and link secret): one task, an ACP stand-in that asks
/// once and then waits for a `go` file; what the agent was sent is in
/// `dir/sup-input.jsonl`. Its process group is killed when dropped.
struct Supervisor {
    dir: PathBuf,
    child: std::process::Child,
}

impl Supervisor {
    /// With `extra` flags (`--node NAME`).
    fn start(dir: &Path, home: &Path, secret: &Path, extra: &[&str]) -> Supervisor {
        use std::os::unix::process::CommandExt;
        let dir = dir.join("supervisor");
        std::fs::create_dir_all(dir.join(".git")).unwrap();
        std::fs::create_dir_all(dir.join("no-wrappers")).unwrap();
        let agent = built("examples/trust-agent").display().to_string();
        let task = serde_json::json!({"id": "a", "adapter": "acp", "prompt": "touch a file",
            "cmd": [agent, "acp"], "gate": "while [ ! -e go ]; do sleep 0.05; done"});
        std::fs::write(dir.join("p.plan.json"), serde_json::json!({"v": "plan/v1", "tasks": [task]}).to_string())
            .unwrap();
        let child = Command::new(built("runwire-supervise"))
            .current_dir(&dir)
            .env("HARNESS_HOME", home)
            .env("RUNWIRE_SESSION_BIN", built("runwire-session"))
            .env("TRUST_PROTO", "acp")
            .env("TRUST_LOG", dir.join("sup-input.jsonl"))
            .env("TRUST_STATE", dir.join("processes"))
            .args(["--plan", "p.plan.json", "--kill-grace", "2", "--interactive", "--wrapper-dir", "no-wrappers"])
            .args(["--public-url", PUBLIC, "--link-secret-file"])
            .arg(secret)
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.join("stderr")).unwrap())
            .process_group(0)
            .spawn()
            .expect("start runwire-supervise");
        Supervisor { dir, child }
    }

    /// The supervisor's journal (a torn line skipped).
    fn journal(&self) -> Vec<Value> {
        let text = std::fs::read_to_string(self.dir.join("runstate/p.jsonl")).unwrap_or_default();
        text.lines().filter_map(|l| serde_json::from_str(l).ok()).collect()
    }

    /// The permission answers the agent was sent (ACP: a result's outcome;
    /// the stand-in logs each line it read with its process).
    fn answers(&self) -> Vec<String> {
        let text = std::fs::read_to_string(self.dir.join("sup-input.jsonl")).unwrap_or_default();
        text.lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok().map(|r| r["line"].clone()))
            .filter(|l| l.get("method").is_none())
            .filter_map(|l| l.pointer("/result/outcome/optionId").and_then(Value::as_str).map(str::to_string))
            .collect()
    }

    fn why(&self) -> String {
        let stderr = std::fs::read_to_string(self.dir.join("stderr")).unwrap_or_default();
        format!("journal {:?}\nstderr:\n{stderr}", self.journal())
    }
}

impl Drop for Supervisor {
    fn drop(&mut self) {
        let _ = nix::sys::signal::killpg(
            nix::unistd::Pid::from_raw(self.child.id() as i32),
            nix::sys::signal::Signal::SIGKILL,
        );
        let _ = self.child.wait();
    }
}

/// A supervised task's approval link, answered at a hub. `runwire-supervise`
/// knows no node name, so its links name none: the hub places such a link
/// at the one node whose mirror holds its run, and that node's link route
/// answers it through the supervisor's socket. One form POST at the hub
/// approves once (the agent gets one allow); a second sends nothing; the
/// supervisor journals the link's person at the hub, by the link's door.
#[test]
#[cfg_attr(not(tool = "nats-server"), ignore = "needs nats-server: apt-get install nats-server")]
fn a_supervised_tasks_link_is_answered_once_at_the_hub_through_its_node() {
    need(&["nats-server"]);
    let (s, (_keep, secret)) = Secured::with_links("security-supervised-link-at-hub");
    let sup = Supervisor::start(&s.dir, &s.home, &secret, &[]);
    let (requested, path) = supervised_link(&sup);
    let claims = runwire::control::links::unchecked_claims(path.strip_prefix("/a/").unwrap()).unwrap();
    // Given no --node, it names the node its home is (beta's sidecar holds the name).
    assert_eq!(claims.o.as_deref(), Some("beta"), "a supervisor beside beta names beta");
    // A link that names no node (a supervisor's started before its node
    // was, or an older one's): the hub places it by the run's mirror.
    let keys = runwire::control::links::Keys::new(PUBLIC, &std::fs::read(&secret).unwrap()).unwrap();
    let nameless = format!("/a/{}", keys.token(&runwire::control::links::Claims { o: None, ..claims.clone() }));
    hub_lists(&s, &[format!("beta.{}", claims.r)]);
    busy_at_the_hub(&s, &sup, &claims.r, &nameless);
    answered_once_at_the_hub(&s, &sup, &requested, &nameless);
}

/// A node's supervisor SIGKILLed (spec/LAYOUT.md, "Who runs a run"): the
/// node's server journals `supervisor-gone`, the hub mirrors the journal,
/// and the hub's `GET /runs` item and `GET /runs/:id` `run` say
/// `"supervisor":"gone"` with the node's reason (its pid), the status
/// still the node's last word. The hub has no owner record to ask.
#[test]
#[cfg_attr(not(tool = "nats-server"), ignore = "needs nats-server: apt-get install nats-server")]
fn a_nodes_supervisor_killed_reads_gone_at_the_hub_with_the_nodes_reason() {
    need(&["nats-server"]);
    let (s, (_keep, secret)) = Secured::with_links("security-supervisor-gone-at-hub");
    let sup = Supervisor::start(&s.dir, &s.home, &secret, &[]);
    wait_for("the supervisor's request", 60, || sup.journal().into_iter().find(|r| r["input"] == "requested"));
    let id = std::fs::read_dir(s.home.join("runs"))
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.strip_suffix(".json").map(str::to_string))
        .find(|id| id.ends_with("--p"))
        .expect("the supervisor's run at beta");
    let at_hub = format!("beta.{id}");
    hub_lists(&s, std::slice::from_ref(&at_hub));
    let ana = "Authorization: Bearer ana-token-0123456789abcdef\r\n";
    let get = |path: &str| -> Value {
        let (code, body) = s.hub.request_with("GET", path, ana, "");
        assert_eq!(code, 200, "{path}: {}", String::from_utf8_lossy(&body));
        serde_json::from_slice(&body).unwrap()
    };
    let shown = |v: &Value| v["run"].clone();
    let before = shown(&get(&format!("/runs/{at_hub}")));
    assert!(before.get("supervisor").is_none(), "the hub judges no owner record: {before}");
    let pid = sup.child.id();
    drop(sup);
    let why = format!(
        "its supervisor (pid {pid}) is gone: nothing runs it; start runwire-supervise on its plan again to continue"
    );
    let run = wait_for("the hub to say the node's supervisor is gone", 60, || {
        let run = shown(&get(&format!("/runs/{at_hub}")));
        (run["supervisor"] == "gone").then_some(run)
    });
    assert_eq!((run["reason"].as_str(), &run["status"]), (Some(why.as_str()), &before["status"]), "{run}");
    assert_eq!(run["node"], "beta", "{run}");
    let listed = get("/runs");
    let item = listed["runs"].as_array().unwrap().iter().find(|r| r["runId"] == at_hub.as_str()).unwrap().clone();
    assert_eq!((item["supervisor"].as_str(), item["reason"].as_str()), (Some("gone"), Some(why.as_str())), "{item}");
    assert_eq!(item["status"], before["status"], "{item}");
}

/// The node's supervisor serving as many callers as it takes: the hub's
/// doors (the link, the task route) pass on its "not now" (503, and when
/// to try again), nothing is done, and the link still works after.
fn busy_at_the_hub(s: &Secured, sup: &Supervisor, run: &str, path: &str) {
    use runwire::supervise::socket::{sock_path, MAX_CALLERS};
    wait_for("beta to answer the link at the hub", 30, || {
        let (code, _, page) = link_request(&s.hub, "GET", path, "", "text/plain", "");
        assert!(code == 200 || code == 503, "{code} {page}\n{}", sup.why());
        (code == 200).then_some(())
    });
    let sock = sock_path(&s.home, run);
    let held: Vec<_> = (0..MAX_CALLERS).map(|_| std::os::unix::net::UnixStream::connect(&sock).unwrap()).collect();
    std::thread::sleep(Duration::from_millis(300));
    let origin = format!("Origin: {PUBLIC}\r\n");
    let form = "application/x-www-form-urlencoded";
    let (code, _, page) = link_request(&s.hub, "POST", path, &origin, form, "decision=allow");
    assert_eq!(code, 503, "{page}\n{}", sup.why());
    assert!(page.contains("Not now"), "{page}");
    let ana = "Authorization: Bearer ana-token-0123456789abcdef\r\n";
    let route = format!("/runs/beta.{run}/tasks/a/steer");
    let (code, head, body) = link_request(&s.hub, "POST", &route, ana, "application/json", r#"{"msg":"later"}"#);
    assert_eq!(code, 503, "{head}\n{body}");
    assert!(body.contains("supervisor_busy"), "{body}");
    assert!(head.to_ascii_lowercase().contains("\r\nretry-after: 1"), "{head}");
    drop(held);
    std::thread::sleep(Duration::from_millis(300));
    assert!(sup.answers().is_empty(), "nothing reached the agent: {}", sup.why());
    assert!(!sup.journal().iter().any(|r| r["run"] == "steer-queued"), "no steer queued: {}", sup.why());
}

/// A supervisor's links name its node (`--node beta`, as its
/// `runwire-serve`; by default the node its home is), so a hub forwards
/// them there even when another node (alpha: the same repository path and
/// slug on another machine) has a run of the same id, where placing by the
/// mirror can only refuse.
#[test]
#[cfg_attr(not(tool = "nats-server"), ignore = "needs nats-server: apt-get install nats-server")]
fn a_supervisors_link_naming_its_node_is_answered_at_the_hub_though_another_node_has_the_run_id() {
    need(&["nats-server"]);
    let (s, (_keep, secret)) = Secured::with_links("security-supervised-link-named");
    // `--node NAME` refused before anything runs (exit 2): what it said.
    let refused = |node: &str| {
        let out = Command::new(built("runwire-supervise"))
            .args(["--plan", "none.plan.json", "--public-url", PUBLIC, "--node", node, "--link-secret-file"])
            .arg(&secret)
            .env("HARNESS_HOME", &s.home)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        assert_eq!(out.status.code(), Some(2), "{err}");
        err
    };
    // A name that is not a node's.
    let err = refused("b.eta");
    assert!(err.starts_with("runwire-supervise: usage: --node: \"b.eta\": a node name is "), "{err}");
    // Another node's name than the one this home is, naming it.
    wait_for("beta's sidecar to say which node its home is", 30, || {
        s.home.join("cluster/node.json").is_file().then_some(())
    });
    let err = refused("gamma");
    assert!(err.starts_with("runwire-supervise: usage: --node gamma: this home is node beta "), "{err}");
    let sup = Supervisor::start(&s.dir, &s.home, &secret, &["--node", "beta"]);
    let (requested, path) = supervised_link(&sup);
    let claims = runwire::control::links::unchecked_claims(path.strip_prefix("/a/").unwrap()).unwrap();
    assert_eq!(claims.o.as_deref(), Some("beta"), "the supervisor names its node");
    // Alpha registers the same repository and slug (its own runstate directory): the same run id.
    let p: Value = serde_json::from_slice(&std::fs::read(s.home.join(format!("runs/{}.json", claims.r))).unwrap())
        .expect("the supervised run's pointer");
    let home_a = s.dir.join("home-alpha");
    let reg = Command::new(built("runs"))
        .args(["register", "--slug", p["slug"].as_str().unwrap(), "--repo-root", p["repoRoot"].as_str().unwrap()])
        .args(["--worktree", p["worktree"].as_str().unwrap(), "--runstate-dir"])
        .arg(s.dir.join("alpha-runstate"))
        .env("HARNESS_HOME", &home_a)
        .output()
        .unwrap();
    assert!(reg.status.success(), "{}", String::from_utf8_lossy(&reg.stderr));
    let on_alpha: Value = serde_json::from_slice(&reg.stdout).unwrap();
    assert_eq!(on_alpha["runId"].as_str(), Some(claims.r.as_str()));
    let pw = s.dir.join("accounts/node-alpha.pw");
    let _alpha = Serve::start(
        &home_a,
        &["--cluster", &s.nats.url, "--node", "alpha", "--cluster-user", "node-alpha", "--cluster-password-file"]
            .into_iter()
            .chain([pw.to_str().unwrap()])
            .collect::<Vec<_>>(),
        &[],
    );
    hub_lists(&s, &[format!("alpha.{}", claims.r), format!("beta.{}", claims.r)]);
    // The same claims minted with the same secret but no node: the hub cannot tell which node's.
    let keys = runwire::control::links::Keys::new(PUBLIC, &std::fs::read(&secret).unwrap()).unwrap();
    let nameless = keys.token(&runwire::control::links::Claims { o: None, ..claims.clone() });
    let (code, _, page) = link_request(&s.hub, "GET", &format!("/a/{nameless}"), "", "text/plain", "");
    assert!(code >= 400 && page.contains("is on several nodes (alpha, beta)"), "{code} {page}");
    assert!(sup.answers().is_empty(), "{}", sup.why());
    answered_once_at_the_hub(&s, &sup, &requested, &path);
}

/// The supervisor's first request with its link: the record, and the
/// link's path under the hub's address.
fn supervised_link(sup: &Supervisor) -> (Value, String) {
    let requested = wait_for("the supervisor's request", 60, || {
        sup.journal().into_iter().find(|r| r["input"] == "requested" && r["links"][0].is_string())
    });
    let link = requested["links"][0].as_str().unwrap().to_string();
    let path = link.strip_prefix(PUBLIC).unwrap_or_else(|| panic!("a link under the hub's address: {link}"));
    (requested.clone(), path.to_string())
}

/// Waits until the hub lists each of `ids`.
fn hub_lists(s: &Secured, ids: &[String]) {
    let ana = "Authorization: Bearer ana-token-0123456789abcdef\r\n";
    wait_for("the hub to list the runs", 60, || {
        let runs = s.hub.request_with("GET", "/runs", ana, "");
        let text = String::from_utf8_lossy(&runs.1);
        ids.iter().all(|id| text.contains(&format!("\"{id}\""))).then_some(())
    });
}

/// The link at `path` answered at the hub: 503 until the node's control
/// subscription is known (never acted on), a page for a GET that acts on
/// nothing, one form POST with the public Origin that approves, a second
/// that is refused and sends nothing; the supervisor journals who and where.
fn answered_once_at_the_hub(s: &Secured, sup: &Supervisor, requested: &Value, path: &str) {
    let page = wait_for("beta to answer the link at the hub", 30, || {
        let (code, _, page) = link_request(&s.hub, "GET", path, "", "text/plain", "");
        assert!(code == 200 || code == 503, "{code} {page}\n{}", sup.why());
        (code == 200).then_some(page)
    });
    assert!(page.contains("value=\"allow\"") && page.contains("value=\"deny\""), "{page}");
    assert!(sup.answers().is_empty(), "a GET acts on nothing: {}", sup.why());
    let origin = format!("Origin: {PUBLIC}\r\n");
    let form = "application/x-www-form-urlencoded";
    let (code, _, page) = link_request(&s.hub, "POST", path, &origin, form, "decision=allow");
    assert_eq!(code, 200, "{page}\n{}", sup.why());
    assert!(page.contains("Approved"), "{page}");
    wait_for("the allow to reach the supervised agent", 30, || (!sup.answers().is_empty()).then_some(()));
    let (code, _, page) = link_request(&s.hub, "POST", path, &origin, form, "decision=deny");
    assert_eq!(code, 410, "{page}");
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(sup.answers(), ["allow-once"], "{}", sup.why());
    let answered: Vec<Value> = sup.journal().into_iter().filter(|r| r["input"] == "answered").collect();
    assert_eq!(answered.len(), 1, "{answered:?}");
    let a = &answered[0];
    assert_eq!(
        (a["interrupt"].as_str(), a["decision"].as_str(), a["by"].as_str(), a["door"].as_str()),
        (requested["interrupt"].as_str(), Some("allow"), Some("link@hub-east"), Some("link")),
        "{a}"
    );
}
