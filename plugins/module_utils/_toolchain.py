# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang contributors
# Apache-2.0 (see LICENSE)
"""Build-toolchain facts: nvcc (by absolute path), CUDA runtime headers, CCCL layout, CMake, torch in a venv.

Pure Python (stdlib only; version parsing from ``_versions``). The collector takes an injected runner
``run(argv) -> (rc, stdout, stderr)`` so that tests can drive it with fake executables.

Sources:
- ``nvcc --version``: only ``release X.Y, VX.Y.Z`` is trusted, the ``Build cuda_...`` line changed format (B21).
- ``nvcc --list-gpu-arch`` prints one ``compute_NN`` per line; ``compute_120`` means the toolkit can target SM120 and
  its arch-specific ``sm_120a`` (CUDA >= 12.8). Asking the compiler beats a version table (B04).
- ``#define CUDART_VERSION 13000`` in ``cuda_runtime_api.h`` = major * 1000 + minor * 10 (CUDA headers). nvcc and
  headers from different minors produce ``CUDA compiler and CUDA toolkit headers are incompatible`` (B08).
- CUDA 13 (CCCL 3) moved ``cuda/``, ``cub/``, ``thrust/`` under ``include/cccl/``; host-only compilers then need
  ``-I$CUDA_HOME/include/cccl`` (B03, sglang-sm120.md 1.5).
- ``cmake version 3.28.3`` (``cmake --version``): sgl-kernel sets policies CMP0169 (CMake 3.30) and CMP0177 (3.31), so
  the effective minimum is 3.31; CMake >= 4.0 needs ``CMAKE_POLICY_VERSION_MINIMUM=3.5`` for old fetched deps
  (B01, B02, sglang-sm120.md 1.2 and 1.4).
"""

from __future__ import annotations

import json
import os
import re

from ansible_collections.blackwell.sglang.plugins.module_utils._cuda_toolchain import gpu_arch_list
from ansible_collections.blackwell.sglang.plugins.module_utils._versions import parse_nvcc_version
from ansible_collections.blackwell.sglang.plugins.module_utils._fs import read_text as _read

_CUDART_RE = re.compile(r"^\s*#\s*define\s+CUDART_VERSION\s+(\d+)", re.MULTILINE)
_CMAKE_RE = re.compile(r"cmake version (\d+)\.(\d+)(?:\.(\d+))?")

# Printed by TORCH_PROBE as one JSON line; runs inside the target venv's python.
TORCH_PROBE = (
    "import json, sys\n"
    "out = {'python': sys.version.split()[0]}\n"
    # C02: every nvidia-nccl-cu1* wheel (they all ship nvidia/nccl/lib/libnccl.so.2), read before importing torch,
    # which is what fails ('undefined symbol: nccl...') when the wrong one won
    "try:\n"
    "    import importlib.metadata as _md\n"
    "    out['nccl_wheels'] = dict((d.metadata['Name'].lower(), d.version) for d in _md.distributions()\n"
    "                              if (d.metadata['Name'] or '').lower().startswith('nvidia-nccl-cu'))\n"
    "except Exception:\n"
    "    out['nccl_wheels'] = None\n"
    "try:\n"
    "    import torch\n"
    "except Exception as exc:\n"
    "    out['error'] = '%s: %s' % (type(exc).__name__, exc)\n"
    "else:\n"
    "    out['version'] = torch.__version__\n"
    "    out['cuda'] = torch.version.cuda\n"
    "    out['git_version'] = getattr(torch.version, 'git_version', None)\n"
    "    try:\n"
    "        out['arch_list'] = list(torch.cuda.get_arch_list())\n"
    "    except Exception as exc:\n"
    "        out['arch_list'] = None\n"
    "        out['arch_error'] = str(exc)\n"
    "    try:\n"
    "        out['nccl'] = '.'.join(str(x) for x in torch.cuda.nccl.version())\n"
    "    except Exception:\n"
    "        out['nccl'] = None\n"
    # N16/N01: which distributions own site-packages/triton, what torch requires, and the bundled ptxas
    "tri = {'distributions': {}, 'torch_requires': [], 'bundled_ptxas': None, 'bundled_ptxas_version': None}\n"
    "try:\n"
    "    import importlib.metadata as md\n"
    "    for name in ('triton', 'pytorch-triton', 'triton-nightly'):\n"
    "        try:\n"
    "            tri['distributions'][name] = md.version(name)\n"
    "        except md.PackageNotFoundError:\n"
    "            pass\n"
    "    try:\n"
    "        tri['torch_requires'] = [r for r in (md.requires('torch') or []) if 'triton' in r.lower()]\n"
    "    except md.PackageNotFoundError:\n"
    "        pass\n"
    "    import importlib.util, os, subprocess\n"
    "    spec = importlib.util.find_spec('triton')\n"
    "    if spec and spec.submodule_search_locations:\n"
    "        cand = os.path.join(list(spec.submodule_search_locations)[0], 'backends', 'nvidia', 'bin', 'ptxas')\n"
    "        if os.path.isfile(cand):\n"
    "            tri['bundled_ptxas'] = cand\n"
    "            tri['bundled_ptxas_version'] = subprocess.run([cand, '--version'], capture_output=True, text=True,\n"
    "                                                          timeout=30).stdout\n"
    "except Exception as exc:\n"
    "    tri['error'] = '%s: %s' % (type(exc).__name__, exc)\n"
    "out['triton'] = tri\n"
    "print('BLACKWELL_TORCH_PROBE ' + json.dumps(out))\n"
)


def parse_cudart_version(text):
    """``#define CUDART_VERSION 13000`` -> ``(13, 0)``; None when absent."""
    match = _CUDART_RE.search(text or "")
    if not match:
        return None
    value = int(match.group(1))
    return value // 1000, (value % 1000) // 10


def parse_cmake_version(text):
    """``cmake version 3.28.3`` -> ``(3, 28, 3)``; None when absent. Suffixes such as ``-rc1`` are ignored."""
    match = _CMAKE_RE.search(text or "")
    if not match:
        return None
    return int(match.group(1)), int(match.group(2)), int(match.group(3) or 0)


def parse_torch_probe(text):
    """Extract the JSON line printed by :data:`TORCH_PROBE`; None when missing."""
    for line in (text or "").splitlines():
        if line.startswith("BLACKWELL_TORCH_PROBE "):
            return json.loads(line[len("BLACKWELL_TORCH_PROBE "):])
    return None


def which_all(name, path_env):
    """Every executable ``name`` on ``path_env`` in PATH order (like ``which -a``), without resolving links."""
    found = []
    for entry in (path_env or "").split(os.pathsep):
        if not entry:
            continue
        candidate = os.path.join(entry, name)
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK) and candidate not in found:
            found.append(candidate)
    return found


def include_dirs(cuda_home):
    """Header directories of a toolkit: ``<home>/include`` and ``<home>/targets/*/include`` that exist."""
    dirs = []
    top = os.path.join(cuda_home, "include")
    if os.path.isdir(top):
        dirs.append(top)
    targets = os.path.join(cuda_home, "targets")
    if os.path.isdir(targets):
        for name in sorted(os.listdir(targets)):
            inc = os.path.join(targets, name, "include")
            if os.path.isdir(inc) and os.path.realpath(inc) not in [os.path.realpath(d) for d in dirs]:
                dirs.append(inc)
    return dirs


def cccl_layout(cuda_home):
    """Where ``cuda/std/utility`` lives in a toolkit.

    :returns: dict ``{cccl_dir: path|None, legacy_dir: path|None, cuda13_layout: bool}``: ``cuda13_layout`` is True
        when the header exists only under ``include/cccl`` (the host compiler then needs that include dir, B03).
    """
    cccl_dir = legacy = None
    for inc in include_dirs(cuda_home):
        if cccl_dir is None and os.path.isfile(os.path.join(inc, "cccl", "cuda", "std", "utility")):
            cccl_dir = os.path.join(inc, "cccl")
        if legacy is None and os.path.isfile(os.path.join(inc, "cuda", "std", "utility")):
            legacy = inc
    return {"cccl_dir": cccl_dir, "legacy_dir": legacy, "cuda13_layout": bool(cccl_dir and not legacy)}


def _nvcc_version(run, path):
    rc, out, err = run([path, "--version"])
    if rc != 0:
        return None, "rc=%s: %s" % (rc, (err or out).strip()[:200])
    try:
        return "%d.%d.%d" % parse_nvcc_version(out), None
    except ValueError as exc:
        return None, str(exc)


def collect_nvcc(run, cuda_home, path_env):
    """Facts about the toolkit at ``cuda_home`` and the nvcc binaries on PATH.

    :returns: dict ``{cuda_home, nvcc, present, version, version_error, arch_list, cudart_version, cudart_header,
        cccl, path_nvccs: [{path, realpath, version}], path_first}``; ``present`` False when
        ``<cuda_home>/bin/nvcc`` does not exist (not an error: the cuda_toolchain role may install it later).
    """
    nvcc = os.path.join(cuda_home, "bin", "nvcc")
    facts = {
        "cuda_home": cuda_home,
        "cuda_home_realpath": os.path.realpath(cuda_home),
        "nvcc": nvcc,
        "present": os.path.isfile(nvcc) and os.access(nvcc, os.X_OK),
        "version": None,
        "version_error": None,
        "arch_list": [],
        "arch_error": None,
        "cudart_version": None,
        "cudart_header": None,
        "cccl": cccl_layout(cuda_home) if os.path.isdir(cuda_home) else None,
        "path_nvccs": [],
        "path_first": None,
    }
    if facts["present"]:
        facts["version"], facts["version_error"] = _nvcc_version(run, nvcc)
        rc, out, err = run([nvcc, "--list-gpu-arch"])
        if rc == 0:
            facts["arch_list"] = gpu_arch_list(out)
        else:
            facts["arch_error"] = "nvcc --list-gpu-arch failed (rc=%s): %s" % (rc, (err or out).strip()[:200])
    for inc in include_dirs(cuda_home) if os.path.isdir(cuda_home) else []:
        header = os.path.join(inc, "cuda_runtime_api.h")
        parsed = parse_cudart_version(_read(header))
        if parsed:
            facts["cudart_version"] = "%d.%d" % parsed
            facts["cudart_header"] = header
            break
    for path in which_all("nvcc", path_env):
        version, _raw = _nvcc_version(run, path)
        facts["path_nvccs"].append({"path": path, "realpath": os.path.realpath(path), "version": version})
    if facts["path_nvccs"]:
        facts["path_first"] = facts["path_nvccs"][0]["path"]
    return facts


def collect_cmake(run, candidates, path_env):
    """First usable cmake among ``candidates`` (absolute paths, in order), else the first on PATH.

    :returns: dict ``{path, version (str|None), source: candidate|path|None, error}``.
    """
    tried = [(c, "candidate") for c in candidates or [] if c]
    tried += [(p, "path") for p in which_all("cmake", path_env)]
    for path, source in tried:
        if not (os.path.isfile(path) and os.access(path, os.X_OK)):
            continue
        rc, out, err = run([path, "--version"])
        version = parse_cmake_version(out) if rc == 0 else None
        if version:
            return {"path": path, "version": "%d.%d.%d" % version, "source": source, "error": None}
        return {"path": path, "version": None, "source": source,
                "error": "cmake --version gave no version (rc=%s): %s" % (rc, (err or out).strip()[:200])}
    return {"path": None, "version": None, "source": None, "error": "no cmake found"}


def collect_torch(run, python):
    """Run :data:`TORCH_PROBE` with ``python`` (the venv interpreter, absolute path).

    :returns: dict ``{python, present, version, cuda, arch_list, error, nccl, nccl_wheels, triton, ...}``;
        ``present`` False when the interpreter is missing (venv not created yet) or torch is not importable;
        ``nccl_wheels`` (``{distribution: version}`` of every ``nvidia-nccl-cu1*``) is there in both cases.
    """
    facts = {"python": python, "present": False, "version": None, "cuda": None, "arch_list": None, "error": None}
    if not python or not (os.path.isfile(python) and os.access(python, os.X_OK)):
        facts["error"] = "no python at %s (venv not created yet)" % python
        return facts
    rc, out, err = run([python, "-c", TORCH_PROBE])
    probe = parse_torch_probe(out)
    if rc != 0 or probe is None:
        facts["error"] = "torch probe failed (rc=%s): %s" % (rc, (err or out).strip()[-300:])
        return facts
    facts["nccl_wheels"] = probe.get("nccl_wheels")
    if "error" in probe:
        facts["error"] = "torch not importable: %s" % probe["error"]
        return facts
    facts.update({"present": True, "version": probe.get("version"), "cuda": probe.get("cuda"),
                  "arch_list": probe.get("arch_list"), "git_version": probe.get("git_version"),
                  "python_version": probe.get("python"), "nccl": probe.get("nccl"), "triton": probe.get("triton")})
    return facts
