//! `sweeptop classify [FILE|-] [--json]`: the failure kind found in a log
//! excerpt or an HTTP error body, or `none`.

use std::io::Read;
use std::path::{Path, PathBuf};

use super::{user, Context, Result};
use crate::model::text::display;

#[derive(clap::Args, Debug)]
pub struct ClassifyArgs {
    /// A file, or - for standard input (the default).
    input: Option<PathBuf>,
    /// The result as one JSON object (kind, message, evidence, numbers).
    #[arg(long)]
    json: bool,
    /// Also say which rule decided, on which line, and the lines around it
    /// (to write a plan `[[patterns]]` entry with confidence).
    #[arg(long)]
    explain: bool,
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
    let text = String::from_utf8_lossy(&bytes);
    if args.explain {
        let e = crate::detect::explain(&text);
        if args.json {
            super::print(&format!("{}\n", crate::model::text::to_json_pretty(&e)?))?;
        } else {
            let c = &e.classification;
            let mut out = format!("kind: {}\n", c.kind.map_or("none", |k| k.as_str()));
            if let Some(m) = &c.message {
                out.push_str(&format!("message: {}\n", display(m)));
            }
            out.push_str(&format!("rule: {}\n", display(&e.rule)));
            if let Some(n) = e.line {
                out.push_str(&format!("line: {n}\n"));
            }
            for w in &e.window {
                out.push_str(&format!("{}\n", display(w)));
            }
            super::print(&out)?;
        }
        return Ok(0);
    }
    let c = crate::detect::classify_text(&text);
    if args.json {
        super::print(&format!("{}\n", crate::model::text::to_json_pretty(&c)?))?;
    } else {
        super::print(&format!("{}\n", c.kind.map_or("none", |k| k.as_str())))?;
    }
    Ok(0)
}
