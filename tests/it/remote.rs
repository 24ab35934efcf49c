//! Issue 39, "reachable without new risk": `runwire-serve --listen
//! unix:PATH` (a socket of its owner only, no TCP port; the token, Host and
//! Origin rules as on TCP), and the tested recipe: `examples/remote/Caddyfile`
//! with Debian's caddy and TLS (Caddy's own CA, imported into Chromium's
//! store as a phone would) in front of that socket, an approval link
//! answered in Chromium at 390 px, the agent stand-in receiving exactly one
//! allow, and nothing but `/a/*` published.

use crate::support;

use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const TOKEN: &str = "0123456789abcdef-unix";
const LIMIT: Duration = Duration::from_secs(30);

/// runwire-serve on `unix:DIR/serve.sock` over the trust stand-in (claude,
/// asking once to run `npm test`), with a token and `public` as its
/// public URL; returns it once it said where it listens.
struct Unix {
    child: Child,
    dir: PathBuf,
    sock: PathBuf,
}

impl Unix {
    fn start(test: &str, public: &str) -> Unix {
        let dir = support::scratch(test);
        let sock = dir.join("serve.sock");
        std::fs::write(dir.join("token"), TOKEN).unwrap();
        std::fs::write(dir.join("link-secret"), "0123456789abcdef0123456789abcdef-secret\n").unwrap();
        let requests = json!([{"request_id": "b1", "tool_name": "Bash", "input": {"command": "npm test"}}]);
        let mut child = Command::new(env!("CARGO_BIN_EXE_runwire-serve"))
            .args(["--agent", "claude", "--interactive", "--agent-cmd"])
            .arg(support::example("trust-agent"))
            .arg("--listen")
            .arg(format!("unix:{}", sock.display()))
            .arg("--token-file")
            .arg(dir.join("token"))
            .args(["--public-url", public, "--link-secret-file"])
            .arg(dir.join("link-secret"))
            .current_dir(&dir)
            .env("HARNESS_HOME", dir.join("harness"))
            .env("RUNWIRE_KEEPALIVE_MS", "60000")
            .env("TRUST_PROTO", "claude")
            .env("TRUST_LOG", dir.join("agent-input.jsonl"))
            .env("TRUST_STATE", dir.join("processes"))
            .env("TRUST_REQUESTS", requests.to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(dir.join("serve.stderr")).unwrap())
            .spawn()
            .expect("start runwire-serve");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
        assert_eq!(line.trim(), format!("listening on unix:{}", sock.display()), "{}", stderr(&dir));
        Unix { child, dir, sock }
    }

    /// One request over the socket: status, head, body.
    fn request(&self, method: &str, path: &str, headers: &[(&str, &str)], body: &str) -> (u16, String, String) {
        let mut s = UnixStream::connect(&self.sock).unwrap();
        s.set_read_timeout(Some(LIMIT)).unwrap();
        let mut h = format!("{method} {path} HTTP/1.1\r\nConnection: close\r\n");
        for (n, v) in headers {
            h.push_str(&format!("{n}: {v}\r\n"));
        }
        if method == "POST" {
            h.push_str(&format!("Content-Type: application/json\r\nContent-Length: {}\r\n", body.len()));
        }
        h.push_str("\r\n");
        h.push_str(body);
        s.write_all(h.as_bytes()).unwrap();
        let mut raw = Vec::new();
        s.read_to_end(&mut raw).unwrap();
        let r = support::server::Response::parse(&raw);
        let text = String::from_utf8_lossy(&raw).to_string();
        (
            r.status,
            text.split("\r\n\r\n").next().unwrap_or_default().to_string(),
            String::from_utf8_lossy(&r.body).into(),
        )
    }

    /// The permission answers that reached the agent: (behavior, message).
    fn answers(&self) -> Vec<String> {
        support::complete_json_lines(&self.dir.join("agent-input.jsonl"))
            .into_iter()
            .map(|v| v["line"].clone())
            .filter(|l| l["type"] == "control_response")
            .map(|l| l["response"]["response"]["behavior"].as_str().unwrap_or("?").to_string())
            .collect()
    }

    fn journal(&self) -> Vec<Value> {
        let runs = self.dir.join("harness/serve/runstate");
        let mut out = Vec::new();
        for e in std::fs::read_dir(&runs).into_iter().flatten().flatten() {
            let name = e.file_name().to_string_lossy().to_string();
            if name.ends_with(".jsonl") && !name.contains(".agent.") && !name.contains(".steer.") {
                out.extend(support::complete_json_lines(&e.path()));
            }
        }
        out
    }

    /// The link journaled with the request, as minted.
    fn link(&self) -> String {
        let t = Instant::now();
        loop {
            let link = self
                .journal()
                .into_iter()
                .find(|r| r["input"] == "requested")
                .and_then(|r| r["links"][0].as_str().map(str::to_string));
            if let Some(l) = link {
                return l;
            }
            assert!(t.elapsed() < LIMIT, "no link journaled; {}", stderr(&self.dir));
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// SIGTERM, then the exit status.
    fn stop(mut self) -> Option<i32> {
        let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(self.child.id() as i32), nix::sys::signal::SIGTERM);
        let code = self.child.wait().ok().and_then(|s| s.code());
        let _ = std::fs::remove_dir_all(&self.dir);
        code
    }
}

impl Drop for Unix {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn stderr(dir: &Path) -> String {
    std::fs::read_to_string(dir.join("serve.stderr")).unwrap_or_default()
}

/// A run's first turn over the socket: the stand-in asks its question.
fn start_turn(s: &Unix) {
    let auth = format!("Bearer {TOKEN}");
    let run = json!({"threadId": "t", "runId": "r1", "messages": [{"id": "m1", "role": "user", "content": "test it"}]});
    let (status, _, body) =
        s.request("POST", "/agui", &[("Host", "localhost"), ("Authorization", &auth)], &run.to_string());
    assert_eq!(status, 200, "{body}");
    let ev = support::sse::events(&body);
    assert_eq!(ev.last().unwrap()["outcome"]["type"], "interrupt", "{ev:?}");
}

/// The socket is the owner's only (mode 0600), answers HTTP, and keeps
/// every rule of the TCP door: the token, Host (loopback or the public
/// name), Origin; a link over it approves once; the file goes at exit.
#[test]
fn the_server_listens_on_a_unix_socket_of_its_owner_only_with_every_rule_kept() {
    let public = "https://rw.example.test";
    let s = Unix::start("remote-unix", public);
    let m = std::fs::symlink_metadata(&s.sock).unwrap();
    assert!(m.file_type().is_socket(), "{m:?}");
    assert_eq!(m.permissions().mode() & 0o777, 0o600, "the server's own user only");
    // The start line names no address a browser could open, and says how the socket is reached.
    // (Said on stderr after the stdout line the start waited for: read once it is there.)
    let t = Instant::now();
    while !stderr(&s.dir).contains("Caddyfile") && t.elapsed() < LIMIT {
        std::thread::sleep(Duration::from_millis(20));
    }
    let said = stderr(&s.dir);
    assert!(!said.contains("open unix:") && !said.contains("#token="), "{said}");
    assert!(said.contains(&format!("curl --unix-socket {}", s.sock.display())) && said.contains("Caddyfile"), "{said}");
    let auth = format!("Bearer {TOKEN}");
    assert_eq!(s.request("GET", "/healthz", &[("Host", "localhost")], "").0, 200);
    // The token, as on TCP.
    let (status, head, _) = s.request("GET", "/api/info", &[("Host", "localhost")], "");
    assert_eq!(status, 401, "{head}");
    assert_eq!(s.request("GET", "/api/info", &[("Host", "localhost"), ("Authorization", &auth)], "").0, 200);
    // Host: a loopback name or the public one; never another (DNS rebinding).
    assert_eq!(s.request("GET", "/api/info", &[("Host", "rw.example.test"), ("Authorization", &auth)], "").0, 200);
    assert_eq!(s.request("GET", "/api/info", &[("Host", "evil.example"), ("Authorization", &auth)], "").0, 403);
    // Origin: the public one; never another.
    let ok = [("Host", "rw.example.test"), ("Origin", public), ("Authorization", auth.as_str())];
    assert_eq!(s.request("GET", "/api/info", &ok, "").0, 200);
    let evil = [("Host", "rw.example.test"), ("Origin", "https://evil.example"), ("Authorization", auth.as_str())];
    assert_eq!(s.request("GET", "/api/info", &evil, "").0, 403);
    // A link over the socket approves once.
    start_turn(&s);
    let link = s.link();
    let path = &link[public.len()..];
    let (status, _, page) = s.request("GET", path, &[("Host", "rw.example.test")], "");
    assert_eq!(status, 200, "{page}");
    assert!(page.contains("npm test"), "{page}");
    let (status, _, body) = s.request("POST", path, &[("Host", "rw.example.test")], r#"{"decision":"allow"}"#);
    assert_eq!(status, 200, "{body}");
    let t = Instant::now();
    while s.answers().is_empty() && t.elapsed() < LIMIT {
        std::thread::sleep(Duration::from_millis(50));
    }
    let (status, _, _) = s.request("POST", path, &[("Host", "rw.example.test")], r#"{"decision":"allow"}"#);
    assert!(status == 409 || status == 410, "{status}");
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(s.answers(), ["allow"], "exactly one allow");
    let sock = s.sock.clone();
    assert_eq!(s.stop(), Some(0));
    assert!(!sock.exists(), "the socket file is removed at exit");
}

/// A free TCP port on loopback (bound, then released for Caddy).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// The recipe end to end: Caddy with `tls internal` from
/// examples/remote/Caddyfile in front of the socket; Chromium, trusting
/// Caddy's root as a phone that imported it, at 390 px, opens the link
/// over HTTPS, sees the tool and taps Approve; the agent receives exactly
/// one allow, journaled as the link's; any other route is not published.
#[test]
#[cfg_attr(not(tool = "caddy"), ignore = "needs caddy: apt-get install caddy")]
#[cfg_attr(not(tool = "certutil"), ignore = "needs certutil: apt-get install libnss3-tools")]
#[cfg_attr(not(tool = "chromium"), ignore = "needs Chromium: apt-get install chromium (or STUDIO_CHROMIUM=/path)")]
#[cfg_attr(not(tool = "playwright"), ignore = "needs node and npm: apt-get install nodejs npm")]
fn a_link_approves_through_caddy_with_tls_in_chromium_at_390_px() {
    support::need(&["caddy", "certutil", "chromium", "playwright"]);
    let https = free_port();
    let public = format!("https://rw.test:{https}");
    let s = Unix::start("remote-caddy", &public);
    start_turn(&s);
    let link = s.link();
    assert!(link.starts_with(&format!("{public}/a/")), "{link}");
    // Caddy, from the example file as it is, on its own data directory.
    let caddy_home = s.dir.join("caddy");
    std::fs::create_dir_all(&caddy_home).unwrap();
    let caddyfile = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/remote/Caddyfile");
    let mut caddy = Command::new("caddy")
        .args(["run", "--adapter", "caddyfile", "--config"])
        .arg(&caddyfile)
        .env("HOME", &caddy_home)
        .env("XDG_DATA_HOME", caddy_home.join("data"))
        .env("XDG_CONFIG_HOME", caddy_home.join("config"))
        .env("RUNWIRE_CADDY_ADMIN", "off")
        .env("RUNWIRE_HTTP_PORT", free_port().to_string())
        .env("RUNWIRE_HTTPS_PORT", https.to_string())
        .env("RUNWIRE_SITE", "rw.test")
        .env("RUNWIRE_TLS", "internal")
        .env("RUNWIRE_SOCKET", &s.sock)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(s.dir.join("caddy.stderr")).unwrap())
        .spawn()
        .expect("start caddy");
    struct Kill<'a>(&'a mut Child);
    impl Drop for Kill<'_> {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let caddy = Kill(&mut caddy);
    let caddy_log = || std::fs::read_to_string(s.dir.join("caddy.stderr")).unwrap_or_default();
    // Its root certificate, once made, goes into an NSS store of Chromium's own HOME.
    let root = caddy_home.join("data/caddy/pki/authorities/local/root.crt");
    let t = Instant::now();
    while !(root.exists() && std::net::TcpStream::connect(("127.0.0.1", https)).is_ok()) {
        assert!(t.elapsed() < LIMIT, "caddy did not start: {}", caddy_log());
        std::thread::sleep(Duration::from_millis(100));
    }
    let browser_home = s.dir.join("browser");
    let nss = browser_home.join(".pki/nssdb");
    std::fs::create_dir_all(&nss).unwrap();
    let db = format!("sql:{}", nss.display());
    let certutil = |args: &[&str]| {
        let o = Command::new("certutil").arg("-d").arg(&db).args(args).output().unwrap();
        assert!(o.status.success(), "certutil {args:?}: {}", String::from_utf8_lossy(&o.stderr));
    };
    certutil(&["-N", "--empty-password"]);
    certutil(&["-A", "-t", "C,,", "-n", "caddy-local-root", "-i", root.to_str().unwrap()]);
    let chromium = support::tools::chromium().expect("found by need");
    let studio = Path::new(env!("CARGO_MANIFEST_DIR")).join("studio");
    let o = Command::new("node")
        .arg("e2e/remote-link.mjs")
        .current_dir(&studio)
        .env("STUDIO_CHROMIUM", &chromium)
        .env("HOME", &browser_home)
        .env("LINK", &link)
        .env("MAP", "MAP rw.test 127.0.0.1")
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout).to_string();
    assert!(
        o.status.success(),
        "node: {out}\n{}\ncaddy: {}\nserver: {}",
        String::from_utf8_lossy(&o.stderr),
        caddy_log(),
        stderr(&s.dir)
    );
    let r: Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!((r["status"].as_u64(), r["secure"].as_bool()), (Some(200), Some(true)), "{r}");
    let text = r["text"].as_str().unwrap();
    assert!(text.contains("Bash") && text.contains("npm test"), "{r}");
    assert!(r["scrollWidth"].as_u64() <= Some(390) && r["approveFits"] == true, "fits 390 px: {r}");
    assert_eq!(r["bodyMaxWidth"], "640px", "the page's own style applies under its policy: {r}");
    assert!(r["after"].as_str().unwrap().contains("Approved"), "{r}");
    assert_eq!(r["unpublished"], 404, "only /a/* is published: {r}");
    assert_eq!(r["problems"], json!([]), "{r}");
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(s.answers(), ["allow"], "exactly one allow reached the agent");
    let answered: Vec<Value> = s.journal().into_iter().filter(|r| r["input"] == "answered").collect();
    assert_eq!(answered.len(), 1, "{answered:?}");
    assert_eq!((answered[0]["door"].as_str(), answered[0]["decision"].as_str()), (Some("link"), Some("allow")));
    drop(caddy);
    assert_eq!(s.stop(), Some(0));
}
