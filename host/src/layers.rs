//! The module structure cannot rot: every `crate::` path in `src/` points to a lower layer (or
//! inside its own folder), and no two files import each other, even through others. The
//! layer order is the order of the `pub mod` lines in `lib.rs`, written nowhere else.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// Top-level modules, bottom layer first, as `lib.rs` declares them.
fn layers() -> Vec<String> {
    let lib = std::fs::read_to_string(src().join("lib.rs")).unwrap();
    lib.lines()
        .filter_map(|l| l.strip_prefix("pub mod ")?.strip_suffix(';'))
        .map(str::to_owned)
        .collect()
}

/// Every `.rs` file under `src/` as a module path: `processing/worker.rs` → `processing::worker`,
/// `processing/mod.rs` → `processing`.
fn modules() -> BTreeMap<String, String> {
    fn walk(dir: &Path, prefix: &[String], out: &mut BTreeMap<String, String>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            let stem = path.file_stem().unwrap().to_string_lossy().into_owned();
            if path.is_dir() {
                walk(&path, &[prefix, &[stem]].concat(), out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let name = match stem.as_str() {
                    "mod" => prefix.join("::"),
                    _ => [prefix, &[stem]].concat().join("::"),
                };
                out.insert(name, std::fs::read_to_string(&path).unwrap());
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(&src(), &[], &mut out);
    out.retain(|name, _| !["", "lib", "main", "layers"].contains(&name.as_str()));
    out
}

/// The modules `text` (the file of module `from`) refers to: `crate::a::b::Item` is module
/// `a::b` if that file exists, else `a`; `super::x` and `self::x` likewise, relative to `from`.
fn references(from: &str, text: &str, known: &BTreeMap<String, String>) -> BTreeSet<String> {
    // Unit tests sit at the end of a file, in an inline module whose `super` is the file.
    let text = text.split("#[cfg(test)]").next().unwrap_or_default();
    let is_folder = known.keys().any(|k| k.starts_with(&format!("{from}::")));
    let parent: Vec<&str> = from.split("::").collect();
    let mut out = BTreeSet::new();
    // A folder's `mod.rs` names its children with plain relative paths (`pub use store::X`).
    let children: Vec<String> = known
        .keys()
        .filter_map(|k| k.strip_prefix(&format!("{from}::")))
        .filter(|rest| !rest.contains("::"))
        .map(|child| format!("{child}::"))
        .collect();
    let mut anchors: Vec<(&str, Vec<&str>)> = vec![
        ("crate::", Vec::new()),
        ("super::", parent[..parent.len() - 1].to_vec()),
    ];
    if is_folder {
        anchors.push(("self::", parent.clone()));
        for child in &children {
            let mut base = parent.clone();
            base.push(child.trim_end_matches("::"));
            anchors.push((child.as_str(), base));
        }
    }
    for (anchor, base) in anchors {
        for (i, _) in text.match_indices(anchor) {
            // `crate::` inside a longer word (`$crate::`) is not a path into this crate.
            if text[..i].ends_with(|c: char| c.is_alphanumeric() || c == '_' || c == '$') {
                continue;
            }
            let rest = &text[i + anchor.len()..];
            let segments: Vec<&str> = rest
                .split("::")
                .map(|s| {
                    let end = s
                        .find(|c: char| !(c.is_alphanumeric() || c == '_'))
                        .unwrap_or(s.len());
                    &s[..end]
                })
                .take_while(|s| !s.is_empty())
                .collect();
            let mut path = base.clone();
            let mut best = known
                .contains_key(&base.join("::"))
                .then(|| base.join("::"));
            for segment in segments {
                path.push(segment);
                let name = path.join("::");
                if known.contains_key(&name) {
                    best = Some(name);
                }
            }
            if let Some(target) = best.filter(|t| t != from) {
                out.insert(target);
            }
        }
    }
    out
}

#[test]
fn imports_point_down_and_close_no_cycle() {
    let layers = layers();
    assert!(layers.len() >= 5, "lib.rs lists the layers: {layers:?}");
    let modules = modules();
    let layer_of = |module: &str| {
        let top = module.split("::").next().unwrap();
        layers
            .iter()
            .position(|l| l == top)
            .unwrap_or_else(|| panic!("{module} is not under a layer listed in lib.rs"))
    };
    let mut graph: BTreeMap<&str, BTreeSet<String>> = BTreeMap::new();
    let mut upward = Vec::new();
    for (module, text) in &modules {
        let refs = references(module, text, &modules);
        for target in &refs {
            let same_top = module.split("::").next() == target.split("::").next();
            if !same_top && layer_of(target) >= layer_of(module) {
                upward.push(format!("{module} -> {target}"));
            }
        }
        graph.insert(module, refs);
    }
    assert!(
        upward.is_empty(),
        "imports that point up a layer (or across one): {upward:#?}"
    );

    // Depth-first search for a cycle; a folder's `mod.rs` re-exporting its children is an edge
    // down, so children must name siblings (`super::sibling`), not their folder.
    fn visit<'a>(
        node: &'a str,
        graph: &'a BTreeMap<&str, BTreeSet<String>>,
        state: &mut BTreeMap<&'a str, bool>,
        stack: &mut Vec<&'a str>,
    ) -> Option<Vec<String>> {
        match state.get(node) {
            Some(true) => return None,
            Some(false) => {
                let at = stack.iter().position(|n| *n == node).unwrap();
                let mut cycle: Vec<String> = stack[at..].iter().map(|s| s.to_string()).collect();
                cycle.push(node.to_owned());
                return Some(cycle);
            }
            None => {}
        }
        state.insert(node, false);
        stack.push(node);
        for next in graph.get(node).into_iter().flatten() {
            if let Some(cycle) = visit(next, graph, state, stack) {
                return Some(cycle);
            }
        }
        stack.pop();
        state.insert(node, true);
        None
    }
    let mut state = BTreeMap::new();
    for node in graph.keys() {
        let cycle = visit(node, &graph, &mut state, &mut Vec::new());
        assert!(
            cycle.is_none(),
            "an import cycle: {}",
            cycle.unwrap().join(" -> ")
        );
    }
}

#[test]
fn the_checker_sees_upward_imports_and_cycles() {
    let known: BTreeMap<String, String> = [
        ("ingest", ""),
        ("ingest::store", ""),
        ("ingest::verify", ""),
        ("support::clock", ""),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect();
    let refs = references(
        "ingest::store",
        "use crate::support::clock::Clock;\nuse super::verify::{self, X};\nlet _ = $crate::ingest::Y;",
        &known,
    );
    assert_eq!(
        refs,
        BTreeSet::from(["support::clock".to_owned(), "ingest::verify".to_owned()])
    );
    // A folder's own children, named relatively or through `self::`.
    let refs = references(
        "ingest",
        "mod store;\npub use store::Store;\nself::verify::v()",
        &known,
    );
    assert_eq!(
        refs,
        BTreeSet::from(["ingest::store".to_owned(), "ingest::verify".to_owned()])
    );
}
