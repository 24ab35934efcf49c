//! `sse-encode`: JSON lines on stdin → Server-Sent Events frames on stdout.
//! The logic is `runwire::pipeline::encode::Encoder`.

use clap::Parser;
use runwire::pipeline::encode::{Encoder, SseOptions};
use runwire::util::cli::{self, Exit};
use runwire::util::pipe;
use std::path::PathBuf;
use std::process::ExitCode;

const BIN: &str = "sse-encode";

/// Frame JSON lines as Server-Sent Events (`data: <json>` + blank line).
#[derive(Parser, Debug)]
#[command(name = BIN, version, after_help = "Exit status: 0 success; 1 some input lines were unusable (each reported on stderr; the rest still written); 2 usage error; 3 input or output error.\nSee sse-encode(1) and spec/exit-codes.md.")]
struct Args {
    /// Use this top-level field (string or integer) as each frame's `id:`.
    #[arg(long, value_name = "FIELD", value_parser = clap::builder::NonEmptyStringValueParser::new())]
    id_from: Option<String>,
    /// Emit only the frames after the one whose id is ID (seq ids compare by position).
    #[arg(long, value_name = "ID", requires = "id_from")]
    after: Option<String>,
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
    let mut enc = Encoder::new(SseOptions { id_from: args.id_from.clone(), after: args.after.clone() });
    pipe::filter(
        BIN,
        args.input.as_deref().or(args.file.as_deref()),
        |line, out| {
            if let Some(frame) = enc.push(line)? {
                out.extend_from_slice(frame.as_bytes());
            }
            Ok(())
        },
        |_| {},
    )
}

#[cfg(test)]
mod tests {
    #[test]
    fn cli_definition_is_consistent() {
        use clap::CommandFactory;
        super::Args::command().debug_assert();
    }
}
