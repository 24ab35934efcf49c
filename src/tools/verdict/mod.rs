//! `harness-compare-result.v1` verdicts, checked as evidence.
//!
//! The trial rows are the evidence and every aggregate in a verdict is a summary of them, so a
//! file with a legal shape but invented numbers must fail. [`check`] validates the shape, then
//! recomputes the aggregates, the matched pairs and the decision from the rows and the policy,
//! following `spec/verdict-recompute.md` (itself taken from the reference implementation,
//! QoderAI/better-harness `packages/harness/src/compare/`). It is pure: bytes in, a [`Summary`] or
//! every [`Finding`] out. The parts: [`model`] (the verdict's terms, the recomputation and the
//! decision), `check` (the walk over a document, collecting findings), [`render`] (text and
//! JSON for people and the studio); this file only names them.

mod check;
mod json;
pub mod model;
mod num;
pub mod render;

#[cfg(test)]
use check::child;
pub use check::{check, quote};
pub use model::*;
pub use num::{js_num, js_round, ratio, round2, round6};

/// Reads an evidence file with a bound: only a regular file (opened without
/// blocking, so a FIFO cannot hang the reader, and its type checked on the
/// open file), at most [`MAX_EVIDENCE_BYTES`]. The error names the path.
pub fn read_evidence(path: &std::path::Path) -> Result<Vec<u8>, String> {
    use std::os::unix::fs::OpenOptionsExt;
    let name = path.display();
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NONBLOCK | nix::libc::O_NOCTTY)
        .open(path)
        .map_err(|e| format!("{name}: {e}"))?;
    let meta = f.metadata().map_err(|e| format!("{name}: {e}"))?;
    if !meta.file_type().is_file() {
        return Err(format!("{name}: not a regular file; not read"));
    }
    if meta.len() > MAX_EVIDENCE_BYTES {
        return Err(format!("{name}: {} bytes, larger than {MAX_EVIDENCE_BYTES}; not read", meta.len()));
    }
    read_evidence_from(f, &name.to_string())
}

/// Reads at most [`MAX_EVIDENCE_BYTES`] from `r` (stdin, or a file that
/// grows while read); more is an error naming `name`.
pub fn read_evidence_from(r: impl std::io::Read, name: &str) -> Result<Vec<u8>, String> {
    use std::io::Read;
    let mut buf = Vec::new();
    r.take(MAX_EVIDENCE_BYTES + 1).read_to_end(&mut buf).map_err(|e| format!("{name}: {e}"))?;
    if buf.len() as u64 > MAX_EVIDENCE_BYTES {
        return Err(format!("{name}: larger than {MAX_EVIDENCE_BYTES} bytes; not read"));
    }
    Ok(buf)
}

#[cfg(test)]
mod tests;
