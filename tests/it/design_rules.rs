//! Rules of the design that a reader can check with grep, checked here so they
//! stay true (docs/design/01-overview.md §1.3):
//! - no source, view or model code reads the wall clock: sources stamp what
//!   they read with their context's clock, and phases that change with time
//!   are the model's, from its injected clock;
//! - the model settles time-driven phases from a deadline queue: no code path
//!   of `Fleet` walks every timeline except the read-only `iter()` accessor;
//! - comments cite the project's own docs, never a document outside the
//!   repository or an issue number;
//! - Maestro's gRPC messages are generated from Maestro's own proto, and the
//!   simulated Maestro takes its own copy of them, not the source's.

use std::path::{Path, PathBuf};

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

fn files_under(dirs: &[&str]) -> Vec<(PathBuf, String)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut paths = Vec::new();
    for dir in dirs {
        rust_files(&root.join(dir), &mut paths);
    }
    paths.sort();
    assert!(!paths.is_empty(), "no Rust files under {dirs:?}");
    paths
        .into_iter()
        .map(|p| {
            let text = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{p:?}: {e}"));
            (p, text)
        })
        .collect()
}

/// The code part of a line (what precedes a `//` comment).
fn code_of(line: &str) -> &str {
    line.split("//").next().unwrap_or("")
}

#[test]
fn no_source_view_or_model_reads_the_wall_clock() {
    let mut hits = Vec::new();
    for (path, text) in files_under(&["src/sources", "src/views", "crates/hcp-flow-model/src"]) {
        for (n, line) in text.lines().enumerate() {
            let code = code_of(line);
            if code.contains("Timestamp::now()") || code.contains("SystemTime::now()") {
                hits.push(format!("{}:{}: {}", path.display(), n + 1, line.trim()));
            }
        }
    }
    assert!(
        hits.is_empty(),
        "use the context's clock instead:\n{}",
        hits.join("\n")
    );
}

#[test]
fn the_fleet_never_walks_every_timeline_on_the_way_of_an_event() {
    // Every file of the fleet store (crates/hcp-flow-model/src/fleet/): a walk moved into a
    // helper beside `Fleet` counts as much as one in its methods.
    let files: Vec<(std::path::PathBuf, String)> =
        files_under(&["crates/hcp-flow-model/src/fleet"]);
    assert!(
        !files.is_empty(),
        "crates/hcp-flow-model/src/fleet/ is missing"
    );
    let mut walks: Vec<(&std::path::PathBuf, &str, usize, &str)> = Vec::new();
    for (path, text) in &files {
        for (n, l) in text.lines().enumerate() {
            let code = code_of(l);
            if [
                "self.clusters.values",
                "self.clusters.iter",
                "self.clusters.keys",
            ]
            .iter()
            .any(|w| code.contains(w))
            {
                walks.push((path, text.as_str(), n, l));
            }
        }
    }
    // The only walk is the read-only accessor the store renders from.
    let found: Vec<String> = walks
        .iter()
        .map(|(p, _, n, l)| format!("{}:{}: {}", p.display(), n + 1, l.trim()))
        .collect();
    assert_eq!(walks.len(), 1, "{found:?}");
    let (_, text, line, _) = walks[0];
    let before: Vec<&str> = text.lines().take(line).collect();
    let accessor = before
        .iter()
        .rev()
        .find(|l| l.contains("fn "))
        .copied()
        .unwrap_or("");
    assert!(
        accessor.contains("pub fn iter(&self)"),
        "a walk over every timeline outside `iter()`: {found:?}"
    );
}

/// Both sides of Maestro's stream take their messages from the verbatim
/// upstream proto that build.rs compiles, each into a module of its own: no
/// hand-written message in the source or the simulator, and no simulator
/// code that borrows the source's wire module (docs/design/10-upstream-facts.md §10.12).
#[test]
fn maestro_wire_types_come_from_the_upstream_proto_on_each_side() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let proto = root.join("proto/io/cloudevents/v1/cloudevent.proto");
    let text = std::fs::read_to_string(&proto).unwrap_or_else(|e| panic!("{proto:?}: {e}"));
    assert!(
        text.contains("service CloudEventService"),
        "{proto:?} is not Maestro's CloudEvent service"
    );
    for build in ["build.rs", "crates/hcp-flow-sim/build.rs"] {
        let text = std::fs::read_to_string(root.join(build)).unwrap_or_default();
        assert!(
            text.contains("proto/io/cloudevents/v1/cloudevent.proto"),
            "{build} does not compile the upstream proto"
        );
    }
    let mut hits = Vec::new();
    for (path, text) in files_under(&["src/sources/maestro", "crates/hcp-flow-sim/src"]) {
        for (n, line) in text.lines().enumerate() {
            let code = code_of(line);
            if code.contains("prost::Message") || code.contains("prost::Oneof") {
                hits.push(format!(
                    "{}:{}: a hand-written message: {}",
                    path.display(),
                    n + 1,
                    line.trim()
                ));
            }
            if path.starts_with(root.join("crates/hcp-flow-sim"))
                && code.contains("sources::maestro::proto")
            {
                hits.push(format!(
                    "{}:{}: the simulator uses the source's wire types: {}",
                    path.display(),
                    n + 1,
                    line.trim()
                ));
            }
        }
    }
    for side in [
        "src/sources/maestro/proto.rs",
        "crates/hcp-flow-sim/src/server/maestro_grpc.rs",
    ] {
        let text = std::fs::read_to_string(root.join(side)).unwrap_or_default();
        if !text.contains("/io.cloudevents.v1.rs\"))") {
            hits.push(format!("{side}: does not include the generated messages"));
        }
    }
    assert!(hits.is_empty(), "{}", hits.join("\n"));
}

#[test]
fn comments_cite_the_projects_own_docs_only() {
    let mut hits = Vec::new();
    for (path, text) in files_under(&["src", "crates", "tests"]) {
        if path.ends_with("design_rules.rs") {
            continue;
        }
        for (n, line) in text.lines().enumerate() {
            let Some(at) = line.find("//") else {
                continue;
            };
            let comment = &line[at..];
            if cites_outside(comment) {
                hits.push(format!("{}:{}: {}", path.display(), n + 1, line.trim()));
            }
        }
    }
    assert!(
        hits.is_empty(),
        "cite docs/design/README.md (or another page under docs/) instead:\n{}",
        hits.join("\n")
    );
}

/// `DESIGN section 2`, `DESIGN §2`, `DESIGN.md`, `FACTS 5`, `issue 3`.
fn cites_outside(comment: &str) -> bool {
    let words: Vec<&str> = comment
        .split(|c: char| c.is_whitespace() || c == '(' || c == ')' || c == ',')
        .filter(|w| !w.is_empty())
        .collect();
    let numbered = |w: &str| {
        w.trim_start_matches('§')
            .trim_end_matches([':', '.', ';'])
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_digit())
    };
    words.windows(2).any(|pair| {
        let (a, b) = (pair[0], pair[1]);
        (a == "DESIGN" && (b == "section" || b.starts_with('§') || numbered(b)))
            || (a == "FACTS" && numbered(b))
            || (a.eq_ignore_ascii_case("issue") && (numbered(b) || b.starts_with('#')))
    }) || words
        .iter()
        .any(|w| w.starts_with("DESIGN.md") || w.starts_with("DESIGN§"))
}

#[test]
fn the_citation_check_catches_what_it_should() {
    for bad in [
        "// (DESIGN section 2)",
        "// see DESIGN §3",
        "/// wire shapes in reference FACTS 5 and 6",
        "// as issue 3 asked",
        "// see DESIGN.md",
    ] {
        assert!(cites_outside(bad), "{bad}");
    }
    for good in [
        "// docs/design/03-timeline-model.md §3.4",
        "// the design (docs/design/README.md) says",
        "// an issue with the upstream",
        "// FACTS are in docs",
    ] {
        assert!(!cites_outside(good), "{good}");
    }
}

/// `.ci/test` runs the latency tests in a pass of their own, named in
/// `.ci/latency-tests`; a test that takes a heavy share of the machine is one
/// (docs/development.md). A new one missing from the list would run beside
/// the benches in CI, and a listed module that no longer takes a heavy
/// share would hold up the second pass for nothing.
#[test]
fn the_latency_pass_lists_exactly_the_modules_that_take_a_heavy_share() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let listed_text = std::fs::read_to_string(root.join(".ci/latency-tests")).unwrap();
    let listed: std::collections::BTreeSet<String> = listed_text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(String::from)
        .collect();
    let heavy: std::collections::BTreeSet<String> = files_under(&["tests/it"])
        .into_iter()
        .filter(|(path, _)| !path.components().any(|c| c.as_os_str() == "common"))
        .filter(|(_, text)| {
            text.lines()
                .any(|l| code_of(l).contains(concat!("load::", "heavy()")))
        })
        .filter_map(|(path, _)| Some(path.file_stem()?.to_str()?.to_string()))
        .collect();
    assert!(!heavy.is_empty(), "no test takes a heavy share");
    assert_eq!(
        listed, heavy,
        ".ci/latency-tests (left) must name every tests/it module that takes a heavy share (right)"
    );
}

/// Every `cargo test` command the README and docs/ show names what exists:
/// a `--test` target of this crate (the integration tests are one crate,
/// `it`), and, after `--test it`, a module of tests/it (its first filter
/// word, or the module of a `module::test` path). A command a reader copies
/// must run tests, not match nothing.
#[test]
fn every_documented_cargo_test_command_names_a_target_that_exists() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let docs = markdown_files(root);
    let targets = |name: &str| {
        root.join("tests").join(format!("{name}.rs")).is_file()
            || root.join("tests").join(name).join("main.rs").is_file()
    };
    let module = |name: &str| root.join("tests/it").join(format!("{name}.rs")).is_file();
    let mut commands = 0;
    let mut wrong = Vec::new();
    for (doc, text) in &docs {
        for line in text.lines() {
            let Some(at) = line.find("cargo test") else {
                continue;
            };
            let command = line[at..].split('`').next().unwrap_or_default();
            let words: Vec<&str> = command.split_whitespace().collect();
            let Some(i) = words.iter().position(|w| *w == "--test") else {
                continue;
            };
            commands += 1;
            let Some(target) = words.get(i + 1) else {
                wrong.push(format!("{}: `{command}` names no target", doc.display()));
                continue;
            };
            if !targets(target) {
                wrong.push(format!(
                    "{}: `{command}`: no test target {target}",
                    doc.display()
                ));
                continue;
            }
            // The filter: the first word after the target that is not a
            // flag (before or after `--`), up to its first `::`.
            let mut rest = words[i + 2..].iter().take_while(|w| !w.starts_with('#'));
            let mut filter = None;
            while let Some(w) = rest.next() {
                if *w == "-Z" {
                    // Its value is not a filter.
                    rest.next();
                } else if !w.starts_with('-') && !w.contains('=') {
                    filter = Some(*w);
                    break;
                }
            }
            if *target == "it"
                && let Some(filter) = filter
            {
                let name = filter.split("::").next().unwrap_or_default();
                if !module(name) {
                    wrong.push(format!(
                        "{}: `{command}`: tests/it has no module {name}",
                        doc.display()
                    ));
                }
            }
        }
    }
    assert!(commands >= 6, "only {commands} documented commands found");
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// The design is a book of short pages (docs/design/README.md): each page
/// at most 400 lines, its sections in number order and every section of
/// the index's contents on the page the index names; a comment or doc that
/// cites `docs/design/<page> §N.M` names the page that holds §N.M.
#[test]
fn design_pages_are_short_in_order_and_cited_where_their_sections_are() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let dir = root.join("docs/design");
    let mut holder: std::collections::BTreeMap<String, String> = Default::default();
    let mut last: Option<(u32, u32)> = None;
    let mut pages: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".md") && n != "README.md")
        .collect();
    pages.sort();
    assert!(pages.len() >= 15, "{pages:?}");
    for page in &pages {
        let text = std::fs::read_to_string(dir.join(page)).unwrap();
        let lines = text.lines().count();
        assert!(lines <= 400, "{page}: {lines} lines");
        for line in text.lines() {
            // The chapter's own page: its title without "(continued)".
            if let Some(title) = line.strip_prefix("# ") {
                if let Some((ch, _)) = title.split_once(". ")
                    && ch.parse::<u32>().is_ok()
                    && !title.ends_with("(continued)")
                {
                    holder.insert(ch.to_string(), page.clone());
                }
                continue;
            }
            let Some(rest) = line.strip_prefix("## ") else {
                continue;
            };
            let number = rest.split_whitespace().next().unwrap_or_default();
            let Some((ch, sub)) = number.split_once('.') else {
                continue;
            };
            let (Ok(ch), Ok(sub)) = (ch.parse::<u32>(), sub.parse::<u32>()) else {
                continue;
            };
            assert!(
                last.is_none_or(|l| l < (ch, sub)),
                "{page}: §{ch}.{sub} after §{:?}",
                last
            );
            last = Some((ch, sub));
            holder.insert(format!("{ch}.{sub}"), page.clone());
        }
    }
    let mut wrong = Vec::new();
    let mut cited = 0;
    let mut files = files_under(&["src", "tests"]);
    files.extend(markdown_files(root));
    for (path, text) in &files {
        let flat = text.replace("\n", " ");
        for (at, _) in flat.match_indices("design/") {
            let rest = &flat[at + "design/".len()..];
            let Some(page) = rest.split(['`', ' ', ')', '#']).next() else {
                continue;
            };
            if !page.ends_with(".md") || page == "README.md" {
                continue;
            }
            let after = rest[page.len()..].trim_start_matches(['`', ' ', '/', '!', '*']);
            let Some(section) = after.strip_prefix('§') else {
                continue;
            };
            let section: String = section
                .chars()
                .take_while(|c| c.is_ascii_digit() || *c == '.')
                .collect();
            let section = section.trim_end_matches('.');
            cited += 1;
            if holder.get(section) != Some(&page.to_string()) {
                wrong.push(format!(
                    "{}: {page} §{section} (held by {:?})",
                    path.display(),
                    holder.get(section)
                ));
            }
        }
    }
    assert!(cited > 300, "only {cited} citations found");
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// The README and every Markdown page under docs/, with their text: what a
/// reader reads, and so what the documentation rules check.
fn markdown_files(root: &Path) -> Vec<(std::path::PathBuf, String)> {
    let mut found = Vec::new();
    let mut stack = vec![root.join("README.md"), root.join("docs")];
    while let Some(path) = stack.pop() {
        if path.is_dir() {
            let entries = std::fs::read_dir(&path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
            stack.extend(entries.flatten().map(|e| e.path()));
        } else if path.extension().is_some_and(|e| e == "md") {
            let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
            found.push((path, text));
        }
    }
    found
}
