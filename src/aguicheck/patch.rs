//! RFC 6902 JSON Patch, applied as the official client applies a
//! `STATE_DELTA` (`fast-json-patch`'s `applyPatch` with validation, on a
//! copy: all operations or none). Only whether it applies matters here.
//! `test` compares as fast-json-patch's `_areEquals` does: numbers by value
//! (`1` equals `1.0`, both being one JavaScript number), objects whatever
//! their keys' order.

use serde_json::Value;

fn tokens(pointer: &str) -> Vec<String> {
    pointer.split('/').skip(1).map(|t| t.replace("~1", "/").replace("~0", "~")).collect()
}

fn index(token: &str, len: usize, appending: bool) -> Result<usize, String> {
    if appending && token == "-" {
        return Ok(len);
    }
    if token.is_empty() || !token.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!("{token:?} is not an array index"));
    }
    let i: usize = token.parse().map_err(|_| format!("{token:?} is out of range"))?;
    let bound = if appending { len } else { len.saturating_sub(1) };
    if i > bound || (!appending && len == 0) {
        return Err(format!("index {i} is out of bounds (length {len})"));
    }
    Ok(i)
}

/// Deep equality as JavaScript sees JSON values: a number is an f64.
fn equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        (Value::Array(x), Value::Array(y)) => x.len() == y.len() && x.iter().zip(y).all(|(p, q)| equal(p, q)),
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| equal(v, w)))
        }
        _ => a == b,
    }
}

fn get<'a>(doc: &'a Value, pointer: &str) -> Option<&'a Value> {
    if pointer.is_empty() {
        return Some(doc);
    }
    doc.pointer(pointer)
}

/// The parent of `pointer`'s target, and its last token.
fn parent<'a>(doc: &'a mut Value, pointer: &str) -> Result<(&'a mut Value, String), String> {
    let mut t = tokens(pointer);
    let last = t.pop().ok_or("the root has no parent")?;
    let mut cur = doc;
    for tok in t {
        cur = match cur {
            Value::Object(m) => m.get_mut(&tok),
            Value::Array(a) => {
                let i = index(&tok, a.len(), false)?;
                a.get_mut(i)
            }
            _ => None,
        }
        .ok_or_else(|| format!("path {pointer:?} does not resolve"))?;
    }
    Ok((cur, last))
}

fn add(doc: &mut Value, pointer: &str, v: Value) -> Result<(), String> {
    if pointer.is_empty() {
        *doc = v;
        return Ok(());
    }
    let (p, last) = parent(doc, pointer)?;
    match p {
        Value::Object(m) => {
            m.insert(last, v);
            Ok(())
        }
        Value::Array(a) => {
            let i = index(&last, a.len(), true)?;
            a.insert(i, v);
            Ok(())
        }
        _ => Err(format!("path {pointer:?}: its parent is not a container")),
    }
}

fn remove(doc: &mut Value, pointer: &str) -> Result<Value, String> {
    if pointer.is_empty() {
        return Err("cannot remove the whole document".into());
    }
    let (p, last) = parent(doc, pointer)?;
    match p {
        Value::Object(m) => m.remove(&last).ok_or_else(|| format!("path {pointer:?} does not resolve")),
        Value::Array(a) => {
            let i = index(&last, a.len(), false)?;
            Ok(a.remove(i))
        }
        _ => Err(format!("path {pointer:?} does not resolve")),
    }
}

/// Applies `patch` to a copy of `doc`: the result, or why it does not apply.
pub fn apply(doc: &Value, patch: &[Value]) -> Result<Value, String> {
    let mut d = doc.clone();
    for (n, op) in patch.iter().enumerate() {
        let path = op.get("path").and_then(Value::as_str).unwrap_or_default();
        let from = op.get("from").and_then(Value::as_str).unwrap_or_default();
        let value = || op.get("value").cloned().unwrap_or(Value::Null);
        let r = match op.get("op").and_then(Value::as_str).unwrap_or_default() {
            "add" => add(&mut d, path, value()),
            "remove" => remove(&mut d, path).map(|_| ()),
            "replace" => {
                if get(&d, path).is_none() {
                    Err(format!("path {path:?} does not resolve"))
                } else if path.is_empty() {
                    d = value();
                    Ok(())
                } else {
                    remove(&mut d, path).and_then(|_| add(&mut d, path, value()))
                }
            }
            "move" => {
                if path.starts_with(&format!("{from}/")) {
                    Err(format!("cannot move {from:?} into its own child {path:?}"))
                } else {
                    remove(&mut d, from).and_then(|v| add(&mut d, path, v))
                }
            }
            "copy" => match get(&d, from).cloned() {
                Some(v) => add(&mut d, path, v),
                None => Err(format!("from {from:?} does not resolve")),
            },
            "test" => match get(&d, path) {
                Some(v) if equal(v, &value()) => Ok(()),
                Some(_) => Err(format!("test at {path:?} failed: the value differs")),
                None => Err(format!("test at {path:?}: the path does not resolve")),
            },
            other => Err(format!("unknown op {other:?}")),
        };
        r.map_err(|e| format!("operation {n}: {e}"))?;
    }
    Ok(d)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn patches_apply_or_say_why_not() {
        let doc = json!({"n": 1, "list": ["a"]});
        let ok = apply(
            &doc,
            &[
                json!({"op":"add","path":"/list/-","value":"b"}),
                json!({"op":"replace","path":"/n","value":2}),
                json!({"op":"copy","from":"/n","path":"/m"}),
                json!({"op":"move","from":"/m","path":"/k"}),
                json!({"op":"test","path":"/list/1","value":"b"}),
                json!({"op":"remove","path":"/list/0"}),
            ],
        );
        assert_eq!(ok.unwrap(), json!({"n": 2, "list": ["b"], "k": 2}));
        for bad in [
            json!({"op":"replace","path":"/missing","value":1}),
            json!({"op":"remove","path":"/list/3"}),
            json!({"op":"add","path":"/a/b","value":1}),
            json!({"op":"add","path":"/list/5","value":1}),
            json!({"op":"test","path":"/n","value":2}),
            json!({"op":"move","from":"/list","path":"/list/x"}),
        ] {
            assert!(apply(&doc, std::slice::from_ref(&bad)).is_err(), "{bad}");
        }
    }

    /// JavaScript has one number type: `1` and `1.0` are the same value to
    /// fast-json-patch's `test`, inside arrays and objects too.
    #[test]
    fn test_compares_numbers_by_value() {
        let doc: Value = serde_json::from_str(r#"{"n": 1, "list": [2, {"x": 3}]}"#).unwrap();
        for ok in
            [r#"{"op":"test","path":"/n","value":1.0}"#, r#"{"op":"test","path":"/list","value":[2.0,{"x":3e0}]}"#]
        {
            let op: Value = serde_json::from_str(ok).unwrap();
            assert!(apply(&doc, std::slice::from_ref(&op)).is_ok(), "{ok}");
        }
        let op: Value = serde_json::from_str(r#"{"op":"test","path":"/n","value":1.5}"#).unwrap();
        assert!(apply(&doc, &[op]).is_err());
    }
}
