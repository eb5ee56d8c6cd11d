//! `[tracing]`: OpenTelemetry traces to an OTLP collector (docs/operations.md, "Traces").

use std::time::Duration;

use super::problems::{KeyPath, Problems};

section! {
    /// `[tracing]`: where spans go and how many traces are kept (docs/operations.md, "Traces").
    #[derive(Debug, Clone)]
    pub struct TracingConfig as t {
        /// The collector's OTLP/HTTP (protobuf) base URL, such as `http://collector:4318`; spans
        /// are posted to `<otlp_endpoint>/v1/traces`.
        pub otlp_endpoint: String,
        pub service_name: String = "wharf".into(),
        /// The share of requests whose trace is recorded; processing and deliveries follow the
        /// request's decision.
        pub sampling_ratio: f64 = 1.0; 0.0..=1.0,
        /// How often finished spans are sent to the collector.
        pub export_interval_ms: u64 = 5000; 10..=60_000,
    }
}

impl TracingConfig {
    pub fn settings(&self) -> crate::support::traces::TraceSettings {
        crate::support::traces::TraceSettings {
            endpoint: self.otlp_endpoint.clone(),
            service_name: self.service_name.clone(),
            sampling_ratio: self.sampling_ratio,
            export_interval: Duration::from_millis(self.export_interval_ms),
        }
    }

    /// A collector URL spans can be posted under, a name a collector will show.
    pub(super) fn problems(&self, p: &mut Problems) {
        let endpoint = self.otlp_endpoint.as_str();
        p.ensure(
            (endpoint.starts_with("http://") || endpoint.starts_with("https://"))
                && endpoint
                    .parse::<http::Uri>()
                    .is_ok_and(|u| u.host().is_some())
                && !endpoint.contains(['?', '#']),
            KeyPath::section("tracing", "otlp_endpoint"),
            || {
                "[tracing] otlp_endpoint must be the collector's OTLP/HTTP base URL, \
                 http(s)://host:port (spans go to its /v1/traces)"
                    .into()
            },
        );
        p.ensure(
            (1..=128).contains(&self.service_name.len())
                && self.service_name.bytes().all(|b| b.is_ascii_graphic()),
            KeyPath::section("tracing", "service_name"),
            || "[tracing] service_name must be 1-128 visible ASCII characters".into(),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::config_with;

    #[test]
    fn tracing_is_off_unless_configured_and_its_settings_are_checked() {
        assert!(config_with("server", "").unwrap().tracing.is_none());
        let table = |lines: &str| config_with("worker", &format!("\n[tracing]\n{lines}\n"));
        let on = table("otlp_endpoint = \"http://collector:4318\"").unwrap();
        let t = on.tracing.expect("configured");
        assert_eq!(
            (
                t.service_name.as_str(),
                t.sampling_ratio,
                t.export_interval_ms
            ),
            ("wharf", 1.0, 5000)
        );
        for (lines, message) in [
            ("", "missing field `otlp_endpoint`"),
            (
                "otlp_endpoint = \"collector:4318\"",
                "[tracing] otlp_endpoint must be the collector's OTLP/HTTP base URL",
            ),
            (
                "otlp_endpoint = \"http://c:4318\"\nsampling_ratio = 1.5",
                "[tracing] sampling_ratio = 1.5 is out of range: allowed 0..=1",
            ),
            (
                "otlp_endpoint = \"http://c:4318\"\nexport_interval_ms = 0",
                "[tracing] export_interval_ms = 0 is out of range: allowed 10..=60000",
            ),
            (
                "otlp_endpoint = \"http://c:4318\"\nservice_name = \"\"",
                "[tracing] service_name must be 1-128 visible ASCII characters",
            ),
        ] {
            let error = format!("{:#}", table(lines).unwrap_err());
            assert!(error.contains(message), "{lines:?}: {error}");
        }
    }
}
