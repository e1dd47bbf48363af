# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang contributors
# Apache-2.0 (see LICENSE)
"""GPU facts from ``nvidia-smi``, sysfs and ``lspci``: pure parsing plus one collector with an injected runner.

Everything here is importable without Ansible (stdlib only). The module ``blackwell.sglang.gpu_facts`` passes
``AnsibleModule.run_command`` as ``run``; tests pass a subprocess runner and fake executables.

Sources for the formats and error texts handled here:
- ``nvidia-smi --query-gpu=... --format=csv,noheader,nounits`` (nvidia-smi documentation); unavailable values
  print as ``[N/A]`` / ``N/A`` / ``[Not Supported]``, so every field may be None.
- ``Field "compute_cap" is not a valid field to query.`` with exit status 2 on driver 470.x (field report B17):
  the ``compute_cap`` query field needs a newer nvidia-smi; for CUDA 13 the driver must be >= 580 anyway.
- ``Failed to initialize NVML: Driver/library version mismatch``: user space upgraded, kernel module not yet
  reloaded, so a reboot is pending (B31).
- ``nvidia-smi topo -m`` link legend (X, SYS, NODE, PHB, PXB, PIX, NV#) and ``nvidia-smi topo -p2p r``
  (OK, CNS, GNS, TNS, NS, U) (B28, B29).
- ``lspci -D -vvv`` ``ACSCtl:`` lines such as ``SrcValid+ ReqRedir+ CmpltRedir+ UpstreamFwd+``: request or
  completion redirect on a bridge above a GPU sends peer-to-peer traffic up to the root complex / IOMMU (B28).
- ``/sys/bus/pci/devices/<dev>/iommu_group/type``: ``identity`` (pass-through) or ``DMA`` / ``DMA-FQ``
  (translated) (Linux ABI, Documentation/ABI/testing/sysfs-kernel-iommu_groups).
"""

from __future__ import annotations

import os
import re

try:
    from ansible_collections.blackwell.sglang.plugins.module_utils import _journal
except ImportError:  # copied beside _journal.py outside the collection (sglang_monitoring's GPU metrics collector)
    from . import _journal  # pylint: disable=import-self

# (query field, result key, converter name). Order matters: it is the CSV column order.
QUERY_FIELDS = (
    ("index", "index", "int"),
    ("name", "name", "str"),
    ("uuid", "uuid", "str"),
    ("pci.bus_id", "pci_bus_id", "busid"),
    ("compute_cap", "compute_cap", "cc"),
    ("memory.total", "memory_total_mib", "int"),
    ("memory.used", "memory_used_mib", "int"),
    ("driver_version", "driver_version", "str"),
    ("persistence_mode", "persistence_mode", "str"),
)

# Minimum Linux driver per CUDA major under minor-version compatibility (CUDA release notes, "CUDA Toolkit and
# Minimum Required Driver Version for CUDA Minor Version Compatibility"): CUDA 12.x >= 525.60.13,
# CUDA 13.x >= 580.65.06 (the 580 branch).
MIN_DRIVER_FOR_CUDA_MAJOR = {
    11: (450, 80, 2),
    12: (525, 60, 13),
    13: (580, 65, 6),
}

UNAVAILABLE = ("", "[n/a]", "n/a", "[not supported]", "not supported", "[unknown error]", "[insufficient permissions]")

TOPO_LEGEND = {
    "X": "self",
    "SYS": "PCIe + SMP interconnect between NUMA nodes",
    "NODE": "PCIe + interconnect between host bridges within a NUMA node",
    "PHB": "PCIe + a PCIe host bridge (typically the CPU)",
    "PXB": "multiple PCIe bridges, no host bridge",
    "PIX": "at most a single PCIe bridge",
}

P2P_LEGEND = {
    "X": "self",
    "OK": "status ok",
    "CNS": "chipset not supported",
    "GNS": "GPU not supported",
    "TNS": "topology not supported",
    "NS": "not supported",
    "U": "unknown",
}


class NvidiaSmiError(Exception):
    """nvidia-smi ran but its answer cannot be used. ``kind`` says why (see :func:`classify_nvidia_smi_failure`)."""

    def __init__(self, kind, message, reboot_required=False):
        super(NvidiaSmiError, self).__init__(message)
        self.kind = kind
        self.message = message
        self.reboot_required = reboot_required


def is_unavailable(value):
    return value is None or str(value).strip().lower() in UNAVAILABLE


def normalize_bus_id(bus_id):
    """``00000000:19:00.0`` (nvidia-smi, 8-digit domain) or ``19:00.0`` (lspci without -D) -> ``0000:19:00.0``.

    Returns None for unavailable input; lower-cases hex digits like sysfs does.
    """
    if is_unavailable(bus_id):
        return None
    text = str(bus_id).strip().lower()
    match = re.match(r"^(?:([0-9a-f]+):)?([0-9a-f]{1,2}):([0-9a-f]{1,2})\.([0-7])$", text)
    if not match:
        return text
    domain = int(match.group(1) or "0", 16)
    return "%04x:%02x:%02x.%s" % (domain, int(match.group(2), 16), int(match.group(3), 16), match.group(4))


def _convert(kind, raw):
    if is_unavailable(raw):
        return None
    raw = raw.strip()
    if kind == "int":
        try:
            return int(float(raw))
        except (ValueError, OverflowError):    # "inf" and "1e400" are no count either
            return None
    if kind == "busid":
        return normalize_bus_id(raw)
    if kind == "cc":
        match = re.match(r"^(\d+)\.(\d+)$", raw)
        return "%d.%d" % (int(match.group(1)), int(match.group(2))) if match else None
    return raw


def query_arguments():
    """The argv tail for the GPU query (fields in :data:`QUERY_FIELDS` order)."""
    return ["--query-gpu=" + ",".join(f[0] for f in QUERY_FIELDS), "--format=csv,noheader,nounits"]


def parse_query_csv(text):
    """Parse ``--query-gpu`` CSV (no header, no units) into a list of GPU dicts.

    Keys: see :data:`QUERY_FIELDS`; ``compute_cap`` is a ``"major.minor"`` string, memory in MiB; a value nvidia-smi
    could not provide is None. GPU names may contain commas only in theory; columns are split from both ends so
    that a comma in the name (the only free-text field) is kept.
    """
    gpus = []
    names = [f[1] for f in QUERY_FIELDS]
    kinds = [f[2] for f in QUERY_FIELDS]
    name_pos = names.index("name")
    for line in (text or "").splitlines():
        if not line.strip():
            continue
        cells = [c.strip() for c in line.split(",")]
        if len(cells) < len(names):
            raise ValueError("nvidia-smi query line has %d columns, expected %d: %r" % (len(cells), len(names), line))
        extra = len(cells) - len(names)
        if extra:
            cells = cells[:name_pos] + [", ".join(cells[name_pos:name_pos + extra + 1])] + cells[name_pos + extra + 1:]
        gpus.append(dict((n, _convert(k, c)) for n, k, c in zip(names, kinds, cells)))
    return gpus


_CUDA_DRIVER_RE = re.compile(r"CUDA Version\s*:\s*(\d+)\.(\d+)")
_DRIVER_RE = re.compile(r"Driver Version\s*:\s*([0-9][0-9.]*)")


def parse_cuda_driver_version(text):
    """Highest CUDA the driver supports, from ``nvidia-smi -q`` or the plain ``nvidia-smi`` banner: ``"13.0"`` or None."""
    match = _CUDA_DRIVER_RE.search(text or "")
    return "%d.%d" % (int(match.group(1)), int(match.group(2))) if match else None


def parse_driver_version(text):
    match = _DRIVER_RE.search(text or "")
    return match.group(1) if match else None


def version_tuple(text):
    """``"580.95.05"`` -> ``(580, 95, 5)``; None when not dotted integers."""
    if is_unavailable(text):
        return None
    parts = str(text).strip().split(".")
    try:
        return tuple(int(p) for p in parts)
    except ValueError:
        return None


def classify_nvidia_smi_failure(rc, stdout, stderr):
    """Name why an nvidia-smi call failed.

    :returns: dict ``{kind, message, reboot_required, no_gpu}``; kinds:
        ``too_old`` (query field unknown: driver/nvidia-smi older than the fields we need; B17),
        ``nvml_mismatch`` (driver/library version mismatch: reboot pending; B31),
        ``driver_not_loaded`` (nvidia-smi cannot talk to the kernel driver),
        ``no_devices`` ("No devices were found"), ``insufficient_permissions``, ``timeout`` (killed after the
        probe time limit: :mod:`_bounded`), ``unknown``.
    """
    text = "%s\n%s" % (stdout or "", stderr or "")
    low = text.lower()
    if rc == 124 and (stderr or "").startswith("timed out after"):
        return {"kind": "timeout", "no_gpu": False, "reboot_required": False,
                "message": "nvidia-smi %s: a wedged GPU or driver (check 'dmesg' for Xid errors; a GPU reset or a "
                           "reboot may be needed)" % (stderr or "").strip()}
    if "is not a valid field to query" in low:
        field = re.search(r'Field "([^"]+)" is not a valid field to query', text)
        return {
            "kind": "too_old",
            "no_gpu": False,
            "reboot_required": False,
            "message": "nvidia-smi is too old to query %s (rc=%s): upgrade the NVIDIA driver to 580 or newer "
                       "(CUDA 13 needs >= 580.65.06); this is not a missing GPU"
                       % ('"%s"' % field.group(1) if field else "a required field", rc),
        }
    if "driver/library version mismatch" in low:
        return {
            "kind": "nvml_mismatch",
            "no_gpu": False,
            "reboot_required": True,
            "message": "Failed to initialize NVML: Driver/library version mismatch: the user-space driver was "
                       "upgraded but the old kernel module is still loaded; reboot (or reload the nvidia modules)",
        }
    if "couldn't communicate with the nvidia driver" in low or "could not communicate with the nvidia driver" in low:
        return {
            "kind": "driver_not_loaded",
            "no_gpu": False,
            "reboot_required": False,
            "message": "nvidia-smi cannot communicate with the NVIDIA kernel driver (module not loaded, or built "
                       "for another kernel): check 'dkms status' and 'modprobe nvidia'",
        }
    if "unable to determine the device handle" in low or "gpu is lost" in low or "gpu requires reset" in low \
            or "gpu has fallen off the bus" in low:
        return {"kind": "gpu_lost", "no_gpu": False, "reboot_required": True,
                "message": "nvidia-smi cannot reach a GPU (device handle lost / GPU requires reset): the GPU is wedged "
                           "and needs a reboot (field report N03)"}
    if "no devices were found" in low:
        return {"kind": "no_devices", "no_gpu": True, "reboot_required": False,
                "message": "nvidia-smi found no NVIDIA devices"}
    if "insufficient permissions" in low:
        return {"kind": "insufficient_permissions", "no_gpu": False, "reboot_required": False,
                "message": "nvidia-smi reports insufficient permissions for /dev/nvidia*"}
    first = next((line.strip() for line in text.splitlines() if line.strip()), "")
    return {"kind": "unknown", "no_gpu": False, "reboot_required": False,
            "message": "nvidia-smi failed (rc=%s): %s" % (rc, first or "no output")}


_ANSI_RE = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def strip_ansi(text):
    """Drop terminal escape sequences: nvidia-smi 580 underlines the topo header (``ESC[4mGPU0 ... ESC[0m``)."""
    return _ANSI_RE.sub("", text or "")


def _matrix_rows(text, value_re):
    """Shared parser for ``topo -m`` and ``topo -p2p r`` matrices: header of GPUn (and NICn) columns, one row each."""
    lines = [ln.rstrip() for ln in strip_ansi(text).splitlines()]
    header_idx = None
    columns = []
    dev = re.compile(r"^(?:GPU|NIC)\d+$")
    for i, line in enumerate(lines):
        tokens = line.split()
        # The header lists device names only (then "CPU Affinity" ...); a row has a value after its device name.
        if tokens and dev.match(tokens[0]) and (len(tokens) == 1 or dev.match(tokens[1]) or tokens[1] in ("CPU", "NUMA")):
            header_idx, columns = i, [t for t in tokens if dev.match(t)]
            break
    if header_idx is None:
        return [], {}
    matrix = {}
    for line in lines[header_idx + 1:]:
        match = re.match(r"^\s*((?:GPU|NIC)\d+)\s+(.*)$", line)
        if not match:
            if matrix and not line.strip():
                break
            continue
        cells = match.group(2).split()
        row = {}
        for col, cell in zip(columns, cells[:len(columns)]):
            if value_re.match(cell):
                row[col] = cell
        matrix[match.group(1)] = row
    return columns, matrix


def parse_topology(text):
    """Parse ``nvidia-smi topo -m``.

    :returns: dict ``{gpus: ["GPU0", ...], links: {"GPU0": {"GPU1": "PHB", ...}}, nvlink_all_pairs: bool,
        nvlink_any: bool, pcie_only_pairs: [["GPU0", "GPU1", "PHB"], ...]}``. Only GPU-to-GPU links are kept.
    """
    columns, matrix = _matrix_rows(text, re.compile(r"^(X|SYS|NODE|PHB|PXB|PIX|NV\d+|PXN|NVB|NVL?\d*)$"))
    gpus = [c for c in columns if c.startswith("GPU")]
    links = {}
    pairs = []
    for a in gpus:
        row = matrix.get(a, {})
        links[a] = dict((b, row.get(b)) for b in gpus if b != a and row.get(b) is not None)
    for i, a in enumerate(gpus):
        for b in gpus[i + 1:]:
            pairs.append((a, b, links.get(a, {}).get(b)))
    nv = [p for p in pairs if p[2] and p[2].startswith("NV")]
    return {
        "gpus": gpus,
        "links": links,
        "nvlink_any": bool(nv),
        "nvlink_all_pairs": bool(pairs) and len(nv) == len(pairs),
        "pcie_only_pairs": [list(p) for p in pairs if not (p[2] and p[2].startswith("NV"))],
    }


def parse_p2p_matrix(text):
    """Parse ``nvidia-smi topo -p2p r`` (or w/n/a/p): ``{gpus, status: {"GPU0": {"GPU1": "OK"}}, all_ok, not_ok_pairs}``."""
    columns, matrix = _matrix_rows(text, re.compile(r"^(X|OK|CNS|GNS|TNS|NS|U)$"))
    gpus = [c for c in columns if c.startswith("GPU")]
    status = {}
    bad = []
    for a in gpus:
        status[a] = dict((b, matrix.get(a, {}).get(b)) for b in gpus if b != a)
        for b, v in status[a].items():
            if v != "OK":
                bad.append([a, b, v if v is not None else "U"])
    return {"gpus": gpus, "status": status, "all_ok": bool(gpus) and not bad, "not_ok_pairs": bad}


_LSPCI_DEV_RE = re.compile(r"^([0-9a-fA-F]{4}:)?([0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7])\s+(.*)$")
_ACS_CTL_RE = re.compile(r"^\s*ACSCtl:\s*(.*)$")


def parse_lspci_acs(text):
    """Parse ``lspci -D -vvv`` (run as root; capabilities are hidden otherwise).

    :returns: dict bus id -> ``{description, acs_ctl: {SrcValid: bool, ReqRedir: bool, ...}, redirect: bool}`` for
        every device that shows an ``ACSCtl:`` line. ``redirect`` is True when request or completion redirect is
        enabled, which routes peer-to-peer traffic through the root complex (and the IOMMU).
    """
    result = {}
    current = None
    for line in (text or "").splitlines():
        match = _LSPCI_DEV_RE.match(line)
        if match and not line.startswith(("\t", " ")):
            current = normalize_bus_id((match.group(1) or "") + match.group(2))
            desc = match.group(3)
            result.setdefault(current, {"description": desc, "acs_ctl": None, "redirect": False})
            continue
        acs = _ACS_CTL_RE.match(line)
        if acs and current:
            flags = dict((m.group(1), m.group(2) == "+") for m in re.finditer(r"(\w+)([+-])", acs.group(1)))
            result[current]["acs_ctl"] = flags
            result[current]["redirect"] = bool(flags.get("ReqRedir") or flags.get("CmpltRedir"))
    return dict((k, v) for k, v in result.items() if v["acs_ctl"] is not None)


def parse_iommu_cmdline(cmdline):
    """IOMMU / ACS related kernel parameters from ``/proc/cmdline``.

    :returns: dict ``{tokens: [...], passthrough: bool|None, disabled: bool, forced_on: bool, acs_override: bool}``.
        ``passthrough`` is True for ``iommu=pt`` / ``iommu.passthrough=1``, False for ``iommu.passthrough=0``,
        None when the command line does not say (the kernel's build default then applies: read the group type).
    """
    tokens = (cmdline or "").split()
    keep = [t for t in tokens if re.match(r"^(intel_iommu|amd_iommu|iommu|iommu\.\w+|pcie_acs_override)=", t)
            or re.match(r"^pci=.*\bnoacs\b", t)]
    values = dict(t.split("=", 1) for t in keep)
    passthrough = None
    if values.get("iommu") == "pt" or values.get("iommu.passthrough") in ("1", "on", "y"):
        passthrough = True
    elif values.get("iommu.passthrough") in ("0", "off", "n") or values.get("iommu") == "nopt":
        passthrough = False
    disabled = values.get("intel_iommu", "").startswith("off") or values.get("amd_iommu") == "off" \
        or values.get("iommu") == "off"
    forced_on = "on" in values.get("intel_iommu", "").split(",") or values.get("amd_iommu") == "on" \
        or values.get("iommu") == "force"
    acs_override = "pcie_acs_override" in values or "noacs" in values.get("pci", "").split(",")
    return {"tokens": keep, "passthrough": passthrough, "disabled": disabled, "forced_on": forced_on,
            "acs_override": acs_override}


def pci_ancestors(bus_id, sysfs_root="/sys"):
    """Bus ids of the bridges above a PCI device, nearest first, read from the sysfs device path."""
    path = os.path.join(sysfs_root, "bus", "pci", "devices", bus_id)
    try:
        real = os.path.realpath(path)
        if not os.path.exists(real):
            return []
    except (OSError, ValueError):     # ValueError: a NUL byte in a bus id nvidia-smi printed
        return []
    parts = real.split(os.sep)
    found = [p for p in parts if re.match(r"^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$", p)]
    found = [p for p in found if p != bus_id]
    return list(reversed(found))


def iommu_group_type(bus_id, sysfs_root="/sys"):
    """``identity`` / ``DMA`` / ``DMA-FQ`` / ``blocked`` / None (no IOMMU group: IOMMU off or not exposed)."""
    path = os.path.join(sysfs_root, "bus", "pci", "devices", bus_id, "iommu_group", "type")
    try:
        with open(path) as handle:
            return handle.read().strip() or None
    except (IOError, OSError, ValueError, UnicodeDecodeError):
        return None


def _read(path):
    # its own copy of _fs.read_text: this file is also installed alone on hosts (sglang_monitoring's textfile
    # collector imports it as blackwell_gpu._gpu, next to _gpu_health and _journal only)
    try:
        with open(path) as handle:
            return handle.read()
    except (IOError, OSError):
        return None


_Q_GPU_RE = re.compile(r"^GPU ([0-9A-Fa-f]+:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7])\s*$")
_Q_VALUE_RE = re.compile(r"^(\s*)([^:]+?)\s*:\s*(.*)$")


def parse_q_details(text):
    """Per-GPU states from ``nvidia-smi -q``: MIG mode, GSP firmware, VBIOS, compute mode.

    :returns: dict bus id (``0000:01:00.0``) -> ``{mig_mode, mig_mode_pending, gsp_firmware_version,
        vbios_version, compute_mode}`` (None when not reported or ``N/A``).
    """
    result = {}
    current = None
    section = None
    for line in (text or "").splitlines():
        match = _Q_GPU_RE.match(line.strip()) if not line.startswith(" ") else None
        if match:
            current = normalize_bus_id(match.group(1))
            result[current] = {"mig_mode": None, "mig_mode_pending": None, "gsp_firmware_version": None,
                               "vbios_version": None, "compute_mode": None}
            section = None
            continue
        if current is None:
            continue
        stripped = line.strip()
        if stripped and ":" not in stripped:
            section = stripped
            continue
        value = _Q_VALUE_RE.match(line)
        if not value:
            continue
        key, raw = value.group(2).strip(), value.group(3).strip()
        val = None if is_unavailable(raw) else raw
        if section == "MIG Mode" and key in ("Current", "Pending"):
            result[current]["mig_mode" if key == "Current" else "mig_mode_pending"] = val
        elif key == "GSP Firmware Version":
            result[current]["gsp_firmware_version"] = val
        elif key == "VBIOS Version":
            result[current]["vbios_version"] = val
        elif key == "Compute Mode":
            result[current]["compute_mode"] = val
    return result


def parse_kernel_module(version_text, license_text=None):
    """``/proc/driver/nvidia/version`` (and optionally ``modinfo nvidia`` output): open or proprietary module.

    ``NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  575.51.03 ...`` is the open module; the proprietary
    one says ``NVIDIA UNIX x86_64 Kernel Module``; ``license: Dual MIT/GPL`` (modinfo) is the open one, ``NVIDIA`` the
    proprietary (open-gpu-kernel-modules#259).

    :returns: dict ``{open: bool|None, version, source}``.
    """
    text = version_text or ""
    version = re.search(r"Kernel Module(?: for \S+)?\s+([0-9][0-9.]+)", text)
    if "NVRM version" in text:
        return {"open": "Open Kernel Module" in text, "version": version.group(1) if version else None,
                "source": "/proc/driver/nvidia/version"}
    lic = re.search(r"^license:\s*(.+)$", license_text or "", re.M)
    if lic:
        return {"open": "MIT" in lic.group(1) or "GPL" in lic.group(1), "version": None, "source": "modinfo"}
    return {"open": None, "version": None, "source": None}


def nvidia_pci_devices(sysfs_root="/sys"):
    """NVIDIA display/3D controllers from sysfs (vendor 0x10de, class 0x03xxxx): ``[{bus_id, device_id}]``.

    Works when nvidia-smi sees nothing ("No devices were found", N20)."""
    base = os.path.join(sysfs_root, "bus", "pci", "devices")
    found = []
    try:
        names = sorted(os.listdir(base))
    except OSError:
        return found
    for name in names:
        vendor = (_read(os.path.join(base, name, "vendor")) or "").strip().lower()
        klass = (_read(os.path.join(base, name, "class")) or "").strip().lower()
        if vendor == "0x10de" and klass.startswith("0x03"):
            device = (_read(os.path.join(base, name, "device")) or "").strip().lower().replace("0x", "")
            found.append({"bus_id": name, "device_id": "10de:%s" % device})
    return found


def decode_kernel_log(lines, error_kind):
    """Refine an nvidia-smi failure with the kernel log (N03, N20): a wedge or an adapter-init failure wins.

    :returns: None, or dict ``{kind, message, reboot_required, line}``.
    """
    if not lines:
        return None
    result = _journal.classify(lines)
    cause = result["cause"]
    if cause.startswith("gpu_wedged") or cause == "gb10_uma_exhausted":
        return {"kind": cause, "reboot_required": True, "line": result["line"],
                "message": "%s; nvidia-smi failed (%s) after it: %s" % (
                    result["summary"], error_kind, result["remedy"])}
    if cause in ("bios_bar_disabled", "gpu_init_failed", "proprietary_module_on_blackwell"):
        return {"kind": cause, "reboot_required": False, "line": result["line"],
                "message": "%s (%s). Remedy: %s" % (result["summary"], result["line"], result["remedy"])}
    return None


def collect(run, nvidia_smi, lspci=None, sysfs_root="/sys", proc_root="/proc", topology=True, pcie=True,
            kernel_log=None):
    """Gather the GPU facts of this host.

    :param run: callable ``run(argv) -> (rc, stdout, stderr)`` (``AnsibleModule.run_command`` semantics, no shell).
    :param nvidia_smi: absolute path of nvidia-smi, or None when none was found (then ``gpu_count`` is 0 and
        ``reason`` says so: not a failure).
    :param lspci: absolute path of lspci or None (ACS state then unknown, with a reason).
    :param kernel_log: callable ``() -> list[str]`` of this boot's kernel log (``journalctl -k -b``), read only when
        nvidia-smi fails, to tell a wedged GPU (Xid 119/154/8/79) or a BIOS BAR problem from a missing driver.
    :raises NvidiaSmiError: when nvidia-smi exists but is too old for the query (kind ``too_old``); every other
        nvidia-smi failure is reported in the result (``error``, ``reason``, ``reboot_required``).
    :returns: dict with ``nvidia_smi``, ``driver_version``, ``cuda_driver_version``, ``gpu_count``, ``gpus``,
        ``reason``, ``error`` (kind or None), ``reboot_required``, ``topology``, ``p2p_read``, ``pcie``, ``iommu``.
    """
    facts = {
        "nvidia_smi": nvidia_smi,
        "driver_version": None,
        "cuda_driver_version": None,
        "gpu_count": 0,
        "gpus": [],
        "reason": None,
        "error": None,
        "reboot_required": False,
        "topology": None,
        "p2p_read": None,
        "pcie": {},
        "iommu": parse_iommu_cmdline(_read(os.path.join(proc_root, "cmdline"))),
        "kernel_module": parse_kernel_module(_read(os.path.join(proc_root, "driver", "nvidia", "version"))),
        "pci_devices": nvidia_pci_devices(sysfs_root),
        "kernel_log_line": None,
        "warnings": [],
    }
    if not nvidia_smi:
        facts["reason"] = "nvidia-smi not found (no NVIDIA driver installed on this host)"
        return facts
    rc, out, err = run([nvidia_smi] + query_arguments())
    if rc != 0:
        info = classify_nvidia_smi_failure(rc, out, err)
        if info["kind"] == "too_old":
            raise NvidiaSmiError("too_old", info["message"])
        facts["error"] = info["kind"]
        facts["reason"] = info["message"]
        facts["reboot_required"] = info["reboot_required"]
        if kernel_log is not None:
            refined = decode_kernel_log(kernel_log(), info["kind"])
            if refined:
                facts["error"] = refined["kind"]
                facts["reason"] = refined["message"]
                facts["reboot_required"] = refined["reboot_required"] or info["reboot_required"]
                facts["kernel_log_line"] = refined["line"]
        return facts
    try:
        gpus = parse_query_csv(out)
    except ValueError as exc:
        facts["error"] = "unparsable"
        facts["reason"] = "nvidia-smi query output not understood: %s" % exc
        return facts
    facts["gpus"] = gpus
    facts["gpu_count"] = len(gpus)
    if not gpus:
        facts["reason"] = "nvidia-smi lists no GPUs"
    for gpu in gpus:
        gpu.update({"mig_mode": None, "mig_mode_pending": None, "gsp_firmware_version": None, "vbios_version": None,
                    "compute_mode": None})
    drivers = sorted(set(g["driver_version"] for g in gpus if g.get("driver_version")))
    facts["driver_version"] = drivers[0] if drivers else None
    rc, out, err = run([nvidia_smi, "-q"])
    if rc == 0:
        facts["cuda_driver_version"] = parse_cuda_driver_version(out)
        facts["driver_version"] = facts["driver_version"] or parse_driver_version(out)
        details = parse_q_details(out)
        for gpu in gpus:
            gpu.update(details.get(gpu.get("pci_bus_id")) or {})
    else:
        facts["warnings"].append("nvidia-smi -q failed (rc=%s); cuda_driver_version unknown" % rc)
    if topology and len(gpus) > 1:
        rc, out, err = run([nvidia_smi, "topo", "-m"])
        if rc == 0:
            facts["topology"] = parse_topology(out)
            facts["topology"]["raw"] = out
        else:
            facts["warnings"].append("nvidia-smi topo -m failed (rc=%s): %s" % (rc, (err or out).strip()[:200]))
        rc, out, err = run([nvidia_smi, "topo", "-p2p", "r"])
        if rc == 0:
            facts["p2p_read"] = parse_p2p_matrix(out)
        else:
            facts["warnings"].append("nvidia-smi topo -p2p r failed (rc=%s)" % rc)
    if pcie:
        acs = None
        acs_reason = None
        if lspci:
            rc, out, err = run([lspci, "-D", "-vvv"])
            if rc == 0:
                acs = parse_lspci_acs(out)
                if not acs and "Capabilities: <access denied>" in out:
                    acs_reason = "lspci capabilities hidden (not root)"
                    acs = None
            else:
                acs_reason = "lspci failed (rc=%s)" % rc
        else:
            acs_reason = "lspci not found (install pciutils)"
        for gpu in gpus:
            bus = gpu.get("pci_bus_id")
            if not bus:
                continue
            ancestors = pci_ancestors(bus, sysfs_root)
            redirect = None
            if acs is not None:
                redirect = sorted(b for b in ancestors if acs.get(b, {}).get("redirect"))
                if not ancestors:
                    # No sysfs path (container): fall back to every bridge that redirects.
                    redirect = sorted(b for b, v in acs.items() if v["redirect"])
            facts["pcie"][bus] = {
                "ancestors": ancestors,
                "iommu_group_type": iommu_group_type(bus, sysfs_root),
                "acs_redirect_bridges": redirect,
                "acs_reason": acs_reason,
            }
    return facts


def driver_supports_cuda(driver_version, cuda_driver_version, cuda_version):
    """Does this driver run CUDA ``cuda_version`` ("13.0")?

    Uses the driver's own answer (``CUDA Version`` in nvidia-smi, the highest CUDA it supports) when known, else the
    minimum-driver table :data:`MIN_DRIVER_FOR_CUDA_MAJOR` (minor-version compatibility within a major).

    :returns: ``(ok: bool|None, detail: str)``; None when neither source is known.
    """
    want = tuple(int(x) for x in str(cuda_version).split(".")[:2])
    if cuda_driver_version:
        have = tuple(int(x) for x in str(cuda_driver_version).split(".")[:2])
        if have[0] != want[0]:
            return have[0] > want[0], "driver %s supports up to CUDA %s; CUDA %s requested" % (
                driver_version, cuda_driver_version, cuda_version)
        return True, "driver %s supports up to CUDA %s; CUDA %s runs under minor-version compatibility" % (
            driver_version, cuda_driver_version, cuda_version)
    need = MIN_DRIVER_FOR_CUDA_MAJOR.get(want[0])
    have_drv = version_tuple(driver_version)
    if need is None or have_drv is None:
        return None, "cannot tell whether driver %s supports CUDA %s" % (driver_version, cuda_version)
    return have_drv >= need, "driver %s, CUDA %d.x needs >= %s" % (
        driver_version, want[0], ".".join("%02d" % n if i else str(n) for i, n in enumerate(need)))
