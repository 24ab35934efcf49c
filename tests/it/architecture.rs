//! The crate's architecture, read from its source (docs/ARCHITECTURE.md,
//! "What the architecture test enforces"). It reads every `src/**/*.rs`
//! up to its test module, finds what each file imports of the crate (`use
//! crate::…`, `crate::x::…` paths in code, `super::…` resolved, `pub use`,
//! `x::…` where `x` is a child module or a name imported from the crate),
//! and fails, naming the files and the names, when:
//!
//! - a module imports from a layer above its own ([`LAYERS`]);
//! - files import each other, directly or round a loop (a cycle);
//! - a file other than `src/control.rs` spells a control verb as a string
//!   in a place where it means the verb ([`verb_mentions`]);
//! - a file has more than [`MAX_LINES`] lines before its test module.
//!
//! Known remaining violations are listed below with the issue that removes
//! them; a listed one that is gone fails the test too, so each list only
//! shrinks.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Most lines a file in `src/` may have before its `#[cfg(test)] mod`.
const MAX_LINES: usize = 800;

/// The layers, lowest first, by module path prefix (the longest prefix
/// wins). Both the target layout of issue 36 and the paths that branches
/// not yet merged still use are here, so the test holds before and after
/// each move.
const LAYERS: &[(&str, &[&str])] = &[
    ("util", &["util", "lines", "hash", "time", "arrival", "procid", "watch", "pipe", "cli"]),
    ("pipeline", &["pipeline", "agui", "sse", "events", "dialect", "normalize"]),
    ("control", &["control"]),
    ("runs", &["runs"]),
    ("session", &["session", "wrappers"]),
    ("supervise", &["supervise"]),
    ("tools", &["tools", "verdict", "notify", "doctor", "demo", "aguicheck"]),
    ("serve", &["serve"]),
];

/// Import cycles not yet removed: each a set of files that import each
/// other, with the issue that removes it. An entry covers a cycle whose
/// files are all in it; a listed file that is in no cycle fails the test.
const KNOWN_CYCLES: &[(&str, &[&str])] = &[];

/// Upward imports not yet removed: (importing file, imported layer, why).
const KNOWN_UPWARD: &[(&str, &str, &str)] = &[];

/// Files still over [`MAX_LINES`], by path (their owners' branches split
/// them; a file moved keeps failing until its new path is listed or it is short).
const KNOWN_LONG: &[(&str, &str)] = &[];

/// Verb spellings outside `src/control.rs` not yet removed: (file, verb, why).
const KNOWN_VERBS: &[(&str, &str, &str)] = &[];

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// One source file of the library.
struct File {
    /// Relative to the repository, e.g. `src/serve/mod.rs`.
    rel: String,
    /// Its module path (`serve`, `serve::runs::live`); empty for `lib.rs`.
    module: Vec<String>,
    /// The code before the test module, comments and strings blanked.
    code: String,
    /// The string literals of that part, each with the code of its line.
    strings: Vec<Lit>,
    /// Lines before the test module.
    lines: usize,
}

struct Lit {
    text: String,
    /// The code of its line, strings and comments blanked.
    line: String,
    /// For a match arm (`"x" =>`), what the nearest `match` before it matches on.
    scrutinee: Option<String>,
}

fn rs_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            rs_files(&p, out);
        } else if p.extension().is_some_and(|e| e == "rs") {
            out.push(p);
        }
    }
}

/// The part of a file before its test module: up to the first
/// `#[cfg(test)]` that stands on a `mod` (a `#[cfg(test)]` on one item
/// elsewhere does not end the count).
fn non_test_part(text: &str) -> &str {
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    let mut offset = 0;
    for (i, l) in lines.iter().enumerate() {
        if l.trim() == "#[cfg(test)]" {
            let next = lines[i + 1..].iter().map(|l| l.trim()).find(|l| !l.is_empty() && !l.starts_with("#["));
            if next
                .is_some_and(|n| n.starts_with("mod ") || n.starts_with("pub mod ") || n.starts_with("pub(crate) mod "))
            {
                return &text[..offset];
            }
        }
        offset += l.len();
    }
    text
}

/// Blanks comments and the contents of string and char literals (so a path
/// in a doc comment or a message is no import), and collects the strings.
fn lex(src: &str) -> (String, Vec<(usize, usize, String)>) {
    let b = src.as_bytes();
    let mut code = String::with_capacity(src.len());
    let mut strings = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c == b'/' && b.get(i + 1) == Some(&b'/') {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
        } else if c == b'/' && b.get(i + 1) == Some(&b'*') {
            let mut depth = 0;
            while i < b.len() {
                if b[i] == b'/' && b.get(i + 1) == Some(&b'*') {
                    depth += 1;
                    i += 2;
                } else if b[i] == b'*' && b.get(i + 1) == Some(&b'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
            code.push(' ');
        } else if c == b'"' || ((c == b'r' || c == b'b') && starts_string(b, i)) {
            // Prefixes (b, r, br) and raw hashes, then the body.
            let ident_before = i > 0 && (b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_');
            if c != b'"' && ident_before {
                code.push(c as char);
                i += 1;
                continue;
            }
            let mut j = i;
            while b[j] == b'b' || b[j] == b'r' {
                j += 1;
            }
            let raw = src[i..j].contains('r');
            let mut hashes = 0;
            while b[j] == b'#' {
                hashes += 1;
                j += 1;
            }
            j += 1; // the opening quote
            let start = j;
            let end;
            loop {
                if j >= b.len() {
                    end = b.len();
                    break;
                }
                if !raw && b[j] == b'\\' {
                    j += 2;
                    continue;
                }
                if b[j] == b'"' && b[j + 1..].iter().take(hashes).filter(|&&h| h == b'#').count() == hashes {
                    end = j;
                    j += 1 + hashes;
                    break;
                }
                j += 1;
            }
            let at = code.len();
            code.push_str("\"\"");
            strings.push((at, at + 2, src[start..end].to_string()));
            i = j;
        } else if c == b'\'' {
            // A char literal ('x', '\n', '\u{..}') or a lifetime ('a).
            let close = if b.get(i + 1) == Some(&b'\\') {
                b.get(i + 3..).and_then(|r| r.iter().position(|&x| x == b'\'')).map(|p| i + 3 + p)
            } else {
                let ch_len = src[i + 1..].chars().next().map_or(1, char::len_utf8);
                (b.get(i + 1 + ch_len) == Some(&b'\'')).then_some(i + 1 + ch_len)
            };
            match close {
                Some(e) => {
                    code.push_str("' '");
                    i = e + 1;
                }
                None => {
                    code.push('\'');
                    i += 1;
                }
            }
        } else {
            let ch = src[i..].chars().next().unwrap();
            code.push(ch);
            i += ch.len_utf8();
        }
    }
    (code, strings)
}

fn starts_string(b: &[u8], i: usize) -> bool {
    let mut j = i;
    while j < b.len() && (b[j] == b'b' || b[j] == b'r') && j - i < 2 {
        j += 1;
    }
    while j < b.len() && b[j] == b'#' && b[i..j].contains(&b'r') {
        j += 1;
    }
    j < b.len() && b[j] == b'"' && j > i
}

/// Each string literal with the code of its line, and for a match arm
/// what the nearest `match` before it matches on.
fn literals(code: &str, lits: Vec<(usize, usize, String)>) -> Vec<Lit> {
    lits.into_iter()
        .map(|(s, e, text)| {
            let start = code[..s].rfind('\n').map_or(0, |i| i + 1);
            let end = code[e..].find('\n').map_or(code.len(), |i| e + i);
            let arm = code[e..].trim_start();
            let scrutinee = (arm.starts_with("=>") || arm.starts_with('|'))
                .then(|| code[..s].rfind("match ").map(|m| code[m..s].split('{').next().unwrap_or("").to_string()))
                .flatten();
            Lit { text, line: code[start..end].to_string(), scrutinee }
        })
        .collect()
}

/// The modules a file declares under `#[cfg(test)]` (`mod tests;`): test code, not read.
fn test_children(text: &str) -> Vec<String> {
    let lines: Vec<&str> = text.lines().map(str::trim).collect();
    let mut out = Vec::new();
    for (i, l) in lines.iter().enumerate() {
        if *l == "#[cfg(test)]" {
            let next = lines[i + 1..].iter().find(|l| !l.is_empty() && !l.starts_with("#["));
            if let Some(name) = next.and_then(|n| n.strip_prefix("mod ")).and_then(|n| n.strip_suffix(';')) {
                out.push(name.to_string());
            }
        }
    }
    out
}

fn read_files() -> Vec<File> {
    read_crate("src")
}

/// A crate's binaries (`src/bin/*`, `main.rs`): above every module, in no graph.
fn is_bin(rel: &str) -> bool {
    rel.contains("/bin/") || rel.ends_with("/main.rs")
}

/// Every `.rs` file of the crate whose sources are `dir` (relative to the
/// repository), test modules left out.
fn read_crate(dir: &str) -> Vec<File> {
    let src = root().join(dir);
    let mut paths = Vec::new();
    rs_files(&src, &mut paths);
    let mut test_files = BTreeSet::new();
    for p in &paths {
        let dir = if p.file_name().is_some_and(|n| n == "mod.rs" || n == "lib.rs") {
            p.parent().unwrap().to_path_buf()
        } else {
            p.with_extension("")
        };
        for child in test_children(&std::fs::read_to_string(p).unwrap()) {
            test_files.insert(dir.join(format!("{child}.rs")));
            test_files.insert(dir.join(child).join("mod.rs"));
        }
    }
    let mut files = Vec::new();
    for p in paths.into_iter().filter(|p| !test_files.contains(p)) {
        let rel_src = p.strip_prefix(&src).unwrap().to_string_lossy().into_owned();
        let text = std::fs::read_to_string(&p).unwrap();
        let part = non_test_part(&text);
        let (code, lits) = lex(part);
        let strings = literals(&code, lits);
        let module = if is_bin(&format!("{dir}/{rel_src}")) {
            vec![]
        } else {
            let stem = rel_src.trim_end_matches(".rs");
            let mut m: Vec<String> = stem.split('/').map(String::from).collect();
            if m.last().is_some_and(|l| l == "mod" || l == "lib") {
                m.pop();
            }
            m
        };
        files.push(File { rel: format!("{dir}/{rel_src}"), module, code, strings, lines: part.lines().count() });
    }
    files
}

fn is_ident(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// The code as tokens: identifiers, `::`, and single punctuation.
fn tokens(code: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut i = 0;
    let b = code.as_bytes();
    while i < code.len() {
        let c = code[i..].chars().next().unwrap();
        if is_ident(c) {
            let start = i;
            while i < code.len() && code[i..].chars().next().is_some_and(is_ident) {
                i += code[i..].chars().next().unwrap().len_utf8();
            }
            out.push(&code[start..i]);
        } else if c == ':' && b.get(i + 1) == Some(&b':') {
            out.push("::");
            i += 2;
        } else if c.is_whitespace() {
            i += c.len_utf8();
        } else {
            out.push(&code[i..i + c.len_utf8()]);
            i += c.len_utf8();
        }
    }
    out
}

/// Every path of the crate a file names (`crate::a::b`, `super::c::{d, e}`,
/// and `x::y` where `x` is a child module or a name imported from the
/// crate), as paths from the crate root (items included; resolved later).
fn crate_paths(f: &File) -> Vec<Vec<String>> {
    let toks = tokens(&f.code);
    let mut out: Vec<(Vec<String>, String)> = Vec::new();
    let mut i = 0;
    while i < toks.len() {
        let t = toks[i];
        let starts = (t == "crate" || t == "super")
            && toks.get(i + 1) == Some(&"::")
            && (i == 0 || (toks[i - 1] != "::" && toks[i - 1] != "$"));
        if !starts {
            i += 1;
            continue;
        }
        let mut base: Vec<String> =
            if t == "crate" { vec![] } else { f.module[..f.module.len().saturating_sub(1)].to_vec() };
        i += 2;
        while toks.get(i) == Some(&"super") && toks.get(i + 1) == Some(&"::") {
            base.pop();
            i += 2;
        }
        i = tree(&toks, i, base, &mut out);
    }
    // The names in scope: what was imported (by its last name or alias),
    // and the child modules this file declares.
    let mut names: BTreeMap<String, Vec<String>> = out.iter().map(|(p, name)| (name.clone(), p.clone())).collect();
    for w in toks.windows(3) {
        if w[0] == "mod" && w[1].chars().next().is_some_and(is_ident) && (w[2] == ";" || w[2] == "{") {
            let mut m = f.module.clone();
            m.push(w[1].to_string());
            names.insert(w[1].to_string(), m);
        }
    }
    let mut paths: Vec<Vec<String>> = out.into_iter().map(|(p, _)| p).collect();
    for i in 0..toks.len() {
        let bare = toks.get(i + 1) == Some(&"::") && (i == 0 || toks[i - 1] != "::");
        if let Some(base) = names.get(toks[i]).filter(|_| bare) {
            let mut more = Vec::new();
            tree(&toks, i + 2, base.clone(), &mut more);
            paths.extend(more.into_iter().map(|(p, _)| p));
        }
    }
    paths
}

/// Reads a path or use tree from `toks[i]` under `prefix`, pushing each
/// whole path with the name it is known by here (its last, or its alias).
fn tree(toks: &[&str], mut i: usize, mut prefix: Vec<String>, out: &mut Vec<(Vec<String>, String)>) -> usize {
    let named = |p: Vec<String>, at: usize, out: &mut Vec<(Vec<String>, String)>| {
        let alias = (toks.get(at) == Some(&"as")).then(|| toks.get(at + 1).map(|s| s.to_string())).flatten();
        let name = alias.clone().or_else(|| p.last().cloned()).unwrap_or_default();
        out.push((p, name));
        if alias.is_some() {
            at + 2
        } else {
            at
        }
    };
    loop {
        match toks.get(i) {
            Some(&"{") => {
                i += 1;
                loop {
                    match toks.get(i) {
                        Some(&"}") => return i + 1,
                        Some(&",") => i += 1,
                        None => return i,
                        _ => i = tree(toks, i, prefix.clone(), out),
                    }
                }
            }
            Some(&"self") => return named(prefix, i + 1, out),
            Some(&"*") => {
                out.push((prefix, String::new()));
                return i + 1;
            }
            Some(t) if t.chars().next().is_some_and(is_ident) => {
                prefix.push(t.to_string());
                if toks.get(i + 1) == Some(&"::") {
                    i += 2;
                } else {
                    return named(prefix, i + 1, out);
                }
            }
            _ => {
                out.push((prefix, String::new()));
                return i;
            }
        }
    }
}

fn layer_of(module: &[String]) -> Option<(usize, &'static str)> {
    let mut best: Option<(usize, usize, &str)> = None;
    for (rank, (name, prefixes)) in LAYERS.iter().enumerate() {
        for p in *prefixes {
            let parts: Vec<&str> = p.split("::").collect();
            if module.len() >= parts.len()
                && module.iter().zip(&parts).all(|(a, b)| a == b)
                && best.is_none_or(|(len, _, _)| parts.len() > len)
            {
                best = Some((parts.len(), rank, name));
            }
        }
    }
    best.map(|(_, rank, name)| (rank, name))
}

/// The file a path lands in: the file of its longest prefix that is a module.
fn file_of<'a>(path: &[String], modules: &'a BTreeMap<Vec<String>, String>) -> Option<&'a String> {
    (0..=path.len()).rev().find_map(|n| modules.get(&path[..n]))
}

struct Graph {
    /// (from file, to file) -> the paths that make the arrow.
    edges: BTreeMap<(String, String), BTreeSet<String>>,
}

fn graph(files: &[File]) -> Graph {
    let modules: BTreeMap<Vec<String>, String> =
        files.iter().filter(|f| !is_bin(&f.rel)).map(|f| (f.module.clone(), f.rel.clone())).collect();
    let mut edges: BTreeMap<(String, String), BTreeSet<String>> = BTreeMap::new();
    for f in files.iter().filter(|f| !is_bin(&f.rel)) {
        for p in crate_paths(f) {
            let Some(to) = file_of(&p, &modules) else { continue };
            // A file's own paths, and the crate root (lib.rs declares modules only), are no arrows.
            if *to == f.rel || to.ends_with("/lib.rs") {
                continue;
            }
            edges.entry((f.rel.clone(), to.clone())).or_default().insert(p.join("::"));
        }
    }
    Graph { edges }
}

/// The strongly connected groups of more than one file (Tarjan).
fn cycles(g: &Graph) -> Vec<BTreeSet<String>> {
    let mut adj: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (a, b) in g.edges.keys() {
        adj.entry(a).or_default().push(b);
        adj.entry(b).or_default();
    }
    struct T<'a> {
        adj: &'a BTreeMap<&'a str, Vec<&'a str>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on: BTreeSet<&'a str>,
        n: usize,
        out: Vec<BTreeSet<String>>,
    }
    fn visit<'a>(t: &mut T<'a>, v: &'a str) {
        t.index.insert(v, t.n);
        t.low.insert(v, t.n);
        t.n += 1;
        t.stack.push(v);
        t.on.insert(v);
        for &w in &t.adj[v] {
            if !t.index.contains_key(w) {
                visit(t, w);
                let l = t.low[v].min(t.low[w]);
                t.low.insert(v, l);
            } else if t.on.contains(w) {
                let l = t.low[v].min(t.index[w]);
                t.low.insert(v, l);
            }
        }
        if t.low[v] == t.index[v] {
            let mut group = BTreeSet::new();
            while let Some(w) = t.stack.pop() {
                t.on.remove(w);
                group.insert(w.to_string());
                if w == v {
                    break;
                }
            }
            if group.len() > 1 {
                t.out.push(group);
            }
        }
    }
    let mut t = T {
        adj: &adj,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: vec![],
        on: BTreeSet::new(),
        n: 0,
        out: vec![],
    };
    for &v in adj.keys() {
        if !t.index.contains_key(v) {
            visit(&mut t, v);
        }
    }
    t.out
}

/// The verb names, read from `control::Verb::as_str` (`Verb::X => "x"`).
fn verbs() -> BTreeSet<String> {
    let text = std::fs::read_to_string(root().join("src/control.rs")).unwrap();
    let mut out = BTreeSet::new();
    for l in text.lines() {
        let l = l.trim();
        if let Some(rest) = l.strip_prefix("Verb::") {
            if let Some((_, s)) = rest.split_once("=> \"") {
                if let Some(name) = s.strip_suffix("\",") {
                    out.insert(name.to_string());
                }
            }
        }
    }
    assert!(out.len() >= 10, "control.rs: Verb::as_str's names not found (read {out:?}); update verbs()");
    out
}

/// Where a verb's name appears as a string that means the verb: on a line
/// that speaks of a verb (`verb == "steer"`, `verb: "kill".into()`), or as
/// an arm of a `match` on one (`match req.verb.as_str() { "kill" => … }`). The same word as another protocol's (a JSON field
/// `"status"`, Claude's `interrupt` request, ACP's `end_turn`, the cluster's
/// `end` frame) is no mention: its line names no verb.
fn verb_mentions(f: &File, verbs: &BTreeSet<String>) -> Vec<String> {
    if f.rel == "src/control.rs" {
        return vec![];
    }
    let speaks_of_verbs = |line: &str| {
        tokens(line).iter().any(|t| t.chars().next().is_some_and(is_ident) && t.to_ascii_lowercase().contains("verb"))
    };
    f.strings
        .iter()
        .filter(|s| verbs.contains(&s.text))
        .filter(|s| speaks_of_verbs(&s.line) || s.scrutinee.as_deref().is_some_and(speaks_of_verbs))
        .map(|s| s.text.clone())
        .collect()
}

fn check_known<T: Ord + std::fmt::Debug>(
    what: &str,
    found: &BTreeSet<T>,
    known: &BTreeSet<T>,
    problems: &mut Vec<String>,
) {
    for k in known.difference(found) {
        problems.push(format!("{what}: {k:?} is listed as known but no longer found: remove it from the list"));
    }
}

#[test]
fn layers_hold() {
    let files = read_files();
    let g = graph(&files);
    let mut problems = Vec::new();
    for f in files.iter().filter(|f| !f.rel.starts_with("src/bin/") && f.rel != "src/lib.rs") {
        if layer_of(&f.module).is_none() {
            problems.push(format!("{}: module {} is in no layer: add it to LAYERS", f.rel, f.module.join("::")));
        }
    }
    let by_rel: BTreeMap<&str, &File> = files.iter().map(|f| (f.rel.as_str(), f)).collect();
    let known: BTreeSet<(String, String)> =
        KNOWN_UPWARD.iter().map(|(f, to, _)| (f.to_string(), to.to_string())).collect();
    let mut found = BTreeSet::new();
    for ((from, to), names) in &g.edges {
        let (Some((fr, fl)), Some((tr, tl))) =
            (layer_of(&by_rel[from.as_str()].module), layer_of(&by_rel[to.as_str()].module))
        else {
            continue;
        };
        if tr > fr {
            found.insert((from.clone(), tl.to_string()));
            if !known.contains(&(from.clone(), tl.to_string())) {
                let names: Vec<_> = names.iter().cloned().collect();
                problems.push(format!("{from} ({fl}) imports {to} ({tl}), a higher layer: {}", names.join(", ")));
            }
        }
    }
    check_known("upward import", &found, &known, &mut problems);
    assert!(
        problems.is_empty(),
        "layers (lowest first: {}):\n{}",
        LAYERS.iter().map(|l| l.0).collect::<Vec<_>>().join(" < "),
        problems.join("\n")
    );
}

#[test]
fn no_import_cycles() {
    let files = read_files();
    let g = graph(&files);
    let mut problems = Vec::new();
    let mut in_cycles = BTreeSet::new();
    for c in cycles(&g) {
        in_cycles.extend(c.iter().cloned());
        if KNOWN_CYCLES.iter().any(|(_, fs)| c.iter().all(|f| fs.contains(&f.as_str()))) {
            continue;
        }
        let mut arrows = Vec::new();
        for ((a, b), names) in &g.edges {
            if c.contains(a) && c.contains(b) {
                arrows.push(format!("  {a} -> {b}: {}", names.iter().cloned().collect::<Vec<_>>().join(", ")));
            }
        }
        problems.push(format!(
            "these files import each other: {}\n{}",
            c.iter().cloned().collect::<Vec<_>>().join(", "),
            arrows.join("\n")
        ));
    }
    // Each listed file must still be in a cycle, so the list shrinks with the code.
    for (issue, fs) in KNOWN_CYCLES {
        for f in fs.iter().filter(|f| !in_cycles.contains(**f)) {
            problems.push(format!("{f} is in no cycle now: remove it from KNOWN_CYCLES ({issue})"));
        }
    }
    assert!(problems.is_empty(), "import cycles:\n{}", problems.join("\n"));
}

/// The cluster sidecar's crate (`cluster/src`) has no import cycle either:
/// what its lower modules share (the channel's frames and sink, a command's
/// answer, the clock and retries) lives in leaves (`wire`, `util`).
#[test]
fn the_cluster_crate_has_no_import_cycle() {
    let files = read_crate("cluster/src");
    assert!(files.iter().any(|f| f.rel == "cluster/src/node.rs"), "the cluster crate's files are read");
    let g = graph(&files);
    let problems: Vec<String> = cycles(&g)
        .into_iter()
        .map(|c| {
            let arrows: Vec<String> = g
                .edges
                .iter()
                .filter(|((a, b), _)| c.contains(a) && c.contains(b))
                .map(|((a, b), names)| {
                    format!("  {a} -> {b}: {}", names.iter().cloned().collect::<Vec<_>>().join(", "))
                })
                .collect();
            format!(
                "these files import each other: {}\n{}",
                c.iter().cloned().collect::<Vec<_>>().join(", "),
                arrows.join("\n")
            )
        })
        .collect();
    assert!(problems.is_empty(), "import cycles in the cluster crate:\n{}", problems.join("\n"));
}

#[test]
fn verbs_are_spelled_in_control_only() {
    let files = read_files();
    let verbs = verbs();
    let known: BTreeSet<(String, String)> =
        KNOWN_VERBS.iter().map(|(f, v, _)| (f.to_string(), v.to_string())).collect();
    let mut found = BTreeSet::new();
    let mut problems = Vec::new();
    for f in &files {
        for v in verb_mentions(f, &verbs) {
            let key = (f.rel.clone(), v.clone());
            if !known.contains(&key) {
                problems.push(format!("{}: spells the control verb {v:?}: use crate::control::Verb", f.rel));
            }
            found.insert(key);
        }
    }
    check_known("verb spelling", &found, &known, &mut problems);
    problems.dedup();
    assert!(problems.is_empty(), "verbs outside src/control.rs:\n{}", problems.join("\n"));
}

#[test]
fn files_stay_short() {
    let files = read_files();
    let known: BTreeSet<String> = KNOWN_LONG.iter().map(|(f, _)| f.to_string()).collect();
    let mut found = BTreeSet::new();
    let mut problems = Vec::new();
    for f in files.iter().filter(|f| f.lines > MAX_LINES) {
        found.insert(f.rel.clone());
        if !known.contains(&f.rel) {
            problems
                .push(format!("{}: {} lines before its test module (at most {MAX_LINES}): split it", f.rel, f.lines));
        }
    }
    check_known("long file", &found, &known, &mut problems);
    assert!(problems.is_empty(), "long files:\n{}", problems.join("\n"));
}

/// The reader itself: a path in a comment or a string is no import; `super`
/// resolves from the file's module; use trees expand.
#[test]
fn the_reader_reads_imports() {
    let f = |rel: &str, module: &[&str], src: &str| {
        let (code, _) = lex(src);
        File {
            rel: rel.into(),
            module: module.iter().map(|s| s.to_string()).collect(),
            code,
            strings: vec![],
            lines: 0,
        }
    };
    let paths = |file: &File| crate_paths(file).into_iter().map(|p| p.join("::")).collect::<Vec<_>>();
    let a = f(
        "src/serve/runs/live.rs",
        &["serve", "runs", "live"],
        "// crate::not::this\nuse super::follow::{self, Tap};\nuse crate::{a::b, c::{d, e::*}};\nlet s = \"crate::nor::this\"; let c = '\"'; let q = '\\''; let e = '\\n'; fn f<'a>(x: &'a str) { super::super::state::Shared::new(); }\npub(crate) fn g() { b::C; }",
    );
    assert_eq!(
        paths(&a),
        [
            "serve::runs::follow",
            "serve::runs::follow::Tap",
            "a::b",
            "c::d",
            "c::e",
            "serve::state::Shared::new",
            "a::b::C"
        ]
    );
    assert_eq!(
        non_test_part("a\n#[cfg(test)]\nfn x() {}\nb\n#[cfg(test)]\n#[allow(x)]\nmod tests {\n}\n"),
        "a\n#[cfg(test)]\nfn x() {}\nb\n"
    );
    let (_, strings) = lex("let r = r#\"a \" b\"#; let s = b\"steer\";");
    assert_eq!(strings.iter().map(|s| s.2.as_str()).collect::<Vec<_>>(), ["a \" b", "steer"]);
    // A verb where it means one is found; the same word as a field is not.
    let text = "fn f(req: &Request, v: &Value) {\n    if req.verb == \"steer\" {}\n    match req.verb.as_str() {\n        \"kill\" | \"pause\" => {}\n        _ => {}\n    }\n    let s = v.get(\"status\");\n    match kind { \"stop\" => {} }\n}\n";
    let (code, lits) = lex(text);
    let strings = literals(&code, lits);
    let file = File { rel: "src/x.rs".into(), module: vec!["x".into()], code, strings, lines: 0 };
    assert_eq!(verb_mentions(&file, &verbs()), ["steer", "kill", "pause"]);
}
