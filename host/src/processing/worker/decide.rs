//! Deciding a batch's outcomes in version order, as if its events were applied one by one:
//! where an event sits in its object's order, the projection rows it is compared with, and
//! what the batch writes for each event (outcome, deliveries) and each object moved.

use std::collections::HashMap;

use sqlx::{Postgres, Transaction};

use crate::config::{EndpointConfig, RouteTable};
use crate::ingest::Claim;
use crate::support::columns::column;

/// (provider, endpoint id, object id): the key of `object_state`.
pub(super) type ObjectKey<'a> = (&'a str, &'a str, &'a str);

/// The projection row this event moves, when it names an object and a version.
pub(super) fn object(claim: &Claim) -> Option<ObjectKey<'_>> {
    Some((
        claim.provider.as_str(),
        claim.endpoint_id.as_str(),
        claim.object_id.as_deref()?,
    ))
    .filter(|_| claim.version_kind.is_some() && claim.version.is_some())
}

/// Where this event sits in its object's order: version, then event id.
fn position(claim: &Claim) -> Position<'_> {
    Position {
        created_at: claim.version_kind.as_deref() == Some("created_at"),
        version: claim.version.unwrap_or(i64::MIN),
        event_id: &claim.event_id,
    }
}

/// An object version: what the projection holds or what an event carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Position<'a> {
    created_at: bool,
    version: i64,
    event_id: &'a str,
}

impl Position<'_> {
    /// Whether an event at `self` moves a projection at `held`: `sequence` versions compare
    /// as numbers (equal is stale); `created_at` versions compare as (created, event id), so
    /// two events created in the same second still have one order (event ids in byte order).
    fn supersedes(&self, held: &Position<'_>) -> bool {
        self.version > held.version
            || (self.created_at && self.version == held.version && self.event_id > held.event_id)
    }
}

/// What processing did to the projection for one event (its `outcome` column).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Effect {
    /// The projection moved to this event's version.
    Applied,
    /// The projection already holds a newer version; nothing changed.
    Stale,
    /// The event names an object but carries no version: the projection is left alone
    /// rather than ordered by arrival.
    Unversioned,
    /// The event names no object.
    NoObject,
}

impl Effect {
    pub fn as_str(self) -> &'static str {
        match self {
            Effect::Applied => "applied",
            Effect::Stale => "stale",
            Effect::Unversioned => "unversioned",
            Effect::NoObject => "no_object",
        }
    }

    pub(super) fn parse(s: &str) -> Self {
        match s {
            "applied" => Effect::Applied,
            "stale" => Effect::Stale,
            "unversioned" => Effect::Unversioned,
            _ => Effect::NoObject,
        }
    }
}

/// A delivery: (sink, target, max attempts).
pub(super) type Target<'a> = (&'a str, &'a str, u32);

/// What a batch writes for one event.
pub(super) struct Planned<'a> {
    pub claim: &'a Claim,
    pub outcome: Effect,
    /// Applied now (writes the marker), rather than a requeue of an applied event.
    pub fresh: bool,
    pub targets: Vec<Target<'a>>,
}

/// A projection row a batch moves, to the version of `claim`.
pub(super) struct Moved<'a> {
    pub claim: &'a Claim,
    /// The row existed (and is locked); otherwise it is inserted.
    pub existing: bool,
    /// The event's bytes as they came, when `jsonb` can hold them and the endpoint keeps
    /// documents (`projection_document = "event"`).
    pub state: Option<&'a str>,
}

/// A projection row as stored.
pub(super) struct Stored {
    version_kind: String,
    version: i64,
    event_id: String,
}

impl Stored {
    fn position(&self) -> Position<'_> {
        Position {
            created_at: self.version_kind == "created_at",
            version: self.version,
            event_id: &self.event_id,
        }
    }
}

/// Locks the projection rows of `objects` that exist, in key order, and returns them.
pub(super) async fn lock_objects<'a>(
    tx: &mut Transaction<'_, Postgres>,
    objects: &[ObjectKey<'a>],
) -> Result<HashMap<ObjectKey<'a>, Stored>, sqlx::Error> {
    if objects.is_empty() {
        return Ok(HashMap::new());
    }
    let rows: Vec<(String, String, String, String, i64, String)> = sqlx::query_as(
        "SELECT o.provider, o.endpoint_id, o.object_id, o.version_kind, o.object_version,
                o.event_id
         FROM object_state o
         JOIN unnest($1::text[], $2::text[], $3::text[]) AS k(provider, endpoint_id, object_id)
           ON o.provider = k.provider AND o.endpoint_id = k.endpoint_id
          AND o.object_id = k.object_id
         ORDER BY o.provider, o.endpoint_id, o.object_id
         FOR UPDATE OF o",
    )
    .bind(column(objects, |k| k.0))
    .bind(column(objects, |k| k.1))
    .bind(column(objects, |k| k.2))
    .fetch_all(&mut **tx)
    .await?;
    let index: HashMap<ObjectKey<'a>, usize> =
        objects.iter().enumerate().map(|(i, k)| (*k, i)).collect();
    Ok(rows
        .into_iter()
        .filter_map(
            |(provider, endpoint_id, object_id, version_kind, version, event_id)| {
                let i =
                    *index.get(&(provider.as_str(), endpoint_id.as_str(), object_id.as_str()))?;
                Some((
                    objects[i],
                    Stored {
                        version_kind,
                        version,
                        event_id,
                    },
                ))
            },
        )
        .collect())
}

/// The outcomes of a batch's events that this transaction processes.
pub(super) struct Decided<'a> {
    /// One per `live` event, in its order.
    pub outcomes: Vec<Effect>,
    /// Each object moved, in first-moved order, with the index of the last claim that moved
    /// it: the projection row ends at that event.
    pub moved: Vec<(ObjectKey<'a>, usize)>,
}

/// Decides each live event's outcome (`live`: claim index, outcome already recorded by its
/// marker) in version order (claims are sorted), as if applied one by one, against the
/// projection rows `stored`; each object's row ends at the last event that moved it.
pub(super) fn decide<'a>(
    claims: &'a [Claim],
    live: &[(usize, Option<Effect>)],
    stored: &HashMap<ObjectKey<'a>, Stored>,
) -> Decided<'a> {
    let mut outcomes = Vec::with_capacity(live.len());
    let mut newest: HashMap<ObjectKey<'_>, (Position<'_>, usize)> = HashMap::new();
    let mut moved: Vec<ObjectKey<'_>> = Vec::new();
    for &(i, done) in live {
        let claim = &claims[i];
        let outcome = match (done, object(claim)) {
            (Some(done), _) => done,
            (None, None) if claim.object_id.is_none() => Effect::NoObject,
            (None, None) => Effect::Unversioned,
            (None, Some(key)) => {
                let held = newest
                    .get(&key)
                    .map(|(position, _)| *position)
                    .or_else(|| stored.get(&key).map(Stored::position));
                let position = position(claim);
                if held.is_none_or(|held| position.supersedes(&held)) {
                    if newest.insert(key, (position, i)).is_none() {
                        moved.push(key);
                    }
                    Effect::Applied
                } else {
                    Effect::Stale
                }
            }
        };
        outcomes.push(outcome);
    }
    let moved = moved.into_iter().map(|key| (key, newest[&key].1)).collect();
    Decided { outcomes, moved }
}

/// The (sink, target, max attempts) of every route matching the event; two routes to the
/// same target are one delivery.
pub(super) fn delivery_targets<'a>(
    routes: &'a RouteTable,
    endpoint: &EndpointConfig,
    claim: &Claim,
) -> Vec<Target<'a>> {
    let mut targets: Vec<_> = routes
        .iter()
        .filter(|r| r.matches(&endpoint.id, &claim.event_type))
        .map(|r| (r.sink.as_str(), r.target(), r.max_attempts))
        .collect();
    targets.sort();
    targets.dedup_by(|a, b| (a.0, a.1) == (b.0, b.1));
    targets
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(n: u128, object: Option<&str>, kind: Option<&str>, version: Option<i64>) -> Claim {
        Claim {
            object_id: object.map(str::to_owned),
            version_kind: kind.map(str::to_owned),
            version,
            ..Claim::example(n)
        }
    }

    #[test]
    fn a_batch_decides_as_if_applied_one_by_one() {
        let claims = [
            event(1, None, None, None),
            event(2, Some("a"), None, None),
            event(3, Some("a"), Some("sequence"), Some(1)),
            event(4, Some("a"), Some("sequence"), Some(1)),
            event(5, Some("a"), Some("sequence"), Some(2)),
            event(6, Some("b"), Some("sequence"), Some(5)),
            event(7, Some("c"), Some("sequence"), Some(9)),
        ];
        // The last is a requeue: its marker recorded it stale.
        let mut live: Vec<(usize, Option<Effect>)> = (0..6).map(|i| (i, None)).collect();
        live.push((6, Some(Effect::Stale)));
        let stored = HashMap::from([(
            ("stripe", "stripe", "b"),
            Stored {
                version_kind: "sequence".into(),
                version: 7,
                event_id: "evt_0".into(),
            },
        )]);
        let decided = decide(&claims, &live, &stored);
        use Effect::*;
        assert_eq!(
            decided.outcomes,
            [NoObject, Unversioned, Applied, Stale, Applied, Stale, Stale],
            "an equal sequence is stale; a requeue keeps its recorded outcome"
        );
        assert_eq!(decided.moved, [(("stripe", "stripe", "a"), 4)]);
    }

    #[test]
    fn created_at_ties_are_ordered_by_event_id() {
        let older = event(1, Some("a"), Some("created_at"), Some(10));
        let newer = event(2, Some("a"), Some("created_at"), Some(10));
        assert!(position(&newer).supersedes(&position(&older)));
        assert!(!position(&older).supersedes(&position(&newer)));
        let sequence = event(2, Some("a"), Some("sequence"), Some(10));
        assert!(!position(&sequence).supersedes(&position(&older)));
    }
}
