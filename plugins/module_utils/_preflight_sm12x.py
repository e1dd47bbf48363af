# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang contributors
# Apache-2.0 (see LICENSE)
"""The preflight checks of the SM12x hardware profile: facts in, checks and the profile's service settings out.

Inputs are the ``gpu_facts``, ``toolchain_facts`` and ``host_facts`` results (as for ``_preflight.evaluate``) and a
config dict (see :func:`evaluate`). The filter ``blackwell.sglang.preflight_sm12x`` exposes it to the preflight role
(``roles/preflight/tasks/hardware_profile.yml``). Nothing here touches the host.

Checks (names as in ``preflight_checks``):

* ``gpu_family`` -- a GPU outside the SM12x family is refused, naming the family and the GPU;
* ``kernel_target_archs`` -- the kernel's targets cover every capability of the fleet with its own code
  (``sgl_kernel_arch_gap``, S13: ``sm_120a`` does not run on 12.1);
* ``nvcc_target_archs`` -- the toolkit's nvcc lists the virtual arch of every target;
* ``torch_arch_profile`` -- torch's arch list covers every capability of the fleet (B14 for the whole fleet);
* ``nccl_fabric`` -- the multi-node NCCL settings against the host (``_nccl_fabric``, S02/S04);
* ``nccl_smoke_size`` -- only when the smoke test's size was capped on unified memory (S04);
* ``sm12x_service_env`` -- what the profile adds to the service environment (S16, S21);
* ``nccl_conf_unmanaged_keys`` -- NCCL config files (``/etc/nccl.conf``, the service user's ``~/.nccl.conf``,
  ``NCCL_CONF_FILE``) that put keys into effect beside the service environment, unlogged (``_nccl_conf``, S03);
* ``aarch64_dependencies`` -- on an aarch64 host, the route of each dependency (``_aarch64_deps``: wheel, another
  index, build, replacement, omitted) and a warning naming those without an aarch64 wheel (S09, S11).
"""

from __future__ import annotations

from ansible_collections.blackwell.sglang.plugins.module_utils import _aarch64_deps
from ansible_collections.blackwell.sglang.plugins.module_utils import _cuobjdump
from ansible_collections.blackwell.sglang.plugins.module_utils import _nccl_conf
from ansible_collections.blackwell.sglang.plugins.module_utils import _hardware_profile as hp
from ansible_collections.blackwell.sglang.plugins.module_utils._cuda_toolchain import arch_coverage
from ansible_collections.blackwell.sglang.plugins.module_utils._nccl_fabric import check_fabric

DEFAULT_CONFIG = {
    "fallback_capability": "12.0",
    "require_gpu": True,
    "fleet_capabilities": None,
    "target_archs": None,
    "nccl_env": {},
    "service_env": {},
    "nnodes": 1,
    "rdma_devices": None,
    "net_interfaces": None,
    "smoke_size_mb": 64,
    "deepgemm_off": True,
    "architecture": None,
    "glibc": None,
}


def _check(name, status, message, remedy=""):
    return {"name": name, "status": status, "message": message, "remedy": remedy}


def check_kernel_targets(fleet_caps, target_archs):
    """S13: each capability of the fleet needs its own code among the kernel's targets (never sm_120a for 12.1)."""
    name = "kernel_target_archs"
    if not target_archs:
        return _check(name, "fail", "sglang_stack_target_archs is empty", "leave it unset (the profile derives it) "
                      "or name the targets, e.g. [sm_120a, sm_121a]")
    missing = []
    for cap in fleet_caps:
        cc = hp.parse_capability(cap)
        arch = hp.arch_of(cc)
        if _cuobjdump.coverage({"elf": list(target_archs), "ptx": []}, [arch])["missing"]:
            missing.append("%s (compute capability %s)" % (arch, cap))
    if missing:
        return _check(name, "fail", "sgl_kernel_arch_gap: the kernel would be built for %s only, but the fleet has "
                      "compute capability %s: no code for %s ('no kernel image is available for execution on the "
                      "device'; sm_120a code does not run on 12.1)" % (
                          ", ".join(target_archs), ", ".join(fleet_caps), ", ".join(missing)),
                      "leave sglang_stack_target_archs unset (derived from the hardware profile) or add %s"
                      % ", ".join(m.split(" ")[0] for m in missing))
    return _check(name, "pass", "kernel targets %s cover the fleet's compute capability %s" % (
        ", ".join(target_archs), ", ".join(fleet_caps) or "-"))


def check_nvcc_targets(tool, target_archs):
    name = "nvcc_target_archs"
    nvcc = tool.get("nvcc") or {}
    if not nvcc.get("present"):
        return _check(name, "skip", "no nvcc yet; cuda_toolchain installs it")
    listed = set(nvcc.get("arch_list") or [])
    need = ["compute_%s" % a[3:].rstrip("af") for a in target_archs or []]
    missing = [n for n in need if n not in listed]
    if missing:
        listing = " ".join(sorted(listed)) or "nothing"
        message = ("%s (CUDA %s) cannot target %s: builds stop with \"nvcc fatal : Unsupported gpu architecture\" "
                   "(it lists %s)" % (nvcc.get("nvcc"), nvcc.get("version"), ", ".join(missing), listing))
        return _check(name, "fail", message,
                      "install CUDA >= 12.9 (sm_121 needs 12.9; CUDA 13 has both) and set cuda_toolchain_existing_home to "
                      "it (sglang_stack_cuda_install_method: existing)")
    return _check(name, "pass", "%s lists %s" % (nvcc.get("nvcc"), ", ".join(need)))


def check_torch_profile(tool, fleet_caps):
    name = "torch_arch_profile"
    torch = tool.get("torch") or {}
    if not torch.get("present"):
        return _check(name, "skip", "torch not installed yet")
    archs = torch.get("arch_list") or []
    bad, ptx = [], []
    for cap in fleet_caps:
        cover = arch_coverage(archs, cap)
        if not cover["covered"]:
            bad.append(cap)
        elif cover["kind"] == "ptx":
            ptx.append(cap)
    listed = " ".join(archs) or "none"
    if bad:
        return _check(name, "fail", "torch %s has no code for compute capability %s of the fleet (%s)" % (
            torch.get("version"), ", ".join(bad), listed),
            "install a cu130 torch build whose arch list includes sm_120 (it covers 12.0 and 12.1)")
    if ptx:
        return _check(name, "warn", "torch %s covers compute capability %s only by PTX (%s)" % (
            torch.get("version"), ", ".join(ptx), listed), "prefer a torch build with sm_120 SASS (cu130)")
    return _check(name, "pass", "torch %s covers the fleet's compute capability %s (%s)" % (
        torch.get("version"), ", ".join(fleet_caps) or "-", listed))


def evaluate(gpu, tool, host, config):
    """The profile's checks for one host.

    :param gpu: ``gpu_facts`` result. :param tool: ``toolchain_facts`` result. :param host: ``host_facts`` result.
    :param config: overrides of :data:`DEFAULT_CONFIG`: ``fallback_capability`` (this host's
        ``sglang_stack_compute_capability``), ``require_gpu``, ``fleet_capabilities`` (list; None = this host's),
        ``target_archs`` (the resolved ``sglang_stack_target_archs``; None = the fleet profile's), ``nccl_env``
        (``sglang_service_nccl_env``), ``service_env`` (``sglang_stack_service_env`` of the general checks),
        ``nnodes``, ``rdma_devices`` / ``net_interfaces`` (names under ``/sys/class/infiniband`` and
        ``/sys/class/net``; None = not read), ``smoke_size_mb``, ``deepgemm_off``,
        ``architecture`` / ``glibc`` (``ansible_facts``; None = not known, the aarch64 check then passes).
    :returns: dict ``host`` (``_hardware_profile.host_capabilities``), ``profile`` (the fleet's profile),
        ``checks`` (list of check dicts), ``service_env`` and ``env_reasons`` (S16/S21), ``smoke`` (the NCCL smoke
        test's size on this host), ``aarch64_plan`` (the dependency routes on aarch64; [] elsewhere),
        ``nccl_conf_files`` (path -> the keys an NCCL config file puts into effect, S03; {} for none).
    """
    cfg = dict(DEFAULT_CONFIG)
    cfg.update(dict((k, v) for k, v in (config or {}).items() if v is not None))
    gpu, tool, host = gpu or {}, tool or {}, host or {}
    mine = hp.host_capabilities(gpu.get("gpus") or [], cfg["fallback_capability"])
    fleet = hp.profile(list(cfg.get("fleet_capabilities") or []) + mine["capabilities"])
    targets = list(cfg["target_archs"]) if cfg.get("target_archs") is not None else fleet["target_archs"]
    env = hp.service_env(mine, (tool.get("torch") or {}).get("nccl"), gpu.get("topology"), cfg["deepgemm_off"])
    mem = host.get("memory") or {}
    smoke = hp.nccl_smoke_size_mb(cfg["smoke_size_mb"], mine["unified_memory"], mem.get("mem_available_bytes"))
    checks = [
        hp.family_check(mine, bool(cfg["require_gpu"])),
        check_kernel_targets(fleet["capabilities"], targets),
        check_nvcc_targets(tool, targets),
        check_torch_profile(tool, fleet["capabilities"]),
        check_fabric(cfg["nccl_env"], cfg["nnodes"], mine["unified_memory"], cfg["rdma_devices"],
                     cfg["net_interfaces"]),
    ]
    if smoke["capped"]:
        checks.append(_check("nccl_smoke_size", "warn", smoke["message"]))
    # the unit's environment as sglang_service writes it: the checks', the profile's, then the inventory's NCCL keys
    unit_env = dict(cfg["service_env"] or {})
    unit_env.update(env["env"])
    unit_env.update(cfg["nccl_env"] or {})
    conf = _nccl_conf.check(host.get("nccl_conf"), unit_env, "sglang_service_nccl_env")
    checks.append(_check(conf["name"], conf["status"], conf["message"], conf["remedy"]))
    deps = _aarch64_deps.check(cfg["architecture"], cfg["glibc"], mine["capabilities"])
    checks.append(_check(deps["name"], deps["status"], deps["message"], deps["remedy"]))
    checks.append(_check("sm12x_service_env", "pass", "the service gets %s" % (
        "; ".join("%s=%s (%s)" % (k, env["env"][k], env["reasons"][k]) for k in sorted(env["env"]))
        if env["env"] else "nothing from the SM12x profile")))
    return {"host": mine, "profile": fleet, "target_archs": targets, "checks": checks, "service_env": env["env"],
            "env_reasons": env["reasons"], "smoke": smoke,
            "aarch64_plan": deps["plan"], "nccl_conf_files": conf["files"]}
