//! Steering through the filesystem: `commands.jsonl` in a run directory, an
//! append-only file of commands that the running sweep follows. It reaches a
//! sweep on another machine through a shared filesystem, where the control
//! socket cannot (`attach --send` falls back to it, and a sweep directory's
//! dashboard steers its shards with it).
//!
//! Each line is the socket protocol's command message,
//! `{"type":"command","command":{"command":"pause"},"from":"…"}`, written in
//! one `write` with `O_APPEND` and fsynced. The sweep reads the file from
//! where it ended when the sweep started (a command left from an earlier run
//! is never replayed), every [`POLL`]; a torn or unreadable line is skipped.
//! The source recorded for a command is `file (from …)`.

use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use tokio::sync::mpsc;

use super::{source_of, ClientMsg, MAX_COMMAND};
use crate::engine::Request;
use crate::model::Command;

pub const COMMANDS: &str = "commands.jsonl";
/// How often the sweep looks for new commands.
pub const POLL: Duration = Duration::from_millis(500);

/// Append one command to a run directory's `commands.jsonl`, durably.
pub fn append_command(run_dir: &Path, command: &Command, from: &str) -> io::Result<()> {
    let msg = ClientMsg::Command {
        command: command.clone(),
        from: Some(from.to_string()),
    };
    let mut line = serde_json::to_vec(&msg).map_err(io::Error::other)?;
    line.push(b'\n');
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(run_dir.join(COMMANDS))?;
    f.write_all(&line)?;
    f.sync_data()
}

/// What the file holds past `offset`: the commands of its complete lines (a
/// line that does not read is skipped), and the offset after the last one. A
/// partial last line waits for its end, unless it is longer than any command
/// may be, then it is skipped too.
fn read_new(path: &Path, offset: u64) -> io::Result<(Vec<(Command, String)>, u64)> {
    let mut f = std::fs::File::open(path)?;
    let len = f.metadata()?.len();
    // A file cut short (replaced) is followed from its new end.
    if len < offset {
        return Ok((Vec::new(), len));
    }
    f.seek(SeekFrom::Start(offset))?;
    let mut buf = Vec::new();
    f.take(4 << 20).read_to_end(&mut buf)?;
    let mut out = Vec::new();
    let mut consumed = 0usize;
    while let Some(nl) = buf[consumed..].iter().position(|&b| b == b'\n') {
        let line = &buf[consumed..consumed + nl];
        consumed += nl + 1;
        if let Ok(ClientMsg::Command { command, from }) = serde_json::from_slice(line) {
            let from = source_of(from);
            out.push((command, format!("file (from {from})")));
        }
    }
    if buf.len() - consumed > MAX_COMMAND as usize {
        consumed = buf.len();
    }
    Ok((out, offset + consumed as u64))
}

/// Follow `run_dir`'s `commands.jsonl` from its current end, sending each new
/// command to the sweep, until the sweep stops listening.
pub fn follow_commands(run_dir: &Path, tx: mpsc::Sender<Request>) -> tokio::task::JoinHandle<()> {
    let path: PathBuf = run_dir.join(COMMANDS);
    // Taken now, before the sweep starts: what is there is not for this run.
    let mut offset = std::fs::metadata(&path).map_or(0, |m| m.len());
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(POLL);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            if tx.is_closed() {
                return;
            }
            let (commands, next) = match read_new(&path, offset) {
                Ok(read) => read,
                // No file yet (or it went away): nothing asked.
                Err(_) => {
                    offset = 0;
                    continue;
                }
            };
            offset = next;
            for (command, source) in commands {
                if tx.send(Request { command, source }).await.is_err() {
                    return;
                }
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir(name: &str) -> PathBuf {
        let d =
            std::env::temp_dir().join(format!("sweeptop-cmdfile-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn lines_are_the_protocols_and_torn_or_foreign_ones_are_skipped() {
        let d = dir("read");
        append_command(&d, &Command::Pause, "alice@node1").unwrap();
        let text = std::fs::read_to_string(d.join(COMMANDS)).unwrap();
        assert_eq!(
            text,
            "{\"type\":\"command\",\"command\":{\"command\":\"pause\"},\"from\":\"alice@node1\"}\n"
        );
        {
            let mut f = std::fs::OpenOptions::new()
                .append(true)
                .open(d.join(COMMANDS))
                .unwrap();
            f.write_all(b"garbage\n{\"type\":\"command\"\n\xff\xfe\n")
                .unwrap();
        }
        append_command(
            &d,
            &Command::Exclude {
                config: "c1".into(),
            },
            "bad\nname",
        )
        .unwrap();
        // A torn last line (no newline yet) waits.
        {
            let mut f = std::fs::OpenOptions::new()
                .append(true)
                .open(d.join(COMMANDS))
                .unwrap();
            f.write_all(b"{\"type\":\"command\",\"comm").unwrap();
        }
        let (cmds, at) = read_new(&d.join(COMMANDS), 0).unwrap();
        assert_eq!(
            cmds,
            vec![
                (Command::Pause, "file (from alice@node1)".to_string()),
                (
                    Command::Exclude {
                        config: "c1".into()
                    },
                    "file (from attach)".to_string()
                ),
            ]
        );
        let len = std::fs::metadata(d.join(COMMANDS)).unwrap().len();
        assert_eq!(at, len - "{\"type\":\"command\",\"comm".len() as u64);
        // Read again from there: nothing new until the line ends.
        assert!(read_new(&d.join(COMMANDS), at).unwrap().0.is_empty());
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[tokio::test]
    async fn the_follower_starts_at_the_end_and_sends_what_follows() {
        let d = dir("follow");
        append_command(&d, &Command::Quit, "an earlier run").unwrap();
        let (tx, mut rx) = mpsc::channel(8);
        let task = follow_commands(&d, tx);
        append_command(&d, &Command::Resume, "script").unwrap();
        let req = tokio::time::timeout(Duration::from_secs(10), rx.recv())
            .await
            .expect("a command within the deadline")
            .unwrap();
        // The stale quit was never replayed.
        assert_eq!(req.command, Command::Resume);
        assert_eq!(req.source, "file (from script)");
        drop(rx);
        tokio::time::timeout(Duration::from_secs(10), task)
            .await
            .expect("the follower ends when the sweep stops listening")
            .unwrap();
        std::fs::remove_dir_all(&d).unwrap();
    }
}
