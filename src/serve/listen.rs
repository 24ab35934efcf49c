//! Where the server listens: `ADDR:PORT` (TCP, loopback unless
//! `--allow-remote`), or `unix:PATH`, a unix stream socket for a reverse
//! proxy on the same machine (issue 39).
//!
//! A unix socket is created with mode 0600, in a private directory first
//! and then renamed into place, so that no other user's process can ever
//! connect to it, not even in the instant between `bind` and `chmod`: only
//! processes of the server's own user (the proxy runs as that user; root
//! aside) reach the server, and with no TCP port open no local process can
//! pose as the proxy. A socket file left by a server that is gone is
//! replaced; a live one (something answers on it) or a path that is not a
//! socket is an error. The file is removed when the listener is dropped.
//!
//! The handlers are written for `TcpStream`. A unix stream socket answers
//! every call they make on one the same way (read, write, shutdown, read
//! and write timeouts, poll, dup, peek, the send queue's `TIOCOUTQ`), so an
//! accepted unix connection is handed to them as one: a safe conversion of
//! its owned descriptor. The calls that differ are TCP's own:
//! `set_nodelay` fails (its result is ignored) and `peer_addr` has no IP
//! address (the approval links' per-address limit then counts every client
//! of the socket as one address, as a proxy's clients are anyway).

use std::fmt;
use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::str::FromStr;

/// The prefix of `--listen unix:PATH`.
pub const UNIX: &str = "unix:";

/// The mode of the socket file: the server's own user only.
pub const SOCKET_MODE: u32 = 0o600;

/// `--listen`: a TCP address or a unix socket's path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Listen {
    Tcp(SocketAddr),
    Unix(PathBuf),
}

impl Listen {
    /// The IP address (a unix socket is local: loopback).
    pub fn ip(&self) -> IpAddr {
        match self {
            Listen::Tcp(a) => a.ip(),
            Listen::Unix(_) => IpAddr::V4(Ipv4Addr::LOCALHOST),
        }
    }

    /// The port asked for (a unix socket has none: 0).
    pub fn port(&self) -> u16 {
        match self {
            Listen::Tcp(a) => a.port(),
            Listen::Unix(_) => 0,
        }
    }

    pub fn is_unix(&self) -> bool {
        matches!(self, Listen::Unix(_))
    }
}

impl FromStr for Listen {
    type Err = String;

    /// `ADDR:PORT` (`localhost` read as 127.0.0.1) or `unix:PATH`.
    fn from_str(s: &str) -> Result<Listen, String> {
        if let Some(p) = s.strip_prefix(UNIX) {
            if p.is_empty() {
                return Err(format!("{s:?}: give the socket's path after unix: (e.g. unix:/run/runwire/serve.sock)"));
            }
            return Ok(Listen::Unix(PathBuf::from(p)));
        }
        if let Some(port) = s.strip_prefix("localhost:") {
            let port: u16 = port.parse().map_err(|_| format!("{s:?}: the port must be a number from 0 to 65535"))?;
            return Ok(Listen::Tcp(SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), port)));
        }
        s.parse().map(Listen::Tcp).map_err(|_| {
            format!("{s:?} is not ADDR:PORT or unix:PATH (e.g. 127.0.0.1:8787, [::1]:8787, unix:/run/rw.sock)")
        })
    }
}

impl fmt::Display for Listen {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Listen::Tcp(a) => write!(f, "{a}"),
            Listen::Unix(p) => write!(f, "{UNIX}{}", p.display()),
        }
    }
}

/// A bound listener.
pub enum Listener {
    Tcp(TcpListener),
    /// The socket and its file (removed on drop).
    Unix(UnixListener, PathBuf),
}

impl Listener {
    /// Binds `at` (a unix socket as the module doc says).
    pub fn bind(at: &Listen) -> io::Result<Listener> {
        match at {
            Listen::Tcp(a) => TcpListener::bind(a).map(Listener::Tcp),
            Listen::Unix(p) => bind_unix(p).map(|l| Listener::Unix(l, p.clone())),
        }
    }

    /// The port it listens on (0 for a unix socket).
    pub fn port(&self) -> u16 {
        match self {
            Listener::Tcp(l) => l.local_addr().map_or(0, |a| a.port()),
            Listener::Unix(..) => 0,
        }
    }

    /// Where clients reach it: `http://ADDR:PORT`, or `unix:PATH` (e.g.
    /// `curl --unix-socket PATH http://localhost/healthz`).
    pub fn base(&self) -> io::Result<String> {
        match self {
            Listener::Tcp(l) => l.local_addr().map(|a| format!("http://{a}")),
            Listener::Unix(_, p) => Ok(format!("{UNIX}{}", p.display())),
        }
    }

    pub fn set_nonblocking(&self, on: bool) -> io::Result<()> {
        match self {
            Listener::Tcp(l) => l.set_nonblocking(on),
            Listener::Unix(l, _) => l.set_nonblocking(on),
        }
    }

    /// The next connection (see the module doc for a unix one).
    pub fn accept(&self) -> io::Result<TcpStream> {
        match self {
            Listener::Tcp(l) => l.accept().map(|(s, _)| s),
            Listener::Unix(l, _) => l.accept().map(|(s, _)| TcpStream::from(OwnedFd::from(s))),
        }
    }
}

impl AsFd for Listener {
    fn as_fd(&self) -> BorrowedFd<'_> {
        match self {
            Listener::Tcp(l) => l.as_fd(),
            Listener::Unix(l, _) => l.as_fd(),
        }
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        if let Listener::Unix(_, p) = self {
            let _ = std::fs::remove_file(p);
        }
    }
}

/// The socket at `path`, mode [`SOCKET_MODE`] from its first moment.
fn bind_unix(path: &Path) -> io::Result<UnixListener> {
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_socket() => {
            if UnixStream::connect(path).is_ok() {
                return Err(io::Error::new(io::ErrorKind::AddrInUse, "a server already listens on this socket"));
            }
            // A socket nobody answers on: left by a server that is gone.
            std::fs::remove_file(path)?;
        }
        Ok(_) => {
            return Err(io::Error::new(io::ErrorKind::AlreadyExists, "exists and is not a socket; not replaced"));
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let name = path.file_name().ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "no file name"))?;
    // A private directory beside it (mode 0700): the socket is bound and
    // chmodded where no one else can reach it, then renamed into place.
    let private = parent.join(format!(".{}.{}.tmp", name.to_string_lossy(), std::process::id()));
    let _ = std::fs::remove_dir_all(&private);
    std::fs::DirBuilder::new().mode(0o700).create(&private)?;
    let tmp = private.join("s");
    let bound = (|| {
        let l = UnixListener::bind(&tmp)?;
        std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(SOCKET_MODE))?;
        std::fs::rename(&tmp, path)?;
        Ok(l)
    })();
    let _ = std::fs::remove_file(&tmp);
    let _ = std::fs::remove_dir(&private);
    bound
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listen_parses_addresses_and_unix_paths() {
        assert_eq!("localhost:0".parse::<Listen>().unwrap(), Listen::Tcp("127.0.0.1:0".parse().unwrap()));
        assert_eq!("unix:/run/rw.sock".parse::<Listen>().unwrap(), Listen::Unix("/run/rw.sock".into()));
        assert_eq!("unix:/run/rw.sock".parse::<Listen>().unwrap().to_string(), "unix:/run/rw.sock");
        assert!("unix:".parse::<Listen>().is_err() && "nowhere".parse::<Listen>().is_err());
        assert!(Listen::Unix("x".into()).ip().is_loopback());
    }

    #[test]
    fn a_unix_socket_is_the_owners_only_and_replaces_only_a_dead_one() {
        let dir = std::env::temp_dir().join(format!("rw-listen-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("serve.sock");
        let at = Listen::Unix(p.clone());
        let l = Listener::bind(&at).unwrap();
        let m = std::fs::symlink_metadata(&p).unwrap();
        assert!(m.file_type().is_socket());
        assert_eq!(m.permissions().mode() & 0o777, SOCKET_MODE);
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1, "no private directory left");
        // A live one is not replaced.
        assert_eq!(Listener::bind(&at).err().map(|e| e.kind()), Some(io::ErrorKind::AddrInUse));
        let c = UnixStream::connect(&p).unwrap();
        drop(c);
        drop(l);
        assert!(!p.exists(), "removed on drop");
        // A dead socket is replaced; a file that is not a socket is not.
        let dead = UnixListener::bind(&p).unwrap();
        drop(dead);
        let l = Listener::bind(&at).unwrap();
        drop(l);
        std::fs::write(&p, "data").unwrap();
        assert!(Listener::bind(&at).is_err());
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "data");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
