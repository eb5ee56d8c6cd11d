//! What is stored, and for how long.
//!
//! - `partitions`: the day partitions of every table that grows with the event rate, created
//!   ahead of the clock and dropped whole once expired (`[retention]`), on every host.
//! - `purge`: `wharf events purge --before`, deleting events (and what belongs to them) ahead
//!   of their time, for an investigation or an erasure request.

mod partitions;
mod purge;

pub use partitions::{Pass, Retention};
pub use purge::{Purge, Purged, purge};
