//! `--send-log`: when each streamed text chunk was handed to the connection,
//! a JSON line per request, written by a thread of its own so no request
//! waits on the file.

use std::io::Write;
use std::path::Path;
use std::sync::mpsc;

/// Start the writer; lines sent to it are appended to `path` (made anew).
pub fn start(path: &Path) -> std::io::Result<mpsc::Sender<String>> {
    let mut file = std::fs::File::create(path)?;
    let (tx, rx) = mpsc::channel::<String>();
    std::thread::Builder::new()
        .name("send-log".into())
        .spawn(move || {
            for line in rx {
                // One write per line: a server killed at the end of a bench
                // has every finished request in the file.
                if file.write_all(line.as_bytes()).is_err() {
                    break;
                }
            }
        })?;
    Ok(tx)
}

/// One request's line: its id and each text chunk's time (µs since its
/// head was in).
pub fn line(id: &str, sent_us: &[u64]) -> String {
    let mut s = serde_json::json!({ "id": id, "sent_us": sent_us }).to_string();
    s.push('\n');
    s
}
