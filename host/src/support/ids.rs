//! Row ids are UUIDv7: their first 48 bits are the milliseconds they were made, so the tables
//! partitioned by them (migration `…_time_partitions.sql`) are partitioned by time, and a
//! moment's smallest id bounds a range of days.

use time::OffsetDateTime;
use uuid::{NoContext, Timestamp, Uuid};

/// A new id made at `at` (the request's clock, so an injected clock decides its partition).
pub fn id_at(at: OffsetDateTime) -> Uuid {
    let nanos = at.unix_timestamp_nanos().max(0);
    let secs = u64::try_from(nanos / 1_000_000_000).unwrap_or(0);
    let subsec = u32::try_from(nanos % 1_000_000_000).unwrap_or(0);
    Uuid::new_v7(Timestamp::from_unix(NoContext, secs, subsec))
}

/// The smallest UUIDv7 of `at`'s millisecond: every id made at or after `at` sorts at or after
/// it, every id made before sorts before. The same as SQL `wharf_uuid_floor(at)`.
pub fn floor_at(at: OffsetDateTime) -> Uuid {
    let millis = u64::try_from(at.unix_timestamp_nanos() / 1_000_000).unwrap_or(0);
    let mut bytes = [0u8; 16];
    bytes[..6].copy_from_slice(&millis.to_be_bytes()[2..]);
    bytes[6] = 0x70;
    bytes[8] = 0x80;
    Uuid::from_bytes(bytes)
}

/// When a UUIDv7 was made; `None` for another kind of id.
pub fn time_of(id: Uuid) -> Option<OffsetDateTime> {
    let (secs, nanos) = id.get_timestamp()?.to_unix();
    OffsetDateTime::from_unix_timestamp_nanos(i128::from(secs) * 1_000_000_000 + i128::from(nanos))
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_floor_bounds_every_id_of_its_millisecond() {
        // 2026-12-03T00:00:00Z
        let at = OffsetDateTime::from_unix_timestamp(1_796_256_000).unwrap();
        let floor = floor_at(at);
        assert_eq!(floor.to_string(), "01a23933-6800-7000-8000-000000000000");
        for _ in 0..1000 {
            assert!(id_at(at) >= floor);
            assert!(id_at(at - time::Duration::milliseconds(1)) < floor);
        }
        assert_eq!(time_of(id_at(at)), Some(at));
        assert_eq!(time_of(floor), Some(at));
    }
}
