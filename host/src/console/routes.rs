//! The console's routes and the guards in front of them: sign-in and the stylesheet are
//! open; every page needs a session; every POST a CSRF token; reveal and replay an admin.

use axum::Router;
use axum::middleware::{from_fn, from_fn_with_state};
use axum::response::Redirect;
use axum::routing::{get, post};

use super::guard::{admin_only, posts_carry_csrf, security_headers, signed_in, whole_form};
use super::state::Console;
use super::{adapters, assets, deliveries, endpoints, events, overview, signin};

impl Console {
    /// The routes under `/console/`, to merge into the admin listener's router.
    pub fn router(self) -> Router {
        let admin = Router::new()
            .route("/console/events/{id}/reveal", post(events::reveal))
            .route("/console/deliveries/replay", post(deliveries::replay_many))
            .route(
                "/console/deliveries/{id}/replay",
                post(deliveries::replay_one),
            )
            .route_layer(from_fn(admin_only));
        let pages = Router::new()
            .route("/console/", get(overview::page))
            .route("/console/events", get(events::list))
            .route("/console/events/{id}", get(events::show))
            .route("/console/deliveries", get(deliveries::list))
            .route("/console/deliveries/{id}", get(deliveries::show))
            .route("/console/adapters", get(adapters::page))
            .route("/console/endpoints", get(endpoints::page))
            .route("/console/signout", post(signin::sign_out))
            .merge(admin)
            .route_layer(from_fn(posts_carry_csrf))
            .route_layer(from_fn_with_state(self.clone(), signed_in));
        Router::new()
            .route(
                "/console",
                get(|| async { Redirect::permanent("/console/") }),
            )
            .route("/console/signin", get(signin::page).post(signin::sign_in))
            .route("/console/assets/console.css", get(assets::css))
            .merge(pages)
            .layer(from_fn_with_state(self.clone(), whole_form))
            .layer(from_fn(security_headers))
            .with_state(self)
    }
}
