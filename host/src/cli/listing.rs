//! How a list command prints: a header and tab-separated columns, or one JSON object per line;
//! then the note on what its limit left out (on stderr with JSON, so the lines stay JSON).

use serde::Serialize;

pub fn print<T: Serialize>(
    json: bool,
    header: &str,
    rows: &[T],
    columns: impl Fn(&T) -> anyhow::Result<String>,
    note: Option<String>,
) -> anyhow::Result<()> {
    if !json {
        println!("{header}");
    }
    for row in rows {
        if json {
            println!("{}", serde_json::to_string(row)?);
        } else {
            println!("{}", columns(row)?);
        }
    }
    if let Some(note) = note {
        if json {
            eprintln!("{note}");
        } else {
            println!("{note}");
        }
    }
    Ok(())
}
