//! JSON as agents really write it.
//!
//! Claude Code cuts long output at a UTF-16 code unit, so a line can carry
//! half of a surrogate pair (`"…\ud83c"`): valid JavaScript, invalid JSON,
//! and serde_json rejects the whole line. Every reader of agent output goes
//! through here, which reads each unpaired surrogate escape as U+FFFD and
//! changes nothing else. The repair runs only after a strict parse failed,
//! so well-formed lines cost nothing extra.

use serde::Deserialize;
use serde_json::Value;

/// A UTF-8 byte order mark, which some editors and Windows tools put before the first line.
pub const BOM: &[u8] = b"\xEF\xBB\xBF";

/// Parses `text` as `T`; if that fails and the text holds unpaired
/// surrogate escapes, parses the repaired text kept in `slot` instead.
/// Returns the value and the text it was read from (`text` or the repaired
/// copy). On failure the strict parse's error is returned (its position is
/// the original line's).
pub fn from_str<'a, T: Deserialize<'a>>(
    text: &'a str,
    slot: &'a mut Option<String>,
) -> serde_json::Result<(T, &'a str)> {
    match serde_json::from_str(text) {
        Ok(v) => Ok((v, text)),
        Err(e) => match repair_surrogates(text) {
            Some(fixed) => {
                let fixed: &'a String = slot.insert(fixed);
                serde_json::from_str(fixed).map(|v| (v, fixed.as_str())).map_err(|_| e)
            }
            None => Err(e),
        },
    }
}

/// [`from_str`] into an owned [`Value`].
pub fn value(text: &str) -> serde_json::Result<Value> {
    let mut slot = None;
    from_str(text, &mut slot).map(|(v, _)| v)
}

/// True when `text` is JSON once its unpaired surrogates are repaired.
pub fn is_json(text: &str) -> bool {
    let mut slot = None;
    from_str::<serde::de::IgnoredAny>(text, &mut slot).is_ok()
}

fn hex4(b: &[u8], at: usize) -> Option<u32> {
    let h = b.get(at..at + 4)?;
    let s = std::str::from_utf8(h).ok()?;
    if !s.bytes().all(|c| c.is_ascii_hexdigit()) {
        return None;
    }
    u32::from_str_radix(s, 16).ok()
}

/// `text` with every unpaired UTF-16 surrogate escape (`\uD800`–`\uDFFF`
/// not part of a high-low pair) replaced by `\uFFFD`, or `None` when it has
/// none. Escaped backslashes (`\\u…`) are skipped, not read as escapes.
pub fn repair_surrogates(text: &str) -> Option<String> {
    let b = text.as_bytes();
    let mut out: Option<String> = None;
    let (mut i, mut copied) = (0, 0);
    while let Some(off) = memchr::memchr(b'\\', &b[i..]) {
        let p = i + off;
        match b.get(p + 1) {
            Some(b'u') => {
                let Some(cu) = hex4(b, p + 2) else {
                    i = p + 2;
                    continue;
                };
                let lone = match cu {
                    0xD800..=0xDBFF => {
                        let paired = b.get(p + 6) == Some(&b'\\')
                            && b.get(p + 7) == Some(&b'u')
                            && hex4(b, p + 8).is_some_and(|c| (0xDC00..=0xDFFF).contains(&c));
                        if paired {
                            i = p + 12;
                            continue;
                        }
                        true
                    }
                    0xDC00..=0xDFFF => true,
                    _ => false,
                };
                if lone {
                    let o = out.get_or_insert_with(|| String::with_capacity(text.len()));
                    o.push_str(&text[copied..p]);
                    o.push_str("\\uFFFD");
                    copied = p + 6;
                }
                i = p + 6;
            }
            Some(_) => i = p + 2,
            None => break,
        }
    }
    let mut o = out?;
    o.push_str(&text[copied..]);
    Some(o)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unpaired_surrogates_become_replacement_characters_and_nothing_else_changes() {
        let cases = [
            (r#"{"a":"x \ud83c"}"#, "x \u{FFFD}"),
            (r#"{"a":"\udc00y"}"#, "\u{FFFD}y"),
            (r#"{"a":"\ud83d\ud83d\ude00"}"#, "\u{FFFD}😀"),
            (r#"{"a":"\ud83d\u0041"}"#, "\u{FFFD}A"),
            (r#"{"a":"\\ud83d \ud83d"}"#, "\\ud83d \u{FFFD}"),
            (r#"{"a":"ok 😀 \ud83d\ude00"}"#, "ok 😀 😀"),
        ];
        for (line, want) in cases {
            let v = value(line).unwrap_or_else(|e| panic!("{line}: {e}"));
            assert_eq!(v["a"], want, "{line}");
        }
        assert_eq!(repair_surrogates(r#"{"a":"\ud83d\ude00 \\ud800"}"#), None);
        assert!(value(r#"{"a":"\ud83d"#).is_err(), "a cut line stays an error");
        assert!(!is_json("not json \\ud800"));
    }
}

/// `Err` naming the first object (at any depth) that has a key twice.
/// serde_json keeps the last of a repeated key, so `{"decision":"deny",
/// "decision":"allow"}` would read as one command to a person or a filter
/// reading the line and act as another: every door that takes a command
/// refuses it instead.
pub fn unique_keys(bytes: &[u8]) -> Result<(), String> {
    use serde::de::{DeserializeSeed, Deserializer, Error, MapAccess, SeqAccess, Visitor};
    struct Unique;
    impl<'de> DeserializeSeed<'de> for Unique {
        type Value = ();
        fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
            d.deserialize_any(self)
        }
    }
    impl<'de> Visitor<'de> for Unique {
        type Value = ();
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("JSON")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<(), A::Error> {
            let mut seen = std::collections::HashSet::new();
            while let Some(k) = m.next_key::<String>()? {
                m.next_value_seed(Unique)?;
                if !seen.insert(k.clone()) {
                    return Err(A::Error::custom(format!("the key {k:?} appears twice in one object")));
                }
            }
            Ok(())
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut s: A) -> Result<(), A::Error> {
            while s.next_element_seed(Unique)?.is_some() {}
            Ok(())
        }
        fn visit_bool<E>(self, _: bool) -> Result<(), E> {
            Ok(())
        }
        fn visit_i64<E>(self, _: i64) -> Result<(), E> {
            Ok(())
        }
        fn visit_u64<E>(self, _: u64) -> Result<(), E> {
            Ok(())
        }
        fn visit_f64<E>(self, _: f64) -> Result<(), E> {
            Ok(())
        }
        fn visit_str<E>(self, _: &str) -> Result<(), E> {
            Ok(())
        }
        fn visit_unit<E>(self) -> Result<(), E> {
            Ok(())
        }
    }
    let mut d = serde_json::Deserializer::from_slice(bytes);
    Unique.deserialize(&mut d).map_err(|e| {
        let m = e.to_string();
        // The position serde_json adds is of the object's end: the key is what matters.
        m.split(" at line ").next().unwrap_or(&m).to_string()
    })
}

#[cfg(test)]
mod unique_tests {
    #[test]
    fn a_key_twice_in_any_object_is_named() {
        assert_eq!(super::unique_keys(br#"{"a":1,"b":[{"c":2}],"d":{"e":3}}"#), Ok(()));
        let twice = super::unique_keys(br#"{"type":"answer","decision":"deny","decision":"allow"}"#).unwrap_err();
        assert!(twice.contains("\"decision\" appears twice"), "{twice}");
        assert!(super::unique_keys(br#"{"a":[{"x":1,"x":2}]}"#).is_err(), "nested in an array");
        assert!(super::unique_keys(br#"{"a":1,"\u0061":2}"#).is_err(), "the same key escaped");
        assert!(super::unique_keys(b"[1,2,3]").is_ok());
    }
}
