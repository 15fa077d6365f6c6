//! Run a program on a pseudo-terminal (libc `posix_openpt`) and watch its screen
//! through a terminal emulator (`vt100`): for the dashboard's end-to-end test
//! and its bytes-per-second benchmark.
#![allow(dead_code)]

use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::os::fd::{FromRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// What the program wrote, as it arrived.
#[derive(Default)]
pub struct Output {
    /// Every byte, in order.
    pub bytes: Vec<u8>,
    /// (time since start, bytes in that read).
    pub reads: Vec<(Duration, usize)>,
    pub screen: Option<vt100::Parser>,
    pub closed: bool,
}

pub struct Pty {
    pub child: Child,
    /// `None` once the terminal was hung up.
    master: Option<File>,
    pub out: Arc<Mutex<Output>>,
    pub started: Instant,
    stop: Arc<AtomicBool>,
    reader: Option<JoinHandle<()>>,
}

impl Pty {
    /// Start `cmd` with a `cols` × `rows` pseudo-terminal as its controlling
    /// terminal and standard streams.
    pub fn spawn(mut cmd: Command, cols: u16, rows: u16) -> Pty {
        // Both ends are opened close-on-exec at once: a program another test
        // thread starts at the same moment must not inherit either end (a
        // stray copy of the master keeps the terminal open after `hang_up`;
        // one of the slave keeps the reader from ever seeing the end).
        // SAFETY: plain libc calls on a descriptor we own; ptsname_r writes
        // at most `name.len()` bytes.
        let (master, slave) = unsafe {
            let m = libc::posix_openpt(libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC);
            assert!(m >= 0, "posix_openpt: {}", std::io::Error::last_os_error());
            let master = OwnedFd::from_raw_fd(m);
            assert_eq!(libc::grantpt(m), 0, "grantpt");
            assert_eq!(libc::unlockpt(m), 0, "unlockpt");
            let mut name = [0 as libc::c_char; 128];
            assert_eq!(
                libc::ptsname_r(m, name.as_mut_ptr(), name.len()),
                0,
                "ptsname_r"
            );
            let sl = libc::open(
                name.as_ptr(),
                libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC,
            );
            assert!(sl >= 0, "open the pty: {}", std::io::Error::last_os_error());
            let ws = libc::winsize {
                ws_row: rows,
                ws_col: cols,
                ws_xpixel: 0,
                ws_ypixel: 0,
            };
            assert_eq!(libc::ioctl(sl, libc::TIOCSWINSZ, &ws), 0, "TIOCSWINSZ");
            (master, OwnedFd::from_raw_fd(sl))
        };
        let io = |fd: &OwnedFd| Stdio::from(fd.try_clone().expect("dup pty"));
        cmd.stdin(io(&slave)).stdout(io(&slave)).stderr(io(&slave));
        // SAFETY: only async-signal-safe calls between fork and exec.
        unsafe {
            cmd.pre_exec(|| {
                if libc::setsid() < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                if libc::ioctl(0, libc::TIOCSCTTY as _, 0) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = cmd.spawn().expect("spawn on the pty");
        drop(slave);
        let master = File::from(master);
        let mut reader = master.try_clone().expect("dup master");
        let out = Arc::new(Mutex::new(Output {
            screen: Some(vt100::Parser::new(
                std::num::NonZeroU16::new(rows.max(1)).expect("rows"),
                std::num::NonZeroU16::new(cols.max(1)).expect("cols"),
                0,
            )),
            ..Output::default()
        }));
        let started = Instant::now();
        let sink = out.clone();
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = stop.clone();
        let reader = std::thread::spawn(move || {
            let mut buf = vec![0u8; 64 * 1024];
            loop {
                // Wake now and then, so that `hang_up` can close this end too.
                let mut fds = [libc::pollfd {
                    fd: reader.as_raw_fd(),
                    events: libc::POLLIN,
                    revents: 0,
                }];
                // SAFETY: one valid pollfd for the duration of the call.
                let ready = unsafe { libc::poll(fds.as_mut_ptr(), 1, 100) };
                if stopped.load(Ordering::SeqCst) {
                    break;
                }
                if ready == 0 {
                    continue;
                }
                match reader.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => {
                        let mut o = sink.lock().unwrap();
                        o.bytes.extend_from_slice(&buf[..n]);
                        o.reads.push((started.elapsed(), n));
                        if let Some(p) = o.screen.as_mut() {
                            p.process(&buf[..n]);
                        }
                    }
                }
            }
            sink.lock().unwrap().closed = true;
        });
        Pty {
            child,
            master: Some(master),
            out,
            started,
            stop,
            reader: Some(reader),
        }
    }

    /// Close the terminal, as a dropped SSH link closes it: the program's
    /// terminal reads end and it gets SIGHUP.
    pub fn hang_up(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(r) = self.reader.take() {
            let _ = r.join();
        }
        self.master = None;
    }

    /// The screen as text, one line per row.
    pub fn screen(&self) -> String {
        let o = self.out.lock().unwrap();
        o.screen
            .as_ref()
            .map(|p| p.screen().contents())
            .unwrap_or_default()
    }

    /// Type keys.
    pub fn send(&mut self, keys: &str) {
        let master = self.master.as_mut().expect("the terminal is open");
        master.write_all(keys.as_bytes()).expect("write to the pty");
        master.flush().ok();
    }

    /// Wait until the screen shows `text`; panics with the screen past `limit`.
    pub fn wait_for(&mut self, text: &str, limit: Duration) {
        self.wait_until(limit, text, |s| s.contains(text));
    }

    pub fn wait_until(&mut self, limit: Duration, what: &str, cond: impl Fn(&str) -> bool) {
        let deadline = Instant::now() + limit;
        loop {
            let screen = self.screen();
            if cond(&screen) {
                return;
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!("exited ({status}) while waiting for {what}\n{screen}");
            }
            assert!(
                Instant::now() < deadline,
                "timed out waiting for {what}; the screen:\n{screen}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Wait for the program to exit, and for what it wrote to be read.
    pub fn wait_exit(&mut self, limit: Duration) -> ExitStatus {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(s) = self.child.try_wait().expect("try_wait") {
                self.drain(deadline.max(Instant::now() + Duration::from_secs(5)));
                return s;
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                panic!(
                    "did not exit within {limit:?}; the screen:\n{}",
                    self.screen()
                );
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Pty {
    /// After the exit: read until the terminal's end is seen (no one holds
    /// it any more), so the last words are in `out`.
    fn drain(&mut self, deadline: Instant) {
        if self.reader.is_none() {
            return;
        }
        while !self.out.lock().unwrap().closed && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Pty {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}
