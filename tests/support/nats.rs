//! A NATS stream and subject prefix private to one test.

/// A NATS config private to one test: its own accepted-events stream and subject prefix.
pub struct NatsScope {
    pub prefix: String,
    pub stream: String,
}

/// A `[[route]]` sending `endpoint`'s `events` (a TOML array's items) to NATS `subject`.
pub fn nats_route_toml(endpoint: &str, events: &str, subject: &str) -> String {
    format!(
        "[[route]]\nendpoint = \"{endpoint}\"\nevents = [{events}]\nsink = \"nats\"\nsubject = \"{subject}\"\n"
    )
}

impl NatsScope {
    pub fn new() -> Self {
        let id = uuid::Uuid::now_v7().simple().to_string();
        Self {
            prefix: format!("wharf_test_{id}.accepted"),
            stream: format!("WHARF_TEST_{id}"),
        }
    }

    pub fn toml(&self) -> String {
        format!(
            "[nats]\nurl = \"nats://127.0.0.1:4222\"\naccepted_stream = \"{}\"\naccepted_prefix = \"{}\"\n",
            self.stream, self.prefix
        )
    }

    pub async fn jetstream() -> async_nats::jetstream::Context {
        let client = async_nats::connect("127.0.0.1:4222")
            .await
            .expect("NATS on 127.0.0.1:4222: see README (cargo xtask test starts it)");
        async_nats::jetstream::new(client)
    }

    /// A stream of this test's own for `nats` deliveries: (subject, stream name).
    pub async fn deliveries_stream(&self) -> (String, String) {
        let subject = format!("{}.deliveries", self.prefix.trim_end_matches(".accepted"));
        let stream_name = format!("{}_DELIVERIES", self.stream);
        Self::jetstream()
            .await
            .create_stream(async_nats::jetstream::stream::Config {
                name: stream_name.clone(),
                subjects: vec![subject.clone()],
                ..Default::default()
            })
            .await
            .unwrap();
        (subject, stream_name)
    }

    /// Messages the accepted-events stream holds.
    pub async fn accepted_messages(&self) -> u64 {
        let js = Self::jetstream().await;
        let mut stream = js.get_stream(&self.stream).await.expect("stream exists");
        stream.info().await.unwrap().state.messages
    }

    pub async fn cleanup(&self) {
        let js = Self::jetstream().await;
        let _ = js.delete_stream(&self.stream).await;
    }
}
