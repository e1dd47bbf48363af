# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang contributors
# Apache-2.0 (see LICENSE)
"""Release keys: one stable id per stack (docs/release.md).

A release is everything a converge stages under ``<root>/releases/<id>``: the SGLang checkout, the venv and the
kernel wheel. Its id is the first hex digits of the SHA-256 of a canonical JSON document built from the stack
inputs, so two hosts (or two runs) with the same inputs get the same directory, and any input change stages a new
one next to the running release instead of over it.

Canonical form (schema ``1``):

* ``sglang_ref``: the ref as configured (a commit id is lower-cased; branch/tag names kept verbatim).
* ``kernel_patches``: sorted, de-duplicated list of patch identifiers (a mapping entry is written as sorted JSON).
* ``cuda_version``: ``"major.minor"`` (``"13"`` -> ``"13.0"``, ``"13.0.88"`` -> ``"13.0"``).
* ``torch_version`` / ``flashinfer_version``: PEP 440 normalised (``2.12.0.dev20260307+cu130``), "" when unset.
* ``cuda_archs``: sorted, de-duplicated, lower-cased (``["12.0a"]``).
* ``extra``: any further mapping the operator adds (JSON-serialisable), keys sorted.

Pure Python; ``packaging`` is used when present for version normalisation (ansible-core depends on it).
"""

from __future__ import annotations

import hashlib
import json
import re

from ansible_collections.blackwell.sglang.plugins.module_utils._versions import major_minor

try:
    from packaging.version import InvalidVersion, Version
except ImportError:  # pragma: no cover - the controller always has packaging (ansible-core depends on it)
    Version = None
    InvalidVersion = ValueError

SCHEMA = 1
FIELDS = ("sglang_ref", "kernel_patches", "cuda_version", "torch_version", "cuda_archs", "flashinfer_version",
          "extra")
_HEX_RE = re.compile(r"^[0-9a-fA-F]{7,40}$")


def _pep440(text):
    text = ("" if text is None else str(text)).strip()
    if not text or Version is None:
        return text
    try:
        return str(Version(text))
    except InvalidVersion:
        return text


def _str_list(value, lower=False):
    if value is None:
        return []
    if isinstance(value, str):
        value = [value]
    items = set()
    for v in value:
        text = json.dumps(v, sort_keys=True) if isinstance(v, (dict, list)) else str(v).strip()
        items.add(text.lower() if lower else text)
    return sorted(i for i in items if i)


def canonical_inputs(inputs):
    """Normalise the stack inputs (see the module doc); unknown keys raise ValueError.

    :param inputs: mapping with any of :data:`FIELDS`.
    """
    inputs = dict(inputs or {})
    unknown = sorted(set(inputs) - set(FIELDS))
    if unknown:
        raise ValueError("unknown release key inputs: %s (known: %s)" % (", ".join(unknown), ", ".join(FIELDS)))
    ref = str(inputs.get("sglang_ref") or "").strip()
    if not ref:
        raise ValueError("sglang_ref is required for a release key")
    if _HEX_RE.match(ref):
        ref = ref.lower()
    cuda = str(inputs.get("cuda_version") or "").strip()
    if cuda:
        cuda = "%d.%d" % major_minor(cuda)
    extra = inputs.get("extra") or {}
    if not isinstance(extra, dict):
        raise ValueError("extra must be a mapping, got %s" % type(extra).__name__)
    return {
        "schema": SCHEMA,
        "sglang_ref": ref,
        "kernel_patches": _str_list(inputs.get("kernel_patches")),
        "cuda_version": cuda,
        "torch_version": _pep440(inputs.get("torch_version")),
        "cuda_archs": _str_list(inputs.get("cuda_archs"), lower=True),
        "flashinfer_version": _pep440(inputs.get("flashinfer_version")),
        "extra": json.loads(json.dumps(extra, sort_keys=True)),
    }


def canonical_json(inputs):
    """The exact text that is hashed: compact JSON with sorted keys."""
    return json.dumps(canonical_inputs(inputs), sort_keys=True, separators=(",", ":"))


def release_id(inputs, length=12):
    """First ``length`` hex digits of SHA-256 over :func:`canonical_json` (``length`` 8..64)."""
    length = int(length)
    if not 8 <= length <= 64:
        raise ValueError("length must be between 8 and 64, got %d" % length)
    return hashlib.sha256(canonical_json(inputs).encode("utf-8")).hexdigest()[:length]
