//! Test fixtures in the shapes real server logs and bodies have (written from
//! FAILURE_SIGNATURES.md and the servers' sources, not copied from a run).

use super::log::LineClass;
use super::log::LineClass::*;
use crate::model::FailureKind as K;

/// (server style, line, expected class). Every fatal kind appears in several
/// server styles; every look-alike is here as `Plain`.
pub const LINES: &[(&str, &str, LineClass)] = &[
    // --- cuda_illegal_instruction ---
    ("sglang", "[2025-08-13 15:12:48 DP3 TP3 EP3] RuntimeError: CUDA error: an illegal instruction was encountered", Fatal(K::CudaIllegalInstruction)),
    ("vllm", "(VllmWorkerProcess pid=409) ERROR 08-13 15:12:48 [multiproc_worker_utils.py:239] torch.AcceleratorError: CUDA error: an illegal instruction was encountered", Fatal(K::CudaIllegalInstruction)),
    ("vllm", "\u{1b}[1;36m(EngineCore_0 pid=123)\u{1b}[0;0m \u{1b}[31mERROR\u{1b}[0m 08-13 15:12:48 [core.py:700] RuntimeError: CUDA error: an illegal instruction was encountered", Fatal(K::CudaIllegalInstruction)),
    ("llama.cpp", "CUDA error: an illegal instruction was encountered", Fatal(K::CudaIllegalInstruction)),
    ("tgi", "2025-08-13T15:12:48.123456Z ERROR text_generation_launcher: RuntimeError: CUDA error: an illegal instruction was encountered", Fatal(K::CudaIllegalInstruction)),
    ("c++", "[rank0]:[E813 15:12:48.000000000 ProcessGroupNCCL.cpp:1896] [PG ID 0 PG GUID 0(default_pg) Rank 0] Process group watchdog thread terminated with exception: CUDA error: an illegal instruction was encountered", Fatal(K::CudaIllegalInstruction)),
    ("driver", "CUDA_ERROR_ILLEGAL_INSTRUCTION in cuLaunchKernel", Fatal(K::CudaIllegalInstruction)),
    // --- cuda_illegal_address ---
    ("sglang", "[2025-08-13 15:12:48 TP0] RuntimeError: CUDA error: an illegal memory access was encountered", Fatal(K::CudaIllegalAddress)),
    ("vllm", "(VllmWorkerProcess pid=410) ERROR 08-13 15:12:48 [multiproc_worker_utils.py:239] RuntimeError: CUDA error: an illegal memory access was encountered", Fatal(K::CudaIllegalAddress)),
    ("llama.cpp", "CUDA error: an illegal memory access was encountered", Fatal(K::CudaIllegalAddress)),
    ("tgi", "2025-08-13T15:12:48.123456Z ERROR text_generation_launcher: Method Decode encountered an error. RuntimeError: CUDA error: an illegal memory access was encountered", Fatal(K::CudaIllegalAddress)),
    ("nccl", "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/NCCLUtils.hpp:317, unhandled cuda error, NCCL version 2.21.5 ncclUnhandledCudaError: Call to CUDA function failed. Last error: Cuda failure 'an illegal memory access was encountered'", Fatal(K::CudaIllegalAddress)),
    ("triton", "RuntimeError: Triton Error [CUDA]: an illegal memory access was encountered", Fatal(K::CudaIllegalAddress)),
    // --- cuda_oom ---
    ("sglang", "[2025-08-13 15:12:48 TP1] torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 1 has a total capacity of 79.10 GiB of which 1.20 GiB is free.", Fatal(K::CudaOom)),
    ("sglang", "[2025-08-13 15:12:48 TP0] RuntimeError: Not enough memory. Please try to increase --mem-fraction-static.", Fatal(K::CudaOom)),
    ("sglang", "[2025-08-13 15:12:48 TP0] Exception: Capture cuda graph failed: CUDA out of memory. Tried to allocate 512.00 MiB.", Fatal(K::CudaOom)),
    ("vllm", "ERROR 08-13 15:12:48 [engine.py:400] torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.50 GiB.", Fatal(K::CudaOom)),
    ("vllm", "(EngineCore_0 pid=123) ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when initializing the engine.", Fatal(K::CudaOom)),
    ("vllm", "ValueError: The model's max seq len (32768) is larger than the maximum number of tokens that can be stored in KV cache (12544). Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine.", Fatal(K::CudaOom)),
    ("vllm", "(EngineCore_0 pid=123) ValueError: To serve at least one request with the models's max seq len (131072), (16.00 GiB KV cache is needed, which is larger than the available KV cache memory (8.50 GiB). Based on the available memory, the estimated maximum model length is 69632.", Fatal(K::CudaOom)),
    ("llama.cpp", "ggml_backend_cuda_buffer_type_alloc_buffer: allocating 20480.00 MiB on device 0: cudaMalloc failed: out of memory", Fatal(K::CudaOom)),
    ("llama.cpp", "ggml_gallocr_reserve_n: failed to allocate CUDA0 buffer of size 4294967296", Fatal(K::CudaOom)),
    ("tgi", "2025-08-13T15:12:48.123456Z ERROR warmup{max_input_length=4095}: text_generation_router_v3::client: Server error: Not enough memory to handle 4096 prefill tokens. You need to decrease `--max-batch-prefill-tokens`", Fatal(K::CudaOom)),
    // --- device_assert ---
    ("vllm", "RuntimeError: CUDA error: device-side assert triggered", Fatal(K::DeviceAssert)),
    ("sglang", "/pytorch/aten/src/ATen/native/cuda/IndexKernel.cu:92: operator(): block: [0,0,0], thread: [0,0,0] Assertion `-sizes[i] <= index && index < sizes[i] && \"index out of bounds\"` failed.", Fatal(K::DeviceAssert)),
    ("tgi", "2025-08-13T15:12:48.123456Z ERROR text_generation_launcher: ../aten/src/ATen/native/cuda/ScatterGatherKernel.cu:144: operator(): block: [3,0,0], thread: [64,0,0] Assertion `idx_dim >= 0 && idx_dim < index_size && \"index out of bounds\"` failed.", Fatal(K::DeviceAssert)),
    // --- nccl_error ---
    ("sglang", "[2025-08-13 15:12:48 TP2] torch.distributed.DistBackendError: NCCL error in: /pytorch/torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:3356, unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.21.5", Fatal(K::NcclError)),
    ("vllm", "(VllmWorkerProcess pid=411) ERROR 08-13 15:12:48 RuntimeError: NCCL error: ncclInternalError: Internal check failed.", Fatal(K::NcclError)),
    ("c++", "[rank1]:[E813 15:12:48.000000000 ProcessGroupNCCL.cpp:632] [Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=5, OpType=ALLREDUCE, NumelIn=8192, NumelOut=8192, Timeout(ms)=600000) ran for 600025 milliseconds before timing out.", Fatal(K::NcclError)),
    ("c++", "terminate called after throwing an instance of 'c10::DistBackendError'", Fatal(K::NcclError)),
    ("nccl", "ncclSystemError: System call (e.g. socket, malloc) or external library call failed or device error.", Fatal(K::NcclError)),
    // --- no_kernel_image ---
    ("vllm", "RuntimeError: CUDA error: no kernel image is available for execution on the device", Fatal(K::NoKernelImage)),
    ("sglang", "/usr/lib/python3/dist-packages/torch/cuda/__init__.py:235: UserWarning: NVIDIA RTX PRO 6000 Blackwell Workstation Edition with CUDA capability sm_120 is not compatible with the current PyTorch installation.", Fatal(K::NoKernelImage)),
    ("llama.cpp", "ggml_cuda_compute_forward: MUL_MAT failed\nCUDA error: no kernel image is available for execution on the device", Fatal(K::NoKernelImage)),
    // --- triton_error ---
    ("sglang", "[2025-08-13 15:12:48 TP0] triton.runtime.errors.OutOfResources: out of resource: shared memory, Required: 147456, Hardware limit: 101376. Reducing block sizes or `num_stages` may help.", Fatal(K::TritonError)),
    ("vllm", "ptxas fatal   : Value 'sm_120a' is not defined for option 'gpu-name'", Fatal(K::TritonError)),
    ("vllm", "triton.compiler.errors.CompilationError: at 12:4:", Fatal(K::TritonError)),
    ("sglang", "RuntimeError: Internal Triton PTX codegen error: `ptxas` stderr: ptxas fatal : Unresolved extern function", Fatal(K::TritonError)),
    // Ray's memory monitor (ray-project/ray `memory_monitor` docs' wording).
    ("ray", "(raylet) Memory on the node (IP: 10.0.0.1, ID: 7a3f) where the task (actor ID: 9c1e, name=RayWorkerWrapper.__init__) was running was 29.01GB / 30.00GB (0.967), which exceeds the memory usage threshold of 0.95. Ray killed this worker (ID: 5d2c) because it was the most recently scheduled task", Fatal(K::OomKilled)),
    // --- cuda_error: any other CUDA runtime/driver fault ---
    // The H200 run of shared/harness/gpu-torch: a faulting kernel (`brkpt`, `trap`).
    ("torch", "torch.AcceleratorError: CUDA error: unspecified launch failure", Fatal(K::CudaError)),
    ("cupy", "cupy_backends.cuda.api.runtime.CUDARuntimeError: cudaErrorLaunchFailure: unspecified launch failure", Fatal(K::CudaError)),
    ("cupy", "cupy_backends.cuda.api.driver.CUDADriverError: CUDA_ERROR_LAUNCH_FAILED: unspecified launch failure", Fatal(K::CudaError)),
    ("vllm", "(EngineCore_0 pid=123) ERROR 08-13 15:12:48 [core.py:700] RuntimeError: CUDA error: misaligned address", Fatal(K::CudaError)),
    ("sglang", "[2025-08-13 15:12:48 TP0] RuntimeError: CUDA error: an invalid program counter was encountered", Fatal(K::CudaError)),
    ("llama.cpp", "CUDA error: the launch timed out and was terminated", Fatal(K::CudaError)),
    ("triton", "RuntimeError: Triton Error [CUDA]: unspecified launch failure", Fatal(K::CudaError)),
    ("torch", "RuntimeError: CUDA error: CUDA-capable device(s) is/are busy or unavailable", Fatal(K::CudaError)),
    ("torch", "RuntimeError: CUDA error: uncorrectable ECC error encountered", Fatal(K::CudaError)),
    ("c++", "terminate called after throwing an instance of 'c10::Error' what():  CUDA driver error: unknown error", Fatal(K::CudaError)),
    ("torch", "RuntimeError: cuda runtime error (719) : unspecified launch failure at /pytorch/aten/src/THC/THCCachingHostAllocator.cpp:278", Fatal(K::CudaError)),
    ("kernel", "NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, GPU has fallen off the bus.", Fatal(K::CudaError)),
    // --- signal_crash ---
    ("shell", "Illegal instruction (core dumped)", Fatal(K::SignalCrash)),
    ("shell", "bash: line 1:  4242 Illegal instruction     (core dumped) python -m sglang.launch_server", Fatal(K::SignalCrash)),
    ("shell", "Illegal instruction", Fatal(K::SignalCrash)),
    ("python", "Fatal Python error: Segmentation fault", Fatal(K::SignalCrash)),
    ("shell", "Segmentation fault (core dumped)", Fatal(K::SignalCrash)),
    ("vllm", "(EngineCore_0 pid=123) !!!!!!! Segfault encountered !!!!!!!", Fatal(K::SignalCrash)),
    ("absl", "*** SIGSEGV received at time=1723561968 on cpu 3 ***", Fatal(K::SignalCrash)),
    ("c++", "[2025-08-13 15:12:48 TP0] Received SIGABRT, aborting", Fatal(K::SignalCrash)),
    ("shell", "Aborted (core dumped)", Fatal(K::SignalCrash)),
    ("tgi", "2025-08-13T15:12:48.123456Z ERROR shard-manager: text_generation_launcher: Shard complete standard error output: Segmentation fault", Fatal(K::SignalCrash)),
    // --- oom_killed ---
    ("shell", "Killed", Fatal(K::OomKilled)),
    ("shell", "bash: line 1:  4242 Killed                  python -m vllm.entrypoints.openai.api_server", Fatal(K::OomKilled)),
    ("dmesg", "[123456.789] Out of memory: Killed process 4242 (python) total-vm:123456789kB, anon-rss:98765432kB", Fatal(K::OomKilled)),
    ("dmesg", "[123456.788] python invoked oom-killer: gfp_mask=0x140cca(GFP_HIGHUSER_MOVABLE|__GFP_COMP), order=0", Fatal(K::OomKilled)),
    ("ray", "ray.exceptions.OutOfMemoryError: Task was killed due to the node running low on memory.", Fatal(K::OomKilled)),
    ("ray", "(raylet) [2025-08-13 15:12:48] A worker died or was killed while executing a task by an unexpected system error. Workers (tasks / actors) killed due to memory pressure (OOM): 1", Fatal(K::OomKilled)),
    // --- server gone ---
    ("vllm", "ERROR 08-13 15:12:48 [async_llm.py:416] vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. See stack trace (above) for the root cause.", ServerGone),
    ("vllm", "ERROR 08-13 15:12:48 [engine.py:160] AsyncEngineDeadError: Background loop has errored already. Engine loop is not running.", ServerGone),
    ("vllm", "ERROR 08-13 15:12:48 [core_client.py:564] Engine core proc EngineCore_0 died unexpectedly, shutting down client.", ServerGone),
    ("sglang", "[2025-08-13 15:12:48] Received sigquit from a child process. It usually means the child failed.", ServerGone),
    // --- ready ---
    ("sglang", "[2025-08-13 15:10:02] The server is fired up and ready to roll!", Ready),
    ("vllm", "INFO:     Application startup complete.", Ready),
    ("llama.cpp", "main: server is listening on http://127.0.0.1:8080 - starting the main loop", Ready),
    // --- spec stats ---
    ("sglang", "[2025-08-13 15:11:00 TP0] Decode batch. #running-req: 1, #token: 2345, token usage: 0.01, accept len: 3.42, cuda graph: True, gen throughput (token/s): 143.20, #queue-req: 0", SpecStats { accept_len: 3.42 }),
    ("sglang", "[2025-08-13 15:11:00 DP0 TP0] Decode batch, #running-req: 4, #token: 9001, token usage: 0.05, accept len: 2.00, accept rate: 0.50, gen throughput (token/s): 310.55, #queue-req: 0", SpecStats { accept_len: 2.0 }),
    ("vllm", "INFO 08-13 15:11:00 [metrics.py:96] SpecDecoding metrics: Mean acceptance length: 2.91, Accepted throughput: 120.50 tokens/s, Drafted throughput: 190.00 tokens/s, Accepted: 1205 tokens, Drafted: 1900 tokens, Per-position acceptance rate: 0.800, 0.650", SpecStats { accept_len: 2.91 }),
    ("vllm", "(APIServer pid=1) INFO 08-13 15:11:00 [metrics.py:96] SpecDecoding metrics: Draft acceptance rate: 63.4%, Mean acceptance length: 3.54, Accepted: 1234 tokens, Drafted: 1946 tokens", SpecStats { accept_len: 3.54 }),
    ("llama.cpp", "slot print_timing: id  0 | task 0 | draft acceptance rate = 0.64479 (  167 accepted /   259 generated)", DraftAcceptance { rate: 0.64479 }),
    ("llama.cpp", "draft acceptance = 0.64 (167 accepted / 259 generated)", DraftAcceptance { rate: 0.64 }),
    // --- look-alikes: must be Plain ---
    ("nccl", "node1:409:409 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>", Plain),
    ("nccl", "node1:409:409 [0] NCCL INFO NCCL version 2.21.5+cuda12.4", Plain),
    ("nccl", "node1:409:520 [0] NCCL INFO ncclCommInitRank comm 0x55d0 rank 0 nranks 2 - Init COMPLETE", Plain),
    ("vllm", "INFO 08-13 15:10:00 [utils.py:1000] Found nccl from library libnccl.so.2", Plain),
    ("vllm", "INFO 08-13 15:10:00 [pynccl.py:69] vLLM is using nccl==2.21.5", Plain),
    ("vllm", "INFO 08-13 15:10:30 [model_runner.py:1500] Capturing cudagraphs for decoding. This may lead to unexpected consequences if the model is not static. To run the model in eager mode, set 'enforce_eager=True' or use '--enforce-eager' in the CLI. If out-of-memory error occurs during cudagraph capture, consider decreasing `gpu_memory_utilization` or switching to eager mode.", Plain),
    ("vllm", "INFO 08-13 15:10:31 [gpu_model_runner.py:2000] CUDA graphs can take additional 1~3 GiB memory per GPU. If you are running out of memory, consider decreasing `gpu_memory_utilization` or enforcing eager mode.", Plain),
    ("sglang", "[2025-08-13 15:10:20 TP0] Capture cuda graph begin. This can take up to several minutes. avail mem=12.30 GB", Plain),
    ("vllm", "WARNING 08-13 15:11:30 [scheduler.py:1560] Sequence group 42 is preempted by PreemptionMode.RECOMPUTE mode because there is not enough KV cache space. This can affect the end-to-end performance. Increase gpu_memory_utilization or tensor_parallel_size to provide more KV cache memory. total_num_cumulative_preemption=1", Plain),
    ("sglang", "[2025-08-13 15:11:30 TP0] KV cache pool is full. Retract requests. #retracted_reqs: 1, #new_token_ratio: 0.6000 -> 0.9000", Plain),
    ("tokenizer", "Token indices sequence length is longer than the specified maximum sequence length for this model (40000 > 32768). Running this sequence through the model will result in indexing errors", Plain),
    ("sglang", "[2025-08-13 15:10:00] INFO:     Uvicorn running on http://0.0.0.0:30000 (Press CTRL+C to quit)", Plain),
    ("sglang", "[2025-08-13 15:11:00 TP0] Decode batch. #running-req: 8, #token: 12000, token usage: 0.06, cuda graph: True, gen throughput (token/s): 880.12, #queue-req: 0", Plain),
    ("sglang", "[2025-08-13 15:11:00 TP0] Prefill batch. #new-seq: 1, #new-token: 8192, #cached-token: 0, token usage: 0.00, #running-req: 0, #queue-req: 0", Plain),
    ("vllm", "INFO 08-13 15:11:00 [loggers.py:118] Engine 000: Avg prompt throughput: 3276.8 tokens/s, Avg generation throughput: 95.1 tokens/s, Running: 1 reqs, Waiting: 0 reqs, GPU KV cache usage: 2.1%, Prefix cache hit rate: 0.0%", Plain),
    ("vllm", "INFO:     127.0.0.1:51234 - \"POST /v1/chat/completions HTTP/1.1\" 200 OK", Plain),
    ("vllm", "INFO:     127.0.0.1:51234 - \"POST /v1/chat/completions HTTP/1.1\" 400 Bad Request", Plain),
    ("vllm", "ERROR 08-13 15:11:00 [serving_chat.py:200] Error in preprocessing prompt inputs", Plain),
    ("python", "AssertionError: tool call arguments must be a JSON object", Plain),
    ("python", "Traceback (most recent call last):", Plain),
    ("llama.cpp", "srv  log_server_r: request: POST /v1/chat/completions 127.0.0.1 200", Plain),
    ("llama.cpp", "llama_model_load_from_file_impl: using device CUDA0 (NVIDIA H100 80GB HBM3) - 80000 MiB free", Plain),
    ("tgi", "2025-08-13T15:10:00.000000Z  INFO text_generation_launcher: Using prefix caching = true", Plain),
    ("sglang", "[2025-08-13 15:10:00] server_args=ServerArgs(model_path='/dev/shm/model', disable_cuda_graph=False, enable_nccl_nvls=False, mem_fraction_static=0.88)", Plain),
    ("vllm", "INFO 08-13 15:10:00 [cuda.py:300] Using Flash Attention backend on V1 engine.", Plain),
    ("torch", "CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.", Plain),
    ("nvidia-smi", "| GPU  Name                 Persistence-M | Bus-Id          Disp.A | Volatile Uncorr. ECC |", Plain),
    ("llama.cpp", "ggml_cuda_init: found 1 CUDA devices:", Plain),
    ("ptxas", "Using ptxas from /usr/local/cuda/bin/ptxas", Plain),
    ("", "", Plain),
    ("", "\u{FFFD}\u{FFFD}\u{FFFD} CUDA \u{FFFD}rror", Plain),
];

/// An SGLang crash: traceback from the scheduler, NCCL watchdog noise from
/// other ranks after it, the parent noticing the child died.
pub const SGLANG_CRASH_LOG: &str = "\
[2025-08-13 15:12:40 TP0] Decode batch. #running-req: 1, #token: 2345, token usage: 0.01, accept len: 3.42, gen throughput (token/s): 143.20, #queue-req: 0
[2025-08-13 15:12:44 TP0] Decode batch. #running-req: 1, #token: 2385, token usage: 0.01, accept len: 3.10, gen throughput (token/s): 140.02, #queue-req: 0
[2025-08-13 15:12:48 DP3 TP3 EP3] Scheduler hit an exception: Traceback (most recent call last):
  File \"/sgl-workspace/sglang/python/sglang/srt/managers/scheduler.py\", line 2300, in run_scheduler_process
    scheduler.event_loop_overlap()
  File \"/usr/local/lib/python3.12/dist-packages/torch/utils/_contextlib.py\", line 116, in decorate_context
    return func(*args, **kwargs)
  File \"/sgl-workspace/sglang/python/sglang/srt/managers/scheduler.py\", line 770, in event_loop_overlap
    batch_result = self.run_batch(batch)
  File \"/sgl-workspace/sglang/python/sglang/srt/model_executor/model_runner.py\", line 1500, in forward
    return self.cuda_graph_runner.replay(forward_batch)
torch.AcceleratorError: CUDA error: an illegal instruction was encountered
CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.
For debugging consider passing CUDA_LAUNCH_BLOCKING=1
Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.

[2025-08-13 15:12:48 DP0 TP0 EP0] Scheduler hit an exception: torch.AcceleratorError: CUDA error: an illegal instruction was encountered
[2025-08-13 15:12:48 DP1 TP1 EP1] Scheduler hit an exception: torch.AcceleratorError: CUDA error: an illegal instruction was encountered
[rank2]:[E813 15:12:49.000000000 ProcessGroupNCCL.cpp:632] [Rank 2] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=5, OpType=ALLREDUCE) ran for 600025 milliseconds before timing out.
[2025-08-13 15:12:49] Received sigquit from a child process. It usually means the child failed.
Killed
";

/// A vLLM V1 crash, prefixed per process and coloured.
pub const VLLM_CRASH_LOG: &str = "\
\u{1b}[1;36m(APIServer pid=1)\u{1b}[0;0m INFO 08-13 15:11:00 [loggers.py:118] Engine 000: Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: 95.1 tokens/s, Running: 1 reqs, Waiting: 0 reqs, GPU KV cache usage: 2.1%, Prefix cache hit rate: 0.0%
\u{1b}[1;36m(APIServer pid=1)\u{1b}[0;0m INFO 08-13 15:11:00 [metrics.py:96] SpecDecoding metrics: Mean acceptance length: 2.91, Accepted: 1205 tokens, Drafted: 1900 tokens
\u{1b}[1;36m(EngineCore_0 pid=123)\u{1b}[0;0m ERROR 08-13 15:12:48 [core.py:700] EngineCore encountered a fatal error.
\u{1b}[1;36m(EngineCore_0 pid=123)\u{1b}[0;0m ERROR 08-13 15:12:48 [core.py:700] Traceback (most recent call last):
\u{1b}[1;36m(EngineCore_0 pid=123)\u{1b}[0;0m ERROR 08-13 15:12:48 [core.py:700]   File \"/usr/local/lib/python3.12/dist-packages/vllm/v1/engine/core.py\", line 691, in run_engine_core
\u{1b}[1;36m(EngineCore_0 pid=123)\u{1b}[0;0m ERROR 08-13 15:12:48 [core.py:700]     engine_core.run_busy_loop()
\u{1b}[1;36m(EngineCore_0 pid=123)\u{1b}[0;0m ERROR 08-13 15:12:48 [core.py:700] RuntimeError: CUDA error: an illegal memory access was encountered
\u{1b}[1;36m(EngineCore_0 pid=123)\u{1b}[0;0m ERROR 08-13 15:12:48 [core.py:700] CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.
\u{1b}[1;36m(APIServer pid=1)\u{1b}[0;0m ERROR 08-13 15:12:48 [async_llm.py:416] vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. See stack trace (above) for the root cause.
\u{1b}[1;36m(APIServer pid=1)\u{1b}[0;0m INFO:     127.0.0.1:51234 - \"POST /v1/chat/completions HTTP/1.1\" 500 Internal Server Error
";

/// A llama.cpp server crash.
pub const LLAMA_CRASH_LOG: &str = "\
main: server is listening on http://127.0.0.1:8080 - starting the main loop
srv  update_slots: all slots are idle
slot launch_slot_: id  0 | task 0 | processing task
slot print_timing: id  0 | task 0 | draft acceptance rate = 0.64479 (  167 accepted /   259 generated)
CUDA error: an illegal memory access was encountered
  current device: 0, in function ggml_backend_cuda_synchronize at /app/ggml/src/ggml-cuda/ggml-cuda.cu:2480
  cudaStreamSynchronize(cuda_ctx->stream())
/app/ggml/src/ggml-cuda/ggml-cuda.cu:75: CUDA error
Aborted (core dumped)
";

/// A TGI shard crash (router logs, then the shard's stderr).
pub const TGI_CRASH_LOG: &str = "\
2025-08-13T15:10:00.000000Z  INFO text_generation_launcher: Starting shard rank=0
2025-08-13T15:12:48.000000Z ERROR text_generation_launcher: Method Warmup encountered an error.
Traceback (most recent call last):
  File \"/opt/conda/lib/python3.11/site-packages/text_generation_server/models/flash_causal_lm.py\", line 1200, in warmup
    _, batch, _ = self.generate_token(batch)
torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 8.00 GiB. GPU 0 has a total capacity of 79.10 GiB of which 2.00 GiB is free.
2025-08-13T15:12:48.100000Z ERROR shard-manager: text_generation_launcher: Shard complete standard error output:
2025-08-13T15:12:49.000000Z ERROR text_generation_launcher: Shard 0 failed to start
";

/// A CPU illegal instruction: no CUDA error anywhere.
pub const CPU_SIGILL_LOG: &str = "\
INFO 08-13 15:10:00 [__init__.py:200] Automatically detected platform cuda.
INFO 08-13 15:10:01 [api_server.py:1000] vLLM API server version 0.10.1
Illegal instruction (core dumped)
";

/// A healthy vLLM startup with NCCL chatter.
pub const HEALTHY_LOG: &str = "\
INFO 08-13 15:10:00 [__init__.py:200] Automatically detected platform cuda.
INFO 08-13 15:10:00 [utils.py:1000] Found nccl from library libnccl.so.2
INFO 08-13 15:10:00 [pynccl.py:69] vLLM is using nccl==2.21.5
node1:409:409 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>
node1:409:409 [0] NCCL INFO NCCL version 2.21.5+cuda12.4
INFO 08-13 15:10:31 [gpu_model_runner.py:2000] CUDA graphs can take additional 1~3 GiB memory per GPU. If you are running out of memory, consider decreasing `gpu_memory_utilization` or enforcing eager mode.
Token indices sequence length is longer than the specified maximum sequence length for this model (40000 > 32768). Running this sequence through the model will result in indexing errors
WARNING 08-13 15:11:30 [scheduler.py:1560] Sequence group 42 is preempted by PreemptionMode.RECOMPUTE mode because there is not enough KV cache space.
INFO:     Started server process [1]
INFO:     Waiting for application startup.
INFO:     Application startup complete.
INFO:     Uvicorn running on http://0.0.0.0:8000 (Press CTRL+C to quit)
INFO:     127.0.0.1:51234 - \"POST /v1/chat/completions HTTP/1.1\" 200 OK
";

/// (name, status, body, expected kind, expected numbers, expected summary).
pub struct BodyCase {
    pub name: &'static str,
    pub status: u16,
    pub body: &'static str,
    pub kind: crate::model::FailureKind,
    pub numbers: [Option<u64>; 4], // limit, prompt, output, total
    pub summary: &'static str,
    pub message: &'static str,
}

pub const BODIES: &[BodyCase] = &[
    BodyCase {
        name: "vllm old flat",
        status: 400,
        body: r#"{"object":"error","message":"This model's maximum context length is 32768 tokens. However, you requested 33012 tokens (32756 in the messages, 256 in the completion). Please reduce the length of the messages or completion.","type":"BadRequestError","param":null,"code":400}"#,
        kind: K::ContextOverflow,
        numbers: [Some(32768), Some(32756), Some(256), Some(33012)],
        summary: "ctx 400: 33,012 > 32,768",
        message: "HTTP 400: This model's maximum context length is 32768 tokens.",
    },
    BodyCase {
        name: "vllm mid input only",
        status: 400,
        body: r#"{"object":"error","message":"This model's maximum context length is 32768 tokens. However, your request has 40000 input tokens. Please reduce the length of the input messages.","type":"BadRequestError","param":null,"code":400}"#,
        kind: K::ContextOverflow,
        numbers: [Some(32768), Some(40000), None, None],
        summary: "ctx 400: 40,000 > 32,768",
        message: "HTTP 400: This model's maximum context length",
    },
    BodyCase {
        name: "vllm mid max_tokens too large",
        status: 400,
        body: r#"{"error":{"message":"'max_tokens' or 'max_completion_tokens' is too large: 256. This model's maximum context length is 32768 tokens and your request has 32756 input tokens (256 > 32768 - 32756). None","type":"BadRequestError","param":null,"code":400}}"#,
        kind: K::ContextOverflow,
        numbers: [Some(32768), Some(32756), Some(256), None],
        summary: "ctx 400: 33,012 > 32,768",
        message: "HTTP 400: 'max_tokens' or 'max_completion_tokens' is too large: 256.",
    },
    BodyCase {
        name: "vllm new",
        status: 400,
        body: r#"{"error":{"message":"You passed 32756 input tokens and requested 256 output tokens. However, the model's context length is only 32768 tokens, resulting in a maximum input length of 32512 tokens. Please reduce the length of the input prompt.","type":"BadRequestError","param":null,"code":400}}"#,
        kind: K::ContextOverflow,
        numbers: [Some(32768), Some(32756), Some(256), None],
        summary: "ctx 400: 33,012 > 32,768",
        message: "HTTP 400: You passed 32756 input tokens",
    },
    BodyCase {
        name: "vllm 0.32 prompt",
        status: 400,
        body: r#"{"error":{"message":"This model's maximum context length is 32768 tokens. However, your prompt contains at least 33012 input tokens, which exceeds this limit even without any output tokens.","type":"BadRequestError","param":"input_tokens","code":400}}"#,
        kind: K::ContextOverflow,
        numbers: [Some(32768), Some(33012), None, None],
        summary: "ctx 400: 33,012 > 32,768",
        message: "HTTP 400: This model's maximum context length is 32768 tokens. However, your prompt contains",
    },
    BodyCase {
        name: "vllm 0.32 max_tokens",
        status: 400,
        body: r#"{"error":{"message":"max_tokens=40000 cannot be greater than max_model_len=32768. Please request fewer output tokens.","type":"BadRequestError","param":"max_tokens","code":400}}"#,
        kind: K::ContextOverflow,
        numbers: [Some(32768), None, Some(40000), None],
        summary: "ctx 400: max_tokens 40,000 > 32,768",
        message: "HTTP 400: max_tokens=40000 cannot be greater than max_model_len=32768.",
    },
    BodyCase {
        name: "sglang input longer",
        status: 400,
        body: r#"{"object":"error","message":"The input (33012 tokens) is longer than the model's context length (32768 tokens).","type":"BadRequestError","param":null,"code":400}"#,
        kind: K::ContextOverflow,
        numbers: [Some(32768), Some(33012), None, None],
        summary: "ctx 400: 33,012 > 32,768",
        message: "HTTP 400: The input (33012 tokens) is longer than the model's context length (32768 tokens).",
    },
    BodyCase {
        name: "sglang requested total (enveloped)",
        status: 400,
        body: r#"{"error":{"message":"Requested token count exceeds the model's maximum context length of 32768 tokens. You requested a total of 33012 tokens: 32756 tokens from the input messages and 256 tokens for the completion. Please reduce the number of tokens in the input messages or the completion to fit within the limit.","type":"BadRequestError","param":null,"code":400}}"#,
        kind: K::ContextOverflow,
        numbers: [Some(32768), Some(32756), Some(256), Some(33012)],
        summary: "ctx 400: 33,012 > 32,768",
        message: "HTTP 400: Requested token count exceeds",
    },
    BodyCase {
        name: "llama.cpp with fields",
        status: 400,
        body: r#"{"error":{"code":400,"message":"the request exceeds the available context size, try increasing it","type":"exceed_context_size_error","n_prompt_tokens":33012,"n_ctx":32768}}"#,
        kind: K::ContextOverflow,
        numbers: [Some(32768), Some(33012), None, None],
        summary: "ctx 400: 33,012 > 32,768",
        message: "HTTP 400: the request exceeds the available context size",
    },
    BodyCase {
        name: "llama.cpp 500 with numbers in words",
        status: 500,
        body: r#"{"error":{"code":500,"message":"request (33012 tokens) exceeds the available context size (32768 tokens), try increasing it","type":"server_error"}}"#,
        kind: K::ContextOverflow,
        numbers: [Some(32768), None, None, Some(33012)],
        summary: "ctx 500: 33,012 > 32,768",
        message: "HTTP 500: request (33012 tokens) exceeds",
    },
    BodyCase {
        name: "llama.cpp 500 without numbers",
        status: 500,
        body: r#"{"error":{"code":500,"message":"the request exceeds the available context size. try increasing the context size or enable context shift","type":"server_error"}}"#,
        kind: K::ContextOverflow,
        numbers: [None, None, None, None],
        summary: "ctx 500",
        message: "HTTP 500: the request exceeds",
    },
    BodyCase {
        name: "tgi 422",
        status: 422,
        body: r#"{"error":"Input validation error: `inputs` tokens + `max_new_tokens` must be <= 32768. Given: 32756 `inputs` tokens and 256 `max_new_tokens`","error_type":"validation"}"#,
        kind: K::ContextOverflow,
        numbers: [Some(32768), Some(32756), Some(256), None],
        summary: "ctx 422: 33,012 > 32,768",
        message: "HTTP 422: Input validation error: `inputs` tokens + `max_new_tokens` must be <= 32768.",
    },
    BodyCase {
        name: "tgi 422 inputs only",
        status: 422,
        body: r#"{"error":"Input validation error: `inputs` must have less than 4096 tokens. Given: 5000","error_type":"validation"}"#,
        kind: K::ContextOverflow,
        numbers: [Some(4096), Some(5000), None, None],
        summary: "ctx 422: 5,000 > 4,096",
        message: "HTTP 422: Input validation error",
    },
    BodyCase {
        name: "openai code",
        status: 400,
        body: r#"{"error":{"message":"This model's maximum context length is 8192 tokens. However, your messages resulted in 9000 tokens. Please reduce the length of the messages.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}"#,
        kind: K::ContextOverflow,
        numbers: [Some(8192), None, None, Some(9000)],
        summary: "ctx 400: 9,000 > 8,192",
        message: "HTTP 400: This model's maximum context length is 8192 tokens.",
    },
    BodyCase {
        name: "openai code only",
        status: 400,
        body: r#"{"error":{"message":"Your input is too long.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}"#,
        kind: K::ContextOverflow,
        numbers: [None, None, None, None],
        summary: "ctx 400",
        message: "HTTP 400: Your input is too long.",
    },
    BodyCase {
        name: "vllm decoder prompt",
        status: 400,
        body: r#"{"error":{"message":"The decoder prompt (length 33012) is longer than the maximum model length of 32768. Make sure that `max_model_len` is no smaller than the number of text tokens.","type":"BadRequestError","param":null,"code":400}}"#,
        kind: K::ContextOverflow,
        numbers: [Some(32768), Some(33012), None, None],
        summary: "ctx 400: 33,012 > 32,768",
        message: "HTTP 400: The decoder prompt",
    },
    BodyCase {
        name: "unknown model 404",
        status: 404,
        body: r#"{"object":"error","message":"The model `llama-3` does not exist.","type":"NotFoundError","param":null,"code":404}"#,
        kind: K::HttpError,
        numbers: [None, None, None, None],
        summary: "",
        message: "HTTP 404: The model `llama-3` does not exist.",
    },
    BodyCase {
        name: "malformed json 400",
        status: 400,
        body: r#"{"error":{"message":"[{'type': 'json_invalid', 'loc': ('body', 1), 'msg': 'JSON decode error', 'input': {}, 'ctx': {'error': 'Expecting value'}}]","type":"BadRequestError","param":null,"code":400}}"#,
        kind: K::HttpError,
        numbers: [None, None, None, None],
        summary: "",
        message: "HTTP 400: [{'type': 'json_invalid'",
    },
    BodyCase {
        name: "bad tool call 400",
        status: 400,
        body: r#"{"object":"error","message":"\"auto\" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set","type":"BadRequestError","param":null,"code":400}"#,
        kind: K::HttpError,
        numbers: [None, None, None, None],
        summary: "",
        message: "HTTP 400: \"auto\" tool choice requires",
    },
    BodyCase {
        name: "fastapi detail",
        status: 404,
        body: r#"{"detail":"Not Found"}"#,
        kind: K::HttpError,
        numbers: [None, None, None, None],
        summary: "",
        message: "HTTP 404: Not Found",
    },
    BodyCase {
        name: "tgi string error",
        status: 424,
        body: r#"{"error":"Request failed during generation: Server error: CUDA out of memory.","error_type":"generation"}"#,
        // The server names its GPU fault in the body: that is the kind.
        kind: K::CudaOom,
        numbers: [None, None, None, None],
        summary: "",
        message: "HTTP 424: Request failed during generation: Server error: CUDA out of memory.",
    },
    BodyCase {
        name: "plain text 502",
        status: 502,
        body: "<html><head><title>502 Bad Gateway</title></head><body>nginx</body></html>",
        kind: K::HttpError,
        numbers: [None, None, None, None],
        summary: "",
        message: "HTTP 502: <html><head><title>502 Bad Gateway</title></head><body>nginx</body></html>",
    },
    BodyCase {
        name: "empty 503",
        status: 503,
        body: "",
        kind: K::HttpError,
        numbers: [None, None, None, None],
        summary: "",
        message: "HTTP 503",
    },
    BodyCase {
        name: "plain text overflow",
        status: 400,
        body: "This model's maximum context length is 32768 tokens. However, you requested 33012 tokens (32756 in the messages, 256 in the completion).",
        kind: K::ContextOverflow,
        numbers: [Some(32768), Some(32756), Some(256), Some(33012)],
        summary: "ctx 400: 33,012 > 32,768",
        message: "HTTP 400: This model's maximum",
    },
    // SGLang's scheduler (`validate_input_length`), in its flat error body:
    // sgl-project/sglang python/sglang/srt/managers/utils.py.
    BodyCase {
        name: "sglang scheduler abort",
        status: 400,
        body: r#"{"object":"error","message":"Input length (40000 tokens) exceeds the maximum allowed length (32767 tokens). Use a shorter input or enable --allow-auto-truncate.","type":"BadRequestError","param":null,"code":400}"#,
        kind: K::ContextOverflow,
        numbers: [Some(32767), Some(40000), None, None],
        summary: "ctx 400: 40,000 > 32,767",
        message: "HTTP 400: Input length (40000 tokens) exceeds the maximum allowed length",
    },
];
