# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang contributors
# Apache-2.0 (see LICENSE)
"""Version parsing shared by modules, filters and roles.

Every comparison goes through :mod:`packaging.version` (PEP 440) or numeric tuples, never string order:
``2.12.0.dev20260307+cu130`` sorts *before* ``2.12.0`` in PEP 440 (field report B20), so "at least X.Y" gates
compare the ``release`` tuple instead.

``packaging`` is imported lazily so that this module can be shipped to targets that lack it; callers get
:class:`MissingPackaging` and report it (modules use ``missing_required_lib('packaging')``).
"""

from __future__ import annotations

import re

try:
    from packaging.version import InvalidVersion, Version
    HAS_PACKAGING = True
    PACKAGING_IMPORT_ERROR = None
except ImportError as exc:  # pragma: no cover - exercised only on hosts without packaging
    Version = None
    InvalidVersion = ValueError
    HAS_PACKAGING = False
    PACKAGING_IMPORT_ERROR = exc


class MissingPackaging(RuntimeError):
    """Raised when :mod:`packaging` is not importable on this Python."""


def _need_packaging():
    if not HAS_PACKAGING:
        raise MissingPackaging("the Python library 'packaging' is required: %s" % PACKAGING_IMPORT_ERROR)


# nvcc prints e.g. "Cuda compilation tools, release 13.0, V13.0.88"; the "Build cuda_..." line changed format
# across releases (B21), so only the release/V triple is trusted.
_NVCC_RE = re.compile(r"release (\d+)\.(\d+), V(\d+)\.(\d+)\.(\d+)")
_CUDA_LOCAL_RE = re.compile(r"^cu(\d+)$")


def parse_nvcc_version(text):
    """Parse ``nvcc --version`` output.

    :param text: the whole stdout of ``nvcc --version``.
    :returns: ``(major, minor, patch)`` as ints, e.g. ``(13, 0, 88)``.
    :raises ValueError: when no ``release X.Y, VX.Y.Z`` line is present.
    """
    match = _NVCC_RE.search(text or "")
    if not match:
        raise ValueError("no 'release X.Y, VX.Y.Z' line in nvcc output")
    return int(match.group(3)), int(match.group(4)), int(match.group(5))


def cuda_tag_to_version(tag):
    """Map a wheel local tag such as ``cu130`` / ``cu128`` / ``cu1210`` to ``"13.0"`` / ``"12.8"`` / ``"12.10"``.

    The tag is the CUDA major followed by the minor with no separator; majors are two digits from CUDA 10 on.
    Returns None for tags that are not CUDA tags (``cpu``, ``git1a2b3c4``, ``rocm6.2``).
    """
    match = _CUDA_LOCAL_RE.match(tag or "")
    if not match:
        return None
    digits = match.group(1)
    if len(digits) < 3:
        return None
    return "%d.%d" % (int(digits[:2]), int(digits[2:]))


def parse_torch_version(text):
    """Describe a torch version string as PEP 440 sees it.

    Nightly ``2.12.0.dev20260307+cu130``, stable ``2.11.0+cu130``, CPU ``2.13.0+cpu`` and source builds
    ``2.10.0a0+git1a2b3c4`` all parse. Strings that are not PEP 440 (``2.0.0.nv23.05``) raise ValueError.

    :returns: dict with ``version`` (normalised str), ``release`` (tuple of ints), ``major_minor`` ("2.12"),
        ``dev`` (int or None), ``local`` (str or None), ``cuda`` ("13.0" from a ``cuNNN`` local tag, else None),
        ``is_nightly`` (bool: a ``.devN`` build), ``source_build`` (bool: ``+git…`` local tag).
    :raises ValueError: on a string PEP 440 rejects.
    :raises MissingPackaging: when ``packaging`` is unavailable.
    """
    _need_packaging()
    try:
        ver = Version(str(text).strip())
    except InvalidVersion as exc:
        raise ValueError("not a PEP 440 version: %r (%s)" % (text, exc))
    local = ver.local
    return {
        "version": str(ver),
        "release": tuple(ver.release),
        "major_minor": "%d.%d" % (ver.release[0], ver.release[1] if len(ver.release) > 1 else 0),
        "dev": ver.dev,
        "local": local,
        "cuda": cuda_tag_to_version(local) if local else None,
        "is_nightly": ver.dev is not None,
        "source_build": bool(local and local.startswith("git")),
    }


def release_at_least(text, minimum):
    """True when the *release* part of ``text`` is >= ``minimum`` (pre/dev/local segments ignored).

    ``release_at_least("2.12.0.dev20260307+cu130", "2.12")`` is True although
    ``Version("2.12.0.dev20260307") < Version("2.12.0")``.
    """
    _need_packaging()
    have = Version(str(text)).release
    want = Version(str(minimum)).release
    width = max(len(have), len(want))
    return tuple(have) + (0,) * (width - len(have)) >= tuple(want) + (0,) * (width - len(want))


def compare_versions(left, right):
    """Three-way PEP 440 comparison: -1, 0 or 1."""
    _need_packaging()
    a, b = Version(str(left)), Version(str(right))
    return (a > b) - (a < b)


def major_minor(text):
    """``"13.0.88"`` / ``"13.0"`` / ``"13"`` -> ``(13, 0)`` as ints (minor 0 when absent).

    :raises ValueError: when the first component is not an integer.
    """
    parts = str(text).strip().split(".")
    major = int(parts[0])
    minor = int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else 0
    return major, minor
