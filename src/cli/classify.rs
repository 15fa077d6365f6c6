//! `sweeptop classify [FILE|-] [--json]`: the failure kind found in a log
//! excerpt or an HTTP error body, or `none`.

use std::io::Read;
use std::path::{Path, PathBuf};

use super::{user, Context, Result};

#[derive(clap::Args, Debug)]
pub struct ClassifyArgs {
    /// A file, or - for standard input (the default).
    input: Option<PathBuf>,
    #[arg(long)]
    json: bool,
}

pub fn classify(args: ClassifyArgs) -> Result<u8> {
    let mut bytes = Vec::new();
    match &args.input {
        Some(p) if p != Path::new("-") => {
            bytes =
                std::fs::read(p).map_err(|e| user(format!("cannot read {}: {e}", p.display())))?;
        }
        _ => {
            std::io::stdin()
                .read_to_end(&mut bytes)
                .context(|| "cannot read standard input".into())?;
        }
    }
    let c = crate::detect::classify_text(&String::from_utf8_lossy(&bytes));
    if args.json {
        super::print(&format!("{}\n", crate::model::text::to_json_pretty(&c)?))?;
    } else {
        super::print(&format!("{}\n", c.kind.map_or("none", |k| k.as_str())))?;
    }
    Ok(0)
}
