//! `sweeptop classify` on log excerpts and HTTP error bodies, through the binary.

use crate::common;

use std::io::Write;
use std::process::{Command, Stdio};

fn classify(input: &str, json: bool) -> String {
    let mut cmd = Command::new(common::bin());
    cmd.arg("classify");
    if json {
        cmd.arg("--json");
    }
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn classifies_logs_and_bodies() {
    let cases = [
        ("[2025-08-13 15:12:48 TP0] Scheduler hit an exception: Traceback (most recent call last):\n  File \"x.py\", line 1\ntorch.AcceleratorError: CUDA error: an illegal instruction was encountered\n[rank0]:[E] Watchdog caught collective operation timeout\n", "cuda_illegal_instruction"),
        ("(VllmWorkerProcess pid=409) ERROR torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n", "cuda_oom"),
        ("INFO 08-13 NCCL INFO Bootstrap : Using eth0\nFound nccl from library libnccl.so.2\n", "none"),
        ("{\"object\":\"error\",\"message\":\"Requested token count exceeds the model's maximum context length of 32768 tokens. You requested a total of 33012 tokens: 32756 tokens from the input messages and 256 tokens for the completion.\",\"type\":\"BadRequestError\",\"param\":null,\"code\":400}", "context_overflow"),
        ("{\"error\":{\"code\":400,\"message\":\"request (33012 tokens) exceeds the available context size (32768 tokens)\",\"type\":\"exceed_context_size_error\",\"n_prompt_tokens\":33012,\"n_ctx\":32768}}", "context_overflow"),
        ("Illegal instruction (core dumped)\n", "signal_crash"),
    ];
    for (input, kind) in cases {
        assert_eq!(classify(input, false).trim(), kind, "{input}");
    }
    let v: serde_json::Value = serde_json::from_str(&classify(cases[3].0, true)).unwrap();
    assert_eq!(v["kind"], "context_overflow");
    assert_eq!(v["context"]["limit"], 32768);
    assert_eq!(v["context"]["prompt_tokens"], 32756);
    assert_eq!(v["context"]["output_tokens"], 256);
    let v: serde_json::Value = serde_json::from_str(&classify(cases[0].0, true)).unwrap();
    assert!(
        v["evidence"]
            .as_str()
            .unwrap()
            .contains("illegal instruction"),
        "{v}"
    );
}

#[test]
fn classifies_a_file_and_survives_binary_garbage() {
    let dir = common::scratch("classify");
    let p = dir.join("log.bin");
    let mut bytes: Vec<u8> = (0..=255u8).cycle().take(1 << 20).collect();
    bytes.extend_from_slice(
        b"\nRuntimeError: CUDA error: an illegal memory access was encountered\n",
    );
    std::fs::write(&p, bytes).unwrap();
    let out = Command::new(common::bin())
        .arg("classify")
        .arg(&p)
        .output()
        .unwrap();
    assert!(out.status.success());
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "cuda_illegal_address"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// `classify` with what the script knows of the process's end.
fn classify_ended(input: &str, args: &[&str]) -> std::process::Output {
    let mut child = Command::new(common::bin())
        .arg("classify")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // A refused argument ends it before it reads: its stdin is then closed
    // (a broken pipe here is that, not a failure).
    let written = child.stdin.take().unwrap().write_all(input.as_bytes());
    if let Err(e) = written {
        assert_eq!(e.kind(), std::io::ErrorKind::BrokenPipe, "{e}");
    }
    child.wait_with_output().unwrap()
}

#[test]
fn the_exit_a_script_knows_decides_a_traceback() {
    // What a Python server prints when it is stopped with SIGINT after its
    // cells: not a failure, with or without the hint.
    let interrupted = "INFO:     127.0.0.1:4000 - \"POST /v1/completions HTTP/1.1\" 200 OK\nTraceback (most recent call last):\n  File \"server.py\", line 40, in <module>\n    server.serve_forever()\nKeyboardInterrupt\n";
    let text = |o: std::process::Output| {
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8(o.stdout).unwrap()
    };
    assert_eq!(text(classify_ended(interrupted, &[])), "none\n");
    assert_eq!(
        text(classify_ended(interrupted, &["--signal", "INT"])),
        "none\n"
    );
    let crash =
        "Traceback (most recent call last):\n  File \"s.py\", line 3, in run\nKeyError: 'rid-42'\n";
    assert_eq!(text(classify_ended(crash, &[])), "server_exited\n");
    assert_eq!(
        text(classify_ended(crash, &["--signal", "SIGSEGV"])),
        "signal_crash\n"
    );
    assert_eq!(
        text(classify_ended(crash, &["--exit-code", "-11"])),
        "signal_crash\n"
    );
    assert_eq!(text(classify_ended(crash, &["--exit-code", "0"])), "none\n");
    let json = text(classify_ended(crash, &["--exit-code", "1", "--json"]));
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["kind"], "server_exited");
    assert_eq!(
        v["message"],
        "the server exited (exit code 1): KeyError: 'rid-42'"
    );
    // A signal that is not one is the user's to fix.
    let bad = classify_ended(crash, &["--signal", "SIGFOO"]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("not a signal"));
}
