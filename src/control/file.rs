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
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use tokio::sync::{broadcast, mpsc};

use super::{source_of, ClientMsg, MAX_COMMAND};
use crate::engine::Request;
use crate::model::{Command, Event, Level, Timestamp};
use crate::store::shared::{FileWork, FILE_DEADLINE};

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
    // Opened without waiting (a FIFO with no reader would wait forever) and
    // written only if it is a regular file.
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(run_dir.join(COMMANDS))?;
    if !f.metadata()?.file_type().is_file() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{COMMANDS} is not a regular file, refused"),
        ));
    }
    f.write_all(&line)?;
    f.sync_data()
}

/// Where the follower is in the file: which file it is (device and inode;
/// `None` before there is one) and how far it has been read.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Place {
    file: Option<(u64, u64)>,
    offset: u64,
}

/// What the file holds past `at`: the commands of its complete lines (a
/// line that does not read is skipped), and the place after the last one. A
/// partial last line waits for its end, unless it is longer than any command
/// may be, then it is skipped too. Without a place yet (the sweep starts),
/// the file's end is the place and nothing is read. A new file (another
/// inode, or one shorter than what was read: it was replaced, perhaps
/// within one poll) is read from its start. Anything but a regular file is
/// refused, without waiting on it.
fn read_new(path: &Path, at: Option<Place>) -> io::Result<(Vec<(Command, String)>, Place)> {
    use std::os::unix::fs::MetadataExt;
    let f = match crate::store::shared::open_regular(path) {
        Ok(f) => f,
        // No file yet (or it went away): nothing asked, and the next one
        // is new.
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok((Vec::new(), Place::default())),
        Err(e) => return Err(e),
    };
    let meta = f.metadata()?;
    let file = Some((meta.dev(), meta.ino()));
    let Some(at) = at else {
        // Taken as the sweep starts: what is there is not for this run.
        let offset = meta.len();
        return Ok((Vec::new(), Place { file, offset }));
    };
    let offset = if at.file != file || meta.len() < at.offset {
        0
    } else {
        at.offset
    };
    let mut f = f;
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
    let offset = offset + consumed as u64;
    Ok((out, Place { file, offset }))
}

/// Follow `run_dir`'s `commands.jsonl` from its end as the sweep starts
/// (taken before this returns, or within [`FILE_DEADLINE`]), sending each
/// new command to the sweep, until the sweep stops listening. The file is
/// read on a thread of its own: one that hangs (a dead mount) or is refused
/// (a FIFO) is a notice on `notices`, once, and the sweep never waits on it.
pub async fn follow_commands(
    run_dir: &Path,
    tx: mpsc::Sender<Request>,
    notices: broadcast::Sender<Event>,
) -> tokio::task::JoinHandle<()> {
    let path: PathBuf = run_dir.join(COMMANDS);
    let mut work = FileWork::new("commands-file");
    // What is there now is not for this run.
    let p = path.clone();
    let start = work.run(FILE_DEADLINE, move || read_new(&p, None)).await;
    let mut place: Option<Place> = match start {
        Ok(Ok((_, end))) => Some(end),
        // Refused (a FIFO): whatever regular file comes later is new.
        Ok(Err(_)) => Some(Place::default()),
        // Still hanging: its answer, when it comes, is the start.
        Err(_) => None,
    };
    tokio::spawn(async move {
        // The problem last said, so a lasting one is said once.
        let mut said: Option<String> = None;
        let mut tick = tokio::time::interval(POLL);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            if tx.is_closed() {
                return;
            }
            let p = path.clone();
            let problem = match work.run(FILE_DEADLINE, move || read_new(&p, place)).await {
                Ok(Ok((commands, next))) => {
                    place = Some(next);
                    for (command, source) in commands {
                        if tx.send(Request { command, source }).await.is_err() {
                            return;
                        }
                    }
                    None
                }
                Ok(Err(e)) => Some(format!(
                    "{} is not read: {e}; commands written to it are not obeyed",
                    path.display()
                )),
                Err(stuck) => Some(format!(
                    "{} is not read: {stuck}; commands written to it wait until it answers",
                    path.display()
                )),
            };
            if problem == said {
                continue;
            }
            let (level, message) = match &problem {
                Some(m) => (Level::Warn, m.clone()),
                None => (Level::Info, format!("{} is read again", path.display())),
            };
            said = problem;
            let _ = notices.send(Event::Notice {
                at: Timestamp::now(),
                level,
                message,
            });
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

    /// A FIFO in the commands file's place (with a reader or without) is
    /// refused at once: sending never waits on it.
    #[test]
    fn a_commands_file_that_is_a_fifo_is_refused_without_waiting() {
        let d = dir("fifo-send");
        let fifo = std::ffi::CString::new(d.join(COMMANDS).to_str().unwrap()).unwrap();
        // SAFETY: a valid path; mkfifo has no other precondition.
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
        let e = append_command(&d, &Command::Pause, "alice@node1").unwrap_err();
        assert!(
            e.raw_os_error() == Some(libc::ENXIO) || e.to_string().contains("not a regular file"),
            "{e}"
        );
        // With a reader waiting the open succeeds, and the type is refused.
        let reader = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(d.join(COMMANDS))
            .unwrap();
        let e = append_command(&d, &Command::Pause, "alice@node1").unwrap_err();
        assert!(e.to_string().contains("not a regular file"), "{e}");
        drop(reader);
        let _ = std::fs::remove_dir_all(&d);
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
        let (cmds, at) = read_new(&d.join(COMMANDS), Some(Place::default())).unwrap();
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
        assert_eq!(at.offset, len - "{\"type\":\"command\",\"comm".len() as u64);
        // Read again from there: nothing new until the line ends.
        assert!(read_new(&d.join(COMMANDS), Some(at)).unwrap().0.is_empty());
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[tokio::test]
    async fn the_follower_starts_at_the_end_and_sends_what_follows() {
        let d = dir("follow");
        append_command(&d, &Command::Quit, "an earlier run").unwrap();
        let (tx, mut rx) = mpsc::channel(8);
        let task = follow_commands(&d, tx, broadcast::channel(8).0).await;
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

    fn mkfifo(path: &Path) {
        let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
    }

    #[test]
    fn a_file_replaced_within_one_poll_is_read_from_its_start() {
        let d = dir("replaced");
        let path = d.join(COMMANDS);
        append_command(&d, &Command::Pause, "an earlier sender with a long name").unwrap();
        append_command(&d, &Command::Resume, "an earlier sender with a long name").unwrap();
        // The sweep starts: what is there is not for it.
        let (cmds, at) = read_new(&path, None).unwrap();
        assert!(cmds.is_empty());
        // Removed and written again before the next poll, shorter than
        // what was read.
        std::fs::remove_file(&path).unwrap();
        append_command(&d, &Command::Quit, "s").unwrap();
        assert!(std::fs::metadata(&path).unwrap().len() < at.offset);
        let (cmds, at) = read_new(&path, Some(at)).unwrap();
        assert_eq!(cmds, vec![(Command::Quit, "file (from s)".to_string())]);
        // Renamed over by a longer file (another inode): from its start too.
        let tmp = d.join("new");
        std::fs::create_dir_all(&tmp).unwrap();
        append_command(&tmp, &Command::Pause, "t").unwrap();
        append_command(&tmp, &Command::Resume, "t").unwrap();
        std::fs::rename(tmp.join(COMMANDS), &path).unwrap();
        assert!(std::fs::metadata(&path).unwrap().len() > at.offset);
        let (cmds, at) = read_new(&path, Some(at)).unwrap();
        assert_eq!(
            cmds,
            vec![
                (Command::Pause, "file (from t)".to_string()),
                (Command::Resume, "file (from t)".to_string()),
            ]
        );
        // The same file grown: only what is new.
        append_command(&d, &Command::Quit, "u").unwrap();
        let (cmds, _) = read_new(&path, Some(at)).unwrap();
        assert_eq!(cmds, vec![(Command::Quit, "file (from u)".to_string())]);
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[tokio::test]
    async fn a_fifo_is_a_notice_once_and_never_a_wait() {
        let d = dir("fifo");
        let path = d.join(COMMANDS);
        mkfifo(&path);
        let (tx, mut rx) = mpsc::channel(8);
        let (notices, mut heard) = broadcast::channel(64);
        let task = tokio::time::timeout(Duration::from_secs(10), follow_commands(&d, tx, notices))
            .await
            .expect("the follower starts without waiting on the FIFO");
        async fn next_notice(heard: &mut broadcast::Receiver<Event>) -> (Level, String) {
            match tokio::time::timeout(Duration::from_secs(10), heard.recv()).await {
                Ok(Ok(Event::Notice { level, message, .. })) => (level, message),
                other => panic!("no notice: {other:?}"),
            }
        }
        let (level, message) = next_notice(&mut heard).await;
        assert_eq!(level, Level::Warn);
        assert!(
            message.contains("commands.jsonl") && message.contains("FIFO"),
            "{message}"
        );
        // Polls go on: said once, not every poll.
        tokio::time::sleep(POLL * 3).await;
        assert!(heard.try_recv().is_err(), "the refusal is said once");
        // A regular file in its place is read from its start.
        std::fs::remove_file(&path).unwrap();
        append_command(&d, &Command::Pause, "script").unwrap();
        let req = tokio::time::timeout(Duration::from_secs(10), rx.recv())
            .await
            .expect("the command within the deadline")
            .unwrap();
        assert_eq!(req.command, Command::Pause);
        let (level, message) = next_notice(&mut heard).await;
        assert_eq!(level, Level::Info);
        assert!(message.contains("read again"), "{message}");
        drop(rx);
        tokio::time::timeout(Duration::from_secs(10), task)
            .await
            .expect("the follower ends when the sweep stops listening")
            .unwrap();
        std::fs::remove_dir_all(&d).unwrap();
    }
}
