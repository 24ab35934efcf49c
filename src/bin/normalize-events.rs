//! `normalize-events <claude|cursor|codex> [FILE]`: an agent's raw JSON lines → `events/v1`.

use clap::Parser;
use runwire::pipeline::events::{Data, Seq};
use runwire::pipeline::normalize::{Adapter, Normalizer, Options};
use runwire::util::cli::{self, Exit};
use runwire::util::pipe::{self, Flow};
use std::io::{self, BufWriter, Read};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

const BIN: &str = "normalize-events";

/// Turn a coding agent's raw JSON-lines stream into events/v1, one JSON object a line.
#[derive(Parser, Debug)]
#[command(name = BIN, version, after_help = "Exit status: 0 success; 1 some input lines were unusable (each an error event, and reported on stderr; the rest still written); 2 usage error; 3 input or output error.\nSee normalize-events(1) and spec/events.schema.json.")]
#[command(group = clap::ArgGroup::new("source").args(["file", "input"]))]
struct Args {
    /// The agent CLI that wrote the stream.
    #[arg(value_enum)]
    adapter: Adapter,
    /// Read this file instead of stdin (`-` is stdin); as --input.
    #[arg(value_name = "FILE")]
    file: Option<PathBuf>,
    /// Run id stamped on every event.
    #[arg(long, value_name = "R")]
    run: Option<String>,
    /// Task id stamped on every event.
    #[arg(long, value_name = "T")]
    task: Option<String>,
    /// Read this file instead of stdin (`-` is stdin); FILE.at, when it exists, gives each line's arrival time.
    #[arg(long, value_name = "FILE", conflicts_with = "file")]
    input: Option<PathBuf>,
    /// Keep reading FILE as it grows (woken by inotify) until the wrapper's status line (the exit event) or the file's removal; a file renamed over it is followed from its start, a truncated one read again from its start.
    #[arg(long, requires = "source")]
    follow: bool,
    /// Emit only events after this seq (`12` or `12.2`): resume a stream exactly.
    #[arg(long, value_name = "SEQ", value_parser = parse_seq)]
    after: Option<Seq>,
}

fn parse_seq(s: &str) -> Result<Seq, String> {
    Seq::parse(s).ok_or_else(|| format!("{s:?} is not a seq (expected LINE or LINE.K, e.g. 12 or 12.2)"))
}

fn run(mut args: Args) -> anyhow::Result<Exit> {
    args.input = args.input.take().or(args.file.take());
    let name = cli::source_name(args.input.as_deref());
    let done = Arc::new(AtomicBool::new(false));
    let file = args.input.as_deref().filter(|p| p.as_os_str() != "-");
    // A follow's content generation: a replaced or truncated file's lines
    // are timed from its own sidecar, numbered from its own line 1.
    let mut generation = None;
    let input: Box<dyn Read> = match (file, args.follow) {
        (Some(p), true) => {
            let f = pipe::Follow::open(p, done.clone(), BIN).map_err(|e| anyhow::anyhow!("{name}: {e}"))?;
            cli::exit_when_stdout_closes();
            generation = Some(f.generation());
            Box::new(f)
        }
        (p, _) => pipe::open_input(p).map_err(|e| anyhow::anyhow!("{name}: {e}"))?,
    };
    let mut norm = Normalizer::new(args.adapter, Options { run: args.run, task: args.task, ..Options::default() });
    // A file is timed by its arrival-time sidecar (FILE.at) and never by the
    // time it is read: every re-read gives the same `ts` (Normalizer::push_at).
    let mut times = None;
    if let Some(p) = file {
        let f = std::fs::File::open(p).map_err(|e| anyhow::anyhow!("{name}: {e}"))?;
        norm.for_file(runwire::util::arrival::file_time(&f));
        times = runwire::util::arrival::Reader::open(p);
    }
    let (mut seen, mut base) = (0u64, 0u64);
    let stdout = io::stdout();
    let mut out = BufWriter::with_capacity(64 * 1024, stdout.lock());
    let after = args.after;
    let mut writer = runwire::pipeline::events::Writer::default();
    let mut tally = runwire::pipeline::dialect::Tally::new(args.adapter);
    pipe::drive_lines(input, &mut out, |lineno, line, buf| {
        if let (Some(g), Some(p)) = (&generation, file) {
            let now = g.load(Ordering::SeqCst);
            if now != seen {
                seen = now;
                base = norm.lines();
                times = runwire::util::arrival::Reader::open(p);
            }
        }
        let at = times.as_mut().and_then(|t| t.at(norm.lines() + 1 - base));
        let (evs, raw) = match line {
            pipe::Line::Whole(l) => (norm.push_at(l, at), Some(l)),
            // Skimmed (a JSON object): read as the original, its long strings cut.
            pipe::Line::TooLong { skim: Some(s), .. } => (norm.push_at(s, at), Some(s)),
            pipe::Line::TooLong { head, size, .. } => (norm.push_too_long_at(head, size, at), None),
        };
        if let Some(e) = tally.line(raw, &evs) {
            // Bounded, as the other filters: garbage must not flood stderr.
            if tally.unusable <= pipe::MAX_REPORTED {
                cli::report(BIN, format!("{name}:{lineno}: {}", e.reason));
            }
        }
        for ev in evs {
            if after.is_some_and(|a| ev.seq <= a) {
                continue;
            }
            writer.write(&ev, buf);
            if matches!(ev.data, Data::Exit(_)) {
                done.store(true, Ordering::Relaxed);
            }
        }
        Flow::Continue
    })
    .map_err(|e| e.named(&name))?;
    if tally.unusable > pipe::MAX_REPORTED {
        let n = tally.unusable;
        cli::report(BIN, format!("{name}: {n} bad lines in all; only the first {} were reported", pipe::MAX_REPORTED));
    }
    if let Some(h) = tally.hint() {
        cli::report(BIN, format!("{name}: {h}"));
    }
    Ok(if tally.unusable > 0 { Exit::Flagged } else { Exit::Ok })
}

fn main() -> ExitCode {
    match cli::parse_args::<Args>() {
        Ok(args) => cli::finish(BIN, run(args)),
        Err(code) => code,
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn cli_definition_is_consistent() {
        use clap::CommandFactory;
        super::Args::command().debug_assert();
    }
}
