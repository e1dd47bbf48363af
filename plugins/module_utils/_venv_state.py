# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang contributors
# Apache-2.0 (see LICENSE)
"""Read a venv's installed distributions in one call, and keep stamps keyed on a step's inputs.

A converged host should skip the expensive no-op work of a re-run (pip resolving pins that are already
installed, imports of torch/flashinfer/sgl_kernel, SGLang's parser introspection, the nvcc compile proof).
A *stamp* is a small JSON file written after such a step succeeded; the step is skipped when the stamp still
stands for everything the step depends on. A stamp file alone is never trusted: :func:`evaluate` compares it with
what is really on the host *now*:

* ``inputs``: whatever the caller says the step depends on (pins, index URLs, argv, arch ...), hashed
  canonically (:func:`inputs_digest`), together with the interpreter's real path;
* the venv's live state, read by the one venv metadata reader (:mod:`_venv_metadata`, run with the venv's
  interpreter, importlib.metadata only, nothing imported): every requirement in ``requirements`` must be installed
  at a version that satisfies it, its dependency closure (``Requires-Dist``, markers evaluated, extras followed)
  must be complete, and the digest of that closure's ``name==version`` plus the sha256 of each distribution's
  ``RECORD`` (the file list with per-file hashes that pip writes) must equal the stamp's: a hand-removed, up- or
  downgraded or reinstalled package therefore re-triggers the step. With ``digest="named"`` the digest covers only
  the distributions named in ``requirements`` and ``names`` (the closure is still checked strictly): a step whose
  dependencies other roles later move within their specifiers (FlashInfer's, after sglang_source) is no miss then;
* ``files``: sha256 of host files (for example ``nvcc`` and ``ptxas``) that the step's result depends on.

Shapes (all JSON-serialisable):

* reader output: ``{"python": "3.12.3", "executable": "/opt/v/bin/python", "packaging": true,
  "distributions": {name: version}, "closure": {name: {"version": str, "record": sha256 hex or null,
  "named": bool}}, "unsatisfied": [str], "missing": [str], ...}`` (names normalised by :func:`normalize`;
  :mod:`_venv_metadata` has the whole shape);
* stamp file: ``{"format": 1, "inputs": sha256 hex, "closure": sha256 hex, "files": {path: sha256 hex},
  "result": any}``.
"""

from __future__ import annotations

import hashlib
import json
import os

from ansible_collections.blackwell.sglang.plugins.module_utils._venv_metadata import canonicalize_name, read_venv

STAMP_FORMAT = 1

# What a stamp digests of the reader's closure: every distribution of it, or only those the caller named
# (requirements and names; their dependencies are still checked strictly, but not digested).
DIGESTS = ("closure", "named")


def normalize(name):
    """PEP 503 name normalisation: ``Flashinfer_Python`` -> ``flashinfer-python`` (:func:`_venv_metadata.canonicalize_name`)."""
    return canonicalize_name(name)


def inputs_digest(inputs, python=None):
    """sha256 hex of the canonical JSON of ``inputs`` (any JSON value) and the interpreter's real path.

    :param python: interpreter path or None; resolved with :func:`os.path.realpath` so that a venv re-created
        on a different base interpreter changes the digest.
    """
    payload = {"inputs": inputs, "python": os.path.realpath(python) if python else None}
    return hashlib.sha256(json.dumps(payload, sort_keys=True, separators=(",", ":")).encode("utf-8")).hexdigest()


def closure_digest(closure, digest="closure"):
    """sha256 hex of a reader ``closure`` mapping ``{name: {"version", "record", "named"}}`` (order-independent).

    :param digest: ``closure`` digests every entry; ``named`` only the entries that are themselves one of the
        requirements or names (a dependency that another step later up- or downgrades within its specifier is then
        no miss; its presence and version are still checked strictly by :func:`evaluate`).
    :raises ValueError: on another ``digest``.
    """
    if digest not in DIGESTS:
        raise ValueError("digest must be one of %s, got %r" % (", ".join(DIGESTS), digest))
    items = sorted((name, item.get("version"), item.get("record")) for name, item in (closure or {}).items()
                   if digest == "closure" or item.get("named"))
    return hashlib.sha256(json.dumps(items, separators=(",", ":")).encode("utf-8")).hexdigest()


def file_digest(path, chunk=1 << 20):
    """sha256 hex of the file at ``path``, or None when it does not exist (or is not readable)."""
    digest = hashlib.sha256()
    try:
        with open(path, "rb") as handle:
            for block in iter(lambda: handle.read(chunk), b""):
                digest.update(block)
    except (IOError, OSError):
        return None
    return digest.hexdigest()


def read_state(run, python, requirements=(), names=()):
    """Read the venv of ``python`` with the one reader (:func:`_venv_metadata.read_venv`); returns its output or raises.

    :param run: ``run(argv) -> (rc, stdout, stderr)`` (AnsibleModule.run_command or a test double of it).
    :param requirements: PEP 508 strings that must be satisfied (their closure is digested).
    :param names: further distribution names whose installed dependency closure is digested as it is, without
        a version or completeness check (absent ones are digested as absent: installing one later is a miss).
    :raises RuntimeError: the interpreter failed or printed something that is not the reader's JSON.
    """
    return read_venv(run, python, {"requirements": list(requirements), "names": list(names)})


def build_stamp(inputs_hex, state=None, files=None, result=None, digest="closure"):
    """The stamp dict written after a step succeeded (``state`` is :func:`read_state`'s output or None).

    :param digest: what of the closure is digested (:func:`closure_digest`).
    """
    return {"format": STAMP_FORMAT, "inputs": inputs_hex,
            "closure": closure_digest(state["closure"], digest) if state else None,
            "files": dict(sorted((files or {}).items())), "result": result}


def load_stamp(path):
    """The stamp at ``path`` as a dict, or None when it is missing, unreadable, not UTF-8 JSON or not a stamp of this
    format (a stamp only saves work: one that cannot be read is never trusted, the step runs and writes it again)."""
    try:
        with open(path, encoding="utf-8") as handle:
            stamp = json.load(handle)
    except (IOError, OSError, ValueError):
        return None
    return stamp if isinstance(stamp, dict) and stamp.get("format") == STAMP_FORMAT else None


def evaluate(stamp, inputs_hex, state=None, files=None, digest="closure"):
    """Compare a loaded stamp with the live host; returns ``(matched: bool, reasons: [str])``.

    With ``digest="named"`` only the named distributions are compared by digest; the whole closure is still
    checked: a missing or unsatisfied requirement anywhere in it is a miss.

    Every reason names what differs, so a miss is explained in the task output. ``state`` None means no venv
    is part of the step; ``files`` maps path -> live sha256 (None for a missing file).
    """
    reasons = []
    if stamp is None:
        reasons.append("no stamp")
    elif stamp.get("inputs") != inputs_hex:
        reasons.append("the inputs changed")
    if state is not None:
        if not state.get("packaging"):
            reasons.append("the venv has no packaging (nor pip._vendor.packaging) to compare versions with")
        for item in state.get("missing") or []:
            reasons.append("not installed: %s" % item)
        for item in state.get("unsatisfied") or []:
            reasons.append("not satisfied: %s" % item)
        if stamp is not None and stamp.get("closure") != closure_digest(state.get("closure"), digest):
            reasons.append("the installed distributions changed")
    for path, digest in sorted((files or {}).items()):
        if digest is None:
            reasons.append("missing file: %s" % path)
        elif stamp is not None and (stamp.get("files") or {}).get(path) != digest:
            reasons.append("file changed: %s" % path)
    return (not reasons), reasons


def write_stamp(path, stamp):
    """Write ``stamp`` to ``path`` atomically (0644, parent created 0755); returns True when the content changed."""
    text = json.dumps(stamp, sort_keys=True, indent=1) + "\n"
    try:
        with open(path, "rb") as handle:            # bytes: an old stamp that is not UTF-8 is simply different
            if handle.read() == text.encode("utf-8"):
                return False
    except (IOError, OSError):
        pass
    parent = os.path.dirname(path)
    if parent and not os.path.isdir(parent):
        os.makedirs(parent, 0o755)
    tmp = "%s.tmp.%d" % (path, os.getpid())
    with open(tmp, "w", encoding="utf-8") as handle:
        handle.write(text)
    os.chmod(tmp, 0o644)
    os.rename(tmp, path)
    return True
