//! `agui-translate`: `events/v1` lines on stdin → AG-UI 1.0 events, one
//! compact JSON object a line. The logic is `runwire::agui::Translator`.

use anyhow::Context;
use clap::Parser;
use runwire::agui::{parse_line, AguiEvent, TranslateOptions, Translator};
use runwire::cli::{self, Exit};
use runwire::pipe::{self, Flow};
use std::io::{self, BufWriter, Write};
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
    let source = cli::source_name(args.input.as_deref());
    let input = pipe::open_input(args.input.as_deref()).with_context(|| source.clone())?;
    let stdout = io::stdout();
    let mut out = BufWriter::with_capacity(64 * 1024, stdout.lock());
    let mut t = Translator::new(TranslateOptions { thread_id: args.thread_id.clone(), run_id: args.run_id.clone() });
    let mut exit = Exit::Ok;
    pipe::drive(input, &mut out, |lineno, line, buf| {
        if line.iter().all(u8::is_ascii_whitespace) {
            return Flow::Continue;
        }
        match parse_line(line) {
            Ok(ev) => write_events(buf, &t.push(&ev)),
            Err(e) => {
                cli::report(BIN, format!("{source}:{lineno}: {e}"));
                exit = Exit::Flagged;
            }
        }
        Flow::Continue
    })
    .with_context(|| source.clone())?;
    let mut tail = Vec::new();
    write_events(&mut tail, &t.finish());
    out.write_all(&tail).and_then(|_| out.flush()).context("stdout")?;
    let ignored = t.ignored_after_terminal();
    if ignored > 0 {
        cli::report(BIN, format!("{source}: ignored {ignored} event(s) after the run's terminal event"));
    }
    Ok(exit)
}

fn write_events(buf: &mut Vec<u8>, events: &[AguiEvent]) {
    for e in events {
        buf.extend_from_slice(e.to_json().as_bytes());
        buf.push(b'\n');
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
