//! Line progress for `--headless` runs and non-terminal stdout: one line per
//! meaningful event (worded by [`crate::view::text`]), good for `nohup` logs.
//! Write errors (a closed terminal) are ignored: the sweep must outlive its output.

use std::io::Write;

use tokio::sync::broadcast;

use crate::model::Event;
use crate::view::text::line;

/// Print events until the stream closes.
pub async fn print(mut rx: broadcast::Receiver<Event>) {
    loop {
        match rx.recv().await {
            Ok(ev) => {
                if let Some(l) = line(&ev) {
                    let mut out = std::io::stdout().lock();
                    let _ = writeln!(out, "{l}");
                    let _ = out.flush();
                }
            }
            Err(broadcast::error::RecvError::Lagged(n)) => {
                let _ = writeln!(
                    std::io::stdout().lock(),
                    "({n} events not shown; the run directory has them)"
                );
            }
            Err(broadcast::error::RecvError::Closed) => break,
        }
    }
}
