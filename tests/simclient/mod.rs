//! A raw HTTP/1.1 client over tokio's TcpStream, and helpers that start the
//! simulated server in-process or as `sweeptop sim-server`.
#![allow(dead_code)]

use std::process::Stdio;
use std::time::{Duration, Instant};

use clap::Parser;
use sweeptop_sim::{serve, SimArgs};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    args: SimArgs,
}

/// `--startup-ms 0` unless the test sets its own.
fn default_startup(flags: &[&str]) -> Vec<&'static str> {
    if flags.contains(&"--startup-ms") {
        Vec::new()
    } else {
        vec!["--startup-ms", "0"]
    }
}

/// A free loopback port (bound, then released).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("free port")
}

/// Starts `serve` in this process with `flags` and waits until /health is 200.
pub async fn start(flags: &[&str]) -> u16 {
    let port = free_port();
    let port_s = port.to_string();
    let mut argv = vec!["sim", "--port", &port_s];
    argv.extend(default_startup(flags));
    argv.extend_from_slice(flags);
    let args = Cli::parse_from(argv).args;
    tokio::spawn(async move {
        let _ = serve(args).await;
    });
    wait_healthy(port, Duration::from_secs(10)).await;
    port
}

pub async fn wait_healthy(port: u16, within: Duration) {
    let deadline = Instant::now() + within;
    loop {
        if let Ok(r) = request(port, "GET", "/health", None).await {
            if r.status == 200 {
                return;
            }
        }
        assert!(
            Instant::now() < deadline,
            "server on {port} never became healthy"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Reply {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("{e}: {}", self.body))
    }
}

fn request_bytes(port: u16, method: &str, path: &str, body: Option<&str>) -> String {
    let body = body.unwrap_or("");
    format!(
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
}

async fn read_head(
    reader: &mut BufReader<TcpStream>,
) -> std::io::Result<(u16, Vec<(String, String)>)> {
    let mut status_line = String::new();
    reader.read_line(&mut status_line).await?;
    let status = status_line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| std::io::Error::other(format!("bad status line {status_line:?}")))?;
    let mut headers = Vec::new();
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).await? == 0 {
            break;
        }
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some((k, v)) = line.split_once(':') {
            headers.push((k.trim().to_string(), v.trim().to_string()));
        }
    }
    Ok((status, headers))
}

/// One request on a fresh connection; the whole body (chunked or not).
pub async fn request(
    port: u16,
    method: &str,
    path: &str,
    body: Option<&str>,
) -> std::io::Result<Reply> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).await?;
    stream
        .write_all(request_bytes(port, method, path, body).as_bytes())
        .await?;
    let mut reader = BufReader::new(stream);
    let (status, headers) = read_head(&mut reader).await?;
    let chunked = headers
        .iter()
        .any(|(k, v)| k.eq_ignore_ascii_case("transfer-encoding") && v.contains("chunked"));
    let mut body = Vec::new();
    if chunked {
        while let Some(chunk) = read_chunk(&mut reader).await? {
            body.extend_from_slice(&chunk);
        }
    } else {
        reader.read_to_end(&mut body).await?;
    }
    Ok(Reply {
        status,
        headers,
        body: String::from_utf8_lossy(&body).into_owned(),
    })
}

async fn read_chunk(reader: &mut BufReader<TcpStream>) -> std::io::Result<Option<Vec<u8>>> {
    let mut size_line = String::new();
    if reader.read_line(&mut size_line).await? == 0 {
        return Ok(None);
    }
    let size = usize::from_str_radix(size_line.trim().split(';').next().unwrap_or(""), 16)
        .map_err(|_| std::io::Error::other(format!("bad chunk size {size_line:?}")))?;
    let mut data = vec![0u8; size + 2];
    reader.read_exact(&mut data).await?;
    data.truncate(size);
    Ok((size > 0).then_some(data))
}

/// A streamed response read event by event, each with its arrival time.
pub struct EventStream {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    reader: BufReader<TcpStream>,
    pending: String,
}

impl EventStream {
    pub async fn open(port: u16, path: &str, body: &str) -> std::io::Result<EventStream> {
        let mut stream = TcpStream::connect(("127.0.0.1", port)).await?;
        stream.set_nodelay(true)?;
        stream
            .write_all(request_bytes(port, "POST", path, Some(body)).as_bytes())
            .await?;
        let mut reader = BufReader::new(stream);
        let (status, headers) = read_head(&mut reader).await?;
        Ok(EventStream {
            status,
            headers,
            reader,
            pending: String::new(),
        })
    }

    /// The next SSE event's data and when its bytes arrived; None at the end.
    pub async fn next(&mut self) -> std::io::Result<Option<(String, Instant)>> {
        loop {
            if let Some(end) = self.pending.find("\n\n") {
                let event: String = self.pending.drain(..end + 2).collect();
                let data = event.trim().strip_prefix("data: ").unwrap_or(event.trim());
                return Ok(Some((data.to_string(), Instant::now())));
            }
            match read_chunk(&mut self.reader).await? {
                Some(chunk) => self.pending.push_str(&String::from_utf8_lossy(&chunk)),
                None => return Ok(None),
            }
        }
    }

    /// All remaining events.
    pub async fn collect(mut self) -> std::io::Result<Vec<(String, Instant)>> {
        let mut out = Vec::new();
        while let Some(e) = self.next().await? {
            out.push(e);
        }
        Ok(out)
    }
}

/// The sim-main binary as a child process, its output captured by two threads.
pub struct Child {
    pub child: std::process::Child,
    pub port: u16,
    stdout: Option<std::thread::JoinHandle<String>>,
    stderr: Option<std::thread::JoinHandle<String>>,
}

fn drain(mut r: impl std::io::Read + Send + 'static) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = r.read_to_end(&mut buf);
        String::from_utf8_lossy(&buf).into_owned()
    })
}

pub fn spawn_binary(flags: &[&str]) -> Child {
    let port = free_port();
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_sweeptop"))
        .arg("sim-server")
        .args(["--port", &port.to_string()])
        .args(default_startup(flags))
        .args(flags)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn sweeptop sim-server");
    let stdout = child.stdout.take().map(drain);
    let stderr = child.stderr.take().map(drain);
    Child {
        child,
        port,
        stdout,
        stderr,
    }
}

/// Waits (bounded; kills it past `within`) for the child to exit; returns its
/// status, stdout and stderr.
pub async fn wait_output(
    mut c: Child,
    within: Duration,
) -> (std::process::ExitStatus, String, String) {
    let deadline = Instant::now() + within;
    let status = loop {
        if let Some(status) = c.child.try_wait().expect("wait for child") {
            break status;
        }
        if Instant::now() > deadline {
            let _ = c.child.kill();
            let _ = c.child.wait();
            panic!("child did not exit within {within:?}");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let join = |h: Option<std::thread::JoinHandle<String>>| {
        h.and_then(|h| h.join().ok()).unwrap_or_default()
    };
    let out = join(c.stdout.take());
    let err = join(c.stderr.take());
    (status, out, err)
}

impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn completion_body(prompt_words: usize, max_tokens: u64, stream: bool) -> String {
    let prompt = vec!["word"; prompt_words].join(" ");
    serde_json::json!({
        "model": "sim-model",
        "prompt": prompt,
        "max_tokens": max_tokens,
        "stream": stream,
        "ignore_eos": true,
        "stream_options": {"include_usage": true},
    })
    .to_string()
}
