//! `wharf events list|show|replay|purge`: the event queries of `crate::operator`, printed as
//! columns or JSON, and purges through `crate::retention`. Reading a payload and purging are
//! audited: a row in `operator_audit` (written before the payload is shown) and a log line
//! name the operating-system account that did it.

use clap::Subcommand;
use serde_json::json;
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;
use uuid::Uuid;

use super::error::CliError;
use super::listing;
use crate::operator::DEFAULT_REPLAY_LIMIT;
use crate::operator::audit::{self, Actor};
use crate::operator::events::{self, Filter};
use crate::retention;
use crate::support::sealing::PayloadKeys;

#[derive(Subcommand)]
pub enum EventsCommand {
    /// Newest first: id, status, attempts, endpoint, type, provider event id, last error.
    List {
        /// PENDING, PROCESSING, PROCESSED or FAILED.
        #[arg(long)]
        status: Option<String>,
        #[arg(long)]
        endpoint: Option<String>,
        #[arg(long, default_value_t = 50)]
        limit: i64,
        /// One JSON object per line instead of columns.
        #[arg(long)]
        json: bool,
    },
    /// One event as JSON: metadata, redacted diagnostic, attempts, deliveries.
    Show {
        id: Uuid,
        /// Include the raw payload (it may hold personal data).
        #[arg(long)]
        payload: bool,
    },
    /// Requeue events (by id, or every event a filter selects) and their failed deliveries.
    Replay {
        ids: Vec<Uuid>,
        #[arg(long)]
        status: Option<String>,
        #[arg(long)]
        endpoint: Option<String>,
        #[arg(long, default_value_t = DEFAULT_REPLAY_LIMIT)]
        limit: i64,
        /// Also send again deliveries that were already sent.
        #[arg(long)]
        resend: bool,
        /// Count what would be requeued and change nothing.
        #[arg(long)]
        dry_run: bool,
    },
    /// Delete events received before a moment, with their markers, notices, deliveries and
    /// payloads (retention does this by itself after `[retention]` days; this is for an
    /// investigation or an erasure request). Prints what it deleted as JSON.
    Purge {
        /// RFC 3339, for example 2026-11-01T00:00:00Z.
        #[arg(long)]
        before: String,
        #[arg(long)]
        endpoint: Option<String>,
        /// Count what would go, delete nothing.
        #[arg(long)]
        dry_run: bool,
        /// Also events not finished (pending, processing, or with a pending delivery): what
        /// was acknowledged and not yet delivered is then lost.
        #[arg(long)]
        include_unfinished: bool,
        /// Events per transaction.
        #[arg(long, default_value_t = 500)]
        batch: i64,
    },
}

impl EventsCommand {
    /// Only `show --payload` reads payloads, so only it needs the keys.
    pub fn reads_payloads(&self) -> bool {
        matches!(self, Self::Show { payload: true, .. })
    }
}

pub async fn run(
    pool: &sqlx::PgPool,
    payload_keys: Option<&PayloadKeys>,
    command: EventsCommand,
) -> anyhow::Result<()> {
    match command {
        EventsCommand::List {
            status,
            endpoint,
            limit,
            json,
        } => {
            let filter = Filter {
                status,
                endpoint,
                limit,
            }
            .checked()?;
            let page = events::list(pool, &filter).await?;
            let columns = |r: &events::Summary| {
                Ok(format!(
                    "{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}",
                    r.inbox_id,
                    r.status,
                    r.attempt_count,
                    r.endpoint_id,
                    r.event_type,
                    r.provider_event_id,
                    r.received_at.format(&Rfc3339)?,
                    r.last_error.as_deref().unwrap_or_default()
                ))
            };
            // No silent cap: a list the limit cut short says so (after the rows).
            listing::print(
                json,
                "INBOX_ID\tSTATUS\tATTEMPTS\tENDPOINT\tTYPE\tEVENT_ID\tRECEIVED\tLAST_ERROR",
                &page.events,
                columns,
                page.remainder_note("--limit", limit),
            )?;
        }
        EventsCommand::Show { id, .. } => {
            let Some(event) = events::show(pool, id, payload_keys).await? else {
                anyhow::bail!("no event {id}");
            };
            if payload_keys.is_some() {
                // Who read a payload: the operating-system account that ran this command
                // (Wharf has no users of its own). The row first: no trail, no payload.
                let actor = Actor::this_process();
                audit::record(pool, "payload shown", &actor, json!({"inbox_id": id})).await?;
                tracing::warn!(target: "wharf::audit", inbox_id = %id, actor = ?actor,
                    "payload decrypted for an operator");
            }
            println!("{}", serde_json::to_string_pretty(&event)?);
        }
        EventsCommand::Replay {
            ids,
            status,
            endpoint,
            limit,
            resend,
            dry_run,
        } => {
            let filter = (status.is_some() || endpoint.is_some())
                .then(|| {
                    Filter {
                        status,
                        endpoint,
                        limit,
                    }
                    .checked()
                })
                .transpose()?;
            let selected = events::selection(pool, ids, filter.as_ref()).await?;
            anyhow::ensure!(
                !selected.ids.is_empty(),
                "name event ids, or select with --status/--endpoint"
            );
            let replayed = events::replay_or_count(pool, &selected.ids, resend, dry_run).await?;
            let mut report = serde_json::to_value(&replayed)?;
            if dry_run {
                report["dry_run"] = true.into();
            }
            println!("{report}");
        }
        EventsCommand::Purge {
            before,
            endpoint,
            dry_run,
            include_unfinished,
            batch,
        } => {
            let before_text = before.clone();
            let before =
                OffsetDateTime::parse(&before, &Rfc3339).map_err(|cause| CliError::Before {
                    text: before.clone(),
                    cause,
                })?;
            anyhow::ensure!((1..=10_000).contains(&batch), "--batch must be 1-10000");
            let what = retention::Purge {
                before,
                endpoint,
                include_unfinished,
                dry_run,
                batch,
            };
            let purged = retention::purge(pool, &what, |so_far| {
                tracing::info!(events = so_far.events, "purging");
            })
            .await?;
            if !dry_run {
                let actor = Actor::this_process();
                let detail = json!({"events": purged.events, "before": before_text,
                    "endpoint": what.endpoint});
                audit::record(pool, "events purged", &actor, detail).await?;
                tracing::warn!(target: "wharf::audit", actor = ?actor,
                    events = purged.events, "events purged by an operator");
            }
            println!("{}", serde_json::to_string(&purged)?);
        }
    }
    Ok(())
}
