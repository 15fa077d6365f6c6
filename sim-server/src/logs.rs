//! Log output, and what a log line is made of: its level, who writes it, the
//! time it carries. (The imitated server's style, its prefixes, is `style.rs`.)
//!
//! Lines go through one writer thread so that the async workers never block on a
//! full pipe (a slow reader must not disturb token pacing); each line is flushed as
//! it is written. Timestamps come from the wall clock, formatted here in UTC.

use std::io::Write;
use std::sync::mpsc;
use std::sync::OnceLock;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    Stdout,
    Stderr,
}

enum Msg {
    /// Lines written together, without another writer's line in between.
    Lines(Stream, Vec<String>),
    Flush(mpsc::Sender<()>),
}

fn writer() -> &'static mpsc::Sender<Msg> {
    static WRITER: OnceLock<mpsc::Sender<Msg>> = OnceLock::new();
    WRITER.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<Msg>();
        let spawned = std::thread::Builder::new()
            .name("sim-log".into())
            .spawn(move || {
                for msg in rx {
                    match msg {
                        Msg::Lines(stream, lines) => write_lines(stream, &lines),
                        Msg::Flush(done) => {
                            let _ = done.send(());
                        }
                    }
                }
            });
        if spawned.is_err() {
            // No thread: lines are dropped rather than blocking a worker.
        }
        tx
    })
}

/// Writes lines to the process's stdout or stderr directly (holding its lock, so
/// the lines stay together), flushing at the end. Errors (closed pipe) are ignored.
pub fn write_lines(stream: Stream, lines: &[String]) {
    let mut buf = String::with_capacity(lines.iter().map(|l| l.len() + 1).sum());
    for l in lines {
        buf.push_str(l);
        buf.push('\n');
    }
    match stream {
        Stream::Stdout => {
            let mut out = std::io::stdout().lock();
            let _ = out.write_all(buf.as_bytes());
            let _ = out.flush();
        }
        Stream::Stderr => {
            let mut err = std::io::stderr().lock();
            let _ = err.write_all(buf.as_bytes());
            let _ = err.flush();
        }
    }
}

pub fn line(stream: Stream, text: String) {
    let _ = writer().send(Msg::Lines(stream, vec![text]));
}

pub fn lines(stream: Stream, lines: Vec<String>) {
    if !lines.is_empty() {
        let _ = writer().send(Msg::Lines(stream, lines));
    }
}

/// Waits (blocking, up to `timeout`) until every line sent before is written.
pub fn flush(timeout: Duration) {
    let (tx, rx) = mpsc::channel();
    if writer().send(Msg::Flush(tx)).is_ok() {
        let _ = rx.recv_timeout(timeout);
    }
}

/// Broken-down UTC time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Clock {
    pub year: i64,
    pub month: u32,
    pub day: u32,
    pub hour: u32,
    pub minute: u32,
    pub second: u32,
    pub nanos: u32,
}

impl Clock {
    pub fn now() -> Clock {
        let since = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default();
        Clock::from_unix(since.as_secs() as i64, since.subsec_nanos())
    }

    pub fn from_unix(secs: i64, nanos: u32) -> Clock {
        let days = secs.div_euclid(86_400);
        let rem = secs.rem_euclid(86_400);
        // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
        let z = days + 719_468;
        let era = z.div_euclid(146_097);
        let doe = z.rem_euclid(146_097);
        let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
        let mp = (5 * doy + 2) / 153;
        let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
        let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
        let year = yoe + era * 400 + i64::from(month <= 2);
        Clock {
            year,
            month,
            day,
            hour: (rem / 3600) as u32,
            minute: (rem / 60 % 60) as u32,
            second: (rem % 60) as u32,
            nanos,
        }
    }

    /// `2025-08-13 15:12:48` (SGLang, Python logging).
    pub fn datetime(&self) -> String {
        format!(
            "{:04}-{:02}-{:02} {:02}:{:02}:{:02}",
            self.year, self.month, self.day, self.hour, self.minute, self.second
        )
    }

    /// `08-13 15:12:48` (vLLM).
    pub fn short(&self) -> String {
        format!(
            "{:02}-{:02} {:02}:{:02}:{:02}",
            self.month, self.day, self.hour, self.minute, self.second
        )
    }

    /// `0813 15:12:48.123456789` (glog / c10 style, after the level letter).
    pub fn glog_time(&self) -> String {
        format!(
            "{:02}{:02} {:02}:{:02}:{:02}.{:09}",
            self.month, self.day, self.hour, self.minute, self.second, self.nanos
        )
    }
}

/// Python logging levels as the servers print them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    Info,
    Error,
}

impl Level {
    pub fn name(self) -> &'static str {
        match self {
            Level::Info => "INFO",
            Level::Error => "ERROR",
        }
    }
}

/// Who in the server writes a line; decides the prefix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Who {
    /// The API server process.
    Main,
    /// SGLang scheduler of a TP rank / vLLM EngineCore.
    Engine,
    /// A TP worker of the given rank (vLLM's `VllmWorker rank=N`, SGLang `TPN`).
    Rank(u32),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn civil_dates() {
        let c = Clock::from_unix(0, 0);
        assert_eq!(c.datetime(), "1970-01-01 00:00:00");
        // 2025-08-13 15:12:48 UTC
        let c = Clock::from_unix(1_755_097_968, 123);
        assert_eq!(c.datetime(), "2025-08-13 15:12:48");
        assert_eq!(c.short(), "08-13 15:12:48");
        assert_eq!(c.glog_time(), "0813 15:12:48.000000123");
        // Leap day.
        assert_eq!(
            Clock::from_unix(951_782_400, 0).datetime(),
            "2000-02-29 00:00:00"
        );
    }
}
