//! A server flooding its stderr must keep its token pacing while sweeptop reads,
//! logs and classifies every line: the reader never makes the server wait.

use crate::common;

use std::time::Duration;

use common::*;

#[test]
fn a_server_flooding_stderr_keeps_its_pacing_and_every_line_is_kept() {
    let dir = scratch("flood");
    let (out_dir, _stdout) = run_plan(
        &dir,
        "flood",
        r#"
name = "flood"
[server]
command = "{sweeptop} sim-server --port {port} --startup-ms 100 --ttft-ms 20 --itl-ms 5 --fault flood:50"
port = "auto"
stop_grace_s = 2
[limits]
context = 4096
# Every line is kept: no cap (the cap has its own test below).
log_max_mb = 0
[[workloads]]
id = "w"
contexts = [64]
concurrency = [1]
requests = 6
max_tokens = 200
[[phases]]
id = "p"
"#,
        Duration::from_secs(120),
    );
    let r = &results(&out_dir)[0];
    assert_eq!(r["status"], "ok", "{r}");
    let m = &r["metrics"];
    let itl = m["itl_ms_p50"].as_f64().unwrap();
    let ttft = m["ttft_ms_p50"].as_f64().unwrap();
    // A reader that fell behind would fill the pipe and stall the server's
    // writes (and its tokens) by far more than these bounds, which leave a
    // busy machine its delays: the pace is a floor, the ceilings generous.
    assert!((4.5..50.0).contains(&itl), "ITL p50 {itl} ms, expected 5");
    assert!(
        (18.0..400.0).contains(&ttft),
        "TTFT p50 {ttft} ms, expected 20"
    );
    // The log holds every line the flood wrote (it says how many as it
    // stops; every third line is numbered, and none of those is missing).
    // How fast it could write depends on the machine's load, so the rate is
    // printed, not asserted.
    let log = std::fs::read(out_dir.join("logs/p.log")).unwrap();
    let text = String::from_utf8_lossy(&log);
    let said: u64 = text
        .lines()
        .find_map(|l| l.strip_prefix("sim: the log flood wrote "))
        .and_then(|rest| rest.strip_suffix(" lines"))
        .and_then(|n| n.parse().ok())
        .expect("the server says how much it flooded as it stops");
    let numbered: Vec<u64> = text
        .lines()
        .filter(|l| l.contains("Cache flush skipped:"))
        .filter_map(|l| l.rsplit_once("(req ")?.1.strip_suffix(')')?.parse().ok())
        .collect();
    let flood_lines = text
        .lines()
        .filter(|l| l.starts_with("sim-node:") || l.contains("Cache flush skipped:"))
        .count() as u64;
    assert!(said >= 10_000, "the flood wrote only {said} lines");
    assert!(
        flood_lines >= said,
        "the log has {flood_lines} of the {said} lines the server flooded"
    );
    let expected: Vec<u64> = (1..=numbered.len() as u64).map(|k| 3 * k - 1).collect();
    assert!(
        numbered == expected,
        "numbered flood lines missing from the log"
    );
    let duration = m["duration_s"].as_f64().unwrap();
    eprintln!(
        "the log kept all {said} flooded lines, {:.1} MB/s over the {duration:.1} s of requests",
        log.len() as f64 / 1e6 / duration
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn binary_garbage_and_giant_lines_on_stdout_are_kept_and_harmless() {
    let dir = scratch("garbage");
    let (out_dir, _stdout) = run_plan(
        &dir,
        "garbage",
        r#"
name = "garbage"
[server]
# A shell prints 256 KiB of random bytes and a 1 MiB line without a newline
# break before the server starts.
shell = true
command = "head -c 262144 /dev/urandom; head -c 1048576 /dev/zero | tr '\\0' x; echo; exec {sweeptop} sim-server --port {port} --startup-ms 50 --max-speed"
port = "auto"
[limits]
context = 4096
[[workloads]]
id = "w"
contexts = [64]
concurrency = [1]
requests = 2
max_tokens = 8
[[phases]]
id = "p"
"#,
        Duration::from_secs(60),
    );
    let r = &results(&out_dir)[0];
    assert_eq!(r["status"], "ok", "{r}");
    let log = std::fs::metadata(out_dir.join("logs/p.log")).unwrap().len();
    assert!(log >= 262_144 + 1_048_576, "the log kept {log} bytes");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_log_over_its_cap_keeps_its_head_and_newest_lines_and_every_line_is_classified() {
    let dir = scratch("flood-cap");
    // A 1 MiB cap against a flood of many MB, then a CUDA crash at the end
    // of it: the crash is named although its line is long past the head.
    let (out_dir, _stdout) = run_plan(
        &dir,
        "flood-cap",
        r#"
name = "flood-cap"
[server]
command = "{sweeptop} sim-server --port {port} --startup-ms 100 --ttft-ms 20 --itl-ms 5 --fault flood:50 --fault crash:cuda_illegal_instruction@900"
port = "auto"
stop_grace_s = 2
[limits]
context = 4096
log_max_mb = 1
[[workloads]]
id = "w"
contexts = [64]
concurrency = [1]
requests = 6
max_tokens = 200
[[phases]]
id = "p"
"#,
        Duration::from_secs(120),
    );
    let r = &results(&out_dir)[0];
    assert_eq!(r["status"], "failed", "{r}");
    assert_eq!(r["failure"]["kind"], "cuda_illegal_instruction", "{r}");
    let logs = out_dir.join("logs");
    let size = |name: &str| std::fs::metadata(logs.join(name)).map_or(0, |m| m.len());
    let total = size("p.log") + size("p.log.1") + size("p.log.2");
    // The cap, with room for the lines that straddle a segment's end.
    assert!(total <= (1 << 20) + 200_000, "{total} bytes of logs");
    let head = std::fs::read_to_string(logs.join("p.log")).unwrap();
    assert!(
        head.contains("# sweeptop"),
        "the head keeps the launch line"
    );
    assert!(
        head.contains("later lines are in p.log.1 and p.log.2"),
        "the head says where the rest went"
    );
    // The newest lines are kept: the crash, long past the head.
    let newest = format!(
        "{}{}",
        std::fs::read_to_string(logs.join("p.log.1")).unwrap_or_default(),
        std::fs::read_to_string(logs.join("p.log.2")).unwrap_or_default()
    );
    // Numbered flood lines: the segments hold later ones than the head. (The
    // crash line itself may be rotated out by the flood that follows it on a
    // busy machine; the failure above shows it was read.)
    let last_numbered = |text: &str| {
        text.lines()
            .filter(|l| l.contains("Cache flush skipped:"))
            .filter_map(|l| {
                l.rsplit_once("(req ")?
                    .1
                    .strip_suffix(')')?
                    .parse::<u64>()
                    .ok()
            })
            .max()
    };
    let (in_head, in_tail) = (last_numbered(&head), last_numbered(&newest));
    assert!(
        in_tail.is_some() && in_tail > in_head,
        "the newest lines are kept: head up to {in_head:?}, segments up to {in_tail:?}"
    );
    // The cut is in the events, as a notice.
    let said: Vec<String> = events(&out_dir)
        .iter()
        .filter(|e| e["event"] == "notice")
        .filter_map(|e| e["message"].as_str().map(str::to_string))
        .collect();
    assert!(
        said.iter()
            .any(|m| m.contains("reached half of limits.log_max_mb (1 MB)")),
        "{said:?}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
