//! The layer check: a crate's top-level modules import only modules at or
//! below their own layer.
//!
//! The order lives in the crate root's doc comment, as a `text` block headed
//! `Layers, top to bottom:` with one line per layer and the modules of a layer
//! separated by spaces, so the documentation and the check cannot drift apart:
//!
//! ```text
//! //! Layers, top to bottom:
//! //!
//! //! ```text
//! //! sync
//! //! plan
//! //! camel_k api
//! //! ```
//! ```
//!
//! A module may use modules of lower layers and, without a cycle, modules of
//! its own layer. No modules may import each other in a circle of any length
//! (`a` → `b` → `c` → `a`), whatever their layers: one such circle is named
//! for every module on one. Every top-level module must be placed; the crate root and
//! `src/bin/` are above every layer. References are read from `crate::` paths
//! (`use crate::a::b`, `use crate::{a, b::c}`, inline `crate::a::f()`) outside
//! comments; that is how this workspace imports across modules. A file's
//! unit-test module (`#[cfg(test)] mod ...`, last in the file by convention)
//! is not read: a test may build its fixture with a higher layer.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

/// One import that breaks the order, or a module the order does not place.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Violation {
    /// `file` (in module `from`) imports `to`, which sits in a higher layer.
    Upward {
        file: PathBuf,
        line: usize,
        from: String,
        to: String,
    },
    /// Modules that import each other in a circle: `modules[i]` imports
    /// `modules[i + 1]`, at `imports[i]` (file and line), and the last imports
    /// the first. Starts at the smallest name, so each circle has one form.
    Cycle {
        modules: Vec<String>,
        imports: Vec<(PathBuf, usize)>,
    },
    /// A top-level module that no layer names.
    Unplaced { module: String },
}

impl std::fmt::Display for Violation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Violation::Upward {
                file,
                line,
                from,
                to,
            } => write!(
                f,
                "{}:{line}: `{from}` imports `{to}`, a higher layer",
                file.display()
            ),
            Violation::Cycle { modules, imports } => {
                let circle: Vec<String> = modules
                    .iter()
                    .chain(modules.first())
                    .map(|m| format!("`{m}`"))
                    .collect();
                let sites: Vec<String> = imports
                    .iter()
                    .map(|(file, line)| format!("{}:{line}", file.display()))
                    .collect();
                write!(
                    f,
                    "{} import each other in a circle ({})",
                    circle.join(" → "),
                    sites.join(", ")
                )
            }
            Violation::Unplaced { module } => write!(
                f,
                "module `{module}` is in no layer: add it to the `Layers, top to bottom:` block"
            ),
        }
    }
}

/// Asserts that the modules of the crate at `crate_dir` keep the layer order
/// its root file `root` (`lib.rs`, `main.rs`) documents: one call is the
/// whole test of a crate.
pub fn assert_layers_kept(crate_dir: &Path, root: &str) {
    let src = crate_dir.join("src");
    let layers =
        declared_layers(&src.join(root)).unwrap_or_else(|e| panic!("layer order in {root}: {e:?}"));
    let violations = check(&src, &layers).expect("read the sources");
    let report: Vec<String> = violations.iter().map(|v| format!("  src/{v}")).collect();
    assert!(
        violations.is_empty(),
        "imports against the layer order of src/{root}:\n{}",
        report.join("\n")
    );
}

/// Reads the layer order from `root_file`'s doc comment: top layer first.
pub fn declared_layers(root_file: &Path) -> Result<Vec<Vec<String>>, String> {
    let text =
        fs::read_to_string(root_file).map_err(|e| format!("read {}: {e}", root_file.display()))?;
    let doc: Vec<&str> = text
        .lines()
        .filter_map(|l| l.trim_start().strip_prefix("//!"))
        .map(str::trim)
        .collect();
    let start = doc
        .iter()
        .position(|l| *l == "Layers, top to bottom:")
        .ok_or_else(|| format!("{}: no `Layers, top to bottom:` block", root_file.display()))?;
    let mut lines = doc[start + 1..].iter().skip_while(|l| l.is_empty());
    if lines.next() != Some(&"```text") {
        return Err(format!(
            "{}: `Layers, top to bottom:` is not followed by a ```text block",
            root_file.display()
        ));
    }
    let layers: Vec<Vec<String>> = lines
        .take_while(|l| **l != "```")
        .map(|l| l.split_whitespace().map(str::to_string).collect())
        .filter(|layer: &Vec<String>| !layer.is_empty())
        .collect();
    if layers.is_empty() {
        return Err(format!("{}: the layer block is empty", root_file.display()));
    }
    Ok(layers)
}

/// Checks every module file under `src` against `layers` (top layer first).
pub fn check(src: &Path, layers: &[Vec<String>]) -> Result<Vec<Violation>, String> {
    // Rank 0 is the bottom layer.
    let rank: BTreeMap<&str, usize> = layers
        .iter()
        .rev()
        .enumerate()
        .flat_map(|(i, layer)| layer.iter().map(move |m| (m.as_str(), i)))
        .collect();
    let mut violations = BTreeSet::new();
    // Every import between placed modules, with its first site (files are
    // read in order): the graph the circles are looked for in.
    let mut imports: BTreeMap<String, BTreeMap<String, (PathBuf, usize)>> = BTreeMap::new();
    for file in rust_files(src)? {
        let rel = file.strip_prefix(src).expect("under src");
        let Some(module) = top_module(rel) else {
            continue; // the crate root or a binary: above every layer
        };
        let Some(&from_rank) = rank.get(module.as_str()) else {
            violations.insert(Violation::Unplaced { module });
            continue;
        };
        let text =
            fs::read_to_string(&file).map_err(|e| format!("read {}: {e}", file.display()))?;
        for (line, to) in crate_references(&text) {
            if to == module {
                continue;
            }
            if rank.contains_key(to.as_str()) {
                imports
                    .entry(module.clone())
                    .or_default()
                    .entry(to.clone())
                    .or_insert_with(|| (rel.to_path_buf(), line));
            }
            match rank.get(to.as_str()) {
                Some(&r) if r <= from_rank => {}
                Some(_) => {
                    violations.insert(Violation::Upward {
                        file: rel.to_path_buf(),
                        line,
                        from: module.clone(),
                        to,
                    });
                }
                // Not a module (a crate-root item such as a re-export):
                // the root is above every layer.
                None if is_root_module_name(src, &to) => {
                    violations.insert(Violation::Unplaced { module: to });
                }
                None => {
                    violations.insert(Violation::Upward {
                        file: rel.to_path_buf(),
                        line,
                        from: module.clone(),
                        to: format!("{to} (an item of the crate root)"),
                    });
                }
            }
        }
    }
    let graph: BTreeMap<String, BTreeSet<String>> = imports
        .iter()
        .map(|(from, to)| (from.clone(), to.keys().cloned().collect()))
        .collect();
    for modules in cycles(&graph) {
        let sites = modules
            .iter()
            .zip(modules.iter().cycle().skip(1))
            .map(|(from, to)| imports[from][to].clone())
            .collect();
        violations.insert(Violation::Cycle {
            modules,
            imports: sites,
        });
    }
    Ok(violations.into_iter().collect())
}

/// The circles of `imports` (module → the modules it imports): for every
/// module on a circle, the shortest circle through it, each given once,
/// starting at its smallest name. Not every circle of a tangle is listed, but
/// every module on one is on a listed one, so the check is clean exactly when
/// the graph has no circle.
pub fn cycles(imports: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    let mut found = BTreeSet::new();
    for start in imports.keys() {
        if let Some(mut circle) = shortest_cycle_through(imports, start) {
            let smallest = (0..circle.len())
                .min_by_key(|&i| &circle[i])
                .expect("a circle has a module");
            circle.rotate_left(smallest);
            found.insert(circle);
        }
    }
    found.into_iter().collect()
}

/// Breadth first from `start` until an import leads back to it: the path,
/// `start` first, or `None` when no path returns.
fn shortest_cycle_through(
    imports: &BTreeMap<String, BTreeSet<String>>,
    start: &str,
) -> Option<Vec<String>> {
    let mut came_from: BTreeMap<&str, &str> = BTreeMap::new();
    let mut queue = std::collections::VecDeque::from([start]);
    while let Some(module) = queue.pop_front() {
        for next in imports.get(module).into_iter().flatten() {
            if next == start {
                let mut path = vec![module.to_string()];
                let mut at = module;
                while at != start {
                    at = came_from[at];
                    path.push(at.to_string());
                }
                path.reverse();
                return Some(path);
            }
            if !came_from.contains_key(next.as_str()) {
                came_from.insert(next, module);
                queue.push_back(next);
            }
        }
    }
    None
}

/// `crate::<name>` references in `text`, with their 1-based line, comments
/// and the trailing unit-test module left out.
pub fn crate_references(text: &str) -> Vec<(usize, String)> {
    let lines: Vec<&str> = text.lines().collect();
    let tests_start = lines
        .windows(2)
        .position(|w| w[0].trim() == "#[cfg(test)]" && w[1].trim_start().starts_with("mod "))
        .unwrap_or(lines.len());
    let mut found = Vec::new();
    let mut depth_group: Option<usize> = None; // inside `crate::{ ... }`, its brace depth
    let mut expect_name = true; // at the start of a path inside the group
    for (i, raw) in lines[..tests_start].iter().enumerate() {
        let line = raw.split("//").next().unwrap_or("");
        let mut rest = line;
        loop {
            if let Some(depth) = depth_group.as_mut() {
                // Inside a group: names at depth 1 that start a path are modules.
                let Some((pos, c)) = rest
                    .char_indices()
                    .find(|(_, c)| "{},".contains(*c) || c.is_alphanumeric() || *c == '_')
                else {
                    break;
                };
                match c {
                    '{' => {
                        *depth += 1;
                        rest = &rest[pos + 1..];
                    }
                    '}' => {
                        *depth -= 1;
                        rest = &rest[pos + 1..];
                        if *depth == 0 {
                            depth_group = None;
                        }
                    }
                    ',' => {
                        if *depth == 1 {
                            expect_name = true;
                        }
                        rest = &rest[pos + 1..];
                    }
                    _ => {
                        let ident: String = rest[pos..]
                            .chars()
                            .take_while(|c| c.is_alphanumeric() || *c == '_')
                            .collect();
                        if *depth == 1 && expect_name && ident != "self" {
                            found.push((i + 1, ident.clone()));
                        }
                        expect_name = false;
                        rest = &rest[pos + ident.len()..];
                    }
                }
                continue;
            }
            let Some(pos) = rest.find("crate::") else {
                break;
            };
            let before = rest[..pos].chars().next_back();
            rest = &rest[pos + "crate::".len()..];
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
                continue; // `camelk_crate::`, not our crate
            }
            if let Some(after) = rest.strip_prefix('{') {
                depth_group = Some(1);
                expect_name = true;
                rest = after;
            } else {
                let ident: String = rest
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                if !ident.is_empty() {
                    found.push((i + 1, ident));
                }
            }
        }
    }
    found
}

fn rust_files(dir: &Path) -> Result<Vec<PathBuf>, String> {
    let mut out = Vec::new();
    let entries = fs::read_dir(dir).map_err(|e| format!("read {}: {e}", dir.display()))?;
    for entry in entries {
        let path = entry.map_err(|e| e.to_string())?.path();
        if path.is_dir() {
            out.extend(rust_files(&path)?);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
    out.sort();
    Ok(out)
}

/// The top-level module a file belongs to, or `None` for the crate root
/// (`lib.rs`, `main.rs`) and binaries under `bin/`.
fn top_module(rel: &Path) -> Option<String> {
    let first = rel.components().next()?.as_os_str().to_str()?;
    if rel.components().count() == 1 {
        let stem = first.strip_suffix(".rs")?;
        return (stem != "lib" && stem != "main").then(|| stem.to_string());
    }
    (first != "bin").then(|| first.to_string())
}

fn is_root_module_name(src: &Path, name: &str) -> bool {
    src.join(format!("{name}.rs")).is_file() || src.join(name).join("mod.rs").is_file()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(text: &str) -> Vec<String> {
        crate_references(text).into_iter().map(|(_, n)| n).collect()
    }

    #[test]
    fn reads_plain_grouped_and_inline_paths() {
        let text = "use crate::plan::Plan;\nuse crate::{api::{self, Pin}, camel_k};\n\
                    let x = crate::sync::run();\n// use crate::comment::X;\nuse camelk_crate::x;\n\
                    use crate::{\n    lock::Lease,\n    git,\n};\n";
        assert_eq!(
            names(text),
            ["plan", "api", "camel_k", "sync", "lock", "git"]
        );
    }

    fn crate_with(files: &[(&str, &str)]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for (path, text) in files {
            let p = dir.path().join(path);
            fs::create_dir_all(p.parent().unwrap()).unwrap();
            fs::write(p, text).unwrap();
        }
        dir
    }

    /// The violations [`check`] finds in a crate of `files`, its layers
    /// given as the root doc's list writes them, a line each.
    fn violations(files: &[(&str, &str)], layer_lines: &[&str]) -> Vec<Violation> {
        let dir = crate_with(files);
        check(dir.path(), &layers(layer_lines)).unwrap()
    }

    fn layers(spec: &[&str]) -> Vec<Vec<String>> {
        spec.iter()
            .map(|l| l.split_whitespace().map(str::to_string).collect())
            .collect()
    }

    #[test]
    fn downward_and_same_layer_imports_pass() {
        let v = violations(
            &[
                (
                    "lib.rs",
                    "pub mod a;\npub mod b;\npub mod c;\nuse crate::a::X;\n",
                ),
                ("a/mod.rs", "use crate::b::Y;\nuse crate::c::Z;\n"),
                ("b.rs", "use crate::c::Z;\n"),
                ("c.rs", ""),
                ("bin/tool.rs", "use crate::a::X;\n"),
            ],
            &["a", "b c"],
        );
        assert!(v.is_empty(), "{v:?}");
    }

    #[test]
    fn an_upward_import_fails_with_file_and_line() {
        let v = violations(
            &[("a.rs", ""), ("b/deep.rs", "\nuse crate::{a::X};\n")],
            &["a", "b"],
        );
        assert_eq!(
            v,
            [Violation::Upward {
                file: PathBuf::from("b/deep.rs"),
                line: 2,
                from: "b".into(),
                to: "a".into()
            }]
        );
        assert_eq!(
            v[0].to_string(),
            "b/deep.rs:2: `b` imports `a`, a higher layer"
        );
    }

    #[test]
    fn a_cycle_within_a_layer_and_an_unplaced_module_fail() {
        let v = violations(
            &[
                ("a.rs", "use crate::b::X;\n"),
                ("b.rs", "use crate::a::Y;\n"),
                ("new.rs", ""),
            ],
            &["a b"],
        );
        assert!(
            v.contains(&Violation::Cycle {
                modules: vec!["a".into(), "b".into()],
                imports: vec![(PathBuf::from("a.rs"), 1), (PathBuf::from("b.rs"), 1)],
            }),
            "{v:?}"
        );
        assert!(
            v.contains(&Violation::Unplaced {
                module: "new".into()
            }),
            "{v:?}"
        );
    }

    #[test]
    fn a_crate_root_item_is_above_every_layer() {
        let v = violations(&[("a.rs", "use crate::Reported;\n")], &["a"]);
        assert_eq!(v.len(), 1);
        assert!(
            v[0].to_string().contains("an item of the crate root"),
            "{}",
            v[0]
        );
    }

    #[test]
    fn the_order_is_read_from_the_root_doc() {
        let dir = crate_with(&[(
            "lib.rs",
            "//! Intro.\n//!\n//! Layers, top to bottom:\n//!\n//! ```text\n//! sync\n//! plan api\n//! ```\n",
        )]);
        assert_eq!(
            declared_layers(&dir.path().join("lib.rs")).unwrap(),
            layers(&["sync", "plan api"])
        );
    }

    #[test]
    fn the_unit_test_module_is_not_read() {
        let text = "use crate::api::X;\n#[cfg(test)]\nmod tests {\n    use crate::sync::Y;\n}\n";
        assert_eq!(names(text), ["api"]);
    }

    fn graph(edges: &[(&str, &str)]) -> BTreeMap<String, BTreeSet<String>> {
        let mut g: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for (from, to) in edges {
            g.entry(from.to_string())
                .or_default()
                .insert(to.to_string());
        }
        g
    }

    fn circles(edges: &[(&str, &str)]) -> Vec<Vec<String>> {
        cycles(&graph(edges))
    }

    #[test]
    fn a_circle_of_three_modules_is_found() {
        // No two modules import each other: only the whole circle closes.
        let edges = [("b", "c"), ("c", "a"), ("a", "b"), ("d", "a"), ("c", "e")];
        assert_eq!(circles(&edges), [["a", "b", "c"]]);
    }

    #[test]
    fn every_module_on_a_circle_is_on_a_listed_one() {
        // a → b → c → d → a, and b → a: the short circle does not hide the long one.
        let edges = [("a", "b"), ("b", "c"), ("c", "d"), ("d", "a"), ("b", "a")];
        assert_eq!(circles(&edges), [vec!["a", "b"], vec!["a", "b", "c", "d"]]);
    }

    #[test]
    fn a_graph_without_a_circle_has_none() {
        let edges = [("a", "b"), ("a", "c"), ("b", "c"), ("c", "d"), ("b", "d")];
        assert!(circles(&edges).is_empty());
    }

    #[test]
    fn a_circle_of_three_modules_in_a_crate_is_named_with_its_imports() {
        let v = violations(
            &[
                ("a.rs", "use crate::b::X;\n"),
                ("b/mod.rs", "\nuse crate::c::Y;\n"),
                ("c.rs", "use crate::{a::Z};\n"),
            ],
            &["a b c"],
        );
        assert_eq!(
            v,
            [Violation::Cycle {
                modules: vec!["a".into(), "b".into(), "c".into()],
                imports: vec![
                    (PathBuf::from("a.rs"), 1),
                    (PathBuf::from("b/mod.rs"), 2),
                    (PathBuf::from("c.rs"), 1),
                ],
            }]
        );
        assert_eq!(
            v[0].to_string(),
            "`a` → `b` → `c` → `a` import each other in a circle (a.rs:1, b/mod.rs:2, c.rs:1)"
        );
    }
}
