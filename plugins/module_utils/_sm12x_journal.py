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
* ``cuda_major_mix`` (S10): two CUDA majors in one process: ``failed to open libnvrtc-builtins.so.13.0``, or a
  ``lib*.so.12: cannot open shared object file`` (or ``.so.13``) while another line of the log shows the other
  major (``+cu130``, ``.so.13``, ``nvidia/cu13/lib``); alone, the missing CUDA 12 library stays B07's
  ``sgl_kernel_cuda_major_mismatch``.
* ``nccl_conf_override`` (S03): a hang just after ``Init COMPLETE`` (only NCCL or systemd lines follow) while the
  context names an NCCL config file (``/etc/nccl.conf``, ``~/.nccl.conf``, ``NCCL_CONF_FILE``) that NCCL reads
  without saying so; without such a file the hang is not this kind (B28 in the readiness waiter).
* ``nccl_build_wedge`` (S22): ``Watchdog caught collective operation timeout`` or a ``ncclLocalOpAppend`` frame on
  unified memory (GB10): the NCCL build (pip wheel against DGX OS's libnccl2 of the same version) is suspect
  before the attention or MoE backend; elsewhere a watchdog timeout is not classified by this rule.

Context keys read here: ``gpu_name`` / ``compute_capability`` (the hardware profile), ``nccl_conf_files`` (list of
paths, or dict path -> list of ``NCCL_*`` keys, of the NCCL config files found on the host; S03).
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
_NVRTC_BUILTINS_13_RE = re.compile(r"failed to open libnvrtc-builtins\.so\.13")
_MISSING_CUDA_LIB_RE = re.compile(r"lib[\w-]+\.so\.(12|13)(?:\.\d+)*: cannot open shared object file|"
                                  r"lib[\w-]+\.so\.(12|13)(?:\.\d+)* => not found")
_CUDA_MAJOR_MARK_RE = re.compile(r"\+cu(12|13)\d\b|\blib[\w-]+\.so\.(12|13)\b|nvidia/cu(12|13)/lib|"
                                 r"\bnvidia-[\w-]+-cu(12|13)\b|release (12|13)\.\d")
_WATCHDOG_RE = re.compile(r"Watchdog caught collective operation timeout|ncclLocalOpAppend")
_SYSTEMD_END_RE = re.compile(r"start operation timed out|Failed with result|Stopping |Stopped |Deactivated|"
                             r"Main process exited|Terminating|State 'stop-sigterm'")
_ROCE_RE = re.compile(r"ibv_modify_qp(?: failed)?(?: with)?(?: err(?:no)?)?\s*[:=]?\s*(61|110)\b|"
                      r"IBV_WC_RETRY_EXC_ERR\s*\(12\)")

UMA_OOM_REMEDY = ("the unified memory pool ran out (GPU allocations, the OS, the page cache and JIT compilers share "
                  "it): set sglang_service_mem_fraction_static to what the preflight's gb10_memory_budget derives from "
                  "MemAvailable (or leave it null there), stop other workloads and the desktop session, drop the page "
                  "cache before the start; do not restart in a loop (the host may need a power cycle)")


CUDA_MIX_REMEDY = ("keep one CUDA major in the venv: install the cu13 nvidia-cuda-nvrtc wheel (the -cu13 package "
                   "name is deprecated), remove every nvidia-*-cu12 runtime wheel next to a cu13 torch (or install the "
                   "torch of the toolkit's major), and put the directory holding libnvrtc-builtins.so.13.* "
                   "(site-packages/nvidia/cu13/lib; ldconfig -p | grep libnvrtc-builtins) first on the unit's "
                   "LD_LIBRARY_PATH (sglang_stack_cuda_env_file)")


def _majors(groups):
    """The CUDA majors of a match's groups (only one group of an alternation is set)."""
    return {int(g) for g in groups if g}


def _cuda_majors(lines):
    """CUDA majors (12, 13) named anywhere in the lines."""
    majors = set()
    for line in lines:
        for match in _CUDA_MAJOR_MARK_RE.finditer(line):
            majors |= _majors(match.groups())
    return majors


def _nccl_conf_files(context):
    files = (context or {}).get("nccl_conf_files") or []
    if isinstance(files, dict):
        return ["%s (%s)" % (path, ", ".join(keys)) if keys else str(path) for path, keys in sorted(files.items())]
    return [str(path) for path in files if path]


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
        if _NVRTC_BUILTINS_13_RE.search(line):
            found["cuda_major_mix"] = (
                79, index, line, "nvrtc cannot find its CUDA 13 builtins: the nvrtc loaded comes from another "
                "CUDA major than the process's runtime (two CUDA majors in one process) [S10]", CUDA_MIX_REMEDY,
                {"cuda_majors": sorted(_cuda_majors(lines) | {13})})
        missing = _MISSING_CUDA_LIB_RE.search(line)
        if missing and "cuda_major_mix" not in found:
            major = _majors(missing.groups())
            majors = _cuda_majors(lines)
            if majors - major:
                found["cuda_major_mix"] = (
                    79, index, line, "a CUDA %s library is missing while the process also loads CUDA %s (a cu12x "
                    "torch on a CUDA 13 base, or the reverse) [S10]" % (
                        "/".join(str(m) for m in sorted(major)), "/".join(str(m) for m in sorted(majors - major))),
                    CUDA_MIX_REMEDY, {"cuda_majors": sorted(majors | major)})
        if _WATCHDOG_RE.search(line) and uma and "nccl_build_wedge" not in found:
            found["nccl_build_wedge"] = (
                64, index, line, "an NCCL collective wedged on GB10 (watchdog timeout / ncclLocalOpAppend): the "
                "NCCL build is suspect before the attention or MoE backend (the pip nvidia-nccl-cu13 and DGX OS's "
                "libnccl2 can be one version and two builds) [S22]",
                "compare the GNU Build ID of the libnccl.so.2 the service loads with DGX OS's libnccl2 (readelf -n "
                "<lib> | grep 'Build ID'); prefer the system libnccl2, or a build qualified by a 30-60 min "
                "multi-rank soak, through LD_PRELOAD in sglang_service_nccl_env; swapping the attention/MoE backend, "
                "--enforce-eager or --disable-custom-all-reduce only moves the time between failures", {})
    nccl = [i for i, line in enumerate(lines) if _NCCL_LINE_RE.search(line)]
    conf_files = _nccl_conf_files(context)
    done = [i for i in nccl if _INIT_DONE_RE.search(lines[i])]
    if conf_files and done and all(_NCCL_LINE_RE.search(line) or _SYSTEMD_END_RE.search(line)
                                   for line in lines[done[-1] + 1:]):
        found["nccl_conf_override"] = (
            30, done[-1], lines[done[-1]], "the start hangs just after NCCL's Init COMPLETE while an NCCL config "
            "file the unit does not show is in effect: %s [S03]" % "; ".join(conf_files),
            "remove the file or set its NCCL_* keys (e.g. NCCL_IB_USE_INLINE, NCCL_IB_PREPOST_RECEIVE_WORK_REQUESTS) "
            "to 0, or move the settings the host needs into sglang_service_nccl_env; NCCL reads /etc/nccl.conf, "
            "~/.nccl.conf and NCCL_CONF_FILE on top of the process environment", {"nccl_conf_files": conf_files})
    if nccl and _NVLS_RE.search(lines[nccl[-1]]) and not any(_INIT_DONE_RE.search(lines[i]) for i in nccl):
        found["nccl_nvls_hang"] = (
            65, nccl[-1], lines[nccl[-1]], "NCCL stopped at 'NVLS tuning' before Init COMPLETE (NCCL >= 2.30.4 without "
            "NVLink) [S21]",
            "run with NCCL_NVLS_ENABLE=0 (the preflight renders it for NCCL >= 2.30.4 without NVLink) or use NCCL "
            "2.30.3", {})
    return found
