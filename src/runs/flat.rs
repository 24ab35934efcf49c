//! A fast path for the small JSON texts a listing reads by the thousand
//! (journal lines, registry pointers, plans): JSON made only of objects,
//! arrays, plain strings (no escape, no control character), integers and
//! `null` is walked in place, without allocating.
//!
//! Every method answers `None` for anything outside that subset (an escape,
//! a float, `true`, bad UTF-8, a syntax error) and its callers answer `None`
//! for anything else they do not take (an unknown or repeated key, a
//! missing field): the caller then parses the text with serde as before. So
//! this path changes speed, never results: it only answers for texts serde
//! reads to the very same values (the property tests in `journal`, `plan`
//! and `registry` compare the two on generated and mangled input).

/// The bytes that end a plain string: its closing quote, or what would
/// need unescaping (a backslash, a control character).
const STOP: [bool; 256] = {
    let mut t = [false; 256];
    let mut c = 0;
    while c < 0x20 {
        t[c] = true;
        c += 1;
    }
    t[b'"' as usize] = true;
    t[b'\\' as usize] = true;
    t
};

/// A cursor over one JSON text.
pub struct Cur<'a> {
    /// The text; empty when it is not UTF-8 (every read then gives up).
    s: &'a str,
    b: &'a [u8],
    i: usize,
}

impl<'a> Cur<'a> {
    /// The text is checked as UTF-8 once, so each string is a slice of it
    /// between two quotes (ASCII: always on a character boundary).
    pub fn new(b: &'a [u8]) -> Cur<'a> {
        let s = std::str::from_utf8(b).unwrap_or_default();
        Cur { s, b: s.as_bytes(), i: 0 }
    }

    /// Skips JSON whitespace (what serde_json skips: space, tab, LF, CR).
    fn ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.b.get(self.i) {
            self.i += 1;
        }
    }

    /// The next byte after whitespace, not consumed.
    fn peek(&mut self) -> Option<u8> {
        self.ws();
        self.b.get(self.i).copied()
    }

    fn eat(&mut self, c: u8) -> Option<()> {
        (self.peek()? == c).then(|| self.i += 1)
    }

    /// A string with no escape and no control character, valid UTF-8.
    pub fn str(&mut self) -> Option<&'a str> {
        self.eat(b'"')?;
        let start = self.i;
        // One table look-up a byte: the strings are short, too short for memchr to pay.
        let len = self.b[start..].iter().position(|&c| STOP[c as usize])?;
        if self.b[start + len] != b'"' {
            return None;
        }
        self.i = start + len + 1;
        Some(&self.s[start..start + len])
    }

    /// `null`, consumed: `Some(true)`; another value, left: `Some(false)`.
    pub fn null(&mut self) -> Option<bool> {
        if self.peek()? != b'n' {
            return Some(false);
        }
        let end = self.i + 4;
        (self.b.get(self.i..end)? == b"null" && !self.b.get(end).is_some_and(u8::is_ascii_alphanumeric))
            .then(|| self.i = end)
            .map(|_| true)
    }

    /// A string, or `null` (`None` inside).
    pub fn opt_str(&mut self) -> Option<Option<&'a str>> {
        if self.null()? {
            return Some(None);
        }
        self.str().map(Some)
    }

    /// An integer of at most 18 digits (so it fits an `i64`), no fraction
    /// or exponent, no leading zero.
    pub fn int(&mut self) -> Option<i64> {
        self.ws();
        let neg = self.b.get(self.i) == Some(&b'-');
        let start = self.i + usize::from(neg);
        let digits = self.b[start.min(self.b.len())..].iter().take_while(|c| c.is_ascii_digit()).count();
        if digits == 0 || digits > 18 || (digits > 1 && self.b[start] == b'0') {
            return None;
        }
        let end = start + digits;
        if matches!(self.b.get(end), Some(b'.' | b'e' | b'E')) {
            return None;
        }
        let n: i64 = std::str::from_utf8(&self.b[start..end]).ok()?.parse().ok()?;
        self.i = end;
        Some(if neg { -n } else { n })
    }

    /// An integer, or `null` (`None` inside).
    pub fn opt_int(&mut self) -> Option<Option<i64>> {
        if self.null()? {
            return Some(None);
        }
        self.int().map(Some)
    }

    /// An object: `f(cursor, key)` must read the key's value (or answer
    /// `None` to give up).
    pub fn object(&mut self, mut f: impl FnMut(&mut Cur<'a>, &'a str) -> Option<()>) -> Option<()> {
        self.items(b'{', b'}', |c| {
            let key = c.str()?;
            c.eat(b':')?;
            f(c, key)
        })
    }

    /// An array: `f(cursor)` must read each element.
    pub fn array(&mut self, f: impl FnMut(&mut Cur<'a>) -> Option<()>) -> Option<()> {
        self.items(b'[', b']', f)
    }

    /// `open`, items read by `item` and separated by commas, `close`.
    fn items(&mut self, open: u8, close: u8, mut item: impl FnMut(&mut Cur<'a>) -> Option<()>) -> Option<()> {
        self.eat(open)?;
        if self.eat(close).is_some() {
            return Some(());
        }
        loop {
            item(self)?;
            match self.peek()? {
                b',' => self.i += 1,
                c if c == close => {
                    self.i += 1;
                    return Some(());
                }
                _ => return None,
            }
        }
    }

    /// Nothing but whitespace is left (serde_json refuses trailing characters).
    pub fn end(&mut self) -> Option<()> {
        self.ws();
        (self.i == self.b.len()).then_some(())
    }
}

/// Which of up to 64 keys were seen, to give up on a repeated one (serde
/// refuses a duplicate field).
#[derive(Default)]
pub struct Seen(u64);

impl Seen {
    /// Marks key number `k`; `None` when it was already seen.
    pub fn mark(&mut self, k: usize) -> Option<()> {
        let bit = 1u64 << k;
        (self.0 & bit == 0).then(|| self.0 |= bit)
    }

    pub fn has(&self, k: usize) -> bool {
        self.0 & (1 << k) != 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_subset_is_read_and_everything_else_gives_up() {
        let mut c = Cur::new(br#" { "a" : "x y", "b":[ "1","2" ],"c":-12,"d":null,"e":[] } "#);
        let mut got = Vec::new();
        c.object(|c, k| {
            match k {
                "a" => got.push(c.str()?.to_string()),
                "b" => c.array(|c| c.str().map(|s| got.push(s.to_string())))?,
                "c" => got.push(c.int()?.to_string()),
                "d" => got.push(format!("{:?}", c.opt_str()?)),
                "e" => c.array(|_| None)?,
                _ => return None,
            }
            Some(())
        })
        .unwrap();
        c.end().unwrap();
        assert_eq!(got, ["x y", "1", "2", "-12", "None"]);
        for bad in
            [r#""a\"b""#, "\"a\tb\"", r#""a"#, "01", "1.5", "1e3", "-", "1234567890123456789", "nul", "nullx", "true"]
        {
            let whole = |f: fn(&mut Cur) -> Option<()>| {
                let mut c = Cur::new(bad.as_bytes());
                f(&mut c).and_then(|_| c.end()).is_some()
            };
            assert!(!whole(|c| c.opt_str().map(|_| ())), "{bad} was taken as a string");
            assert!(!whole(|c| c.opt_int().map(|_| ())), "{bad} was taken as an integer");
        }
        for bad in [r#"{"a":"x",}"#, r#"{"a" "x"}"#, r#"{"a":"x"} x"#, r#"["a",]"#] {
            let mut c = Cur::new(bad.as_bytes());
            let r = if bad.starts_with('{') {
                c.object(|c, _| c.str().map(|_| ()))
            } else {
                c.array(|c| c.str().map(|_| ()))
            };
            assert!(r.and_then(|_| c.end()).is_none(), "{bad} was taken");
        }
        let mut s = Seen::default();
        assert!(s.mark(3).is_some() && s.has(3) && s.mark(3).is_none() && !s.has(2));
    }
}
