//! `verdict-check`: check a `harness-compare-result.v1` verdict against its own trial rows and
//! print its summary. All logic is in `runwire::tools::verdict`; see `man/verdict-check.1`.

use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use clap::{Parser, ValueEnum};
use runwire::tools::verdict::{self, render, Source, Status, Variant};
use runwire::util::cli::{self, Exit};

const BIN: &str = "verdict-check";
/// Invalid evidence and unreadable input share the usage code, 2: either way there is no verdict.
const INVALID: Exit = Exit::Usage;

#[derive(Debug, Clone, Copy, ValueEnum)]
enum Format {
    Table,
    Json,
    Tsv,
}

/// Check a harness compare verdict (harness-compare-result.v1) by recomputing it from its trial rows.
#[derive(Debug, Parser)]
#[command(
    name = BIN,
    version,
    after_help = "Exit status: 0 valid (and the --expect'ed status), 1 valid but another status, \
                  2 invalid evidence, unreadable input or a usage error, 3 writing the summary failed."
)]
struct Args {
    /// The verdict.json to check; `-` or none reads stdin
    #[arg(value_name = "FILE", conflicts_with = "dir")]
    file: Option<PathBuf>,
    /// An evidence directory: DIR/verdict.json, checked against DIR/H0/revision.json and DIR/H1/revision.json
    #[arg(long, value_name = "DIR")]
    dir: Option<PathBuf>,
    /// Output format of the summary
    #[arg(long, value_enum, default_value_t = Format::Table)]
    format: Format,
    /// Exit 1 unless the verdict's status is STATUS
    #[arg(long, value_name = "STATUS", value_parser = Status::NAMES)]
    expect: Option<String>,
}

/// The bytes to check and the names to report them by.
struct Inputs {
    name: String,
    verdict: Vec<u8>,
    revisions: Option<[(String, Vec<u8>); 2]>,
}

/// Bounded: a regular file of at most `verdict::MAX_EVIDENCE_BYTES` (so
/// `/dev/zero` or a FIFO is refused, not read until memory runs out).
fn read(path: &Path) -> Result<(String, Vec<u8>), String> {
    verdict::read_evidence(path).map(|b| (path.display().to_string(), b))
}

fn read_inputs(args: &Args) -> Result<Inputs, String> {
    if let Some(dir) = &args.dir {
        let (name, verdict) = read(&dir.join("verdict.json"))?;
        let revision = |v: Variant| read(&dir.join(v.revision_dir()).join("revision.json"));
        let revisions = [revision(Variant::Baseline)?, revision(Variant::Candidate)?];
        return Ok(Inputs { name, verdict, revisions: Some(revisions) });
    }
    match &args.file {
        Some(p) if p.as_os_str() != "-" => read(p).map(|(name, verdict)| Inputs { name, verdict, revisions: None }),
        _ => {
            let verdict = verdict::read_evidence_from(io::stdin().lock(), "stdin")?;
            Ok(Inputs { name: "stdin".into(), verdict, revisions: None })
        }
    }
}

fn run(args: &Args) -> anyhow::Result<Exit> {
    let inputs = match read_inputs(args) {
        Ok(i) => i,
        Err(msg) => {
            cli::report(BIN, msg);
            return Ok(INVALID);
        }
    };
    let revisions = inputs.revisions.as_ref().map(|[h0, h1]| (h0.1.as_slice(), h1.1.as_slice()));
    let summary = match verdict::check(&inputs.verdict, revisions) {
        Ok(s) => s,
        Err(rejection) => {
            let name = |s: Source| match (s, &inputs.revisions) {
                (Source::Revision(v), Some(r)) => r[v as usize].0.as_str(),
                _ => inputs.name.as_str(),
            };
            let mut err = io::stderr().lock();
            for f in &rejection.findings {
                let _ = writeln!(err, "{BIN}: {}: {f}", name(f.source));
            }
            if rejection.total > rejection.findings.len() {
                let more = rejection.total - rejection.findings.len();
                let s = if more == 1 { "" } else { "s" };
                let _ = writeln!(err, "{BIN}: {}: … and {more} more finding{s}", inputs.name);
            }
            return Ok(INVALID);
        }
    };
    let write = || -> io::Result<()> {
        let mut out = io::BufWriter::new(io::stdout().lock());
        match args.format {
            Format::Table => render::table(&summary, &mut out)?,
            Format::Json => render::json(&summary, &mut out)?,
            Format::Tsv => render::tsv(&summary, &mut out)?,
        }
        out.flush()
    };
    write().context("stdout")?;
    if let Some(want) = &args.expect {
        if summary.status.name() != want {
            cli::report(BIN, format!("{}: status is {}, but --expect asked for {want}", inputs.name, summary.status));
            return Ok(Exit::Flagged);
        }
    }
    Ok(Exit::Ok)
}

fn main() -> ExitCode {
    let args = match cli::parse_args::<Args>() {
        Ok(a) => a,
        Err(code) => return code,
    };
    cli::finish(BIN, run(&args))
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    #[test]
    fn the_arguments_are_well_formed() {
        super::Args::command().debug_assert();
    }
}
