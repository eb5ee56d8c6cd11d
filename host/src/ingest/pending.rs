//! One request's submission made ready for its acceptance transaction, on the request's own
//! task rather than the writer's: the payload's id, hash and sealed bytes, and for each event
//! the inbox id its row would get and the tag linking that row to the payload
//! (`support::payload_link`), so that no reader takes another event's body for this one.

use sha2::{Digest, Sha256};
use tokio::sync::oneshot;
use uuid::Uuid;

use super::rows::{Acceptance, StoreError, Submission};
use crate::support::ids;
use crate::support::payload_link::{Link, LinkTag};
use crate::support::sealing::{PayloadKeys, Sealed};

/// Where a request's answer goes once its transaction has committed (or failed).
pub(super) type Reply = oneshot::Sender<Result<Vec<Acceptance>, StoreError>>;

pub(super) struct Pending {
    pub(super) submission: Submission,
    pub(super) payload_ref: Uuid,
    pub(super) payload_hash: [u8; 32],
    /// The body as stored: compressed and encrypted for this `payload_ref`.
    pub(super) sealed: Sealed,
    /// Per event, in order: the inbox id of the row it owns if it is new, and that row's link.
    pub(super) rows: Vec<(Uuid, LinkTag)>,
    pub(super) reply: Reply,
}

impl Pending {
    pub(super) fn new(submission: Submission, keys: &PayloadKeys, reply: Reply) -> Self {
        let payload_ref = ids::id_at(submission.received_at);
        let payload_hash: [u8; 32] = Sha256::digest(&submission.payload).into();
        let rows = submission
            .events
            .iter()
            .map(|e| {
                let inbox_id = ids::id_at(submission.received_at);
                let link = keys.link_tag(&Link {
                    inbox_id,
                    provider: &e.provider,
                    endpoint_id: &e.endpoint_id,
                    event_id: &e.event_id,
                    event_type: &e.event_type,
                    payload_ref,
                    span: e.payload_span,
                    payload_hash: &payload_hash,
                });
                (inbox_id, link)
            })
            .collect();
        Self {
            payload_ref,
            payload_hash,
            sealed: keys.seal(payload_ref, &submission.payload),
            rows,
            submission,
            reply,
        }
    }

    pub(super) fn events(&self) -> usize {
        self.submission.events.len()
    }
}
