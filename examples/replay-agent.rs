//! A stand-in for `codex app-server` or an ACP agent (`cursor-agent acp`)
//! in the tests: it replays one run of a recorded interactive session
//! (`fixtures/interactive/<agent>/<cell>/`, envelopes `{ts,run,seq,dir,line}`)
//! and checks every line the client (runwire) writes against the line the
//! recorded client wrote at that point.
//!
//!     replay-agent CELL_DIR [--run N] [--continue M] [--state FILE] [--expect-args ARGS] [-- AGENT_ARGS...]
//!
//! Or, started by a wrapper with only the agent's own arguments:
//! `REPLAY_CELL=DIR [REPLAY_RUN=N] [REPLAY_CONTINUE=M] [REPLAY_STATE=FILE] [REPLAY_EXPECT_ARGS=ARGS] replay-agent ARGS...`.
//!
//! `--run N` is the Nth agent process of the cell (a cell that resumes holds
//! several); `--expect-args` are the arguments the client must run the agent
//! with (`app-server`, `acp`), checked against the rest of the command line.
//! `--continue M` goes on, in the same process, with the Mth process's
//! recording from its first prompt (`turn/start`, `session/prompt`) on: the
//! recording client resumed the same thread or session in a new process
//! there, runwire's session is still open, so what follows the prompt is the
//! same exchange (a test of "the session stays").
//!
//! A recorded agent line's envelope may carry `pause_ms`: the line is
//! printed that long after the previous one (a synthetic cell pins an
//! interleaving with it, e.g. codex ending a turn just before it answers a
//! steer).
//!
//! It prints the agent's recorded lines in order; where the recording has a
//! client line, it reads one line from stdin and compares: the JSON-RPC
//! method, the params' shape (every key runwire sends exists in the recorded
//! line with the same JSON type; the recorded client may send more), and
//! the values runwire is responsible for exactly: ids (runwire's own
//! request ids may differ: the agent's responses are renumbered to them; its
//! answers must carry the agent's request id), `threadId`, `turnId`,
//! `expectedTurnId`, `sessionId`, the prompt text, an approval's `decision`
//! or `outcome`, a tool result's `success` and `answers`, an error's code,
//! a permission grant's `permissions` and `scope`, an MCP elicitation
//! answer's `action` and `content`, a `requestUserInput` answer's `answers`.
//!
//! Lines that exist only because the recording client (bb) registered its
//! own things are dropped with what answers them: codex
//! `account/rateLimits/read` and `skills/extraRoots/set`; ACP permission
//! requests for bb's own MCP tools (`bb-bridge…`). A client line runwire never
//! sends (`thread/compact/start`, `thread/fork`, `model/list`) ends the
//! replay there.
//!
//! `--state FILE` is rewritten (atomically) as the replay goes: the line
//! `{"state":"wait","index":K,"expect":<recorded client line>,"then_index":…,"then":<the client line after it>,"printed":N}` while it waits
//! (N: the agent lines printed so far, so the test can wait until the client has read them)
//! for runwire, `{"state":"done","printed":N}` when the run is replayed (then it waits
//! for its stdin to close and exits 0, or 1 if anything more came), or
//! `{"state":"fail","why":…}` (exit 1). The test reads it to know when to
//! answer, steer or interrupt, as the person did.

use serde_json::{json, Value};
use std::collections::HashMap;
use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};

/// Client methods of the recording client's own (dropped with their responses).
const CLIENT_ONLY: &[&str] = &["account/rateLimits/read", "skills/extraRoots/set"];
/// Client methods runwire never sends: the replay ends before them.
const ENDS: &[&str] = &["thread/compact/start", "thread/fork", "model/list"];
/// Params whose values must match exactly wherever they occur.
const EXACT_KEYS: &[&str] = &["threadId", "turnId", "expectedTurnId", "sessionId", "text"];
/// Keys codex 0.169.0 wants that the recordings (codex 0.149.0, bb's
/// client) predate: (where in the line, key). `tests/it/codex_schema.rs`
/// checks them against the schema 0.169.0 generates.
const NEWER_KEYS: &[(&str, &str)] = &[("params", "excludeTurns"), ("dynamicTools[", "type")];
/// Free-form values (a JSON Schema, a config map): only their JSON type is compared.
const OPAQUE_KEYS: &[&str] = &["inputSchema", "config", "_meta"];

struct Replay {
    state: Option<PathBuf>,
    /// Recorded client request id → runwire's id for the same request.
    renumber: HashMap<String, Value>,
    /// Recorded client request ids that were dropped (their responses too).
    dropped_client: Vec<String>,
    /// Agent request ids dropped (the client's answers to them too).
    dropped_agent: Vec<String>,
}

fn id_key(v: &Value) -> String {
    v.to_string()
}

fn fail(r: &Replay, why: String) -> ! {
    eprintln!("replay-agent: {why}");
    r.set_state(&json!({"state": "fail", "why": why}));
    std::process::exit(1);
}

impl Replay {
    fn set_state(&self, v: &Value) {
        if let Some(p) = &self.state {
            let tmp = p.with_extension("tmp");
            std::fs::write(&tmp, format!("{v}\n")).expect("state file");
            std::fs::rename(&tmp, p).expect("state file");
        }
    }

    /// Does `ours` fit the shape of `theirs`? `Err` says where it does not.
    fn fits(ours: &Value, theirs: &Value, path: &str) -> Result<(), String> {
        match (ours, theirs) {
            (Value::Object(a), Value::Object(b)) => {
                for (k, v) in a {
                    let Some(w) = b.get(k) else {
                        if NEWER_KEYS.iter().any(|(at, key)| key == k && path.contains(at)) {
                            continue;
                        }
                        return Err(format!("{path}.{k}: the recorded client sent no such key"));
                    };
                    if OPAQUE_KEYS.contains(&k.as_str()) {
                        if std::mem::discriminant(v) != std::mem::discriminant(w) {
                            return Err(format!("{path}.{k}: {v} where the recorded client sent {w}"));
                        }
                        continue;
                    }
                    Self::fits(v, w, &format!("{path}.{k}"))?;
                }
                Ok(())
            }
            (Value::Array(a), Value::Array(b)) => match b.first() {
                Some(w) => a.iter().enumerate().try_for_each(|(i, v)| Self::fits(v, w, &format!("{path}[{i}]"))),
                None => Ok(()),
            },
            (Value::Number(_), Value::Number(_))
            | (Value::String(_), Value::String(_))
            | (Value::Bool(_), Value::Bool(_))
            | (Value::Null, Value::Null) => Ok(()),
            _ => Err(format!("{path}: {ours} where the recorded client sent {theirs}")),
        }
    }

    /// Exact values runwire is responsible for, wherever `EXACT_KEYS` occur.
    fn exact(ours: &Value, theirs: &Value, path: &str) -> Result<(), String> {
        match (ours, theirs) {
            (Value::Object(a), Value::Object(b)) => {
                for (k, v) in a {
                    let Some(w) = b.get(k) else { continue };
                    if EXACT_KEYS.contains(&k.as_str()) && v != w {
                        return Err(format!("{path}.{k}: {v} where the recorded client sent {w}"));
                    }
                    Self::exact(v, w, &format!("{path}.{k}"))?;
                }
                Ok(())
            }
            (Value::Array(a), Value::Array(b)) => {
                a.iter().zip(b).enumerate().try_for_each(|(i, (v, w))| Self::exact(v, w, &format!("{path}[{i}]")))
            }
            _ => Ok(()),
        }
    }

    /// Compares runwire's line with the recorded client line.
    fn check(&mut self, ours: &Value, theirs: &Value) -> Result<(), String> {
        if ours.get("jsonrpc") != Some(&json!("2.0")) {
            return Err("not a JSON-RPC 2.0 message".into());
        }
        if ours.get("method") != theirs.get("method") {
            return Err(format!("method {} where the recorded client sent {}", ours["method"], theirs["method"]));
        }
        match (theirs.get("method"), theirs.get("id")) {
            // A request of the client's: any fresh id, remembered for the response.
            (Some(_), Some(rid)) => {
                let Some(id) = ours.get("id").filter(|i| i.is_number() || i.is_string()) else {
                    return Err("a request without an id".into());
                };
                if self.renumber.values().any(|v| v == id) {
                    return Err(format!("request id {id} used twice"));
                }
                self.renumber.insert(id_key(rid), id.clone());
            }
            // A notification: no id.
            (Some(_), None) if ours.get("id").is_some() => return Err("a notification with an id".into()),
            // An answer to the agent's request: the same id.
            (None, rid) if ours.get("id") != rid => {
                return Err(format!("answer id {} to the agent's request {}", ours["id"], theirs["id"]))
            }
            _ => {}
        }
        for part in ["params", "result", "error"] {
            match (ours.get(part), theirs.get(part)) {
                (Some(a), Some(b)) => {
                    Self::fits(a, b, part)?;
                    if part == "params" {
                        Self::exact(a, b, part)?;
                    }
                }
                (None, None) => {}
                (a, _) => {
                    let has = |x: bool| if x { "present" } else { "absent" };
                    return Err(format!(
                        "{part} {} where the recorded client's is {}",
                        has(a.is_some()),
                        has(a.is_none())
                    ));
                }
            }
        }
        // What the person decided, and how runwire said it.
        let same = |p: &str| ours.pointer(p) == theirs.pointer(p);
        for p in [
            "/result/decision",
            "/result/outcome",
            "/result/success",
            "/error/code",
            // A permission grant and an MCP elicitation's answer.
            "/result/permissions",
            "/result/scope",
            "/result/action",
            "/result/content",
            // codex's own questions (`item/tool/requestUserInput`).
            "/result/answers",
        ] {
            if !same(p) {
                return Err(format!(
                    "{p}: {:?} where the recorded client sent {:?}",
                    ours.pointer(p),
                    theirs.pointer(p)
                ));
            }
        }
        // A question tool's answers (inside its text result).
        let answers = |v: &Value| {
            v.pointer("/result/contentItems/0/text")
                .and_then(Value::as_str)
                .and_then(|t| serde_json::from_str::<Value>(t).ok())
                .and_then(|t| t.get("answers").cloned())
        };
        if answers(ours) != answers(theirs) {
            return Err(format!("answers {:?} where the recorded client sent {:?}", answers(ours), answers(theirs)));
        }
        Ok(())
    }
}

/// The recording client put its own instructions in every ACP prompt as a
/// first `<system_instructions>` text block: not the person's, dropped.
fn strip_own_blocks(v: &mut Value) {
    if let Some(blocks) = v.pointer_mut("/params/prompt").and_then(Value::as_array_mut) {
        blocks.retain(|b| !b["text"].as_str().is_some_and(|t| t.starts_with("<system_instructions>")));
    }
}

/// A recorded line: from the agent?, the line, the pause before printing it (ms).
type Recorded = (bool, String, u64);

/// The lines of the `part`-th agent process of the cell (1-based): the
/// envelopes in (run, seq) order, split where the client writes `initialize`
/// (the recorder's run can hold more than one process).
fn load(dir: &Path, part: usize) -> Vec<Recorded> {
    let mut env = Vec::new();
    for (file, from_agent) in [("from-agent.ndjson", true), ("to-agent.ndjson", false)] {
        let text = std::fs::read_to_string(dir.join(file)).unwrap_or_default();
        for l in text.lines() {
            let v: Value = serde_json::from_str(l).expect("an envelope");
            let line = v["line"].as_str().expect("a line").to_string();
            let pause = v["pause_ms"].as_u64().unwrap_or(0);
            env.push((v["run"].as_u64().unwrap(), v["seq"].as_u64().unwrap(), from_agent, line, pause));
        }
    }
    env.sort_by_key(|e| (e.0, e.1));
    let mut parts: Vec<Vec<Recorded>> = Vec::new();
    let mut last_run = None;
    for (run, _, from_agent, line, pause) in env {
        let init = !from_agent && serde_json::from_str::<Value>(&line).is_ok_and(|v| v["method"] == "initialize");
        if parts.is_empty() || last_run != Some(run) || init && parts.last().is_some_and(|p| !p.is_empty()) {
            parts.push(Vec::new());
        }
        last_run = Some(run);
        parts.last_mut().expect("a part").push((from_agent, line, pause));
    }
    parts.retain(|p| !p.is_empty());
    match parts.into_iter().nth(part.wrapping_sub(1)) {
        Some(p) => p,
        None => {
            eprintln!("replay-agent: {} has no process {part}", dir.display());
            std::process::exit(2);
        }
    }
}

fn main() {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    // Started by a wrapper, which passes only the agent's own arguments: the
    // replay's settings come from the environment instead.
    if let Ok(cell) = std::env::var("REPLAY_CELL") {
        let mut pre = vec![cell];
        for (var, flag) in [
            ("REPLAY_RUN", "--run"),
            ("REPLAY_CONTINUE", "--continue"),
            ("REPLAY_STATE", "--state"),
            ("REPLAY_EXPECT_ARGS", "--expect-args"),
        ] {
            if let Ok(v) = std::env::var(var) {
                pre.extend([flag.to_string(), v]);
            }
        }
        pre.push("--".into());
        pre.append(&mut args);
        args = pre;
    }
    if args.is_empty() || args[0] == "--help" {
        println!("usage: replay-agent CELL_DIR [--run N] [--continue M] [--state FILE] [--expect-args ARGS] [-- AGENT_ARGS...]");
        println!("   or: REPLAY_CELL=DIR [REPLAY_RUN=N REPLAY_CONTINUE=M REPLAY_STATE=FILE REPLAY_EXPECT_ARGS=ARGS] replay-agent AGENT_ARGS...");
        return;
    }
    let mut run = 1;
    let mut cont: Option<usize> = None;
    let mut state = None;
    let mut expect_args: Vec<String> = Vec::new();
    let mut it = args[1..].iter();
    let mut rest: Vec<String> = Vec::new();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--run" => run = it.next().and_then(|n| n.parse().ok()).expect("--run N"),
            "--continue" => cont = Some(it.next().and_then(|n| n.parse().ok()).expect("--continue M")),
            "--state" => state = it.next().map(PathBuf::from),
            "--expect-args" => {
                expect_args = it.next().expect("--expect-args ARGS").split_whitespace().map(str::to_string).collect()
            }
            // What the client ran the agent with (`app-server`, `acp`) follows.
            "--" => {
                rest.extend(it.by_ref().cloned());
            }
            other => rest.push(other.to_string()),
        }
    }
    if rest != expect_args {
        eprintln!("replay-agent: started with {rest:?}, expected {expect_args:?}");
        std::process::exit(2);
    }
    let mut lines = load(Path::new(&args[0]), run);
    if let Some(m) = cont {
        let next = load(Path::new(&args[0]), m);
        let prompt = next.iter().position(|(a, l, _)| {
            !a && serde_json::from_str::<Value>(l)
                .is_ok_and(|v| matches!(v["method"].as_str(), Some("turn/start" | "session/prompt")))
        });
        let Some(at) = prompt else {
            eprintln!("replay-agent: process {m} of {} has no prompt to continue with", args[0]);
            std::process::exit(2);
        };
        lines.extend(next.into_iter().skip(at));
    }
    let mut r = Replay { state, renumber: HashMap::new(), dropped_client: Vec::new(), dropped_agent: Vec::new() };
    let stdin = std::io::stdin();
    let mut input = stdin.lock();
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let mut printed = 0u64;
    for (index, (from_agent, raw, pause)) in lines.iter().enumerate() {
        let mut v: Value = serde_json::from_str(raw).expect("a recorded JSON line");
        let method = v.get("method").and_then(Value::as_str).map(str::to_string);
        let id = v.get("id").cloned();
        if *from_agent {
            match (&method, &id) {
                (None, Some(i)) => {
                    // A response: to a dropped request, or renumbered to runwire's id.
                    if r.dropped_client.contains(&id_key(i)) {
                        continue;
                    }
                    if let Some(ours) = r.renumber.get(&id_key(i)) {
                        v["id"] = ours.clone();
                    }
                }
                (Some(m), Some(i)) if m == "session/request_permission" => {
                    let title = v.pointer("/params/toolCall/title").and_then(Value::as_str).unwrap_or("");
                    if title.starts_with("bb-bridge") {
                        r.dropped_agent.push(id_key(i));
                        continue;
                    }
                }
                _ => {}
            }
            if *pause > 0 {
                std::thread::sleep(std::time::Duration::from_millis(*pause));
            }
            let bytes = serde_json::to_vec(&v).expect("JSON");
            // The recorded bytes when nothing was renumbered (key order, escapes).
            let text = if v == serde_json::from_str::<Value>(raw).unwrap() { raw.as_bytes().to_vec() } else { bytes };
            if out.write_all(&text).and_then(|_| out.write_all(b"\n")).and_then(|_| out.flush()).is_err() {
                fail(&r, format!("line {}: the client closed the agent's stdout", index + 1));
            }
            printed += 1;
            continue;
        }
        // A client line.
        if let Some(m) = &method {
            if CLIENT_ONLY.contains(&m.as_str()) {
                if let Some(i) = &id {
                    r.dropped_client.push(id_key(i));
                }
                continue;
            }
            if ENDS.contains(&m.as_str()) {
                break;
            }
        } else if id.as_ref().is_some_and(|i| r.dropped_agent.contains(&id_key(i))) {
            continue;
        }
        strip_own_blocks(&mut v);
        // The client line after this one (a cancel followed by a prompt is a steer).
        let then = lines[index + 1..]
            .iter()
            .enumerate()
            .filter(|(_, (a, _, _))| !a)
            .filter_map(|(k, (_, l, _))| serde_json::from_str::<Value>(l).ok().map(|v| (index + 1 + k, v)))
            .map(|(k, mut v)| {
                strip_own_blocks(&mut v);
                (k, v)
            })
            .find(|(_, v)| !v["method"].as_str().is_some_and(|m| CLIENT_ONLY.contains(&m) || ENDS.contains(&m)));
        let (then_index, then) = then.map_or((Value::Null, Value::Null), |(k, v)| (json!(k), v));
        r.set_state(&json!({"state": "wait", "index": index, "expect": v, "then_index": then_index, "then": then, "printed": printed}));
        let mut got = String::new();
        match input.read_line(&mut got) {
            Ok(0) | Err(_) => fail(&r, format!("recorded line {}: stdin closed while waiting for {raw}", index + 1)),
            Ok(_) => {}
        }
        let ours: Value = match serde_json::from_str(got.trim_end()) {
            Ok(o) => o,
            Err(e) => {
                fail(&r, format!("recorded line {}: runwire wrote a line that is not JSON ({e}): {got}", index + 1))
            }
        };
        if let Err(why) = r.check(&ours, &v) {
            let cut = |s: &str| s.chars().take(400).collect::<String>();
            fail(
                &r,
                format!(
                    "recorded line {}: {why}\n  runwire:  {}\n  recorded: {}",
                    index + 1,
                    cut(got.trim_end()),
                    cut(raw)
                ),
            );
        }
    }
    r.set_state(&json!({"state": "done", "printed": printed}));
    let mut extra = String::new();
    match input.read_line(&mut extra) {
        Ok(0) | Err(_) => {}
        Ok(_) => fail(&r, format!("after the replay, runwire wrote: {}", extra.trim_end())),
    }
}
