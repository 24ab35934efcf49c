//! `normalize-events`' side of the filters' exit rule (`spec/exit-codes.md`:
//! 1 when any input line was unusable, the rest still written): which lines
//! were unusable, and, when most were lines of another agent's stream, a
//! guess at which agent wrote it.

use crate::pipeline::events::{Data, ErrorData, Event};
use crate::pipeline::normalize::{Adapter, Normalizer, Options};

/// Error codes that mean the line itself was not used: not JSON, JSON that
/// is not this agent's, a line over the cap. (An `agent_error` or
/// `api_retry` is the agent's own message, well used.)
const UNUSABLE: [&str; 5] = ["not_json", "unknown_kind", "invalid_line", "missing_id", "line_too_long"];
/// Of these, the ones that say "JSON, but another dialect".
const FOREIGN: [&str; 2] = ["unknown_kind", "invalid_line"];
/// How many foreign lines are kept to try the other adapters on, and the
/// longest kept: bounded memory whatever the input.
const SAMPLE: usize = 16;
const SAMPLE_LINE: usize = 64 * 1024;

/// The tally of one input.
pub struct Tally {
    adapter: Adapter,
    /// Lines that were not blank.
    pub lines: u64,
    /// Lines with an unusable-line error.
    pub unusable: u64,
    foreign: u64,
    sample: Vec<Vec<u8>>,
}

impl Tally {
    pub fn new(adapter: Adapter) -> Tally {
        Tally { adapter, lines: 0, unusable: 0, foreign: 0, sample: Vec::new() }
    }

    /// Counts one input line (`raw`: its bytes, `None` for one over the
    /// cap) from the events it gave; returns the error that made it
    /// unusable, to report.
    pub fn line<'e>(&mut self, raw: Option<&[u8]>, evs: &'e [Event]) -> Option<&'e ErrorData> {
        if raw.is_some_and(|l| l.iter().all(u8::is_ascii_whitespace)) {
            return None;
        }
        self.lines += 1;
        let err = evs.iter().find_map(|e| match &e.data {
            Data::Error(d) if UNUSABLE.contains(&d.code.as_str()) => Some(d),
            _ => None,
        })?;
        self.unusable += 1;
        if FOREIGN.contains(&err.code.as_str()) {
            self.foreign += 1;
            if let Some(l) = raw.filter(|l| self.sample.len() < SAMPLE && l.len() <= SAMPLE_LINE) {
                self.sample.push(l.to_vec());
            }
        }
        Some(err)
    }

    /// When most lines were JSON of another dialect: `N of M lines were not
    /// X events`, and the adapter that reads the kept lines best, when one
    /// reads most of them.
    pub fn hint(&self) -> Option<String> {
        if self.lines == 0 || self.foreign * 2 <= self.lines {
            return None;
        }
        let mut s = format!("{} of {} lines were not {} events", self.foreign, self.lines, self.adapter.name());
        let best = [Adapter::Claude, Adapter::Codex, Adapter::Cursor]
            .into_iter()
            .filter(|&a| a != self.adapter)
            .map(|a| (self.read_by(a), a))
            .max_by_key(|(n, _)| *n);
        match best {
            Some((n, a)) if n * 2 > self.sample.len() => {
                s.push_str(&format!("; is this a {0} log? (normalize-events {0})", a.name()));
            }
            _ => {}
        }
        Some(s)
    }

    /// How many sample lines `a` reads without an unusable-line error.
    fn read_by(&self, a: Adapter) -> usize {
        let mut n = Normalizer::new(a, Options::default());
        self.sample
            .iter()
            .filter(|l| {
                !n.push(l).iter().any(|e| matches!(&e.data, Data::Error(d) if UNUSABLE.contains(&d.code.as_str())))
            })
            .count()
    }
}
