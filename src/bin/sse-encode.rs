//! `sse-encode`: JSON lines on stdin → Server-Sent Events frames on stdout.
//! The logic is `runwire::sse::Encoder`.

use anyhow::Context;
use clap::Parser;
use runwire::cli::{self, Exit};
use runwire::sse::{Encoder, SseOptions};
use std::io::{self, BufRead, BufReader, BufWriter, Write};
use std::path::PathBuf;
use std::process::ExitCode;

const BIN: &str = "sse-encode";

/// Frame JSON lines as Server-Sent Events (`data: <json>` + blank line).
#[derive(Parser, Debug)]
#[command(name = BIN, version)]
struct Args {
    /// Use this top-level field (string or integer) as each frame's `id:`.
    #[arg(long, value_name = "FIELD")]
    id_from: Option<String>,
    /// Emit only the frames after the one whose id is ID (seq ids compare by position).
    #[arg(long, value_name = "ID", requires = "id_from")]
    after: Option<String>,
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
    let mut reader: Box<dyn BufRead> = match &args.input {
        Some(p) if p.as_os_str() != "-" => {
            Box::new(BufReader::new(std::fs::File::open(p).with_context(|| format!("cannot open {}", p.display()))?))
        }
        _ => Box::new(io::stdin().lock()),
    };
    let source = cli::source_name(args.input.as_deref());
    let mut out = BufWriter::new(io::stdout().lock());
    let mut enc = Encoder::new(SseOptions { id_from: args.id_from.clone(), after: args.after.clone() });
    let mut exit = Exit::Ok;
    let mut buf = Vec::new();
    let mut lineno = 0u64;
    while cli::read_line(&mut reader, &mut buf).with_context(|| format!("cannot read {source}"))? {
        lineno += 1;
        match enc.push(&buf) {
            Ok(Some(frame)) => {
                out.write_all(frame.as_bytes()).context("cannot write to stdout")?;
                out.flush().context("cannot write to stdout")?;
            }
            Ok(None) => {}
            Err(e) => {
                cli::report(BIN, format!("{source}:{lineno}: {e}"));
                exit = Exit::Flagged;
            }
        }
    }
    out.flush().context("cannot write to stdout")?;
    Ok(exit)
}

#[cfg(test)]
mod tests {
    #[test]
    fn cli_definition_is_consistent() {
        use clap::CommandFactory;
        super::Args::command().debug_assert();
    }
}
