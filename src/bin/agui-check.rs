//! `agui-check`: is this producer's stream AG-UI 1.0? Reads an SSE stream or
//! AG-UI events as JSON lines (a file, stdin, or the answer to a POST), writes
//! one JSON line per finding. The logic is `runwire::aguicheck`; see
//! `man/agui-check.1`.

use std::io::{self, Read, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use clap::{Parser, ValueEnum};
use runwire::aguicheck::stream::{Format, Stream};
use runwire::aguicheck::{fetch, Finding, Options};
use runwire::util::cli::{self, Exit};

const BIN: &str = "agui-check";

#[derive(Debug, Clone, Copy, ValueEnum)]
enum Framing {
    Auto,
    Sse,
    Jsonl,
}

/// Check an AG-UI 1.0 event stream (SSE or JSON lines, or a live producer's answer) against the protocol's rules.
#[derive(Debug, Parser)]
#[command(
    name = BIN,
    version,
    after_help = "Findings are JSON lines on stdout: {rule, index, event, message, spec}. The rules: agui-check(1).\n\
                  Exit status: 0 no finding; 1 findings; 2 usage error, unreadable input or an unreachable URL; \
                  3 writing the findings failed."
)]
struct Args {
    /// The stream to check; `-` or none reads stdin
    #[arg(value_name = "FILE", conflicts_with = "url")]
    file: Option<PathBuf>,
    /// How the input is framed (auto: `{` first means JSON lines, else SSE)
    #[arg(long, value_enum, default_value_t = Framing::Auto)]
    format: Framing,
    /// POST a RunAgentInput to this http:// URL and check the answer
    #[arg(long, value_name = "URL")]
    url: Option<String>,
    /// The RunAgentInput to POST (JSON); default: a fresh thread with one user message
    #[arg(long, value_name = "FILE", requires = "url")]
    input: Option<PathBuf>,
    /// Seconds to wait for the producer on any one read (with --url)
    #[arg(long, value_name = "SECS", default_value_t = 60, requires = "url")]
    timeout: u64,
    /// Also require exactly one run, its terminal event last (runwire's own rule)
    #[arg(long)]
    one_run: bool,
}

fn main() -> ExitCode {
    let args = match cli::parse_args::<Args>() {
        Ok(a) => a,
        Err(code) => return code,
    };
    // clap lets `requires = "url"` pass when a FILE is given too: checked here.
    if args.input.is_some() && args.url.is_none() {
        return cli::usage(BIN, "--input is the RunAgentInput to POST to --url, which is not given").into();
    }
    cli::finish(BIN, run(&args))
}

/// Writes findings as they come, flushed, so a live stream shows them at once.
struct Out {
    w: io::BufWriter<io::StdoutLock<'static>>,
    found: u64,
}

impl Out {
    fn write(&mut self, fs: Vec<Finding>) -> anyhow::Result<()> {
        if fs.is_empty() {
            return Ok(());
        }
        for f in fs {
            self.found += 1;
            // Serialized first, so a write error stays an io::Error (a closed pipe is recognised).
            let mut line = f.to_line().into_bytes();
            line.push(b'\n');
            self.w.write_all(&line).context("stdout")?;
        }
        self.w.flush().context("stdout")
    }
}

/// The default input: a thread and run of their own, one user message.
fn default_input() -> serde_json::Value {
    let tag = format!(
        "{}-{}",
        std::process::id(),
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0)
    );
    serde_json::json!({
        "threadId": format!("agui-check-{tag}"),
        "runId": format!("agui-check-run-{tag}"),
        "messages": [{"id": format!("agui-check-msg-{tag}"), "role": "user", "content": "hi"}],
        "tools": [],
        "context": [],
        "state": {},
        "forwardedProps": {},
    })
}

fn run(args: &Args) -> anyhow::Result<Exit> {
    let format = match args.format {
        Framing::Auto => None,
        Framing::Sse => Some(Format::Sse),
        Framing::Jsonl => Some(Format::Jsonl),
    };
    let mut out = Out { w: io::BufWriter::new(io::stdout().lock()), found: 0 };
    let mut opts = Options { one_run: args.one_run, ..Options::default() };
    let (name, mut reader): (String, Box<dyn Read>) = if let Some(url) = &args.url {
        let parsed = match fetch::parse_url(url) {
            Ok(u) => u,
            Err(e) => {
                cli::report(BIN, format!("--url: {e}"));
                return Ok(Exit::Usage);
            }
        };
        let input = match &args.input {
            Some(p) => {
                let text = match std::fs::read(p) {
                    Ok(t) => t,
                    Err(e) => {
                        cli::report(BIN, format!("{}: {e}", p.display()));
                        return Ok(Exit::Usage);
                    }
                };
                match serde_json::from_slice::<serde_json::Value>(&text) {
                    Ok(v)
                        if v.get("threadId").is_some_and(|t| t.is_string())
                            && v.get("runId").is_some_and(|t| t.is_string()) =>
                    {
                        v
                    }
                    Ok(_) => {
                        cli::report(BIN, format!("{}: a RunAgentInput needs threadId and runId strings", p.display()));
                        return Ok(Exit::Usage);
                    }
                    Err(e) => {
                        cli::report(BIN, format!("{}: not JSON: {e}", p.display()));
                        return Ok(Exit::Usage);
                    }
                }
            }
            None => default_input(),
        };
        let ids = |k: &str| input[k].as_str().unwrap_or_default().to_string();
        opts.request = Some((ids("threadId"), ids("runId")));
        opts.state = input.get("state").cloned();
        opts.messages = input.get("messages").and_then(|m| m.as_array()).cloned().unwrap_or_default();
        let body = serde_json::to_vec(&input)?;
        let resp = match fetch::post(&parsed, &body, Duration::from_secs(args.timeout.max(1))) {
            Ok(r) => r,
            Err(e) => {
                cli::report(BIN, format!("{url}: {e}"));
                return Ok(Exit::Usage);
            }
        };
        let sse = resp
            .content_type
            .as_deref()
            .is_some_and(|c| c.split(';').next().is_some_and(|m| m.trim().eq_ignore_ascii_case("text/event-stream")));
        if resp.status != 200 || !sse {
            out.write(vec![Finding {
                rule: "http.response",
                index: None,
                event: None,
                message: format!(
                    "the answer is {} with Content-Type {}, not 200 text/event-stream",
                    resp.status,
                    resp.content_type.as_deref().unwrap_or("(none)")
                ),
            }])?;
            if resp.status != 200 {
                return Ok(Exit::Flagged);
            }
        }
        (url.clone(), Box::new(resp.body))
    } else {
        match &args.file {
            Some(p) if p.as_os_str() != "-" => match std::fs::File::open(p) {
                Ok(f) => (p.display().to_string(), Box::new(f)),
                Err(e) => {
                    cli::report(BIN, format!("{}: {e}", p.display()));
                    return Ok(Exit::Usage);
                }
            },
            _ => ("stdin".to_string(), Box::new(io::stdin().lock())),
        }
    };
    let mut stream = Stream::new(if args.url.is_some() { format.or(Some(Format::Sse)) } else { format }, opts);
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        match reader.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => out.write(stream.feed(&buf[..n]))?,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) if args.url.is_some() => {
                // The producer stopped answering: what came is checked as a truncated stream.
                cli::report(BIN, format!("{name}: read: {e} (checked as a truncated stream)"));
                break;
            }
            Err(e) => {
                cli::report(BIN, format!("{name}: {e}"));
                return Ok(Exit::Usage);
            }
        }
    }
    out.write(stream.finish())?;
    Ok(if out.found > 0 { Exit::Flagged } else { Exit::Ok })
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    #[test]
    fn the_arguments_are_well_formed() {
        super::Args::command().debug_assert();
    }
}
