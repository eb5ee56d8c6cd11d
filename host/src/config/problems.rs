//! What a check found: each problem with the key it is about (`endpoint[2].secret`), so that
//! `wharf config check` prints it as `FILE:LINE: message`, and the range messages every
//! numeric knob shares (`[server] max_headers = 0 is out of range: allowed 1..=1024`).

use std::fmt::Display;
use std::ops::RangeInclusive;

pub use crate::support::toml_lines::{KeyPath, Problem};

/// Refuses `value` outside `range`, naming the key and the range.
pub(super) fn in_range<T: PartialOrd + Display>(
    key: &str,
    value: T,
    range: RangeInclusive<T>,
) -> anyhow::Result<()> {
    anyhow::ensure!(
        range.contains(&value),
        "{key} = {value} is out of range: allowed {}..={}",
        range.start(),
        range.end()
    );
    Ok(())
}

/// Where the knobs of one table are: their keys hang under `key`, their messages start with
/// `label` (`[server] `, `route 1 (* -> http): `).
pub(super) struct Place {
    key: KeyPath,
    label: String,
}

impl Place {
    /// A top-level table: `[name] knob`.
    pub(super) fn section(name: &str) -> Self {
        Self::new(KeyPath::root(name), format!("[{name}] "))
    }

    pub(super) fn new(key: KeyPath, label: String) -> Self {
        Self { key, label }
    }

    pub(super) fn key(&self, knob: &str) -> KeyPath {
        self.key.clone().key(knob)
    }

    pub(super) fn label(&self, knob: &str) -> String {
        format!("{}{knob}", self.label)
    }
}

/// A knob's value as a range check sees it: an unset optional knob is not checked.
pub(super) trait Knob {
    type Value: PartialOrd + Display;
    fn value(&self) -> Option<Self::Value>;
}

macro_rules! plain_knobs {
    ($($t:ty),*) => {$(
        impl Knob for $t {
            type Value = $t;
            fn value(&self) -> Option<$t> {
                Some(*self)
            }
        }
    )*};
}
plain_knobs!(u32, u64, usize, f64);

impl<K: Knob> Knob for Option<K> {
    type Value = K::Value;
    fn value(&self) -> Option<K::Value> {
        self.as_ref().and_then(Knob::value)
    }
}

/// Problems found so far, each with its key.
#[derive(Default)]
pub(super) struct Problems(Vec<Problem>);

impl Problems {
    pub(super) fn ensure(&mut self, ok: bool, key: KeyPath, message: impl FnOnce() -> String) {
        if !ok {
            self.0.push(Problem::at_key(key, message()));
        }
    }

    /// `value` within `range`, or a problem naming `label` and the range.
    pub(super) fn range<T: PartialOrd + Display>(
        &mut self,
        key: KeyPath,
        label: &str,
        value: T,
        range: RangeInclusive<T>,
    ) {
        if let Err(e) = in_range(label, value, range) {
            self.0.push(Problem::at_key(key, e.to_string()));
        }
    }

    /// The knob `name` of the table at `at` within `range`, if it is set; `label` is `name`
    /// or `name (why the range is what it is)`.
    pub(super) fn knob<K: Knob>(
        &mut self,
        at: &Place,
        name: &str,
        label: &str,
        knob: &K,
        range: RangeInclusive<K::Value>,
    ) {
        if let Some(value) = knob.value() {
            self.range(at.key(name), &at.label(label), value, range);
        }
    }

    pub(super) fn into_vec(self) -> Vec<Problem> {
        self.0
    }
}
