//! A real OTLP/HTTP collector on port 0: it decodes what the trace exporter posts to
//! `/v1/traces` (protobuf) and keeps every span.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::post;
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::any_value::Value;
use prost::Message as _;

/// One exported span: ids as lowercase hex, as `traceparent` writes them.
#[derive(Debug, Clone)]
pub struct ExportedSpan {
    pub name: String,
    pub trace_id: String,
    pub span_id: String,
    /// Empty for a root span.
    pub parent_span_id: String,
    /// String and integer attributes, as text.
    pub attributes: HashMap<String, String>,
    /// The resource's `service.name`.
    pub service: String,
}

pub struct Collector {
    /// The base URL, as `[tracing] otlp_endpoint` takes it.
    pub url: String,
    spans: Arc<Mutex<Vec<ExportedSpan>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Collector {
    pub async fn start() -> Self {
        let spans: Arc<Mutex<Vec<ExportedSpan>>> = Arc::default();
        let kept = Arc::clone(&spans);
        let app = axum::Router::new().route(
            "/v1/traces",
            post(
                move |headers: axum::http::HeaderMap, body: axum::body::Bytes| {
                    let kept = Arc::clone(&kept);
                    async move {
                        let protobuf = headers
                            .get(header::CONTENT_TYPE)
                            .is_some_and(|v| v == "application/x-protobuf");
                        let Ok(request) = ExportTraceServiceRequest::decode(body) else {
                            return StatusCode::BAD_REQUEST.into_response();
                        };
                        if !protobuf {
                            return StatusCode::UNSUPPORTED_MEDIA_TYPE.into_response();
                        }
                        kept.lock().unwrap().extend(flatten(request));
                        (
                            [(header::CONTENT_TYPE, "application/x-protobuf")],
                            ExportTraceServiceResponse::default().encode_to_vec(),
                        )
                            .into_response()
                    }
                },
            ),
        );
        let (addr, task) = super::receiver::serve_on_port_0(app).await;
        Self {
            url: format!("http://{addr}"),
            spans,
            task,
        }
    }

    pub fn spans(&self) -> Vec<ExportedSpan> {
        self.spans.lock().unwrap().clone()
    }

    /// The `[tracing]` table that sends spans here, flushed every 50 ms.
    pub fn toml(&self) -> String {
        format!(
            "[tracing]\notlp_endpoint = \"{}\"\nservice_name = \"wharf-test\"\nexport_interval_ms = 50\n",
            self.url
        )
    }
}

impl Drop for Collector {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn flatten(request: ExportTraceServiceRequest) -> Vec<ExportedSpan> {
    let mut out = Vec::new();
    for resource_spans in request.resource_spans {
        let service = resource_spans
            .resource
            .iter()
            .flat_map(|r| &r.attributes)
            .find(|kv| kv.key == "service.name")
            .and_then(|kv| text(kv.value.as_ref()?.value.as_ref()?))
            .unwrap_or_default();
        for scope in resource_spans.scope_spans {
            for span in scope.spans {
                out.push(ExportedSpan {
                    name: span.name,
                    trace_id: hex::encode(&span.trace_id),
                    span_id: hex::encode(&span.span_id),
                    parent_span_id: hex::encode(&span.parent_span_id),
                    attributes: span
                        .attributes
                        .iter()
                        .filter_map(|kv| {
                            Some((kv.key.clone(), text(kv.value.as_ref()?.value.as_ref()?)?))
                        })
                        .collect(),
                    service: service.clone(),
                });
            }
        }
    }
    out
}

fn text(value: &Value) -> Option<String> {
    match value {
        Value::StringValue(s) => Some(s.clone()),
        Value::IntValue(i) => Some(i.to_string()),
        Value::BoolValue(b) => Some(b.to_string()),
        _ => None,
    }
}
