//! Browser origins as the server compares them (`--allow-origin`, the
//! `Origin` header, `--public-url`).

/// An origin exactly as browsers send it: `scheme://host[:port]`, nothing
/// more (no path, no trailing slash, no user info). Returned lowercased.
pub fn parse_origin(s: &str) -> Result<String, String> {
    let bad = || format!("{s:?} is not an origin: expected exactly scheme://host[:port], e.g. http://localhost:3000");
    let (scheme, rest) = s.split_once("://").ok_or_else(bad)?;
    let scheme_ok = scheme.as_bytes().first().is_some_and(u8::is_ascii_alphabetic)
        && scheme.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'-' | b'.'));
    if !scheme_ok || rest.is_empty() {
        return Err(bad());
    }
    let (host, port) = if let Some(r) = rest.strip_prefix('[') {
        let (inside, after) = r.split_once(']').ok_or_else(bad)?;
        if inside.is_empty() || !inside.bytes().all(|b| b.is_ascii_hexdigit() || b == b':' || b == b'.') {
            return Err(bad());
        }
        (rest.len() - after.len(), after)
    } else {
        match rest.rfind(':') {
            Some(i) => (i, &rest[i..]),
            None => (rest.len(), ""),
        }
    };
    let host_part = &rest[..host];
    if !host_part.starts_with('[')
        && (host_part.is_empty()
            || !host_part.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_')))
    {
        return Err(bad());
    }
    if !port.is_empty() {
        let digits = port.strip_prefix(':').ok_or_else(bad)?;
        if digits.is_empty() || digits.len() > 5 || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return Err(bad());
        }
        if digits.parse::<u32>().map_or(true, |p| p == 0 || p > 65535) {
            return Err(bad());
        }
    }
    Ok(s.to_ascii_lowercase())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origins_must_be_exactly_scheme_host_port() {
        for ok in ["http://localhost:3000", "https://app.example.com", "http://[::1]:8080", "HTTP://A.b"] {
            assert!(parse_origin(ok).is_ok(), "{ok}");
        }
        assert_eq!(parse_origin("HTTP://A.b").unwrap(), "http://a.b");
        for bad in [
            "localhost:3000",
            "http://localhost:3000/",
            "http://localhost:3000/x",
            "http://",
            "http://user@host",
            "http://host:",
            "http://host:0",
            "http://host:65536",
            "http://host?x",
            "*",
            "null",
            "http://[::1",
            "://host",
        ] {
            assert!(parse_origin(bad).is_err(), "{bad}");
        }
    }
}
