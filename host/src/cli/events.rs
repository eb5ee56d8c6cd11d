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
use super::pretty_json;
use crate::operator::DEFAULT_REPLAY_LIMIT;
use crate::operator::audit::{self, Actor};
use crate::operator::events::{self, Filter};
use crate::operator::lookup;
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
    ///
    /// ID is the inbox id, or the provider's event id (`evt_…`); when that names events of
    /// several endpoints, they are listed: name one with --endpoint, or by its inbox id.
    Show {
        id: String,
        /// The endpoint whose event ID names.
        #[arg(long)]
        endpoint: Option<String>,
        /// Include the raw payload (it may hold personal data): a JSON body indented, other
        /// text as `utf8`, anything else as `base64`.
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
        EventsCommand::Show { id, endpoint, .. } => {
            let id = named_event(pool, &id, endpoint.as_deref()).await?;
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
            println!("{}", shown(event)?);
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

/// The inbox id of the one event `id` names (see `lookup::named`); none or several are an
/// error that says which, and how to name one.
async fn named_event(
    pool: &sqlx::PgPool,
    id: &str,
    endpoint: Option<&str>,
) -> anyhow::Result<Uuid> {
    let found = lookup::named(pool, id, endpoint).await?;
    match found.as_slice() {
        [one] => Ok(one.inbox_id),
        [] => match endpoint {
            Some(endpoint) => anyhow::bail!("no event {id:?} of endpoint {endpoint:?}"),
            None => {
                anyhow::bail!("no event {id:?} (neither an inbox id nor a provider's event id)")
            }
        },
        several => {
            let mut list = String::new();
            for n in several {
                list.push_str(&format!(
                    "\n  {}  endpoint {}  received {}",
                    n.inbox_id,
                    n.endpoint_id,
                    n.received_at.format(&Rfc3339)?
                ));
            }
            let endpoints: std::collections::BTreeSet<&str> =
                several.iter().map(|n| n.endpoint_id.as_str()).collect();
            let how = match endpoints.len() {
                1 => "name one by its inbox id",
                _ => "name one by its inbox id, or its endpoint with --endpoint",
            };
            anyhow::bail!("{id:?} names {} events:{list}\n{how}", several.len())
        }
    }
}

/// The event as indented JSON, a JSON payload (`payload.utf8`) shown as `payload.json`,
/// indented too, in its provider's own tokens (`pretty_json`).
fn shown(mut event: serde_json::Value) -> anyhow::Result<String> {
    let text = event["payload"]["utf8"].as_str().map(str::to_owned);
    let Some(text) = text else {
        return Ok(serde_json::to_string_pretty(&event)?);
    };
    // A placeholder no payload holds, replaced by the payload's own text once the rest is laid out.
    let marker = format!("payload-{}", Uuid::now_v7());
    event["payload"] = json!({ "json": marker });
    let laid_out = serde_json::to_string_pretty(&event)?;
    let quoted = format!("\"{marker}\"");
    let at = laid_out.find(&quoted).expect("the marker is in the output");
    let line_start = laid_out[..at].rfind('\n').map_or(0, |i| i + 1);
    let indent = laid_out[line_start..].len() - laid_out[line_start..].trim_start().len();
    Ok(match pretty_json::reindent(&text, indent) {
        Some(pretty) => laid_out.replacen(&quoted, &pretty, 1),
        None => {
            event["payload"] = json!({ "utf8": text });
            serde_json::to_string_pretty(&event)?
        }
    })
}
