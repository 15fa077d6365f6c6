//! The simulated inference server (`sweeptop sim-server`): a real HTTP server on
//! loopback that behaves like an OpenAI-compatible SGLang or vLLM server, with
//! their startup and serving logs, their error bodies, speculative-decoding stats,
//! and their failure modes (crashes, hangs, context overflows, log floods).
//!
//! The demo runs against it, and the tests use it as the double of a real server.
//! Nothing on the product path depends on it.
//!
//! Readiness: the socket is bound at once; until the ready line is printed every
//! endpoint answers 503 (`/health` with an empty body).
//!
//! # What it prints: the scripts
//!
//! The servers' texts (log line prefixes, startup, ready and shutdown lines,
//! uvicorn's access log, crash reports, decode stats, context-overflow messages)
//! are data, not code:
//! `sim-server/scripts/sglang.txt` and `vllm.txt` hold each server's own, and
//! `common.txt` what both print alike (PyTorch, CUDA, NCCL, Python, uvicorn). A
//! flavor's sections are looked up in its file first, then in `common.txt`. The
//! files are embedded at build time and parsed once; a unit test parses each and
//! renders every section for every flavor, crash kind and shape of server, so a
//! mistake in a script fails `cargo test`, never a user's run. The code decides
//! when a section is printed and supplies its values; each file's comments list
//! the values a section gets. What stays in code: HTTP bodies and request
//! validation messages, the `/metrics` exposition, and the log flood's filler
//! lines (generated at up to 1000 MB/s).
//!
//! The failure detector classifies these texts: change the wording of an error
//! only to match what the real server prints.
//!
//! ## The format
//!
//! One item per line; leading blanks (indentation) and trailing blanks never
//! count; a line whose first character is `#` is a comment.
//!
//! - `let NAME | TEXT` before the first section: a constant, `${NAME}` in every
//!   section of the file (and, for `common.txt`, of both flavors). No
//!   placeholders in TEXT.
//! - `== SECTION` or `== SECTION : HEAD` starts a section (names in `a-z 0-9 _ - .`);
//!   HEAD is the default of its lines.
//! - `HEAD | TEXT` is one line. TEXT starts after `| ` (the bar and one space) and
//!   runs to the end of the line, bars included; `|` alone is an empty line.
//!   HEAD may be empty.
//! - `HEAD > SECTION` prints the lines of another section here; HEAD fills in the
//!   head of those of its lines that lack one.
//! - `let NAME | TEXT` inside a section sets `${NAME}` for the rest of the section
//!   (of the `for rank` pass it is in).
//! - `if NAME=A,B` or `if NAME!=A,B`, then lines, optionally `else` and lines,
//!   then `end`: the first lines when the value's text is one of A, B (is none of
//!   them), the others otherwise. Blocks nest.
//! - `for rank`, lines, `end`: the lines once per TP rank (the first 8), with
//!   `${rank}` and the rank's numbers (`worker_pid`, `bus_id`, `assert_block`,
//!   `frame_addr_0` to `frame_addr_4`).
//!
//! HEAD is made of words, each at most once:
//!
//! - `@AT`: when the line appears, as a fraction (0 to 1) of `--startup-ms`
//!   (startup lines only; a line without one follows the line before it);
//! - a writer: `out` or `err` (the text as is, to stdout or stderr), or `main`,
//!   `engine`, `rank`, `rankN` (through the server's logger, which adds the
//!   flavor's prefix from its `log.main`, `log.engine` or `log.rank` section;
//!   `rank` is the rank being rendered). Without a writer, a line is written as
//!   is to stderr;
//! - `info` or `error`: the logger's level (default `info`; vLLM's logger writes
//!   INFO to stdout, everything else goes to stderr);
//! - `[file.py:123]`: the source tag vLLM's logger prints.
//!
//! A line's own head wins over its section's, which wins over the head of the
//! include that brought the section in.
//!
//! Placeholders: `${name}` is a value the code supplies, a `let`, or a constant;
//! `${name:.2}` a number with 2 decimals; `${name:,}` a whole number with
//! thousands separators (`1,234,567`). Built in: `${space}` (a space that must
//! survive at the end of a line), `${time}` (`2025-08-13 15:12:48`),
//! `${time_short}` (`08-13 15:12:48`), `${time_glog}` (`0813 15:12:48.123456789`).
//! There is no way to write `${` itself. A value that is missing when a section is
//! printed leaves its placeholder as written (and fails the unit test).

mod args;
mod cache;
mod engine;
mod faults;
mod http;
mod logs;
mod metrics;
mod script;
mod send_log;
mod startup;
mod style;
mod texts;
mod timer;
mod tokenizer;
mod wire;

use std::time::Duration;

use tokio::net::TcpListener;

pub use args::{CrashKind, Fault, Flavor, Method, SimArgs};
pub use tokenizer::{count_tokens, CHAT_TOKENS_PER_MESSAGE, CHAT_TOKENS_PER_PROMPT};

use engine::Shared;
use style::Style;

/// Runs the simulated server until it is killed, a signal stops it (exit 0), or a
/// fault ends the process. Returns early only when the address cannot be bound.
pub async fn serve(mut args: SimArgs) -> std::io::Result<()> {
    let listener = match TcpListener::bind((args.host.as_str(), args.port)).await {
        Ok(l) => l,
        Err(e) => {
            let style = Style::new(args.flavor);
            let errno = e.raw_os_error().unwrap_or(0);
            let lines = bind_error_lines(&style, &args.host, args.port, errno, &e.to_string());
            style.print(&lines);
            logs::flush(Duration::from_secs(1));
            return Err(e);
        }
    };
    args.port = listener.local_addr()?.port();
    let port = args.port;
    let send_log = match &args.send_log {
        Some(path) => Some(send_log::start(path).map_err(|e| {
            std::io::Error::new(e.kind(), format!("--send-log {}: {e}", path.display()))
        })?),
        None => None,
    };
    let shared = Shared::new(args);
    if let Some(tx) = send_log {
        let _ = shared.send_log.set(tx);
    }
    if let Some(mb_per_s) = shared.args.flood_mb_per_s() {
        faults::start_flood(shared.style.clone(), mb_per_s);
    }
    tokio::spawn(shutdown_on_signal(shared.clone()));
    let accept = tokio::spawn(http::accept_loop(listener, shared.clone()));
    startup::run(shared.clone(), port).await;
    tokio::spawn(engine::stats_loop(shared.clone()));
    let _ = accept.await;
    Ok(())
}

/// uvicorn's complaint about an address it cannot bind.
fn bind_error_lines(
    style: &Style,
    host: &str,
    port: u16,
    errno: i32,
    error: &str,
) -> Vec<script::Line<'static>> {
    let mut vars = style.vars();
    vars.set("host", host)
        .set("port", port)
        .set("errno", errno.to_string())
        .set("error", error);
    texts::texts().render(style.flavor, "bind-error", &vars)
}

/// SIGINT / SIGTERM: the flavor's `shutdown` lines, then exit 0.
async fn shutdown_on_signal(shared: std::sync::Arc<Shared>) {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate()).ok();
    let terminated = async {
        match term.as_mut() {
            Some(t) => {
                t.recv().await;
            }
            None => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = terminated => {}
    }
    let port = shared.args.port;
    shared
        .style
        .print(&startup::lines(&shared, port, "shutdown"));
    if shared.args.flood_mb_per_s().is_some() {
        logs::line(logs::Stream::Stderr, faults::flood_summary());
    }
    logs::flush(Duration::from_secs(2));
    std::process::exit(0);
}
