# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang contributors
# Apache-2.0 (see LICENSE)
"""Classify SGLang service journal lines into causes with a remedy (pure Python, stdlib only).

Each rule names a *kind* of failure from ``shared/domain/field-reports.md`` (the ID in brackets) and matches the
error text SGLang, PyTorch, NCCL, FlashInfer or systemd print for it. :func:`classify` returns the most specific
cause found in a list of lines; :func:`shard_progress` reads the weight-loading progress bar.

Two failure families need opposite fixes (B26): an *init-time* memory shortage ("Not enough memory. Please try
to increase --mem-fraction-static", "leave no GPU memory for the KV cache") needs a larger static fraction or a
shorter context, while a *runtime* OOM (``torch.OutOfMemoryError`` / "CUDA out of memory" after the weights are
loaded, e.g. during CUDA-graph capture or serving) needs a smaller fraction or ``--cuda-graph-max-bs``. An OOM
before "Load weight end" means the weights themselves do not fit (raise TP or use a smaller checkpoint).
"""

from __future__ import annotations

import re

# (cause, priority, [regex...], summary, remedy). Higher priority wins when several rules match; among equal
# priorities the rule whose match is latest in the log wins (the last error is usually the fatal one).
RULES = [
    ("fa3_unsupported_arch", 90,
     [r"hopper/flash_fwd_launch_template\.h", r"FlashAttention v3 Backend requires SM>=80 and SM<=90",
      r"Can not import FA3 in sgl_kernel"],
     "FlashAttention 3 was used on a GPU it has no kernels for (sm_90a only) [B06]",
     "render --attention-backend flashinfer (never fa3 on compute capability 12.x); build sgl-kernel with the "
     "FA3 soft fallback"),
    ("backend_unsupported", 85,
     [r"does not support backend '[\w-]+' with capability", r"TRTLLM MHA backend is only supported",
      r"trtllm-gen MoE kernels are SM100-only", r"No valid tactics available for fused moe op",
      r"requires SM90 or SM100", r"FP8 block scaling not yet implemented for Blackwell",
      r"Unsupported architecture"],
     "a kernel backend that does not support this GPU was selected [B11, B12]",
     "pin --fp4-gemm-backend / --moe-runner-backend / --attention-backend to values from the SM120 allow-list "
     "(the FP4 probe's recommendation)"),
    ("init_kv_budget_too_small", 80,
     [r"Not enough memory\. Please try to increase --mem-fraction-static",
      r"leave no GPU memory for the KV cache"],
     "init-time memory shortage: the weights leave no room for the KV cache under --mem-fraction-static [B26]",
     "raise sglang_service_mem_fraction_static, shorten the context length, raise TP, or free VRAM used by a "
     "display server"),
    ("no_kernel_image", 75,
     [r"no kernel image is available for execution on the device",
      r"with CUDA capability sm_\d+ is not compatible with the current PyTorch installation"],
     "a binary (torch, sgl-kernel or a JIT module) has no code for this GPU's architecture [B14]",
     "install a torch whose get_arch_list() contains sm_120 and rebuild sgl-kernel for sm_120a"),
    ("sgl_kernel_abi_mismatch", 74,
     [r"undefined symbol", r"Could not load any common_ops library"],
     "sgl-kernel was built against a different torch ABI [B07]",
     "rebuild sgl-kernel from source with --no-build-isolation against the installed torch"),
    ("sgl_kernel_cuda_major_mismatch", 73,
     [r"lib(cudart|nvrtc|cublas)\.so\.12: cannot open shared object file", r"lib(cudart|nvrtc)\.so\.12 => not found"],
     "a CUDA 12 binary is loaded on a CUDA 13 stack [B07]",
     "rebuild the kernel wheel against CUDA 13 (or install the CUDA 12 runtime it needs)"),
    ("cuda_home_too_old_for_sm12x", 72,
     [r"SM 12\.x requires CUDA >= 12\.9"],
     "the CUDA toolkit that FlashInfer JIT found is too old for SM12x [B08]",
     "point CUDA_HOME (cuda_toolchain_env_file) at the CUDA 13 toolkit"),
    ("jit_toolchain_skew", 72,
     [r"CUDA compiler and CUDA toolkit headers are incompatible"],
     "nvcc and the CUDA headers come from different toolkits [B08]",
     "pin nvidia-cuda-nvcc / -crt / nvvm to the runtime's major.minor; one CUDA_HOME for build and service"),
    ("reboot_pending", 71,
     [r"Driver/library version mismatch"],
     "the NVIDIA kernel module and user-space driver differ (upgrade without reboot) [B31]",
     "reboot the host (or reload the nvidia modules) before starting the service"),
    ("nccl_shm_too_small", 70,
     [r"posix_fallocate failed", r"Error while creating shared memory segment /dev/shm/nccl"],
     "NCCL could not allocate its /dev/shm segments [B27]",
     "make /dev/shm at least 1 GiB (tmpfs size); do not set PrivateIPC on the unit"),
    ("no_peer_access", 70,
     [r"peer access is not supported between these two devices"],
     "GPUs without P2P access were used with custom all-reduce [B29]",
     "render --disable-custom-all-reduce (preflight_service_args) for GeForce cards / no-P2P topologies"),
    ("memlock_too_low", 65,
     [r"ibv_create_cq: Cannot allocate memory", r"ibv_reg_mr .*failed", r"Cannot allocate memory.*ibv_"],
     "RDMA memory registration failed: locked-memory limit too low under systemd [B30]",
     "LimitMEMLOCK=infinity in the unit (systemd ignores limits.conf)"),
    ("port_in_use", 60,
     [r"\[Errno 98\] (error while attempting to bind on address|Address already in use)",
      r"address already in use"],
     "the HTTP port is already taken by another process",
     "stop the other process or change sglang_service_port"),
    ("warmup_via_proxy", 60,
     [r"warmup error.*Response \[50[0-9]\]", r"res=<Response \[502\]>", r"AssertionError: res=<Response \[50"],
     "the warm-up request to the server's own port went through an HTTP proxy [B24]",
     "NO_PROXY/no_proxy must include 127.0.0.1,localhost,0.0.0.0,::1 (sglang_service_no_proxy)"),
    ("proxy_env_invalid", 58,
     [r"Unknown scheme for proxy URL", r"httpx\.UnsupportedProtocol"],
     "a malformed proxy variable crashed the HTTP client [B24]",
     "fix or drop http_proxy/https_proxy from the service environment"),
    ("runtime_oom", 55,
     [r"torch\.OutOfMemoryError", r"CUDA out of memory", r"OutOfMemoryError: CUDA"],
     "GPU out of memory after the weights were loaded (CUDA-graph capture or serving) [B26]",
     "lower sglang_service_mem_fraction_static or --cuda-graph-max-bs (opposite of the init-time fix)"),
    ("engine_start_timeout", 50,
     [r"Timed out waiting for engines", r"TimeoutError: .*initial message"],
     "a worker process did not finish initialising in time [B22]",
     "check the journal above for the worker's own error; slow first starts need the readiness budget"),
    ("no_gpu_visible", 50,
     [r"Found no NVIDIA driver on your system", r"No CUDA GPUs are available",
      r"CUDA driver initialization failed", r"cudaErrorNoDevice", r"CUDA error: no CUDA-capable device"],
     "the service cannot see a GPU (driver not loaded, device nodes hidden by the unit's sandboxing)",
     "check nvidia-smi as the service user; the unit must not set PrivateDevices and needs /dev/nvidia*"),
    ("cuda_init_error_304", 50,
     [r"cudaErrorOperatingSystem", r"CUDA error: OS call failed", r"CUDA.*[Ee]rror.*\b304\b"],
     "CUDA initialisation was blocked by the OS (seccomp filter without memfd_create)",
     "keep memfd_create allowed: SystemCallFilter=@system-service includes @ipc"),
    ("model_not_found", 45,
     [r"does not appear to have a file named config\.json", r"HFValidationError", r"Repo id must be",
      r"Can't load the configuration of"],
     "the model path does not hold a Hugging Face checkpoint",
     "check sglang_service_model_path on the host (and HF_HOME/HF token for Hub ids)"),
    ("permission_denied", 40,
     [r"PermissionError: \[Errno 13\]", r"Permission denied: '"],
     "the service user cannot write a path it needs (cache or state directory)",
     "cache paths must be under the unit's StateDirectory/CacheDirectory; check ReadWritePaths"),
    ("busy_not_dead", 20,
     [r"could not get a response from detokenizer", r"health check failed"],
     "/health timed out while the server was busy (long prefill) [B23]",
     "transient under load: keep waiting; do not restart on a single failure"),
    ("systemd_start_timeout", 15,
     [r"start operation timed out\. Terminating", r"Failed with result 'timeout'"],
     "systemd's TimeoutStartSec ran out before the readiness gate passed [B22]",
     "raise sglang_service_timeout_start_sec (first start JIT + weight loading)"),
    ("fp8_kv_without_scales", 10,
     [r"Using FP8 KV cache but no scaling factors provided",
      r"Defaulting to KV cache scaling factors = 1\.0"],
     "FP8 KV cache without calibrated scales (accuracy loss, not a crash) [B13]",
     "use --kv-cache-dtype bf16 (the role's default on cc 12.x) or a checkpoint with k/v scales"),
]

_COMPILED = [(cause, prio, [re.compile(p) for p in pats], summary, remedy)
             for cause, prio, pats, summary, remedy in RULES]

# "Loading safetensors checkpoint shards:  64% Completed | 105/163 [09:30<04:59,  5.16s/it]" (SGLang/vLLM tqdm).
_SHARDS_RE = re.compile(r"Loading safetensors checkpoint shards:.*?\|\s*(\d+)/(\d+)")
_OOM_MARK = re.compile(r"torch\.OutOfMemoryError|CUDA out of memory|OutOfMemoryError: CUDA")
_WEIGHTS_DONE = re.compile(r"Load weight end|Loading safetensors checkpoint shards:.*100%")
_NCCL_INIT_DONE = re.compile(r"NCCL INFO .*Init COMPLETE|ncclCommInitRank .* Init COMPLETE")


def split_lines(text_or_lines):
    """Lines of a journal dump; tqdm's carriage returns split one physical line into several updates."""
    if isinstance(text_or_lines, str):
        raw = text_or_lines.splitlines()
    else:
        raw = list(text_or_lines or [])
    lines = []
    for line in raw:
        lines.extend(part for part in str(line).split("\r") if part.strip())
    return lines


def shard_progress(lines):
    """Latest ``(done, total)`` of the safetensors loading bar, or None when there is none."""
    latest = None
    for line in split_lines(lines):
        for match in _SHARDS_RE.finditer(line):
            latest = (int(match.group(1)), int(match.group(2)))
    return latest


def nccl_init_complete(lines):
    """True when NCCL reported ``Init COMPLETE`` (a stall after this is the PCIe P2P hang of B28)."""
    return any(_NCCL_INIT_DONE.search(line) for line in split_lines(lines))


def classify(lines):
    """Find the cause of a failed or stuck start in journal lines.

    :param lines: list of str or one str (journal output, ``-o cat``).
    :returns: dict ``cause`` (rule id or ``"unknown"``), ``summary``, ``remedy``, ``line`` (the matching line or
        None), ``matches`` (every matching rule id, most important first). An OOM line before the weights finished
        loading is reported as ``weights_oom``.
    """
    lines = split_lines(lines)
    found = {}
    for index, line in enumerate(lines):
        for cause, prio, patterns, summary, remedy in _COMPILED:
            if any(p.search(line) for p in patterns):
                found[cause] = (prio, index, line, summary, remedy)
    if "runtime_oom" in found:
        oom_index = found["runtime_oom"][1]
        weights_done = any(_WEIGHTS_DONE.search(line) for line in lines[:oom_index])
        if not weights_done:
            prio, index, line, _s, _r = found.pop("runtime_oom")
            found["weights_oom"] = (prio, index, line,
                                    "GPU out of memory while loading the weights: they do not fit [B26]",
                                    "raise the tensor-parallel size or use a smaller/quantised checkpoint; "
                                    "check that no other process holds VRAM")
    if not found:
        return {"cause": "unknown", "summary": "no known failure pattern in the journal", "remedy":
                "read the last lines below", "line": None, "matches": []}
    ordered = sorted(found.items(), key=lambda item: (item[1][0], item[1][1]), reverse=True)
    cause, (prio, index, line, summary, remedy) = ordered[0]
    return {"cause": cause, "summary": summary, "remedy": remedy, "line": line.strip(),
            "matches": [name for name, _v in ordered]}
