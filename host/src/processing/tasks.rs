//! Starting every processing task: workers, both relays, the reconciler, and the NATS wake-ups.

use std::sync::Arc;

use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use super::context::Processing;
use super::deliveries::{DeliveryRelay, Lane};
use super::outbox::OutboxRelay;
use super::reconcile::Reconciler;
use super::worker::Worker;

impl Processing {
    /// Starts `workers` workers, both relays and the reconciler; each stops when `cancel`
    /// fires, after finishing or releasing what it holds.
    pub fn spawn(
        self: &Arc<Self>,
        workers: usize,
        cancel: &CancellationToken,
        tasks: &mut JoinSet<anyhow::Result<()>>,
    ) {
        for _ in 0..workers {
            let worker = Worker::new(Arc::clone(self));
            tasks.spawn(worker.run(cancel.clone()));
        }
        tasks.spawn(OutboxRelay::new(Arc::clone(self)).run(cancel.clone()));
        // One relay per delivery target, so a slow or dead target holds up only its own
        // deliveries; one more for rows whose route has left the config.
        let mut targets: Vec<(&str, &str)> = self
            .config
            .routes
            .iter()
            .map(|r| (r.sink.as_str(), r.target()))
            .collect();
        targets.sort();
        targets.dedup();
        for (sink, target) in targets {
            let lane = Lane::Target {
                sink: sink.to_owned(),
                target: target.to_owned(),
            };
            tasks.spawn(DeliveryRelay::new(Arc::clone(self), lane).run(cancel.clone()));
        }
        tasks.spawn(DeliveryRelay::new(Arc::clone(self), Lane::Unrouted).run(cancel.clone()));
        tasks.spawn(Reconciler::new(Arc::clone(self)).run(cancel.clone()));
        if let Some(nats) = &self.nats
            && workers > 0
        {
            let (nats, this, cancel) = (Arc::clone(nats), Arc::clone(self), cancel.clone());
            tasks.spawn(async move {
                nats.wake_on_accepted(&this.signals.work, &cancel).await;
                Ok(())
            });
        }
    }
}
