//! The one NATS JetStream connection of a process: the `nats` delivery sink and the
//! accepted-events feed publish through it, each message with a `Nats-Msg-Id` so the
//! stream drops a resend inside its duplicate window, and each waits for the stream's
//! acknowledgement before the caller marks anything sent.

use std::str::FromStr as _;
use std::time::Duration;

use async_nats::jetstream;
use async_nats::{HeaderMap, HeaderName, HeaderValue};
use bytes::Bytes;
use tokio::sync::OnceCell;

use crate::config::NatsConfig;

pub struct Nats {
    config: NatsConfig,
    connection: OnceCell<(async_nats::Client, jetstream::Context)>,
}

impl Nats {
    /// Connects lazily: a NATS server that is down at start delays publishing (rows wait in
    /// their outbox), not the receiver.
    pub fn new(config: NatsConfig) -> Self {
        Self {
            config,
            connection: OnceCell::new(),
        }
    }

    async fn context(&self) -> anyhow::Result<&jetstream::Context> {
        Ok(&self.connection().await?.1)
    }

    async fn connection(&self) -> anyhow::Result<&(async_nats::Client, jetstream::Context)> {
        self.connection
            .get_or_try_init(|| async {
                let client = async_nats::ConnectOptions::new()
                    .connection_timeout(self.ack_timeout())
                    .connect(&self.config.url)
                    .await
                    .map_err(|e| anyhow::anyhow!("connecting to NATS: {e}"))?;
                let mut context = jetstream::new(client.clone());
                context.set_timeout(self.ack_timeout());
                Ok((client, context))
            })
            .await
    }

    fn ack_timeout(&self) -> Duration {
        Duration::from_millis(self.config.ack_timeout_ms)
    }

    /// Creates the accepted-events stream if it is missing.
    pub async fn ensure_accepted_stream(&self) -> anyhow::Result<()> {
        let context = self.context().await?;
        context
            .get_or_create_stream(jetstream::stream::Config {
                name: self.config.accepted_stream.clone(),
                subjects: vec![format!("{}.>", self.config.accepted_prefix)],
                max_age: Duration::from_secs(7 * 24 * 3600),
                duplicate_window: Duration::from_secs(600),
                ..Default::default()
            })
            .await
            .map_err(|e| anyhow::anyhow!("stream {}: {e}", self.config.accepted_stream))?;
        Ok(())
    }

    /// Wakes `signal` whenever an accepted-event notice is published by any host, so idle
    /// workers start at once rather than at their next poll. Retries the connection until
    /// cancelled; a lost notice only delays work until the next poll.
    pub async fn wake_on_accepted(
        &self,
        signal: &tokio::sync::Notify,
        cancel: &tokio_util::sync::CancellationToken,
    ) {
        use futures::StreamExt as _;
        while !cancel.is_cancelled() {
            let subscriber = match self.connection().await {
                Ok((client, _)) => client
                    .subscribe(format!("{}.>", self.config.accepted_prefix))
                    .await
                    .ok(),
                Err(_) => None,
            };
            let Some(mut subscriber) = subscriber else {
                tokio::select! {
                    _ = cancel.cancelled() => return,
                    _ = tokio::time::sleep(Duration::from_secs(5)) => continue,
                }
            };
            loop {
                tokio::select! {
                    _ = cancel.cancelled() => return,
                    message = subscriber.next() => match message {
                        Some(_) => signal.notify_one(),
                        None => break,
                    },
                }
            }
        }
    }

    /// The subject an outbox row's notice is published to.
    pub fn accepted_subject(&self, topic: &str) -> String {
        format!("{}.{topic}", self.config.accepted_prefix)
    }

    /// Publishes and waits for the stream's acknowledgement (at most `timeout`).
    pub async fn publish(
        &self,
        subject: String,
        headers: HeaderMap,
        payload: Bytes,
        timeout: Duration,
    ) -> anyhow::Result<()> {
        self.send(subject, headers, payload, timeout).await?.await
    }

    /// Publishes and returns the wait for the stream's acknowledgement, so that several
    /// messages can be in flight at once; the whole exchange takes at most `timeout`.
    pub async fn send(
        &self,
        subject: String,
        headers: HeaderMap,
        payload: Bytes,
        timeout: Duration,
    ) -> anyhow::Result<impl Future<Output = anyhow::Result<()>> + use<>> {
        let deadline = tokio::time::Instant::now() + timeout;
        let late = move || anyhow::anyhow!("no acknowledgement within {timeout:?}");
        let context = tokio::time::timeout_at(deadline, self.context())
            .await
            .map_err(|_| late())??;
        let ack = tokio::time::timeout_at(
            deadline,
            context.publish_with_headers(subject, headers, payload),
        )
        .await
        .map_err(|_| late())?
        .map_err(|e| anyhow::anyhow!("publish: {e}"))?;
        Ok(async move {
            tokio::time::timeout_at(deadline, ack)
                .await
                .map_err(|_| late())?
                .map_err(|e| anyhow::anyhow!("no acknowledgement: {e}"))?;
            Ok(())
        })
    }
}

/// A header that cannot be sent. Names the header, never quotes the value.
#[derive(Debug, thiserror::Error)]
#[error("{0} cannot be sent as a header value (it contains control characters)")]
pub struct InvalidHeader(pub String);

/// The headers of one message: `Nats-Msg-Id: <msg_id>` and `extra`, built fallibly (the
/// infallible conversions of async-nats panic on CR or LF).
pub fn headers(msg_id: &str, extra: &[(&str, &str)]) -> Result<HeaderMap, InvalidHeader> {
    let mut map = HeaderMap::new();
    for (name, value) in std::iter::once(("Nats-Msg-Id", msg_id)).chain(extra.iter().copied()) {
        let invalid = || InvalidHeader(name.to_owned());
        let header_name = HeaderName::from_str(name).map_err(|_| invalid())?;
        let header_value = HeaderValue::from_str(value).map_err(|_| invalid())?;
        map.insert(header_name, header_value);
    }
    Ok(map)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_values_that_cannot_be_headers_are_errors_not_panics() {
        let map = headers("id-1", &[("Wharf-Event-Type", "invoice.paid")]).unwrap();
        assert_eq!(map.get("Nats-Msg-Id").map(|v| v.as_str()), Some("id-1"));
        let error = headers("id-1", &[("Wharf-Event-Type", "a\r\nInjected: 1")]).unwrap_err();
        assert_eq!(error.0, "Wharf-Event-Type");
        assert!(!error.to_string().contains("Injected"));
        assert!(headers("a\nb", &[]).is_err());
    }
}
