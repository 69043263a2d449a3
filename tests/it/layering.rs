//! The crate's modules form layers: no import cycle among the top-level
//! modules, none among the files of any one directory; and the model, a
//! crate of its own, depends on no runtime, metrics library or client.
//!
//! Read from the source text rather than from the compiler, so a new cycle
//! fails here with the path that closes it (and the lines that name each
//! step) instead of surfacing as a tangle someone has to untie later.
//! Only the library is checked: `src/main.rs` and `src/bin/` are separate
//! crates on top of it.

// A failed unwrap is a failed test, with the value in the message.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::Path;

/// Edges that close a cycle today and cannot be removed from this side.
/// Each names the importing module, the imported one, and why; the test
/// fails when an exception is no longer needed, so none outlives its reason.
const KNOWN_EXCEPTIONS: &[(&str, &str, &str)] = &[];

/// A module path: `["sources", "http"]` for `crate::sources::http`; empty for
/// the crate root.
type ModPath = Vec<String>;

struct SourceFile {
    /// Relative to `src/`, for messages.
    rel: String,
    module: ModPath,
    text: String,
}

/// One mention of a module from a file: where, and the path as written.
#[derive(Clone, Debug)]
struct Reference {
    file: String,
    from: ModPath,
    to: ModPath,
    written: String,
}

#[test]
fn no_module_imports_form_a_cycle() {
    let files = library_files(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"));
    assert!(
        files.len() > 20,
        "read only {} files under src/; is the walk broken?",
        files.len()
    );
    let references = references(&files);
    assert!(
        references.iter().any(|r| r.from.first() != r.to.first()),
        "no reference between top-level modules found; is the parser broken?"
    );

    let mut used = vec![false; KNOWN_EXCEPTIONS.len()];
    let kept: Vec<Reference> = references
        .into_iter()
        .filter(|r| match exception_for(r) {
            Some(i) => {
                used[i] = true;
                false
            }
            None => true,
        })
        .collect();

    let mut report = String::new();
    for (dir, edges) in edges_by_directory(&kept) {
        for cycle in cycles(&edges) {
            let place = if dir.is_empty() {
                "top-level modules".to_string()
            } else {
                format!("files of {}", dir.join("::"))
            };
            let qualify = |name: &str| {
                let mut path = dir.clone();
                path.push(name.to_string());
                path.join("::")
            };
            let names: Vec<String> = cycle.iter().map(|n| qualify(n)).collect();
            let _ = writeln!(report, "cycle among the {place}: {}", names.join(" -> "));
            for pair in cycle.windows(2) {
                let evidence = &edges[&(pair[0].clone(), pair[1].clone())];
                for r in evidence.iter().take(3) {
                    let _ = writeln!(report, "    src/{} names {}", r.file, r.written);
                }
            }
        }
    }
    assert!(report.is_empty(), "\n{report}");

    for ((from, to, why), used) in KNOWN_EXCEPTIONS.iter().zip(used) {
        assert!(
            used,
            "the exception {from} -> {to} is no longer needed (nothing under {from} names \
             {to}); delete it from KNOWN_EXCEPTIONS. It was there because: {why}"
        );
    }
}

/// The model is a crate of its own (`crates/hcp-flow-model`), so Cargo keeps
/// it from naming the metrics library, the runtime or an upstream's client
/// unless its manifest lists them: that manifest is what this checks
/// (docs/design/01-overview.md §1.3).
#[test]
fn the_model_crate_depends_on_no_runtime_metrics_library_or_client() {
    let manifest = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("crates/hcp-flow-model/Cargo.toml"),
    )
    .unwrap();
    let dependencies: Vec<&str> = manifest
        .split("[dependencies]")
        .nth(1)
        .unwrap()
        .split("\n[")
        .next()
        .unwrap()
        .lines()
        .filter_map(|l| l.split_once('=').map(|(name, _)| name.trim()))
        .filter(|name| !name.is_empty() && !name.starts_with('#'))
        .collect();
    assert!(dependencies.contains(&"jiff"), "{dependencies:?}");
    for forbidden in [
        "tokio",
        "prometheus-client",
        "reqwest",
        "kube",
        "axum",
        "tonic",
        "hcp-flow",
    ] {
        assert!(
            !dependencies.contains(&forbidden),
            "the model crate depends on {forbidden}: {dependencies:?}"
        );
    }
    // And the exporter's library is built on it, not beside a copy of it.
    let lib =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("src/lib.rs")).unwrap();
    assert!(lib.contains("pub use hcp_flow_model as model;"));
    assert!(
        !Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("src/model")
            .exists()
    );
}

/// The simulated world is written from the upstreams' conventions, not from
/// the exporter's reading of them: it is a crate of its own
/// (`crates/hcp-flow-sim`) whose manifest names the model (the hops and
/// budgets the ground truth is stated in), the clock and no crate of the
/// exporter, so
/// Cargo keeps it from naming the sources, the exporter's configuration or
/// anything built on them, and a wire shape or a layout the world serves is
/// never the code that parses it (docs/design/01-overview.md §1.3). The
/// exporter takes it only behind its `sim` feature, as the demo and the
/// bench; the shipped binary is built without it.
#[test]
fn the_simulated_world_is_a_crate_that_depends_on_no_exporter_code() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let dependencies = manifest_dependencies(&root.join("crates/hcp-flow-sim/Cargo.toml"));
    assert!(
        dependencies.contains(&"hcp-flow-model".to_string()),
        "{dependencies:?}"
    );
    let workspace_crates: Vec<&str> = dependencies
        .iter()
        .map(String::as_str)
        .filter(|d| d.starts_with("hcp-flow"))
        .collect();
    assert_eq!(
        workspace_crates,
        ["hcp-flow-clock", "hcp-flow-model"],
        "the world depends on the clock and the model and nothing else of hcp-flow"
    );
    for forbidden in ["reqwest", "kube", "prometheus-client", "opentelemetry"] {
        assert!(
            !dependencies.contains(&forbidden.to_string()),
            "the world depends on {forbidden}, a client of the exporter's: {dependencies:?}"
        );
    }
    let exporter = std::fs::read_to_string(root.join("Cargo.toml")).unwrap();
    assert!(
        exporter.contains("sim = [\"dep:hcp-flow-sim\"]"),
        "the exporter takes the world only behind its `sim` feature"
    );
    assert!(
        !root.join("src/sim").exists(),
        "a copy of the world in src/"
    );
}

/// The names of a manifest's `[dependencies]`.
fn manifest_dependencies(manifest: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(manifest).unwrap();
    text.split("[dependencies]")
        .nth(1)
        .unwrap()
        .split("\n[")
        .next()
        .unwrap()
        .lines()
        .filter_map(|l| l.split_once('=').map(|(name, _)| name.trim().to_string()))
        .filter(|name| !name.is_empty() && !name.starts_with('#'))
        .collect()
}

/// The checker itself: a planted cycle is found, and paths in comments and
/// string literals are not references.
#[test]
fn the_checker_finds_a_planted_cycle_and_ignores_comments_and_strings() {
    let file = |rel: &str, text: &str| SourceFile {
        rel: rel.to_string(),
        module: module_of(rel).unwrap(),
        text: text.to_string(),
    };
    let files = vec![
        file("lib.rs", "pub mod a;\npub mod b;\npub mod c;\n"),
        file("a/mod.rs", "mod x;\nmod y;\nuse crate::b::{self, Thing};\n"),
        file(
            "a/x.rs",
            "use super::{y::Y, super::c};\n/// See [`crate::b`] and super::z.\n",
        ),
        file(
            "a/y.rs",
            "pub struct Y;\nfn f() { let _ = super::x::g(); }\n",
        ),
        file(
            "b.rs",
            "// crate::a would close a cycle, but this is a comment\n\
             const S: &str = \"crate::a::x\";\nconst C: char = '\"';\n\
             fn f<'a>(_: &'a str) { crate::c::run(); }\n",
        ),
        file("c.rs", "pub fn run() { crate::a::x::g(); }\n"),
    ];
    let references = references(&files);
    let by_dir = edges_by_directory(&references);

    let top = &by_dir[&Vec::new()];
    let top_cycles = cycles(top);
    assert_eq!(top_cycles.len(), 1, "{top_cycles:?}");
    let mut members = top_cycles[0].clone();
    members.pop();
    members.sort();
    assert_eq!(members, ["a", "b", "c"]);

    let in_a = &by_dir[&vec!["a".to_string()]];
    assert_eq!(cycles(in_a), vec![vec!["x", "y", "x"]]);
    assert!(
        !references
            .iter()
            .any(|r| r.from == ["b"] && r.to.first().is_some_and(|m| m == "a")),
        "a comment or string counted as a reference: {references:?}"
    );
}

/// Every file of the library with its module path.
fn library_files(src: &Path) -> Vec<SourceFile> {
    let mut out = Vec::new();
    let mut dirs = vec![src.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let rel = path
                .strip_prefix(src)
                .unwrap()
                .to_string_lossy()
                .replace('\\', "/");
            if path.is_dir() {
                if rel != "bin" {
                    dirs.push(path);
                }
            } else if let Some(module) = module_of(&rel) {
                let text = std::fs::read_to_string(&path).unwrap();
                out.push(SourceFile { rel, module, text });
            }
        }
    }
    out.sort_by(|a, b| a.rel.cmp(&b.rel));
    out
}

/// `a/b.rs` and `a/b/mod.rs` are `a::b`, `lib.rs` the crate root; `main.rs`
/// and non-Rust files are not part of the library.
fn module_of(rel: &str) -> Option<ModPath> {
    let stem = rel.strip_suffix(".rs")?;
    if stem == "main" {
        return None;
    }
    if stem == "lib" {
        return Some(Vec::new());
    }
    let mut parts: ModPath = stem.split('/').map(str::to_string).collect();
    if parts.last().is_some_and(|p| p == "mod") {
        parts.pop();
    }
    Some(parts)
}

/// Every `crate::`, `super::` and `self::` path in the files' code, resolved
/// to the longest module it names.
fn references(files: &[SourceFile]) -> Vec<Reference> {
    let modules: BTreeSet<ModPath> = files.iter().map(|f| f.module.clone()).collect();
    let mut out = Vec::new();
    for file in files {
        let tokens = tokens(&strip_comments_and_literals(&file.text));
        for (scope, written) in paths(&tokens) {
            let mut current = file.module.clone();
            current.extend(scope);
            if let Some(to) = resolve(&written, &current, &modules) {
                out.push(Reference {
                    file: file.rel.clone(),
                    from: file.module.clone(),
                    to,
                    written: written.join("::"),
                });
            }
        }
    }
    out
}

fn exception_for(r: &Reference) -> Option<usize> {
    let under = |path: &ModPath, prefix: &str| {
        let prefix: Vec<&str> = prefix.split("::").collect();
        path.len() >= prefix.len() && path.iter().zip(&prefix).all(|(a, b)| a == b)
    };
    KNOWN_EXCEPTIONS
        .iter()
        .position(|(from, to, _)| under(&r.from, from) && under(&r.to, to))
}

/// Edge (a, b) within a directory, with the references that make it.
type Edges = BTreeMap<(String, String), Vec<Reference>>;

/// For each directory (module path), the edges among its children: `a -> b`
/// when anything under `dir::a` names anything under `dir::b`. A child
/// naming its parent (or an ancestor) is not an edge.
fn edges_by_directory(references: &[Reference]) -> BTreeMap<ModPath, Edges> {
    let mut out: BTreeMap<ModPath, Edges> = BTreeMap::new();
    for r in references {
        for depth in 0..r.from.len() {
            let dir = &r.from[..depth];
            if r.to.len() > depth && r.to[..depth] == *dir && r.to[depth] != r.from[depth] {
                out.entry(dir.to_vec())
                    .or_default()
                    .entry((r.from[depth].clone(), r.to[depth].clone()))
                    .or_default()
                    .push(r.clone());
            }
        }
    }
    out
}

/// One cycle per strongly connected component that has one, as a closed
/// walk (`a -> b -> a`), found by depth-first search.
fn cycles(edges: &Edges) -> Vec<Vec<String>> {
    let mut next: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (a, b) in edges.keys() {
        next.entry(a).or_default().push(b);
    }
    let mut found: Vec<Vec<String>> = Vec::new();
    let mut done: BTreeSet<&str> = BTreeSet::new();
    for &start in next.keys() {
        let mut stack: Vec<&str> = Vec::new();
        dfs(start, &next, &mut stack, &mut done, &mut found);
    }
    found
}

fn dfs<'a>(
    node: &'a str,
    next: &BTreeMap<&'a str, Vec<&'a str>>,
    stack: &mut Vec<&'a str>,
    done: &mut BTreeSet<&'a str>,
    found: &mut Vec<Vec<String>>,
) {
    if done.contains(node) {
        return;
    }
    if let Some(at) = stack.iter().position(|n| *n == node) {
        let mut cycle: Vec<String> = stack[at..].iter().map(|n| n.to_string()).collect();
        cycle.push(node.to_string());
        let mut members: Vec<&String> = cycle[..cycle.len() - 1].iter().collect();
        members.sort();
        // One report per set of modules, however many walks close it.
        let seen = found.iter().any(|c| {
            let mut other: Vec<&String> = c[..c.len() - 1].iter().collect();
            other.sort();
            other == members
        });
        if !seen {
            found.push(cycle);
        }
        return;
    }
    stack.push(node);
    for &n in next.get(node).into_iter().flatten() {
        dfs(n, next, stack, done, found);
    }
    stack.pop();
    done.insert(node);
}

/// The module a written path names: `crate::` from the root, `super::` and
/// `self::` from `current`; the longest prefix that is a module.
fn resolve(written: &[String], current: &[String], modules: &BTreeSet<ModPath>) -> Option<ModPath> {
    let mut words = written.iter().peekable();
    let mut path: ModPath = Vec::new();
    if words.peek().is_some_and(|w| *w == "crate") {
        words.next();
    } else {
        path = current.to_vec();
        while let Some(w) = words.peek() {
            match w.as_str() {
                "super" => {
                    path.pop()?;
                }
                "self" => {}
                _ => break,
            }
            words.next();
        }
    }
    path.extend(words.filter(|w| *w != "self" && *w != "*").cloned());
    (0..=path.len())
        .rev()
        .map(|n| path[..n].to_vec())
        .find(|p| modules.contains(p))
}

/// Comments become a space and literals an empty literal, so neither is
/// read as code. Lifetimes stay apart from character literals.
fn strip_comments_and_literals(text: &str) -> String {
    let c: Vec<char> = text.chars().collect();
    let at = |i: usize| c.get(i).copied().unwrap_or('\0');
    let is_ident = |ch: char| ch.is_alphanumeric() || ch == '_';
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < c.len() {
        if at(i) == '/' && at(i + 1) == '/' {
            while i < c.len() && at(i) != '\n' {
                i += 1;
            }
        } else if at(i) == '/' && at(i + 1) == '*' {
            let mut depth = 0;
            while i < c.len() {
                if at(i) == '/' && at(i + 1) == '*' {
                    depth += 1;
                    i += 2;
                } else if at(i) == '*' && at(i + 1) == '/' {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
            out.push(' ');
        } else if (at(i) == 'r' || (at(i) == 'b' && at(i + 1) == 'r'))
            && (i == 0 || !is_ident(at(i - 1)))
            && raw_string_hashes(&c, i + if at(i) == 'b' { 2 } else { 1 }).is_some()
        {
            let start = i + if at(i) == 'b' { 2 } else { 1 };
            let hashes = raw_string_hashes(&c, start).unwrap_or(0);
            i = start + hashes + 1;
            while i < c.len() && !(at(i) == '"' && (1..=hashes).all(|k| at(i + k) == '#')) {
                i += 1;
            }
            i += hashes + 1;
            out.push_str("\"\"");
        } else if at(i) == '"' {
            i += 1;
            while i < c.len() && at(i) != '"' {
                i += if at(i) == '\\' { 2 } else { 1 };
            }
            i += 1;
            out.push_str("\"\"");
        } else if at(i) == '\'' && at(i + 1) == '\\' {
            i += 3;
            while i < c.len() && at(i) != '\'' {
                i += 1;
            }
            i += 1;
            out.push_str("' '");
        } else if at(i) == '\'' && at(i + 2) == '\'' {
            i += 3;
            out.push_str("' '");
        } else {
            out.push(at(i));
            i += 1;
        }
    }
    out
}

/// The number of `#` of a raw string opening at `start` (`#*"`), if one does.
fn raw_string_hashes(c: &[char], start: usize) -> Option<usize> {
    let hashes = c[start.min(c.len())..]
        .iter()
        .take_while(|ch| **ch == '#')
        .count();
    (c.get(start + hashes) == Some(&'"')).then_some(hashes)
}

/// Identifiers, `::` and the punctuation paths and blocks are made of; any
/// other character is a token of its own so that it ends a path.
fn tokens(code: &str) -> Vec<String> {
    let c: Vec<char> = code.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < c.len() {
        let ch = c[i];
        if ch.is_alphabetic() || ch == '_' {
            let start = i;
            while i < c.len() && (c[i].is_alphanumeric() || c[i] == '_') {
                i += 1;
            }
            out.push(c[start..i].iter().collect());
        } else if ch == ':' && c.get(i + 1) == Some(&':') {
            out.push("::".to_string());
            i += 2;
        } else if ch.is_whitespace() {
            i += 1;
        } else {
            out.push(ch.to_string());
            i += 1;
        }
    }
    out
}

fn is_word(token: &str) -> bool {
    token
        .chars()
        .next()
        .is_some_and(|c| c.is_alphabetic() || c == '_')
}

/// Every path that starts with `crate`, `super` or `self`, with `use`
/// groups expanded (`crate::a::{b, c::D}` is `crate::a::b` and
/// `crate::a::c::D`), each with the inline modules (`mod tests { … }`) it
/// sits in, which `super` and `self` are relative to.
fn paths(tokens: &[String]) -> Vec<(Vec<String>, Vec<String>)> {
    let mut out = Vec::new();
    let mut inline: Vec<(String, usize)> = Vec::new();
    let mut depth = 0usize;
    let mut i = 0;
    while i < tokens.len() {
        let t = tokens[i].as_str();
        match t {
            "mod" if tokens.get(i + 2).is_some_and(|n| n == "{") => {
                inline.push((tokens[i + 1].clone(), depth));
            }
            "{" => depth += 1,
            "}" => {
                depth = depth.saturating_sub(1);
                if inline.last().is_some_and(|(_, d)| *d == depth) {
                    inline.pop();
                }
            }
            _ => {}
        }
        let starts_path = matches!(t, "crate" | "super" | "self")
            && tokens.get(i + 1).is_some_and(|n| n == "::")
            && (i == 0 || tokens[i - 1] != "::");
        if starts_path {
            let scope: Vec<String> = inline.iter().map(|(name, _)| name.clone()).collect();
            let mut found = Vec::new();
            i = use_tree(tokens, i, Vec::new(), &mut found);
            out.extend(found.into_iter().map(|p| (scope.clone(), p)));
        } else {
            i += 1;
        }
    }
    out
}

/// Reads one path or `use` tree from `i`; returns where it ends. A group's
/// braces are consumed here, so they never count as blocks.
fn use_tree(
    tokens: &[String],
    mut i: usize,
    mut prefix: Vec<String>,
    out: &mut Vec<Vec<String>>,
) -> usize {
    loop {
        match tokens.get(i).map(String::as_str) {
            Some("{") => {
                i += 1;
                loop {
                    match tokens.get(i).map(String::as_str) {
                        None => return i,
                        Some("}") => return i + 1,
                        Some(_) => {}
                    }
                    i = use_tree(tokens, i, prefix.clone(), out);
                    match tokens.get(i).map(String::as_str) {
                        Some(",") => i += 1,
                        Some("}") => {}
                        // Not a group this reader understands: stop here
                        // rather than read code as a path.
                        _ => return i,
                    }
                }
            }
            Some("*") => {
                out.push(prefix);
                return i + 1;
            }
            Some(word) if is_word(word) => {
                prefix.push(word.to_string());
                i += 1;
                if tokens.get(i).is_some_and(|t| t == "::") {
                    i += 1;
                    continue;
                }
                if tokens.get(i).is_some_and(|t| t == "as") {
                    i += 2;
                }
                out.push(prefix);
                return i;
            }
            _ => {
                if !prefix.is_empty() {
                    out.push(prefix);
                }
                return i;
            }
        }
    }
}
