# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang contributors
# Apache-2.0 (see LICENSE)
"""CUDA toolchain / torch build checks shared by the preflight, the toolchain module and filter.

Pure Python (stdlib only, plus :mod:`._versions`), so it runs on the controller and in unit tests.

* :func:`gpu_arch_list` -- ``nvcc --list-gpu-arch`` text -> ``["compute_75", ...]`` (B04: check the list, do not
  infer support from a version number).
* :func:`arch_coverage` -- does ``torch.cuda.get_arch_list()`` (or any sm_/compute_ list) run on a GPU of compute
  capability X.Y (B14)?
* :func:`apt_repository` -- NVIDIA's CUDA apt repository directory (``debian12/x86_64``) for a distribution, version
  and architecture (B33); the one lookup of the preflight and of cuda_toolchain's apt method.
"""

from __future__ import annotations

import re

from ._versions import major_minor

_ARCH_RE = re.compile(r"^(sm|compute)_(\d+)([a-z]?)$")
_LIST_ARCH_RE = re.compile(r"\bcompute_(\d+)([a-z]?)\b")


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


def _version_keys(version):
    """Keys to look a distribution version up by, most specific first: "12.11" -> ["12.11", "12"]."""
    parts = str(version or "").split(".")
    keys = [".".join(parts[:n]) for n in (len(parts), 2, 1) if n <= len(parts)]
    return [k for i, k in enumerate(keys) if k and k not in keys[:i]]


def _composed_slug(distribution, version):
    """The slug NVIDIA's naming would give an unmapped distribution (only named in messages): "popos2204"."""
    name = re.sub(r"[^a-z0-9]", "", str(distribution or "").lower())
    parts = [p for p in str(version or "").split(".") if p]
    return name + "".join(parts[:1] if name == "debian" else parts[:2])    # Debian: by its major release


def apt_repository(distribution, version, architecture, slug_map=None, arch_map=None, slug="", supported=None):
    """NVIDIA's CUDA apt repository directory for a host (field report B33).

    The slug is ``slug`` when set (a derivative such as Pop!_OS on its Ubuntu base, or a mirror); else
    ``slug_map[distribution]`` looked up by the full version, then major.minor, then the major version: Debian point
    releases report ``12.11`` (Ansible's ``distribution_version``) for the repository ``debian12``; Ubuntu reports
    ``24.04``.

    :param distribution: Ansible's ``distribution`` ("Debian", "Ubuntu").
    :param version: Ansible's ``distribution_version`` ("12.11", "24.04").
    :param architecture: Ansible's ``architecture`` ("x86_64", "aarch64").
    :param slug_map: ``{"Debian": {"12": "debian12"}, "Ubuntu": {"24.04": "ubuntu2404"}}`` (the stack contract's
        ``sglang_stack_cuda_apt_distro_slugs``).
    :param arch_map: ``{"x86_64": "x86_64", "aarch64": "sbsa"}`` (``sglang_stack_cuda_apt_arch_map``).
    :param slug: a forced slug ("" = derived).
    :param supported: optional ``{architecture: [slug, ...]}``: the slugs NVIDIA publishes per architecture; a slug
        outside it is a problem too.
    :returns: dict ``slug`` (the slug, or the one the name would compose to when unmapped, for messages), ``arch``
        (the repository directory, "" when unknown), ``path`` (``<slug>/<arch>``), ``problem`` ("" or why there is
        no repository, naming the distribution, the version, the architecture and the known choices).
    """
    slug_map = slug_map or {}
    arch_map = arch_map or {}
    by_version = slug_map.get(distribution) or {}
    found = str(slug or "") or next((by_version[k] for k in _version_keys(version) if k in by_version), "")
    repo_slug = found or _composed_slug(distribution, version)
    repo_arch = str(arch_map.get(architecture) or "")
    label = "%s %s (%s)" % (distribution or "unknown distribution", version or "?", architecture or "unknown")
    if supported is not None:
        choices = "published: " + ", ".join("%s/%s" % (s, arch_map.get(a, a))
                                            for a, slugs in sorted(supported.items()) for s in slugs or [])
    else:
        choices = "known slugs: " + ", ".join(sorted({s for versions in slug_map.values()
                                                      for s in (versions or {}).values()}))
    problem = ""
    if not found:
        problem = "%s maps to no NVIDIA CUDA apt repository (it would be '%s'; %s)" % (label, repo_slug, choices)
    elif not repo_arch:
        problem = "%s: NVIDIA publishes no CUDA apt repository for architecture '%s' (known: %s)" % (
            label, architecture, ", ".join(sorted(arch_map)) or "none")
    elif supported is not None and repo_slug not in (supported.get(architecture) or []):
        problem = "%s: NVIDIA's CUDA apt repository has no '%s/%s' (%s)" % (label, repo_slug, repo_arch, choices)
    return {"slug": repo_slug, "arch": repo_arch, "path": "%s/%s" % (repo_slug, repo_arch or architecture),
            "problem": problem}
