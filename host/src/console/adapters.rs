//! Adapters: every file in the adapters folder and what became of it, read from the live
//! set at each request, so a hot reload shows without a restart.

use askama::Template;
use axum::extract::{Extension, State};
use axum::response::Response;

use super::guard::Signed;
use super::page::{Chrome, html};
use super::state::Console;
use crate::adapter::FileState;

pub struct AdapterRow {
    pub file: String,
    pub name: String,
    pub version: String,
    pub wit: String,
    pub sha256: String,
    pub signer: String,
    pub fixtures: String,
    pub loaded_at: String,
    /// The last attempt failed: the serving version, if any, is the previous one.
    pub last_error: String,
}

pub struct RefusedRow {
    pub file: String,
    pub reason: String,
    pub attempted_at: String,
}

#[derive(Template)]
#[template(path = "console/adapters.html")]
struct AdaptersPage {
    chrome: Chrome,
    serving: Vec<AdapterRow>,
    refused: Vec<RefusedRow>,
}

pub async fn page(
    State(console): State<Console>,
    Extension(signed): Extension<Signed>,
) -> Response {
    let set = console.0.http.ingest.adapters();
    let (mut serving, mut refused) = (Vec::new(), Vec::new());
    for f in set.files().values() {
        let or = |v: &Option<String>| v.clone().unwrap_or_default();
        if f.state == FileState::Serving {
            serving.push(AdapterRow {
                file: f.file.clone(),
                name: or(&f.adapter),
                version: or(&f.version),
                wit: or(&f.world),
                sha256: or(&f.sha256),
                signer: or(&f.signer),
                fixtures: f
                    .fixtures_passed
                    .map_or_else(|| "none".to_owned(), |n| format!("{n} passed")),
                loaded_at: or(&f.loaded_at),
                last_error: or(&f.last_error),
            });
        } else {
            refused.push(RefusedRow {
                file: f.file.clone(),
                reason: match (f.state, &f.last_error) {
                    (FileState::Removed, _) => "removed from the folder".to_owned(),
                    (_, Some(e)) => e.clone(),
                    (_, None) => "another file serves this adapter".to_owned(),
                },
                attempted_at: or(&f.last_attempt_at),
            });
        }
    }
    html(&AdaptersPage {
        chrome: Chrome::new(&signed.session, "adapters", "Adapters"),
        serving,
        refused,
    })
}
