# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang contributors
# Apache-2.0 (see LICENSE)
"""The preflight checks as pure functions: facts in, ``{name, status, message, remedy}`` out.

Inputs are the results of ``blackwell.sglang.gpu_facts`` (``_gpu.collect``), ``blackwell.sglang.toolchain_facts``
(``_toolchain``), ``blackwell.sglang.host_facts`` (``_host.collect``) and a ``config`` dict built by the preflight
role from its variables (see :data:`DEFAULT_CONFIG`). :func:`evaluate` runs every check and derives the service
environment, extra launch arguments, build parallelism and the reboot flag. The filter
``blackwell.sglang.preflight_evaluate`` exposes it to the role; nothing here touches the host.

Statuses: ``pass``; ``warn`` (works, with a risk or a mitigation applied); ``fail`` (stop before installing);
``skip`` (cannot be checked yet or does not apply, ``message`` says why, e.g. nvcc not installed yet or no GPU on a
host where ``require_gpu`` is false).

Every version comparison is on integer tuples or :mod:`packaging.version` (via ``_versions``); never strings.
"""

from __future__ import annotations

import json
import os
import re

from ansible_collections.blackwell.sglang.plugins.module_utils._build_sizing import GIB, build_parallelism
from ansible_collections.blackwell.sglang.plugins.module_utils._cuda_toolchain import apt_repository, arch_coverage
from ansible_collections.blackwell.sglang.plugins.module_utils._gpu import P2P_LEGEND, TOPO_LEGEND, driver_supports_cuda
from ansible_collections.blackwell.sglang.plugins.module_utils._hardware_profile import is_unified_memory, uma_mem_fraction
from ansible_collections.blackwell.sglang.plugins.module_utils._versions import major_minor, parse_torch_version

PASS, WARN, FAIL, SKIP = "pass", "warn", "fail", "skip"
STATUSES = (PASS, WARN, FAIL, SKIP)
LOOPBACK_NO_PROXY = ("127.0.0.1", "localhost", "0.0.0.0", "::1")

DEFAULT_CONFIG = {
    "target_compute_capability": "12.0",
    "require_gpu": True,
    "cuda_version": "13.0",
    "cuda_install_method": "apt",
    "tp_size": 1,
    "gpu_indices": None,
    "min_disk_gb": 60,
    "min_shm_gib": 1.0,
    "p2p_opt_out": False,
    "cmake_min_version": "3.31",
    "cmake_policy_guards_patched": False,
    "cmake_policy_version_minimum": "3.5",
    "cmake_installed_by_build": True,
    "build_gib_per_job": 8.0,
    "build_headroom_gib": 16.0,
    "build_max_jobs": None,
    "build_gencodes": 1,
    "supported_distributions": {
        "apt": {"x86_64": ["ubuntu2204", "ubuntu2404", "debian12"], "aarch64": ["ubuntu2204", "ubuntu2404"]},
    },
    "apt_repo_arch": {"x86_64": "x86_64", "aarch64": "sbsa"},
    "apt_distro_slugs": {"Ubuntu": {"22.04": "ubuntu2204", "24.04": "ubuntu2404"}, "Debian": {"12": "debian12"}},
    "cuda_repo_slug": "",
    "min_glibc": "2.28",
    "distribution": {},
    "model_path": "",
    "model_path_required": True,
    "geforce_pattern": r"GeForce",
    "local_connection": False,
    "inventory_hostname": "",
    "extra_no_proxy": [],
    # field reports part 2 (docs/field-reports.md)
    "known_bad_drivers": {
        "595.71.05": "GSP heartbeat / RPC timeouts wedge Blackwell GPUs under sustained inference (Xid 119/154/8; "
                     "open-gpu-kernel-modules#1159, #1200); only a reboot recovers",
    },
    "known_bad_driver_status": "warn",
    "service_mem_fraction_static": None,
    "gb10_headroom_gib": 16.0,
    "nccl_min_version": "2.27",
    "triton_ptxas_env": True,
}

# PCI device ids of Blackwell GPUs (vendor 0x10de), per chip: GB100/GB102 2900-29ff, GB202 2b80-2bff, GB203
# 2c00-2c7f, GB206/GB207 2d00-2dff, GB10 2e00-2e7f, GB205 2f00-2f7f. 10de:2b85 (RTX 5090) is the one id the field
# reports show (open-gpu-kernel-modules#862); the ranges follow the PCI ID repository's chip grouping as known when
# this was written and were not re-checked against a pci.ids file here (none on the build machines). A GPU that
# nvidia-smi lists with compute capability >= 10 counts as Blackwell whatever its id.
BLACKWELL_PCI_RANGES = ((0x2900, 0x29ff), (0x2b80, 0x2bff), (0x2c00, 0x2c7f), (0x2d00, 0x2dff), (0x2e00, 0x2e7f),
                        (0x2f00, 0x2f7f))
# ptxas learned sm_120 in CUDA 12.8 and sm_121 in CUDA 12.9 (CUDA release notes), so a Triton-bundled ptxas older
# than that fails with "Value 'sm_12Xa' is not defined for option 'gpu-name'" (N01).
PTXAS_MIN_FOR_CC = {(12, 0): (12, 8), (12, 1): (12, 9), (10, 0): (12, 8), (10, 3): (12, 9)}


def check(name, status, message, remedy=""):
    """One check result. ``status`` is one of :data:`STATUSES`."""
    if status not in STATUSES:
        raise ValueError("unknown status %r" % status)
    return {"name": name, "status": status, "message": message, "remedy": remedy or ""}


def _cc_tuple(text):
    try:
        return major_minor(text)
    except (TypeError, ValueError):
        return None


def _gpu_label(gpu):
    return "GPU %s (%s, %s)" % (gpu.get("index"), gpu.get("name") or "unknown name", gpu.get("pci_bus_id") or "bus ?")


def _gpu_status(cfg):
    """Status for a GPU problem: fail when a GPU is required, else warn."""
    return FAIL if cfg["require_gpu"] else WARN


def mig_enabled(gpu_entry):
    """True when nvidia-smi reports MIG mode ``Enabled`` (current or pending) for this GPU."""
    return any(str(gpu_entry.get(k) or "").lower() == "enabled" for k in ("mig_mode", "mig_mode_pending"))


def tp_set(gpu, cfg):
    """The GPUs the tensor-parallel group will use: ``gpu_indices`` if given, else the first ``tp_size`` by index.

    GPUs in MIG mode are never chosen automatically (a MIG GPU is not one CUDA device for NCCL/TP); an explicit
    ``gpu_indices`` naming one is refused by :func:`check_mig`.
    """
    gpus = sorted(gpu.get("gpus") or [], key=lambda g: (g.get("index") is None, g.get("index")))
    if cfg.get("gpu_indices"):
        wanted = [int(i) for i in cfg["gpu_indices"]]
        return [g for g in gpus if g.get("index") in wanted], wanted
    return [g for g in gpus if not mig_enabled(g)][:max(1, int(cfg["tp_size"]))], None


def has_target_gpu(gpu, cfg):
    target = _cc_tuple(cfg["target_compute_capability"])
    return any(_cc_tuple(g.get("compute_cap")) == target for g in gpu.get("gpus") or [] if g.get("compute_cap"))


# --- GPU and driver ------------------------------------------------------------------------------------------------

DRIVER_REMEDIES = {
    "too_old": "upgrade the NVIDIA driver to the 580 branch or newer (open kernel modules for Blackwell)",
    "nvml_mismatch": "reboot the host (or unload and reload the nvidia kernel modules) to finish the driver upgrade",
    "driver_not_loaded": "install the NVIDIA open kernel modules for the running kernel (check 'dkms status', "
                         "linux-headers-$(uname -r)) and 'modprobe nvidia'",
    "gpu_lost": "reboot the host; not a software configuration problem (N03): drain it from the fleet, do not "
                "restart the service in a loop; record driver and VBIOS; another driver branch or a lower power cap "
                "are possible mitigations",
    "bios_bar_disabled": "enable Above 4G Decoding and Resizable BAR in the BIOS/UEFI setup, then reboot (N20)",
    "gpu_init_failed": "read the kernel log (journalctl -k -b | grep NVRM); Blackwell needs the open kernel module, "
                       "Above 4G Decoding / Resizable BAR and both power cables (N20)",
    "proprietary_module_on_blackwell": "install the open kernel modules of the same branch (nvidia-open, "
                                       "nvidia-driver-5xx-open) and reboot (N20)",
    "no_devices": "nvidia-smi sees no GPU: check 'lspci -nn | grep 10de', the kernel log (RmInitAdapter), the open "
                  "kernel module and the BIOS PCIe settings (N20)",
    "gb10_uma_exhausted": "power-cycle the host if it is unresponsive; size --mem-fraction-static from MemAvailable "
                          "(N18)",
}


def check_nvidia_driver(gpu, cfg):
    name = "nvidia_driver"
    if gpu.get("gpu_count"):
        return check(name, PASS, "nvidia-smi %s: driver %s, %d GPU(s)" % (
            gpu.get("nvidia_smi"), gpu.get("driver_version") or "unknown", gpu["gpu_count"]))
    reason = gpu.get("reason") or "no NVIDIA GPU found"
    host = cfg.get("inventory_hostname") or "this host"
    if not cfg["require_gpu"]:
        return check(name, WARN, "no usable NVIDIA GPU on %s: %s; GPU checks are skipped because "
                     "preflight_require_gpu is false" % (host, reason),
                     "none needed for a build-only or sandbox host; GPU steps (probe, service start) will be skipped")
    error = str(gpu.get("error") or "")
    remedy = DRIVER_REMEDIES.get(error) or (DRIVER_REMEDIES["gpu_lost"] if error.startswith("gpu_wedged") else
                                            "install the NVIDIA driver (580 or newer, open kernel modules) or set "
                                            "preflight_require_gpu: false for a host without GPUs")
    return check(name, FAIL, "no usable NVIDIA GPU on %s: %s" % (host, reason), remedy)


def check_driver_cuda(gpu, cfg):
    name = "driver_cuda"
    if not gpu.get("gpu_count"):
        return check(name, SKIP, "no GPU driver answered: %s" % (gpu.get("reason") or "no GPU"))
    ok, detail = driver_supports_cuda(gpu.get("driver_version"), gpu.get("cuda_driver_version"),
                                      cfg["cuda_version"])
    if ok is None:
        return check(name, WARN, detail, "check 'nvidia-smi -q' for the driver's CUDA version")
    if ok:
        return check(name, PASS, detail)
    major = major_minor(cfg["cuda_version"])[0]
    return check(name, FAIL, detail, "install a driver for CUDA %d (%s); for CUDA 13 that is the 580 branch or "
                 "newer, open kernel modules" % (major, ">= 580.65.06" if major == 13 else "see the CUDA release notes"))


def check_reboot_pending(gpu, cfg):
    name = "reboot_pending"
    if not gpu.get("reboot_required"):
        return check(name, PASS, "no NVML driver/library version mismatch")
    where = ("the control node (ansible_connection=local) is never rebooted by this collection"
             if cfg.get("local_connection") else "this collection does not reboot hosts in the preflight")
    return check(name, FAIL if cfg["require_gpu"] else WARN,
                 "reboot pending: %s; %s; fact sglang_stack_reboot_required is set" % (gpu.get("reason"), where),
                 "reboot the host at a convenient time (or reload the nvidia kernel modules), then re-run")


def check_compute_capability(gpu, cfg):
    name = "gpu_compute_capability"
    target = cfg["target_compute_capability"]
    if not gpu.get("gpu_count"):
        return check(name, SKIP, "no GPU to check: %s" % (gpu.get("reason") or "no GPU"))
    members, wanted = tp_set(gpu, cfg)
    bad, unknown = [], []
    for g in members:
        cc = g.get("compute_cap")
        if not cc:
            unknown.append(_gpu_label(g))
        elif _cc_tuple(cc) != _cc_tuple(target):
            bad.append("%s has compute capability %s, not %s" % (_gpu_label(g), cc, target))
    if bad or unknown:
        parts = bad + ["%s: compute capability not reported" % u for u in unknown]
        arch = "sm_%s" % target.replace(".", "")
        return check(name, _gpu_status(cfg),
                     "%s; this host is not an SM%s target (the stack builds %sa kernels for compute capability %s: "
                     "RTX PRO 6000 / RTX 5090 Blackwell)" % ("; ".join(parts), target.replace(".", ""), arch, target),
                     "run on a Blackwell SM%s host, or set sglang_stack_compute_capability / "
                     "preflight_gpu_indices to the GPUs meant to serve" % target.replace(".", ""))
    return check(name, PASS, "tensor-parallel GPUs %s have compute capability %s" % (
        ", ".join(str(g.get("index")) for g in members), target))


def check_tensor_parallel(gpu, cfg):
    name = "tensor_parallel_gpus"
    tp = int(cfg["tp_size"])
    target = _cc_tuple(cfg["target_compute_capability"])
    if not gpu.get("gpu_count"):
        return check(name, SKIP, "TP %d not checked: no GPU (%s)" % (tp, gpu.get("reason") or "no GPU"))
    usable = [g for g in gpu["gpus"] if _cc_tuple(g.get("compute_cap")) == target and not mig_enabled(g)]
    members, wanted = tp_set(gpu, cfg)
    problems = []
    if tp < 1:
        problems.append("sglang_stack_service_tp_size must be >= 1, got %d" % tp)
    if tp > len(usable):
        problems.append("TP %d > %d usable GPU(s) with compute capability %s (of %d GPU(s)%s)" % (
            tp, len(usable), cfg["target_compute_capability"], gpu["gpu_count"],
            "; MIG mode excludes %s" % ", ".join(_gpu_label(g) for g in gpu["gpus"] if mig_enabled(g))
            if any(mig_enabled(g) for g in gpu["gpus"]) else ""))
    if wanted is not None:
        missing = sorted(set(wanted) - set(g.get("index") for g in members))
        if missing:
            problems.append("preflight_gpu_indices names GPU(s) %s that do not exist" % missing)
        if len(wanted) != tp:
            problems.append("preflight_gpu_indices has %d GPU(s) but TP is %d" % (len(wanted), tp))
    if problems:
        return check(name, _gpu_status(cfg), "; ".join(problems),
                     "lower sglang_stack_service_tp_size to the number of SM%s GPUs or add GPUs"
                     % cfg["target_compute_capability"].replace(".", ""))
    return check(name, PASS, "TP %d <= %d usable GPU(s)" % (tp, len(usable)))


# --- build toolchain -----------------------------------------------------------------------------------------------

def _ver_tuple(text):
    try:
        return tuple(int(x) for x in str(text).split(".")[:3])
    except (TypeError, ValueError):
        return None


def check_cmake(tool, cfg):
    name = "cmake"
    cmake = tool.get("cmake") or {}
    need = _ver_tuple(cfg["cmake_min_version"])
    if not cmake.get("version"):
        return check(name, SKIP if cfg["cmake_installed_by_build"] else FAIL,
                     "no usable cmake yet (%s)" % (cmake.get("error") or "not found"),
                     "" if cfg["cmake_installed_by_build"] else "install cmake >= %s" % cfg["cmake_min_version"])
    have = _ver_tuple(cmake["version"])
    where = "%s (%s)" % (cmake["path"], cmake["version"])
    if have >= (4, 0, 0):
        if str(cfg.get("cmake_policy_version_minimum") or "").strip():
            return check(name, PASS, "%s: CMake 4 with CMAKE_POLICY_VERSION_MINIMUM=%s for old fetched deps "
                         "(dlpack cmake_minimum_required 3.2); the build must start from a fresh build dir"
                         % (where, cfg["cmake_policy_version_minimum"]))
        return check(name, FAIL, "%s: CMake >= 4.0 rejects fetched dependencies that declare "
                     "cmake_minimum_required < 3.5 (dlpack via mscclpp) and preflight_cmake_policy_version_minimum "
                     "is empty" % where,
                     "set preflight_cmake_policy_version_minimum: '3.5' (exported as CMAKE_POLICY_VERSION_MINIMUM, "
                     "fresh build dir), or use CMake in [3.31, 4.0)")
    if have >= need:
        return check(name, PASS, "%s >= %s" % (where, cfg["cmake_min_version"]))
    msg = ("%s < %s: sgl-kernel sets policy CMP0169 (introduced in CMake 3.30) and CMP0177 (3.31), which older CMake "
           "rejects ('Policy \"CMP0169\" is not known to this version of CMake')" % (where, cfg["cmake_min_version"]))
    if have >= (3, 26, 0) and cfg["cmake_policy_guards_patched"]:
        return check(name, WARN, msg + "; accepted because preflight_cmake_policy_guards_patched is true",
                     "prefer cmake >= %s in the build venv" % cfg["cmake_min_version"])
    remedy = "pip install 'cmake>=%s' into the build venv (or patch if(POLICY ...) guards around the policies)" \
        % cfg["cmake_min_version"]
    if cmake.get("source") == "path" and cfg["cmake_installed_by_build"]:
        return check(name, WARN, msg + "; this is the cmake on PATH, the kernel build installs its own into the venv",
                     remedy)
    return check(name, FAIL, msg, remedy)


# The variable a user sets to say where the toolkit is, per sglang_stack_cuda_install_method (cuda_toolchain_home is
# the fact cuda_toolchain derives from it, not a setting)
_HOME_SETTING = {"apt": "cuda_toolchain_apt_home", "existing": "cuda_toolchain_existing_home"}


def _home_setting(cfg):
    return _HOME_SETTING.get(cfg.get("cuda_install_method"),
                             "cuda_toolchain_existing_home (with sglang_stack_cuda_install_method: existing)")


def _toolkit_note(cfg):
    return "cuda_toolchain installs CUDA %s (method %s)" % (cfg["cuda_version"], cfg["cuda_install_method"])


def check_nvcc_version(tool, cfg):
    name = "nvcc_version"
    nvcc = tool.get("nvcc") or {}
    if not nvcc.get("present"):
        if cfg["cuda_install_method"] == "existing":
            return check(name, FAIL, "sglang_stack_cuda_install_method is 'existing' but %s does not exist" % nvcc.get("nvcc"),
                         "install CUDA %s there or set cuda_toolchain_existing_home to the toolkit" % cfg["cuda_version"])
        return check(name, SKIP, "no nvcc at %s yet; %s" % (nvcc.get("nvcc"), _toolkit_note(cfg)))
    if not nvcc.get("version"):
        return check(name, FAIL, "%s --version not understood: %s" % (nvcc["nvcc"], nvcc.get("version_error")),
                     "reinstall the CUDA toolkit")
    have = major_minor(nvcc["version"])
    want = major_minor(cfg["cuda_version"])
    if have == want:
        return check(name, PASS, "%s is CUDA %s (requested %s)" % (nvcc["nvcc"], nvcc["version"], cfg["cuda_version"]))
    status = FAIL if cfg["cuda_install_method"] == "existing" or have[0] != want[0] else WARN
    msg = "%s is CUDA %s but CUDA %s is requested" % (nvcc["nvcc"], nvcc["version"], cfg["cuda_version"])
    return check(name, status, msg,
                 "point %s at a CUDA %s toolkit or change sglang_stack_cuda_version"
                 % (_home_setting(cfg), cfg["cuda_version"]))


def check_nvcc_arch(tool, cfg):
    name = "nvcc_target_arch"
    nvcc = tool.get("nvcc") or {}
    target = cfg["target_compute_capability"]
    arch = "compute_%s" % target.replace(".", "")
    if not nvcc.get("present"):
        return check(name, SKIP, "no nvcc at %s yet; %s" % (nvcc.get("nvcc"), _toolkit_note(cfg)))
    archs = nvcc.get("arch_list") or []
    if not archs:
        return check(name, FAIL, "%s --list-gpu-arch gave nothing: %s" % (nvcc["nvcc"], nvcc.get("arch_error")),
                     "install a CUDA >= 12.8 toolkit (CUDA %s requested)" % cfg["cuda_version"])
    if any(a == arch for a in archs):
        return check(name, PASS, "%s (CUDA %s) lists %s: can build sm_%sa" % (
            nvcc["nvcc"], nvcc.get("version"), arch, target.replace(".", "")))
    return check(name, FAIL, "%s (CUDA %s) cannot target %s (sm_%sa): it lists %s; builds would stop with "
                 "\"nvcc fatal : Unsupported gpu architecture '%sa'\"" % (
                     nvcc["nvcc"], nvcc.get("version"), arch, target.replace(".", ""), " ".join(archs), arch),
                 "install CUDA %s (SM120 needs CUDA >= 12.8) and set %s to it" % (cfg["cuda_version"], _home_setting(cfg)))


def check_nvcc_shadowing(tool, cfg):
    name = "nvcc_path_shadowing"
    nvcc = tool.get("nvcc") or {}
    on_path = nvcc.get("path_nvccs") or []
    if not on_path:
        return check(name, PASS, "no nvcc on PATH; the build calls %s by absolute path" % nvcc.get("nvcc"))
    first = on_path[0]
    intended_real = nvcc.get("nvcc") and os.path.realpath(nvcc["nvcc"])
    others = ", ".join("%s (%s)" % (p["path"], p.get("version") or "version unknown") for p in on_path)
    if first.get("realpath") == intended_real:
        return check(name, PASS, "first nvcc on PATH is %s itself; nvcc on PATH: %s" % (nvcc["nvcc"], others))
    if nvcc.get("present") and first.get("version") and first["version"] == nvcc.get("version"):
        return check(name, PASS, "first nvcc on PATH %s is another file with the same version %s as %s (a wrapper "
                     "or copy); nvcc on PATH: %s" % (first["path"], first["version"], nvcc["nvcc"], others))
    return check(name, WARN, "nvcc on PATH (%s, %s) shadows %s (%s); tools that run plain 'nvcc' (JIT, "
                 "build backends) would use the wrong compiler; nvcc on PATH: %s" % (
                     first["path"], first.get("version") or "version unknown", nvcc.get("nvcc"),
                     nvcc.get("version") or "not installed yet", others),
                 "the collection calls %s by absolute path and exports CUDA_HOME/PATH for builds and the "
                 "service; remove or reorder the other toolkit for interactive use" % nvcc.get("nvcc"))


def check_cuda_headers(tool, cfg):
    name = "cuda_headers_match"
    nvcc = tool.get("nvcc") or {}
    if not nvcc.get("present"):
        return check(name, SKIP, "no toolkit at %s yet; %s" % (nvcc.get("cuda_home"), _toolkit_note(cfg)))
    if not nvcc.get("cudart_version"):
        return check(name, FAIL, "no CUDART_VERSION in cuda_runtime_api.h under %s" % nvcc.get("cuda_home"),
                     "install the CUDA runtime headers (cuda-cudart-dev / nvidia-cuda-runtime) of CUDA %s"
                     % cfg["cuda_version"])
    if not nvcc.get("version"):
        return check(name, SKIP, "nvcc version unknown; see nvcc_version")
    have = major_minor(nvcc["version"])
    hdr = major_minor(nvcc["cudart_version"])
    if have == hdr:
        return check(name, PASS, "nvcc %s and %s (CUDART %s) agree" % (
            nvcc["version"], nvcc["cudart_header"], nvcc["cudart_version"]))
    return check(name, FAIL, "nvcc is CUDA %d.%d but %s says CUDART %d.%d: JIT and builds fail with \"CUDA "
                 "compiler and CUDA toolkit headers are incompatible\"" % (have + (nvcc["cudart_header"],) + hdr),
                 "pin the toolkit parts to one minor (pip: nvidia-cuda-nvcc, -crt, -nvvm and nvidia-cuda-runtime "
                 "==%d.%d.*)" % hdr)


def check_cccl(tool, cfg):
    name = "cuda_cccl_layout"
    nvcc = tool.get("nvcc") or {}
    cccl = nvcc.get("cccl")
    if not nvcc.get("present") or cccl is None:
        return check(name, SKIP, "no toolkit at %s yet" % nvcc.get("cuda_home"))
    if cccl.get("cuda13_layout"):
        return check(name, PASS, "CUDA 13 layout: cuda/std/utility only under %s; the kernel build adds it to "
                     "CPLUS_INCLUDE_PATH/C_INCLUDE_PATH for host compilers" % cccl["cccl_dir"])
    if cccl.get("legacy_dir"):
        return check(name, PASS, "CCCL headers in %s (pre-13 layout)" % cccl["legacy_dir"])
    version = nvcc.get("version")
    if version and major_minor(version)[0] >= 13:
        return check(name, FAIL, "CUDA %s at %s has no cuda/std/utility (neither include/cccl nor include)" % (
            version, nvcc.get("cuda_home")), "install the CCCL headers (cuda-cccl / nvidia-cuda-cccl) of CUDA %s"
            % cfg["cuda_version"])
    return check(name, WARN, "cuda/std/utility not found under %s" % nvcc.get("cuda_home"),
                 "check the toolkit installation")


# --- torch ---------------------------------------------------------------------------------------------------------

def check_torch_version(tool, cfg):
    name = "torch_version"
    torch = tool.get("torch") or {}
    if not torch.get("present"):
        return check(name, SKIP, "torch not installed yet (%s); torch_nightly installs it" % torch.get("error"))
    try:
        info = parse_torch_version(torch["version"])
    except ValueError as exc:
        return check(name, FAIL, "torch version %r is not PEP 440: %s" % (torch["version"], exc),
                     "install a torch build with a PEP 440 version (nightly/stable cu130)")
    kind = "nightly (dev %s)" % info["dev"] if info["is_nightly"] else (
        "source build (%s)" % info["local"] if info["source_build"] else "release")
    cuda = "CUDA %s" % info["cuda"] if info["cuda"] else "no CUDA local tag (+%s)" % info["local"] if info["local"] \
        else "no local tag"
    return check(name, PASS, "torch %s parses: %s %s for %s" % (torch["version"], info["major_minor"], kind, cuda))


def check_torch_cuda(tool, cfg):
    name = "torch_cuda_major"
    torch = tool.get("torch") or {}
    if not torch.get("present"):
        return check(name, SKIP, "torch not installed yet")
    nvcc = tool.get("nvcc") or {}
    toolkit = nvcc.get("version") or cfg["cuda_version"]
    if not torch.get("cuda"):
        return check(name, FAIL if cfg["require_gpu"] else WARN,
                     "torch %s is a CPU build (torch.version.cuda is None)" % torch.get("version"),
                     "install torch from the cu%s index" % cfg["cuda_version"].replace(".", ""))
    tm, km = major_minor(torch["cuda"])[0], major_minor(toolkit)[0]
    if tm == km:
        return check(name, PASS, "torch CUDA %s and toolkit %s share major %d" % (torch["cuda"], toolkit, km))
    return check(name, FAIL, "torch %s is built for CUDA %s but the toolkit is %s: kernels built here would not "
                 "load" % (torch.get("version"), torch["cuda"], toolkit),
                 "install torch from the cu%s index" % cfg["cuda_version"].replace(".", ""))


def check_torch_arch(tool, cfg):
    name = "torch_arch_list"
    torch = tool.get("torch") or {}
    if not torch.get("present"):
        return check(name, SKIP, "torch not installed yet")
    archs = torch.get("arch_list") or []
    target = cfg["target_compute_capability"]
    major, minor = _cc_tuple(target)
    sm = "sm_%d%d" % (major, minor)
    if not archs:
        return check(name, FAIL if cfg["require_gpu"] else WARN,
                     "torch %s reports no CUDA architectures (CPU build or no CUDA runtime)" % torch.get("version"),
                     "install a cu130 torch build that includes %s" % sm)
    cover = arch_coverage(archs, target)
    listed = " ".join(archs)
    if cover["covered"] and cover["kind"] in ("exact", "sass"):
        return check(name, PASS, "torch %s: %s (%s)" % (torch.get("version"), cover["message"], listed))
    if cover["covered"]:
        return check(name, WARN, "torch %s: %s (%s)" % (torch.get("version"), cover["message"], listed),
                     "prefer a torch build with %s SASS (cu130 nightly/stable)" % sm)
    return check(name, FAIL, "torch %s: %s" % (torch.get("version"), cover["message"]),
                 "install a torch nightly/stable cu130 build (its arch list includes %s)" % sm)


# --- host ----------------------------------------------------------------------------------------------------------

def check_disk(host, cfg):
    name = "disk_space"
    disk = host.get("disk") or {}
    if not disk:
        return check(name, SKIP, "no paths to measure")
    need = float(cfg["min_disk_gb"])
    by_dev = {}
    for label, info in disk.items():
        by_dev.setdefault(info.get("device", info["checked_path"]), []).append((label, info))
    short, parts = [], []
    for entries in by_dev.values():
        info = entries[0][1]
        free_gb = info["free_bytes"] / 1e9
        labels = ", ".join("%s %s" % (lbl, inf["path"]) for lbl, inf in entries)
        parts.append("%.1f GB free at %s (%s)" % (free_gb, info["checked_path"], labels))
        if free_gb < need:
            short.append("%s: %.1f GB free < %.0f GB" % (labels, free_gb, need))
    if short:
        return check(name, FAIL, "; ".join(short) + " (venv + torch nightly + sgl-kernel build tree)",
                     "free space on that filesystem or point sglang_stack_root at a larger one; "
                     "preflight_min_disk_gb sets the bar")
    return check(name, PASS, "; ".join(parts) + " (>= %.0f GB each)" % need)


def build_sizing(host, cfg):
    mem = (host.get("memory") or {}).get("mem_available_bytes")
    if mem is None:
        return None
    return build_parallelism(host.get("cpus") or 1, mem, gib_per_job=cfg["build_gib_per_job"],
                             headroom_gib=cfg["build_headroom_gib"], gencodes=cfg["build_gencodes"],
                             max_jobs=cfg["build_max_jobs"])


def check_build_memory(host, cfg, sizing):
    name = "build_memory"
    mem = (host.get("memory") or {}).get("mem_available_bytes")
    if sizing is None:
        return check(name, WARN, "MemAvailable unknown (/proc/meminfo unreadable); the build runs 1 job",
                     "check /proc/meminfo")
    avail_gib = mem / float(GIB)
    need_gib = float(cfg["build_headroom_gib"]) + float(cfg["build_gib_per_job"])
    detail = ("%d job(s) x %d nvcc thread(s), worst case %.1f GiB, from %d CPU(s) and MemAvailable %.1f GiB "
              "(%.0f GiB per job + %.0f GiB headroom)" % (sizing["jobs"], sizing["compile_threads"], sizing["peak_gib"],
                                                          host.get("cpus") or 1, avail_gib, cfg["build_gib_per_job"],
                                                          cfg["build_headroom_gib"]))
    if avail_gib < need_gib:
        return check(name, FAIL, "MemAvailable %.1f GiB < %.1f GiB needed for even one compile job; %s" % (
            avail_gib, need_gib, detail),
            "free memory (stop the SGLang service during builds) or add RAM; a smaller per-job figure "
            "(preflight_build_gib_per_job) risks OOM kills ('FAILED: [code=137]')")
    return check(name, PASS, detail)


def check_shm(host, cfg):
    name = "shm_size"
    tp = int(cfg["tp_size"])
    shm = host.get("shm") or {}
    size = shm.get("size_bytes")
    need = float(cfg["min_shm_gib"])
    if tp <= 1:
        return check(name, PASS, "TP %d: NCCL shared memory not used (/dev/shm %s GiB)" % (tp, shm.get("size_gib")))
    if size is None:
        return check(name, FAIL, "/dev/shm missing; NCCL needs it for TP %d" % tp, "mount tmpfs on /dev/shm")
    if size / float(GIB) < need:
        return check(name, FAIL, "/dev/shm is %.2f GiB < %.1f GiB for TP %d: NCCL fails with 'posix_fallocate "
                     "failed : No space left on device'" % (size / float(GIB), need, tp),
                     "enlarge /dev/shm (mount -o remount,size=16G /dev/shm; containers: --shm-size or --ipc=host)")
    return check(name, PASS, "/dev/shm %.1f GiB >= %.1f GiB for TP %d" % (size / float(GIB), need, tp))


def p2p_risks(gpu, members):
    """Reasons peer-to-peer over PCIe may hang or fail for the GPUs in ``members`` (list of GPU dicts)."""
    risks, notes = [], []
    pcie = gpu.get("pcie") or {}
    buses = [g.get("pci_bus_id") for g in members if g.get("pci_bus_id")]
    acs = sorted(set(b for bus in buses for b in (pcie.get(bus, {}).get("acs_redirect_bridges") or [])))
    if acs:
        risks.append("acs_enabled (request/completion redirect on %s)" % ", ".join(acs))
    unknown_acs = [bus for bus in buses if pcie.get(bus, {}).get("acs_redirect_bridges") is None]
    if unknown_acs:
        reasons = sorted(set(pcie.get(b, {}).get("acs_reason") or "no PCIe data" for b in unknown_acs))
        notes.append("ACS state unknown: %s" % "; ".join(reasons))
    types = sorted(set(pcie.get(bus, {}).get("iommu_group_type") for bus in buses) - {None})
    translated = [t for t in types if t.startswith("DMA")]
    iommu = gpu.get("iommu") or {}
    if translated:
        risks.append("iommu_translated (IOMMU group type %s)" % "/".join(translated))
    elif not types and iommu.get("forced_on") and iommu.get("passthrough") is not True:
        risks.append("iommu_translated (kernel command line %s)" % " ".join(iommu.get("tokens") or []))
    p2p = gpu.get("p2p_read") or {}
    names = set("GPU%s" % g.get("index") for g in members)
    bad = [p for p in p2p.get("not_ok_pairs") or [] if p[0] in names and p[1] in names]
    if bad:
        risks.append("p2p_read_not_ok (%s)" % ", ".join(
            "%s-%s %s = %s" % (a, b, v, P2P_LEGEND.get(v, "unknown")) for a, b, v in bad))
    return risks, notes


def _tp_members_or_verdict(name, gpu, cfg, single):
    """The tensor-parallel GPUs of a multi-GPU check, or the check's verdict when there is nothing to check.

    :param single: what the PASS for TP 1 says (``"TP %d: ..."``, formatted with the TP size).
    :returns: ``(members, None)`` or ``(None, check)`` (no GPUs: skip; TP 1: pass; fewer than 2 GPUs in the set: skip).
    """
    tp = int(cfg["tp_size"])
    members, _excluded = tp_set(gpu, cfg)
    if not gpu.get("gpu_count"):
        return None, check(name, SKIP, "no GPUs")
    if tp <= 1:
        return None, check(name, PASS, single % tp)
    if len(members) < 2:
        return None, check(name, SKIP, "TP %d but only %d GPU(s) in the tensor-parallel set: see tensor_parallel_gpus"
                           % (tp, len(members)))
    return members, None


def check_p2p(gpu, cfg, env):
    name = "p2p_topology"
    members, verdict = _tp_members_or_verdict(name, gpu, cfg, "TP %d: no GPU-to-GPU traffic")
    if verdict:
        return verdict
    topo = gpu.get("topology") or {}
    names = ["GPU%s" % g.get("index") for g in members]
    links = topo.get("links") or {}
    pair_links = [(a, b, (links.get(a) or {}).get(b)) for i, a in enumerate(names) for b in names[i + 1:]]
    if pair_links and all(link and link.startswith("NV") for _a, _b, link in pair_links):
        return check(name, PASS, "NVLink between all tensor-parallel GPUs (%s)" % ", ".join(
            "%s-%s %s" % p for p in pair_links))
    risks, notes = p2p_risks(gpu, members)
    link_text = ", ".join("%s-%s %s" % (a, b, link or "?") for a, b, link in pair_links) or "topology unknown"
    if not risks:
        kinds = sorted(set(link for _a, _b, link in pair_links if link in TOPO_LEGEND))
        msg = "PCIe peer-to-peer without known risk (%s; %s)" % (
            link_text, "; ".join("%s = %s" % (k, TOPO_LEGEND[k]) for k in kinds) or "link type unknown")
        if notes:
            return check(name, WARN, msg + "; " + "; ".join(notes),
                         "run the preflight as root with pciutils installed to read ACSCtl")
        return check(name, PASS, msg)
    if cfg["p2p_opt_out"]:
        return check(name, WARN, "p2p_risk: %s on %s; NCCL_P2P_DISABLE not set because preflight_p2p_opt_out is "
                     "true: TP all-reduce may hang after 'Init COMPLETE'" % (", ".join(risks), link_text),
                     "disable ACS redirect in BIOS / boot with iommu=pt (amd_iommu=on iommu=pt), or drop the opt-out")
    env["NCCL_P2P_DISABLE"] = "1"
    return check(name, WARN, "p2p_risk: %s on %s; the service gets NCCL_P2P_DISABLE=1 (NCCL goes through host "
                 "shared memory instead)" % (", ".join(risks), link_text),
                 "for full P2P bandwidth disable ACS in BIOS and boot with iommu=pt, re-run the preflight, or set "
                 "preflight_p2p_opt_out: true after an all-reduce smoke test passes")


def check_custom_all_reduce(gpu, cfg, args):
    name = "custom_all_reduce"
    members, verdict = _tp_members_or_verdict(name, gpu, cfg, "TP %d: custom all-reduce not used")
    if verdict:
        return verdict
    pattern = re.compile(cfg["geforce_pattern"])
    geforce = [g for g in members if pattern.search(g.get("name") or "")]
    p2p = gpu.get("p2p_read") or {}
    names = set("GPU%s" % g.get("index") for g in members)
    bad = [p for p in p2p.get("not_ok_pairs") or [] if p[0] in names and p[1] in names]
    reasons = []
    if geforce:
        reasons.append("GeForce GPU(s) %s have no peer access" % ", ".join(_gpu_label(g) for g in geforce))
    if bad:
        reasons.append("nvidia-smi topo -p2p r is not OK for %s" % ", ".join("%s-%s" % (a, b) for a, b, _status in bad))
    if reasons:
        if "--disable-custom-all-reduce" not in args:
            args.append("--disable-custom-all-reduce")
        return check(name, WARN, "%s; the service gets --disable-custom-all-reduce (custom all-reduce assumes P2P: "
                     "'peer access is not supported between these two devices')" % "; ".join(reasons))
    return check(name, PASS, "peer access reported for the tensor-parallel GPUs")


def check_proxy(host, cfg, env):
    name = "proxy"
    proxy = host.get("proxy") or {}
    proxies = proxy.get("proxies") or {}
    if not proxies:
        return check(name, PASS, "no proxy variables set")
    entries = list(proxy.get("no_proxy") or [])
    for extra in list(LOOPBACK_NO_PROXY) + list(cfg.get("extra_no_proxy") or []):
        if extra not in entries:
            entries.append(extra)
    value = ",".join(entries)
    env["NO_PROXY"] = value
    env["no_proxy"] = value
    malformed = [v for v, val in sorted(proxies.items()) if not re.match(r"^[A-Za-z][A-Za-z0-9+.-]*://", val)]
    where = ", ".join("%s (%s)" % (v, proxy.get("sources", {}).get(v, "env")) for v in sorted(proxies))
    msg = "proxy variables %s would intercept SGLang's warmup request to 0.0.0.0; the service gets " \
          "NO_PROXY/no_proxy=%s" % (where, value)
    if malformed:
        return check(name, WARN, msg + "; %s lack a scheme (http://), which httpx rejects" % ", ".join(malformed),
                     "write proxy URLs with a scheme, e.g. http://proxy:3128")
    return check(name, PASS, msg)


def check_distribution(cfg):
    name = "distribution"
    dist = cfg.get("distribution") or {}
    method = cfg["cuda_install_method"]
    arch = dist.get("architecture") or "unknown"
    if (dist.get("system") or "Linux") != "Linux":
        return check(name, FAIL, "%s is not Linux" % dist.get("system"), "use a Linux host")
    if method == "apt":
        # the same lookup as cuda_toolchain's apt method (filter blackwell.sglang.cuda_apt_repo): a PASS here is a
        # repository the role finds
        repo = apt_repository(dist.get("distribution"), dist.get("version"), arch, cfg.get("apt_distro_slugs"),
                              cfg.get("apt_repo_arch"), cfg.get("cuda_repo_slug") or "",
                              supported=cfg["supported_distributions"].get("apt") or {})
        if repo["problem"]:
            return check(name, FAIL, "the apt method: %s" % repo["problem"],
                         "set sglang_stack_cuda_apt_distro_slug to the matching base (e.g. "
                         "ubuntu2204 for Pop!_OS 22.04) or use sglang_stack_cuda_install_method: pip")
        return check(name, PASS, "%s %s (%s): CUDA apt repository %s" % (
            dist.get("distribution"), dist.get("version"), arch, repo["path"]))
    glibc = dist.get("glibc")
    if not glibc:
        return check(name, FAIL, "method %s needs a glibc Linux (manylinux wheels); no glibc found" % method,
                     "use a glibc distribution")
    if _ver_tuple(glibc) < _ver_tuple(cfg["min_glibc"]):
        msg = "glibc %s < %s needed by the manylinux_2_28 CUDA/torch wheels" % (glibc, cfg["min_glibc"])
        return check(name, FAIL, msg, "use a newer distribution")
    return check(name, PASS, "%s %s (%s), glibc %s: fine for method %s" % (
        dist.get("distribution"), dist.get("version"), arch, glibc, method))


def check_model_path(host, cfg):
    name = "model_path"
    path = cfg.get("model_path") or ""
    if not path:
        return check(name, SKIP, "no model path set (sglang_stack_model_path)")
    if not path.startswith("/"):
        return check(name, PASS, "%s is a Hugging Face id; SGLang downloads it into HF_HOME on first start" % path)
    info = (host.get("paths") or {}).get("model") or {}
    if info.get("exists"):
        return check(name, PASS, "%s exists%s" % (path, "" if info.get("is_dir") else " (not a directory)"))
    status = FAIL if cfg["model_path_required"] else WARN
    return check(name, status, "model path %s does not exist on this host" % path,
                 "copy the checkpoint there, fix sglang_stack_model_path, or set preflight_model_path_required: false if a later step provides it")


def check_kernel_headers(host, cfg):
    name = "kernel_headers"
    kernel = host.get("kernel") or {}
    if kernel.get("headers_present"):
        return check(name, PASS, "headers for running kernel %s present" % kernel.get("release"))
    return check(name, WARN, "no /lib/modules/%s/build: a DKMS driver (re)build for the running kernel would fail"
                 % kernel.get("release"),
                 "install linux-headers-%s before any driver change" % kernel.get("release"))


# --- field reports part 2 (N-kinds; ids resolve in docs/field-reports.md) --------------------------------------------

def check_mig(gpu, cfg, env):
    """GPUs in MIG mode are named and never put into the tensor-parallel set.

    When a MIG GPU is left out of an automatic selection, the service (and the NCCL smoke test) get
    ``CUDA_VISIBLE_DEVICES`` listing the chosen GPUs by UUID (CUDA accepts ``GPU-<uuid>``), so SGLang's devices
    0..TP-1 are those GPUs and not the MIG one."""
    name = "mig_mode"
    if not gpu.get("gpu_count"):
        return check(name, SKIP, "no GPUs")
    mig = [g for g in gpu.get("gpus") or [] if mig_enabled(g)]
    unknown = [g for g in gpu.get("gpus") or [] if g.get("mig_mode") is None and g.get("mig_mode_pending") is None]
    if not mig:
        note = " (MIG state not reported for %d GPU(s): no MIG support, or nvidia-smi -q not read)" % len(unknown) \
            if unknown else ""
        return check(name, PASS, "no GPU in MIG mode%s" % note)
    labels = ", ".join("%s MIG %s%s" % (
        _gpu_label(g), g.get("mig_mode") or "?",
        " (pending %s)" % g["mig_mode_pending"] if g.get("mig_mode_pending") not in (None, g.get("mig_mode")) else "")
        for g in mig)
    remedy = ("disable MIG on the serving GPUs (nvidia-smi -i <index> -mig 0, then reset the GPU or reboot) or "
              "choose other GPUs with preflight_gpu_indices")
    wanted = [int(i) for i in cfg.get("gpu_indices") or []]
    chosen = [g for g in mig if g.get("index") in wanted]
    if chosen:
        return check(name, FAIL, "preflight_gpu_indices puts GPU(s) in MIG mode into the tensor-parallel set: %s; a "
                     "MIG GPU is split into instances and cannot be one TP rank" % ", ".join(_gpu_label(g) for g in chosen),
                     remedy)
    members, _wanted = tp_set(gpu, cfg)
    uuids = [g.get("uuid") for g in members]
    if members and all(uuids):
        env["CUDA_VISIBLE_DEVICES"] = ",".join(uuids)
        labels += "; the service gets CUDA_VISIBLE_DEVICES=%s (GPUs %s)" % (
            env["CUDA_VISIBLE_DEVICES"], ", ".join(str(g.get("index")) for g in members))
    else:
        env["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"
        env["CUDA_VISIBLE_DEVICES"] = ",".join(str(g.get("index")) for g in members)
        labels += "; the service gets CUDA_DEVICE_ORDER=PCI_BUS_ID CUDA_VISIBLE_DEVICES=%s" % env["CUDA_VISIBLE_DEVICES"]
    return check(name, WARN, "GPU(s) in MIG mode left out of the tensor-parallel set: %s" % labels, remedy)


def _driver_matches(version, key):
    """``595.71.05`` matches the key ``595.71.05`` exactly, or a branch key ``595`` / ``595.71``."""
    parts, want = str(version).split("."), str(key).split(".")
    return parts[:len(want)] == want


def check_driver_known_issues(gpu, cfg):
    """N03: driver versions reported to wedge Blackwell GPUs (GSP heartbeat / Xid 119/154/8/79)."""
    name = "driver_known_issues"
    driver = gpu.get("driver_version")
    if not driver:
        return check(name, SKIP, "driver version unknown")
    gpus = gpu.get("gpus") or []
    record = "; ".join("%s VBIOS %s GSP %s" % (
        _gpu_label(g), g.get("vbios_version") or "?", g.get("gsp_firmware_version") or "?") for g in gpus)
    hits = [(key, note) for key, note in sorted((cfg.get("known_bad_drivers") or {}).items())
            if _driver_matches(driver, key)]
    if not hits:
        return check(name, PASS, "driver %s is not on the known-issue list (%s)" % (driver, record or "no GPUs"))
    status = FAIL if cfg.get("known_bad_driver_status") == "fail" else WARN
    return check(name, status, "driver %s: %s (%s)" % (driver, "; ".join("%s: %s" % h for h in hits), record),
                 "suggestions only: another driver branch, a lower power cap (nvidia-smi -pl); a wedged GPU needs a "
                 "reboot (preflight_known_bad_drivers lists the versions)")


def is_blackwell_pci(device_id):
    """``10de:2b85`` -> True when the device id is in :data:`BLACKWELL_PCI_RANGES`."""
    match = re.match(r"^(?:0x)?10de:(?:0x)?([0-9a-f]{4})$", str(device_id or "").strip().lower())
    if not match:
        return False
    dev = int(match.group(1), 16)
    return any(lo <= dev <= hi for lo, hi in BLACKWELL_PCI_RANGES)


def check_kernel_module(gpu, cfg):
    """N20: Blackwell GPUs need the open kernel module."""
    name = "kernel_module_flavor"
    module = gpu.get("kernel_module") or {}
    blackwell = [d["bus_id"] + " (" + d["device_id"] + ")" for d in gpu.get("pci_devices") or []
                 if is_blackwell_pci(d.get("device_id"))]
    blackwell += [_gpu_label(g) for g in gpu.get("gpus") or []
                  if (_cc_tuple(g.get("compute_cap")) or (0, 0))[0] >= 10 and not any(
                      (g.get("pci_bus_id") or "-") in b for b in blackwell)]
    if module.get("open") is None:
        return check(name, SKIP, "NVIDIA kernel module not loaded or /proc/driver/nvidia/version unreadable")
    flavor = "open" if module["open"] else "proprietary"
    if not module["open"] and blackwell:
        return check(name, FAIL, "proprietary_module_on_blackwell: the %s NVIDIA kernel module %s is loaded but %s "
                     "need(s) the open kernel modules" % (flavor, module.get("version") or "", ", ".join(blackwell)),
                     DRIVER_REMEDIES["proprietary_module_on_blackwell"])
    return check(name, PASS, "%s kernel module %s" % (flavor, module.get("version") or ""))


def _ptxas_release(text):
    match = re.search(r"release (\d+)\.(\d+)", text or "")
    return (int(match.group(1)), int(match.group(2))) if match else None


def check_triton_ptxas(tool, cfg, env):
    """N01: Triton's bundled ptxas may not know sm_12x; the service gets TRITON_PTXAS_PATH=<CUDA_HOME>/bin/ptxas."""
    name = "triton_ptxas"
    target = _cc_tuple(cfg["target_compute_capability"])
    nvcc = tool.get("nvcc") or {}
    triton = (tool.get("torch") or {}).get("triton") or {}
    need = PTXAS_MIN_FOR_CC.get(target)
    bundled = _ptxas_release(triton.get("bundled_ptxas_version"))
    detail = "bundled ptxas %s" % ("%d.%d (%s)" % (bundled + (triton.get("bundled_ptxas"),)) if bundled
                                   else "not probed (torch/triton not installed yet)")
    too_old = bool(bundled and need and bundled < need)
    toolkit_ptxas = os.path.join(nvcc["cuda_home"], "bin", "ptxas") if nvcc.get("cuda_home") else None
    if toolkit_ptxas and not os.path.isfile(toolkit_ptxas):
        toolkit_ptxas = None
    if target and target[0] == 12 and cfg.get("triton_ptxas_env") and toolkit_ptxas:
        env["TRITON_PTXAS_PATH"] = toolkit_ptxas
        status = WARN if too_old else PASS
        return check(name, status, "%s; the service gets TRITON_PTXAS_PATH=%s (CUDA %s) for compute capability "
                     "%d.%d%s" % (detail, toolkit_ptxas, nvcc.get("version") or "toolkit",
                                  target[0], target[1], "; the bundled one is older than CUDA %d.%d and would fail "
                                  "with \"Value 'sm_%d%da' is not defined for option 'gpu-name'\"" % (
                                      need + target) if too_old else ""),
                     "none needed: the service uses the toolkit's ptxas" if too_old else "")
    if too_old:
        return check(name, FAIL, "%s cannot target sm_%d%da (needs CUDA >= %d.%d) and TRITON_PTXAS_PATH is not set"
                     % ((detail,) + target + need),
                     "set preflight_triton_ptxas_env: true (TRITON_PTXAS_PATH=<CUDA_HOME>/bin/ptxas) or install a "
                     "pytorch-triton that bundles a newer ptxas")
    return check(name, PASS if bundled or not target or target[0] != 12 else SKIP, detail)


def service_env_warnings(env, compute_capability):
    """Validator for a rendered service environment: WARN lines (N01)."""
    warnings = []
    cc = _cc_tuple(compute_capability)
    if cc and cc[0] == 12 and not (env or {}).get("TRITON_PTXAS_PATH"):
        warnings.append("TRITON_PTXAS_PATH is not set for compute capability %d.%d: Triton would run its bundled "
                        "ptxas, which may not know sm_%d%da (N01); set it to <CUDA_HOME>/bin/ptxas" % (cc + cc))
    return warnings


def check_triton_install(tool, cfg):
    """N16: one owner of site-packages/triton, at the version torch requires."""
    name = "triton_distribution"
    torch = tool.get("torch") or {}
    triton = torch.get("triton") or {}
    dists = triton.get("distributions")
    if not torch.get("present") or dists is None:
        return check(name, SKIP, "torch/triton not installed yet")
    owners = sorted(d for d in dists if d in ("triton", "pytorch-triton", "triton-nightly"))
    listing = ", ".join("%s %s" % (d, dists[d]) for d in owners) or "none"
    if len(owners) > 1:
        return check(name, FAIL, "triton_dual_install: %s all install site-packages/triton; the last one installed "
                     "wins and torch may load the wrong one (TritonMissing, 'triton_key')" % listing,
                     "uninstall all of them and reinstall only the one torch's metadata requires (for a nightly: "
                     "pytorch-triton from the torch index); triton is in the protected set of the SGLang install")
    problems = []
    for req in triton.get("torch_requires") or []:
        match = re.match(r"^\s*([A-Za-z0-9._-]+)\s*==\s*([^\s;]+)", req)
        if not match:
            continue
        want_name, want_version = match.group(1).lower(), match.group(2)
        if want_name not in dists:
            problems.append("torch requires %s but %s is installed" % (req.split(";")[0].strip(), listing))
        elif dists[want_name] != want_version:
            problems.append("torch requires %s==%s but %s %s is installed" % (want_name, want_version, want_name,
                                                                              dists[want_name]))
    if problems:
        return check(name, FAIL, "triton_mismatch: %s" % "; ".join(problems),
                     "reinstall the triton distribution torch requires at its exact version")
    return check(name, PASS if owners else WARN, "site-packages/triton owned by %s" % listing,
                 "" if owners else "install the triton torch requires (torch.compile / Triton kernels need it)")


def _is_gb10(gpu_entry):
    # the hardware profile's unified-memory rule: cc 12.1, a GB10 name, or memory reported as [N/A]
    return is_unified_memory(gpu_entry)


def check_gb10_memory(gpu, host, cfg, args):
    """N18: on GB10 unified memory size --mem-fraction-static from MemAvailable, not from MemTotal or [N/A]."""
    name = "gb10_memory_budget"
    members, _wanted = tp_set(gpu, cfg)
    if not any(_is_gb10(g) for g in members):
        return check(name, PASS, "no GB10 (unified memory) in the serving set")
    mem = host.get("memory") or {}
    total, avail = mem.get("mem_total_bytes"), mem.get("mem_available_bytes")
    if not total or avail is None:
        return check(name, FAIL, "GB10 unified memory: /proc/meminfo MemTotal/MemAvailable unreadable; the GPU "
                     "reports memory as [N/A], so the fraction cannot be sized", "check /proc/meminfo")
    suggested, budget = uma_mem_fraction(total, avail, cfg["gb10_headroom_gib"])
    fraction = cfg.get("service_mem_fraction_static")
    detail = ("MemTotal %.1f GiB, MemAvailable %.1f GiB, headroom %.0f GiB (OS, page cache, JIT peaks share the "
              "pool): at most %.2f" % (total / float(GIB), avail / float(GIB), cfg["gb10_headroom_gib"], suggested))
    if suggested <= 0:
        return check(name, FAIL, "gb10_fraction_exceeds_available: no memory left for the model; %s" % detail,
                     "stop other workloads or drop the page cache (sync; echo 3 > /proc/sys/vm/drop_caches)")
    if fraction in (None, ""):
        if "--mem-fraction-static" not in args:
            args.extend(["--mem-fraction-static", "%.2f" % suggested])
        return check(name, WARN, "GB10 unified memory: the service gets --mem-fraction-static %.2f; %s"
                     % (suggested, detail))
    if float(fraction) * total > budget:
        return check(name, FAIL, "gb10_fraction_exceeds_available: --mem-fraction-static %s x MemTotal = %.1f GiB > "
                     "MemAvailable - headroom = %.1f GiB; the whole host can wedge during start-up profiling; %s"
                     % (fraction, float(fraction) * total / GIB, budget / GIB, detail),
                     "set sglang_service_mem_fraction_static <= %.2f (or leave it null on GB10)" % suggested)
    return check(name, PASS, "--mem-fraction-static %s fits: %s" % (fraction, detail))


def check_nccl_version(tool, cfg):
    """N19: NCCL releases with collective crashes >= 512 KiB on PCIe Blackwell (nccl#2418: 2.26.2 bad, 2.31.2 ok)."""
    name = "nccl_version"
    version = (tool.get("torch") or {}).get("nccl")
    floor = str(cfg.get("nccl_min_version") or "")
    if not version:
        return check(name, SKIP, "NCCL version unknown (torch not installed yet)")
    if not floor:
        return check(name, PASS, "NCCL %s (no floor set)" % version)
    have, need = _ver_tuple(version), _ver_tuple(floor)
    if have is None or need is None or have >= need:
        return check(name, PASS, "NCCL %s >= %s" % (version, floor))
    status = FAIL if int(cfg["tp_size"]) > 1 else WARN
    return check(name, status, "NCCL %s < %s: collectives >= 512 KiB crashed with an illegal memory access on "
                 "PCIe RTX PRO 6000 (NVIDIA/nccl#2418)%s" % (
                     version, floor, "" if status == FAIL else "; TP 1 does not use NCCL collectives"),
                 "upgrade torch (it bundles NCCL) or install a newer nvidia-nccl-cu13; preflight_nccl_min_version "
                 "sets the floor")


def check_nccl_wheels(tool, cfg):
    """C02: one NCCL wheel, and the NCCL torch loads is that wheel's (``torch.cuda.nccl.version()`` major.minor).

    ``nvidia-nccl-cu12`` and ``nvidia-nccl-cu13`` both install ``nvidia/nccl/lib/libnccl.so.2``: the last one
    installed owns the file, so a cu12 dependency (or a cu128 torch the resolver brought in) silently replaces the
    cu13 library, an NCCL upgrade changes nothing, and torch fails with ``undefined symbol: nccl...``.
    """
    name = "nccl_wheels"
    torch = tool.get("torch") or {}
    wheels = torch.get("nccl_wheels")
    if wheels is None:
        return check(name, SKIP, "NCCL wheels unknown (no venv probed yet)")
    listing = ", ".join("%s %s" % (d, wheels[d]) for d in sorted(wheels)) or "none"
    if len(wheels) > 1:
        return check(name, FAIL, "duplicate_nccl_wheels: %s all install nvidia/nccl/lib/libnccl.so.2; the last one "
                     "installed owns the file, so torch may load another NCCL than the one pinned (undefined symbol: "
                     "nccl..., or an upgrade that changes nothing)" % listing,
                     "uninstall every nvidia-nccl-cu1* wheel and reinstall only nvidia-nccl-cu13 at the version torch "
                     "requires; find what pulled the other one in (pip show -r / pip install --dry-run) and pin it out")
    runtime = torch.get("nccl")
    if not wheels:
        return check(name, PASS if runtime else SKIP, "no nvidia-nccl-cu1* wheel; torch's NCCL: %s" % (
            runtime or "unknown"))
    (dist, version), = wheels.items()
    have, want = [tuple(int(x) for x in re.findall(r"\d+", str(v or ""))[:2]) for v in (runtime, version)]
    if len(have) == 2 and len(want) == 2 and have != want:
        return check(name, FAIL, "nccl_runtime_mismatch: torch.cuda.nccl.version() is %s but %s %s is installed: "
                     "another libnccl.so.2 is loaded (a system one on the loader path, or a wheel that overwrote the "
                     "file)" % (runtime, dist, version),
                     "reinstall %s (pip install --force-reinstall --no-deps) and remove other libnccl.so.2 from "
                     "LD_LIBRARY_PATH / ld.so.conf for the service" % dist)
    return check(name, PASS, "%s; torch's NCCL: %s" % (listing, runtime or "unknown (torch not importable)"))


def evaluate(gpu, tool, host, config):
    """Run every check.

    :param gpu: ``gpu_facts`` result. :param tool: ``toolchain_facts`` result (``nvcc``, ``cmake``, ``torch``).
    :param host: ``host_facts`` result. :param config: overrides of :data:`DEFAULT_CONFIG`.
    :returns: dict ``{checks, failed (names), service_env, service_args, has_target_gpu, reboot_required,
        build (sizing dict or None), build_jobs}``.
    """
    cfg = dict(DEFAULT_CONFIG)
    cfg.update(dict((k, v) for k, v in (config or {}).items() if v is not None or k in ("build_max_jobs",
                                                                                        "gpu_indices")))
    gpu, tool, host = gpu or {}, tool or {}, host or {}
    env, args = {}, []
    sizing = build_sizing(host, cfg)
    checks = [
        check_distribution(cfg),
        check_nvidia_driver(gpu, cfg),
        check_driver_cuda(gpu, cfg),
        check_reboot_pending(gpu, cfg),
        check_compute_capability(gpu, cfg),
        check_tensor_parallel(gpu, cfg),
        check_cmake(tool, cfg),
        check_nvcc_version(tool, cfg),
        check_nvcc_arch(tool, cfg),
        check_nvcc_shadowing(tool, cfg),
        check_cuda_headers(tool, cfg),
        check_cccl(tool, cfg),
        check_torch_version(tool, cfg),
        check_torch_cuda(tool, cfg),
        check_torch_arch(tool, cfg),
        check_disk(host, cfg),
        check_build_memory(host, cfg, sizing),
        check_shm(host, cfg),
        check_p2p(gpu, cfg, env),
        check_custom_all_reduce(gpu, cfg, args),
        check_proxy(host, cfg, env),
        check_model_path(host, cfg),
        check_kernel_headers(host, cfg),
        check_mig(gpu, cfg, env),
        check_driver_known_issues(gpu, cfg),
        check_kernel_module(gpu, cfg),
        check_triton_ptxas(tool, cfg, env),
        check_triton_install(tool, cfg),
        check_gb10_memory(gpu, host, cfg, args),
        check_nccl_version(tool, cfg),
        check_nccl_wheels(tool, cfg),
    ]
    return {
        "checks": checks,
        "failed": [c["name"] for c in checks if c["status"] == FAIL],
        "service_env": env,
        "service_args": args,
        "has_target_gpu": has_target_gpu(gpu, cfg),
        "reboot_required": bool(gpu.get("reboot_required")),
        "build": sizing,
        "build_jobs": sizing["jobs"] if sizing else 1,
    }


def failure_report(checks):
    """One text block listing every failed check with its remedy (for the role's final ``fail``)."""
    failed = [c for c in checks if c["status"] == FAIL]
    lines = ["%d preflight check(s) failed:" % len(failed)]
    for c in failed:
        lines.append("- %s: %s" % (c["name"], c["message"]))
        if c.get("remedy"):
            lines.append("  remedy: %s" % c["remedy"])
    return "\n".join(lines)


def check_nccl_smoke(rc, stdout, service_env=None):
    """Turn one run of ``roles/preflight/files/nccl_allreduce_smoke.py`` into a check.

    :param rc: its exit status (0 ok, 2 wrong result, 3 timeout = hang, 1 error, anything else: crashed).
    :param stdout: its output; the last line that parses as JSON is the result.
    :param service_env: the environment it ran with (the service's), to word the remedy.
    """
    name = "nccl_allreduce_smoke"
    result = None
    for line in reversed((stdout or "").splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                result = json.loads(line)
                break
            except ValueError:
                continue
    if result is None:
        return check(name, FAIL, "all-reduce smoke test gave no result (rc=%s)" % rc,
                     "run roles/preflight/files/nccl_allreduce_smoke.py by hand with the venv python")
    p2p_off = (service_env or {}).get("NCCL_P2P_DISABLE") == "1"
    mode = "NCCL_P2P_DISABLE=1" if p2p_off else "P2P enabled"
    verdict = result.get("verdict")
    if verdict == "ok":
        bw = [r.get("busbw_gbps") for r in result.get("ranks") or [] if r.get("busbw_gbps") is not None]
        return check(name, PASS, "all_reduce over %d GPU(s) finished in %ss with %s (NCCL %s, bus bandwidth %s GB/s)"
                     % (result.get("gpus"), result.get("elapsed_s"), mode, result.get("nccl"),
                        min(bw) if bw else "unknown"))
    if verdict == "nccl_p2p_hang":
        remedy = ("GPUs may stay at 100%% utilisation: reset or reboot them; " +
                  ("P2P is already disabled, so look at NCCL_DEBUG=INFO output and the PCIe topology" if p2p_off else
                   "set NCCL_P2P_DISABLE=1 (drop preflight_p2p_opt_out), disable ACS in BIOS or boot with iommu=pt"))
        return check(name, FAIL, "nccl_p2p_hang: all_reduce did not finish within %ss with %s (hung ranks %s)" % (
            result.get("timeout_s"), mode, result.get("hung_ranks")), remedy)
    sizes = result.get("sizes") or []
    failed = [r for r in sizes if not r.get("ok")]
    if failed:
        first = min(failed, key=lambda r: r.get("bytes") or 0)
        passed = [r.get("bytes") for r in sizes if r.get("ok")]
        return check(name, FAIL, "nccl_collective_crash: all_reduce of %s bytes failed with %s (NCCL %s, %s; %s "
                     "passed) - a crash, not the P2P hang" % (
                         first.get("bytes"), first.get("error") or "an error", result.get("nccl") or "unknown", mode,
                         "sizes up to %s bytes" % max(passed) if passed else "no size"),
                     "upgrade NCCL / torch (NCCL 2.26.2 crashes at >= 512 KiB on PCIe Blackwell, 2.31.2 works: "
                     "NVIDIA/nccl#2418); raise preflight_nccl_min_version")
    if verdict == "wrong_result":
        return check(name, FAIL, "all_reduce returned wrong values with %s" % mode,
                     "check GPU health (nvidia-smi -q -d ECC) and NCCL version")
    return check(name, FAIL, "all-reduce smoke test error: %s" % result.get("error"),
                 "check torch/NCCL in the venv and the visible GPUs")
