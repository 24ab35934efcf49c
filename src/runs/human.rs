//! `runs` for people: the table a terminal gets instead of JSON lines,
//! ages, local times, rounded costs, durations (`30d`), and finding a run
//! by slug or id prefix with a hint when that fails.

use super::registry::Registry;
use super::view::ViewError;
use serde_json::Value;

/// The kind of a run: `chat` for what runwire-serve's `POST /agui` records
/// itself (chat turns, the demo, a curl: slug `agui-…` under the server's
/// own project), `plan` for everything a runner registers.
pub fn kind(item: &Value) -> &'static str {
    let s = |k: &str| item.get(k).and_then(Value::as_str).unwrap_or("");
    if s("project") == super::record::ACTOR && s("slug").starts_with("agui-") {
        "chat"
    } else {
        "plan"
    }
}

/// A duration in ms as people say it: `45s`, `12m`, `5h`, `3d`.
pub fn age(ms: i64) -> String {
    let s = ms.max(0) / 1000;
    match s {
        0..=59 => format!("{s}s"),
        60..=3599 => format!("{}m", s / 60),
        3600..=172_799 => format!("{}h", s / 3600),
        _ => format!("{}d", s / 86_400),
    }
}

/// Parses a duration: a number and a unit, `s`, `m`, `h`, `d` or `w`
/// (`90m`, `30d`), into ms.
pub fn parse_duration(s: &str) -> Result<i64, String> {
    let bad = || format!("{s:?} is not a duration (a number and s, m, h, d or w: 90m, 12h, 30d)");
    let split = s.find(|c: char| !c.is_ascii_digit()).ok_or_else(bad)?;
    let (n, unit) = s.split_at(split);
    let n: i64 = n.parse().map_err(|_| bad())?;
    let unit_ms: i64 = match unit {
        "s" => 1000,
        "m" => 60_000,
        "h" => 3_600_000,
        "d" => 86_400_000,
        "w" => 7 * 86_400_000,
        _ => return Err(bad()),
    };
    n.checked_mul(unit_ms).ok_or_else(bad)
}

/// Epoch ms as local time, `2026-01-02 15:04` (the `TZ` the process runs in).
pub fn local_time(ms: i64) -> String {
    let t: nix::libc::time_t = (ms.div_euclid(1000)) as nix::libc::time_t;
    // SAFETY: localtime_r writes only into `tm`, which we own; a zeroed tm is valid.
    let mut tm: nix::libc::tm = unsafe { std::mem::zeroed() };
    if unsafe { nix::libc::localtime_r(&t, &mut tm) }.is_null() {
        return crate::util::time::format_ms(ms);
    }
    format!("{:04}-{:02}-{:02} {:02}:{:02}", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min)
}

/// A cost in USD, rounded to cents (`$0.07`); under a cent `<$0.01`.
pub fn cost(usd: f64) -> String {
    if usd > 0.0 && usd < 0.005 {
        "<$0.01".into()
    } else {
        format!("${usd:.2}")
    }
}

/// A token count, short: `812`, `12.3k`, `4.1M`.
pub fn count(n: u64) -> String {
    match n {
        0..=999 => n.to_string(),
        1000..=999_999 => format!("{:.1}k", n as f64 / 1e3),
        _ => format!("{:.1}M", n as f64 / 1e6),
    }
}

fn cut(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        s.to_string()
    } else {
        let mut t: String = s.chars().take(max - 1).collect();
        t.push('…');
        t
    }
}

/// The table `runs list` prints on a terminal: one row per `runs list`
/// item (JSON), newest activity first as given. `now_ms` for ages; with
/// `kinds`, a KIND column.
pub fn table(items: &[Value], now_ms: i64, kinds: bool) -> String {
    let mut rows: Vec<Vec<String>> = Vec::with_capacity(items.len() + 1);
    // COMMITTED is tasks committed of all: a failed run with none committed
    // reads 0/2 (counting every terminal task read 2/2, as if all were done).
    let mut head = vec!["RUN", "STATUS", "COMMITTED", "COST", "TOKENS", "AGE", "LAST ACTIVE", "REPO", "ID"];
    if kinds {
        head.insert(1, "KIND");
    }
    rows.push(head.iter().map(|s| s.to_string()).collect());
    for it in items {
        let s = |k: &str| crate::util::printable(it.get(k).and_then(Value::as_str).unwrap_or("")).into_owned();
        let (done, total) = it.get("counts").and_then(Value::as_object).map_or((0, 0), |c| {
            c.iter().fold((0, 0), |(d, t), (state, n)| {
                let n = n.as_u64().unwrap_or(0);
                (d + if state == "committed" { n } else { 0 }, t + n)
            })
        });
        let tokens = match (
            it.pointer("/tokens/input").and_then(Value::as_u64),
            it.pointer("/tokens/output").and_then(Value::as_u64),
        ) {
            (Some(i), Some(o)) => format!("{} in/{} out", count(i), count(o)),
            _ => "-".into(),
        };
        let activity = it.get("activityMs").and_then(Value::as_i64);
        let mut status = super::nodes::shown_status(&s("status"), it.get("nodeState").and_then(Value::as_str));
        // A run not ended whose supervisor is gone or stopped (`supervise::owned`): nothing runs it now.
        if let Some(how @ ("gone" | "stopped")) = it.get("supervisor").and_then(Value::as_str) {
            status = format!("supervisor {how} ({status})");
        }
        if let Some(n) = it.get("needsInput").and_then(Value::as_u64).filter(|&n| n > 0) {
            status = format!("{status} ({n})");
        }
        let mut row = vec![
            cut(&s("slug"), 32),
            status,
            if total == 0 { "-".into() } else { format!("{done}/{total}") },
            it.get("costUsd").and_then(Value::as_f64).map_or("-".into(), cost),
            tokens,
            activity.map_or("-".into(), |a| age(now_ms - a)),
            activity.map_or("-".into(), local_time),
            cut(&s("repo"), 24),
            s("runId"),
        ];
        if kinds {
            row.insert(1, kind(it).to_string());
        }
        rows.push(row);
    }
    let cols = rows[0].len();
    let widths: Vec<usize> = (0..cols).map(|c| rows.iter().map(|r| r[c].chars().count()).max().unwrap_or(0)).collect();
    let mut out = String::new();
    for r in &rows {
        let mut line = String::new();
        for (c, cell) in r.iter().enumerate() {
            line.push_str(cell);
            if c + 1 < cols {
                line.push_str(&" ".repeat(widths[c] - cell.chars().count() + 2));
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    // Why a run failed (or cannot be read) is too long for a column: a line each, under the table.
    for it in items {
        let name = it.get("slug").or_else(|| it.get("runId")).and_then(Value::as_str).unwrap_or("?");
        if let Some(why) = it.get("reason").and_then(Value::as_str) {
            out.push_str(&format!("{}: {}\n", crate::util::printable(name), crate::util::printable(why)));
        }
    }
    out
}

/// The slug part of a run id (`<12 hex>--<slug>`).
fn slug_of(id: &str) -> &str {
    id.split_once("--").map_or(id, |(_, s)| s)
}

/// Edit distance, for "did you mean" (short strings only).
fn distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1];
        for (j, cb) in b.iter().enumerate() {
            cur.push((prev[j] + usize::from(ca != *cb)).min(prev[j + 1] + 1).min(cur[j] + 1));
        }
        prev = cur;
    }
    prev[b.len()]
}

/// The run `q` names: a whole run id; else the one run whose slug is `q`;
/// else the one run whose id or slug starts with `q`. When none or several
/// do, a [`ViewError::NotFound`] that says what was meant or what matches.
pub fn resolve(reg: &Registry, q: &str) -> Result<String, ViewError> {
    super::check_run_id("run", q).map_err(ViewError::Bad)?;
    if reg.read(q).map_or_else(|e| !e.absent, |_| true) {
        return Ok(q.to_string());
    }
    let ids = reg.ids();
    let pick = |f: &dyn Fn(&str) -> bool| ids.iter().filter(|id| f(id)).cloned().collect::<Vec<_>>();
    let exact = pick(&|id| slug_of(id) == q);
    let found = if exact.is_empty() { pick(&|id| id.starts_with(q) || slug_of(id).starts_with(q)) } else { exact };
    const SHOWN: usize = 5;
    let names = |v: &[String]| {
        let mut s = v.iter().take(SHOWN).cloned().collect::<Vec<_>>().join(", ");
        if v.len() > SHOWN {
            s.push_str(&format!(" and {} more", v.len() - SHOWN));
        }
        s
    };
    match found.len() {
        1 => Ok(found.into_iter().next().unwrap_or_default()),
        0 => {
            let near = pick(&|id| {
                let s = slug_of(id);
                s.contains(q) || distance(s, q) <= (q.chars().count() / 3).clamp(1, 3)
            });
            Err(ViewError::NotFound(if near.is_empty() {
                format!("no run {q:?} (runs list --all shows every run)")
            } else {
                format!("no run {q:?}; did you mean {}?", names(&near))
            }))
        }
        n => Err(ViewError::NotFound(format!("{n} runs match {q:?}: {}; give more of the run id", names(&found)))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse_and_ages_read() {
        assert_eq!(parse_duration("30d"), Ok(30 * 86_400_000));
        assert_eq!(parse_duration("90m"), Ok(90 * 60_000));
        for bad in ["", "d", "30", "3x", "-1d", "1.5h", "99999999999999999999d"] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
        assert_eq!([age(5_000), age(125_000), age(7_200_000), age(4 * 86_400_000)], ["5s", "2m", "2h", "4d"]);
    }

    #[test]
    fn costs_are_rounded_to_cents() {
        assert_eq!(cost(0.06608149999999999), "$0.07");
        assert_eq!(cost(0.001), "<$0.01");
        assert_eq!(cost(0.0), "$0.00");
        assert_eq!(cost(12.346), "$12.35");
    }

    /// The task column counts committed tasks, not ended ones: a failed run
    /// whose two tasks halted and failed is 0/2, never 2/2.
    #[test]
    fn the_table_counts_committed_tasks_of_all() {
        let item = |counts: Value| serde_json::json!({"slug": "feat", "status": "failed", "counts": counts, "runId": "0123456789ab--feat"});
        let t = table(
            &[
                item(serde_json::json!({"halted": 1, "failed": 1})),
                item(serde_json::json!({"committed": 1, "failed": 1, "leased": 1})),
            ],
            0,
            false,
        );
        let col = |line: &str| line.split_whitespace().nth(2).unwrap_or("").to_string();
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(col(lines[0]), "COMMITTED", "{t}");
        assert_eq!((col(lines[1]), col(lines[2])), ("0/2".to_string(), "1/3".to_string()), "{t}");
    }

    /// What a run's files say (an agent writes them) prints as text: an
    /// escape sequence, a bell, a bare CR and a bidirectional override in a
    /// reason or a cell reach the terminal as `\u{..}`, never as themselves.
    #[test]
    fn the_table_prints_what_an_agent_wrote_as_text() {
        let why = "\u{1b}]0;PWNED\u{7}\u{1b}[2J\u{1b}[31mred\u{1b}[0m \r\nfake line \u{202e}txt.exe \u{9b}31m";
        let item = serde_json::json!({"slug": "feat", "status": "failed", "reason": why,
            "repo": "re\u{1b}[1mpo", "runId": "0123456789ab--feat"});
        let t = table(&[item], 0, false);
        assert!(!t.chars().any(|c| c != '\n' && (c.is_control() || c == '\u{202e}')), "{t:?}");
        let last = t.lines().last().unwrap();
        assert_eq!(
            last,
            "feat: \\u{1b}]0;PWNED\\u{7}\\u{1b}[2J\\u{1b}[31mred\\u{1b}[0m \\r\\nfake line \\u{202e}txt.exe \\u{9b}31m"
        );
        assert!(t.contains("re\\u{1b}[1mpo"), "{t}");
        assert_eq!(crate::util::printable("plain: été ✓"), "plain: été ✓");
    }

    /// A run whose supervisor is gone (`supervise::owned`) is not plain
    /// running in the table, and its reason is under it.
    #[test]
    fn the_table_says_a_runs_supervisor_is_gone_and_why() {
        let why = "its supervisor (pid 7) is gone: nothing runs it";
        let item = |supervisor: Option<&str>| {
            let mut v = serde_json::json!({"slug": "feat", "status": "running", "runId": "0123456789ab--feat"});
            if let Some(s) = supervisor {
                v["supervisor"] = s.into();
                v["reason"] = if s == "gone" { why.into() } else { Value::Null };
            }
            v
        };
        let t = table(&[item(Some("gone")), item(Some("live")), item(None)], 0, false);
        let lines: Vec<&str> = t.lines().collect();
        assert!(lines[1].contains("supervisor gone (running)"), "{t}");
        for l in &lines[2..4] {
            assert!(l.contains(" running ") && !l.contains("gone"), "{t}");
        }
        assert_eq!(lines[4], format!("feat: {why}"), "{t}");
    }

    #[test]
    fn near_names_are_near() {
        assert_eq!(distance("feat", "feta"), 2);
        assert_eq!(distance("feat", "feat"), 0);
        assert_eq!(distance("", "abc"), 3);
    }
}
