//! The scripts the simulated server prints from (`sim-server/scripts/*.txt`),
//! embedded in the binary and parsed once, and the lookup of a flavor's sections:
//! its own file first, then `common.txt`.

use std::sync::OnceLock;

use crate::args::Flavor;
use crate::logs::{self, Stream};
use crate::script::{self, Line, ParseError, Script, Vars};

/// Every script, with its file name.
pub const FILES: [(&str, &str); 3] = [
    ("common.txt", include_str!("../scripts/common.txt")),
    ("sglang.txt", include_str!("../scripts/sglang.txt")),
    ("vllm.txt", include_str!("../scripts/vllm.txt")),
];

/// The parsed scripts.
#[derive(Debug, Default)]
pub struct Texts {
    common: Script,
    sglang: Script,
    vllm: Script,
}

/// The scripts, parsed on first use. A script that does not parse (which the
/// unit tests rule out) leaves every script empty, with one line on stderr that
/// says why: the server then prints nothing of its own, but still serves.
pub fn texts() -> &'static Texts {
    static TEXTS: OnceLock<Texts> = OnceLock::new();
    TEXTS.get_or_init(|| {
        Texts::parse().unwrap_or_else(|e| {
            logs::write_lines(
                Stream::Stderr,
                &[format!("sim: embedded script does not parse: {e}")],
            );
            Texts::default()
        })
    })
}

impl Texts {
    pub fn parse() -> Result<Texts, ParseError> {
        let [common, sglang, vllm] = FILES;
        Ok(Texts {
            common: Script::parse(common.0, common.1)?,
            sglang: Script::parse(sglang.0, sglang.1)?,
            vllm: Script::parse(vllm.0, vllm.1)?,
        })
    }

    fn chain(&self, flavor: Flavor) -> [&Script; 2] {
        match flavor {
            Flavor::Sglang => [&self.sglang, &self.common],
            Flavor::Vllm => [&self.vllm, &self.common],
        }
    }

    /// The lines of the flavor's `section`.
    pub fn render(&self, flavor: Flavor, section: &str, vars: &Vars<'_>) -> Vec<Line<'_>> {
        let r = script::render(&self.chain(flavor), section, vars);
        #[cfg(test)]
        tests::record(&r);
        r.lines
    }

    /// The text of the flavor's `section`, its lines joined (a message, a body).
    pub fn text(&self, flavor: Flavor, section: &str, vars: &Vars<'_>) -> String {
        let lines: Vec<String> = self
            .render(flavor, section, vars)
            .into_iter()
            .map(|l| l.text)
            .collect();
        lines.join("\n")
    }

    /// A section of `common.txt`, for texts no flavor changes.
    pub fn common_text(&self, section: &str, vars: &Vars<'_>) -> String {
        let r = script::render(&[&self.common], section, vars);
        #[cfg(test)]
        tests::record(&r);
        let lines: Vec<String> = r.lines.into_iter().map(|l| l.text).collect();
        lines.join("\n")
    }

    /// A constant (a `let` before the first section) of the flavor's scripts.
    pub fn constant(&self, flavor: Flavor, name: &str) -> &str {
        let found = self
            .chain(flavor)
            .into_iter()
            .find_map(|s| s.constant(name));
        #[cfg(test)]
        if found.is_none() {
            tests::problem(format!("no constant `{name}`"));
        }
        found.unwrap_or_default()
    }
}

#[cfg(test)]
pub mod tests {
    //! Every script parses, and every section renders without a problem (a missing
    //! value or section) for every flavor, kind and shape of server the code asks
    //! for; every section is used.

    use std::cell::RefCell;
    use std::collections::BTreeSet;

    use super::*;
    use crate::args::CrashKind;
    use crate::engine::{Counters, Shared};
    use crate::faults::{self, When};
    use crate::logs::{Level, Who};
    use crate::script::render::Rendered;
    use crate::style::{self, Style};

    thread_local! {
        static PROBLEMS: RefCell<Vec<String>> = const { RefCell::new(Vec::new()) };
        static USED: RefCell<BTreeSet<String>> = const { RefCell::new(BTreeSet::new()) };
    }

    pub fn record(r: &Rendered<'_>) {
        PROBLEMS.with(|p| p.borrow_mut().extend(r.problems.iter().cloned()));
        USED.with(|u| {
            u.borrow_mut()
                .extend(r.sections.iter().map(|s| s.to_string()))
        });
    }

    pub fn problem(p: String) {
        PROBLEMS.with(|v| v.borrow_mut().push(p));
    }

    fn take_problems() -> Vec<String> {
        PROBLEMS.with(|p| std::mem::take(&mut *p.borrow_mut()))
    }

    #[test]
    fn every_script_parses() {
        for (file, src) in FILES {
            if let Err(e) = Script::parse(file, src) {
                panic!("{e}");
            }
        }
        assert!(Texts::parse().is_ok());
    }

    #[test]
    fn every_section_renders_cleanly_and_is_used() {
        let texts = texts();
        take_problems();
        for flavor in ["sglang", "vllm"] {
            for method in ["none", "dflash", "ddtree"] {
                for tp in ["1", "2", "8", "12"] {
                    let s =
                        Shared::for_tests(&["--flavor", flavor, "--method", method, "--tp", tp]);
                    let lines = crate::startup::steps(&s, 1234);
                    assert!(!lines.is_empty());
                    for line in &lines {
                        s.style.finish(line);
                    }
                    for section in ["ready", "startup-hang", "shutdown"] {
                        for line in &crate::startup::lines(&s, 1234, section) {
                            s.style.finish(line);
                        }
                    }
                    let mut c = Counters::default();
                    c.active = 3;
                    c.interval.spec.steps = 4;
                    crate::engine::lines::decode_stats_lines(&s, &c, &c.interval, 1.0);
                    crate::engine::lines::prefill_lines(&s, 100);
                }
            }
            let s = Shared::for_tests(&["--flavor", flavor]);
            let style = &s.style;
            crate::http::overflow_message(style.flavor, 10, 8, 4);
            for kind in CrashKind::ALL {
                for when in [When::Startup, When::Serving] {
                    for tp in [1, 2, 9] {
                        faults::crash_report(style, tp, kind, when);
                    }
                }
            }
            for who in [Who::Main, Who::Engine, Who::Rank(1)] {
                style.fmt(who, Level::Error, "a.py:1", "m");
            }
        }
        texts.constant(Flavor::Vllm, "engine_dead_message");
        style::access_line("127.0.0.1:1", "GET", "/", "HTTP/1.1", 200);
        crate::bind_error_lines(&Style::new(Flavor::Sglang), "::1", 80, 98, "in use");
        let problems = take_problems();
        assert!(problems.is_empty(), "{problems:#?}");
        let used = USED.with(|u| u.borrow().clone());
        for (file, src) in FILES {
            let script = Script::parse(file, src).unwrap_or_default();
            for name in script.section_names() {
                assert!(used.contains(name), "{file}: `{name}` is never rendered");
            }
        }
    }

    #[test]
    fn the_vllm_engine_dead_message_is_the_stream_error() {
        assert_eq!(
            texts().constant(Flavor::Vllm, "engine_dead_message"),
            "EngineCore encountered an issue. See stack trace (above) for the root cause."
        );
    }
}
