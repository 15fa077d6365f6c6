//! Process-ending faults, through the sweeptop sim-server as a child process.

use crate::simclient;

use std::os::unix::process::ExitStatusExt;
use std::time::Duration;

use simclient::{completion_body, request, spawn_binary, wait_healthy, wait_output, EventStream};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crash_prints_the_cuda_error_and_exits() {
    let c = spawn_binary(&[
        "--max-speed",
        "--tp",
        "2",
        "--fault",
        "crash:cuda_illegal_instruction@30",
    ]);
    wait_healthy(c.port, Duration::from_secs(10)).await;
    // The stream is cut when the process dies: reading ends or errors.
    if let Ok(s) =
        EventStream::open(c.port, "/v1/completions", &completion_body(3, 100, true)).await
    {
        let _ = tokio::time::timeout(Duration::from_secs(5), s.collect()).await;
    }
    let (status, _out, err) = wait_output(c, Duration::from_secs(10)).await;
    assert!(!status.success(), "{status:?}");
    // SGLang's parent kills its process tree.
    assert_eq!(status.signal(), Some(libc::SIGKILL), "{status:?}");
    let cause = err
        .find("CUDA error: an illegal instruction was encountered")
        .expect(&err);
    assert!(err.contains("TP1] Scheduler hit an exception"), "{err}");
    assert!(
        err.contains("Received sigquit from a child process"),
        "{err}"
    );
    // Watchdog noise comes after the cause.
    assert!(err.find("DistBackendError").unwrap() > cause);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vllm_crash_reports_in_stream_then_exits_1() {
    let c = spawn_binary(&[
        "--flavor",
        "vllm",
        "--ttft-ms",
        "1",
        "--itl-ms",
        "1",
        "--fault",
        "crash:cuda_illegal_address@5",
    ]);
    wait_healthy(c.port, Duration::from_secs(10)).await;
    let s = EventStream::open(c.port, "/v1/completions", &completion_body(3, 100, true))
        .await
        .unwrap();
    let events = tokio::time::timeout(Duration::from_secs(5), s.collect())
        .await
        .expect("stream should end")
        .unwrap_or_default();
    let (status, _out, err) = wait_output(c, Duration::from_secs(10)).await;
    assert_eq!(status.code(), Some(1), "{status:?}");
    assert!(err.contains("CUDA error: an illegal memory access was encountered"));
    assert!(err.contains("EngineDeadError"));
    let error_event = events.iter().find(|(e, _)| e.starts_with("{\"error\""));
    assert!(error_event.is_some(), "{events:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn signal_and_oom_kill_deaths() {
    for (kind, sig, line) in [
        (
            "signal_crash",
            libc::SIGSEGV,
            "Fatal Python error: Segmentation fault",
        ),
        ("oom_killed", libc::SIGKILL, "Killed"),
    ] {
        let fault = format!("crash:{kind}@1");
        let c = spawn_binary(&["--max-speed", "--fault", &fault]);
        wait_healthy(c.port, Duration::from_secs(10)).await;
        let _ = request(
            c.port,
            "POST",
            "/v1/completions",
            Some(&completion_body(1, 5, false)),
        )
        .await;
        let (status, _, err) = wait_output(c, Duration::from_secs(10)).await;
        assert_eq!(status.signal(), Some(sig), "{kind}: {status:?}");
        assert!(err.contains(line), "{kind}: {err}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn startup_crash_never_becomes_ready() {
    let c = spawn_binary(&[
        "--flavor",
        "vllm",
        "--startup-ms",
        "200",
        "--fault",
        "startup-crash:no_kernel_image",
    ]);
    let (status, out, err) = wait_output(c, Duration::from_secs(10)).await;
    assert_eq!(status.code(), Some(1));
    assert!(err.contains("no kernel image is available for execution on the device"));
    assert!(
        !out.contains("Application startup complete")
            && !err.contains("Application startup complete")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_prints_shutdown_and_exits_0() {
    let c = spawn_binary(&["--flavor", "vllm"]);
    wait_healthy(c.port, Duration::from_secs(10)).await;
    let pid = c.child.id() as libc::pid_t;
    // SAFETY: signalling our own child.
    unsafe {
        libc::kill(pid, libc::SIGTERM);
    }
    let (status, out, err) = wait_output(c, Duration::from_secs(10)).await;
    assert_eq!(status.code(), Some(0), "{status:?}");
    assert!(
        out.contains("Application startup complete")
            || err.contains("Application startup complete")
    );
    assert!(err.contains("INFO:     Shutting down"), "{err}");
    assert!(out.contains("\"GET /health HTTP/1.1\" 200 OK"), "{out}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flood_does_not_disturb_pacing() {
    let c = spawn_binary(&["--ttft-ms", "50", "--itl-ms", "5", "--fault", "flood:5"]);
    wait_healthy(c.port, Duration::from_secs(10)).await;
    let sent = std::time::Instant::now();
    let s = EventStream::open(c.port, "/v1/completions", &completion_body(3, 40, true))
        .await
        .unwrap();
    let events = s.collect().await.unwrap();
    let took = sent.elapsed();
    // 50 ms + 39 * 5 ms = 245 ms.
    assert!(
        took > Duration::from_millis(240) && took < Duration::from_millis(400),
        "{took:?}"
    );
    assert!(events.len() >= 40);
    let pid = c.child.id() as libc::pid_t;
    // SAFETY: signalling our own child.
    unsafe {
        libc::kill(pid, libc::SIGTERM);
    }
    let (_, _, err) = wait_output(c, Duration::from_secs(10)).await;
    assert!(err.len() > 500_000, "flood wrote only {} bytes", err.len());
    assert!(err.contains("NCCL INFO"));
}
