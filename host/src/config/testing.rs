//! Valid configs to vary, shared by the tests of every table.

use std::path::{Path, PathBuf};

use super::Config;

/// A `[payloads]` table naming a key file that exists for the whole test run.
pub(super) fn payloads_table() -> String {
    static FILE: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    let file = FILE.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap().keep();
        let path = dir.join("keys.toml");
        let key = "A".repeat(43) + "=";
        std::fs::write(&path, format!("current = \"k\"\n[keys]\nk = \"{key}\"\n")).unwrap();
        path
    });
    format!(
        "\n[payloads]\nkey_file = {:?}\n",
        file.display().to_string()
    )
}

/// A valid config with `line` added to `table` (`server`, `database`, ..., `endpoint`).
pub(super) fn config_with(table: &str, line: &str) -> anyhow::Result<Config> {
    let mut tables = [
        ("server", "plain_http = true\n".to_owned()),
        ("database", "url = \"postgres://x/y\"\n".to_owned()),
        ("adapters", "dir = \"a\"\n".to_owned()),
        ("secrets", "file = \"s.toml\"\n".to_owned()),
        ("worker", String::new()),
    ];
    let mut endpoint = "id = \"e\"\nadapter = \"stripe\"\nsecret = \"e\"\n".to_owned();
    match tables.iter_mut().find(|(name, _)| *name == table) {
        Some((_, body)) => body.push_str(line),
        None if table == "endpoint" => endpoint.push_str(line),
        None => panic!("no table {table}"),
    }
    let mut text: String = tables
        .iter()
        .map(|(name, body)| format!("[{name}]\n{body}\n"))
        .collect();
    text.push_str(&format!("[[endpoint]]\n{endpoint}"));
    let dir = tempfile::tempdir()?;
    let keys = dir.path().join("keys.toml");
    std::fs::write(
        &keys,
        format!(
            "current = \"k\"\n[keys]\nk = \"{}\"\n",
            "A".repeat(43) + "="
        ),
    )?;
    text.push_str(&format!(
        "\n[payloads]\nkey_file = {:?}\n",
        keys.display().to_string()
    ));
    let config = Config::parse(&text, Path::new("/"))?;
    config.validate()?;
    Ok(config)
}
