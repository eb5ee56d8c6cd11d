//! Starting every processing task: workers, both relays, the reconciler, and the NATS wake-ups.

use std::collections::HashMap;
use std::sync::Arc;

use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use super::context::Processing;
use super::deliveries::{DeliveryRelay, Lane};
use super::outbox::OutboxRelay;
use super::reconcile::Reconciler;
use super::worker::Worker;
use crate::config::TargetKey;
use crate::support::shown::safe_url;

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
        // deliveries, started and stopped as routes reload; one more for rows whose route
        // has left the config.
        tasks.spawn(Arc::clone(self).supervise_relays(cancel.clone()));
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

impl Processing {
    /// Keeps one `DeliveryRelay` per target the current routes name: at start, then at each
    /// swap of the route table a relay for every new target, and a stop (its own child token)
    /// for every target no longer routed, whose pending rows then fall to the unrouted lane.
    /// A relay's error ends the supervisor with it, as it would end the process.
    async fn supervise_relays(self: Arc<Self>, cancel: CancellationToken) -> anyhow::Result<()> {
        let mut swapped = self.routes.subscribe();
        let mut running: HashMap<TargetKey, CancellationToken> = HashMap::new();
        let mut relays: JoinSet<anyhow::Result<()>> = JoinSet::new();
        let mut first = true;
        loop {
            swapped.mark_unchanged();
            let wanted = self.routes.load().targets();
            running.retain(|(sink, target), stop| {
                let kept = wanted.iter().any(|(s, t)| s == sink && t == target);
                if !kept {
                    tracing::info!(sink = %sink, target = %safe_url(target),
                        "delivery relay stopped: no route sends to this target");
                    stop.cancel();
                }
                kept
            });
            for key in wanted {
                if running.contains_key(&key) {
                    continue;
                }
                if !first {
                    tracing::info!(sink = %key.0, target = %safe_url(&key.1),
                        "delivery relay started for a new target");
                }
                let stop = cancel.child_token();
                let lane = Lane::Target {
                    sink: key.0.clone(),
                    target: key.1.clone(),
                };
                relays.spawn(DeliveryRelay::new(Arc::clone(&self), lane).run(stop.clone()));
                running.insert(key, stop);
            }
            first = false;
            tokio::select! {
                _ = cancel.cancelled() => break,
                changed = swapped.changed() => {
                    if changed.is_err() {
                        cancel.cancelled().await;
                        break;
                    }
                }
                Some(joined) = relays.join_next() => joined??,
            }
        }
        while let Some(joined) = relays.join_next().await {
            joined??;
        }
        Ok(())
    }
}
