# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang contributors
# Apache-2.0 (see LICENSE)
"""Classify why an sgl-kernel build (or the import of its wheel) failed, from the log text.

Each rule is a field report of ``shared/domain/field-reports.md`` (B01-B05, B07; C02 of the third set) with the
verdict name its fixture expects. The first rule that matches a line wins, in the order below (the most specific
causes first); exit code 137 / -9 without a matching line is B05 as well. Pure Python.
"""

from __future__ import annotations

import re

RULES = (
    ("cmake_policy_unknown", "B01", re.compile(r'Policy "CMP[0-9]+" is not known to this version of CMake'),
     "the CMake in use predates a policy the CMakeLists sets (CMP0169 needs 3.30, CMP0177 needs 3.31)",
     "install cmake>=3.31,<4 into the venv, or apply the cmake_policy_guards patch"),
    ("cmake4_old_min_required", "B02", re.compile(r"Compatibility with CMake < 3\.5 has been removed"),
     "CMake >= 4 rejects a fetched dependency's cmake_minimum_required below 3.5 (dlpack via mscclpp)",
     "export CMAKE_POLICY_VERSION_MINIMUM=3.5 and configure into a fresh build directory, or use cmake<4"),
    ("cccl_include_missing", "B03",
     re.compile(r"fatal error: (cuda/std/[\w/.]+|cuda/atomic|cub/[\w/.]+|thrust/[\w/.]+|nv/target): No such file"),
     "a host-compiled unit includes CCCL headers that CUDA 13 keeps under <CUDA_HOME>/include/cccl",
     "export CPLUS_INCLUDE_PATH/C_INCLUDE_PATH=<CUDA_HOME>/include/cccl or apply the cccl_include patch"),
    ("nvcc_arch_unsupported", "B04", re.compile(r"Unsupported gpu architecture '(compute|sm)_[0-9]+[af]?'"),
     "the nvcc in use cannot target this architecture (CUDA < 12.8 for sm_120a, or an older nvcc first on PATH)",
     "use a CUDA >= 12.8 (13.x) toolkit and make its bin/ first on PATH (check `which -a nvcc`)"),
    ("build_oom", "B05",
     re.compile(r"FAILED: \[code=137\]|Killed signal terminated program|\bKilled\b.*(nvcc|cicc|ptxas|cc1plus)|"
                r"virtual memory exhausted|out of memory allocating|std::bad_alloc"),
     "a compiler process was killed for lack of memory",
     "lower sgl_kernel_sm120_max_jobs / raise sgl_kernel_sm120_gib_per_job (fewer parallel nvcc jobs)"),
    ("nccl_library_mismatch", "C02", re.compile(r"undefined symbol: nccl\w+"),
     "a library expects an NCCL symbol the loaded libnccl.so.2 lacks: two nvidia-nccl-cu1* wheels (or a system "
     "libnccl.so.2) share the file and the older one won; rebuilding sgl-kernel does not help",
     "fix the NCCL wheels: uninstall every nvidia-nccl-cu1* wheel and reinstall only nvidia-nccl-cu13 at the "
     "version torch requires (the preflight check nccl_wheels lists them)"),
    ("sgl_kernel_abi_mismatch", "B07", re.compile(r"undefined symbol: \S+"),
     "the extension was built against a different torch (C10 ABI) than the one installed",
     "rebuild sgl-kernel from source with --no-build-isolation against the installed torch"),
    ("sgl_kernel_cuda_major_mismatch", "B07",
     re.compile(r"lib(cudart|nvrtc|cublas|cublasLt)\.so\.12(\s*=>\s*not found|: cannot open shared object file)"),
     "the wheel links CUDA 12 libraries on a CUDA 13 host",
     "build sgl-kernel from source against the CUDA 13 toolkit and the cu130 torch"),
    # configure-time causes (the role's offline configure check, tasks/prepare_build.yml)
    ("numa_missing", "-", re.compile(r"Could NOT find NUMA|NUMA_(INCLUDE_DIRS|LIBRARIES)[-_A-Z]*NOTFOUND"),
     "mscclpp (fetched by kernel trees until 2026-07) needs libnuma: find_package(NUMA REQUIRED)",
     "install libnuma-dev (Debian/Ubuntu; numactl-devel on RHEL): it is in sgl_kernel_sm120_system_packages"),
    ("cuda_library_missing", "-",
     re.compile(r"CUDA_(\w+)_LIBRARY.*NOTFOUND|Target \S+ links to:\s*$|CUDA::(cuda_driver|nvrtc|cublas\w*|cudart)\b.*not found"),
     "a CUDA library the kernel links (nvrtc, cublas, the driver's libcuda.so) is not under CUDA_HOME",
     "pip method: nvidia-cuda-nvrtc (and the unversioned lib*.so links cuda_toolchain adds); the driver provides "
     "libcuda.so (install the NVIDIA driver, or a toolkit whose lib64/stubs/libcuda.so CMake can use)"),
    ("install_source_missing", "-", re.compile(r'file INSTALL cannot find "([^"]+)"'),
     "the install step copies a directory that a staged source lacks (e.g. triton's python/triton_kernels "
     "from an empty placeholder)",
     "give the source cache the real tree, or a placeholder that holds the directory named in the error"),
    ("fetchcontent_offline_missing", "-",
     re.compile(r"Cannot find source file:|does not contain a CMakeLists\.txt|"
                r"Could not resolve host: (github\.com|codeload\.github\.com)|Failed to connect to github\.com"),
     "a FetchContent source is missing: the build tried to download it, or a staged tree lacks files",
     "give sgl_kernel_sm120_source_cache every source that blackwell.sglang.sgl_kernel_sources lists"),
)

_CMAKE_ERROR = re.compile(r"^CMake Error\b")


def first_cmake_error(text, max_lines=14):
    """CMake's first error block (``CMake Error ...`` up to the next blank-line-separated message), as lines, followed
    by the classified cause and remedy when one is known. ``[]`` when the text holds no CMake error."""
    lines = (text or "").splitlines()
    for i, line in enumerate(lines):
        if _CMAKE_ERROR.match(line):
            block = [line.rstrip()]
            blanks = 0
            for nxt in lines[i + 1:]:
                if not nxt.strip():
                    blanks += 1
                    if blanks >= 2 or (block and block[-1] == ""):
                        break
                    block.append("")
                    continue
                if nxt.startswith("-- ") or _CMAKE_ERROR.match(nxt):
                    break
                block.append(nxt.rstrip())
                if len(block) >= max_lines:
                    break
            while block and not block[-1]:
                block.pop()
            why = classify("\n".join(block))
            if why["cause"] == "unknown":
                why = classify(text)
            tail = ["cause: %s: %s" % (why["cause"], why["message"]), "remedy: " + why["remedy"]] \
                if why["cause"] != "unknown" else []
            return ["first error: " + block[0]] + block[1:] + tail
    return []


def classify(text, rc=None, timed_out=False):
    """Return ``{"cause", "field_report", "message", "remedy", "line"}`` for a build/import log.

    :param text: the log (or its tail).
    :param rc: the build's exit code when known (137 / -9 mean SIGKILL: B05 without a matching line).
    :param timed_out: the asynchronous build ran past its limit.
    """
    lines = (text or "").splitlines()
    for cause, report, rx, message, remedy in RULES:
        for line in lines:
            if rx.search(line):
                return {"cause": cause, "field_report": report, "message": message, "remedy": remedy,
                        "line": line.strip()}
    if rc in (137, -9):
        return {"cause": "build_oom", "field_report": "B05", "message": "the build was killed (SIGKILL, exit %s)" % rc,
                "remedy": RULES[4][4], "line": ""}
    if timed_out:
        return {"cause": "build_timeout", "field_report": "B34",
                "message": "the build did not finish within sgl_kernel_sm120_build_timeout",
                "remedy": "raise sgl_kernel_sm120_build_timeout or cut the build (skip_fa3_build, sm120_only)",
                "line": ""}
    errors = [ln.strip() for ln in lines if re.search(r"\b(error|Error|ERROR|fatal)\b", ln)]
    return {"cause": "unknown", "field_report": "-", "message": "no known failure pattern in the log",
            "remedy": "read the log", "line": errors[0] if errors else ""}
