//! `publish-rate`: a node's publishing rate beside a bare `async-nats`
//! publisher's, on the same cluster, in the same run (bench/cluster.sh, (c)).
//!
//!   publish-rate --url URL --node NAME --run RUN --log PATH [--mib N] [--lines N] [--line-bytes N]
//!
//! PATH is a task log of run RUN that the node NAME (`runwire-cluster node`,
//! already running) publishes. Four measures, each the time from the first
//! byte written (or published) to the last byte stored in `RUNWIRE_FILES`
//! (seen by an ordered consumer created before it starts):
//!
//! - `node_bulk`: N MiB appended to the log in 1 MiB writes; the node
//!   publishes them in chunks (`runwire_cluster::node::chunk_size`: the
//!   server's `max_payload` less 8 KiB, at most 1 MiB), each acknowledged
//!   before the next (the position moves only on an acknowledgement);
//! - `bare_bulk`: the same bytes published by this process in messages of
//!   the same size to a subject of the same stream, acknowledgements
//!   awaited 64 at a time (no message ids, no headers, no files);
//! - `node_lines`: `--lines` lines of `--line-bytes` appended one `write`
//!   each, as fast as this process can (an agent at full speed);
//! - `bare_lines`: the same lines published one message each, 64 acks at a time.
//!
//! Prints one `key=value` line per measure (MB/s and lines/s) and the ratios
//! `node/bare`. Exit status 0, or 1 when something timed out or failed.

use async_nats::jetstream::{self, consumer};
use bytes::Bytes;
use futures_util::StreamExt;
use runwire_cluster::names::{self, header};
use std::io::Write;
use std::time::{Duration, Instant};

struct Args {
    url: String,
    node: String,
    run: String,
    log: std::path::PathBuf,
    mib: usize,
    lines: usize,
    line_bytes: usize,
}

fn args() -> Result<Args, String> {
    let mut a = Args {
        url: String::new(),
        node: String::new(),
        run: String::new(),
        log: Default::default(),
        mib: 64,
        lines: 20_000,
        line_bytes: 200,
    };
    let mut it = std::env::args().skip(1);
    while let Some(k) = it.next() {
        if k == "--help" || k == "-h" {
            println!("usage: publish-rate --url URL --node NAME --run RUN --log PATH [--mib N] [--lines N] [--line-bytes N]\n(bench/cluster.sh runs it; exit 0, 1 on a failure, 2 usage)");
            std::process::exit(0);
        }
        let v = it.next().ok_or(format!("{k}: needs a value"))?;
        let num = |v: &str| v.parse::<usize>().map_err(|_| format!("{k} {v:?}: expected a number"));
        match k.as_str() {
            "--url" => a.url = v,
            "--node" => a.node = v,
            "--run" => a.run = v,
            "--log" => a.log = v.into(),
            "--mib" => a.mib = num(&v)?.max(1),
            "--lines" => a.lines = num(&v)?.max(1),
            "--line-bytes" => a.line_bytes = num(&v)?.max(2),
            _ => return Err(format!("{k}: unknown flag")),
        }
    }
    if a.url.is_empty() || a.node.is_empty() || a.run.is_empty() || a.log.as_os_str().is_empty() {
        return Err("--url, --node, --run and --log are required".into());
    }
    Ok(a)
}

/// Waits until messages on `subject` (from now on) cover `total` bytes past
/// `base`: by their `Rw-Offset` + length when they have one, else by the
/// sum of their lengths. Returns when the last one was seen.
async fn covered(
    files: &jetstream::stream::Stream,
    subject: &str,
    base: u64,
    total: u64,
) -> anyhow::Result<tokio::task::JoinHandle<anyhow::Result<Instant>>> {
    let cfg = consumer::pull::OrderedConfig {
        filter_subject: subject.to_string(),
        deliver_policy: consumer::DeliverPolicy::New,
        ..Default::default()
    };
    let c = files.create_consumer(cfg).await?;
    let mut msgs = c.messages().await?;
    Ok(tokio::spawn(async move {
        let mut sum = 0u64;
        loop {
            let m = tokio::time::timeout(Duration::from_secs(120), msgs.next())
                .await
                .map_err(|_| anyhow::anyhow!("no message for 120 s"))?
                .ok_or_else(|| anyhow::anyhow!("the consumer ended"))??;
            let off: Option<u64> =
                m.headers.as_ref().and_then(|h| h.get(header::OFFSET)).and_then(|v| v.as_str().parse().ok());
            let end = match off {
                Some(o) => o + m.payload.len() as u64,
                None => {
                    sum += m.payload.len() as u64;
                    base + sum
                }
            };
            if end >= base + total {
                return Ok(Instant::now());
            }
        }
    }))
}

async fn bare(js: &jetstream::Context, subject: &str, msgs: impl Iterator<Item = Bytes>) -> anyhow::Result<Duration> {
    let t = Instant::now();
    let mut acks = std::collections::VecDeque::new();
    for m in msgs {
        acks.push_back(js.publish(subject.to_string(), m).await?);
        if acks.len() >= 64 {
            acks.pop_front().unwrap().await?;
        }
    }
    for a in acks {
        a.await?;
    }
    Ok(t.elapsed())
}

fn report(what: &str, bytes: u64, lines: Option<u64>, d: Duration) -> f64 {
    let mbs = bytes as f64 / d.as_secs_f64() / 1e6;
    let lines = lines.map(|n| format!(" lines_per_s={:.0}", n as f64 / d.as_secs_f64())).unwrap_or_default();
    println!("{what} bytes={bytes} secs={:.3} mb_per_s={mbs:.1}{lines}", d.as_secs_f64());
    mbs
}

async fn main_() -> anyhow::Result<()> {
    let a = match args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("publish-rate: {e}");
            std::process::exit(2)
        }
    };
    let urls: Vec<&str> = a.url.split(',').collect();
    let client = async_nats::connect(urls.as_slice()).await?;
    let js = jetstream::new(client.clone());
    let files = js.get_stream(names::FILES_STREAM).await?;
    let max_bytes = u64::try_from(files.cached_info().config.max_bytes).unwrap_or(0);
    let size = runwire_cluster::node::chunk_size(&client, max_bytes);
    let file = a.log.file_name().and_then(|n| n.to_str()).ok_or_else(|| anyhow::anyhow!("--log: no file name"))?;
    let node_subject = names::file_subject(&a.node, &a.run, file);
    let bare_subject = names::file_subject("benchbare", &a.run, file);
    let mut log = std::fs::OpenOptions::new().append(true).open(&a.log)?;

    // Bulk: MiB writes vs messages of the node's chunk size.
    let total = (a.mib << 20) as u64;
    let base = log.metadata()?.len();
    let done = covered(&files, &node_subject, base, total).await?;
    let block = vec![b'x'; 1 << 20];
    let t = Instant::now();
    for _ in 0..a.mib {
        log.write_all(&block)?;
    }
    let node_bulk = done.await??.duration_since(t);
    let n = (total as usize).div_ceil(size);
    let chunks = (0..n).map(|i| Bytes::from(vec![b'y'; size.min(total as usize - i * size)]));
    let bare_bulk = bare(&js, &bare_subject, chunks).await?;
    println!("chunk_bytes={size}");
    let nb = report("node_bulk", total, None, node_bulk);
    let bb = report("bare_bulk", total, None, bare_bulk);

    // Lines: one write each vs one message each.
    let mut line = vec![b'z'; a.line_bytes - 1];
    line.push(b'\n');
    let total = (a.lines * a.line_bytes) as u64;
    let base = log.metadata()?.len();
    let done = covered(&files, &node_subject, base, total).await?;
    let t = Instant::now();
    for _ in 0..a.lines {
        log.write_all(&line)?;
    }
    let node_lines = done.await??.duration_since(t);
    let line = Bytes::from(line);
    let bare_lines = bare(&js, &bare_subject, std::iter::repeat_n(line, a.lines)).await?;
    let nl = report("node_lines", total, Some(a.lines as u64), node_lines);
    let bl = report("bare_lines", total, Some(a.lines as u64), bare_lines);
    println!("ratio bulk_node_over_bare={:.2} lines_node_over_bare={:.2} (target >= 0.5)", nb / bb, nl / bl);
    Ok(())
}

fn main() -> std::process::ExitCode {
    let rt = match tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("publish-rate: runtime: {e}");
            return std::process::ExitCode::from(1);
        }
    };
    match rt.block_on(main_()) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("publish-rate: {e:#}");
            std::process::ExitCode::from(1)
        }
    }
}
