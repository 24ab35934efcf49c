//! Connecting to the cluster: URLs, credentials and TLS, from flags that
//! name files (never a secret on the command line).

use anyhow::{anyhow, bail, Context as _};
use std::path::PathBuf;
use std::time::Duration;

/// How to reach and authenticate to the NATS cluster (every subcommand).
/// Secrets come from files (or the environment), never from the command
/// line, which every user of the machine can read.
#[derive(clap::Args, Debug, Clone)]
pub struct Conn {
    /// The NATS servers: comma-separated URLs (nats://host:port, tls://host:port), without
    /// credentials. A server that is not on loopback needs TLS (a tls:// URL or --tls-ca).
    #[arg(long, value_name = "URL[,URL...]")]
    pub url: String,
    /// A NATS credentials file (JWT and nkey seed), as `nsc` writes it.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["token_file", "user", "nkey_file"])]
    pub creds: Option<PathBuf>,
    /// A file holding the NATS token (else $RUNWIRE_CLUSTER_TOKEN, when no other credentials are given).
    #[arg(long, value_name = "FILE", conflicts_with_all = ["user", "nkey_file"])]
    pub token_file: Option<PathBuf>,
    /// The NATS user, whose password is in --password-file (else $RUNWIRE_CLUSTER_PASSWORD).
    #[arg(long, value_name = "NAME", conflicts_with = "nkey_file")]
    pub user: Option<String>,
    /// A file holding the NATS user's password.
    #[arg(long, value_name = "FILE", requires = "user")]
    pub password_file: Option<PathBuf>,
    /// A file holding an nkey seed (SU...).
    #[arg(long, value_name = "FILE")]
    pub nkey_file: Option<PathBuf>,
    /// The CA certificate (PEM) that signed the servers' certificates; TLS is then required.
    #[arg(long, value_name = "FILE")]
    pub tls_ca: Option<PathBuf>,
    /// A client certificate (PEM), with --tls-key (servers that verify clients).
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// The client certificate's key (PEM).
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// The prefix of this client's reply subjects (default _INBOX; a node's is _INBOX_NAME,
    /// the only replies its user may receive: examples/cluster/accounts.conf).
    #[arg(long, value_name = "PREFIX")]
    pub inbox_prefix: Option<String>,
}

pub use runwire::serve::cluster::{PASSWORD_ENV, TOKEN_ENV};

/// A node's reply subjects' prefix: `_INBOX_<node>` (its own; another
/// node's user cannot subscribe to it).
pub fn node_inbox(node: &str) -> String {
    format!("_INBOX_{node}")
}

fn secret(path: &PathBuf, what: &str) -> anyhow::Result<String> {
    let s = std::fs::read_to_string(path).with_context(|| format!("--{what} {}", path.display()))?;
    let s = s.trim().to_string();
    if s.is_empty() {
        bail!("--{what} {}: empty", path.display());
    }
    Ok(s)
}

fn env_secret(var: &str) -> Option<String> {
    std::env::var(var).ok().map(|s| s.trim().to_string()).filter(|s| !s.is_empty())
}

/// The URLs of `--url`, checked: nats:// or tls://, no credentials in
/// them, TLS for anything that is not loopback.
pub fn urls(conn: &Conn) -> anyhow::Result<Vec<String>> {
    runwire::serve::cluster::check_urls(&conn.url, conn.tls_ca.is_some()).map_err(|e| anyhow!("--url: {e}"))
}

/// The usage checks made before connecting (exit 2): the URLs, a user's
/// password, the inbox prefix.
pub fn check(conn: &Conn) -> anyhow::Result<()> {
    urls(conn)?;
    if let (Some(u), None) = (&conn.user, &conn.password_file) {
        if env_secret(PASSWORD_ENV).is_none() {
            bail!("--user {u}: no password: give --password-file FILE or set {PASSWORD_ENV}");
        }
    }
    if let Some(p) = &conn.inbox_prefix {
        let ok = !p.is_empty()
            && p.split('.').all(|t| !t.is_empty() && t.bytes().all(|b| b > b' ' && b != b'*' && b != b'>'));
        if !ok {
            bail!("--inbox-prefix {p:?}: not a subject prefix (tokens separated by '.', no spaces, '*' or '>')");
        }
    }
    Ok(())
}

/// Connects; `wait`: retrying the first connection until it succeeds (a
/// sidecar: the cluster may not be up yet), else failing at once. A
/// server's errors (a permissions violation, an authorization failure) are
/// said on stderr as they come.
pub async fn connect(conn: &Conn, name: &str, wait: bool) -> anyhow::Result<async_nats::Client> {
    check(conn)?;
    let urls = urls(conn)?;
    let mut o = async_nats::ConnectOptions::new()
        .name(name)
        .max_reconnects(None)
        .connection_timeout(Duration::from_secs(5))
        .event_callback(|e| async move {
            if let async_nats::Event::ServerError(e) = e {
                crate::report(format!("cluster: the server says: {e}"));
            }
        });
    if wait {
        o = o.retry_on_initial_connect();
    }
    if let Some(p) = &conn.creds {
        o = o.credentials_file(p).await.with_context(|| format!("--creds {}", p.display()))?;
    }
    if let Some(p) = &conn.token_file {
        o = o.token(secret(p, "token-file")?);
    } else if let (None, None, None) = (&conn.creds, &conn.user, &conn.nkey_file) {
        if let Some(t) = env_secret(TOKEN_ENV) {
            o = o.token(t);
        }
    }
    if let Some(u) = &conn.user {
        let pw = match &conn.password_file {
            Some(p) => secret(p, "password-file")?,
            None => env_secret(PASSWORD_ENV).ok_or_else(|| anyhow!("--user {u}: no password"))?,
        };
        o = o.user_and_password(u.clone(), pw);
    }
    if let Some(p) = &conn.nkey_file {
        o = o.nkey(secret(p, "nkey-file")?);
    }
    if let Some(ca) = &conn.tls_ca {
        if !ca.is_file() {
            bail!("--tls-ca {}: not a readable file", ca.display());
        }
        o = o.add_root_certificates(ca.clone()).require_tls(true);
    }
    if let (Some(c), Some(k)) = (&conn.tls_cert, &conn.tls_key) {
        for (f, what) in [(c, "tls-cert"), (k, "tls-key")] {
            if !f.is_file() {
                bail!("--{what} {}: not a readable file", f.display());
            }
        }
        o = o.add_client_certificate(c.clone(), k.clone());
    }
    if conn.url.split(',').any(|u| u.trim().starts_with("tls://")) {
        o = o.require_tls(true);
    }
    if let Some(p) = &conn.inbox_prefix {
        o = o.custom_inbox_prefix(p);
    }
    o.connect(urls.as_slice()).await.map_err(|e| anyhow!("{}: {e}", conn.url))
}

/// How long one pull of the hub's ordered consumers waits: the server's
/// idle heartbeat is half of it, and two missed heartbeats make the
/// client recreate the consumer. The library's defaults (30 s, 15 s) left
/// a consumer whose server was lost silent for up to a minute; with these
/// a lost consumer is recreated, against the stream's new leader, within
/// about 1.2 s (two idle pulls a second while nothing comes: nothing).
pub const PULL_EXPIRES: Duration = Duration::from_millis(600);

/// How long one JetStream API request of the hub waits before it is
/// tried again (while a server is lost, a request can go unanswered; a
/// new leader answers the next).
pub const API_TIMEOUT: Duration = Duration::from_millis(1500);

/// An ordered consumer's configuration as the hub uses them: from `policy`,
/// quick to notice a lost server ([`PULL_EXPIRES`]).
pub fn ordered(
    policy: async_nats::jetstream::consumer::DeliverPolicy,
) -> async_nats::jetstream::consumer::pull::OrderedConfig {
    async_nats::jetstream::consumer::pull::OrderedConfig {
        deliver_policy: policy,
        max_expires: PULL_EXPIRES,
        ..Default::default()
    }
}

/// The hub's JetStream context: requests given up after [`API_TIMEOUT`]
/// (the callers retry them).
pub fn hub_js(client: async_nats::Client) -> async_nats::jetstream::Context {
    let mut js = async_nats::jetstream::new(client);
    js.set_timeout(API_TIMEOUT);
    js
}

/// `f` again until it succeeds or `within` has passed (then its last error).
pub async fn again<T, F, Fut>(within: Duration, mut f: F) -> anyhow::Result<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<T>>,
{
    let deadline = tokio::time::Instant::now() + within;
    loop {
        let r = match tokio::time::timeout_at(deadline, f()).await {
            Ok(r) => r,
            Err(_) => Err(anyhow!("no answer within {within:?}")),
        };
        match r {
            Ok(v) => return Ok(v),
            Err(e) if tokio::time::Instant::now() + Duration::from_millis(100) >= deadline => return Err(e),
            Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conn(url: &str) -> Conn {
        Conn {
            url: url.into(),
            creds: None,
            token_file: None,
            user: None,
            password_file: None,
            nkey_file: None,
            tls_ca: None,
            tls_cert: None,
            tls_key: None,
            inbox_prefix: None,
        }
    }

    #[test]
    fn tls_is_required_off_loopback() {
        assert_eq!(urls(&conn("nats://127.0.0.1:4222, nats://[::1]:1,localhost:3")).unwrap().len(), 3);
        assert!(urls(&conn("nats://10.0.0.1:4222")).unwrap_err().to_string().contains("needs TLS"));
        let e = urls(&conn("tls://user:pw@example.com:4222")).unwrap_err().to_string();
        assert!(e.contains("no credentials in the URL") && !e.contains("pw"), "{e}");
        assert!(urls(&conn("tls://example.com:4222")).is_ok());
        assert!(urls(&conn("http://127.0.0.1:1")).is_err());
        assert!(urls(&conn(" , ")).is_err());
        let mut c = conn("nats://example.com:4222");
        c.tls_ca = Some("/ca.pem".into());
        assert!(urls(&c).is_ok());
    }

    #[test]
    fn a_user_needs_a_password_and_prefixes_are_subjects() {
        let mut c = conn("nats://127.0.0.1:4222");
        c.user = Some("node-alpha".into());
        c.password_file = Some("/pw".into());
        assert!(check(&c).is_ok());
        c.inbox_prefix = Some(node_inbox("alpha"));
        assert!(check(&c).is_ok());
        for bad in ["", "a..b", "a.>", "a b", "x.*"] {
            c.inbox_prefix = Some(bad.into());
            assert!(check(&c).is_err(), "{bad:?}");
        }
    }
}
