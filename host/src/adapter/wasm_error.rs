//! wasmtime's errors into the host's. `wasmtime::Error` is its own type, not a std `Error`,
//! so `?` cannot carry it into an `anyhow::Result`: it is converted here, by its message.

/// `.into_anyhow()` on a wasmtime result.
pub(super) trait IntoAnyhow<T> {
    /// The error as an `anyhow::Error` with the same message (what it displays).
    fn into_anyhow(self) -> anyhow::Result<T>;
}

impl<T> IntoAnyhow<T> for wasmtime::Result<T> {
    fn into_anyhow(self) -> anyhow::Result<T> {
        self.map_err(|e| anyhow::anyhow!("{e}"))
    }
}
