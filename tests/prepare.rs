//! `[[prepare]]` steps end to end, on the real binary run headless against the
//! simulated server: a slow copy runs once before the configs that need it
//! (and not at all when its target is already whole), a failing step fails
//! exactly the configs that need it and leaves no process behind, room and
//! the right to write are checked before a step runs, a flooding step's log
//! stays capped, and bad steps are located plan errors.

use crate::common;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::Duration;

use common::*;

/// The sha256 of the 3-byte `config.json` the copier writes (`{}` and a
/// newline).
const CONFIG_SHA256: &str = "ca3d163bab055381827226140568f3bef7eaac187cebd76878e0b63e9e442356";

/// How long one sweep may take, even on a busy two-core machine.
const RUN_LIMIT: Duration = Duration::from_secs(120);

/// A plan of the simulated server: `config_id`, `[vars]`, `[server]` lines
/// added to its table, then the rest (`[[prepare]]`, `[[phases]]`, ...).
fn sim_plan(name: &str, head: &str, server_extra: &str, rest: &str) -> String {
    format!(
        r#"name = "{name}"
{head}
[server]
kind = "sglang"
command = "{{sweeptop}} sim-server --flavor sglang --port {{port}} --model m --max-model-len 4096 --startup-ms 100"
port = "auto"
stop_grace_s = 1
ready = {{ timeout_s = 30 }}
{server_extra}

[[workloads]]
id = "w"
contexts = [256]
concurrency = [1]
requests = 2
max_tokens = 8

{rest}
"#
    )
}

/// A slow copier at `dir/copier.sh`: `copier.sh TARGET N` writes N files of
/// 1,000,000 bytes into TARGET, 0.3 s apart, a line said per file, then a
/// 3-byte `config.json`; each run appends a line to `dir/copier.runs`.
fn write_copier(dir: &Path) -> std::path::PathBuf {
    let path = dir.join("copier.sh");
    let script = format!(
        r#"#!/bin/sh
echo run >> "{runs}"
mkdir -p "$1"
i=0
while [ $i -lt $2 ]; do
  head -c 1000000 /dev/zero > "$1/part-$i.bin"
  echo "copied part $i"
  i=$((i+1))
  sleep 0.3
done
echo '{{}}' > "$1/config.json"
echo "copier finished"
"#,
        runs = dir.join("copier.runs").display()
    );
    std::fs::write(&path, script).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

fn of_kind<'a>(events: &'a [serde_json::Value], kind: &str) -> Vec<&'a serde_json::Value> {
    events.iter().filter(|e| e["event"] == kind).collect()
}

fn position(events: &[serde_json::Value], kind: &str) -> Option<usize> {
    events.iter().position(|e| e["event"] == kind)
}

/// Run `plan` headless into `out`; panics (with its output) unless it
/// finished with exit code 0. Returns what it printed.
fn run_ok(tag: &str, plan: &Path, out: &Path) -> String {
    let done = run_with_deadline(headless_run(tag, plan, out), RUN_LIMIT);
    let stdout = String::from_utf8_lossy(&done.stdout).into_owned();
    assert_eq!(
        done.status.code(),
        Some(0),
        "{stdout}\n{}",
        String::from_utf8_lossy(&done.stderr)
    );
    stdout
}

#[test]
fn a_slow_copy_is_prepared_before_the_configs_that_need_it() {
    let dir = scratch("prepare-copy");
    let tag = format!("prepare-copy-{}", std::process::id());
    let _cleanup = KillTagged(tag.clone());
    let copier = write_copier(&dir);
    let model = dir.join("shm/model");
    let expect: u64 = 12 * 1_000_000 + 3;
    let text = sim_plan(
        "prep",
        &format!(
            "config_id = \"{{method}}\"\n[vars]\nmodel_dir = \"{}\"",
            model.display()
        ),
        "requires = [\"{model_dir}\"]",
        &format!(
            r#"[[prepare]]
id = "model"
command = "{} {{model_dir}} 12"
creates = ["{{model_dir}}"]
expect_bytes = {expect}
# The sha256 of the copier's `config.json` ("{{}}" and a newline).
verify = {{ sha256 = {{ "config.json" = "{CONFIG_SHA256}" }} }}
timeout_s = 100

[[phases]]
id = "p"
matrix = {{ method = ["a", "b"] }}
"#,
            copier.display()
        ),
    );
    let plan = dir.join("plan.toml");
    std::fs::write(&plan, &text).unwrap();

    let run1 = dir.join("run1");
    let stdout = run_ok(&tag, &plan, &run1);
    assert!(
        stdout.contains(&format!(
            "prepare model: starting for a and b → {} (12.0 MB expected)",
            model.display()
        )),
        "{stdout}"
    );
    assert!(stdout.contains("preparing model: "), "{stdout}");
    assert!(
        stdout.contains("prepare model: done, 12.0 MB in "),
        "{stdout}"
    );

    let events = events(&run1);
    let started = of_kind(&events, "prepare_started");
    assert_eq!(started.len(), 1, "{events:#?}");
    assert_eq!(started[0]["step"], "model");
    assert_eq!(started[0]["expect_bytes"], expect);
    assert_eq!(started[0]["creates"][0], model.display().to_string());
    assert_eq!(started[0]["configs"], serde_json::json!(["a", "b"]));
    let ended = of_kind(&events, "prepare_ended");
    assert_eq!(ended.len(), 1, "{events:#?}");
    assert_eq!(ended[0]["step"], "model");
    assert_eq!(ended[0]["outcome"], "done", "{}", ended[0]);
    assert_eq!(ended[0]["bytes"], expect, "{}", ended[0]);
    assert!(
        ended[0]["duration_s"].as_f64().unwrap() > 0.0,
        "{}",
        ended[0]
    );
    let recorded: Vec<_> = of_kind(&events, "prepare_progress")
        .into_iter()
        .filter(|e| e["recorded"] == true)
        .collect();
    assert!(!recorded.is_empty(), "no recorded progress: {events:#?}");
    for p in &recorded {
        assert_eq!(p["step"], "model");
        assert_eq!(p["expect_bytes"], expect);
        assert!(p["bytes"].as_u64().unwrap() <= expect, "{p}");
    }
    // The step ended before any config started, and it started before it
    // ended.
    let started_at = position(&events, "prepare_started").unwrap();
    let ended_at = position(&events, "prepare_ended").unwrap();
    let first_config = position(&events, "config_starting").expect("no config started");
    assert!(
        started_at < ended_at && ended_at < first_config,
        "{events:#?}"
    );
    assert_eq!(of_kind(&events, "config_starting").len(), 2, "{events:#?}");

    let results = results(&run1);
    assert_eq!(results.len(), 2, "{stdout}");
    for r in &results {
        assert_result_line(r);
        assert_eq!(r["status"], "ok", "{r}");
    }
    let cells = by_cell(&results);
    assert!(cells.contains_key("a/w-ctx256-c1") && cells.contains_key("b/w-ctx256-c1"));

    let log = std::fs::read_to_string(run1.join("logs/prepare-model.log")).unwrap();
    for i in 0..12 {
        assert!(log.contains(&format!("copied part {i}\n")), "{log}");
    }
    assert!(log.contains("copier finished"), "{log}");
    assert_eq!(
        std::fs::read_to_string(dir.join("copier.runs")).unwrap(),
        "run\n"
    );
    assert_eq!(
        std::fs::read_dir(&model).unwrap().count(),
        13,
        "12 parts and config.json"
    );

    // Again, into a new run: the target is whole, so the copier is not run.
    let run2 = dir.join("run2");
    let stdout = run_ok(&tag, &plan, &run2);
    assert!(
        stdout.contains("prepare model: in place already (12.0 MB)"),
        "{stdout}"
    );
    assert!(!stdout.contains("prepare model: starting"), "{stdout}");
    let events = common::events(&run2);
    assert!(
        of_kind(&events, "prepare_started").is_empty(),
        "{events:#?}"
    );
    assert!(
        of_kind(&events, "prepare_progress").is_empty(),
        "{events:#?}"
    );
    let ended = of_kind(&events, "prepare_ended");
    assert_eq!(ended.len(), 1, "{events:#?}");
    assert_eq!(ended[0]["outcome"], "present", "{}", ended[0]);
    assert_eq!(ended[0]["bytes"], expect, "{}", ended[0]);
    assert!(
        position(&events, "prepare_ended").unwrap() < position(&events, "config_starting").unwrap()
    );
    let results = common::results(&run2);
    assert_eq!(results.len(), 2);
    assert!(results.iter().all(|r| r["status"] == "ok"), "{results:#?}");
    assert_eq!(
        std::fs::read_to_string(dir.join("copier.runs")).unwrap(),
        "run\n",
        "the copier ran again"
    );
    assert!(!run2.join("logs/prepare-model.log").exists());
    assert!(tagged_processes(&tag).is_empty());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_failing_step_fails_exactly_the_configs_that_need_it() {
    let dir = scratch("prepare-fail");
    let tag = format!("prepare-fail-{}", std::process::id());
    let _cleanup = KillTagged(tag.clone());
    let root = dir.join("models");
    let r = root.display();
    let wrong = "0".repeat(64);
    // Config `{m}-{k}` requires `{root}/{m}`: step `m` (and only it), shared
    // by `m-1` and `m-2`, which fill it the same.
    let text = sim_plan(
        "prepfail",
        &format!("config_id = \"{{m}}-{{k}}\"\n[vars]\nroot = \"{r}\""),
        "requires = [\"{root}/{m}\"]",
        &format!(
            r#"[[prepare]]
id = "a"
shell = true
command = "echo 'step a cannot find its source'; exit 1"
creates = ["{r}/a"]

[[prepare]]
id = "b"
shell = true
command = "mkdir -p {r}/b && echo hi > {r}/b/config.json"
creates = ["{r}/b"]
verify = {{ sha256 = {{ "config.json" = "{wrong}" }} }}

[[prepare]]
id = "c"
command = "sleep 60"
creates = ["{r}/c"]
timeout_s = 1

[[prepare]]
id = "d"
shell = true
command = "mkdir -p {r}/d && echo hi > {r}/d/config.json"
creates = ["{r}/d"]
expect_bytes = 3

[[prepare]]
id = "e"
shell = true
command = "mkdir -p {r}/e && echo hi > {r}/e/config.json"
creates = ["{r}/e"]
expect_bytes = 1000

[[phases]]
id = "p"
matrix = {{ m = ["a", "b", "c", "d", "e"], k = ["1", "2"] }}
"#
        ),
    );
    let plan = dir.join("plan.toml");
    std::fs::write(&plan, &text).unwrap();
    let out_dir = dir.join("run");
    let done = run_with_deadline(headless_run(&tag, &plan, &out_dir), RUN_LIMIT);
    let stdout = String::from_utf8_lossy(&done.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&done.stderr).into_owned();
    // The sweep finished (failed cells are results: exit 0).
    assert_eq!(done.status.code(), Some(0), "{stdout}\n{stderr}");
    assert!(
        stdout.contains("sweep finished: 2 ok, 8 failed, 0 skipped"),
        "{stdout}\n{stderr}"
    );
    // The timed-out `sleep` (its own process group) and every server are gone.
    assert!(
        tagged_processes(&tag).is_empty(),
        "processes left: {:?}",
        tagged_processes(&tag)
    );

    let results = results(&out_dir);
    let cells = by_cell(&results);
    assert_eq!(cells.len(), 10, "{results:#?}");
    let expected = [
        ("a", "exit code 1"),
        ("b", "sha256"),
        ("c", "timeout_s"),
        ("e", "expected"),
    ];
    for (m, says) in expected {
        for k in ["1", "2"] {
            let rs = &cells[&format!("{m}-{k}/w-ctx256-c1")];
            assert_eq!(rs.len(), 1, "{rs:#?}");
            let r = &rs[0];
            assert_result_line(r);
            assert_eq!(r["status"], "failed", "{r}");
            assert_eq!(r["failure"]["kind"], "prepare_failed", "{r}");
            assert_eq!(r["failure"]["source"], "preflight", "{r}");
            let message = r["failure"]["message"].as_str().unwrap();
            assert!(
                message.starts_with(&format!("prepare step `{m}` failed: ")),
                "{message}"
            );
            assert!(message.contains(says), "{m}: {message}");
        }
        assert!(
            stdout.contains(&format!("prepare {m}: FAILED after ")),
            "{stdout}"
        );
    }
    // Exiting 0 does not make a step done: its target must be whole.
    for m in ["b", "e"] {
        let message = cells[&format!("{m}-1/w-ctx256-c1")][0]["failure"]["message"].to_string();
        assert!(message.contains("exited with code 0, but"), "{message}");
    }
    for k in ["1", "2"] {
        let evidence = cells[&format!("a-{k}/w-ctx256-c1")][0]["failure"]["evidence"].clone();
        assert!(
            evidence
                .as_array()
                .unwrap()
                .iter()
                .any(|l| l == "step a cannot find its source"),
            "{evidence}"
        );
        let d = &cells[&format!("d-{k}/w-ctx256-c1")];
        assert_eq!(d.len(), 1);
        assert_eq!(d[0]["status"], "ok", "{}", d[0]);
    }

    let events = events(&out_dir);
    let started: Vec<&str> = of_kind(&events, "config_starting")
        .iter()
        .map(|e| e["config"].as_str().unwrap())
        .collect();
    assert_eq!(started, ["d-1", "d-2"], "{events:#?}");
    for (step, outcome) in [
        ("a", "failed"),
        ("b", "failed"),
        ("c", "failed"),
        ("d", "done"),
        ("e", "failed"),
    ] {
        // Each step ran once, for both configs that share it (a failed one
        // is not run again for the second).
        let starts = of_kind(&events, "prepare_started")
            .into_iter()
            .filter(|e| e["step"] == step)
            .count();
        assert_eq!(starts, 1, "{step}: {events:#?}");
        let ended: Vec<_> = of_kind(&events, "prepare_ended")
            .into_iter()
            .filter(|e| e["step"] == step)
            .collect();
        assert_eq!(ended.len(), 1, "{step}: {events:#?}");
        assert_eq!(ended[0]["outcome"], outcome, "{}", ended[0]);
        assert_eq!(
            ended[0]["configs"],
            serde_json::json!([format!("{step}-1"), format!("{step}-2")]),
            "{}",
            ended[0]
        );
        if outcome == "failed" {
            assert!(ended[0]["message"].as_str().is_some(), "{}", ended[0]);
        }
    }
    // No server was launched for a config whose step failed.
    for m in ["a", "b", "c", "e"] {
        for k in ["1", "2"] {
            assert!(!out_dir.join(format!("logs/{m}-{k}.log")).exists());
        }
    }
    let log = std::fs::read_to_string(out_dir.join("logs/prepare-a.log")).unwrap();
    assert!(log.contains("step a cannot find its source"), "{log}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn no_room_and_no_right_to_write_are_said_before_anything_runs() {
    let dir = scratch("prepare-room");
    let tag = format!("prepare-room-{}", std::process::id());
    let _cleanup = KillTagged(tag.clone());
    let big_marker = dir.join("ran-big");
    let proc_marker = dir.join("ran-proc");
    // Each step is linked by its phase's `prepare` (no `requires`).
    let text = sim_plan(
        "preproom",
        "config_id = \"{phase}\"",
        "",
        &format!(
            r#"[[prepare]]
id = "big"
command = "touch {}"
creates = ["{}"]
expect_bytes = 1000000000000000

[[prepare]]
id = "proc"
command = "touch {}"
creates = ["/proc/sweeptop-test/x"]

[[phases]]
id = "needs-big"
prepare = ["big"]

[[phases]]
id = "needs-proc"
prepare = ["proc"]

[[phases]]
id = "needs-none"
"#,
            big_marker.display(),
            dir.join("big").display(),
            proc_marker.display()
        ),
    );
    let plan = dir.join("plan.toml");
    std::fs::write(&plan, &text).unwrap();
    let out_dir = dir.join("run");
    let done = run_with_deadline(headless_run(&tag, &plan, &out_dir), RUN_LIMIT);
    let stdout = String::from_utf8_lossy(&done.stdout).into_owned();
    assert!(
        stdout.contains("sweep finished: 1 ok, 2 failed, 0 skipped"),
        "{stdout}\n{}",
        String::from_utf8_lossy(&done.stderr)
    );
    let results = results(&out_dir);
    let cells = by_cell(&results);
    assert_eq!(cells.len(), 3, "{results:#?}");
    for (config, says) in [("needs-big", "free"), ("needs-proc", "not writable")] {
        let r = &cells[&format!("{config}/w-ctx256-c1")][0];
        assert_eq!(r["status"], "failed", "{r}");
        assert_eq!(r["failure"]["kind"], "prepare_failed", "{r}");
        let message = r["failure"]["message"].as_str().unwrap();
        assert!(message.contains(says), "{config}: {message}");
    }
    let big = cells["needs-big/w-ctx256-c1"][0]["failure"]["message"].to_string();
    assert!(big.contains("prepare step `big` failed: "), "{big}");
    assert!(big.contains("1.0 PB"), "{big}");
    let proc = cells["needs-proc/w-ctx256-c1"][0]["failure"]["message"].to_string();
    assert!(proc.contains("prepare step `proc` failed: "), "{proc}");
    assert!(proc.contains("/proc/sweeptop-test/x"), "{proc}");
    // A config that needs neither step runs.
    assert_eq!(cells["needs-none/w-ctx256-c1"][0]["status"], "ok");
    // Neither command ran.
    assert!(!big_marker.exists(), "the step without room ran");
    assert!(!proc_marker.exists(), "the step that cannot write ran");
    let events = events(&out_dir);
    assert!(
        of_kind(&events, "prepare_started").is_empty(),
        "{events:#?}"
    );
    assert_eq!(of_kind(&events, "prepare_ended").len(), 2, "{events:#?}");
    let started: Vec<&str> = of_kind(&events, "config_starting")
        .iter()
        .map(|e| e["config"].as_str().unwrap())
        .collect();
    assert_eq!(started, ["needs-none"], "{events:#?}");
    assert!(tagged_processes(&tag).is_empty());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_step_that_floods_its_output_is_bounded() {
    let dir = scratch("prepare-flood");
    let tag = format!("prepare-flood-{}", std::process::id());
    let _cleanup = KillTagged(tag.clone());
    let target = dir.join("target");
    // No config links the step: every config needs it (and it runs once).
    let text = sim_plan(
        "prepflood",
        "config_id = \"{n}\"\n[limits]\nlog_max_mb = 1",
        "",
        &format!(
            r#"[[prepare]]
id = "flood"
shell = true
command = "yes 'a long line of output from a step that says far too much, over and over' | head -c 30000000; mkdir -p {}"
creates = ["{}"]
timeout_s = 100

[[phases]]
id = "p"
matrix = {{ n = ["x", "y"] }}
"#,
            target.display(),
            target.display()
        ),
    );
    let plan = dir.join("plan.toml");
    std::fs::write(&plan, &text).unwrap();
    let out_dir = dir.join("run");
    let stdout = run_ok(&tag, &plan, &out_dir);
    assert!(target.is_dir());
    let results = results(&out_dir);
    assert_eq!(results.len(), 2, "{stdout}");
    assert!(results.iter().all(|r| r["status"] == "ok"), "{results:#?}");
    let events = events(&out_dir);
    let ended = of_kind(&events, "prepare_ended");
    assert_eq!(ended.len(), 1, "{events:#?}");
    assert_eq!(ended[0]["outcome"], "done", "{}", ended[0]);
    assert_eq!(ended[0]["configs"], serde_json::json!(["x", "y"]));

    let mut total = 0u64;
    let mut files = Vec::new();
    for e in std::fs::read_dir(out_dir.join("logs")).unwrap().flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if name.starts_with("prepare-") {
            total += e.metadata().unwrap().len();
            files.push(name);
        }
    }
    assert!(
        files.contains(&"prepare-flood.log".to_string()),
        "{files:?}"
    );
    assert!(
        total <= 1_500_000,
        "{total} bytes of step logs in {files:?}"
    );
    // The cap kept something of the flood: the log is not empty.
    assert!(total > 100_000, "{total} bytes of step logs in {files:?}");
    assert!(tagged_processes(&tag).is_empty());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bad_prepare_steps_are_plan_errors() {
    let dir = scratch("prepare-bad");
    let good_step = r#"[[prepare]]
id = "model"
command = "true"
creates = ["/tmp/sweeptop-never-made/model"]
"#;
    let phase = "[[phases]]\nid = \"p\"\n";
    let hash_ok = "a".repeat(64);
    let cases: Vec<(&str, String, &str, &str)> = vec![
        (
            "duplicate",
            format!("{good_step}\n{good_step}\n{phase}"),
            "id = \"model\"",
            "duplicate prepare step id `model`",
        ),
        (
            "empty-creates",
            format!("[[prepare]]\nid = \"model\"\ncommand = \"true\"\ncreates = []\n\n{phase}"),
            "creates = []",
            "creates is empty",
        ),
        (
            "both-expects",
            format!("{good_step}expect_bytes = 10\nexpect_from = \"/tmp\"\n\n{phase}"),
            "expect_bytes = 10",
            "not both",
        ),
        (
            "no-such-step",
            format!("{good_step}\n{phase}prepare = [\"nope\"]\n"),
            "prepare = [\"nope\"]",
            "no prepare step `nope`",
        ),
        (
            "short-hash",
            format!(
                "{good_step}verify = {{ sha256 = {{ \"config.json\" = \"abc123\" }} }}\n\n{phase}"
            ),
            "verify = ",
            "must be 64 hex digits",
        ),
        (
            "not-hex",
            format!(
                "{good_step}verify = {{ sha256 = {{ \"config.json\" = \"{}\" }} }}\n\n{phase}",
                "g".repeat(64)
            ),
            "verify = ",
            "must be 64 hex digits",
        ),
    ];
    // The cases differ from a good plan only in what they break.
    let good = sim_plan(
        "bad",
        "",
        "",
        &format!(
            "{good_step}verify = {{ sha256 = {{ \"config.json\" = \"{hash_ok}\" }} }}\n\n{phase}prepare = [\"model\"]\n"
        ),
    );
    let good_path = dir.join("good.toml");
    std::fs::write(&good_path, &good).unwrap();
    let mut cmd = sweeptop("prepare-bad");
    cmd.arg("check").arg(&good_path);
    let out = run_with_deadline(cmd, Duration::from_secs(30));
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    for (name, rest, at, says) in cases {
        let text = sim_plan("bad", "", "", &rest);
        let path = dir.join(format!("{name}.toml"));
        std::fs::write(&path, &text).unwrap();
        let mut cmd = sweeptop("prepare-bad");
        cmd.arg("check").arg(&path);
        let out = run_with_deadline(cmd, Duration::from_secs(30));
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{name}: {err}");
        assert!(err.contains(says), "{name}: {err}");
        // Located at the line that is wrong (the last such line: a duplicate
        // is the second one).
        let lines: Vec<&str> = text.lines().collect();
        let line = lines.iter().rposition(|l| l.starts_with(at)).unwrap() + 1;
        let located = format!("{}:{line}:", path.display());
        assert!(err.contains(&located), "{name}: wants {located} in {err}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_copier_left_by_a_killed_sweep_keeps_another_sweep_off_its_target() {
    let dir = scratch("prepare-orphan");
    let target = dir.join("shm").join("model");
    // A quiet copier (as `cp -r` is): it outlives its sweep's SIGKILL.
    let copier = dir.join("quiet.sh");
    std::fs::write(
        &copier,
        format!(
            "#!/bin/sh\necho run >> \"{runs}\"\nmkdir -p \"$1\"\ni=0\nwhile [ $i -lt 20 ]; do\n  \
             head -c 1000000 /dev/zero > \"$1/part-$i.bin\"\n  i=$((i+1))\n  sleep 0.5\ndone\n",
            runs = dir.join("copier.runs").display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&copier, std::fs::Permissions::from_mode(0o755)).unwrap();
    let plan = dir.join("plan.toml");
    std::fs::write(
        &plan,
        sim_plan(
            "orphan",
            "",
            &format!("requires = [\"{}\"]", target.display()),
            &format!(
                "[[prepare]]\nid = \"model\"\ncommand = \"{} {}\"\ncreates = [\"{}\"]\n\
                 expect_bytes = 20000000\n\n[[phases]]\nid = \"p\"\n",
                copier.display(),
                target.display(),
                target.display()
            ),
        ),
    )
    .unwrap();
    let tag = format!("prepare-orphan-{}", std::process::id());
    let first = dir.join("first");
    let mut a = headless_run(&tag, &plan, &first)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    wait_until(Duration::from_secs(60), "the copy to start", || {
        !of_kind(&events(&first), "prepare_started").is_empty()
    });
    a.kill().unwrap();
    a.wait().unwrap();
    // Another sweep of the same target waits for the orphan, then finds
    // the target whole: it never copies beside it.
    let second = dir.join("second");
    let said = run_ok(&tag, &plan, &second);
    assert!(said.contains("another sweep is putting"), "{said}");
    assert!(
        said.contains("prepare model: in place already (20.0 MB)"),
        "{said}"
    );
    let runs = std::fs::read_to_string(dir.join("copier.runs")).unwrap();
    assert_eq!(runs.lines().count(), 1, "the copier ran once");
    assert!(of_kind(&events(&second), "prepare_started").is_empty());
    assert!(results(&second).iter().all(|r| r["status"] == "ok"));
    wait_until(Duration::from_secs(30), "no process left", || {
        tagged_processes(&tag).is_empty()
    });
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn cells_whose_step_failed_are_measured_by_the_next_resume() {
    let dir = scratch("prepare-again");
    let runs = dir.join("runs");
    std::fs::create_dir_all(&runs).unwrap();
    let target = dir.join("shm").join("model");
    let mounted = dir.join("source-mounted");
    let plan = dir.join("plan.toml");
    // A step that fails until its source is there (a disk not mounted yet
    // at boot, a tool not on the PATH of a bare environment).
    std::fs::write(
        &plan,
        sim_plan(
            "again",
            "",
            &format!("requires = [\"{}\"]", target.display()),
            &format!(
                "[[prepare]]\nid = \"model\"\nshell = true\ncommand = \"test -f {} && mkdir -p {}\"\n\
                 creates = [\"{}\"]\n\n[[phases]]\nid = \"p\"\n",
                mounted.display(),
                target.display(),
                target.display()
            ),
        ),
    )
    .unwrap();
    let tag = format!("prepare-again-{}", std::process::id());
    let run = runs.join("r1");
    run_ok(&tag, &plan, &run);
    let first = results(&run);
    assert_eq!(first.len(), 1);
    assert_eq!(first[0]["failure"]["kind"], "prepare_failed");
    // The run finished, yet nothing was measured: `resume --all` finds it.
    let mut cmd = sweeptop(&tag);
    cmd.args(["resume", "--all", "--dry-run"]).arg(&runs);
    let out = run_with_deadline(cmd, Duration::from_secs(30));
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        said.contains(&format!("{} (1 cells left)", run.display())),
        "{said}"
    );
    assert!(said.contains("prepare model first"), "{said}");
    // Once the source is there, a plain resume measures it.
    std::fs::write(&mounted, b"").unwrap();
    let mut cmd = sweeptop(&tag);
    cmd.args(["run", "--headless", "--no-gpu", "--resume"])
        .arg(&run);
    let out = run_with_deadline(cmd, RUN_LIMIT);
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{said}");
    assert!(
        said.contains("its prepare step failed: nothing was measured"),
        "{said}"
    );
    let all = results(&run);
    assert_eq!(all.len(), 2);
    assert_eq!(all[1]["status"], "ok", "{}", all[1]);
    let _ = std::fs::remove_dir_all(&dir);
}
