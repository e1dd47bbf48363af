# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang contributors
# Apache-2.0 (see LICENSE)
"""Journal and kernel-log kinds of the SM12x family (field reports part 3), for :func:`_journal.classify`.

Kept apart from ``_journal.RULES``: these rules need more than one line (a frame in the same traceback, the absence
of an OOM-killer line, the last NCCL line) or the hardware profile (unified memory on GB10). :func:`findings`
returns entries in ``_journal``'s internal shape, ``cause -> (priority, index, line, summary, remedy, extra)``.

* ``sgl_kernel_arch_gap`` (S13): "no kernel image is available" from sgl-kernel (``RMSNorm failed with error code``,
  an ``sgl_kernel`` frame): the wheel has no code for this GPU's arch; ``flashinfer_prebuilt_arch_gap`` (S17) when the
  frame is FlashInfer's prebuilt ``flashinfer_jit_cache``/``flashinfer`` instead.
* ``deepgemm_sm12x_unsupported`` (S16): ``Unknown recipe`` / ``Unknown SF transformation`` from DeepGEMM's layout
  assertions.
* ``scheduler_abort_not_oom`` (S19): a scheduler killed with ``-9`` and no OOM-killer line: not a memory problem
  (a model with head_dim < 64 on FlashInfer aborts this way); ``gb10_oom_killed`` / ``host_oom_killed`` when the
  kernel's OOM killer did it.
* ``gb10_cuda_oom``: a CUDA out-of-memory on unified memory (the pool is shared with the OS and the page cache).
* ``nccl_nvls_hang`` (S21): the last NCCL line is ``NVLS tuning`` and ``Init COMPLETE`` never came.
* ``roce_fabric_misconfig`` (S02): ``ibv_modify_qp`` errno 61/110, ``IBV_WC_RETRY_EXC_ERR(12)``.
"""

from __future__ import annotations

import re

try:
    from ansible_collections.blackwell.sglang.plugins.module_utils import _hardware_profile as hp
except ImportError:  # copied beside _journal.py outside the collection
    from . import _hardware_profile as hp  # pylint: disable=import-self

_NO_IMAGE_RE = re.compile(r"no kernel image is available for execution on the device")
_SGL_KERNEL_RE = re.compile(r"sgl_kernel|sgl-kernel|sglang[-_]kernel|RMSNorm failed with error code|"
                            r"/sglang/kernels/aot/")
_FLASHINFER_FRAME_RE = re.compile(r"flashinfer_jit_cache|site-packages/flashinfer/|flashinfer-cubin|flashinfer_cubin")
_DEEPGEMM_RE = re.compile(r"Assertion error \([^)]*(?:layout|heuristics)[^)]*\): Unknown (?:recipe|SF transformation)|"
                          r"deepgemm.*Unknown (?:recipe|SF transformation)", re.IGNORECASE)
_KILLED_9_RE = re.compile(r"exit(?:code| code| status)\s*[=:]?\s*-9\b|killed by signal 9\b|signal=KILL\b|"
                          r"status=9/KILL", re.IGNORECASE)
_SCHEDULER_RE = re.compile(r"[Ss]cheduler|Child process|subprocess")
_OOM_KILLER_RE = re.compile(r"Out of memory: Killed process \d+|oom-kill:|invoked oom-killer|"
                            r"Memory cgroup out of memory: Killed process")
_CUDA_OOM_RE = re.compile(r"torch\.OutOfMemoryError|CUDA out of memory|cudaErrorMemoryAllocation")
_NCCL_LINE_RE = re.compile(r"NCCL INFO")
_NVLS_RE = re.compile(r"NCCL INFO .*NVLS tuning")
_INIT_DONE_RE = re.compile(r"Init COMPLETE")
_ROCE_RE = re.compile(r"ibv_modify_qp(?: failed)?(?: with)?(?: err(?:no)?)?\s*[:=]?\s*(61|110)\b|"
                      r"IBV_WC_RETRY_EXC_ERR\s*\(12\)")

UMA_OOM_REMEDY = ("the unified memory pool ran out (GPU allocations, the OS, the page cache and JIT compilers share "
                  "it): set sglang_service_mem_fraction_static to what the preflight's gb10_memory_budget derives from "
                  "MemAvailable (or leave it null there), stop other workloads and the desktop session, drop the page "
                  "cache before the start; do not restart in a loop (the host may need a power cycle)")


def unified_memory(context):
    """True / False when the context (``gpu_name``, ``compute_capability``) says whether the GPU is unified memory
    (the hardware profile's rule), None when it says nothing."""
    context = context or {}
    name = str(context.get("gpu_name") or "")
    cc = str(context.get("compute_capability") or "")
    if not (name or cc):
        return None
    return hp.is_unified_memory({"name": name, "compute_cap": cc, "memory_total_mib": 0})


def _target_for(context):
    cc = hp.parse_capability((context or {}).get("compute_capability"))
    return hp.arch_of(cc) if cc is not None and hp.in_family(cc) else None


def findings(lines, context=None):
    """SM12x findings in journal lines (list of str).

    :param context: optional dict ``gpu_name`` / ``compute_capability`` (as for ``_journal.classify``).
    :returns: dict cause -> ``(priority, index, line, summary, remedy, extra)``.
    """
    found = {}
    oom_killer = any(_OOM_KILLER_RE.search(line) for line in lines)
    uma = unified_memory(context)
    target = _target_for(context)
    for index, line in enumerate(lines):
        if _NO_IMAGE_RE.search(line):
            window = lines[max(0, index - 40):index + 5]
            if any(_FLASHINFER_FRAME_RE.search(w) for w in window):
                found["flashinfer_prebuilt_arch_gap"] = (
                    77, index, line, "a prebuilt FlashInfer module (flashinfer-jit-cache / cubin) has no code for this "
                    "GPU's arch [S17]",
                    "do not install flashinfer-jit-cache on compute capability 12.1 (flashinfer_install_jit_cache: "
                    "false) so that FlashInfer JIT-compiles for the GPU; not an sgl-kernel problem", {})
            elif any(_SGL_KERNEL_RE.search(w) for w in window):
                found["sgl_kernel_arch_gap"] = (
                    77, index, line, "the sgl-kernel wheel has no code for this GPU's arch%s [S13]" % (
                        " (%s missing)" % target if target else ""),
                    "rebuild sgl-kernel with %s among sglang_stack_target_archs (or leave it "
                    "unset: the hardware profile derives it from the fleet's GPUs); sm_120a code does not run on "
                    "compute capability 12.1; the role's library_archs check names the libraries" % (
                        target or "this GPU's sm_XYa target"), {"missing_arch": target} if target else {})
        if _DEEPGEMM_RE.search(line):
            found["deepgemm_sm12x_unsupported"] = (
                78, index, line, "DeepGEMM has no SM12x FP8 block-scale recipe [S16]",
                "run with SGLANG_ENABLE_JIT_DEEPGEMM=0 (the preflight renders it on compute capability 12.x; "
                "preflight_sm12x_deepgemm_off)", {})
        if _KILLED_9_RE.search(line) and _SCHEDULER_RE.search(line):
            if oom_killer:
                oom = next(i for i, ln in enumerate(lines) if _OOM_KILLER_RE.search(ln))
                if uma:
                    found["gb10_oom_killed"] = (
                        96, oom, lines[oom], "the kernel's OOM killer ended the server: the unified memory pool "
                        "(GB10) is exhausted [N18]", UMA_OOM_REMEDY, {"restart": False})
                else:
                    found["host_oom_killed"] = (
                        70, oom, lines[oom], "the kernel's OOM killer ended the server (host memory)",
                        "free host memory or add swap; lower the build/serving parallelism on this host", {})
            else:
                found["scheduler_abort_not_oom"] = (
                    60, index, line, "a scheduler process was killed with -9 but the kernel log has no OOM-killer "
                    "line: an abort inside the scheduler, not a memory problem [S19]",
                    "read the scheduler's own log lines above; a model with head_dim < 64 aborts on FlashInfer "
                    "prefill: --attention-backend triton (rendered when the backend is unset); memory remedies do not "
                    "apply", {})
        if _OOM_KILLER_RE.search(line) and uma and "gb10_oom_killed" not in found:
            found["gb10_oom_killed"] = (
                96, index, line, "the kernel's OOM killer ran on a unified-memory GPU host (GB10) [N18]",
                UMA_OOM_REMEDY, {"restart": False})
        if _CUDA_OOM_RE.search(line) and uma:
            found["gb10_cuda_oom"] = (
                57, index, line, "CUDA out of memory on unified memory (GB10): MemAvailable, not MemTotal, bounds "
                "the pool [N18]", UMA_OOM_REMEDY, {})
        if _ROCE_RE.search(line):
            found["roce_fabric_misconfig"] = (
                66, index, line, "the RoCE fabric between the nodes is misconfigured (GID index, MTU, or cabling) "
                "[S02]",
                "leave NCCL_IB_GID_INDEX unset (never empty), check equal MTU at both ends of every ConnectX-7 link "
                "(9000), persist the addresses with netplan, cable p0 <-> p1, and list both RDMA devices of a cable "
                "in NCCL_IB_HCA", {})
    nccl = [i for i, line in enumerate(lines) if _NCCL_LINE_RE.search(line)]
    if nccl and _NVLS_RE.search(lines[nccl[-1]]) and not any(_INIT_DONE_RE.search(lines[i]) for i in nccl):
        found["nccl_nvls_hang"] = (
            65, nccl[-1], lines[nccl[-1]], "NCCL stopped at 'NVLS tuning' before Init COMPLETE (NCCL >= 2.30.4 without "
            "NVLink) [S21]",
            "run with NCCL_NVLS_ENABLE=0 (the preflight renders it for NCCL >= 2.30.4 without NVLink) or use NCCL "
            "2.30.3", {})
    return found
