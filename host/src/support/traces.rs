//! OpenTelemetry traces, off unless `[tracing]` is configured: a tracer per process (not a
//! global one, so servers started side by side in one test binary each export their own),
//! the OTLP/HTTP protobuf exporter behind a batch span processor, and the W3C `traceparent`
//! text that carries a span's context through the inbox row and onto deliveries.
//!
//! Wharf's spans are made here explicitly, a fixed few with chosen attributes (see
//! docs/operations.md, "Traces"), rather than bridged from every `tracing` span and event: a
//! bridge would export whatever a log line carries, and the request path's fields are kept
//! clear of secrets, signatures and bodies by hand.
//!
//! Off (`Traces::off`) every method is a branch on `None`: no span, no context, no thread.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use opentelemetry::Context;
pub use opentelemetry::KeyValue;
pub use opentelemetry::trace::SpanKind;
use opentelemetry::trace::{
    Span as _, SpanContext, SpanId, Status, TraceContextExt as _, TraceFlags, TraceId, TraceState,
    Tracer as _, TracerProvider as _,
};
use opentelemetry_otlp::{WithExportConfig as _, WithHttpConfig as _};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::{
    BatchConfigBuilder, BatchSpanProcessor, Sampler, SdkTracer, SdkTracerProvider,
};

/// What `[tracing]` configures (validated in `config.rs`).
#[derive(Debug, Clone)]
pub struct TraceSettings {
    /// The collector's OTLP/HTTP base URL; spans go to `<endpoint>/v1/traces`.
    pub endpoint: String,
    pub service_name: String,
    /// The share of new traces recorded, 0.0 to 1.0; processing and deliveries follow the
    /// request's decision.
    pub sampling_ratio: f64,
    /// How often finished spans are sent (the batch processor's scheduled delay).
    pub export_interval: Duration,
}

/// The process's tracer, or nothing when tracing is off. Cheap to clone.
#[derive(Clone, Default)]
pub struct Traces {
    inner: Option<Arc<Enabled>>,
}

struct Enabled {
    provider: SdkTracerProvider,
    tracer: SdkTracer,
}

impl Traces {
    pub fn off() -> Self {
        Self::default()
    }

    /// Starts the exporter. Nothing is sent until the first span ends; a collector that is
    /// down loses spans (the batch queue is bounded), never requests.
    pub fn start(settings: &TraceSettings) -> anyhow::Result<Self> {
        let url = format!("{}/v1/traces", settings.endpoint.trim_end_matches('/'));
        let exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_http_client(OtlpClient::new()?)
            .with_protocol(opentelemetry_otlp::Protocol::HttpBinary)
            .with_endpoint(url)
            .with_timeout(EXPORT_TIMEOUT)
            .build()?;
        let processor = BatchSpanProcessor::builder(exporter)
            .with_batch_config(
                BatchConfigBuilder::default()
                    .with_scheduled_delay(settings.export_interval)
                    .build(),
            )
            .build();
        let provider = SdkTracerProvider::builder()
            .with_span_processor(processor)
            .with_sampler(Sampler::ParentBased(Box::new(Sampler::TraceIdRatioBased(
                settings.sampling_ratio,
            ))))
            .with_resource(
                Resource::builder()
                    .with_service_name(settings.service_name.clone())
                    .build(),
            )
            .build();
        let tracer = provider.tracer("wharf");
        Ok(Self {
            inner: Some(Arc::new(Enabled { provider, tracer })),
        })
    }

    pub fn enabled(&self) -> bool {
        self.inner.is_some()
    }

    /// Starts a span now, a child of `parent` (a stored `traceparent`) when there is one and
    /// it reads, else the root of a new trace. `None` when tracing is off.
    pub fn span(
        &self,
        name: &'static str,
        kind: SpanKind,
        parent: Option<&str>,
        attributes: Vec<KeyValue>,
    ) -> Option<TraceSpan> {
        self.span_since(name, kind, parent, None, attributes)
    }

    /// Like `span`, started at `start` (work measured before it was known to be traced).
    pub fn span_since(
        &self,
        name: &'static str,
        kind: SpanKind,
        parent: Option<&str>,
        start: Option<SystemTime>,
        attributes: Vec<KeyValue>,
    ) -> Option<TraceSpan> {
        let enabled = self.inner.as_ref()?;
        let context = match parent.and_then(parse_traceparent) {
            Some(remote) => Context::new().with_remote_span_context(remote),
            None => Context::new(),
        };
        let mut builder = enabled
            .tracer
            .span_builder(name)
            .with_kind(kind)
            .with_attributes(attributes);
        if let Some(start) = start {
            builder = builder.with_start_time(start);
        }
        Some(TraceSpan(
            builder.start_with_context(&enabled.tracer, &context),
        ))
    }

    /// Sends what is still queued and stops the exporter (on shutdown). Blocks a thread of
    /// the blocking pool, not the runtime, while the last batch goes out.
    pub async fn shutdown(&self) {
        let Some(enabled) = self.inner.clone() else {
            return;
        };
        let done = tokio::task::spawn_blocking(move || enabled.provider.shutdown()).await;
        if let Ok(Err(e)) = done {
            tracing::warn!(error = %e, "traces: the last spans were not all exported");
        }
    }
}

/// One span; it ends when dropped (or at `end`).
pub struct TraceSpan(opentelemetry_sdk::trace::Span);

impl TraceSpan {
    /// This span's context as a W3C `traceparent` value.
    pub fn traceparent(&self) -> String {
        traceparent(self.0.span_context())
    }

    /// The `tracestate` to send beside `traceparent`, when it has entries.
    pub fn tracestate(&self) -> Option<String> {
        let state = self.0.span_context().trace_state().header();
        (!state.is_empty()).then_some(state)
    }

    pub fn set(&mut self, key: &'static str, value: impl Into<opentelemetry::Value>) {
        self.0.set_attribute(KeyValue::new(key, value));
    }

    /// Marks the span failed with a short, already redacted description.
    pub fn fail(&mut self, description: impl Into<String>) {
        self.0.set_status(Status::error(description.into()));
    }

    pub fn end(self) {}
}

/// `00-<trace id>-<span id>-<flags>`, as W3C Trace Context (version 00) writes it.
pub fn traceparent(context: &SpanContext) -> String {
    format!(
        "00-{}-{}-{:02x}",
        context.trace_id(),
        context.span_id(),
        context.trace_flags().to_u8()
    )
}

/// A `traceparent` (version 00) read back as a remote span context; `None` for anything
/// malformed or all-zero, which then starts a new trace rather than failing any work.
pub fn parse_traceparent(text: &str) -> Option<SpanContext> {
    let mut parts = text.trim().split('-');
    let (version, trace, span, flags) =
        (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
    let hex = |s: &str, len: usize| s.len() == len && s.bytes().all(|b| b.is_ascii_hexdigit());
    if parts.next().is_some()
        || version != "00"
        || !hex(trace, 32)
        || !hex(span, 16)
        || !hex(flags, 2)
    {
        return None;
    }
    let context = SpanContext::new(
        TraceId::from_hex(trace).ok()?,
        SpanId::from_hex(span).ok()?,
        TraceFlags::new(u8::from_str_radix(flags, 16).ok()?),
        true,
        TraceState::default(),
    );
    context.is_valid().then_some(context)
}

/// Longest one export may take; a collector slower than this loses that batch.
const EXPORT_TIMEOUT: Duration = Duration::from_secs(10);

/// The exporter's HTTP client: the reqwest (rustls with ring) the deliveries use, on a
/// runtime of its own. The batch processor exports from its own thread, outside any tokio
/// runtime, and must not wait on the server's runtime: a flush at shutdown blocks while
/// that runtime may be the one stopping.
#[derive(Debug)]
struct OtlpClient {
    client: reqwest::Client,
    runtime: Option<tokio::runtime::Runtime>,
}

impl OtlpClient {
    fn new() -> anyhow::Result<Self> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("wharf-otlp")
            .enable_all()
            .build()?;
        let client = reqwest::Client::builder()
            .user_agent(concat!("wharf/", env!("CARGO_PKG_VERSION")))
            .timeout(EXPORT_TIMEOUT)
            .redirect(reqwest::redirect::Policy::none())
            .build()?;
        Ok(Self {
            client,
            runtime: Some(runtime),
        })
    }
}

impl Drop for OtlpClient {
    fn drop(&mut self) {
        // Dropped wherever the processor ends, possibly inside an async context, where a
        // runtime may not be dropped the blocking way.
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

#[async_trait::async_trait]
impl opentelemetry_http::HttpClient for OtlpClient {
    async fn send_bytes(
        &self,
        request: http::Request<Bytes>,
    ) -> Result<http::Response<Bytes>, opentelemetry_http::HttpError> {
        let runtime = self.runtime.as_ref().ok_or("the exporter has stopped")?;
        let client = self.client.clone();
        runtime
            .spawn(async move {
                let request = reqwest::Request::try_from(request)?;
                let response = client.execute(request).await?;
                let mut answer = http::Response::builder().status(response.status());
                if let Some(headers) = answer.headers_mut() {
                    *headers = response.headers().clone();
                }
                let body = response.bytes().await?;
                Ok(answer.body(body)?)
            })
            .await?
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn traceparent_round_trips_and_refuses_what_is_not_one() {
        let text = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        let context = parse_traceparent(text).expect("valid");
        assert!(context.is_remote() && context.is_sampled());
        assert_eq!(traceparent(&context), text);
        for bad in [
            "",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
            "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-x",
            "00-+bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        ] {
            assert!(parse_traceparent(bad).is_none(), "{bad:?}");
        }
    }

    #[test]
    fn off_makes_no_spans() {
        let traces = Traces::off();
        assert!(!traces.enabled());
        assert!(traces.span("x", SpanKind::Internal, None, vec![]).is_none());
    }
}
