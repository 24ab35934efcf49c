//! A JSON value that keeps every key of an object in order, duplicates included: serde_json's own
//! `Value` keeps only the last one silently, and a checker must be able to say that a key appeared
//! twice. serde_json's recursion limit (128) still applies, so deep nesting is a clean error.

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use std::fmt;

#[derive(Debug, Clone, PartialEq)]
pub enum Json {
    Null,
    Bool(bool),
    Num(f64),
    Str(String),
    Arr(Vec<Json>),
    Obj(Vec<(String, Json)>),
}

impl Json {
    /// The value of `key`; with duplicates, the last one, as `JSON.parse` would keep.
    pub fn get(&self, key: &str) -> Option<&Json> {
        match self {
            Json::Obj(m) => m.iter().rev().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }
}

impl<'de> Deserialize<'de> for Json {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Json, D::Error> {
        d.deserialize_any(JsonVisitor)
    }
}

struct JsonVisitor;

impl<'de> Visitor<'de> for JsonVisitor {
    type Value = Json;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_bool<E>(self, v: bool) -> Result<Json, E> {
        Ok(Json::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Json, E> {
        Ok(Json::Num(v as f64))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Json, E> {
        Ok(Json::Num(v as f64))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Json, E> {
        // serde_json already refuses overflowing literals; this keeps inf out whatever the parser.
        if v.is_finite() {
            Ok(Json::Num(v))
        } else {
            Err(E::custom("number out of range"))
        }
    }
    fn visit_str<E>(self, v: &str) -> Result<Json, E> {
        Ok(Json::Str(v.to_owned()))
    }
    fn visit_string<E>(self, v: String) -> Result<Json, E> {
        Ok(Json::Str(v))
    }
    fn visit_unit<E>(self) -> Result<Json, E> {
        Ok(Json::Null)
    }
    fn visit_none<E>(self) -> Result<Json, E> {
        Ok(Json::Null)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut a: A) -> Result<Json, A::Error> {
        let mut v = Vec::new();
        while let Some(x) = a.next_element()? {
            v.push(x);
        }
        Ok(Json::Arr(v))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut a: A) -> Result<Json, A::Error> {
        let mut m = Vec::new();
        while let Some(kv) = a.next_entry::<String, Json>()? {
            m.push(kv);
        }
        Ok(Json::Obj(m))
    }
}

/// Parses one JSON document; the error text never quotes the input.
pub fn parse(bytes: &[u8]) -> Result<Json, String> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Err("empty input: expected a JSON object".into());
    }
    serde_json::from_slice(bytes).map_err(|e| format!("not JSON: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_duplicates_and_reads_the_last() {
        let v = parse(br#"{"a":1,"a":2}"#).unwrap();
        assert_eq!(v, Json::Obj(vec![("a".into(), Json::Num(1.0)), ("a".into(), Json::Num(2.0))]));
        assert_eq!(v.get("a"), Some(&Json::Num(2.0)));
    }

    #[test]
    fn numbers_are_read_correctly_rounded() {
        // Without serde_json's float_roundtrip this parses one ulp off, and the reason sentence,
        // which prints the policy's maxCostRatio, no longer matches the reference's.
        for s in ["1.9651277746345326", "1.5986860903405413", "0.30000000000000004", "5e-324"] {
            let Json::Num(x) = parse(s.as_bytes()).unwrap() else { panic!() };
            assert_eq!(x, s.parse::<f64>().unwrap(), "{s}");
        }
    }

    #[test]
    fn refuses_what_is_not_one_finite_document() {
        assert!(parse(b"").unwrap_err().starts_with("empty input"));
        assert!(parse(b" \n").unwrap_err().starts_with("empty input"));
        assert!(parse(b"1e400").unwrap_err().starts_with("not JSON"));
        assert!(parse(b"NaN").unwrap_err().starts_with("not JSON"));
        assert!(parse(b"{} {}").unwrap_err().starts_with("not JSON"));
        let deep = "[".repeat(100_000);
        assert!(parse(deep.as_bytes()).unwrap_err().contains("recursion limit"));
    }
}
