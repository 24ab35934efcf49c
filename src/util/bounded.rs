//! A map of string keys that forgets its oldest entries past a budget of
//! bytes: for a filter's memory of ids it has seen (tool calls, results),
//! which must stay bounded whatever the input, while keeping recent ids,
//! the ones later events name.

use std::collections::{HashMap, VecDeque};

/// String keys to values, at most `budget` bytes of keys (and of the
/// values' own bytes, as [`Size`] counts them); past it the entries put
/// first are forgotten first. A key put again keeps its place.
#[derive(Debug, Clone)]
pub struct Bounded<V> {
    map: HashMap<String, V>,
    order: VecDeque<String>,
    bytes: usize,
    budget: usize,
    forgotten: u64,
}

/// The bytes a value holds beyond its own size (a string's heap).
pub trait Size {
    fn size(&self) -> usize;
}

impl Size for String {
    fn size(&self) -> usize {
        self.len()
    }
}

impl Size for () {
    fn size(&self) -> usize {
        0
    }
}

impl Size for u32 {
    fn size(&self) -> usize {
        0
    }
}

/// What an entry costs besides its key's and value's bytes (the map's and
/// the order's slots), so that many short ids count too.
const ENTRY: usize = 64;

impl<V: Size> Bounded<V> {
    pub fn new(budget: usize) -> Bounded<V> {
        Bounded { map: HashMap::new(), order: VecDeque::new(), bytes: 0, budget, forgotten: 0 }
    }

    pub fn get(&self, k: &str) -> Option<&V> {
        self.map.get(k)
    }

    pub fn contains_key(&self, k: &str) -> bool {
        self.map.contains_key(k)
    }

    /// Puts `v` under `k` (a new key goes last in the order), then forgets
    /// the oldest entries while over the budget. Returns the old value.
    pub fn insert(&mut self, k: String, v: V) -> Option<V> {
        let add = v.size();
        match self.map.get_mut(&k) {
            Some(old) => {
                self.bytes = self.bytes + add - old.size();
                let old = std::mem::replace(old, v);
                self.shrink();
                Some(old)
            }
            None => {
                self.bytes += k.len() * 2 + add + ENTRY;
                self.order.push_back(k.clone());
                self.map.insert(k, v);
                self.shrink();
                None
            }
        }
    }

    fn shrink(&mut self) {
        // The newest entry stays, whatever its size.
        while self.bytes > self.budget && self.order.len() > 1 {
            let Some(k) = self.order.pop_front() else { break };
            if let Some(v) = self.map.remove(&k) {
                self.bytes -= k.len() * 2 + v.size() + ENTRY;
                self.forgotten += 1;
            }
        }
    }

    /// Keeps the entries `keep` says yes to (in their order), as a filter
    /// would: not counted as forgotten.
    pub fn retain(&mut self, mut keep: impl FnMut(&String, &V) -> bool) {
        self.map.retain(|k, v| keep(k, v));
        let map = &self.map;
        self.order.retain(|k| map.contains_key(k));
        self.bytes = self.map.iter().map(|(k, v)| k.len() * 2 + v.size() + ENTRY).sum();
    }

    /// How many entries the budget has made it forget so far.
    pub fn forgotten(&self) -> u64 {
        self.forgotten
    }

    pub fn iter(&self) -> impl Iterator<Item = (&String, &V)> {
        self.map.iter()
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// The bytes counted against the budget.
    pub fn bytes(&self) -> usize {
        self.bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_oldest_go_first_past_the_budget_and_a_key_put_again_keeps_its_place() {
        let mut b: Bounded<String> = Bounded::new(3 * (2 * 2 + 3 + ENTRY));
        for k in ["k1", "k2", "k3"] {
            b.insert(k.into(), "val".into());
        }
        assert_eq!(b.len(), 3);
        b.insert("k1".into(), "new".into());
        b.insert("k4".into(), "val".into());
        assert!(!b.contains_key("k1") && b.contains_key("k2") && b.contains_key("k4"), "k1 was first");
        assert!(b.bytes() <= 3 * (2 * 2 + 3 + ENTRY));
        // One entry over the whole budget stays alone.
        b.insert("big".into(), "x".repeat(10_000));
        assert_eq!((b.len(), b.get("big").map(String::len)), (1, Some(10_000)));
        assert_eq!(b.forgotten(), 4, "k1, then k2, k3 and k4");
        b.insert("k5".into(), "val".into());
        b.retain(|k, _| k == "k5");
        assert_eq!((b.len(), b.bytes(), b.forgotten()), (1, 2 * 2 + 3 + ENTRY, 5));
    }
}
