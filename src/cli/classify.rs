//! `sweeptop classify [FILE|-] [--json] [--explain] [--exit-code N]
//! [--signal NAME]`: the failure kind found in a log excerpt or an HTTP error
//! body, or `none`.

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
    /// How the process whose log this is ended, when the script knows: its
    /// exit status (a shell's 128+N and Python's −N are read as signals). A
    /// stop (0, SIGINT, SIGTERM) is no failure unless a rule names one; any
    /// other end is classified by it, named by the last exception printed.
    #[arg(long, value_name = "N", allow_negative_numbers = true)]
    exit_code: Option<i32>,
    /// The signal that ended it: a name (`SEGV`, `SIGKILL`) or a number.
    #[arg(long, value_name = "NAME", value_parser = parse_signal)]
    signal: Option<i32>,
}

/// `SEGV`, `sigsegv`, `11` -> 11.
fn parse_signal(s: &str) -> std::result::Result<i32, String> {
    const NAMES: &[(&str, i32)] = &[
        ("HUP", 1),
        ("INT", 2),
        ("QUIT", 3),
        ("ILL", 4),
        ("TRAP", 5),
        ("ABRT", 6),
        ("BUS", 7),
        ("FPE", 8),
        ("KILL", 9),
        ("USR1", 10),
        ("SEGV", 11),
        ("USR2", 12),
        ("PIPE", 13),
        ("ALRM", 14),
        ("TERM", 15),
    ];
    if let Ok(n) = s.parse::<i32>() {
        if (1..=64).contains(&n) {
            return Ok(n);
        }
    }
    let upper = s.trim().to_ascii_uppercase();
    let name = upper.strip_prefix("SIG").unwrap_or(&upper);
    NAMES
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, v)| *v)
        .ok_or_else(|| {
            format!("not a signal: {s:?} (a name such as SEGV, KILL, TERM, or a number 1-64)")
        })
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
    let ended =
        (args.exit_code.is_some() || args.signal.is_some()).then_some(crate::detect::Ended {
            code: args.exit_code,
            signal: args.signal,
        });
    if args.explain {
        let e = crate::detect::explain(&text, ended);
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
    let c = crate::detect::classify_text_ended(&text, ended);
    if args.json {
        super::print(&format!("{}\n", crate::model::text::to_json_pretty(&c)?))?;
    } else {
        super::print(&format!("{}\n", c.kind.map_or("none", |k| k.as_str())))?;
    }
    Ok(0)
}
