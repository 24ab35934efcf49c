//! The IO edge of `agui-check --url`: one HTTP/1.1 POST of a `RunAgentInput`
//! over a plain TCP connection, and its response body as a reader (chunked,
//! sized or read to the close). `http://` only: a producer under test is
//! reached directly, on loopback or a local network; TLS would bring a
//! dependency this crate does not otherwise need.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

/// A response head over this is refused (a producer, not a web page).
const MAX_HEAD: usize = 64 * 1024;

/// `http://HOST[:PORT][/PATH]`, split.
#[derive(Debug, PartialEq)]
pub struct Url {
    pub host: String,
    pub port: u16,
    pub path: String,
}

/// Parses an `http://` URL; anything else is a usage error with a reason.
pub fn parse_url(url: &str) -> Result<Url, String> {
    let rest =
        url.strip_prefix("http://").ok_or_else(|| format!("{url:?}: only http:// URLs are supported (no TLS)"))?;
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    if authority.contains('@') {
        return Err(format!("{url:?}: credentials in the URL are not supported"));
    }
    let (host, port) = match authority.rsplit_once(':') {
        Some((h, p)) if !h.ends_with(']') || authority.starts_with('[') => {
            let port = p.parse::<u16>().map_err(|_| format!("{url:?}: bad port {p:?}"))?;
            (h, port)
        }
        _ => (authority, 80),
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    if host.is_empty() || path.bytes().any(|b| b <= b' ' || b == 0x7f) {
        return Err(format!("{url:?}: not a usable URL"));
    }
    Ok(Url { host: host.to_string(), port, path: path.to_string() })
}

/// The response: status, `Content-Type`, and the body to read.
pub struct Response {
    pub status: u16,
    pub content_type: Option<String>,
    pub body: Body,
}

enum Framing {
    Chunked { left: u64, done: bool },
    Length(u64),
    Close,
}

/// The response body, de-chunked.
pub struct Body {
    r: BufReader<TcpStream>,
    framing: Framing,
}

/// POSTs `body` (JSON) to `url` with `Accept: text/event-stream`, waiting at
/// most `timeout` for any one read or write.
pub fn post(url: &Url, body: &[u8], timeout: Duration) -> io::Result<Response> {
    let addr = (url.host.as_str(), url.port)
        .to_socket_addrs()?
        .next()
        .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, "the host has no address"))?;
    let s = TcpStream::connect_timeout(&addr, timeout)?;
    s.set_read_timeout(Some(timeout))?;
    s.set_write_timeout(Some(timeout))?;
    let host = if url.host.contains(':') { format!("[{}]", url.host) } else { url.host.clone() };
    let head = format!(
        "POST {} HTTP/1.1\r\nHost: {host}:{}\r\nContent-Type: application/json\r\nAccept: text/event-stream\r\n\
         Content-Length: {}\r\nConnection: close\r\nUser-Agent: agui-check\r\n\r\n",
        url.path,
        url.port,
        body.len()
    );
    let mut w = &s;
    w.write_all(head.as_bytes())?;
    w.write_all(body)?;
    w.flush()?;
    let mut r = BufReader::new(s);
    let bad = |m: String| io::Error::new(io::ErrorKind::InvalidData, m);
    let read_line = |r: &mut BufReader<TcpStream>, used: &mut usize| -> io::Result<String> {
        let mut line = Vec::new();
        r.by_ref().take((MAX_HEAD - *used) as u64).read_until(b'\n', &mut line)?;
        *used += line.len();
        if !line.ends_with(b"\n") {
            return Err(bad("the response head is cut off or over 64 KiB".into()));
        }
        Ok(String::from_utf8_lossy(&line).trim_end().to_string())
    };
    let mut used = 0;
    let status_line = read_line(&mut r, &mut used)?;
    let mut parts = status_line.split(' ');
    let status = match (parts.next(), parts.next().and_then(|c| c.parse::<u16>().ok())) {
        (Some(v), Some(code)) if v.starts_with("HTTP/1.") => code,
        _ => return Err(bad(format!("not an HTTP/1.x status line: {status_line:?}"))),
    };
    let (mut content_type, mut chunked, mut length) = (None, false, None);
    loop {
        let line = read_line(&mut r, &mut used)?;
        if line.is_empty() {
            break;
        }
        let Some((k, v)) = line.split_once(':') else { continue };
        let v = v.trim();
        match k.trim().to_ascii_lowercase().as_str() {
            "content-type" => content_type = Some(v.to_string()),
            "transfer-encoding" => chunked = v.to_ascii_lowercase().contains("chunked"),
            "content-length" => length = v.parse::<u64>().ok(),
            _ => {}
        }
    }
    let framing = match (chunked, length) {
        (true, _) => Framing::Chunked { left: 0, done: false },
        (false, Some(n)) => Framing::Length(n),
        _ => Framing::Close,
    };
    Ok(Response { status, content_type, body: Body { r, framing } })
}

impl Read for Body {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match &mut self.framing {
            Framing::Close => self.r.read(buf),
            Framing::Length(left) => {
                if *left == 0 || buf.is_empty() {
                    return Ok(0);
                }
                let want = buf.len().min(usize::try_from(*left).unwrap_or(usize::MAX));
                let n = self.r.read(&mut buf[..want])?;
                *left -= n as u64;
                Ok(n)
            }
            Framing::Chunked { left, done } => {
                if *done {
                    return Ok(0);
                }
                if *left == 0 {
                    let mut line = Vec::new();
                    self.r.by_ref().take(1024).read_until(b'\n', &mut line)?;
                    let text = String::from_utf8_lossy(&line);
                    let size = text.trim().split(';').next().unwrap_or("");
                    let n = u64::from_str_radix(size, 16).map_err(|_| {
                        io::Error::new(io::ErrorKind::InvalidData, format!("bad chunk size line {:?}", text.trim()))
                    })?;
                    if n == 0 {
                        *done = true;
                        return Ok(0);
                    }
                    *left = n;
                }
                let want = buf.len().min(usize::try_from(*left).unwrap_or(usize::MAX));
                let n = self.r.read(&mut buf[..want])?;
                if n == 0 {
                    return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "the connection closed inside a chunk"));
                }
                *left -= n as u64;
                if *left == 0 {
                    let mut crlf = [0u8; 2];
                    self.r.read_exact(&mut crlf)?;
                }
                Ok(n)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls() {
        assert_eq!(
            parse_url("http://127.0.0.1:8787/agui").unwrap(),
            Url { host: "127.0.0.1".into(), port: 8787, path: "/agui".into() }
        );
        assert_eq!(parse_url("http://[::1]:9/x").unwrap(), Url { host: "::1".into(), port: 9, path: "/x".into() });
        assert_eq!(parse_url("http://h").unwrap().path, "/");
        assert!(parse_url("https://h/").is_err());
        assert!(parse_url("http://h:99999/").is_err());
        assert!(parse_url("http://u@h/").is_err());
    }
}
