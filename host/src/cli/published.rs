//! Values Wharf publishes: the demo secrets, admin token and payload key of `examples/` (which
//! the release tarball ships as `etc/`). Anyone can sign, authenticate or decrypt with them, so
//! `serve`, `worker` and `config check` refuse a secrets or payload-key file that holds one;
//! only `wharf dev` serves them. Messages name the set and version or the key id, never the
//! value.

use std::collections::BTreeSet;

use crate::config::{Config, KeyPath, Problem};
use crate::support::sealing::KEY_ENV;

const EXAMPLE_SECRETS: &str = include_str!("../../../examples/secrets.toml");
const EXAMPLE_PAYLOAD_KEYS: &str = include_str!("../../../examples/payload-keys.toml");

/// A secrets file's `(set, index, version, value)` of every version, or none when it does not
/// parse (its own check reports that).
fn secret_values(text: &str) -> Vec<(String, usize, String, String)> {
    let Ok(table) = text.parse::<toml::Table>() else {
        return Vec::new();
    };
    let mut found = Vec::new();
    for (set, versions) in &table {
        let Some(versions) = versions.as_array() else {
            continue;
        };
        for (i, v) in versions.iter().enumerate() {
            let field = |k: &str| v.get(k).and_then(toml::Value::as_str).map(str::to_owned);
            if let Some(value) = field("value") {
                found.push((set.clone(), i, field("version").unwrap_or_default(), value));
            }
        }
    }
    found
}

/// A payload key file's `(id, base64)` pairs, or none when it does not parse.
fn key_values(text: &str) -> Vec<(String, String)> {
    let Ok(table) = text.parse::<toml::Table>() else {
        return Vec::new();
    };
    table
        .get("keys")
        .and_then(toml::Value::as_table)
        .into_iter()
        .flatten()
        .filter_map(|(id, v)| Some((id.clone(), v.as_str()?.trim().to_owned())))
        .collect()
}

/// The published values, secrets and payload keys alike.
fn published() -> BTreeSet<String> {
    secret_values(EXAMPLE_SECRETS)
        .into_iter()
        .map(|(.., value)| value)
        .chain(key_values(EXAMPLE_PAYLOAD_KEYS).into_iter().map(|(_, v)| v))
        .collect()
}

/// Each version of the secrets file (`secrets_text`) that holds a published value, at its key.
pub fn published_secrets(config: &Config, secrets_text: &str) -> Vec<Problem> {
    let published = published();
    let file = config.secrets.file.display();
    secret_values(secrets_text)
        .into_iter()
        .filter(|(.., value)| published.contains(value))
        .map(|(set, i, version, _)| {
            Problem::at_key(
                KeyPath::root(&set).index(i).key("value"),
                format!(
                    "{file}: set {set:?} version {version:?} holds a value published in Wharf's \
                     examples: anyone can sign with it. Replace it (only `wharf dev` serves \
                     the demo values)"
                ),
            )
        })
        .collect()
}

/// Each payload key of the key file and of `WHARF_PAYLOAD_KEY` (`env_key`) that is published.
pub fn published_keys(config: &Config, env_key: Option<&str>) -> Vec<Problem> {
    let published = published();
    let mut problems = Vec::new();
    let key_file = config
        .payloads
        .key_file
        .as_ref()
        .and_then(|p| Some((p, std::fs::read_to_string(p).ok()?)));
    if let Some((path, text)) = key_file {
        for (id, _) in key_values(&text)
            .into_iter()
            .filter(|(_, v)| published.contains(v))
        {
            problems.push(Problem::at_key(
                KeyPath::section("payloads", "key_file"),
                format!(
                    "{}: payload key {id:?} is the demo key published in Wharf's examples: \
                     anyone can decrypt with it. Make one with `wharf payloads new-key` (only \
                     `wharf dev` serves the demo key)",
                    path.display()
                ),
            ));
        }
    }
    if let Some((id, value)) = env_key.and_then(|v| v.split_once(':'))
        && published.contains(value.trim())
    {
        problems.push(Problem::nowhere(format!(
            "{KEY_ENV}: payload key {id:?} is the demo key published in Wharf's examples: make \
             one with `wharf payloads new-key`"
        )));
    }
    problems
}

/// What `serve` and `worker` run: refuse to start on a published value.
pub fn refuse_published(config: &Config) -> anyhow::Result<()> {
    let secrets = std::fs::read_to_string(&config.secrets.file).unwrap_or_default();
    let env_key = std::env::var(KEY_ENV).ok();
    let mut problems = published_secrets(config, &secrets);
    problems.extend(published_keys(config, env_key.as_deref()));
    match problems.first() {
        None => Ok(()),
        Some(first) => anyhow::bail!(
            "{}{}",
            first.message,
            match problems.len() {
                1 => String::new(),
                n => format!(" (and {} more; `wharf config check` lists them)", n - 1),
            }
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_examples_hold_published_values_and_fresh_ones_pass() {
        let secrets = secret_values(EXAMPLE_SECRETS);
        assert!(secrets.len() >= 4, "{}", secrets.len());
        assert_eq!(key_values(EXAMPLE_PAYLOAD_KEYS).len(), 1);
        let text = "[adapters]\ndir = \"a\"\n[secrets]\nfile = \"s.toml\"\n";
        let config = Config::parse(text, std::path::Path::new("/nonexistent")).unwrap();
        let found = published_secrets(&config, EXAMPLE_SECRETS);
        assert_eq!(found.len(), secrets.len());
        for p in &found {
            assert!(!p.message.contains("whsec_"), "{}", p.message);
        }
        let fresh = "[[s]]\nversion = \"1\"\nvalue = \"a-fresh-secret-of-this-host\"\n";
        assert!(published_secrets(&config, fresh).is_empty());
        let (id, key) = key_values(EXAMPLE_PAYLOAD_KEYS).remove(0);
        let env = format!("{id}:{key}");
        assert_eq!(published_keys(&config, Some(&env)).len(), 1);
        assert!(published_keys(&config, Some("k:AAAA")).is_empty());
    }
}
