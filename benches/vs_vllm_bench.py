#!/usr/bin/env python3
"""sweeptop loadtest against vLLM's own client, `vllm bench serve`, on one real
vLLM server, side by side in one run: the tools alternate, the server is pinned
to one set of cores and the clients to another, and each run is bracketed by
two readings of the server's /metrics so both tools' TTFT can be compared with
the server's own clock.

Prints one row per run and a verdict: median output tok/s within 5 % of each
other, and median client-minus-server TTFT within 2 ms of each other.

    python3 benches/vs_vllm_bench.py --venv /tmp/vllmenv --model /tmp/tinymodel \\
        --sweeptop target/release/sweeptop

Standard library only; needs `taskset` (util-linux) and the venv's `vllm`.
"""

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request


def get(url, timeout=5):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.read().decode("utf-8", "replace")


def histogram(page, name):
    """(sum, count) of a Prometheus histogram, summed over its label sets."""
    total = {"_sum": 0.0, "_count": 0.0}
    for line in page.splitlines():
        if line.startswith("#"):
            continue
        for suffix in total:
            if line.startswith(name + suffix):
                total[suffix] += float(line.rsplit(" ", 1)[1])
    return total["_sum"], total["_count"]


def server_ttft_ms(before, after):
    s0, c0 = histogram(before, "vllm:time_to_first_token_seconds")
    s1, c1 = histogram(after, "vllm:time_to_first_token_seconds")
    return (s1 - s0) / (c1 - c0) * 1000.0 if c1 > c0 else float("nan")


def start_server(args, port):
    env = dict(os.environ)
    env.update(
        VLLM_TARGET_DEVICE="cpu",
        VLLM_CPU_KVCACHE_SPACE="1",
        VLLM_CPU_OMP_THREADS_BIND=args.server_cores,
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        VLLM_NO_USAGE_STATS="1",
        TOKENIZERS_PARALLELISM="false",
    )
    cmd = [
        "taskset", "-c", args.server_cores,
        os.path.join(args.venv, "bin", "python"), "-m", "vllm.entrypoints.openai.api_server",
        "--model", args.model, "--served-model-name", "tiny",
        "--host", "127.0.0.1", "--port", str(port),
        "--max-model-len", "2048", "--dtype", "bfloat16", "--seed", "0",
        "--enforce-eager", "--max-num-seqs", str(max(8, args.concurrency)),
    ]
    log = open(os.path.join(args.out, "server.log"), "w")
    proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    deadline = time.time() + 600
    while time.time() < deadline:
        if proc.poll() is not None:
            sys.exit(f"the server exited; see {args.out}/server.log")
        try:
            get(base + "/health")
            return proc, base
        except Exception:
            time.sleep(1)
    sys.exit("the server did not become ready in 600 s")


def run_sweeptop(args, base, i):
    cmd = [
        "taskset", "-c", args.client_cores, args.sweeptop, "loadtest", base,
        "--model", "tiny", "--concurrency", str(args.concurrency),
        "--requests", str(args.num_prompts), "--prompt-tokens", str(args.input_len),
        "--max-tokens", str(args.output_len), "--json",
    ]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    v = json.loads(out)
    return v["output_tok_s"], v["ttft_ms_mean"], v.get("server_ttft_ms_mean")


def run_vllm(args, base, i):
    result = os.path.join(args.out, f"vllm-{i}.json")
    cmd = [
        "taskset", "-c", args.client_cores, os.path.join(args.venv, "bin", "vllm"),
        "bench", "serve", "--backend", "vllm", "--base-url", base, "--model", "tiny",
        "--tokenizer", args.model, "--dataset-name", "random",
        "--random-input-len", str(args.input_len), "--random-output-len", str(args.output_len),
        "--num-prompts", str(args.num_prompts), "--max-concurrency", str(args.concurrency),
        "--ignore-eos", "--save-result", "--result-filename", result, "--disable-tqdm",
        "--seed", str(i),
    ]
    subprocess.run(cmd, capture_output=True, text=True, check=True,
                   env=dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1"))
    with open(result) as f:
        v = json.load(f)
    return v["output_throughput"], v["mean_ttft_ms"], None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--venv", required=True)
    ap.add_argument("--model", default="/tmp/tinymodel")
    ap.add_argument("--sweeptop", default="target/release/sweeptop")
    ap.add_argument("--port", type=int, default=8011)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--concurrency", type=int, default=4)
    ap.add_argument("--num-prompts", type=int, default=64)
    ap.add_argument("--input-len", type=int, default=256)
    ap.add_argument("--output-len", type=int, default=128)
    ap.add_argument("--server-cores", default="0")
    ap.add_argument("--client-cores", default="1")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    args.out = args.out or tempfile.mkdtemp(prefix="vs-vllm-bench-")
    os.makedirs(args.out, exist_ok=True)
    for tool in ("taskset",):
        if not shutil.which(tool):
            sys.exit(f"{tool} is needed")
    proc, base = start_server(args, args.port)
    rows = []
    try:
        tools = [("sweeptop", run_sweeptop), ("vllm bench", run_vllm)]
        for i in range(args.rounds):
            # Alternate which tool goes first, so neither always meets a warmer server.
            for name, fn in tools if i % 2 == 0 else list(reversed(tools)):
                before = get(base + "/metrics")
                tok_s, ttft, own = fn(args, base, i)
                after = get(base + "/metrics")
                server = server_ttft_ms(before, after)
                rows.append((i, name, tok_s, ttft, server, ttft - server, own))
    finally:
        os.killpg(proc.pid, signal.SIGINT)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
    print(f"vLLM CPU, concurrency {args.concurrency}, {args.num_prompts} prompts of "
          f"{args.input_len} tokens, {args.output_len} out; server on cores "
          f"{args.server_cores}, clients on {args.client_cores}\n")
    print("| round | tool | output tok/s | client TTFT mean | server TTFT mean | client − server |")
    print("| ---: | --- | ---: | ---: | ---: | ---: |")
    for i, name, tok_s, ttft, server, gap, own in rows:
        print(f"| {i + 1} | {name} | {tok_s:.1f} | {ttft:.2f} ms | {server:.2f} ms | {gap:+.2f} ms |")
    med = {}
    for name in ("sweeptop", "vllm bench"):
        mine = [r for r in rows if r[1] == name]
        med[name] = (statistics.median(r[2] for r in mine), statistics.median(r[5] for r in mine))
    tok_diff = (med["sweeptop"][0] / med["vllm bench"][0] - 1.0) * 100.0
    gap_diff = med["sweeptop"][1] - med["vllm bench"][1]
    ok = abs(tok_diff) <= 5.0 and abs(gap_diff) <= 2.0
    print(f"\nmedians: output tok/s sweeptop {med['sweeptop'][0]:.1f}, vllm bench "
          f"{med['vllm bench'][0]:.1f} ({tok_diff:+.1f} %, limit ±5 %); client − server TTFT "
          f"sweeptop {med['sweeptop'][1]:+.2f} ms, vllm bench {med['vllm bench'][1]:+.2f} ms "
          f"({gap_diff:+.2f} ms apart, limit ±2 ms): {'AGREE' if ok else 'DISAGREE'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
