// SPDX-License-Identifier: Apache-2.0
//! The module graph of `core/src` stays a layered one (issue #20 item 1): no import
//! cycle, the pure modules import no IO module, and no datasource imports the
//! applier nor the applier a datasource.
//!
//! Performs IO: reads `core/src/**.rs` (our own tree) at test time. The checker is a
//! small Rust lexer, not a compiler: it strips comments and literals, reads every
//! `use` tree and every `crate::`/`super::`/`self::` path (and paths that start with
//! a name a `use` bound), resolves each through the `use` and `pub use` bindings to
//! the module that *defines* the item (so `crate::Result` is an edge to `error`, not
//! to the crate root), and drops `#[cfg(test)]` items and test modules. An edge
//! between a module and its own ancestor is not counted: a module split into files
//! (`mod.rs` and its children) is one unit.

#![cfg(test)]
#![allow(
    clippy::too_many_lines // a lexer and a parser, one token loop each
)]

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// The pure modules (with their submodules): no files, sockets, clock or environment.
const PURE: &[&str] = &[
    "model",
    "kind",
    "event",
    "metadata",
    "gate",
    "plan",
    "diff",
    "render",
    "query",
    "instance_data",
    "kubernetes",
    "source::kind",
    "source::instance",
    "source::yaml",
    "source::detect",
    "source::ec2::nic",
    "source::clouds",
    "source::services",
    "source::ec2::services",
    "source::gce::services",
    "source::azure::services",
    "source::aliyun::services",
    "source::oracle::services",
    "source::openstack::services",
    "source::aliyun::nic",
    "source::openstack::nic",
    "source::oracle::vnic",
    "source::provider",
    "boot::decide",
    "cache::record",
    "heal",
    "cadence",
];

/// Submodules of a pure module that do IO.
const NOT_PURE: &[&str] = &[
    "kubernetes::observe",
    "source::detect::read",
    "source::provider::wait",
    "source::provider::http",
    "source::provider::imdsv2",
    "source::provider::retry",
    "source::provider::session",
    "heal::run",
];

/// What a pure module never imports (unless the target is itself pure): the shell.
const IO: &[&str] = &[
    "source", "apply", "cache", "boot", "config", "fs", "logging", "hook",
];

/// Plain values that live beside an IO module's loader: pure code may name these.
const VALUES: &[&str] = &[
    "config::FallbackPolicy",
    "config::FallbackOff",
    // The checked `nics:` entries the planner reads (`config/nics.rs` is pure).
    "config::nics::NicEntry",
    "config::nics::Via",
];

/// Forbidden edges, pure or not: a datasource and the applier never import each
/// other, and the instance-data document does not reach into the boot stage.
const FORBIDDEN: &[(&str, &str)] = &[
    ("source", "apply"),
    ("apply", "source"),
    ("instance_data", "boot"),
];

type Mod = Vec<String>;

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Ident(String),
    Sep,
    P(char),
}

fn lex(src: &str) -> Vec<(Tok, usize)> {
    let c: Vec<char> = src.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    let mut line = 1;
    let at = |k: usize| c.get(k).copied().unwrap_or('\0');
    while i < c.len() {
        let ch = c[i];
        if ch == '\n' {
            line += 1;
            i += 1;
        } else if ch.is_whitespace() {
            i += 1;
        } else if ch == '/' && at(i + 1) == '/' {
            while i < c.len() && c[i] != '\n' {
                i += 1;
            }
        } else if ch == '/' && at(i + 1) == '*' {
            let mut depth = 0;
            loop {
                if i >= c.len() {
                    break;
                }
                if c[i] == '/' && at(i + 1) == '*' {
                    depth += 1;
                    i += 2;
                } else if c[i] == '*' && at(i + 1) == '/' {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    if c[i] == '\n' {
                        line += 1;
                    }
                    i += 1;
                }
            }
        } else if ch == '"' {
            i += 1;
            while i < c.len() && c[i] != '"' {
                if c[i] == '\\' {
                    i += 1;
                }
                if at(i) == '\n' {
                    line += 1;
                }
                i += 1;
            }
            i += 1;
        } else if ch == '\'' {
            if at(i + 1) == '\\' {
                i += 2;
                while i < c.len() && c[i] != '\'' {
                    i += 1;
                }
                i += 1;
            } else if at(i + 2) == '\'' {
                i += 3;
            } else {
                i += 1; // a lifetime: its name lexes as an identifier
            }
        } else if ch.is_alphanumeric() || ch == '_' {
            let start = i;
            while i < c.len() && (c[i].is_alphanumeric() || c[i] == '_') {
                i += 1;
            }
            let word: String = c[start..i].iter().collect();
            let raw = matches!(word.as_str(), "r" | "br" | "cr") && matches!(at(i), '"' | '#');
            if raw {
                let mut hashes = 0;
                while at(i) == '#' {
                    hashes += 1;
                    i += 1;
                }
                if at(i) != '"' {
                    // `r#ident`: a raw identifier
                    let s = i;
                    while i < c.len() && (c[i].is_alphanumeric() || c[i] == '_') {
                        i += 1;
                    }
                    out.push((Tok::Ident(c[s..i].iter().collect()), line));
                    continue;
                }
                i += 1;
                loop {
                    if i >= c.len() {
                        break;
                    }
                    if c[i] == '"' && (1..=hashes).all(|h| at(i + h) == '#') {
                        i += 1 + hashes;
                        break;
                    }
                    if c[i] == '\n' {
                        line += 1;
                    }
                    i += 1;
                }
            } else if word == "b" && at(i) == '\'' {
                // a byte literal: the quote handles it
            } else if word == "b" && at(i) == '"' {
                // a byte string: the quote handles it
            } else {
                out.push((Tok::Ident(word), line));
            }
        } else if ch == ':' && at(i + 1) == ':' {
            out.push((Tok::Sep, line));
            i += 2;
        } else {
            out.push((Tok::P(ch), line));
            i += 1;
        }
    }
    out
}

#[derive(Debug, Clone)]
struct Use {
    /// The bound name; `None` for a glob.
    name: Option<String>,
    path: Vec<String>,
}

/// One path in code or a `use`, where it was seen.
#[derive(Debug, Clone)]
struct Seen {
    module: Mod,
    path: Vec<String>,
    file: String,
    line: usize,
}

#[derive(Debug, Default)]
struct Crate {
    mods: BTreeSet<Mod>,
    uses: BTreeMap<Mod, Vec<Use>>,
    defs: BTreeMap<Mod, BTreeSet<String>>,
    seen: Vec<Seen>,
    /// Child modules declared `#[cfg(test)] mod x;`.
    test_mods: BTreeSet<Mod>,
}

fn ident(toks: &[(Tok, usize)], i: usize) -> Option<&str> {
    match toks.get(i) {
        Some((Tok::Ident(s), _)) => Some(s),
        _ => None,
    }
}

fn is(toks: &[(Tok, usize)], i: usize, t: &Tok) -> bool {
    toks.get(i).is_some_and(|(x, _)| x == t)
}

/// Index after the balanced group that opens at `i`.
fn skip_group(toks: &[(Tok, usize)], mut i: usize) -> usize {
    let mut depth = 0i32;
    while let Some((t, _)) = toks.get(i) {
        match t {
            Tok::P('{' | '(' | '[') => depth += 1,
            Tok::P('}' | ')' | ']') => {
                depth -= 1;
                if depth == 0 {
                    return i + 1;
                }
            }
            _ => {}
        }
        i += 1;
    }
    i
}

/// Index after the item that starts at `i`: its `;` or its `{ … }` body.
fn skip_item(toks: &[(Tok, usize)], mut i: usize) -> usize {
    while let Some((t, _)) = toks.get(i) {
        match t {
            Tok::P(';') => return i + 1,
            Tok::P('{') => return skip_group(toks, i),
            Tok::P('(' | '[') => i = skip_group(toks, i),
            _ => i += 1,
        }
    }
    i
}

fn parse_tree(toks: &[(Tok, usize)], mut i: usize, prefix: &[String], out: &mut Vec<Use>) -> usize {
    let mut path = prefix.to_vec();
    loop {
        match toks.get(i).map(|(t, _)| t) {
            Some(Tok::Sep) => i += 1,
            Some(Tok::Ident(s)) => {
                path.push(s.clone());
                i += 1;
                if is(toks, i, &Tok::Sep) {
                    i += 1;
                    continue;
                }
                let mut name = path.last().cloned().unwrap_or_default();
                if ident(toks, i) == Some("as") {
                    name = ident(toks, i + 1).unwrap_or("_").to_string();
                    i += 2;
                }
                if path.last().is_some_and(|s| s == "self") {
                    path.pop();
                    if name == "self" {
                        name = path.last().cloned().unwrap_or_default();
                    }
                }
                out.push(Use {
                    name: Some(name),
                    path,
                });
                return i;
            }
            Some(Tok::P('*')) => {
                out.push(Use { name: None, path });
                return i + 1;
            }
            Some(Tok::P('{')) => {
                i += 1;
                loop {
                    match toks.get(i).map(|(t, _)| t) {
                        None => return i,
                        Some(Tok::P('}')) => return i + 1,
                        Some(Tok::P(',')) => i += 1,
                        _ => i = parse_tree(toks, i, &path, out),
                    }
                }
            }
            _ => return i,
        }
    }
}

const DEF_WORDS: &[&str] = &[
    "fn", "struct", "enum", "trait", "type", "const", "static", "union",
];

fn parse_file(krate: &mut Crate, file_mod: &Mod, file: &str, src: &str) {
    let toks = lex(src);
    let mut stack: Vec<(Mod, i32)> = vec![(file_mod.clone(), 0)];
    let mut depth = 0i32;
    let mut cfg_test = false;
    let mut i = 0;
    while let Some((t, line)) = toks.get(i) {
        let line = *line;
        let cur = stack.last().map(|(m, _)| m.clone()).unwrap_or_default();
        match t {
            Tok::P('#') => {
                let open = if is(&toks, i + 1, &Tok::P('!')) {
                    i + 2
                } else {
                    i + 1
                };
                let end = skip_group(&toks, open);
                let body: Vec<&Tok> = toks[open..end].iter().map(|(t, _)| t).collect();
                let test = [
                    Tok::P('['),
                    Tok::Ident("cfg".into()),
                    Tok::P('('),
                    Tok::Ident("test".into()),
                    Tok::P(')'),
                    Tok::P(']'),
                ];
                if body.len() == test.len() && body.iter().zip(&test).all(|(a, b)| *a == b) {
                    cfg_test = true;
                }
                i = end;
                continue;
            }
            _ if cfg_test => {
                cfg_test = false;
                let end = skip_item(&toks, i);
                if let Some(k) = (i..end).find(|&k| ident(&toks, k) == Some("mod"))
                    && let Some(name) = ident(&toks, k + 1)
                {
                    let mut m = cur.clone();
                    m.push(name.to_string());
                    krate.test_mods.insert(m);
                }
                i = end;
                continue;
            }
            Tok::P('{') => depth += 1,
            Tok::P('}') => {
                depth -= 1;
                if stack.len() > 1 && stack.last().is_some_and(|(_, d)| *d == depth) {
                    stack.pop();
                }
            }
            Tok::Ident(w) if w == "use" => {
                let mut out = Vec::new();
                let mut k = i + 1;
                loop {
                    k = parse_tree(&toks, k, &[], &mut out);
                    if is(&toks, k, &Tok::P(',')) {
                        k += 1;
                    } else {
                        break;
                    }
                }
                for u in &out {
                    krate.seen.push(Seen {
                        module: cur.clone(),
                        path: u.path.clone(),
                        file: file.to_string(),
                        line,
                    });
                }
                krate.uses.entry(cur.clone()).or_default().extend(out);
                i = skip_item(&toks, i);
                continue;
            }
            Tok::Ident(w) if w == "mod" => {
                if let Some(name) = ident(&toks, i + 1)
                    && is(&toks, i + 2, &Tok::P('{'))
                {
                    let mut m = cur.clone();
                    m.push(name.to_string());
                    krate.mods.insert(m.clone());
                    stack.push((m, depth));
                    depth += 1;
                    i += 3;
                    continue;
                }
            }
            Tok::Ident(w) if DEF_WORDS.contains(&w.as_str()) => {
                if let Some(name) = ident(&toks, i + 1) {
                    krate
                        .defs
                        .entry(cur.clone())
                        .or_default()
                        .insert(name.to_string());
                }
            }
            Tok::Ident(first) if !(i > 0 && is(&toks, i - 1, &Tok::Sep)) => {
                let mut path = vec![first.clone()];
                let mut k = i + 1;
                while is(&toks, k, &Tok::Sep) {
                    match ident(&toks, k + 1) {
                        Some(s) => path.push(s.to_string()),
                        None => break,
                    }
                    k += 2;
                }
                if path.len() > 1 {
                    krate.seen.push(Seen {
                        module: cur,
                        path,
                        file: file.to_string(),
                        line,
                    });
                }
                i = k;
                continue;
            }
            _ => {}
        }
        i += 1;
    }
}

fn load(src: &Path) -> Crate {
    let mut krate = Crate::default();
    let mut files = Vec::new();
    let mut dirs = vec![src.to_path_buf()];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p: PathBuf = e.unwrap().path();
            if p.is_dir() {
                dirs.push(p);
            } else if p.extension().is_some_and(|x| x == "rs") {
                files.push(p);
            }
        }
    }
    files.sort();
    let mut parsed = Vec::new();
    for p in files {
        let rel = p.strip_prefix(src).unwrap().with_extension("");
        let mut m: Mod = rel
            .iter()
            .map(|s| s.to_string_lossy().into_owned())
            .collect();
        if m.last().is_some_and(|s| s == "mod" || s == "lib") {
            m.pop();
        }
        krate.mods.insert(m.clone());
        parsed.push((m, p));
    }
    for (m, p) in &parsed {
        let text = std::fs::read_to_string(p).unwrap();
        let name = p.strip_prefix(src).unwrap().display().to_string();
        parse_file(&mut krate, m, &name, &text);
    }
    // Test modules declared in their parent: their files and everything in them go.
    let tests = krate.test_mods.clone();
    let inside = |m: &Mod| tests.iter().any(|t| m.starts_with(t));
    krate.mods.retain(|m| !inside(m));
    krate.seen.retain(|s| !inside(&s.module));
    krate
}

impl Crate {
    /// Where a path used in `from` starts: its first module and the segments left.
    fn start<'p>(&self, from: &Mod, path: &'p [String]) -> Option<(Mod, &'p [String])> {
        let (first, rest) = path.split_first()?;
        match first.as_str() {
            "crate" => Some((Vec::new(), rest)),
            "self" => Some((from.clone(), rest)),
            "super" => {
                let mut m = from.clone();
                m.pop();
                let mut rest = rest;
                while rest.first().is_some_and(|s| s == "super") {
                    m.pop();
                    rest = &rest[1..];
                }
                Some((m, rest))
            }
            _ => {
                let mut child = from.clone();
                child.push(first.clone());
                let bound = self.binding(from, first).is_some();
                (self.mods.contains(&child) || bound).then(|| (from.clone(), path))
            }
        }
    }

    fn binding(&self, m: &Mod, name: &str) -> Option<&Use> {
        self.uses
            .get(m)?
            .iter()
            .find(|u| u.name.as_deref() == Some(name))
    }

    /// The module that defines what `path` (used in `from`) names, and whether that
    /// thing is the module itself.
    fn resolve(&self, from: &Mod, path: &[String], depth: usize) -> Option<(Mod, Option<String>)> {
        if depth > 32 {
            return None;
        }
        let (m, rest) = self.start(from, path)?;
        Some(self.walk(m, rest, depth))
    }

    fn walk(&self, m: Mod, segs: &[String], depth: usize) -> (Mod, Option<String>) {
        let Some((s, rest)) = segs.split_first() else {
            return (m, None);
        };
        let mut child = m.clone();
        child.push(s.clone());
        if self.mods.contains(&child) {
            return self.walk(child, rest, depth);
        }
        if let Some(u) = self.binding(&m, s) {
            return match self.resolve(&m, &u.path, depth + 1) {
                Some((t, None)) => self.walk(t, rest, depth + 1),
                Some(found) => found,
                None => (m, Some(s.clone())),
            };
        }
        if self.defs.get(&m).is_some_and(|d| d.contains(s)) {
            return (m, Some(s.clone()));
        }
        for g in self
            .uses
            .get(&m)
            .into_iter()
            .flatten()
            .filter(|u| u.name.is_none())
        {
            if let Some((t, None)) = self.resolve(&m, &g.path, depth + 1) {
                let mut c = t.clone();
                c.push(s.clone());
                let there = self.mods.contains(&c)
                    || self.binding(&t, s).is_some()
                    || self.defs.get(&t).is_some_and(|d| d.contains(s));
                if there {
                    return self.walk(t, segs, depth + 1);
                }
            }
        }
        (m, Some(s.clone()))
    }

    /// Every path that leaves its module: `(from, to, the item named in to, where)`.
    fn uses_across(&self) -> Vec<(Mod, Mod, Option<String>, String)> {
        let mut out = Vec::new();
        for s in &self.seen {
            let Some((to, item)) = self.resolve(&s.module, &s.path, 0) else {
                continue;
            };
            if to.starts_with(&s.module) || s.module.starts_with(&to) || !self.mods.contains(&to) {
                continue;
            }
            let at = format!("{}:{} `{}`", s.file, s.line, s.path.join("::"));
            out.push((s.module.clone(), to, item, at));
        }
        out
    }

    /// `from → to` with the first place each edge is seen.
    fn edges(&self) -> BTreeMap<Mod, BTreeMap<Mod, String>> {
        let mut edges: BTreeMap<Mod, BTreeMap<Mod, String>> = BTreeMap::new();
        for m in &self.mods {
            edges.entry(m.clone()).or_default();
        }
        for (from, to, _, at) in self.uses_across() {
            edges.entry(from).or_default().entry(to).or_insert(at);
        }
        edges
    }
}

fn name(m: &Mod) -> String {
    if m.is_empty() {
        "crate".into()
    } else {
        m.join("::")
    }
}

fn under(m: &Mod, prefix: &str) -> bool {
    let p: Vec<&str> = prefix.split("::").collect();
    m.len() >= p.len() && m.iter().zip(&p).all(|(a, b)| a == b)
}

fn is_pure(m: &Mod) -> bool {
    PURE.iter().any(|p| under(m, p)) && !NOT_PURE.iter().any(|p| under(m, p))
}

/// Tarjan's strongly connected components.
fn sccs(edges: &BTreeMap<Mod, BTreeMap<Mod, String>>) -> Vec<Vec<Mod>> {
    struct T<'a> {
        edges: &'a BTreeMap<Mod, BTreeMap<Mod, String>>,
        index: BTreeMap<Mod, usize>,
        low: BTreeMap<Mod, usize>,
        stack: Vec<Mod>,
        on: BTreeSet<Mod>,
        out: Vec<Vec<Mod>>,
    }
    fn visit(t: &mut T<'_>, v: &Mod) {
        let n = t.index.len();
        t.index.insert(v.clone(), n);
        t.low.insert(v.clone(), n);
        t.stack.push(v.clone());
        t.on.insert(v.clone());
        let next: Vec<Mod> = t
            .edges
            .get(v)
            .into_iter()
            .flat_map(|e| e.keys().cloned())
            .collect();
        for w in next {
            if !t.index.contains_key(&w) {
                visit(t, &w);
                let lw = t.low[&w];
                let lv = t.low.get_mut(v).unwrap();
                *lv = (*lv).min(lw);
            } else if t.on.contains(&w) {
                let iw = t.index[&w];
                let lv = t.low.get_mut(v).unwrap();
                *lv = (*lv).min(iw);
            }
        }
        if t.low[v] == t.index[v] {
            let mut c = Vec::new();
            while let Some(w) = t.stack.pop() {
                t.on.remove(&w);
                let done = &w == v;
                c.push(w);
                if done {
                    break;
                }
            }
            c.sort();
            t.out.push(c);
        }
    }
    let mut t = T {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on: BTreeSet::new(),
        out: Vec::new(),
    };
    for v in edges.keys() {
        if !t.index.contains_key(v) {
            visit(&mut t, v);
        }
    }
    t.out
}

/// One cycle through the component's first module, then every edge inside it, each
/// with where it is written.
fn cycle(edges: &BTreeMap<Mod, BTreeMap<Mod, String>>, scc: &[Mod]) -> String {
    let start = &scc[0];
    let mut prev: BTreeMap<Mod, Mod> = BTreeMap::new();
    let mut queue = VecDeque::from([start.clone()]);
    'bfs: while let Some(v) = queue.pop_front() {
        for w in edges[&v].keys().filter(|w| scc.contains(w)) {
            if w == start {
                prev.insert(start.clone(), v.clone());
                break 'bfs;
            }
            if !prev.contains_key(w) {
                prev.insert(w.clone(), v.clone());
                queue.push_back(w.clone());
            }
        }
    }
    let mut hops = Vec::new();
    let mut to = start.clone();
    loop {
        let from = prev[&to].clone();
        hops.push(format!("    {} -> {}", name(&from), name(&to)));
        to = from;
        if &to == start {
            break;
        }
    }
    hops.reverse();
    let mut text = format!(
        "  one cycle:\n{}\n  every edge inside it:\n",
        hops.join("\n")
    );
    for from in scc {
        for (to, at) in edges[from].iter().filter(|(to, _)| scc.contains(to)) {
            let _ = writeln!(text, "    {} -> {}  ({at})", name(from), name(to));
        }
    }
    text
}

fn graph() -> (Crate, BTreeMap<Mod, BTreeMap<Mod, String>>) {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let krate = load(&src);
    let edges = krate.edges();
    (krate, edges)
}

#[test]
fn no_import_cycle() {
    let (krate, edges) = graph();
    let count: usize = edges.values().map(BTreeMap::len).sum();
    let big: Vec<Vec<Mod>> = sccs(&edges).into_iter().filter(|c| c.len() > 1).collect();
    println!(
        "{} modules, {count} edges, {} cycles",
        krate.mods.len(),
        big.len()
    );
    let mut msg = String::new();
    for c in &big {
        let names: Vec<String> = c.iter().map(name).collect();
        let _ = writeln!(
            msg,
            "cycle of {}: {}\n{}",
            c.len(),
            names.join(", "),
            cycle(&edges, c)
        );
    }
    assert!(big.is_empty(), "import cycles in core/src:\n{msg}");
    // The checker sees the graph at all: the crate has its modules and its edges.
    assert!(
        krate.mods.len() > 30 && count > 100,
        "{} modules, {count} edges",
        krate.mods.len()
    );
}

#[test]
fn layers_hold() {
    let (krate, edges) = graph();
    let mut bad = BTreeMap::new();
    for (from, to, item, at) in krate.uses_across() {
        let named = item.map(|i| format!("{}::{i}", name(&to)));
        let value = named.as_deref().is_some_and(|n| VALUES.contains(&n));
        let io = is_pure(&from) && !is_pure(&to) && !value && IO.iter().any(|p| under(&to, p));
        let apart = FORBIDDEN
            .iter()
            .any(|(a, b)| under(&from, a) && under(&to, b));
        if io || apart {
            bad.entry(format!("  {} -> {}", name(&from), name(&to)))
                .or_insert(at);
        }
    }
    let pure = edges.keys().filter(|m| is_pure(m)).count();
    println!("{pure} pure modules, {} forbidden edges", bad.len());
    let bad: Vec<String> = bad
        .into_iter()
        .map(|(e, at)| format!("{e}  ({at})"))
        .collect();
    assert!(
        bad.is_empty(),
        "forbidden imports in core/src:\n{}",
        bad.join("\n")
    );
    assert!(pure >= 12, "only {pure} pure modules found");
}

/// The checker itself: re-exports resolve to the defining module, test modules drop
/// out, and a cycle is found.
#[test]
fn checker_resolves_reexports_and_finds_cycles() {
    let mut k = Crate::default();
    for m in [
        vec![],
        vec!["a".to_string()],
        vec!["a".into(), "inner".into()],
        vec!["b".into()],
    ] {
        k.mods.insert(m);
    }
    parse_file(
        &mut k,
        &vec![],
        "lib.rs",
        "pub mod a; pub mod b; pub use a::inner::Thing;",
    );
    parse_file(
        &mut k,
        &vec!["a".into()],
        "a/mod.rs",
        "mod inner; pub use self::inner::*;",
    );
    parse_file(
        &mut k,
        &vec!["a".into(), "inner".into()],
        "a/inner.rs",
        "pub struct Thing; fn f() -> crate::b::Other { todo!() }\n\
         #[cfg(test)] mod tests { use crate::b::Never; }",
    );
    parse_file(
        &mut k,
        &vec!["b".into()],
        "b.rs",
        "// crate::a::Comment\nlet s = \"crate::a::Str\"; pub struct Other(crate::Thing);",
    );
    let edges = k.edges();
    let to = |m: &[&str]| -> Vec<String> {
        let m: Mod = m.iter().map(|s| (*s).to_string()).collect();
        edges[&m].keys().map(name).collect()
    };
    assert_eq!(to(&["b"]), vec!["a::inner"]);
    assert_eq!(to(&["a", "inner"]), vec!["b"]);
    let big: Vec<Vec<Mod>> = sccs(&edges).into_iter().filter(|c| c.len() > 1).collect();
    assert_eq!(big.len(), 1);
    assert!(cycle(&edges, &big[0]).contains("b -> a::inner  (b.rs:2 `crate::Thing`)"));
}
