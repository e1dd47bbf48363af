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

A CUDA-graph capture failure (C01) is classified by the error above SGLang's wrapper ``Capture cuda graph
failed``, never by the wrapper or by the "Possible solutions" advice printed below it (:func:`drop_generic_advice`):
``invalid resource handle`` during a capture is the PDL attribute on SM120, ``custom_all_reduce.cuh`` is the custom
all-reduce, a ptxas arch error is N01, and only an OOM line in the same failure is ``runtime_oom``.
``undefined symbol: nccl...`` is a second NCCL in the venv (C02), not an sgl-kernel ABI mismatch (B07).
"""

from __future__ import annotations

import re

# The SM12x family's kinds (field reports part 3) live in their own module; a copy of this file outside the
# collection (sglang_monitoring's GPU metrics collector) runs without them.
try:
    from ansible_collections.blackwell.sglang.plugins.module_utils import _sm12x_journal
except ImportError:
    try:
        from . import _sm12x_journal  # pylint: disable=import-self
    except ImportError:
        _sm12x_journal = None

SPEC_REMEDY = ("retry without speculative decoding (sglang_service_speculative: {}) or with a smaller "
               "--speculative-num-draft-tokens, and keep --context-length at most the native limit minus the "
               "draft tokens")

# (cause, priority, [regex...], summary, remedy). Higher priority wins when several rules match; among equal
# priorities the rule whose match is latest in the log wins (the last error is usually the fatal one).
RULES = [
    # --- field reports part 3 (C-kinds): the inner cause of a CUDA-graph capture failure, a second NCCL ----------
    ("pdl_graph_capture_sm120", 89,
     [r"CUDA error: invalid resource handle", r"cudaErrorInvalidResourceHandle"],
     "CUDA-graph capture failed with 'invalid resource handle': SGLang sets the PDL (programmatic dependent "
     "launch) stream-serialization attribute on a stream that is capturing, which SM120 refuses (not a memory "
     "problem; SGLang's 'set --mem-fraction-static smaller' advice does not apply) [C01]",
     "use an SGLang commit that does not set the PDL attribute during capture (the fix of sglang#18596 was "
     "closed unmerged: check the pinned commit for an equivalent one); as a stopgap only, add "
     "--disable-cuda-graph to sglang_service_extra_args (slower decoding)"),
    ("custom_allreduce_capture", 89,
     [r"custom_all_reduce\.cuh:\d+", r"custom_all_reduce\.cu(?:h)?\b.*(?:invalid argument|CUDA error)"],
     "CUDA-graph capture failed inside sgl-kernel's custom all-reduce (custom_all_reduce.cuh, 'invalid "
     "argument'): not a memory problem, whatever SGLang's advice below it says [C01]",
     "render --disable-custom-all-reduce: add it to sglang_service_extra_args (the preflight adds it by itself "
     "for GeForce cards and topologies without P2P)"),
    ("nccl_library_mismatch", 76,
     [r"undefined symbol: nccl\w+"],
     "a library expects an NCCL symbol the loaded libnccl.so.2 lacks: two nvidia-nccl-cu1* wheels (or a system "
     "libnccl.so.2 on the loader path) share the file, and the older one won [C02]",
     "fix the NCCL wheels, not sgl-kernel: uninstall every nvidia-nccl-cu1* wheel, reinstall only "
     "nvidia-nccl-cu13 at the version torch requires, and drop a system libnccl.so.2 from the loader path "
     "(the preflight check nccl_wheels names what is installed); rebuilding sgl-kernel does not help"),
    # --- field reports part 3 (S-kinds): single-line toolchain kinds; the multi-line ones are in _sm12x_journal ----
    ("triton_tma_scatter_sm12x", 93,
     [r"Feature '\.tile::(?:scatter4|gather4)[^']*' not supported on \.?target 'sm_12\d[af]?'"],
     "ptxas knows this SM12x arch but refuses a TMA scatter/gather instruction: triton_kernels takes the TMA "
     "scatter path (gated by has_tma_gather(), true from compute capability 10.0) on a GPU that lacks it (not a "
     "ptxas too old for the arch, N01) [S15]",
     "install triton_kernels from a triton commit that gates the path by arch (has_tma_scatter(), triton#11862), "
     "not the older tag sgl-kernel fetches (v3.7.1), or render another sglang_service_moe_runner_backend for the "
     "MXFP4 MoE"),
    ("host_compiler_too_new", 90,
     [r"#error -- unsupported GNU version! gcc versions later than \d+ are not supported"],
     "the host GCC is newer than this nvcc accepts (its host_config.h caps the GCC major; the number in the "
     "message is the newest it takes) [S06]",
     "install the newest gcc-N/g++-N this nvcc accepts (N = the version the message names; 15 for CUDA 13.0 on "
     "aarch64) and export CC, CXX, CUDAHOSTCXX and -DCMAKE_CUDA_HOST_COMPILER=/usr/bin/g++-N for the sgl-kernel "
     "and FlashInfer builds; do not pass -allow-unsupported-compiler"),
    ("cutlass_dsl_version_skew", 83,
     [r"requires nvidia-cutlass-dsl\s*>=\s*[\d.]+",
      r"module 'cutlass\.cute(?:\.\w+)*' has no attribute '\w+'"],
     "the installed CuTe DSL (nvidia-cutlass-dsl) is older than, or split from, what FlashInfer uses: a symbol "
     "of cutlass.cute is missing [S07]",
     "pin nvidia-cutlass-dsl and nvidia-cutlass-dsl-libs-base to one version, at least the floor of the "
     "installed flashinfer's Requires-Dist (pip show -v flashinfer-python), then check "
     "python -c 'import cutlass, cutlass.cute'"),
    ("triton_kernels_skew", 83,
     [r"No module named '(?:triton_kernels|triton\.tools)\.[\w.]+'"],
     "triton_kernels is from another triton source tree than the installed triton (its modules move between "
     "tags: matmul -> matmul_ogs, triton.tools.ragged_tma); not two triton distributions (N16) [S08]",
     "reinstall triton_kernels from the tag of the installed triton (python -c 'import triton; "
     "print(triton.__version__)'), e.g. pip install 'git+https://github.com/triton-lang/triton@v<version>"
     "#subdirectory=python/triton_kernels'; sgl-kernel's fetched triton tag is a third version to keep in step"),
    # --- field reports part 2 (N-kinds; ids resolve in docs/field-reports.md) ---------------------------------------
    ("triton_ptxas_too_old", 92,
     [r"Value '(?:sm|compute)_\d+[af]?' is not defined for option 'gpu-name'"],
     "the ptxas Triton runs (its bundled copy in triton/backends/nvidia/bin) cannot target this GPU's arch [N01]",
     "set TRITON_PTXAS_PATH=<CUDA_HOME>/bin/ptxas in the service environment (the preflight does this on "
     "compute capability 12.x when the toolkit's ptxas exists), or install a pytorch-triton whose ptxas knows "
     "the arch"),
    ("nvcc_arch_unsupported", 91,
     [r"nvcc fatal\s*: Unsupported gpu architecture '(?:compute|sm)_\d+[af]?'"],
     "the nvcc used for a JIT build predates this GPU's arch (CUDA < 12.8 for sm_120) [B04]",
     "point CUDA_HOME (sglang_stack_cuda_env_file) at the CUDA 13 toolkit; remove older nvcc from PATH"),
    ("model_type_unsupported", 88,
     [r"has model type [`'\"]?[\w.-]+[`'\"]? but Transformers does not recognize this architecture",
      r"Transformers does not recognize this architecture",
      r"Model architectures? \[.*\] (?:are|is) not supported"],
     "the checkpoint's model_type/architecture is newer than the installed transformers or SGLang [N07]",
     "upgrade transformers (and SGLang) in the release to a version that registers this model_type; the "
     "checkpoint facts module names the version it found"),
    ("kv_dtype_unsupported_arch", 87,
     [r"kv[-_]cache[-_]dtype[ =]\S+ requires sm_?\d+", r"(?:FP4|NVFP4|fp4) KV cache (?:is )?(?:only )?supported on"],
     "the KV-cache dtype needs kernels this GPU does not have (FP4 KV needs the sm_100 trtllm-gen FMHA) [N04]",
     "render --kv-cache-dtype bf16 on compute capability 12.x (the KV-cache guard refuses fp4_e2m1 there)"),
    ("context_beyond_native", 86,
     [r"User-specified context_length \(\d+\) is greater than the derived context_length \(\d+\)"],
     "the requested context length is longer than the model's native window [N09]",
     "lower sglang_service_context_length to the derived limit, or use a checkpoint/config with static YaRN "
     "rope scaling; never set SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN without YaRN"),
    ("hf_transfer_missing", 86,
     [r"Fast download using 'hf_transfer' is enabled .*but 'hf_transfer' package is not available",
      r"HF_HUB_ENABLE_HF_TRANSFER=1\).*not available"],
     "HF_HUB_ENABLE_HF_TRANSFER is set but hf_transfer is not installed, so every Hub download fails [N13]",
     "drop HF_HUB_ENABLE_HF_TRANSFER from the service environment or install hf_transfer into the release venv"),
    ("hf_transfer_download_failed", 85,
     [r"An error occurred while downloading using [`']?hf_transfer"],
     "a download through hf_transfer failed half-way (it hides the real error) [N13]",
     "unset HF_HUB_ENABLE_HF_TRANSFER for a clear error, or pre-download the checkpoint to a local directory"),
    ("triton_mismatch", 84,
     [r"TritonMissing", r"Cannot find a working triton installation", r"target must be of GPUTarget type",
      r"cannot import name 'triton_key'",
      r"requires (?:pytorch-)?triton==\S+.*but you have (?:pytorch-)?triton \S+ which is incompatible"],
     "the triton in the venv is not the one torch was built with (triton and pytorch-triton share "
     "site-packages/triton) [N16]",
     "keep exactly one of triton / pytorch-triton, at the version torch's metadata requires (reinstall the "
     "pinned pytorch-triton from the torch index)"),
    ("draft_quant_inherited", 83,
     [r"Cannot find the config file for [\w-]+"],
     "the speculative draft model inherited --quantization from the target and has no such quant config [N05]",
     "render --speculative-draft-model-quantization unquant (or the draft's own method); the service role does "
     "this from the draft checkpoint"),
    ("proprietary_module_on_blackwell", 82,
     [r"requires use of the NVIDIA open kernel modules"],
     "the proprietary NVIDIA kernel module is loaded on a Blackwell GPU [N20]",
     "install the open kernel modules of the same driver branch (nvidia-open / nvidia-driver-5xx-open), reboot"),
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
     [r"undefined symbol(?!: nccl)", r"Could not load any common_ops library"],
     "sgl-kernel was built against a different torch ABI [B07]",
     "rebuild sgl-kernel from source with --no-build-isolation against the installed torch"),
    ("sgl_kernel_cuda_major_mismatch", 73,
     [r"lib(cudart|nvrtc|cublas)\.so\.12: cannot open shared object file", r"lib(cudart|nvrtc)\.so\.12 => not found"],
     "a CUDA 12 binary is loaded on a CUDA 13 stack [B07]",
     "rebuild the kernel wheel against CUDA 13 (or install the CUDA 12 runtime it needs)"),
    ("cuda_home_too_old_for_sm12x", 72,
     [r"SM 12\.x requires CUDA >= 12\.9"],
     "the CUDA toolkit that FlashInfer JIT found is too old for SM12x [B08]",
     "point CUDA_HOME (sglang_stack_cuda_env_file) at the CUDA 13 toolkit"),
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
     "render --disable-custom-all-reduce (sglang_stack_service_args) for GeForce cards / no-P2P topologies"),
    ("memlock_too_low", 65,
     [r"ibv_create_cq: Cannot allocate memory", r"ibv_reg_mr .*failed", r"Cannot allocate memory.*ibv_"],
     "RDMA memory registration failed: locked-memory limit too low under systemd [B30]",
     "LimitMEMLOCK=infinity in the unit (systemd ignores limits.conf)"),
    ("port_in_use", 60,
     [r"\[Errno 98\] (error while attempting to bind on address|Address already in use)",
      r"address already in use"],
     "the HTTP port is already taken by another process",
     "stop the other process or change sglang_stack_service_port"),
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
     "check sglang_stack_model_path on the host (and HF_HOME/HF token for Hub ids)"),
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
    ("illegal_memory_access", 56,
     [r"an illegal memory access was encountered", r"cudaErrorIllegalAddress"],
     "a kernel read or wrote outside its buffers (a software bug, not a memory-size problem)",
     "rerun with CUDA_LAUNCH_BLOCKING=1 to name the kernel; check the backends against the FP4 probe and "
     "disable optional features (speculative decoding, custom all-reduce) one at a time"),
    ("spec_decode_crash", 57,
     [r"scheduled_spec_decode_tokens=.*\[-1(?:, -1)*\]"],
     "speculative decoding crashed the server (sentinel draft token ids / draft KV past the context) [N06]",
     SPEC_REMEDY),
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
# SGLang's advice under every CUDA-graph capture failure, whatever the cause ("Possible solutions:\n1. set
# --mem-fraction-static to a smaller value ...\n2. set --cuda-graph-max-bs ..."): never evidence of a cause (C01).
_ADVICE_HEAD = re.compile(r"^(?:.*\]\s*)?Possible solutions:\s*$")
_ADVICE_ITEM = re.compile(r"^(?:.*\]\s*)?(?:\d+\.\s+(?:set|disable|use|try|reduce|increase|decrease)\b|Open an issue "
                          r"on GitHub)", re.I)
_CAPTURE = re.compile(r"Capture cuda graph failed|Capture cuda graph begin|Capturing batches|cuda_graph_runner",
                      re.I)
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


def drop_generic_advice(lines):
    """``lines`` without SGLang's "Possible solutions:" block (its numbered items and the "Open an issue" line):
    the block is printed under every capture failure and names memory settings whatever the cause was (C01)."""
    out, in_advice = [], False
    for line in lines:
        if _ADVICE_HEAD.match(line.strip()):
            in_advice = True
            continue
        if in_advice and _ADVICE_ITEM.match(line.strip()):
            continue
        in_advice = False
        out.append(line)
    return out


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


# --- kernel log (journalctl -k / dmesg) lines of the NVIDIA driver (N03, N18, N20) ---------------------------------
# "NVRM: Xid (PCI:0000:01:00): 119, pid=6211, name=nvidia-smi, Timeout after 45s ..." (open-gpu-kernel-modules#1111).
_XID_RE = re.compile(r"NVRM: Xid \((?:PCI:)?([0-9A-Fa-f]{4}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}(?:\.\d)?)\): (\d+)")
# Xids after which the GPU does not come back without a reboot on RTX Blackwell cards (per the reporters of
# open-gpu-kernel-modules#1111/#1159/#1200/#1045): 119/120 GSP RPC timeout/error, 154 "GPU Reset Required",
# 8 RC watchdog (GPU locked), 79 "GPU has fallen off the bus".
WEDGE_XIDS = {
    8: "RC watchdog: the GPU stopped making progress (GPU is probably locked)",
    79: "the GPU has fallen off the bus",
    119: "GSP RPC timeout: the GPU's system processor stopped answering",
    120: "GSP error: the GPU's system processor reported a fault",
    154: "GPU recovery action 'GPU Reset Required'",
}
_GSP_WEDGE_RE = re.compile(r"GSP RM heartbeat timed out|waiting for RPC response from GPU\d* GSP|"
                           r"GPU recovery action changed from .*\(GPU Reset Required\)|"
                           r"RC watchdog: GPU is probably locked|GPU has fallen off the bus")
_UMA_RE = re.compile(r"NV_ERR_NO_MEMORY.*_memdescAllocInternal|_memdescAllocInternal.*NV_ERR_NO_MEMORY|"
                     r"NVRM: .*Out of memory \[NV_ERR_NO_MEMORY\]")
# "NVRM: GPU 0000:01:00.0: RmInitAdapter failed! (0x22:0x56:884)" (open-gpu-kernel-modules#862).
_RMINIT_RE = re.compile(r"RmInitAdapter failed! \((0x[0-9A-Fa-f]+:0x[0-9A-Fa-f]+:\d+)\)|rm_init_adapter failed")
# Codes the reports decoded: 0x22:0x56:884 = BAR1 could not be mapped (Above 4G decoding / Resizable BAR off).
RMINIT_CODES = {
    "0x22:0x56:884": ("bios_bar_disabled",
                      "the driver could not map the GPU's BAR (Above 4G Decoding / Resizable BAR off) [N20]",
                      "enable Above 4G Decoding and Resizable BAR in the BIOS/UEFI setup, then reboot"),
}
REBOOT_REMEDY = ("host needs reboot; not a software configuration problem: drain the host, do not restart the "
                 "service in a loop, record driver version and VBIOS; possible mitigations (suggestions only): "
                 "another driver branch, a lower power cap (nvidia-smi -pl)")


def _kernel_findings(lines, context):
    """Dynamic kernel-log causes: ``{cause: (prio, index, line, summary, remedy, extra)}``."""
    found = {}
    gb10 = _is_gb10(context)
    for index, line in enumerate(lines):
        match = _XID_RE.search(line)
        if match:
            xid = int(match.group(2))
            bus = match.group(1).lower()
            if xid in WEDGE_XIDS:
                found["gpu_wedged_xid_%d" % xid] = (
                    99, index, line, "NVIDIA Xid %d on %s: %s [N03]" % (xid, bus, WEDGE_XIDS[xid]), REBOOT_REMEDY,
                    {"reboot_required": True, "restart": False, "xid": xid, "bus_id": bus})
            else:
                found["gpu_xid_%d" % xid] = (
                    30, index, line, "NVIDIA Xid %d reported on %s" % (xid, bus),
                    "look the Xid up in NVIDIA's Xid catalog; the gpu_health verdict says whether the GPU needs a "
                    "reset", {"xid": xid, "bus_id": bus})
            continue
        if _GSP_WEDGE_RE.search(line):
            found.setdefault("gpu_wedged_gsp", (
                98, index, line, "the GPU's firmware (GSP) or channel watchdog stopped the GPU [N03]", REBOOT_REMEDY,
                {"reboot_required": True, "restart": False}))
        if _UMA_RE.search(line):
            if gb10 is False:
                found["nvrm_no_memory"] = (
                    93, index, line, "the NVIDIA kernel driver ran out of memory for an allocation",
                    "lower sglang_service_mem_fraction_static and check host memory", {})
            else:
                found["gb10_uma_exhausted"] = (
                    97, index, line, "GB10 unified memory exhausted: the driver could not allocate although "
                    "MemAvailable may look fine (page cache, JIT peaks and the OS share the pool) [N18]",
                    "the host may need a power cycle; do not restart in a loop; size --mem-fraction-static from "
                    "MemAvailable minus headroom (preflight gb10_memory_budget), drop the page cache before start",
                    {"reboot_required": True, "restart": False})
        match = _RMINIT_RE.search(line)
        if match:
            code = match.group(1)
            if code in RMINIT_CODES:
                cause, summary, remedy = RMINIT_CODES[code]
                found[cause] = (96, index, line, summary, remedy, {"code": code})
            elif "gpu_init_failed" not in found or code:
                found["gpu_init_failed"] = (
                    94, index, line, "the NVIDIA driver could not initialise the GPU (RmInitAdapter %s) [N20]"
                    % (code or "failed"),
                    "read the kernel log around the line; check that the open kernel module is loaded (Blackwell "
                    "needs it), the BIOS has Above 4G Decoding / Resizable BAR on, and the card's power cables",
                    {"code": code})
    return found


def _is_gb10(context):
    """True / False when the context says whether this is a GB10 (cc 12.1, unified memory); None when unknown."""
    context = context or {}
    name = str(context.get("gpu_name") or "")
    cc = str(context.get("compute_capability") or "")
    if "GB10" in name or cc == "12.1":
        return True
    if name or cc:
        return False
    return None


def _speculative(argv):
    return any(str(tok).split("=", 1)[0] == "--speculative-algorithm" for tok in (argv or []))


def classify(lines, argv=None, context=None):
    """Find the cause of a failed or stuck start in journal lines (service journal and kernel log alike).

    :param lines: list of str or one str (journal output, ``-o cat``; ``journalctl -k`` lines may be mixed in).
    :param argv: the server's argv (list of str) when known: an illegal memory access with
        ``--speculative-algorithm`` in it is ``spec_decode_crash`` (N06), and ``Cannot find the config file for
        <q>`` without it is ``quant_config_missing`` rather than the draft-model case (N05).
    :param context: optional dict ``gpu_name`` / ``compute_capability`` (kernel-log OOM is GB10's unified memory
        only on a GB10, N18).
    :returns: dict ``cause`` (rule id or ``"unknown"``), ``summary``, ``remedy``, ``line`` (the matching line; for
        ``unknown`` the last non-empty raw line, or None for an empty journal), ``matches`` (every matching rule id,
        most important first). Kernel-log wedges add ``reboot_required: true`` and ``restart: false``. An OOM line
        before the weights finished loading is reported as ``weights_oom``.
    """
    lines = drop_generic_advice(split_lines(lines))
    found = {}
    for index, line in enumerate(lines):
        for cause, prio, patterns, summary, remedy in _COMPILED:
            if any(p.search(line) for p in patterns):
                found[cause] = (prio, index, line, summary, remedy)
    extra = {}
    for cause, value in _kernel_findings(lines, context).items():
        found[cause] = value[:5]
        extra[cause] = value[5]
    if "pdl_graph_capture_sm120" in found and not any(_CAPTURE.search(line) for line in lines):
        found.pop("pdl_graph_capture_sm120")       # the PDL verdict needs a capture; elsewhere it is another bug
    # SM12x family kinds (S-kinds, _sm12x_journal.findings): rules that need several lines or the hardware profile
    for cause, value in (_sm12x_journal.findings(lines, context) if _sm12x_journal else {}).items():
        found[cause] = value[:5]
        extra[cause] = value[5]
    spec = _speculative(argv)
    if "illegal_memory_access" in found and spec:
        prio, index, line, _s, _r = found.pop("illegal_memory_access")
        found["spec_decode_crash"] = (prio + 1, index, line,
                                      "CUDA illegal memory access with speculative decoding on: a speculative-"
                                      "decode bug killed every rank (not a memory-size problem) [N06]", SPEC_REMEDY)
    if "draft_quant_inherited" in found and argv is not None and not spec:
        prio, index, line, _s, _r = found.pop("draft_quant_inherited")
        found["quant_config_missing"] = (prio, index, line,
                                         "--quantization names a method whose config the checkpoint does not "
                                         "have [N05]",
                                         "drop --quantization (let SGLang read the checkpoint's own config) or "
                                         "render the method the checkpoint facts name")
    if "runtime_oom" in found:
        oom_index = found["runtime_oom"][1]
        # a CUDA-graph capture runs after the weights are loaded; its wrapper line follows the OOM (C01, B26)
        weights_done = any(_WEIGHTS_DONE.search(line) for line in lines[:oom_index]) or any(
            _CAPTURE.search(line) for line in lines)
        if not weights_done:
            prio, index, line, _s, _r = found.pop("runtime_oom")
            found["weights_oom"] = (prio, index, line,
                                    "GPU out of memory while loading the weights: they do not fit [B26]",
                                    "raise the tensor-parallel size or use a smaller/quantised checkpoint; "
                                    "check that no other process holds VRAM")
    if not found:
        raw = next((line.strip() for line in reversed(lines) if line.strip()), None)
        return {"cause": "unknown", "summary": "no known failure pattern in the journal", "remedy":
                "read the last lines below", "line": raw, "matches": []}
    ordered = sorted(found.items(), key=lambda item: (item[1][0], item[1][1]), reverse=True)
    cause, (prio, index, line, summary, remedy) = ordered[0]
    result = {"cause": cause, "summary": summary, "remedy": remedy, "line": line.strip(),
              "matches": [name for name, _v in ordered]}
    result.update(extra.get(cause) or {})
    if any((extra.get(name) or {}).get("reboot_required") for name in result["matches"]):
        result["reboot_required"] = True
        result["restart"] = False
    return result
