//! `[retention]`: how long payloads, events and idempotency records are kept.

pub const DEFAULT_REDELIVERY_WINDOW_DAYS: u32 = 7;

section! {
    /// How long what is stored is kept (`host/src/retention.rs`). Whole UTC days: a day's
    /// partitions go once all of that day is older than its period.
    #[derive(Debug, Clone)]
    pub struct RetentionConfig as r: Default {
        /// Raw payloads (`webhook_payloads`).
        pub payload_days: u32 = 30; 1..=3650,
        /// Events: inbox rows, their processing markers, outbox notices and deliveries. At least
        /// `payload_days` (events outliving their payloads is fine; payloads outliving their
        /// events are unreachable) and every endpoint's redelivery window.
        pub event_days: u32 = 30; r.payload_days..=3650; "at least payload_days",
        /// How long a provider may send an event again and have it answered `duplicate`, unless
        /// an endpoint sets its own `redelivery_window_days`. Idempotency records must live as
        /// long as a provider may redeliver.
        pub redelivery_window_days: u32 = DEFAULT_REDELIVERY_WINDOW_DAYS;
            1..=r.event_days; "at most event_days",
        /// Days of partitions kept ready ahead of the clock.
        pub create_ahead_days: u32 = 3; 1..=90,
        /// How often a host checks partitions (creates ahead, drops expired).
        pub interval_secs: u64 = 3600; 60..=86_400,
    }
}
