//! Each file stays one concept: no file under `src/` grows past 600 lines (its unit tests
//! included), and errors are typed, never `Result<_, String>`. Like `layers`, a test so the
//! rules hold without anyone remembering them.

use std::path::{Path, PathBuf};

const MAX_LINES: usize = 600;

fn sources() -> Vec<(PathBuf, String)> {
    fn walk(dir: &Path, out: &mut Vec<(PathBuf, String)>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let text = std::fs::read_to_string(&path).unwrap();
                out.push((path, text));
            }
        }
    }
    let mut out = Vec::new();
    walk(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"), &mut out);
    out
}

#[test]
fn no_file_is_over_600_lines() {
    let long: Vec<String> = sources()
        .iter()
        .filter(|(_, text)| text.lines().count() > MAX_LINES)
        .map(|(path, text)| format!("{} ({} lines)", path.display(), text.lines().count()))
        .collect();
    assert!(long.is_empty(), "split by concept: {long:?}");
}

/// Whether `line` names a `Result` whose error type is `String`: the second argument at the
/// top level of its angle brackets.
fn has_string_error(line: &str) -> bool {
    line.match_indices("Result<").any(|(at, found)| {
        let (mut depth, mut error) = (1, None);
        for (i, c) in line[at + found.len()..].char_indices() {
            match c {
                '<' | '(' | '[' => depth += 1,
                '>' | ')' | ']' => {
                    depth -= 1;
                    if depth == 0 {
                        let start = at + found.len();
                        return error
                            .is_some_and(|e: usize| line[start + e..start + i].trim() == "String");
                    }
                }
                ',' if depth == 1 => error = Some(i + 1),
                _ => {}
            }
        }
        false
    })
}

#[test]
fn the_string_error_matcher_reads_only_the_error_argument() {
    assert!(has_string_error("fn f() -> Result<Vec<u8>, String> {"));
    assert!(has_string_error(
        "type Read = Result<(Vec<u8>, Vec<u8>), String>;"
    ));
    assert!(!has_string_error(
        "fn f(h: &BTreeMap<String, String>) -> anyhow::Result<()> {"
    ));
    assert!(!has_string_error("fn f() -> Result<String, Error> {"));
}

#[test]
fn no_error_is_a_string() {
    let stringly: Vec<String> = sources()
        .iter()
        .filter(|(path, _)| !path.ends_with("file_rules.rs"))
        .flat_map(|(path, text)| {
            text.lines()
                .enumerate()
                .filter(|(_, line)| !line.trim_start().starts_with("//") && has_string_error(line))
                .map(move |(n, line)| format!("{}:{}: {}", path.display(), n + 1, line.trim()))
        })
        .collect();
    assert!(stringly.is_empty(), "use a typed error: {stringly:?}");
}
