//! `agui-translate`: `events/v1` lines on stdin → AG-UI 1.0 events, one
//! compact JSON object a line. The logic is `runwire::pipeline::translate::Translator`.

use clap::Parser;
use runwire::pipeline::translate::{parse_line, AguiEvent, TranslateOptions, Translator};
use runwire::util::cli::{self, Exit};
use runwire::util::pipe;
use std::cell::RefCell;
use std::path::PathBuf;
use std::process::ExitCode;

const BIN: &str = "agui-translate";

/// Translate an events/v1 stream into AG-UI 1.0 events (JSON lines).
#[derive(Parser, Debug)]
#[command(name = BIN, version, after_help = "Exit status: 0 success; 1 some input lines were unusable (each reported on stderr; the rest still written); 2 usage error; 3 input or output error.\nSee agui-translate(1) and spec/exit-codes.md.")]
struct Args {
    /// threadId for RUN_STARTED/RUN_FINISHED (default: the first event's `run`, else derived).
    #[arg(long, value_name = "ID", value_parser = clap::builder::NonEmptyStringValueParser::new())]
    thread_id: Option<String>,
    /// runId, also the prefix of every message and tool-call id (default: derived from the first event).
    #[arg(long, value_name = "ID", value_parser = clap::builder::NonEmptyStringValueParser::new())]
    run_id: Option<String>,
    /// Read from FILE instead of stdin (`-` is stdin).
    #[arg(long, value_name = "FILE", conflicts_with = "file")]
    input: Option<PathBuf>,
    /// Read this file instead of stdin (`-` is stdin); as --input.
    #[arg(value_name = "FILE")]
    file: Option<PathBuf>,
}

fn main() -> ExitCode {
    match cli::parse_args::<Args>() {
        Ok(args) => cli::finish(BIN, run(&args)),
        Err(code) => code,
    }
}

fn run(args: &Args) -> anyhow::Result<Exit> {
    let source = cli::source_name(args.input.as_deref().or(args.file.as_deref()));
    let t = RefCell::new(Translator::new(TranslateOptions {
        thread_id: args.thread_id.clone(),
        run_id: args.run_id.clone(),
    }));
    let exit = pipe::filter(
        BIN,
        args.input.as_deref().or(args.file.as_deref()),
        |line, out| {
            let ev = parse_line(line)?;
            write_events(out, &t.borrow_mut().push(&ev));
            Ok(())
        },
        |out| write_events(out, &t.borrow_mut().finish()),
    )?;
    let ignored = t.borrow().ignored_after_terminal();
    if ignored > 0 {
        cli::report(BIN, format!("{source}: ignored {ignored} event(s) after the run's terminal event"));
    }
    Ok(exit)
}

fn write_events(buf: &mut Vec<u8>, events: &[AguiEvent]) {
    for e in events {
        // Straight into the output buffer: no second copy of a long text.
        serde_json::to_writer(&mut *buf, e).expect("AG-UI events serialize infallibly");
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
