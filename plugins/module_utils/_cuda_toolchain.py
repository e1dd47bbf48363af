# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang contributors
# Apache-2.0 (see LICENSE)
"""CUDA toolchain / torch build checks shared by the toolchain filters and roles.

Pure Python (stdlib only, plus :mod:`._versions`), so it runs on the controller and in unit tests.

* :func:`nvcc_facts` -- ``nvcc --version`` text -> version dict (only the ``release X.Y, VX.Y.Z`` line is trusted, B21).
* :func:`gpu_arch_list` -- ``nvcc --list-gpu-arch`` text -> ``["compute_75", ...]`` (B04: check the list, do not
  infer support from a version number).
* :func:`arch_coverage` -- does ``torch.cuda.get_arch_list()`` (or any sm_/compute_ list) run on a GPU of compute
  capability X.Y (B14)?
* :func:`cuda_release_mismatches` -- which installed CUDA pip dists do not share the requested major.minor (B08).
"""

from __future__ import annotations

import re

from ._versions import major_minor, parse_nvcc_version

_ARCH_RE = re.compile(r"^(sm|compute)_(\d+)([a-z]?)$")
_LIST_ARCH_RE = re.compile(r"\bcompute_(\d+)([a-z]?)\b")


def nvcc_facts(text):
    """Describe ``nvcc --version`` output.

    :returns: dict ``version`` ("13.0.88"), ``release`` ("13.0"), ``major``, ``minor``, ``patch`` (ints).
    :raises ValueError: when the output has no ``release X.Y, VX.Y.Z`` line.
    """
    major, minor, patch = parse_nvcc_version(text)
    return {
        "version": "%d.%d.%d" % (major, minor, patch),
        "release": "%d.%d" % (major, minor),
        "major": major,
        "minor": minor,
        "patch": patch,
    }


def gpu_arch_list(text):
    """Virtual architectures from ``nvcc --list-gpu-arch`` (one ``compute_NN`` per line), in output order."""
    seen = []
    for match in _LIST_ARCH_RE.finditer(text or ""):
        arch = "compute_%s%s" % (match.group(1), match.group(2))
        if arch not in seen:
            seen.append(arch)
    return seen


def compute_cap_tuple(cap):
    """``"12.0"`` / ``12.0`` / ``"120"`` / ``(12, 0)`` / ``"sm_120"`` -> ``(12, 0)``.

    :raises ValueError: for anything else.
    """
    if isinstance(cap, (tuple, list)) and len(cap) == 2:
        return int(cap[0]), int(cap[1])
    text = str(cap).strip().lower()
    for prefix in ("sm_", "compute_"):
        if text.startswith(prefix):
            text = text[len(prefix):].rstrip("abcdef")
    if "." in text:
        return major_minor(text)
    if text.isdigit() and len(text) >= 2:
        # nvcc/torch spelling: major digits then one minor digit ("120" -> 12.0, "90" -> 9.0)
        return int(text[:-1]), int(text[-1])
    raise ValueError("not a compute capability: %r" % (cap,))


def arch_coverage(arch_list, compute_cap):
    """Can code built for ``arch_list`` run on a GPU of ``compute_cap``?

    Rules (CUDA binary compatibility):

    * ``sm_XY`` SASS runs on capability X.Y and on later minors of the same major (X.Z, Z >= Y); the
      arch-specific ``sm_XYa`` runs only on exactly X.Y (``sm_120a`` never covers 12.1); the family-specific
      ``sm_XYf`` (CUDA >= 12.9) runs on X.Y and on later minors of the same major (kind ``family``).
    * ``compute_XY`` PTX is JIT-compiled by the driver for any capability >= X.Y (slow first start, and no
      arch-specific ``a`` features such as FP4 MMA) -- accepted with a warning; ``compute_XYa`` PTX only for
      exactly X.Y and ``compute_XYf`` for the same major.

    :param arch_list: e.g. ``torch.cuda.get_arch_list()`` -> ``['sm_80', 'sm_90', 'sm_120', 'compute_120']``.
    :param compute_cap: ``"12.0"`` and the other spellings :func:`compute_cap_tuple` accepts.
    :returns: dict ``covered`` (bool), ``via`` (the entry that covers it or None), ``kind`` ("exact", "sass",
        "family", "ptx" or None), ``compute_cap`` ("12.0"), ``warning`` (str or None), ``message`` (str).
    """
    major, minor = compute_cap_tuple(compute_cap)
    cap = "%d.%d" % (major, minor)
    sass_same_major, family, ptx = [], [], []
    for entry in arch_list or []:
        match = _ARCH_RE.match(str(entry).strip())
        if not match:
            continue
        kind, digits, suffix = match.groups()
        amaj, amin = int(digits[:-1]), int(digits[-1])
        if kind == "sm":
            if (amaj, amin) == (major, minor) and suffix != "f":
                return {"covered": True, "via": entry, "kind": "exact", "compute_cap": cap, "warning": None,
                        "message": "%s has SASS for compute capability %s" % (entry, cap)}
            if not suffix and amaj == major and amin < minor:
                sass_same_major.append((amin, entry))
            elif suffix == "f" and amaj == major and amin <= minor:
                family.append((amin, entry))
        elif suffix == "a":
            if (amaj, amin) == (major, minor):
                ptx.append(((amaj, amin), entry))
        elif suffix == "f":
            if amaj == major and amin <= minor:
                ptx.append(((amaj, amin), entry))
        elif (amaj, amin) <= (major, minor):
            ptx.append(((amaj, amin), entry))
    if sass_same_major:
        entry = max(sass_same_major)[1]
        return {"covered": True, "via": entry, "kind": "sass", "compute_cap": cap, "warning": None,
                "message": "%s SASS is binary-compatible with compute capability %s" % (entry, cap)}
    if family:
        entry = max(family)[1]
        return {"covered": True, "via": entry, "kind": "family", "compute_cap": cap, "warning": None,
                "message": "%s family SASS runs on compute capability %s" % (entry, cap)}
    if ptx:
        entry = max(ptx)[1]
        warning = ("only PTX (%s) covers compute capability %s: the driver JIT-compiles it on first use and "
                   "arch-specific features (sm_%d%da FP4 MMA) are unavailable" % (entry, cap, major, minor))
        return {"covered": True, "via": entry, "kind": "ptx", "compute_cap": cap, "warning": warning,
                "message": warning}
    return {"covered": False, "via": None, "kind": None, "compute_cap": cap, "warning": None,
            "message": "no sm_%d%d SASS or compute_XY<=%d%d PTX in %s: kernels fail with 'no kernel image is "
                       "available for execution on the device'" % (major, minor, major, minor, list(arch_list or []))}


def cuda_release_mismatches(dists, cuda_version):
    """CUDA pip dists whose version does not start with the requested major.minor (B08: mixed minors break ptxas).

    :param dists: mapping dist name -> installed version (None/"" when not installed).
    :param cuda_version: ``"13.0"``.
    :returns: sorted list of ``{"name", "version", "expected"}`` for missing or mismatched dists.
    """
    want = major_minor(cuda_version)
    bad = []
    for name in sorted(dists):
        version = dists[name]
        if not version:
            bad.append({"name": name, "version": None, "expected": "%d.%d.*" % want})
            continue
        try:
            have = major_minor(str(version).split("+", maxsplit=1)[0])
        except ValueError:
            have = None
        if have != want:
            bad.append({"name": name, "version": str(version), "expected": "%d.%d.*" % want})
    return bad
