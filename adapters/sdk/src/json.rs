//! Verified JSON bodies read by path, each path written once: `req.json(["id",
//! "data.object.id"])` gives one [`Field`] per path, read in one pass that skips (without
//! copying) everything no path reaches.

use crate::decode::{Value, at, parse_json_paths, str_at};
use crate::{OrReject, Rejection, Request, malformed};

/// The value at one path of a JSON document, if there is one.
#[derive(Clone, Debug, PartialEq)]
pub struct Field {
    path: &'static str,
    value: Option<Value>,
}

impl Field {
    /// The path this field was read at, as written (`data.object.id`).
    pub fn path(&self) -> &'static str {
        self.path
    }

    pub fn value(&self) -> Option<&Value> {
        self.value.as_ref()
    }

    /// The string here, if it is one.
    pub fn str(&self) -> Option<&str> {
        self.value.as_ref()?.as_str()
    }

    /// The integer here, if it is one representable as `i64`.
    pub fn i64(&self) -> Option<i64> {
        self.value.as_ref()?.as_i64()
    }

    /// The non-empty string here, else 400 `missing <path>`.
    pub fn required_str(&self) -> Result<&str, Rejection> {
        self.str()
            .filter(|s| !s.is_empty())
            .ok_or_else(|| malformed(format!("missing {}", self.path)))
    }
}

/// The values at `paths` (object keys joined by `.`: `data.object.id`) of the JSON document
/// `json`; `None` when it is not JSON. A repeated key reads as its last occurrence.
pub fn json_fields<const N: usize>(json: &[u8], paths: [&'static str; N]) -> Option<[Field; N]> {
    let keys: Vec<Vec<&str>> = paths.iter().map(|p| p.split('.').collect()).collect();
    let refs: Vec<&[&str]> = keys.iter().map(Vec::as_slice).collect();
    let kept = parse_json_paths(json, &refs)?;
    let mut keys = keys.iter();
    Some(paths.map(|path| Field {
        path,
        value: keys.next().and_then(|k| at(&kept, k)).cloned(),
    }))
}

impl Request {
    /// The values at `paths` of the body, as [`json_fields`]; 400 when it is not JSON.
    pub fn json<const N: usize>(&self, paths: [&'static str; N]) -> Result<[Field; N], Rejection> {
        json_fields(&self.body(), paths).or_malformed("body is not JSON")
    }
}

/// The non-empty string at `path` (object keys) of a JSON value, else 400 `missing <path>`:
/// for values inside arrays, which paths do not reach.
pub fn required_str<'a>(json: &'a Value, path: &[&str]) -> Result<&'a str, Rejection> {
    str_at(json, path)
        .filter(|v| !v.is_empty())
        .ok_or_else(|| malformed(format!("missing {}", path.join("."))))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{RejectionKind, parse_json};

    #[test]
    fn fields_read_each_path_once() {
        let body = br#"{"id":"evt_1","empty":"","created":17,"data":{"object":{"id":"cus_1"}}}"#;
        let [id, empty, created, object, missing] = json_fields(
            body,
            ["id", "empty", "created", "data.object.id", "data.id"],
        )
        .unwrap();
        assert_eq!(id.required_str().unwrap(), "evt_1");
        assert_eq!((created.i64(), created.str()), (Some(17), None));
        assert_eq!(object.str(), Some("cus_1"));
        assert_eq!(missing.value(), None);
        for (field, path) in [(empty, "empty"), (created, "created"), (missing, "data.id")] {
            let r = field.required_str().unwrap_err();
            assert!(matches!(r.kind, RejectionKind::Malformed));
            assert_eq!(r.detail, format!("missing {path}"));
        }
        assert!(json_fields(b"Hello, World!", ["id"]).is_none());
        let [id] = json_fields(br#"{"id":"a","id":"b"}"#, ["id"]).unwrap();
        assert_eq!(id.str(), Some("b"), "later duplicates win");
    }

    #[test]
    fn required_strings() {
        let json = parse_json(br#"{"id":"evt_1","empty":"","data":{"n":1}}"#).unwrap();
        assert_eq!(required_str(&json, &["id"]).unwrap(), "evt_1");
        for path in [&["empty"][..], &["data", "n"], &["data", "id"]] {
            let r = required_str(&json, path).unwrap_err();
            assert!(matches!(r.kind, RejectionKind::Malformed));
            assert_eq!(r.detail, format!("missing {}", path.join(".")));
        }
    }
}
