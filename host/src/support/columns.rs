//! Array parameters for set-based statements (`unnest($1::text[], …)`): one column of a
//! batch's rows at a time.

/// The values `f` takes from each row, in row order: one array parameter.
pub fn column<'a, T, U>(rows: &'a [T], f: impl FnMut(&'a T) -> U) -> Vec<U> {
    rows.iter().map(f).collect()
}
