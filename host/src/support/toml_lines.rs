//! Problems in a TOML file, each located by the key it is about (`endpoint[2].secret`) or by a
//! byte span, and the line that is on: what lets `wharf config check` print `FILE:LINE:
//! message` an editor can jump to.

use std::fmt;
use std::ops::Range;

use toml::Spanned;
use toml::de::{DeTable, DeValue};

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Segment {
    Key(String),
    Index(usize),
}

/// A key inside a document: table keys and array indexes from the root.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KeyPath(Vec<Segment>);

impl KeyPath {
    /// The top-level key `key`.
    pub fn root(key: &str) -> Self {
        Self(vec![Segment::Key(key.to_owned())])
    }

    /// `[section] key`.
    pub fn section(section: &str, key: &str) -> Self {
        Self::root(section).key(key)
    }

    pub fn key(mut self, key: &str) -> Self {
        self.0.push(Segment::Key(key.to_owned()));
        self
    }

    pub fn index(mut self, index: usize) -> Self {
        self.0.push(Segment::Index(index));
        self
    }
}

impl fmt::Display for KeyPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, segment) in self.0.iter().enumerate() {
            match segment {
                Segment::Key(k) if i == 0 => write!(f, "{k}")?,
                Segment::Key(k) => write!(f, ".{k}")?,
                Segment::Index(n) => write!(f, "[{n}]")?,
            }
        }
        Ok(())
    }
}

/// Where a problem is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Location {
    /// The key it is about; a key the file leaves out is placed at its nearest ancestor that
    /// the file has (the table's header).
    Key(KeyPath),
    /// Bytes of the text (a syntax error).
    Span(Range<usize>),
    /// Not in the file (an environment variable, a file that cannot be read).
    Nowhere,
}

/// One problem found in a file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    pub at: Location,
    pub message: String,
}

impl Problem {
    pub fn at_key(key: KeyPath, message: impl Into<String>) -> Self {
        Self {
            at: Location::Key(key),
            message: message.into(),
        }
    }

    pub fn nowhere(message: impl Into<String>) -> Self {
        Self {
            at: Location::Nowhere,
            message: message.into(),
        }
    }

    /// A TOML error (syntax, or a type the file's structure does not match) in `text`, located
    /// by its span and naming the key on that line. Never the text itself: the error's
    /// `Display` quotes the offending line, and its message may quote the value, either of
    /// which can be a secret (a database password, an `Authorization` header value).
    pub fn from_toml(error: &toml::de::Error, text: &str) -> Self {
        let message = without_values(error.message().trim_end());
        let key = error.span().and_then(|span| key_on_line(text, span.start));
        Self {
            at: error.span().map_or(Location::Nowhere, Location::Span),
            message: match key {
                Some(key) => format!("key `{key}`: {message}"),
                None => message,
            },
        }
    }
}

/// A TOML error in a file, as `serve` logs it: the line and key, never the text.
#[derive(Debug, thiserror::Error)]
#[error("{}{}", .line.map(|l| format!("line {l}: ")).unwrap_or_default(), .problem.message)]
pub struct TomlError {
    pub line: Option<usize>,
    pub problem: Problem,
}

impl TomlError {
    pub fn new(error: &toml::de::Error, text: &str) -> Self {
        let problem = Problem::from_toml(error, text);
        Self {
            line: Lines::new(text).of(&problem.at),
            problem,
        }
    }
}

/// serde's messages quote the value they refused (`invalid type: string "…"`, `unknown
/// variant `…``): keep what kind of value it was and what was expected.
fn without_values(message: &str) -> String {
    for prefix in ["invalid type: ", "invalid value: "] {
        if let Some(rest) = message.strip_prefix(prefix) {
            let kind = rest.split([' ', ',']).next().unwrap_or_default();
            let expected = rest.split_once(", expected").map_or("", |(_, e)| e);
            return format!("{prefix}{kind} (value withheld), expected{expected}");
        }
    }
    if let Some(rest) = message.strip_prefix("unknown variant ") {
        let expected = rest.split_once(", expected").map_or("", |(_, e)| e);
        return format!("unknown variant (value withheld), expected{expected}");
    }
    message.to_owned()
}

/// The key a line assigns (`key = …`) or the table it opens (`[table]`), when it is a plain
/// dotted key: a quoted key may be anything, so it is not shown.
fn key_on_line(text: &str, offset: usize) -> Option<String> {
    let start = text[..offset.min(text.len())]
        .rfind('\n')
        .map_or(0, |i| i + 1);
    let line = text[start..].lines().next().unwrap_or_default().trim();
    let key = if let Some(header) = line.strip_prefix('[') {
        header.trim_start_matches('[').split(']').next()?
    } else {
        line.split_once('=')?.0
    };
    let key = key.trim();
    let plain = !key.is_empty()
        && key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_-. ".contains(&b));
    plain.then(|| key.to_owned())
}

/// Line numbers (from 1) in one TOML text.
pub struct Lines<'a> {
    text: &'a str,
    /// The parsed document; none when the text does not parse (then only spans have lines).
    document: Option<Spanned<DeTable<'a>>>,
}

impl<'a> Lines<'a> {
    pub fn new(text: &'a str) -> Self {
        Self {
            text,
            document: DeTable::parse(text).ok(),
        }
    }

    pub fn of(&self, location: &Location) -> Option<usize> {
        match location {
            Location::Key(path) => self.key_offset(path).map(|at| self.line_at(at)),
            Location::Span(span) => Some(self.line_at(span.start)),
            Location::Nowhere => None,
        }
    }

    /// The line holding byte `offset`.
    pub fn line_at(&self, offset: usize) -> usize {
        let end = offset.min(self.text.len());
        self.text.as_bytes()[..end]
            .iter()
            .filter(|&&b| b == b'\n')
            .count()
            + 1
    }

    /// Where the deepest part of `path` the file has starts: the key itself, or for an element
    /// of an array of tables, its first key (just under its `[[header]]`).
    fn key_offset(&self, path: &KeyPath) -> Option<usize> {
        let root = self.document.as_ref()?.get_ref();
        let mut current: Option<&DeValue> = None; // None: the root table
        let mut found = None;
        for segment in &path.0 {
            match segment {
                Segment::Key(k) => {
                    let table = match current {
                        None => root,
                        Some(DeValue::Table(t)) => t,
                        Some(_) => break,
                    };
                    let Some((key, value)) = table.get_key_value(k.as_str()) else {
                        break;
                    };
                    found = Some(key.span().start);
                    current = Some(value.get_ref());
                }
                Segment::Index(i) => {
                    let Some(DeValue::Array(items)) = current else {
                        break;
                    };
                    let Some(item) = items.get(*i) else { break };
                    found = match item.get_ref() {
                        // A `[[header]]` table has no span of its own: its first key stands in.
                        DeValue::Table(t) if item.span().is_empty() => {
                            t.keys().map(|k| k.span().start).min().or(found)
                        }
                        _ => Some(item.span().start),
                    };
                    current = Some(item.get_ref());
                }
            }
        }
        found
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = "\
[server]
listen = \"x\"

[[endpoint]]
id = \"a\"

[[endpoint]]
id = \"b\"
secrets = { slot = \"s\" }
";

    fn line(path: KeyPath) -> Option<usize> {
        Lines::new(TEXT).of(&Location::Key(path))
    }

    #[test]
    fn keys_are_found_at_their_line() {
        assert_eq!(line(KeyPath::section("server", "listen")), Some(2));
        assert_eq!(line(KeyPath::root("endpoint").index(1).key("id")), Some(8));
        assert_eq!(
            line(
                KeyPath::root("endpoint")
                    .index(1)
                    .key("secrets")
                    .key("slot")
            ),
            Some(9)
        );
        // An element of an array of tables: its header.
        assert_eq!(line(KeyPath::root("endpoint").index(1)), Some(7));
    }

    #[test]
    fn a_key_left_out_is_placed_at_its_nearest_ancestor() {
        assert_eq!(line(KeyPath::section("server", "admin_listen")), Some(1));
        assert_eq!(
            line(KeyPath::root("endpoint").index(0).key("secret")),
            Some(4)
        );
        assert_eq!(line(KeyPath::section("database", "url")), None);
    }

    #[test]
    fn spans_and_syntax_errors_have_lines() {
        let lines = Lines::new(TEXT);
        assert_eq!(lines.of(&Location::Span(0..1)), Some(1));
        assert_eq!(lines.of(&Location::Span(TEXT.len()..TEXT.len())), Some(10));
        assert_eq!(lines.of(&Location::Nowhere), None);
        let text = "a = 1\nb = = 2\n";
        let error = toml::from_str::<toml::Table>(text).unwrap_err();
        let problem = Problem::from_toml(&error, text);
        assert_eq!(Lines::new(text).of(&problem.at), Some(2));
        assert!(!problem.message.contains("b = = 2"), "{}", problem.message);
        assert!(
            problem.message.starts_with("key `b`: "),
            "{}",
            problem.message
        );
    }

    #[test]
    fn toml_errors_never_quote_the_text() {
        #[derive(Debug, serde::Deserialize)]
        #[allow(dead_code)]
        struct Shape {
            port: u16,
        }
        for text in [
            "[database]\nurl = postgres://u:hunter2@db/x\n",
            "[database]\nurl = \"postgres://u:hunter2@db/x\n",
            "headers = { Authorization = Bearer hunter2 }\n",
            "port = \"hunter2\"\n",
        ] {
            let error = toml::from_str::<Shape>(text).unwrap_err();
            let shown = TomlError::new(&error, text).to_string();
            assert!(!shown.contains("hunter2"), "{shown}");
            assert!(shown.starts_with("line "), "{shown}");
        }
        let text = "[database]\nurl = postgres://u:hunter2@db/x\n";
        let error = toml::from_str::<toml::Table>(text).unwrap_err();
        let shown = TomlError::new(&error, text).to_string();
        assert!(shown.starts_with("line 2: key `url`: "), "{shown}");
        assert_eq!(
            without_values("unknown variant `hunter2`, expected `http` or `nats`"),
            "unknown variant (value withheld), expected `http` or `nats`"
        );
    }

    #[test]
    fn paths_display_as_dotted_keys() {
        let path = KeyPath::root("endpoint").index(2).key("secret");
        assert_eq!(path.to_string(), "endpoint[2].secret");
    }
}
