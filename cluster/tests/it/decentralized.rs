//! The operators' guide to adding a node without editing any server
//! (examples/cluster/README.md, "Adding a node without editing every
//! server"): NATS decentralized authentication. The machine has no `nsc`,
//! so this test issues the JWTs itself (nkeys, as `nsc` signs them) with
//! the permissions the guide's `nsc add user` commands give the hub and a
//! node, read from the guide's own text. A real nats-server in operator
//! mode (a memory resolver holding the operator's accounts, no user in
//! its configuration) then serves a hub and a node added after it
//! started. What is not run here is `nsc` itself (its operator, account
//! and push steps).

use crate::common::*;
use data_encoding::{BASE32_NOPAD, BASE64URL_NOPAD};
use nkeys::KeyPair;
use serde_json::{json, Value};
use sha2::Digest;
use std::path::Path;
use std::process::Command;
use std::time::{SystemTime, UNIX_EPOCH};

/// A JWT as the NATS tools make one: `iss` signs `sub`'s claims.
fn jwt(issuer: &KeyPair, sub: &str, name: &str, nats: Value) -> String {
    let iat = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs();
    let mut claims = json!({"iat": iat, "iss": issuer.public_key(), "name": name, "sub": sub, "nats": nats});
    // The claims' id: a hash of the claims without it (as the jwt library does).
    claims["jti"] = BASE32_NOPAD.encode(&sha2::Sha512_256::digest(claims.to_string().as_bytes())).into();
    let head = BASE64URL_NOPAD.encode(br#"{"typ":"JWT","alg":"ed25519-nkey"}"#);
    let body = BASE64URL_NOPAD.encode(claims.to_string().as_bytes());
    let sig = issuer.sign(format!("{head}.{body}").as_bytes()).unwrap();
    format!("{head}.{body}.{}", BASE64URL_NOPAD.encode(&sig))
}

/// A `.creds` file (`nsc generate creds`): the user's JWT and its seed.
fn creds(dir: &Path, name: &str, jwt: &str, user: &KeyPair) -> String {
    let path = dir.join(format!("{name}.creds"));
    let text = format!(
        "-----BEGIN NATS USER JWT-----\n{jwt}\n------END NATS USER JWT------\n\n\
         -----BEGIN USER NKEY SEED-----\n{}\n------END USER NKEY SEED------\n",
        user.seed().unwrap()
    );
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

/// The shell words of the guide's command that names `--name <name>`
/// (continued lines joined), as `sh` would read them with `n=gamma`:
/// single quotes literal, double quotes with `\$` and `$n` expanded.
fn guide_command(readme: &str, name: &str) -> Vec<String> {
    let joined = readme.replace("\\\n", " ");
    let line = joined
        .lines()
        .find(|l| l.trim_start().starts_with("nsc add user") && l.contains(&format!("--name {name}")))
        .unwrap_or_else(|| panic!("the guide has no `nsc add user ... --name {name}`"));
    let (mut words, mut word, mut quote, mut in_word) = (Vec::new(), String::new(), None, false);
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match (quote, c) {
            (None, '#') if !in_word => break,
            (None, c) if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut word));
                    in_word = false;
                }
            }
            (None, '\'' | '"') => (quote, in_word) = (Some(c), true),
            (Some(q), c) if c == q => quote = None,
            (Some('"') | None, '\\') => {
                word.extend(chars.next());
                in_word = true;
            }
            (Some('"') | None, '$') if chars.peek() == Some(&'n') => {
                chars.next();
                word.push_str("gamma");
                in_word = true;
            }
            (_, c) => {
                word.push(c);
                in_word = true;
            }
        }
    }
    if in_word {
        words.push(word);
    }
    words
}

/// The user claims the guide's command gives (`--allow-pub`, `--allow-sub`,
/// `--allow-pub-response`), issued under the account.
fn user_claims(words: &[String], account: &str) -> Value {
    let (mut publish, mut subscribe, mut resp) = (Vec::<String>::new(), Vec::<String>::new(), false);
    let mut it = words.iter();
    while let Some(w) = it.next() {
        match w.as_str() {
            "--allow-pub" => publish.extend(it.next().unwrap().split(',').map(str::to_string)),
            "--allow-sub" => subscribe.extend(it.next().unwrap().split(',').map(str::to_string)),
            "--allow-pub-response" => resp = true,
            _ => {}
        }
    }
    assert!(!publish.is_empty() && !subscribe.is_empty(), "no permissions read from {words:?}");
    let mut nats = json!({
        "pub": {"allow": publish}, "sub": {"allow": subscribe},
        "subs": -1, "data": -1, "payload": -1,
        "issuer_account": account, "type": "user", "version": 2,
    });
    if resp {
        nats["resp"] = json!({"max": 1, "ttl": 0});
    }
    nats
}

#[test]
#[cfg_attr(not(tool = "nats-server"), ignore = "needs nats-server: apt-get install nats-server")]
fn a_node_added_with_the_guides_jwt_permissions_touches_no_server_and_publishes_only_as_itself() {
    need(&["nats-server"]);
    let dir = scratch("decentralized");
    let readme = std::fs::read_to_string(root().join("examples/cluster/README.md")).unwrap();

    // The operator, its system account, and the account with JetStream and a
    // signing key per role (what the guide's steps 1 and 2 make with nsc).
    let operator = KeyPair::new_operator();
    let system = KeyPair::new_account();
    let account = KeyPair::new_account();
    let (admin_sk, hub_sk, nodes_sk) = (KeyPair::new_account(), KeyPair::new_account(), KeyPair::new_account());
    let op_jwt = jwt(
        &operator,
        &operator.public_key(),
        "runwire-op",
        json!({"system_account": system.public_key(), "type": "operator", "version": 2}),
    );
    let sys_jwt = jwt(&operator, &system.public_key(), "SYS", json!({"type": "account", "version": 2}));
    let limits = json!({
        "subs": -1, "data": -1, "payload": -1, "imports": -1, "exports": -1, "wildcards": true,
        "conn": -1, "leaf": -1, "mem_storage": -1, "disk_storage": -1, "streams": -1, "consumer": -1,
    });
    let keys: Vec<String> = [&admin_sk, &hub_sk, &nodes_sk].iter().map(|k| k.public_key()).collect();
    let acc_jwt = jwt(
        &operator,
        &account.public_key(),
        "RUNWIRE",
        json!({"limits": limits, "signing_keys": keys, "type": "account", "version": 2}),
    );
    std::fs::write(dir.join("operator.jwt"), &op_jwt).unwrap();
    let port = free_port();
    let conf = format!(
        "server_name: s0\nlisten: \"127.0.0.1:{port}\"\njetstream {{ store_dir: \"{}\" }}\n\
         operator: \"{}\"\nsystem_account: {}\nresolver: MEMORY\n\
         resolver_preload: {{\n  {}: \"{sys_jwt}\"\n  {}: \"{acc_jwt}\"\n}}\n",
        dir.join("js").display(),
        dir.join("operator.jwt").display(),
        system.public_key(),
        system.public_key(),
        account.public_key(),
    );
    let _server = nats_server(&dir, "s0", &conf, "nats-0.log");
    let url = format!("nats://127.0.0.1:{port}");

    // Step 3: the admin (no limits: anything in the account) and the hub.
    let acc = account.public_key();
    let admin = KeyPair::new_user();
    let admin_jwt = jwt(
        &admin_sk,
        &admin.public_key(),
        "admin",
        json!({"pub": {}, "sub": {}, "subs": -1, "data": -1, "payload": -1, "issuer_account": acc, "type": "user", "version": 2}),
    );
    let admin_creds = creds(&dir, "admin", &admin_jwt, &admin);
    until_set_up(|| {
        Command::new(cluster_bin()).args(["setup", "--url", &url, "--creds", &admin_creds]).output().unwrap()
    });
    let hub_user = KeyPair::new_user();
    let hub_claims = user_claims(&guide_command(&readme, "hub"), &acc);
    let hub_creds = creds(&dir, "hub", &jwt(&hub_sk, &hub_user.public_key(), "hub", hub_claims), &hub_user);
    let hub_home = dir.join("home-hub");
    let hub = Serve::start(&hub_home, &["--cluster", &url, "--cluster-creds", &hub_creds, "--hub"], &[]);

    // Step 4, after the server started: node gamma is a credentials file
    // and nothing else. The server's configuration never names it.
    let conf_before = std::fs::read(dir.join("s0.conf")).unwrap();
    let words = guide_command(&readme, "\"node-$n\"");
    assert!(words.iter().any(|w| w == "node-gamma"), "{words:?}");
    let gamma = KeyPair::new_user();
    let gamma_claims = user_claims(&words, &acc);
    let gamma_creds =
        creds(&dir, "node-gamma", &jwt(&nodes_sk, &gamma.public_key(), "node-gamma", gamma_claims), &gamma);
    let home = dir.join("home-gamma");
    let mut run = FakeRun::new(&home, &dir.join("repo"));
    let node = Serve::start(&home, &["--cluster", &url, "--cluster-creds", &gamma_creds, "--node", "gamma"], &[]);
    run.agent(50, |_| {});
    run.mirrored(&hub_home, "gamma", 60);
    let id = format!("gamma.{}", run.pointer.run_id);
    wait_for("gamma's run at the hub, done, its node up", 30, || {
        let runs = hub.get_json("/runs");
        let r = runs["runs"].as_array()?.iter().find(|r| r["runId"] == id.as_str())?.clone();
        (r["node"] == "gamma" && r["nodeState"] == "up" && r["status"] == "done").then_some(r)
    });
    assert_eq!(std::fs::read(dir.join("s0.conf")).unwrap(), conf_before);
    assert!(!String::from_utf8_lossy(&conf_before).contains("gamma"));

    // The guide's permissions are enough: the hub and the node worked
    // without one refusal. And the node's JWT confines it to its own
    // subjects: it cannot publish as another node.
    let server_log = || std::fs::read_to_string(dir.join("nats-0.log")).unwrap_or_default();
    let refused: Vec<String> = server_log().lines().filter(|l| l.contains("Violation")).map(str::to_string).collect();
    assert!(refused.is_empty(), "the guide's permissions were refused: {refused:?}");
    block_on(async {
        let c = async_nats::ConnectOptions::with_credentials_file(&gamma_creds)
            .await
            .unwrap()
            .custom_inbox_prefix("_INBOX_gamma")
            .connect(url.as_str())
            .await
            .unwrap();
        c.publish("rwfeed.delta", "{}".into()).await.unwrap();
        c.publish("rwfile.delta.r.f", "x".into()).await.unwrap();
        c.flush().await.unwrap();
    });
    wait_for("the server to refuse gamma's publishing as delta", 10, || {
        let log = server_log();
        (log.contains("Publish Violation") && log.contains("rwfeed.delta") && log.contains("rwfile.delta.r.f"))
            .then_some(())
    });
    drop((node, hub));
}
