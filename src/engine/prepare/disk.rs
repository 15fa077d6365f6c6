//! What a prepare step's target is on disk, asked on the blocking pool by
//! [`super`]: its size, whether it is whole, whether there is room and a
//! right to write it, the size it should have (a source directory, a local
//! Hugging Face snapshot), and the lock that keeps two sweeps from writing
//! one target at once. Nothing here touches the runtime.

use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::model::text::bytes;
use crate::plan::Step;

/// The most entries a size walk visits (a model is tens of files; a
/// `creates` that names `/` must not walk the machine).
const MAX_ENTRIES: u64 = 1_000_000;

/// The bytes of the regular files under `path` (or of `path` itself), its
/// symbolic links followed only when `follow` (a Hugging Face snapshot's
/// files are links into its blobs). A path that does not exist is 0 bytes.
pub fn tree_bytes(path: &Path, follow: bool) -> io::Result<u64> {
    let mut total = 0u64;
    let mut seen = 0u64;
    let mut stack = vec![path.to_path_buf()];
    while let Some(p) = stack.pop() {
        seen += 1;
        if seen > MAX_ENTRIES {
            return Err(io::Error::other(format!(
                "{} holds more than {MAX_ENTRIES} files",
                path.display()
            )));
        }
        let meta = if follow {
            std::fs::metadata(&p)
        } else {
            std::fs::symlink_metadata(&p)
        };
        let meta = match meta {
            Ok(m) => m,
            // Gone between the listing and the look (a copier's temp file).
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e),
        };
        if meta.is_file() {
            total = total.saturating_add(meta.len());
        } else if meta.is_dir() {
            match std::fs::read_dir(&p) {
                Ok(entries) => stack.extend(entries.flatten().map(|e| e.path())),
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(e),
            }
        }
    }
    Ok(total)
}

/// The size of everything a step creates, so far.
pub fn created_bytes(step: &Step) -> io::Result<u64> {
    let mut total = 0u64;
    for c in &step.creates {
        total = total.saturating_add(tree_bytes(Path::new(c), false)?);
    }
    Ok(total)
}

/// What a step's target holds when whole: its size, and (read from a source
/// directory) every file in it with its size, so a copy cut short, or one
/// made into the wrong place, is never taken for a whole one.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Expected {
    pub bytes: u64,
    /// (path relative to the first `creates` path, size); empty when only
    /// the size is known. A source that is one file: one entry, path "".
    pub files: Vec<(PathBuf, u64)>,
}

/// What a step's target holds when whole, from where `expect_from` says:
/// `hf:ORG/NAME` (the newest local snapshot of that model in the Hugging
/// Face cache) or a directory or file (its files, links followed).
pub fn expected_from(source: &str) -> Result<Expected, String> {
    let dir = match source.strip_prefix("hf:") {
        Some(repo) => hf_snapshot(repo)?,
        None => PathBuf::from(source),
    };
    if !dir.exists() {
        return Err(format!("{} does not exist", dir.display()));
    }
    let files = manifest(&dir).map_err(|e| format!("cannot read {}: {e}", dir.display()))?;
    let bytes = files
        .iter()
        .map(|(_, n)| *n)
        .fold(0u64, u64::saturating_add);
    if files.is_empty() {
        return Err(format!("{} holds no files", dir.display()));
    }
    Ok(Expected { bytes, files })
}

/// Every regular file under `root` (links followed) with its size, its path
/// relative to `root`; `root` itself when it is a file.
fn manifest(root: &Path) -> io::Result<Vec<(PathBuf, u64)>> {
    let meta = std::fs::metadata(root)?;
    if meta.is_file() {
        return Ok(vec![(PathBuf::new(), meta.len())]);
    }
    let mut out = Vec::new();
    let mut stack = vec![PathBuf::new()];
    while let Some(rel) = stack.pop() {
        if out.len() as u64 + stack.len() as u64 > MAX_ENTRIES {
            return Err(io::Error::other(format!("more than {MAX_ENTRIES} files")));
        }
        for e in std::fs::read_dir(root.join(&rel))?.flatten() {
            let path = rel.join(e.file_name());
            let Ok(m) = std::fs::metadata(root.join(&path)) else {
                continue;
            };
            if m.is_dir() {
                stack.push(path);
            } else if m.is_file() {
                out.push((path, m.len()));
            }
        }
    }
    out.sort();
    Ok(out)
}

/// The newest snapshot of model `repo` (`ORG/NAME`) in the local Hugging
/// Face cache (`$HF_HUB_CACHE`, `$HF_HOME/hub`, or `~/.cache/huggingface/hub`).
fn hf_snapshot(repo: &str) -> Result<PathBuf, String> {
    let hub = std::env::var_os("HF_HUB_CACHE")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HF_HOME").map(|h| PathBuf::from(h).join("hub")))
        .or_else(|| {
            std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/huggingface/hub"))
        })
        .ok_or("no Hugging Face cache: set HF_HOME")?;
    let snapshots = hub
        .join(format!("models--{}", repo.replace('/', "--")))
        .join("snapshots");
    let newest = std::fs::read_dir(&snapshots)
        .map_err(|e| format!("no local snapshot of {repo} ({}: {e})", snapshots.display()))?
        .flatten()
        .filter_map(|e| Some((e.metadata().ok()?.modified().ok()?, e.path())))
        .max_by_key(|(t, _)| *t)
        .map(|(_, p)| p);
    newest.ok_or_else(|| format!("no local snapshot of {repo} in {}", snapshots.display()))
}

/// Whether a step's target is in place and whole, and its size.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Whole {
    Yes { bytes: u64 },
    No { why: String, bytes: u64 },
}

/// Look at a step's target: every `creates` path exists, holds the
/// expected bytes when they are known (and each file of the source, at its
/// size, when a source says them), and its files hash as `verify` says
/// (`recorded`: (config.json path, hash) this run recorded before).
pub fn whole(step: &Step, expect: Option<&Expected>, recorded: &[(PathBuf, String)]) -> Whole {
    for c in &step.creates {
        if !Path::new(c).exists() {
            let bytes = created_bytes(step).unwrap_or(0);
            return Whole::No {
                why: format!("{c} does not exist"),
                bytes,
            };
        }
    }
    let got = match created_bytes(step) {
        Ok(n) => n,
        Err(e) => {
            return Whole::No {
                why: format!("cannot measure {}: {e}", step.creates.join(", ")),
                bytes: 0,
            }
        }
    };
    let base = Path::new(&step.creates[0]);
    if let Some(e) = expect {
        if got < e.bytes {
            return Whole::No {
                why: format!(
                    "{} holds {} of the {} expected",
                    step.creates.join(", "),
                    bytes(got),
                    bytes(e.bytes)
                ),
                bytes: got,
            };
        }
        for (rel, size) in &e.files {
            let path = base.join(rel);
            let why = match std::fs::metadata(&path) {
                Ok(m) if m.is_file() && m.len() == *size => continue,
                Ok(m) if m.is_file() => format!(
                    "{} holds {} of its {}",
                    path.display(),
                    bytes(m.len()),
                    bytes(*size)
                ),
                Ok(_) => format!("{} is not a file", path.display()),
                Err(_) => format!("{} is missing", path.display()),
            };
            return Whole::No { why, bytes: got };
        }
    }
    let listed = step.sha256.iter().map(|(f, h)| (base.join(f), h.clone()));
    for (path, want) in listed.chain(recorded.iter().cloned()) {
        match crate::store::sha256_file(&path) {
            Ok(h) if h.eq_ignore_ascii_case(&want) => {}
            Ok(h) => {
                return Whole::No {
                    why: format!(
                        "{} has sha256 {}…, not the {}… expected",
                        path.display(),
                        h.chars().take(12).collect::<String>(),
                        want.chars().take(12).collect::<String>()
                    ),
                    bytes: got,
                }
            }
            Err(e) => {
                return Whole::No {
                    why: format!("cannot hash {}: {e}", path.display()),
                    bytes: got,
                }
            }
        }
    }
    Whole::Yes { bytes: got }
}

/// The nearest existing path at or above `path`.
fn existing_ancestor(path: &Path) -> Option<PathBuf> {
    let abs = if path.is_absolute() {
        path.to_path_buf()
    } else {
        std::env::current_dir().ok()?.join(path)
    };
    abs.ancestors().find(|a| a.exists()).map(Path::to_path_buf)
}

/// Whether a file can be made in `dir`: tried, not guessed from its mode
/// bits (root passes those everywhere, yet not on `/proc` or a read-only
/// mount).
fn writable(dir: &Path) -> io::Result<()> {
    let probe = dir.join(format!(".sweeptop-write-probe-{}", std::process::id()));
    File::options().write(true).create_new(true).open(&probe)?;
    std::fs::remove_file(&probe)
}

/// Before a step runs: each `creates` path can be written, and its
/// filesystem has room for what is still to come (`expect` less what is
/// there). `Err`: why not, in a sentence.
pub fn room_for(step: &Step, expect: Option<u64>, have: u64) -> Result<(), String> {
    for c in &step.creates {
        let Some(dir) = existing_ancestor(Path::new(c)) else {
            return Err(format!("no directory above {c} exists"));
        };
        if !dir.is_dir() {
            return Err(format!(
                "{c} cannot be created: {} is a file, not a directory",
                dir.display()
            ));
        }
        if !Path::new(c).exists() {
            if let Err(e) = writable(&dir) {
                return Err(format!(
                    "{c} cannot be created: {} is not writable ({e})",
                    dir.display()
                ));
            }
        }
        let Some(need) = expect.map(|e| e.saturating_sub(have)) else {
            continue;
        };
        let Ok(vfs) = nix::sys::statvfs::statvfs(&dir) else {
            continue;
        };
        #[allow(clippy::unnecessary_cast)] // u32 on some platforms
        let free = (vfs.blocks_available() as u64).saturating_mul(vfs.fragment_size() as u64);
        if free < need {
            let kind = fs_kind(&dir);
            let grow = if kind == "tmpfs" {
                " (a tmpfs grows with `mount -o remount,size=…`)"
            } else {
                ""
            };
            return Err(format!(
                "{c} needs {} more but {} ({kind}) has {} free: make room or put it elsewhere{grow}",
                bytes(need),
                dir.display(),
                bytes(free)
            ));
        }
    }
    Ok(())
}

/// `tmpfs`, or `filesystem` for any other kind.
fn fs_kind(dir: &Path) -> &'static str {
    match nix::sys::statfs::statfs(dir) {
        Ok(s) if s.filesystem_type() == nix::sys::statfs::TMPFS_MAGIC => "tmpfs",
        _ => "filesystem",
    }
}

/// The lock that keeps two sweeps (two runs resumed after a reboot) from
/// writing one target at once: `flock` on a file named for the target in
/// the system's temporary directory. `Ok(None)`: another process holds it.
pub fn try_lock_target(step: &Step) -> io::Result<Option<File>> {
    use sha2::Digest;
    let digest = sha2::Sha256::digest(step.creates.join("\n").as_bytes());
    let name: String = digest[..8].iter().map(|b| format!("{b:02x}")).collect();
    let path = std::env::temp_dir().join(format!("sweeptop-prepare-{name}.lock"));
    let f = match File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
    {
        Ok(f) => f,
        // Another user's lock file: a read-only descriptor locks as well.
        Err(e) if e.kind() == io::ErrorKind::PermissionDenied => File::open(&path)?,
        Err(e) => return Err(e),
    };
    match f.try_lock() {
        Ok(()) => Ok(Some(f)),
        Err(std::fs::TryLockError::WouldBlock) => Ok(None),
        Err(std::fs::TryLockError::Error(e)) => Err(e),
    }
}

/// How a running step's progress is told: its rate over the last
/// [`RATE_WINDOW`], and which samples are recorded (the first, then one
/// every [`RECORD_EVERY`]).
pub struct Meter {
    samples: std::collections::VecDeque<(Instant, u64)>,
    recorded: Option<Instant>,
}

/// The span a step's rate is measured over.
pub const RATE_WINDOW: Duration = Duration::from_secs(5);
/// How often a step's progress goes to `events.jsonl` and the line views.
pub const RECORD_EVERY: Duration = Duration::from_secs(10);

impl Meter {
    pub fn new() -> Meter {
        Meter {
            samples: std::collections::VecDeque::new(),
            recorded: None,
        }
    }

    /// A size seen at `now`: the rate (bytes/s) and whether to record it.
    pub fn observe(&mut self, now: Instant, bytes: u64) -> (f64, bool) {
        self.samples.push_back((now, bytes));
        while self
            .samples
            .front()
            .is_some_and(|(t, _)| now.duration_since(*t) > RATE_WINDOW)
        {
            self.samples.pop_front();
        }
        let rate = match self.samples.front() {
            Some(&(t, b)) if now > t => {
                bytes.saturating_sub(b) as f64 / now.duration_since(t).as_secs_f64()
            }
            _ => 0.0,
        };
        let record = self
            .recorded
            .is_none_or(|r| now.duration_since(r) >= RECORD_EVERY);
        if record {
            self.recorded = Some(now);
        }
        (rate, record)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fresh scratch directory for one test.
    fn scratch(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("sweeptop-prepare-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn progress_is_recorded_first_then_every_ten_seconds() {
        let t0 = Instant::now();
        let mut m = Meter::new();
        let mut recorded = Vec::new();
        for s in 0..31u64 {
            let (rate, rec) = m.observe(t0 + Duration::from_secs(s), s * 100_000_000);
            if s >= 5 {
                // 100 MB a second, over the window.
                assert!((rate - 1e8).abs() < 1.0, "{s}: {rate}");
            }
            if rec {
                recorded.push(s);
            }
        }
        assert_eq!(recorded, [0, 10, 20, 30]);
    }

    #[test]
    fn a_stalled_copy_reads_zero() {
        let t0 = Instant::now();
        let mut m = Meter::new();
        for s in 0..10u64 {
            m.observe(t0 + Duration::from_secs(s), 5_000);
        }
        assert_eq!(m.observe(t0 + Duration::from_secs(10), 5_000).0, 0.0);
    }

    #[test]
    fn sizes_and_wholeness_of_a_target() {
        let dir = scratch("whole");
        let target = dir.join("model");
        std::fs::create_dir_all(target.join("sub")).unwrap();
        std::fs::write(target.join("config.json"), b"{}").unwrap();
        std::fs::write(target.join("sub/w.bin"), vec![0u8; 1000]).unwrap();
        assert_eq!(tree_bytes(&target, false).unwrap(), 1002);
        let mut step = Step {
            key: "m".into(),
            id: "m".into(),
            argv: vec!["true".into()],
            shell: false,
            env: Default::default(),
            creates: vec![target.display().to_string()],
            expect: crate::plan::Expect::Unknown,
            sha256: Vec::new(),
            verify_recorded: false,
            timeout_s: 10.0,
        };
        assert_eq!(whole(&step, None, &[]), Whole::Yes { bytes: 1002 });
        let size = |bytes| Expected {
            bytes,
            files: Vec::new(),
        };
        assert!(matches!(
            whole(&step, Some(&size(2000)), &[]),
            Whole::No { bytes: 1002, .. }
        ));
        // Read from a source: each file at its size, where it belongs.
        let source = dir.join("source");
        std::fs::create_dir_all(source.join("sub")).unwrap();
        std::fs::write(source.join("config.json"), b"{}").unwrap();
        std::fs::write(source.join("sub/w.bin"), vec![0u8; 1000]).unwrap();
        let from = expected_from(&source.display().to_string()).unwrap();
        assert_eq!(from.bytes, 1002);
        assert_eq!(from.files.len(), 2);
        assert_eq!(whole(&step, Some(&from), &[]), Whole::Yes { bytes: 1002 });
        // As many bytes, but a file short and the rest in the wrong place
        // (`cp -r` into a directory that is there already).
        std::fs::write(target.join("sub/w.bin"), vec![0u8; 500]).unwrap();
        std::fs::write(target.join("extra.bin"), vec![0u8; 500]).unwrap();
        match whole(&step, Some(&from), &[]) {
            Whole::No { why, .. } => {
                assert!(why.contains("w.bin holds 500 B of its 1.0 kB"), "{why}")
            }
            w => panic!("{w:?}"),
        }
        std::fs::write(target.join("sub/w.bin"), vec![0u8; 1000]).unwrap();
        std::fs::remove_file(target.join("extra.bin")).unwrap();
        // sha256 of "{}".
        step.sha256 = vec![(
            "config.json".into(),
            "44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a".into(),
        )];
        assert!(matches!(
            whole(&step, Some(&size(1002)), &[]),
            Whole::Yes { .. }
        ));
        step.sha256[0].1 = "0".repeat(64);
        match whole(&step, None, &[]) {
            Whole::No { why, .. } => {
                assert!(why.contains("config.json has sha256 44136fa355b3"), "{why}")
            }
            w => panic!("{w:?}"),
        }
        // Room: a petabyte is more than any test machine's disk.
        let err = room_for(&step, Some(crate::plan::prepare::MAX_EXPECT_BYTES), 0).unwrap_err();
        assert!(err.contains("needs 1.0 PB more"), "{err}");
        assert!(room_for(&step, Some(10), 0).is_ok());
        step.creates = vec!["/proc/sweeptop-cannot-write/model".into()];
        let err = room_for(&step, None, 0).unwrap_err();
        assert!(err.contains("/proc is not writable"), "{err}");
        step.creates = vec![target.join("config.json/x").display().to_string()];
        let err = room_for(&step, None, 0).unwrap_err();
        assert!(err.contains("is a file, not a directory"), "{err}");
    }

    #[test]
    fn one_lock_per_target() {
        let dir = scratch("lock");
        let step = Step {
            key: "m".into(),
            id: "m".into(),
            argv: vec!["true".into()],
            shell: false,
            env: Default::default(),
            creates: vec![dir.join("x").display().to_string()],
            expect: crate::plan::Expect::Unknown,
            sha256: Vec::new(),
            verify_recorded: false,
            timeout_s: 10.0,
        };
        let held = try_lock_target(&step).unwrap();
        assert!(held.is_some());
        assert!(try_lock_target(&step).unwrap().is_none());
        drop(held);
        assert!(try_lock_target(&step).unwrap().is_some());
    }
}
