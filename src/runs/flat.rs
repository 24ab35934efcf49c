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
#[cfg_attr(target_arch = "x86_64", allow(dead_code))]
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

/// The index of the first byte at or after `i` that ends a plain string
/// (a quote, a backslash, a control character); `None`: the text from `i`
/// on is plain. Sixteen bytes at a time (SSE2, part of every x86-64),
/// the last few too (see `stop_at_16`), or eight (elsewhere) while that
/// many are left, then a table look-up a byte: a listing reads and writes
/// thousands of strings, most shorter than sixteen bytes.
#[inline]
pub fn stop_at(b: &[u8], i: usize) -> Option<usize> {
    #[cfg(target_arch = "x86_64")]
    {
        // Most strings (keys, ids, states) end within sixteen bytes: one
        // load here, inlined where it is asked, with no loop to set up.
        match b.get(i..i + 16) {
            // SAFETY: `chunk` is 16 bytes.
            Some(chunk) => match unsafe { stops_16(chunk.as_ptr()) } {
                0 => stop_at_16(b, i + 16),
                m => Some(i + m.trailing_zeros() as usize),
            },
            None => stop_at_16(b, i),
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let i = match stop_at_8(b, i) {
            Ok(found) => return Some(found),
            Err(i) => i,
        };
        b.get(i..)?.iter().position(|&c| STOP[c as usize]).map(|n| i + n)
    }
}

/// Bit `k` set when byte `k` of the 16 at `p` is a quote, a backslash or
/// a control character.
///
/// # Safety
/// `p` must point to 16 readable bytes.
#[cfg(target_arch = "x86_64")]
#[inline]
unsafe fn stops_16(p: *const u8) -> u32 {
    use std::arch::x86_64::*;
    // SAFETY: SSE2 is part of x86-64; the caller vouches for the 16 bytes
    // (an unaligned load: any alignment).
    unsafe {
        let w = _mm_loadu_si128(p.cast());
        let quote = _mm_cmpeq_epi8(w, _mm_set1_epi8(b'"' as i8));
        let backslash = _mm_cmpeq_epi8(w, _mm_set1_epi8(b'\\' as i8));
        // Unsigned `w <= 0x1f`: its minimum with 0x1f is itself.
        let control = _mm_cmpeq_epi8(_mm_min_epu8(w, _mm_set1_epi8(0x1f)), w);
        _mm_movemask_epi8(_mm_or_si128(_mm_or_si128(quote, backslash), control)) as u32
    }
}

/// [`stop_at`] sixteen bytes at a time. The last fewer than sixteen are
/// read in one more load too: the sixteen that end the text (the first
/// bytes of which were seen already, so their bits are dropped), or, in a
/// text shorter than that, a copy padded with a byte that is no stop.
#[cfg(target_arch = "x86_64")]
fn stop_at_16(b: &[u8], mut i: usize) -> Option<usize> {
    while let Some(chunk) = b.get(i..i + 16) {
        // SAFETY: `chunk` is 16 bytes.
        let m = unsafe { stops_16(chunk.as_ptr()) };
        if m != 0 {
            return Some(i + m.trailing_zeros() as usize);
        }
        i += 16;
    }
    let left = b.len().checked_sub(i).filter(|&n| n > 0)?;
    let m = if b.len() >= 16 {
        // SAFETY: the last 16 bytes of `b`; bytes `i..` are its last `left`.
        unsafe { stops_16(b.as_ptr().add(b.len() - 16)) >> (16 - left) }
    } else {
        let mut pad = [b'a'; 16];
        pad[..left].copy_from_slice(&b[i..]);
        // SAFETY: `pad` is 16 bytes.
        unsafe { stops_16(pad.as_ptr()) }
    };
    (m != 0).then(|| i + m.trailing_zeros() as usize)
}

/// [`stop_at`] eight bytes at a time, in a `u64`: `Ok` the stop found,
/// `Err` where fewer than eight bytes are left.
#[cfg_attr(target_arch = "x86_64", allow(dead_code))]
fn stop_at_8(b: &[u8], mut i: usize) -> Result<usize, usize> {
    const ONES: u64 = u64::from_ne_bytes([1; 8]);
    const HIGH: u64 = u64::from_ne_bytes([0x80; 8]);
    // High bit of each byte of `w` below `n` (n <= 0x80). Only the lowest
    // flagged byte is exact (a borrow can flag bytes above it), the one used.
    let below = |w: u64, n: u8| w.wrapping_sub(ONES * u64::from(n)) & !w & HIGH;
    while let Some(chunk) = b.get(i..i + 8) {
        let mut w = [0u8; 8];
        w.copy_from_slice(chunk);
        let w = u64::from_le_bytes(w);
        // A zero byte of `w ^ c` is a byte equal to `c`.
        let m = below(w ^ (ONES * u64::from(b'"')), 1) | below(w ^ (ONES * u64::from(b'\\')), 1) | below(w, 0x20);
        if m != 0 {
            return Ok(i + (m.trailing_zeros() / 8) as usize);
        }
        i += 8;
    }
    Err(i)
}

/// `b` as text when it is UTF-8. Sixteen bytes at a time while they are
/// ASCII (what runwire's files and summaries almost always are: a
/// listing checks megabytes of them), then `std::str::from_utf8` for the
/// rest, so the answer is always std's.
pub fn utf8(b: &[u8]) -> Option<&str> {
    let mut i = 0;
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::*;
        // SAFETY (both): SSE2 is part of x86-64; each load reads 16 bytes of `b`.
        let high = |at: usize| unsafe { _mm_movemask_epi8(_mm_loadu_si128(b.as_ptr().add(at).cast())) };
        while i + 16 <= b.len() && high(i) == 0 {
            i += 16;
        }
        // The last few bytes in one more load: the sixteen that end `b`.
        if i + 16 > b.len() && b.len() >= 16 && high(b.len() - 16) == 0 {
            i = b.len();
        }
    }
    if !b[i..].is_ascii() {
        std::str::from_utf8(&b[i..]).ok()?;
    }
    // SAFETY: `b[..i]` is ASCII and `b[i..]` is UTF-8 (just checked): a
    // sequence never starts inside ASCII, so the whole is UTF-8.
    Some(unsafe { std::str::from_utf8_unchecked(b) })
}

/// Where the JSON whitespace (what serde_json skips: space, tab, LF, CR)
/// from `i` on ends. On a local index, not the cursor's: a loop that stores
/// the cursor at each byte costs more than the bytes.
fn skip_ws(b: &[u8], mut i: usize) -> usize {
    while let Some(b' ' | b'\t' | b'\n' | b'\r') = b.get(i) {
        i += 1;
    }
    i
}

/// A cursor over one JSON text.
pub struct Cur<'a> {
    /// The text, UTF-8; empty when it is not (every read then gives up).
    b: &'a [u8],
    i: usize,
}

impl<'a> Cur<'a> {
    /// The text is checked as UTF-8 once, so each string is a slice of it
    /// between two quotes (ASCII: always on a character boundary).
    pub fn new(b: &'a [u8]) -> Cur<'a> {
        Cur { b: utf8(b).unwrap_or_default().as_bytes(), i: 0 }
    }

    /// Skips JSON whitespace (what serde_json skips: space, tab, LF, CR).
    fn ws(&mut self) {
        self.i = skip_ws(self.b, self.i);
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
        let b = self.b;
        let i = skip_ws(b, self.i);
        if b.get(i) != Some(&b'"') {
            self.i = i;
            return None;
        }
        let start = i + 1;
        let end = stop_at(b, start)?;
        if b[end] != b'"' {
            return None;
        }
        self.i = end + 1;
        // SAFETY: `b` is UTF-8 (`Cur::new`), and both ends lie next to an
        // ASCII quote, which no multi-byte sequence contains: the slice is
        // whole characters.
        Some(unsafe { std::str::from_utf8_unchecked(&b[start..end]) })
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

    proptest::proptest! {
        /// The ASCII fast path answers as std does, whatever the bytes and
        /// wherever the first non-ASCII byte falls (in or after a chunk).
        #[test]
        fn utf8_answers_as_std(
            ascii in proptest::collection::vec(0u8..0x80, 0..70),
            rest in proptest::collection::vec(proptest::num::u8::ANY, 0..12),
            text in "\\PC{0,20}",
        ) {
            for b in [[&ascii[..], &rest[..]].concat(), [&ascii[..], text.as_bytes()].concat()] {
                proptest::prop_assert_eq!(utf8(&b), std::str::from_utf8(&b).ok());
            }
        }

        /// Eight bytes at a time finds the byte a byte-by-byte scan finds,
        /// wherever it is: in a word, at a word's edge, in the tail, none;
        /// among bytes just around the stops (0x1f, 0x20, 0x21, 0x5b, 0x5d,
        /// bytes with the high bit set).
        #[test]
        fn stop_at_finds_the_first_stop_byte(
            bytes in proptest::collection::vec(
                proptest::prop_oneof![
                    proptest::sample::select(vec![0u8, 0x1f, 0x20, 0x21, 0x22, 0x23, 0x5b, 0x5c, 0x5d, 0x7f, 0x80, 0xa2, 0xdc, 0xff]),
                    b'a'..=b'z',
                    proptest::num::u8::ANY,
                ],
                0..80,
            ),
            start in 0usize..80,
        ) {
            let start = start.min(bytes.len());
            let slow = bytes[start..].iter().position(|&c| c < 0x20 || c == b'"' || c == b'\\').map(|n| start + n);
            proptest::prop_assert_eq!(stop_at(&bytes, start), slow);
            // Each width alone: found, or none in the words it read.
            let (first, bytes) = (start, &bytes[..]);
            let agrees = |r: Result<usize, usize>, width: usize| match r {
                Ok(found) => slow == Some(found),
                Err(end) => slow.map_or(true, |s| s >= end) && end >= first && bytes.len() - end < width,
            };
            proptest::prop_assert!(agrees(stop_at_8(bytes, first), 8));
            #[cfg(target_arch = "x86_64")]
            proptest::prop_assert_eq!(stop_at_16(bytes, first), slow);
        }
    }
}
