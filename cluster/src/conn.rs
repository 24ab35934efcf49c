//! Connecting to the cluster: URLs, credentials and TLS, from flags that
//! name files (never a secret on the command line).

use anyhow::{anyhow, bail, Context as _};
use std::path::PathBuf;
use std::time::Duration;

/// How to reach and authenticate to the NATS cluster (every subcommand).
#[derive(clap::Args, Debug, Clone)]
pub struct Conn {
    /// The NATS servers: comma-separated URLs (nats://host:port, tls://host:port). A URL whose
    /// host is not loopback needs TLS (a tls:// URL or --tls-ca).
    #[arg(long, value_name = "URL[,URL...]")]
    pub url: String,
    /// A NATS credentials file (JWT and nkey seed), as `nsc` writes it.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["token_file", "user", "nkey_file"])]
    pub creds: Option<PathBuf>,
    /// A file holding the NATS token.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["user", "nkey_file"])]
    pub token_file: Option<PathBuf>,
    /// The NATS user (with --password-file).
    #[arg(long, value_name = "NAME", requires = "password_file", conflicts_with = "nkey_file")]
    pub user: Option<String>,
    /// A file holding the NATS user's password.
    #[arg(long, value_name = "FILE", requires = "user")]
    pub password_file: Option<PathBuf>,
    /// A file holding an nkey seed (SU...).
    #[arg(long, value_name = "FILE")]
    pub nkey_file: Option<PathBuf>,
    /// The CA certificate (PEM) that signed the servers' certificates; implies TLS.
    #[arg(long, value_name = "FILE")]
    pub tls_ca: Option<PathBuf>,
    /// A client certificate (PEM), with --tls-key.
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// The client certificate's key (PEM).
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// The prefix of this client's reply subjects (a node's account permits only its own).
    #[arg(long, value_name = "PREFIX")]
    pub inbox_prefix: Option<String>,
}

fn secret(path: &PathBuf, what: &str) -> anyhow::Result<String> {
    let s = std::fs::read_to_string(path).with_context(|| format!("--{what} {}", path.display()))?;
    let s = s.trim().to_string();
    if s.is_empty() {
        bail!("--{what} {}: empty", path.display());
    }
    Ok(s)
}

/// The URLs of `--url`, checked: TLS for anything that is not loopback.
pub fn urls(conn: &Conn) -> anyhow::Result<Vec<String>> {
    let mut out = Vec::new();
    for u in conn.url.split(',').map(str::trim).filter(|u| !u.is_empty()) {
        let (scheme, rest) = u.split_once("://").unwrap_or(("nats", u));
        let hostport = rest.rsplit('@').next().unwrap_or(rest);
        let host = match hostport.strip_prefix('[') {
            Some(v6) => v6.split(']').next().unwrap_or(""),
            None => hostport.split(':').next().unwrap_or(""),
        };
        let loopback = host == "localhost" || host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback());
        let tls = scheme == "tls" || conn.tls_ca.is_some();
        if !matches!(scheme, "nats" | "tls") {
            bail!("--url {u}: the scheme must be nats:// or tls://");
        }
        if !loopback && !tls {
            bail!("--url {u}: a server that is not on loopback needs TLS (a tls:// URL or --tls-ca)");
        }
        out.push(u.to_string());
    }
    if out.is_empty() {
        bail!("--url: no server given");
    }
    Ok(out)
}

/// Connects; `wait`: retrying the first connection until it succeeds (a
/// sidecar: the cluster may not be up yet), else failing at once.
pub async fn connect(conn: &Conn, name: &str, wait: bool) -> anyhow::Result<async_nats::Client> {
    let urls = urls(conn)?;
    let mut o =
        async_nats::ConnectOptions::new().name(name).max_reconnects(None).connection_timeout(Duration::from_secs(5));
    if wait {
        o = o.retry_on_initial_connect();
    }
    if let Some(p) = &conn.creds {
        o = o.credentials_file(p).await.with_context(|| format!("--creds {}", p.display()))?;
    }
    if let Some(p) = &conn.token_file {
        o = o.token(secret(p, "token-file")?);
    }
    if let (Some(u), Some(p)) = (&conn.user, &conn.password_file) {
        o = o.user_and_password(u.clone(), secret(p, "password-file")?);
    }
    if let Some(p) = &conn.nkey_file {
        o = o.nkey(secret(p, "nkey-file")?);
    }
    if let Some(ca) = &conn.tls_ca {
        o = o.add_root_certificates(ca.clone()).require_tls(true);
    }
    if let (Some(c), Some(k)) = (&conn.tls_cert, &conn.tls_key) {
        o = o.add_client_certificate(c.clone(), k.clone());
    }
    if let Some(p) = &conn.inbox_prefix {
        o = o.custom_inbox_prefix(p);
    }
    o.connect(urls.as_slice()).await.map_err(|e| anyhow!("{}: {e}", conn.url))
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
        assert!(urls(&conn("nats://user:pw@example.com:4222")).is_err());
        assert!(urls(&conn("tls://example.com:4222")).is_ok());
        assert!(urls(&conn("http://127.0.0.1:1")).is_err());
        assert!(urls(&conn(" , ")).is_err());
        let mut c = conn("nats://example.com:4222");
        c.tls_ca = Some("/ca.pem".into());
        assert!(urls(&c).is_ok());
    }
}
