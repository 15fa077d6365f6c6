//! Log lines in the imitated server's style: the prefixes are the scripts'
//! `log.*` sections, uvicorn's access line their `access-line`.

use crate::args::Flavor;
use crate::logs::{self, Level, Stream, Who};
use crate::script::{Line, Vars, Writer};
use crate::texts::texts;

/// Formats log lines in the flavor's style.
#[derive(Debug, Clone)]
pub struct Style {
    pub flavor: Flavor,
    pub pid: u32,
}

impl Style {
    /// The style of this process.
    pub fn new(flavor: Flavor) -> Style {
        Style {
            flavor,
            pid: std::process::id(),
        }
    }

    pub fn engine_pid(&self) -> u32 {
        self.pid + 40
    }

    /// The values every script render gets: `pid` and `engine_pid`.
    pub fn vars(&self) -> Vars<'static> {
        let mut v = Vars::new();
        v.set("pid", self.pid).set("engine_pid", self.engine_pid());
        v
    }

    /// One log line, as the flavor's `log.main`, `log.engine` or `log.rank`
    /// section writes it. `source` is vLLM's `file.py:line`.
    pub fn fmt(&self, who: Who, level: Level, source: &str, msg: &str) -> String {
        let mut vars = self.vars();
        vars.set("message", msg)
            .set("level", level.name())
            .set("source", source);
        let section = match who {
            Who::Main => "log.main",
            Who::Engine => "log.engine",
            Who::Rank(r) => {
                vars.rank(r);
                "log.rank"
            }
        };
        texts().text(self.flavor, section, &vars)
    }

    /// Where the flavor's own logger writes: vLLM logs to stdout, SGLang to stderr.
    pub fn app_stream(&self) -> Stream {
        match self.flavor {
            Flavor::Sglang => Stream::Stderr,
            Flavor::Vllm => Stream::Stdout,
        }
    }

    /// Where a script line goes and what it reads: logger lines get their prefix
    /// (and go to stderr at ERROR), the others are written as they are.
    pub fn finish(&self, line: &Line<'_>) -> (Stream, String) {
        match line.writer {
            None | Some(Writer::Err) => (Stream::Stderr, line.text.clone()),
            Some(Writer::Out) => (Stream::Stdout, line.text.clone()),
            Some(Writer::Log(who)) => {
                let stream = if line.level == Level::Error {
                    Stream::Stderr
                } else {
                    self.app_stream()
                };
                (stream, self.fmt(who, line.level, line.source, &line.text))
            }
        }
    }

    /// Writes script lines now, those in a row on one stream together.
    pub fn print(&self, lines: &[Line<'_>]) {
        for (stream, block) in self.blocks(lines) {
            logs::lines(stream, block);
        }
    }

    /// Script lines as blocks: the lines in a row that go to one stream.
    pub fn blocks(&self, lines: &[Line<'_>]) -> Vec<(Stream, Vec<String>)> {
        let mut blocks: Vec<(Stream, Vec<String>)> = Vec::new();
        for line in lines {
            let (stream, text) = self.finish(line);
            match blocks.last_mut() {
                Some((s, block)) if *s == stream => block.push(text),
                _ => blocks.push((stream, vec![text])),
            }
        }
        blocks
    }
}

/// uvicorn's access log line, written to stdout.
pub fn access_line(peer: &str, method: &str, path: &str, version: &str, status: u16) -> String {
    let mut vars = Vars::new();
    vars.set("peer", peer)
        .set("method", method)
        .set("path", path)
        .set("version", version)
        .set("status", status)
        .set("reason", reason(status));
    texts().common_text("access-line", &vars)
}

pub fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        404 => "Not Found",
        405 => "Method Not Allowed",
        413 => "Request Entity Too Large",
        500 => "Internal Server Error",
        503 => "Service Unavailable",
        _ => "",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn access_line_shape() {
        assert_eq!(
            access_line(
                "127.0.0.1:53422",
                "POST",
                "/v1/completions",
                "HTTP/1.1",
                200
            ),
            "INFO:     127.0.0.1:53422 - \"POST /v1/completions HTTP/1.1\" 200 OK"
        );
    }

    #[test]
    fn prefixes() {
        let s = Style {
            flavor: Flavor::Vllm,
            pid: 100,
        };
        let l = s.fmt(Who::Rank(2), Level::Error, "a.py:1", "boom");
        assert!(l.starts_with("(VllmWorker rank=2 pid=162) ERROR "), "{l}");
        assert!(l.ends_with(" [a.py:1] boom"), "{l}");
        let s = Style {
            flavor: Flavor::Sglang,
            pid: 100,
        };
        let l = s.fmt(Who::Rank(3), Level::Info, "", "hi");
        assert!(l.starts_with('[') && l.ends_with(" TP3] hi"), "{l}");
    }
}
