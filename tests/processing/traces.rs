//! OpenTelemetry traces (`[tracing]`): one trace from the request through processing to each
//! delivery, exported over OTLP/HTTP to a real collector, and the delivery span's context sent
//! on the delivery itself; nothing of it without the setting.

use std::time::Duration;

use crate::support::collector::{Collector, ExportedSpan};
use crate::support::{app::*, http::*, nats::*, receiver::*, signing::*, wait::*};

/// A context a client sends with its request, which Wharf does not continue.
const CLIENT_TRACEPARENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

fn one<'a>(spans: &'a [ExportedSpan], name: &str) -> &'a ExportedSpan {
    let found: Vec<_> = spans.iter().filter(|s| s.name == name).collect();
    assert_eq!(found.len(), 1, "one {name} span: {spans:#?}");
    found[0]
}

fn attribute<'a>(span: &'a ExportedSpan, key: &str) -> &'a str {
    span.attributes
        .get(key)
        .map(String::as_str)
        .unwrap_or_else(|| panic!("{} has no {key}: {span:#?}", span.name))
}

fn traceparent_of(span: &ExportedSpan) -> String {
    format!("00-{}-{}-01", span.trace_id, span.span_id)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_trace_runs_from_the_request_through_processing_to_each_delivery() {
    let collector = Collector::start().await;
    let receiver = Receiver::start(Behaviour::ok()).await;
    let scope = NatsScope::new();
    let (subject, stream_name) = scope.deliveries_stream().await;
    let js = NatsScope::jetstream().await;
    let app = TestApp::builder()
        .workers(2)
        .append_toml(&scope.toml())
        .append_toml(&http_route_toml(&receiver.url, ""))
        .append_toml(&nats_route_toml("stripe", r#""*""#, &subject))
        .append_toml(&collector.toml())
        .start()
        .await;

    let (headers, body) = signed_stripe_event("evt_traced");
    let mut sent_headers = refs(&headers);
    // A client's context is not taken up: the request's span starts a trace of its own.
    sent_headers.push(("traceparent", CLIENT_TRACEPARENT));
    let answer = app.post("stripe", &sent_headers, body.clone()).await;
    assert_eq!(answer.status, 200);
    let inbox_id = answer.json["inbox_id"].as_str().unwrap().to_owned();
    wait_until_converged(&app.db).await;
    eventually(
        "the request's, the event's and both deliveries' spans exported",
        || async {
            let spans = collector.spans();
            ["wharf.ingest", "wharf.process", "wharf.deliver"]
                .iter()
                .all(|name| spans.iter().any(|s| &s.name == name))
                && spans.iter().filter(|s| s.name == "wharf.deliver").count() == 2
        },
    )
    .await;
    let spans = collector.spans();

    // The request's span is the root; its context is what the inbox row keeps.
    let ingest = one(&spans, "wharf.ingest");
    assert_eq!(ingest.parent_span_id, "", "a root span");
    assert!(!CLIENT_TRACEPARENT.contains(&ingest.trace_id));
    assert_eq!(ingest.service, "wharf-test");
    assert_eq!(attribute(ingest, "wharf.endpoint"), "stripe");
    assert_eq!(attribute(ingest, "wharf.provider"), "stripe");
    assert_eq!(attribute(ingest, "wharf.outcome"), "accepted");
    assert_eq!(attribute(ingest, "http.response.status_code"), "200");
    assert_eq!(attribute(ingest, "wharf.inbox_id"), inbox_id);
    let stored: Option<String> = sqlx::query_scalar("SELECT trace_context FROM webhook_inbox")
        .fetch_one(&app.db)
        .await
        .unwrap();
    assert_eq!(stored.as_deref(), Some(traceparent_of(ingest).as_str()));

    // Processing continues the request's trace, under its span.
    let process = one(&spans, "wharf.process");
    assert_eq!(process.trace_id, ingest.trace_id);
    assert_eq!(process.parent_span_id, ingest.span_id);
    assert_eq!(attribute(process, "wharf.inbox_id"), inbox_id);
    assert_eq!(attribute(process, "wharf.outcome"), "processed");
    assert_eq!(attribute(process, "wharf.deliveries_planned"), "2");

    // Each delivery attempt is a span of the same trace, and the delivery carries its context.
    let deliveries: Vec<&ExportedSpan> =
        spans.iter().filter(|s| s.name == "wharf.deliver").collect();
    for d in &deliveries {
        assert_eq!(d.trace_id, ingest.trace_id);
        assert_eq!(d.parent_span_id, ingest.span_id);
        assert_eq!(attribute(d, "wharf.outcome"), "sent");
        assert_eq!(attribute(d, "wharf.inbox_id"), inbox_id);
    }
    let by_sink = |sink: &str| {
        *deliveries
            .iter()
            .find(|d| attribute(d, "wharf.sink") == sink)
            .unwrap_or_else(|| panic!("a {sink} delivery span"))
    };
    let received = receiver.received();
    assert_eq!(received.len(), 1);
    let sent = received[0]
        .headers
        .get("traceparent")
        .expect("the HTTP delivery carries traceparent")
        .to_str()
        .unwrap();
    assert_eq!(sent, traceparent_of(by_sink("http")));
    assert!(
        received[0].headers.get("tracestate").is_none(),
        "no state to pass on"
    );

    let stream = js.get_stream(&stream_name).await.unwrap();
    let message = stream.get_raw_message(1).await.unwrap();
    assert_eq!(
        message.headers.get("traceparent").map(|v| v.as_str()),
        Some(traceparent_of(by_sink("nats")).as_str()),
        "the NATS delivery carries traceparent as a header"
    );

    // No span carries the signature or the body.
    let signature = &headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case("stripe-signature"))
        .unwrap()
        .1;
    for span in &spans {
        for value in span.attributes.values() {
            assert!(!value.contains(signature.as_str()), "{span:#?}");
            assert!(!value.contains(&body), "{span:#?}");
        }
    }

    app.shutdown().await;
    let _ = js.delete_stream(&stream_name).await;
    scope.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spans_still_queued_are_exported_at_shutdown() {
    let collector = Collector::start().await;
    // Exported every minute at most: only the flush at shutdown sends this test's span.
    let app = TestApp::builder()
        .workers(0)
        .append_toml(
            &collector
                .toml()
                .replace("export_interval_ms = 50", "export_interval_ms = 60000"),
        )
        .start()
        .await;
    app.post_stripe("evt_flushed").await.assert_status(200);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        collector.spans().is_empty(),
        "nothing sent before the interval"
    );
    app.shutdown().await;
    let spans = collector.spans();
    let ingest = one(&spans, "wharf.ingest");
    assert_eq!(attribute(ingest, "wharf.outcome"), "accepted");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_tracing_deliveries_carry_no_traceparent() {
    let (receiver, app) = start_app_delivering_to(Behaviour::ok(), "").await;
    let (headers, body) = signed_stripe_event("evt_untraced");
    let mut headers = refs(&headers);
    headers.push(("traceparent", CLIENT_TRACEPARENT));
    app.post("stripe", &headers, body).await.assert_status(200);
    wait_until_converged(&app.db).await;
    let received = receiver.received();
    assert_eq!(received.len(), 1);
    assert!(received[0].headers.get("traceparent").is_none());
    assert!(received[0].headers.get("tracestate").is_none());
    let stored: Option<String> = sqlx::query_scalar("SELECT trace_context FROM webhook_inbox")
        .fetch_one(&app.db)
        .await
        .unwrap();
    assert_eq!(stored, None);
    app.shutdown().await;
}
