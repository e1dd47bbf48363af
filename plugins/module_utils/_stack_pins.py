# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang contributors
# Apache-2.0 (see LICENSE)
"""SGLang's own requirements against a stack's pins, and the torch companions that pair with a torch build.

A *stack* is one mapping of ``inventories/<name>/group_vars/all/stack_<name>.yml`` (``torch``, ``torchvision``,
``torchaudio``, ``flashinfer``, ``sgl_kernel``, ``sgl_kernel_distribution``, ``sglang_requirement_overrides``, ...).
SGLang's ``python/pyproject.toml`` ``[project] dependencies`` are PEP 508 strings; they are evaluated with
:mod:`packaging` (markers for the deployment target, Linux x86_64 CPython 3.11 unless told otherwise) against the pins
of the distributions other roles own (``sglang_source_protected_packages``: sglang_source never installs them).

* :func:`resolve` names every problem: a protected distribution SGLang requires that the stack does not pin
  (*missing*), a pin outside SGLang's specifier without an ``sglang_requirement_overrides`` entry (*conflict*), an
  override that is no longer needed (*stale override*), and overrides without a reason.
* :func:`companion_problems` checks torchvision / torchaudio against torch: the same CUDA build tag, the same nightly
  date, and the release lines that pair (torchvision 0.(M+15) with torch 2.M; torchaudio minor by minor up to its last
  line 2.11, which supports torch >= 2.11).
* :func:`torchvision_for` / :func:`torchaudio_for` give the companion version of a torch version by those rules.

Used by ``tests/unit/source/test_stack_pins.py`` and by the stack refresh (``_stack_refresh``). ``packaging`` is
imported lazily (:class:`MissingPackaging` when absent).
"""

from __future__ import annotations

import fnmatch
import re

try:
    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.utils import canonicalize_name
    from packaging.version import InvalidVersion, Version
    HAS_PACKAGING = True
    PACKAGING_IMPORT_ERROR = None
except ImportError as exc:  # pragma: no cover - only on hosts without packaging
    HAS_PACKAGING = False
    PACKAGING_IMPORT_ERROR = exc
    InvalidRequirement = InvalidVersion = ValueError
    Requirement = Version = None

    def canonicalize_name(name):
        return re.sub(r"[-_.]+", "-", name).lower()


class MissingPackaging(RuntimeError):
    """The Python library ``packaging`` is not importable here."""


def need_packaging():
    if not HAS_PACKAGING:
        raise MissingPackaging("the Python library 'packaging' is required: %s" % PACKAGING_IMPORT_ERROR)


# The deployment target (README: Debian 12 / Ubuntu 22.04+, Python 3.11, x86_64 servers).
TARGET = {"sys_platform": "linux", "platform_system": "Linux", "platform_machine": "x86_64", "os_name": "posix",
          "python_version": "3.11", "python_full_version": "3.11.2", "implementation_name": "cpython",
          "platform_python_implementation": "CPython", "extra": ""}

# roles/sglang_source/defaults/main.yml sglang_source_protected_packages without sglang itself (a unit test keeps
# the two lists equal).
PROTECTED = ("torch", "torchaudio", "torchvision", "pytorch-triton", "triton", "triton-nightly", "sgl-kernel",
             "sglang-kernel", "flashinfer-*")

FLASHINFER_DISTS = ("flashinfer-python", "flashinfer-cubin", "flashinfer-jit-cache")
# torchaudio's last release line (stable ABI, "supports torch>=2.11", pytorch/audio#4212)
TORCHAUDIO_LAST_MINOR = 11


def target_environment(machine="x86_64", python_version="3.11"):
    """Marker environment of the deployment target."""
    env = dict(TARGET)
    env["platform_machine"] = machine
    env["python_version"] = python_version
    env["python_full_version"] = python_version + ".0"
    return env


def parse_requirement(line, where="requirement"):
    """:class:`packaging.requirements.Requirement` of a PEP 508 string; ValueError naming ``where`` otherwise."""
    need_packaging()
    try:
        return Requirement(line)
    except InvalidRequirement as exc:
        raise ValueError("%s %r is not a PEP 508 requirement: %s" % (where, line, exc))


def parse_version(text, where="version"):
    need_packaging()
    try:
        return Version(str(text).strip())
    except InvalidVersion:
        raise ValueError("%s %r is not a PEP 440 version" % (where, text))


def applicable(requirements, env=None):
    """The requirements (Requirement objects) whose marker holds on the target, in order."""
    env = env or TARGET
    out = []
    for line in requirements:
        req = parse_requirement(line) if isinstance(line, str) else line
        if req.marker is not None and not req.marker.evaluate(env):
            continue
        out.append(req)
    return out


def exact_pin(req):
    """The version of a requirement that is exactly one ``==`` (or ``===``) specifier without a wildcard, else None."""
    specs = list(req.specifier)
    if len(specs) == 1 and specs[0].operator in ("==", "===") and not specs[0].version.endswith(".*"):
        return specs[0].version
    return None


def is_protected(name, protected=PROTECTED):
    name = canonicalize_name(name)
    return any(fnmatch.fnmatchcase(name, canonicalize_name(p)) for p in protected)


def pinned_versions(pins):
    """Distribution (canonical name) -> version string the stack installs through another role."""
    out = {"torch": pins["torch"], "flashinfer-python": pins["flashinfer"], "flashinfer-cubin": pins["flashinfer"],
           "flashinfer-jit-cache": pins["flashinfer"],
           canonicalize_name(pins["sgl_kernel_distribution"]): pins["sgl_kernel"]}
    for name in ("torchvision", "torchaudio"):
        if pins.get(name):
            out[name] = pins[name]
    return out


def resolve(requirements, pins, protected=PROTECTED, env=None):
    """Problems (list of str) of the stack ``pins`` against SGLang's ``requirements`` (PEP 508 strings)."""
    need_packaging()
    pinned = pinned_versions(pins)
    overrides = dict((canonicalize_name(k), v) for k, v in (pins.get("sglang_requirement_overrides") or {}).items())
    problems, required = [], set()
    for req in applicable(requirements, env):
        line = str(req)
        name = canonicalize_name(req.name)
        if not is_protected(name, protected):
            continue
        required.add(name)
        if name not in pinned:
            problems.append("missing: SGLang requires %s, the stack pins no %s" % (line, name))
            continue
        ok = req.specifier.contains(Version(pinned[name]), prereleases=True)
        if not ok and name not in overrides:
            problems.append("conflict: SGLang requires %s, the stack pins %s==%s (no sglang_requirement_overrides entry)"
                            % (line, name, pinned[name]))
        if ok and name in overrides:
            problems.append("stale override: %s==%s satisfies SGLang's %s" % (name, pinned[name], line))
    for name, reason in sorted(overrides.items()):
        if name not in required:
            problems.append("override of %s, which SGLang does not require" % name)
        if not str(reason or "").strip():
            problems.append("override of %s without a reason" % name)
    return problems


def _companion(torch, major, minor, patch):
    """A companion version string of ``torch`` (Version): nightlies take torch's ``.devN`` and patch 0."""
    text = "%d.%d.%d" % (major, minor, 0 if torch.dev is not None else patch)
    if torch.dev is not None:
        text += ".dev%d" % torch.dev
    if torch.local:
        text += "+" + torch.local
    return text


def torchvision_for(torch_version):
    """torchvision of a torch build: 0.(M+15).P with torch's nightly date and CUDA tag (0.28.0+cu130 for 2.13.0+cu130).

    :raises ValueError: torch is not a 2.x version (no known torchvision line pairs with it).
    """
    torch = parse_version(torch_version, "torch")
    if torch.major != 2 or len(torch.release) < 2:
        raise ValueError("no torchvision release line pairs with torch %s (torchvision 0.(M+15) pairs with torch 2.M)"
                         % torch)
    patch = torch.release[2] if len(torch.release) > 2 else 0
    return _companion(torch, 0, torch.minor + 15, patch)


def torchaudio_for(torch_version):
    """torchaudio of a torch build: the same minor up to 2.11, then 2.11 (2.11.0.dev<date>+cu130 for a 2.12 nightly)."""
    torch = parse_version(torch_version, "torch")
    if torch.major != 2 or len(torch.release) < 2:
        raise ValueError("no torchaudio release line pairs with torch %s" % torch)
    patch = torch.release[2] if len(torch.release) > 2 else 0
    if torch.minor > TORCHAUDIO_LAST_MINOR:
        return _companion(torch, 2, TORCHAUDIO_LAST_MINOR, 0)
    return _companion(torch, 2, torch.minor, patch)


def pairs_with_torch(name, version, torch_version):
    """None when ``name`` (torchvision/torchaudio) at ``version`` pairs with ``torch_version``, else why not."""
    v = parse_version(version, name)
    torch = parse_version(torch_version, "torch")
    if name == "torchvision":
        if (v.major, v.minor) != (0, torch.minor + 15) or torch.major != 2:
            return ("torchvision %s does not pair with torch %s (0.(M+15) <-> 2.M: torch %s needs torchvision 0.%d)"
                    % (v, torch, torch.public, torch.minor + 15))
    elif name == "torchaudio":
        if (v.major, v.minor) != (2, min(torch.minor, TORCHAUDIO_LAST_MINOR)) or torch.major != 2:
            return ("torchaudio %s does not pair with torch %s (torchaudio 2.M pairs with torch 2.M up to its last "
                    "line 2.%d, which supports torch >= 2.%d)" % (v, torch, TORCHAUDIO_LAST_MINOR, TORCHAUDIO_LAST_MINOR))
    return None


def companion_problems(pins):
    """torchvision / torchaudio must be builds for the stack's torch (same CUDA tag; nightlies of the same date)."""
    need_packaging()
    torch = Version(pins["torch"])
    problems = []
    for name in ("torchvision", "torchaudio"):
        if not pins.get(name):
            problems.append("%s is not pinned" % name)
            continue
        v = Version(pins[name])
        if v.local != torch.local:
            problems.append("%s %s is not a %s build like torch %s" % (name, v, torch.local, torch))
        if (v.dev is None) != (torch.dev is None) or (torch.dev is not None and v.dev != torch.dev):
            problems.append("%s %s is not of torch %s's nightly date" % (name, v, torch))
    for name in ("torchvision", "torchaudio"):
        why = pairs_with_torch(name, pins.get(name) or "0", pins["torch"])
        if why:
            problems.append(why)
    return problems


__all__ = ["TARGET", "PROTECTED", "FLASHINFER_DISTS", "MissingPackaging", "need_packaging", "target_environment",
           "parse_requirement", "parse_version", "applicable", "exact_pin", "is_protected", "pinned_versions",
           "resolve", "torchvision_for", "torchaudio_for", "pairs_with_torch", "companion_problems",
           "canonicalize_name"]
