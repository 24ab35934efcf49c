//! What the dialects share to read agent lines leniently and to emit text
//! once: fields read without failing the line ([`Scalar`], [`Lenient`],
//! [`ValueExt`]), text already emitted ([`Seen`], [`unseen_suffix`]) and
//! the bound on what a dialect keeps open ([`push_bounded`]).

use serde::de::{Deserialize, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::Value;
use std::borrow::Cow;
use std::fmt;

/// How much of `final_text` was not yet streamed, when a whole message arrives
/// after its deltas: the unseen suffix when the streamed text is a prefix of
/// it, nothing when it repeats (or contradicts, which an append-only stream
/// cannot retract) what was already sent.
pub(crate) fn unseen_suffix<'a>(streamed: &str, final_text: &'a str) -> &'a str {
    if streamed.is_empty() {
        return final_text;
    }
    final_text.strip_prefix(streamed).unwrap_or_default()
}

/// Open things (tools, messages) a dialect tracks at most: real streams
/// have a few at a time; this bounds a hostile one. Past it the oldest is
/// forgotten (its late result then restates its call, which is harmless).
pub(crate) const MAX_OPEN: usize = 4096;

/// `v.push(x)`, forgetting the oldest entry past [`MAX_OPEN`].
pub(crate) fn push_bounded<T>(v: &mut Vec<T>, x: T) {
    if v.len() >= MAX_OPEN {
        v.remove(0);
    }
    v.push(x);
}

/// Text already emitted for one message, remembered without keeping all of
/// it: up to [`Seen::KEEP`] bytes are kept as they are; past that only the
/// length and an FNV-1a hash of the whole, so a message streamed in a
/// million deltas costs no more memory than a short one, and the whole
/// value arriving afterwards is still compared with what was streamed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Seen {
    len: usize,
    /// The text, while it is at most `KEEP` bytes.
    kept: Option<String>,
    /// FNV-1a of the whole text, once it is longer.
    hash: u64,
}

impl Default for Seen {
    fn default() -> Seen {
        Seen { len: 0, kept: Some(String::new()), hash: crate::util::hash::FNV_OFFSET }
    }
}

impl Seen {
    pub const KEEP: usize = 64 << 10;

    /// Remembers `text` as all of it.
    pub fn of(text: &str) -> Seen {
        let mut s = Seen::default();
        s.push(text);
        s
    }

    /// Remembers by length and hash from the first byte on.
    pub fn hashed() -> Seen {
        Seen { kept: None, ..Seen::default() }
    }

    /// Appends `t` to what was emitted.
    pub fn push(&mut self, t: &str) {
        self.len += t.len();
        if let Some(k) = &mut self.kept {
            if k.len() + t.len() <= Self::KEEP {
                k.push_str(t);
                return;
            }
            self.hash = crate::util::hash::fnv1a64(k.as_bytes());
            self.kept = None;
        }
        self.hash = crate::util::hash::fnv1a64_extend(self.hash, t.as_bytes());
    }

    /// [`unseen_suffix`] against the remembered text: the part of `full`
    /// past what was emitted when that is a prefix of it, else nothing.
    pub fn unseen_suffix<'a>(&self, full: &'a str) -> &'a str {
        match &self.kept {
            Some(k) => unseen_suffix(k, full),
            None => match full.get(..self.len) {
                Some(p) if crate::util::hash::fnv1a64(p.as_bytes()) == self.hash => &full[self.len..],
                _ => "",
            },
        }
    }

    /// True when `text` is in what was emitted (while it is kept whole), or
    /// equals all of it (past that).
    pub fn holds(&self, text: &str) -> bool {
        match &self.kept {
            Some(k) => k.contains(text),
            None => text.len() == self.len && crate::util::hash::fnv1a64(text.as_bytes()) == self.hash,
        }
    }
}

/// A JSON value read leniently: a field of an unexpected type becomes
/// `Other` instead of failing the whole line.
#[derive(Debug, Default, Clone)]
pub(crate) enum Scalar<'a> {
    #[default]
    Absent,
    Str(Cow<'a, str>),
    Int(i64),
    Float(f64),
    Bool(bool),
    Other,
}

impl<'a> Scalar<'a> {
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Scalar::Str(s) => Some(s),
            _ => None,
        }
    }

    pub fn as_f64(&self) -> Option<f64> {
        match *self {
            Scalar::Int(i) => Some(i as f64),
            Scalar::Float(f) if f.is_finite() => Some(f),
            _ => None,
        }
    }

    pub fn as_i64(&self) -> Option<i64> {
        match *self {
            Scalar::Int(i) => Some(i),
            Scalar::Float(f) if f.fract() == 0.0 && f.abs() < 9e15 => Some(f as i64),
            _ => None,
        }
    }

    pub fn as_u64(&self) -> Option<u64> {
        self.as_i64().and_then(|i| u64::try_from(i).ok())
    }

    pub fn as_bool(&self) -> Option<bool> {
        match *self {
            Scalar::Bool(b) => Some(b),
            _ => None,
        }
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for Scalar<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for V<'a> {
            type Value = Scalar<'a>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(Scalar::Str(Cow::Borrowed(v)))
            }
            fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
                Ok(Scalar::Str(Cow::Owned(v.to_string())))
            }
            fn visit_string<E>(self, v: String) -> Result<Self::Value, E> {
                Ok(Scalar::Str(Cow::Owned(v)))
            }
            fn visit_i64<E>(self, v: i64) -> Result<Self::Value, E> {
                Ok(Scalar::Int(v))
            }
            fn visit_u64<E>(self, v: u64) -> Result<Self::Value, E> {
                Ok(i64::try_from(v).map(Scalar::Int).unwrap_or(Scalar::Float(v as f64)))
            }
            fn visit_f64<E>(self, v: f64) -> Result<Self::Value, E> {
                Ok(Scalar::Float(v))
            }
            fn visit_bool<E>(self, v: bool) -> Result<Self::Value, E> {
                Ok(Scalar::Bool(v))
            }
            fn visit_unit<E>(self) -> Result<Self::Value, E> {
                Ok(Scalar::Absent)
            }
            fn visit_none<E>(self) -> Result<Self::Value, E> {
                Ok(Scalar::Absent)
            }
            fn visit_some<D2: Deserializer<'de>>(self, d: D2) -> Result<Self::Value, D2::Error> {
                Scalar::deserialize(d)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut a: A) -> Result<Self::Value, A::Error> {
                while a.next_element::<IgnoredAny>()?.is_some() {}
                Ok(Scalar::Other)
            }
            fn visit_map<A: MapAccess<'de>>(self, mut a: A) -> Result<Self::Value, A::Error> {
                while a.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(Scalar::Other)
            }
        }
        d.deserialize_any(V(std::marker::PhantomData))
    }
}

/// A nested object read leniently: any other JSON value (a string where an
/// object was expected, say) is dropped as `None` instead of failing the
/// whole line. `T`'s own fields must be lenient too ([`Scalar`], raw values).
#[derive(Debug)]
pub(crate) struct Lenient<T>(pub Option<T>);

impl<T> Default for Lenient<T> {
    fn default() -> Self {
        Lenient(None)
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Lenient<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<T>(std::marker::PhantomData<T>);
        impl<'de, T: Deserialize<'de>> Visitor<'de> for V<T> {
            type Value = Lenient<T>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_map<A: MapAccess<'de>>(self, a: A) -> Result<Self::Value, A::Error> {
                T::deserialize(serde::de::value::MapAccessDeserializer::new(a)).map(|t| Lenient(Some(t)))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut a: A) -> Result<Self::Value, A::Error> {
                while a.next_element::<IgnoredAny>()?.is_some() {}
                Ok(Lenient(None))
            }
            fn visit_borrowed_str<E>(self, _: &'de str) -> Result<Self::Value, E> {
                Ok(Lenient(None))
            }
            fn visit_str<E>(self, _: &str) -> Result<Self::Value, E> {
                Ok(Lenient(None))
            }
            fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
                Ok(Lenient(None))
            }
            fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
                Ok(Lenient(None))
            }
            fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
                Ok(Lenient(None))
            }
            fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
                Ok(Lenient(None))
            }
            fn visit_unit<E>(self) -> Result<Self::Value, E> {
                Ok(Lenient(None))
            }
            fn visit_none<E>(self) -> Result<Self::Value, E> {
                Ok(Lenient(None))
            }
            fn visit_some<D2: Deserializer<'de>>(self, d: D2) -> Result<Self::Value, D2::Error> {
                Lenient::deserialize(d)
            }
        }
        d.deserialize_any(V(std::marker::PhantomData))
    }
}

/// Helpers for the dialects that read lines as `serde_json::Value`.
pub(crate) trait ValueExt {
    fn str_at(&self, key: &str) -> Option<&str>;
    fn i64_at(&self, key: &str) -> Option<i64>;
    fn u64_at(&self, key: &str) -> Option<u64>;
    fn bool_at(&self, key: &str) -> Option<bool>;
}

impl ValueExt for Value {
    fn str_at(&self, key: &str) -> Option<&str> {
        self.get(key)?.as_str()
    }
    fn i64_at(&self, key: &str) -> Option<i64> {
        let v = self.get(key)?;
        v.as_i64().or_else(|| v.as_f64().filter(|f| f.fract() == 0.0 && f.abs() < 9e15).map(|f| f as i64))
    }
    fn u64_at(&self, key: &str) -> Option<u64> {
        self.i64_at(key).and_then(|i| u64::try_from(i).ok())
    }
    fn bool_at(&self, key: &str) -> Option<bool> {
        self.get(key)?.as_bool()
    }
}
