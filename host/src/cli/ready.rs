//! The ready banner `wharf dev` prints on stderr once it serves: where to send webhooks, where
//! the admin listener and the console are, and what to run next. For a person: the JSON line
//! on stdout stays the machine-readable one.

use std::fmt::Write as _;
use std::net::SocketAddr;

use crate::config::Config;

/// The address `examples/send.sh` sends to when `WHARF_URL` is unset.
const SEND_DEFAULT: &str = "127.0.0.1:8080";

pub struct Ready {
    endpoints: Vec<String>,
    scheme: &'static str,
    sink: Option<SocketAddr>,
}

impl Ready {
    /// What `wharf dev` serves: `config`'s endpoints, and the local sink when it runs.
    pub fn dev(config: &Config, sink: Option<SocketAddr>) -> Self {
        Self {
            endpoints: config.endpoints.iter().map(|e| e.id.clone()).collect(),
            scheme: if config.server.tls.is_some() {
                "https"
            } else {
                "http"
            },
            sink,
        }
    }

    /// The banner, for the addresses the listeners bound.
    pub fn text(&self, listening: SocketAddr, admin: Option<SocketAddr>) -> String {
        let mut t = String::from("\nwharf dev is ready.\n\nWebhook URLs, one per endpoint:\n");
        let width = self.endpoints.iter().map(String::len).max().unwrap_or(0);
        for id in &self.endpoints {
            let _ = writeln!(
                t,
                "  {id:<width$}  {}://{listening}/webhooks/{id}",
                self.scheme
            );
        }
        if let Some(admin) = admin {
            let _ = writeln!(
                t,
                "Admin:    http://{admin}/ (/healthz, /metrics, /admin/*)"
            );
            let _ = writeln!(t, "Console:  http://{admin}/console/");
        }
        if let Some(sink) = self.sink {
            let _ = writeln!(
                t,
                "Sink:     http://{sink}/ (the example route delivers here; one line each below)"
            );
        }
        let wharf = this_binary();
        let send = match listening.to_string() == SEND_DEFAULT && self.scheme == "http" {
            true => String::new(),
            false => format!("WHARF_URL={}://{listening} ", self.scheme),
        };
        let _ = write!(
            t,
            "\nNext, in another terminal in this folder:\n  {send}examples/send.sh all\n  \
             {wharf} events list\n  {wharf} deliveries list\nCtrl-C stops it.\n\n"
        );
        t
    }
}

/// How to call this binary from here: relative to the current folder when inside it
/// (`target/debug/wharf` under `cargo xtask dev`), else as installed.
fn this_binary() -> String {
    let exe = std::env::current_exe().ok();
    let here = std::env::current_dir().ok();
    match (exe, here) {
        (Some(exe), Some(here)) => match exe.strip_prefix(&here) {
            Ok(rel) => rel.display().to_string(),
            Err(_) => exe.display().to_string(),
        },
        _ => "wharf".to_owned(),
    }
}
