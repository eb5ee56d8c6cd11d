//! `wharf deliveries list|show|replay`: the delivery queries of `crate::operator`, printed as
//! columns or JSON. A list that leaves deliveries out says so, with the next page's cursor.

use clap::{Args, Subcommand};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;
use uuid::Uuid;

use super::error::InstantError;
use super::listing;
use crate::operator::deliveries::{self, Filter, ReplayRequest};
use crate::operator::{DEFAULT_REPLAY_LIMIT, OperatorError};

#[derive(Subcommand)]
pub enum DeliveriesCommand {
    /// Oldest first: id, inbox id, status, attempts, endpoint, sink, target, created, sent,
    /// last error. When more match than `--limit`, a last line says how many and how to go on.
    List {
        #[command(flatten)]
        filter: FilterArgs,
        /// Continue after this delivery (the cursor the previous page printed).
        #[arg(long)]
        after: Option<Uuid>,
        #[arg(long, default_value_t = 100)]
        limit: i64,
        /// One JSON object per line instead of columns (the note on what was left out goes
        /// to stderr).
        #[arg(long)]
        json: bool,
    },
    /// One delivery as JSON, with its event's summary (never the payload).
    Show { id: Uuid },
    /// Requeue deliveries (by id, or every one a filter selects): `FAILED` ones and `PENDING`
    /// ones waiting for a retry are sent again now, with fresh attempts and the same
    /// Idempotency-Key.
    Replay {
        ids: Vec<Uuid>,
        #[command(flatten)]
        filter: FilterArgs,
        /// Most deliveries a filter selects, oldest first.
        #[arg(long, default_value_t = DEFAULT_REPLAY_LIMIT)]
        limit: i64,
        /// Also send again deliveries that were already sent.
        #[arg(long)]
        resend: bool,
        /// Print what would be requeued and change nothing.
        #[arg(long)]
        dry_run: bool,
        /// The report as one JSON object.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Args)]
pub struct FilterArgs {
    /// PENDING, SENT or FAILED.
    #[arg(long)]
    status: Option<String>,
    /// The URL or subject deliveries go to.
    #[arg(long)]
    target: Option<String>,
    /// http or nats.
    #[arg(long)]
    sink: Option<String>,
    /// The endpoint the event arrived on.
    #[arg(long)]
    endpoint: Option<String>,
    /// Planned at or after this instant (RFC 3339, e.g. 2026-12-01T00:00:00Z).
    #[arg(long, value_parser = instant)]
    since: Option<OffsetDateTime>,
    /// Planned before this instant (RFC 3339).
    #[arg(long, value_parser = instant)]
    until: Option<OffsetDateTime>,
}

impl FilterArgs {
    fn checked(self) -> Result<Filter, OperatorError> {
        Filter {
            status: self.status,
            target: self.target,
            sink: self.sink,
            endpoint: self.endpoint,
            since: self.since,
            until: self.until,
        }
        .checked()
    }
}

fn instant(text: &str) -> Result<OffsetDateTime, InstantError> {
    OffsetDateTime::parse(text, &Rfc3339).map_err(InstantError)
}

fn time(t: OffsetDateTime) -> String {
    t.format(&Rfc3339).unwrap_or_default()
}

pub async fn run(pool: &sqlx::PgPool, command: DeliveriesCommand) -> anyhow::Result<()> {
    match command {
        DeliveriesCommand::List {
            filter,
            after,
            limit,
            json,
        } => {
            let page = deliveries::list(pool, &filter.checked()?, after, limit).await?;
            let columns = |d: &deliveries::Summary| {
                Ok(format!(
                    "{}\t{}\t{}\t{}/{}\t{}\t{}\t{}\t{}\t{}\t{}",
                    d.delivery_id,
                    d.inbox_id,
                    d.status,
                    d.attempt_count,
                    d.max_attempts,
                    d.endpoint_id,
                    d.sink,
                    d.target,
                    time(d.created_at),
                    d.sent_at.map(time).unwrap_or_default(),
                    d.last_error.as_deref().unwrap_or_default()
                ))
            };
            listing::print(
                json,
                "DELIVERY_ID\tINBOX_ID\tSTATUS\tATTEMPTS\tENDPOINT\tSINK\tTARGET\tCREATED\tSENT\tLAST_ERROR",
                &page.deliveries,
                columns,
                page.remainder_note(),
            )?;
        }
        DeliveriesCommand::Show { id } => {
            let Some(delivery) = deliveries::show(pool, id).await? else {
                anyhow::bail!("no delivery {id}");
            };
            println!("{}", serde_json::to_string_pretty(&delivery)?);
        }
        DeliveriesCommand::Replay {
            ids,
            filter,
            limit,
            resend,
            dry_run,
            json,
        } => {
            let request = ReplayRequest {
                ids,
                filter: filter.checked()?,
                limit,
                resend,
                dry_run,
            };
            let replayed = deliveries::replay(pool, &request).await?;
            if json {
                println!("{}", serde_json::to_string(&replayed)?);
            } else {
                let verb = if dry_run { "would requeue" } else { "requeued" };
                for d in &replayed.requeued {
                    println!(
                        "{verb}\t{}\t{}\t{}\t{}\t{}",
                        d.delivery_id, d.status, d.endpoint_id, d.sink, d.target
                    );
                }
                println!("{}", replayed.summary(limit));
            }
        }
    }
    Ok(())
}
