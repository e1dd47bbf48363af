# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang contributors
# Apache-2.0 (see LICENSE)
"""Hardware profiles of the SM12x family: one rule from compute capabilities to everything that follows them.

The collection serves the consumer/workstation Blackwell family, compute capability 12.x:

==========  =========  ============================================  ===============  ============
capability  target     GPUs                                          memory           CPU
==========  =========  ============================================  ===============  ============
12.0        sm_120a    RTX PRO 6000 Blackwell, RTX 5090 (GB20x)       discrete VRAM    x86_64 hosts
12.1        sm_121a    DGX Spark GB10                                 unified (LPDDR)  aarch64 Grace
==========  =========  ============================================  ===============  ============

Arch-specific ``a`` code runs on exactly its capability: ``sm_120a`` does not run on 12.1 (field report S13), so a
mixed fleet needs both targets. Everything that depends on the GPUs is computed here from the capabilities, never
spelled out per role:

* :func:`profile` -- capabilities (``"12.1"``) or targets (``"sm_121a"``) in, the profile out: ``target_archs``
  (sgl-kernel's gencodes, the release key), ``torch_cuda_arch_list`` (the kernel build's ``TORCH_CUDA_ARCH_LIST``),
  ``nvfp4_jit_arch_lists`` (what SGLang's NVFP4 JIT compiles per capability), ``unified_memory``;
* :func:`host_capabilities` -- what preflight read (``gpu_facts``), or the inventory's capability when no GPU
  answered; GPUs outside the family are named (:func:`family_check` refuses them);
* :func:`fleet_capabilities` -- the union over the play's hosts: a mixed fleet builds one wheel for both;
* :func:`is_unified_memory` -- the unified-memory rule (cc 12.1, a GB10 name, or memory reported ``[N/A]``),
  :func:`uma_mem_fraction` sizes ``--mem-fraction-static`` from MemAvailable on such hosts (N18),
  :func:`nccl_smoke_size_mb` caps the NCCL smoke test there (S04);
* :func:`service_env` -- the environment the profile needs in the service unit (S16 DeepGEMM off on 12.x, S21
  NVLS off on NCCL >= 2.30.4 without NVLink).

Pure Python, standard library only; shapes and errors are in each docstring.
"""

from __future__ import annotations

import re

FAMILY = "SM12x"
GIB = 1024 ** 3
MIB = 1024 ** 2

# capability -> what the family member is. ``cpu``: the CPU architecture of the hosts it comes in.
MEMBERS = {
    (12, 0): {"arch": "sm_120a", "gpus": "RTX PRO 6000 Blackwell / RTX 5090", "unified_memory": False,
              "cpu": "x86_64"},
    (12, 1): {"arch": "sm_121a", "gpus": "DGX Spark GB10", "unified_memory": True, "cpu": "aarch64"},
}

_CC_RE = re.compile(r"^\s*(\d+)\.(\d+)\s*$")
_ARCH_RE = re.compile(r"^\s*(?:sm|compute)_(\d+)(\d)([af]?)\s*$")


def family_text():
    """``"SM12x (12.0 sm_120a: RTX PRO 6000 Blackwell / RTX 5090; 12.1 sm_121a: DGX Spark GB10)"``."""
    return "%s (%s)" % (FAMILY, "; ".join("%d.%d %s: %s" % (cc + (m["arch"], m["gpus"]))
                                          for cc, m in sorted(MEMBERS.items())))


def parse_capability(value):
    """``"12.1"`` / ``12.1`` / ``(12, 1)`` / ``"sm_121a"`` / ``"compute_121"`` -> ``(12, 1)``; None when unreadable."""
    if isinstance(value, (tuple, list)) and len(value) == 2:
        try:
            return int(value[0]), int(value[1])
        except (TypeError, ValueError):
            return None
    text = str(value if value is not None else "")
    match = _CC_RE.match(text)
    if match:
        return int(match.group(1)), int(match.group(2))
    match = _ARCH_RE.match(text)
    if match:
        return int(match.group(1)), int(match.group(2))
    return None


def capability_text(cc):
    return "%d.%d" % cc


def in_family(cc):
    """True for a capability of the SM12x family this collection builds for (:data:`MEMBERS`)."""
    return cc in MEMBERS


def arch_of(cc):
    """The arch-specific target of a family capability: ``(12, 1)`` -> ``"sm_121a"``. :raises KeyError: otherwise."""
    return MEMBERS[cc]["arch"]


def profile(values):
    """The hardware profile of a set of capabilities or targets.

    :param values: iterable of capabilities (``"12.0"``, ``(12, 1)``) or targets (``"sm_121a"``); duplicates and
        order do not matter. A target outside the family (``"sm_90a"``) is kept in ``target_archs`` as given (an
        inventory may pin one) but has no member; a capability outside the family is listed in ``outside``.
    :returns: dict ``family`` ("SM12x"), ``capabilities`` (sorted ``["12.0", "12.1"]``, family members only),
        ``target_archs`` (sorted, e.g. ``["sm_120a", "sm_121a"]``), ``torch_cuda_arch_list`` (``"12.0a 12.1a"``),
        ``nvfp4_jit_arch_lists`` (capability -> ``"12.1a"``: SGLang's NVFP4 JIT compiles for the local GPU's ``a``
        target), ``unified_memory`` (any member with unified memory), ``members`` (one dict per capability:
        ``compute_capability``, ``arch``, ``gpus``, ``unified_memory``, ``cpu``), ``outside`` (capabilities outside
        the family, as ``"9.0"``), ``unreadable`` (values that are neither).
    """
    caps, archs, outside, unreadable = set(), set(), set(), []
    for value in values or []:
        text = str(value).strip()
        cc = parse_capability(value)
        if cc is None:
            unreadable.append(text)
            continue
        is_arch = bool(_ARCH_RE.match(text))
        if is_arch and in_family(cc) and not text.endswith(("a", "f")):
            unreadable.append(text)  # plain sm_120 has no FP4 MMA: not a target of this family
        elif in_family(cc):
            caps.add(cc)
            archs.add(text if is_arch else arch_of(cc))
        elif is_arch:
            archs.add(text)
        else:
            outside.add(cc)
    members = [dict(MEMBERS[cc], compute_capability=capability_text(cc)) for cc in sorted(caps)]
    return {
        "family": FAMILY,
        "capabilities": [capability_text(cc) for cc in sorted(caps)],
        "target_archs": sorted(archs, key=lambda a: (parse_capability(a) or (0, 0), a)),
        "torch_cuda_arch_list": " ".join("%d.%da" % cc for cc in sorted(caps)),
        "nvfp4_jit_arch_lists": dict((capability_text(cc), "%d.%da" % cc) for cc in sorted(caps)),
        "unified_memory": any(m["unified_memory"] for m in members),
        "members": members,
        "outside": [capability_text(cc) for cc in sorted(outside)],
        "unreadable": unreadable,
    }


def is_unified_memory(gpu):
    """The unified-memory rule for one ``gpu_facts`` GPU dict: compute capability 12.1, a GB10 name, or a family GPU
    whose memory nvidia-smi reports as ``[N/A]`` (parsed to None: the GPU has no VRAM of its own)."""
    cc = parse_capability(gpu.get("compute_cap"))
    if "GB10" in str(gpu.get("name") or ""):
        return True
    if cc is not None and MEMBERS.get(cc, {}).get("unified_memory"):
        return True
    return cc is not None and in_family(cc) and gpu.get("memory_total_mib") is None


def host_capabilities(gpus, fallback=None):
    """The capabilities of one host: those of its GPUs in the family, or ``fallback`` (the inventory's
    ``sglang_stack_compute_capability``) when no GPU answered or none is in the family.

    :param gpus: ``gpu_facts`` ``gpus`` (list of dicts with ``index``, ``name``, ``compute_cap``,
        ``memory_total_mib``, ``pci_bus_id``); may be empty.
    :param fallback: a capability string or None.
    :returns: dict ``capabilities`` (sorted strings), ``source`` (``"gpus"`` or ``"inventory"``), ``outside`` (labels
        of GPUs whose capability is outside the family), ``unknown`` (labels of GPUs with no capability reported),
        ``unified_memory`` (bool: a GPU of the host is unified memory, or the fallback's member is).
    """
    caps, outside, unknown, uma = set(), [], [], False
    for gpu in gpus or []:
        cc = parse_capability(gpu.get("compute_cap"))
        label = "GPU %s (%s, %s)" % (gpu.get("index"), gpu.get("name") or "unknown name",
                                     gpu.get("pci_bus_id") or "bus ?")
        if cc is None:
            unknown.append(label)
        elif in_family(cc):
            caps.add(cc)
            uma = uma or is_unified_memory(gpu)
        else:
            outside.append("%s has compute capability %s" % (label, capability_text(cc)))
    source = "gpus"
    if not caps:
        source = "inventory"
        cc = parse_capability(fallback)
        if cc is not None:
            caps.add(cc)
            uma = bool(MEMBERS.get(cc, {}).get("unified_memory"))
    return {"capabilities": [capability_text(cc) for cc in sorted(caps)], "source": source, "outside": outside,
            "unknown": unknown, "unified_memory": uma}


def fleet_capabilities(per_host):
    """Union of the hosts' capability lists (each a list of strings; None entries are skipped), sorted."""
    caps = set()
    for entry in per_host or []:
        for value in entry or []:
            cc = parse_capability(value)
            if cc is not None:
                caps.add(cc)
    return [capability_text(cc) for cc in sorted(caps)]


def _check(name, status, message, remedy=""):
    return {"name": name, "status": status, "message": message, "remedy": remedy}


def family_check(host, require_gpu=True):
    """The preflight check ``gpu_family``: refuse a GPU outside the SM12x family, naming the family and the GPU.

    :param host: :func:`host_capabilities` result. :param require_gpu: preflight_require_gpu (False: warn only,
        for a build host whose own GPU is of another kind).
    :returns: a preflight check dict (``name``, ``status`` pass/warn/fail, ``message``, ``remedy``).
    """
    name = "gpu_family"
    if host["outside"]:
        return _check(name, "fail" if require_gpu else "warn",
                      "gpu_outside_family: %s; this collection builds and serves the %s family only"
                      % ("; ".join(host["outside"]), family_text()),
                      "run on an SM12x host, or set preflight_require_gpu: false on a build-only host (the targets "
                      "then come from sglang_stack_compute_capability or sglang_stack_target_archs)")
    if not host["capabilities"]:
        return _check(name, "fail", "no compute capability: no GPU answered and sglang_stack_compute_capability is "
                      "not one of the %s family" % family_text(),
                      "set sglang_stack_compute_capability to 12.0 or 12.1")
    return _check(name, "pass", "%s: compute capability %s (from %s)%s" % (
        FAMILY, ", ".join(host["capabilities"]), "the GPUs" if host["source"] == "gpus" else
        "sglang_stack_compute_capability: no GPU answered", "; unified memory" if host["unified_memory"] else ""))


def uma_mem_fraction(mem_total_bytes, mem_available_bytes, headroom_gib):
    """``--mem-fraction-static`` for unified memory: (MemAvailable - headroom) / MemTotal, floored to 0.01.

    On unified memory the GPU allocates from the host pool, so MemTotal (or ``[N/A]``) overstates what SGLang may
    take: the OS, the page cache and JIT compiler peaks share the same memory (N18).

    :returns: ``(fraction, budget_bytes)``; fraction 0.0 when nothing is left.
    """
    budget = float(mem_available_bytes) - float(headroom_gib) * GIB
    fraction = int(max(0.0, budget / float(mem_total_bytes)) * 100) / 100.0
    return fraction, budget


# The NCCL smoke test on unified memory: a test buffer of N bytes takes about twice that from the shared pool (the
# dgx-spark-playbooks report: 16 GB allocated about 32 GB per node), so the size is capped at 1 GiB and at an eighth
# of MemAvailable for both copies.
UMA_SMOKE_MAX_MB = 1024
UMA_SMOKE_POOL_SHARE = 8
UMA_SMOKE_COPIES = 2


def nccl_smoke_size_mb(requested_mb, unified_memory, mem_available_bytes=None):
    """The NCCL smoke test's buffer size (MiB) for this host (S04).

    :returns: dict ``size_mb`` (int), ``capped`` (bool), ``message`` (why, or "").
    """
    requested = int(requested_mb)
    if not unified_memory:
        return {"size_mb": requested, "capped": False, "message": ""}
    limit = UMA_SMOKE_MAX_MB
    if mem_available_bytes:
        limit = min(limit, int(float(mem_available_bytes) / UMA_SMOKE_POOL_SHARE / UMA_SMOKE_COPIES / MIB))
    limit = max(1, limit)
    if requested <= limit:
        return {"size_mb": requested, "capped": False, "message": ""}
    return {"size_mb": limit, "capped": True,
            "message": "nccl_smoke_too_large_uma: %d MiB requested; on unified memory (GB10) the buffers come out of "
                       "the host's shared pool, about %dx the size, and a large run can freeze the node: capped at "
                       "%d MiB (at most %d MiB and 1/%d of MemAvailable)" % (
                           requested, UMA_SMOKE_COPIES, limit, UMA_SMOKE_MAX_MB, UMA_SMOKE_POOL_SHARE)}


def _version_tuple(text):
    parts = re.findall(r"\d+", str(text or ""))
    return tuple(int(p) for p in parts[:3]) if parts else None


NVLS_BAD_FROM = (2, 30, 4)


def has_nvlink(topology):
    """True when ``gpu_facts`` topology names an NVLink (``NV#``) between any two GPUs."""
    links = (topology or {}).get("links") or {}
    return any(str(v or "").startswith("NV") for row in links.values() for v in (row or {}).values())


def service_env(host, nccl_version=None, topology=None, deepgemm_off=True):
    """The service environment the profile needs, with a reason per entry.

    * S16: on compute capability 12.x DeepGEMM has no SM12x recipes (``Unknown recipe``); SGLang switches it on for
      FP8 block-scale checkpoints, so ``SGLANG_ENABLE_JIT_DEEPGEMM=0`` unless ``deepgemm_off`` is False.
    * S21: NCCL 2.30.4 widened the NVLS path and deadlocks before ``Init COMPLETE`` on hosts without NVLink (GB10:
      C2C + RoCE; PCIe RTX cards): ``NCCL_NVLS_ENABLE=0`` when the NCCL is >= 2.30.4 and no NVLink is seen.

    :param host: :func:`host_capabilities` result. :param nccl_version: ``torch.cuda.nccl.version()`` as
        ``"2.30.4"`` (None: torch not installed yet, the S21 rule waits for it).
    :returns: dict ``env`` (name -> value) and ``reasons`` (name -> text).
    """
    env, reasons = {}, {}
    family = [parse_capability(c) for c in host.get("capabilities") or []]
    if not any(cc and in_family(cc) for cc in family):
        return {"env": env, "reasons": reasons}
    if deepgemm_off:
        env["SGLANG_ENABLE_JIT_DEEPGEMM"] = "0"
        reasons["SGLANG_ENABLE_JIT_DEEPGEMM"] = (
            "S16: DeepGEMM has no SM12x FP8 block-scale recipes ('Unknown recipe' / 'Unknown SF transformation')")
    version = _version_tuple(nccl_version)
    if version and version >= NVLS_BAD_FROM and not has_nvlink(topology):
        env["NCCL_NVLS_ENABLE"] = "0"
        reasons["NCCL_NVLS_ENABLE"] = (
            "S21: NCCL %s >= 2.30.4 without NVLink hangs at 'NVLS tuning' before Init COMPLETE" % nccl_version)
    return {"env": env, "reasons": reasons}
