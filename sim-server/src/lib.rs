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

mod args;
mod engine;
mod faults;
mod http;
mod logs;
mod startup;
mod timer;
mod tokenizer;
mod wire;

use std::time::Duration;

use tokio::net::TcpListener;

pub use args::{CrashKind, Fault, Flavor, Method, SimArgs};
pub use tokenizer::{count_tokens, CHAT_TOKENS_PER_MESSAGE, CHAT_TOKENS_PER_PROMPT};

use engine::Shared;
use logs::{Stream, Who};

/// Runs the simulated server until it is killed, a signal stops it (exit 0), or a
/// fault ends the process. Returns early only when the address cannot be bound.
pub async fn serve(mut args: SimArgs) -> std::io::Result<()> {
    let listener = match TcpListener::bind((args.host.as_str(), args.port)).await {
        Ok(l) => l,
        Err(e) => {
            logs::line(
                Stream::Stderr,
                format!(
                    "ERROR:    [Errno {}] error while attempting to bind on address ('{}', {}): {e}",
                    e.raw_os_error().unwrap_or(0),
                    args.host,
                    args.port
                ),
            );
            logs::flush(Duration::from_secs(1));
            return Err(e);
        }
    };
    args.port = listener.local_addr()?.port();
    let port = args.port;
    let shared = Shared::new(args);
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

/// SIGINT / SIGTERM: the shutdown lines, then exit 0.
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
    let style = &shared.style;
    let uvicorn = [
        "INFO:     Shutting down".to_string(),
        "INFO:     Waiting for application shutdown.".to_string(),
        "INFO:     Application shutdown complete.".to_string(),
        format!("INFO:     Finished server process [{}]", style.pid),
    ];
    match shared.args.flavor {
        Flavor::Vllm => {
            style.info(
                Who::Main,
                "launcher.py:80",
                "Shutting down FastAPI HTTP server.",
            );
            logs::lines(Stream::Stderr, uvicorn.to_vec());
        }
        Flavor::Sglang => {
            for l in &uvicorn {
                style.info(Who::Main, "", l);
            }
        }
    }
    logs::flush(Duration::from_secs(2));
    std::process::exit(0);
}
