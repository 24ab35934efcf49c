//! `agui-translate`: `events/v1` lines on stdin → AG-UI 1.0 events, one
//! compact JSON object a line. The logic is `runwire::agui::Translator`.

use anyhow::Context;
use clap::Parser;
use runwire::agui::{parse_line, AguiEvent, TranslateOptions, Translator};
use runwire::cli::{self, Exit};
use std::io::{self, BufRead, BufReader, BufWriter, Write};
use std::path::PathBuf;
use std::process::ExitCode;

const BIN: &str = "agui-translate";

/// Translate an events/v1 stream into AG-UI 1.0 events (JSON lines).
#[derive(Parser, Debug)]
#[command(name = BIN, version)]
struct Args {
    /// threadId for RUN_STARTED/RUN_FINISHED (default: the first event's `run`, else derived).
    #[arg(long, value_name = "ID")]
    thread_id: Option<String>,
    /// runId, also the prefix of every message and tool-call id (default: derived from the first event).
    #[arg(long, value_name = "ID")]
    run_id: Option<String>,
    /// Read from FILE instead of stdin (`-` is stdin).
    #[arg(long, value_name = "FILE")]
    input: Option<PathBuf>,
}

fn main() -> ExitCode {
    match cli::parse_args::<Args>() {
        Ok(args) => cli::finish(BIN, run(&args)),
        Err(code) => code,
    }
}

fn run(args: &Args) -> anyhow::Result<Exit> {
    let input: Box<dyn BufRead> = match &args.input {
        Some(p) if p.as_os_str() != "-" => {
            Box::new(BufReader::new(std::fs::File::open(p).with_context(|| format!("cannot open {}", p.display()))?))
        }
        _ => Box::new(io::stdin().lock()),
    };
    let source = cli::source_name(args.input.as_deref());
    let mut out = BufWriter::new(io::stdout().lock());
    let mut t = Translator::new(TranslateOptions { thread_id: args.thread_id.clone(), run_id: args.run_id.clone() });
    let mut exit = Exit::Ok;
    let mut reader = input;
    let mut buf = Vec::new();
    let mut lineno = 0u64;
    while cli::read_line(&mut reader, &mut buf).with_context(|| format!("cannot read {source}"))? {
        lineno += 1;
        if buf.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        match parse_line(&buf) {
            Ok(ev) => write_all(&mut out, &t.push(&ev))?,
            Err(e) => {
                cli::report(BIN, format!("{source}:{lineno}: {e}"));
                exit = Exit::Flagged;
            }
        }
    }
    write_all(&mut out, &t.finish())?;
    let ignored = t.ignored_after_terminal();
    if ignored > 0 {
        cli::report(BIN, format!("{source}: ignored {ignored} event(s) after the run's terminal event"));
    }
    Ok(exit)
}

/// Writes the events of one input record, then flushes so a live pipeline sees them.
fn write_all(out: &mut impl Write, events: &[AguiEvent]) -> anyhow::Result<()> {
    if events.is_empty() {
        return Ok(());
    }
    for e in events {
        cli::write_record(out, e.to_json().as_bytes()).context("cannot write to stdout")?;
    }
    out.flush().context("cannot write to stdout")?;
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn cli_definition_is_consistent() {
        use clap::CommandFactory;
        super::Args::command().debug_assert();
    }
}
