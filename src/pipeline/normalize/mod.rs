//! Stage 1: an agent's raw JSON lines → `events/v1`.
//!
//! [`Normalizer`] is a state object with no IO: feed it one source line at a
//! time with [`Normalizer::push`]. Every event carries `seq`, the 1-based
//! ordinal of the source line that produced it (`"<line>.<k>"` when one line
//! produced several), so re-reading the same log from the start yields the
//! same ids in any process: this is what exact SSE resume rests on.
//!
//! Each dialect lives in its own module and keeps a table of the kinds it
//! knows; a known-irrelevant kind is skipped, an unknown kind or a non-JSON
//! line becomes one non-fatal `error` event, and the stream goes on.

mod acp;
mod claude;
mod codex;
mod codex_app;
mod ctx;
mod cursor;
pub mod elicit;
mod fields;
pub mod redact;
use crate::util::lenient;

use crate::pipeline::events::{Data, Event, Seq};
use crate::util::time::Clock;
pub(crate) use ctx::*;
use serde::de::IgnoredAny;
use std::borrow::Cow;

/// Which agent CLI wrote the stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Adapter {
    /// `claude -p --output-format stream-json --verbose [--include-partial-messages]`
    Claude,
    /// `cursor-agent --print --output-format stream-json [--stream-partial-output]`
    Cursor,
    /// `codex exec --json` (current `thread/turn/item` and legacy `{id,msg}` formats)
    Codex,
}

impl Adapter {
    pub fn name(self) -> &'static str {
        match self {
            Adapter::Claude => "claude",
            Adapter::Cursor => "cursor",
            Adapter::Codex => "codex",
        }
    }
}

/// Stamps put on every event, and the fallback clock.
#[derive(Debug, Clone)]
pub struct Options {
    pub run: Option<String>,
    pub task: Option<String>,
    /// Time for lines that carry none of their own.
    pub clock: Clock,
}

impl Default for Options {
    fn default() -> Options {
        Options { run: None, task: None, clock: Clock::from_env() }
    }
}

enum Dialect {
    Claude(claude::Claude),
    Cursor(cursor::Cursor),
    Codex(codex::Codex),
    CodexApp(codex_app::CodexApp),
    Acp(acp::Acp),
}

/// What times a line that has neither an arrival time nor a time of its own.
#[derive(Debug, Clone, Copy)]
enum Untimed {
    /// A live pipe: the time it is read.
    ReadTime,
    /// A file: nothing (the previous `ts`; this before the first).
    Keep(i64),
}

/// The `ts` rule's state ([`Normalizer::push_at`]).
#[derive(Debug, Clone, Copy)]
struct Ts {
    last: Option<i64>,
    untimed: Untimed,
}

impl Ts {
    fn next(&mut self, candidate: Option<i64>, clock: Clock) -> i64 {
        let candidate = match (candidate, self.untimed) {
            (Some(c), _) => Some(c),
            (None, Untimed::ReadTime) => Some(clock.now_ms()),
            (None, Untimed::Keep(_)) => None,
        };
        let ts = match (self.last, candidate) {
            (Some(p), Some(c)) => p.max(c),
            (Some(p), None) => p,
            (None, Some(c)) => c,
            (None, None) => match self.untimed {
                Untimed::Keep(m) => m,
                Untimed::ReadTime => clock.now_ms(),
            },
        };
        self.last = Some(ts);
        ts
    }
}

/// The normalizer for one agent stream.
pub struct Normalizer {
    dialect: Dialect,
    /// The stream's format (print mode or JSON-RPC) is not known yet.
    detect: bool,
    opts: Options,
    line_no: u64,
    session: Option<String>,
    resume: Option<String>,
    scratch: Vec<Data>,
    /// Set by [`Normalizer::push_too_long`] for the line it pushes.
    too_long: Option<u64>,
    ts: Ts,
}

impl Normalizer {
    pub fn new(adapter: Adapter, opts: Options) -> Normalizer {
        let dialect = match adapter {
            Adapter::Claude => Dialect::Claude(claude::Claude::default()),
            Adapter::Cursor => Dialect::Cursor(cursor::Cursor::default()),
            Adapter::Codex => Dialect::Codex(codex::Codex::default()),
        };
        // codex and cursor also run as interactive sessions (`codex
        // app-server`, `cursor-agent acp`), whose JSON-RPC streams are told
        // apart from the print-mode ones by their first line.
        let detect = matches!(adapter, Adapter::Codex | Adapter::Cursor);
        let ts = Ts { last: None, untimed: Untimed::ReadTime };
        Normalizer {
            dialect,
            detect,
            opts,
            line_no: 0,
            session: None,
            resume: None,
            scratch: Vec::new(),
            too_long: None,
            ts,
        }
    }

    /// Reading a file, not a live pipe: a line that nothing times keeps the
    /// previous `ts`, and `before_first_ms` (the file's modification time)
    /// before any line was timed; the read time is never used.
    pub fn for_file(&mut self, before_first_ms: i64) {
        self.ts.untimed = Untimed::Keep(before_first_ms);
    }

    /// The `ts` of the latest line (for an event made up after the source,
    /// such as a synthetic exit, which must not go back in time).
    pub fn last_ts(&self) -> Option<i64> {
        self.ts.last
    }

    /// The number of source lines consumed so far.
    pub fn lines(&self) -> u64 {
        self.line_no
    }

    /// The session id captured so far: the one stamped on events, taken
    /// from the first line that carried one (any kind of line).
    pub fn session(&self) -> Option<&str> {
        self.session.as_deref()
    }

    /// The session a wrapper could `--resume`, as the wrapper contract
    /// (§6) defines it: the status line's `session_id` when it names one,
    /// else the latest the engine announced itself (claude/cursor
    /// `system/init`, codex `thread.started`; before init, the first claude
    /// or cursor `system` line naming one). Narrower than [`session`]:
    /// an id merely carried by another line (claude's `result` after a
    /// failed resume) is not confirmed and is not resumable.
    ///
    /// [`session`]: Normalizer::session
    pub fn resume_session(&self) -> Option<&str> {
        self.resume.as_deref()
    }

    /// Consumes one source line (with or without its line ending) and returns
    /// the events it produced, numbered by the line's ordinal. Its time is
    /// unknown: [`push_at`](Normalizer::push_at) with `None`.
    pub fn push(&mut self, line: &[u8]) -> Vec<Event> {
        self.push_at(line, None)
    }

    /// [`push`](Normalizer::push) for a line that arrived at `arrival_ms`
    /// (when known: the arrival-time sidecar, `crate::util::arrival`). Every
    /// event of the line gets `ts = max(previous ts, candidate)`, where the
    /// candidate is the arrival time, else the line's own timestamp, else
    /// the read time (a live pipe) or none (a file, [`for_file`]: the
    /// previous `ts` is kept). So `ts` never goes backwards, and re-reading a
    /// file from line 1 gives the same `ts` in any process.
    ///
    /// [`for_file`]: Normalizer::for_file
    pub fn push_at(&mut self, line: &[u8], arrival_ms: Option<i64>) -> Vec<Event> {
        self.line_no += 1;
        let mut line = trim_eol(line);
        if self.line_no == 1 {
            line = line.strip_prefix(lenient::BOM).unwrap_or(line);
        }
        let too_long = self.too_long.take();
        // A line skimmed for being over a cap (`crate::util::lines`): read as the
        // original, its cut strings known to `tool_result`.
        let body;
        let skimmed = too_long.is_none() && line.starts_with(SKIM_PREFIX);
        let mut skim = None;
        if skimmed {
            match split_skim(line) {
                Some((head, b)) => {
                    body = b;
                    line = &body;
                    CUTS.with(|c| *c.borrow_mut() = head.cuts);
                    skim = Some((head.size, head.cap, head.left_out));
                }
                None => skim = None,
            }
        }
        if too_long.is_none() && line.iter().all(u8::is_ascii_whitespace) {
            return Vec::new();
        }
        if self.detect && too_long.is_none() {
            self.detect_protocol(line);
        }
        let mut ctx = Ctx {
            out: &mut self.scratch,
            session: &mut self.session,
            resume: &mut self.resume,
            ts_ms: None,
            line_no: self.line_no,
        };
        // The session's own lines, written by runwire with `type` first:
        // read here, before a dialect's table can mistake their fields
        // (`message` is a string here, an object in claude's lines).
        if let Some(size) = too_long {
            ctx.error("line_too_long", crate::util::lines::Line::too_long_reason(size), line, false);
        } else if idle_inputs(line).is_some() || is_ack(line) || is_session_status(line) {
            // The session's word to its runner (idle, or what an input line
            // did): no event
            // (its line number is still used, so `seq` stays positional).
        } else if let Some(request) = session_line(line) {
            // ACP binds a request to its tool call, and a denial to the turn
            // it may end (issue 26 case 7): the dialect sees it first.
            if let Dialect::Acp(d) = &mut self.dialect {
                d.session_line(&mut ctx, line, request);
            }
            ctx.input_line(line, request);
        } else {
            match &mut self.dialect {
                Dialect::Claude(d) => d.line(&mut ctx, line),
                Dialect::Cursor(d) => d.line(&mut ctx, line),
                Dialect::Codex(d) => d.line(&mut ctx, line),
                Dialect::CodexApp(d) => d.line(&mut ctx, line),
                Dialect::Acp(d) => d.line(&mut ctx, line),
            }
        }
        if let Some((size, cap, left_out)) = skim {
            ctx.skimmed(line, size, cap, left_out);
        }
        let ts_ms = self.ts.next(arrival_ms.or(ctx.ts_ms), self.opts.clock);
        let n = self.scratch.len();
        self.scratch
            .drain(..)
            .enumerate()
            .map(|(k, data)| Event {
                run: self.opts.run.clone(),
                task: self.opts.task.clone(),
                session: self.session.clone(),
                seq: Seq { line: self.line_no, sub: if n == 1 { 0 } else { k as u32 + 1 } },
                ts_ms,
                data,
            })
            .collect()
    }

    /// The first line that tells decides, for good: a JSON object without a
    /// `type` that carries `jsonrpc`, `method`, or an `id` with a `result` or
    /// `error`, is JSON-RPC (codex app-server, ACP); one with a `type` (other
    /// than runwire's own lines), or codex's legacy `msg` or preamble, is the
    /// print mode. Lines that do not tell (not JSON, runwire's own) leave it open.
    fn detect_protocol(&mut self, line: &[u8]) {
        #[derive(serde::Deserialize)]
        struct Probe<'a> {
            #[serde(rename = "type", borrow, default)]
            ty: Option<Cow<'a, str>>,
            #[serde(default)]
            jsonrpc: Option<IgnoredAny>,
            #[serde(default)]
            method: Option<IgnoredAny>,
            #[serde(default)]
            id: Option<IgnoredAny>,
            #[serde(default)]
            result: Option<IgnoredAny>,
            #[serde(default)]
            error: Option<IgnoredAny>,
        }
        let Ok(text) = std::str::from_utf8(line) else { return };
        let mut slot = None;
        let Ok((p, _)) = lenient::from_str::<Probe>(text, &mut slot) else { return };
        let rpc = match p.ty.as_deref() {
            Some(t) if t.starts_with("runwire.") => return,
            Some(_) => false,
            None => {
                p.jsonrpc.is_some()
                    || p.method.is_some()
                    || (p.id.is_some() && (p.result.is_some() || p.error.is_some()))
            }
        };
        self.detect = false;
        if rpc {
            self.dialect = match self.dialect {
                Dialect::Codex(_) => Dialect::CodexApp(codex_app::CodexApp::default()),
                _ => Dialect::Acp(acp::Acp::default()),
            };
        }
    }

    /// Consumes one line as a [`crate::util::lines::Lines`] hands it over:
    /// a whole line, a skimmed one (read as the original, its long strings
    /// cut), or one over the cap that is not a JSON object (its report).
    pub fn push_line_at(&mut self, line: crate::util::lines::Line<'_>, arrival_ms: Option<i64>) -> Vec<Event> {
        use crate::util::lines::Line;
        match line {
            Line::Whole(l) => self.push_at(l, arrival_ms),
            Line::TooLong { skim: Some(s), .. } => self.push_at(s, arrival_ms),
            // The line keeps its number (so seqs match normalize-events) and
            // is reported, never held.
            Line::TooLong { head, size, .. } => self.push_too_long_at(head, size, arrival_ms),
        }
    }

    /// Consumes a line held whole by a reader with a larger cap than the
    /// pipeline's (a session's or a server run's agent line): through the
    /// pipeline's line cap ([`crate::util::lines::capped`]), so it makes the
    /// events it makes when its record is read back.
    pub fn push_capped_at(&mut self, line: &[u8], arrival_ms: Option<i64>) -> Vec<Event> {
        crate::util::lines::capped(line, |l| self.push_line_at(l, arrival_ms))
    }

    /// Consumes a source line too long to be read whole (see
    /// [`crate::util::lines::MAX_LINE`]), given by its first bytes and its size: one
    /// non-fatal `error` event (`line_too_long`) numbered like any line.
    pub fn push_too_long(&mut self, head: &[u8], size: u64) -> Vec<Event> {
        self.push_too_long_at(head, size, None)
    }

    /// [`push_too_long`](Normalizer::push_too_long) for a line that arrived
    /// at `arrival_ms` (see [`push_at`](Normalizer::push_at)).
    pub fn push_too_long_at(&mut self, head: &[u8], size: u64, arrival_ms: Option<i64>) -> Vec<Event> {
        self.too_long = Some(size);
        self.push_at(head, arrival_ms)
    }

    /// Ends the stream. Normalization never invents events at the end: a
    /// followed file may still grow, and a stream that stopped short is for
    /// the consumer to judge (agui-translate reports it as incomplete).
    pub fn finish(&mut self) -> Vec<Event> {
        Vec::new()
    }
}

/// `Some(true)` for a `runwire.request` line, `Some(false)` for a
/// `runwire.answer` line, as the session writes them (`type` first).
fn session_line(line: &[u8]) -> Option<bool> {
    let rest = line.strip_prefix(b"{\"type\":\"runwire.")?;
    let (request, rest) = match rest {
        [b'r', b'e', b'q', b'u', b'e', b's', b't', b'"', rest @ ..] => (true, rest),
        [b'a', b'n', b's', b'w', b'e', b'r', b'"', rest @ ..] => (false, rest),
        _ => return None,
    };
    matches!(rest.first(), Some(b',' | b'}')).then_some(request)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pipeline::events::{Channel, Data};

    fn run(adapter: Adapter, lines: &[&str]) -> Vec<Event> {
        let mut n = Normalizer::new(adapter, Options { clock: Clock::Fixed(0), ..Options::default() });
        let mut out: Vec<Event> = lines.iter().flat_map(|l| n.push(l.as_bytes())).collect();
        out.extend(n.finish());
        out
    }

    #[test]
    fn ts_is_arrival_else_own_else_read_time_and_never_goes_back() {
        let own = |t: &str| {
            format!(
                r#"{{"type":"user","timestamp":"{t}","message":{{"role":"user","content":[{{"type":"tool_result","tool_use_id":"t","content":"x"}}]}}}}"#
            )
        };
        let plain =
            r#"{"type":"assistant","message":{"id":"m","role":"assistant","content":[{"type":"text","text":"a"}]}}"#;
        let ts = |n: &mut Normalizer, line: &str, at: Option<i64>| n.push_at(line.as_bytes(), at)[0].ts_ms;
        // A live pipe: read time (the clock, 7) for a line with nothing else.
        let mut live = Normalizer::new(Adapter::Claude, Options { clock: Clock::Fixed(7), ..Options::default() });
        assert_eq!(ts(&mut live, plain, None), 7);
        assert_eq!(ts(&mut live, &own("1970-01-01T00:00:01.000Z"), None), 1000);
        assert_eq!(ts(&mut live, plain, None), 1000, "the read time is earlier: kept");
        assert_eq!(ts(&mut live, &own("1970-01-01T00:00:05.000Z"), Some(2000)), 2000, "arrival wins");
        // A file: no read time; the file time before the first timed line.
        let mut file = Normalizer::new(Adapter::Claude, Options { clock: Clock::Fixed(99_999), ..Options::default() });
        file.for_file(500);
        assert_eq!(ts(&mut file, plain, None), 500);
        assert_eq!(ts(&mut file, plain, Some(3000)), 3000);
        assert_eq!(ts(&mut file, plain, None), 3000);
        assert_eq!(ts(&mut file, plain, Some(2500)), 3000, "never back");
        assert_eq!(file.last_ts(), Some(3000));
    }

    fn texts(evs: &[Event]) -> Vec<(String, Channel)> {
        evs.iter()
            .filter_map(|e| match &e.data {
                Data::TokenDelta(d) => Some((d.text.clone(), d.channel)),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn claude_final_block_adds_only_what_the_deltas_missed() {
        let evs = run(
            Adapter::Claude,
            &[
                r#"{"type":"stream_event","event":{"type":"message_start","message":{"id":"m1"}}}"#,
                r#"{"type":"stream_event","event":{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}}"#,
                r#"{"type":"stream_event","event":{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hel"}}}"#,
                r#"{"type":"assistant","message":{"id":"m1","content":[{"type":"text","text":"Hello"}]}}"#,
                r#"{"type":"stream_event","event":{"type":"content_block_stop","index":0}}"#,
                r#"{"type":"stream_event","event":{"type":"message_stop"}}"#,
                r#"{"type":"result","subtype":"success","is_error":false,"result":"Hello"}"#,
            ],
        );
        assert_eq!(texts(&evs), vec![("Hel".into(), Channel::Text), ("lo".into(), Channel::Text)]);
    }

    #[test]
    fn claude_tool_input_comes_from_the_stream_when_no_assistant_line_does() {
        let evs = run(
            Adapter::Claude,
            &[
                r#"{"type":"stream_event","event":{"type":"message_start","message":{"id":"m1"}}}"#,
                r#"{"type":"stream_event","event":{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"t1","name":"Bash","input":{}}}}"#,
                r#"{"type":"stream_event","event":{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"command\":"}}}"#,
                r#"{"type":"stream_event","event":{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":" \"ls\"}"}}}"#,
                r#"{"type":"stream_event","event":{"type":"content_block_stop","index":0}}"#,
                r#"{"type":"assistant","message":{"id":"m1","content":[{"type":"tool_use","id":"t1","name":"Bash","input":{"command":"ls"}}]}}"#,
            ],
        );
        let calls: Vec<_> = evs.iter().filter(|e| matches!(e.data, Data::ToolCall(_))).collect();
        assert_eq!(calls.len(), 1);
        match &calls[0].data {
            Data::ToolCall(c) => {
                assert_eq!(c.args, serde_json::json!({"command":"ls"}));
                assert_eq!(c.message.as_deref(), Some("m1"));
            }
            _ => unreachable!(),
        }
    }

    #[test]
    fn claude_result_text_is_emitted_only_when_nothing_said_it() {
        let said = run(
            Adapter::Claude,
            &[
                r#"{"type":"assistant","message":{"id":"m1","content":[{"type":"text","text":"All done."}]}}"#,
                r#"{"type":"result","subtype":"success","is_error":false,"result":"All done."}"#,
            ],
        );
        assert_eq!(texts(&said).len(), 1);
        let unsaid =
            run(Adapter::Claude, &[r#"{"type":"result","subtype":"success","is_error":false,"result":"Only here."}"#]);
        assert_eq!(texts(&unsaid), vec![("Only here.".into(), Channel::Text)]);
        assert_eq!(unsaid[0].seq, Seq { line: 1, sub: 1 });
        assert_eq!(unsaid[1].seq, Seq { line: 1, sub: 2 });
    }

    #[test]
    fn claude_failure_is_read_from_is_error_subtype_and_terminal_reason() {
        for line in [
            r#"{"type":"result","subtype":"success","is_error":true,"result":"Not logged in"}"#,
            r#"{"type":"result","subtype":"error_max_turns","is_error":false}"#,
            r#"{"type":"result","subtype":"success","is_error":false,"terminal_reason":"aborted_tools"}"#,
        ] {
            let evs = run(Adapter::Claude, &[line]);
            assert!(matches!(&evs.last().unwrap().data, Data::TurnEnd(t) if !t.ok && t.reason.is_some()), "{line}");
        }
    }

    #[test]
    fn cursor_flush_after_a_closing_event_is_not_repeated() {
        let evs = run(
            Adapter::Cursor,
            &[
                r#"{"type":"assistant","message":{"content":[{"type":"text","text":"Hi "}]},"timestamp_ms":1}"#,
                r#"{"type":"assistant","message":{"content":[{"type":"text","text":"you"}]},"timestamp_ms":2}"#,
                r#"{"type":"thinking","subtype":"completed","timestamp_ms":3}"#,
                r#"{"type":"assistant","message":{"content":[{"type":"text","text":"Hi you"}]},"model_call_id":"x","timestamp_ms":4}"#,
                r#"{"type":"assistant","message":{"content":[{"type":"text","text":"Hi you"}]}}"#,
            ],
        );
        assert_eq!(texts(&evs), vec![("Hi ".into(), Channel::Text), ("you".into(), Channel::Text)]);
    }

    #[test]
    fn codex_item_updates_replace_rather_than_append() {
        let evs = run(
            Adapter::Codex,
            &[
                r#"{"type":"item.updated","item":{"id":"item_3","type":"agent_message","text":"Wor"}}"#,
                r#"{"type":"item.updated","item":{"id":"item_3","type":"agent_message","text":"Working"}}"#,
                r#"{"type":"item.completed","item":{"id":"item_3","type":"agent_message","text":"Working."}}"#,
            ],
        );
        assert_eq!(texts(&evs).into_iter().map(|t| t.0).collect::<String>(), "Working.");
    }

    #[test]
    fn the_session_idle_line_is_skipped_in_every_dialect_and_keeps_seq_positional() {
        const IDLE: &str = r#"{"type":"runwire.idle","inputs":3}"#;
        const STATUS: &str = r#"{"type":"runwire.status","ok":true,"rc":0,"session_id":null,"detail":"","files":[]}"#;
        // The print-mode dialects, and the JSON-RPC ones a first line selects
        // (codex app-server, ACP); the idle line first leaves detection open.
        let cases: [(Adapter, &[&str]); 5] = [
            (Adapter::Claude, &[IDLE, IDLE, STATUS]),
            (Adapter::Cursor, &[IDLE, IDLE, STATUS]),
            (Adapter::Codex, &[IDLE, IDLE, STATUS]),
            (Adapter::Codex, &[IDLE, r#"{"id":1,"result":{}}"#, STATUS]),
            (Adapter::Cursor, &[IDLE, r#"{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":1}}"#, STATUS]),
        ];
        for (a, lines) in cases {
            let mut n = Normalizer::new(a, Options { clock: Clock::Fixed(0), ..Default::default() });
            let mut evs = Vec::new();
            for (i, l) in lines.iter().enumerate() {
                let got = n.push(l.as_bytes());
                if *l == IDLE {
                    assert!(got.is_empty(), "{a:?} line {i}: {got:?}");
                }
                evs.extend(got);
            }
            assert!(evs.iter().all(|e| !matches!(e.data, Data::Error(_))), "{a:?}: {evs:?}");
            let exit = evs.iter().find(|e| matches!(e.data, Data::Exit(_))).expect("the status line's exit");
            assert_eq!(exit.seq.line, 3, "{a:?}");
        }
        assert_eq!(idle_inputs(IDLE.as_bytes()), Some(3));
        assert_eq!(idle_inputs(b"{\"type\":\"runwire.idle\",\"inputs\":0}\r\n"), Some(0));
        for not in [
            r#"{"type":"runwire.idle","inputs":-1}"#,
            r#"{"type":"runwire.idle","inputs":""}"#,
            r#"{"type":"runwire.idle","inputs":1,"x":2}"#,
            r#"{"type":"runwire.idle","inputs":99999999999999999999}"#,
            r#"{"type":"runwire.answer","inputs":1}"#,
        ] {
            assert_eq!(idle_inputs(not.as_bytes()), None, "{not}");
        }
    }

    #[test]
    fn the_status_line_is_the_exit_event_in_every_dialect() {
        for a in [Adapter::Claude, Adapter::Cursor, Adapter::Codex] {
            let evs = run(
                a,
                &[r#"{"type":"runwire.status","ok":false,"rc":124,"session_id":null,"detail":"timeout","files":[]}"#],
            );
            assert!(
                matches!(&evs[0].data, Data::Exit(x) if x.rc == 124 && !x.ok && x.detail.as_deref() == Some("timeout")),
                "{a:?}"
            );
        }
    }

    fn resume_after(adapter: Adapter, lines: &[&str]) -> (Option<String>, Option<String>) {
        let mut n = Normalizer::new(adapter, Options { clock: Clock::Fixed(0), ..Options::default() });
        for l in lines {
            n.push(l.as_bytes());
        }
        (n.resume_session().map(str::to_string), n.session().map(str::to_string))
    }

    const STATUS_NULL: &str =
        r#"{"type":"runwire.status","ok":false,"rc":1,"session_id":null,"detail":"x","files":[]}"#;
    const STATUS_S9: &str = r#"{"type":"runwire.status","ok":true,"rc":0,"session_id":"s9","detail":"","files":[]}"#;

    #[test]
    fn the_engine_announces_the_resumable_session_and_the_status_line_wins() {
        let cases: [(Adapter, &str); 3] = [
            (Adapter::Claude, r#"{"type":"system","subtype":"init","session_id":"s1","model":"m"}"#),
            (Adapter::Cursor, r#"{"type":"system","subtype":"init","session_id":"s1","model":"m"}"#),
            (Adapter::Codex, r#"{"type":"thread.started","thread_id":"s1"}"#),
        ];
        for (a, init) in cases {
            assert_eq!(resume_after(a, &[]), (None, None), "{a:?}");
            assert_eq!(resume_after(a, &[init]), (Some("s1".into()), Some("s1".into())), "{a:?}");
            // null names no session: the announced one stays.
            assert_eq!(resume_after(a, &[init, STATUS_NULL]).0.as_deref(), Some("s1"), "{a:?}");
            // The wrapper's id is the one to resume; the envelope keeps the stream's.
            assert_eq!(resume_after(a, &[init, STATUS_S9]), (Some("s9".into()), Some("s1".into())), "{a:?}");
            // A session only the status line names (cursor's create-chat id
            // after a turn that failed before init): both take it.
            assert_eq!(resume_after(a, &[STATUS_S9]), (Some("s9".into()), Some("s9".into())), "{a:?}");
        }
    }

    #[test]
    fn an_id_another_line_merely_carries_is_stamped_but_not_resumable() {
        // claude after a failed --resume: only a result line, with an id no init confirmed.
        let result = r#"{"type":"result","subtype":"error_during_execution","is_error":true,"session_id":"s7"}"#;
        assert_eq!(resume_after(Adapter::Claude, &[result, STATUS_NULL]), (None, Some("s7".into())));
        // A cursor user line is no line of the engine's own naming its session.
        let user = r#"{"type":"user","message":{"role":"user","content":[]},"session_id":"s1"}"#;
        assert_eq!(resume_after(Adapter::Cursor, &[user]), (None, Some("s1".into())));
    }

    #[test]
    fn claude_hooks_name_the_session_before_init_and_init_has_the_last_word() {
        // A turn that hangs after its SessionStart hooks can be steered: the
        // hooks run in the session claude was given. They stay skipped: no events.
        let hook = r#"{"type":"system","subtype":"hook_started","hook_id":"h","session_id":"s1"}"#;
        let hook2 = r#"{"type":"system","subtype":"hook_response","hook_id":"h","session_id":"s2"}"#;
        let init = r#"{"type":"system","subtype":"init","session_id":"s3","model":"m"}"#;
        assert!(run(Adapter::Claude, &[hook, hook2]).is_empty());
        assert_eq!(resume_after(Adapter::Claude, &[hook, hook2]), (Some("s1".into()), None));
        assert_eq!(resume_after(Adapter::Claude, &[hook, init, hook2]), (Some("s3".into()), Some("s3".into())));
    }

    #[test]
    fn a_cut_or_malformed_status_line_is_an_error_and_names_no_session() {
        let cut = r#"{"type":"runwire.status","ok":true,"rc":0,"session_id":"s9","det"#;
        let odd = r#"{"type":"runwire.status","ok":true,"rc":0,"session_id":7,"detail":"d","files":[]}"#;
        for a in [Adapter::Claude, Adapter::Cursor, Adapter::Codex] {
            let evs = run(a, &[cut]);
            assert!(matches!(&evs[..], [e] if matches!(&e.data, Data::Error(x) if x.code == "not_json")), "{a:?}");
            assert_eq!(resume_after(a, &[cut]), (None, None), "{a:?}");
            // A session id that is not a string is no session; the exit stands.
            assert!(matches!(&run(a, &[odd])[0].data, Data::Exit(x) if x.ok && x.detail.as_deref() == Some("d")));
            assert_eq!(resume_after(a, &[odd]), (None, None), "{a:?}");
        }
    }

    #[test]
    fn claude_usage_counts_cached_input_inside_input_tokens() {
        let evs = run(
            Adapter::Claude,
            &[
                r#"{"type":"result","subtype":"success","is_error":false,"usage":{"input_tokens":6,"cache_creation_input_tokens":1582,"cache_read_input_tokens":87563,"output_tokens":258}}"#,
            ],
        );
        match &evs[0].data {
            Data::TurnEnd(t) => {
                let u = t.usage.as_ref().unwrap();
                assert_eq!(
                    (u.input_tokens, u.cached_input_tokens, u.cache_write_input_tokens),
                    (89151, Some(87563), Some(1582))
                );
            }
            other => panic!("{other:?}"),
        }
    }
}
