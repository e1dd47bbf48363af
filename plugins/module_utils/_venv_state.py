# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang contributors
# Apache-2.0 (see LICENSE)
"""Read a venv's installed distributions in one call, and keep stamps keyed on a step's inputs (issue 19).

A converged host should skip the expensive no-op work of a re-run (pip resolving pins that are already
installed, imports of torch/flashinfer/sgl_kernel, SGLang's parser introspection, the nvcc compile proof).
A *stamp* is a small JSON file written after such a step succeeded; the step is skipped when the stamp still
stands for everything the step depends on. A stamp file alone is never trusted: :func:`evaluate` compares it with
what is really on the host *now*:

* ``inputs``: whatever the caller says the step depends on (pins, index URLs, argv, arch ...), hashed
  canonically (:func:`inputs_digest`), together with the interpreter's real path;
* the venv's live state, read by :data:`READER` (run with the venv's interpreter, importlib.metadata only,
  nothing imported): every requirement in ``requirements`` must be installed at a version that satisfies it,
  its dependency closure (``Requires-Dist``, markers evaluated, extras followed) must be complete, and the
  digest of that closure's ``name==version`` plus the sha256 of each distribution's ``RECORD`` (the file
  list with per-file hashes that pip writes) must equal the stamp's: a hand-removed, up- or downgraded or
  reinstalled package therefore re-triggers the step;
* ``files``: sha256 of host files (for example ``nvcc`` and ``ptxas``) that the step's result depends on.

The reader is the one venv metadata reader that the stamps use (issue 18 lists three near-copies in
roles/sglang_release/files/venv_inventory.py, roles/flashinfer/files/dist_versions.py and
roles/sglang_source/files/sglang_env_state.py; :func:`read_state` returns every distribution's version too, so
callers can drop a separate read).

Shapes (all JSON-serialisable):

* reader output: ``{"python": "3.12.3", "executable": "/opt/v/bin/python", "packaging": true,
  "distributions": {name: version}, "closure": {name: {"version": str, "record": sha256 hex or null}},
  "unsatisfied": [str], "missing": [str]}`` (names normalised by :func:`normalize`);
* stamp file: ``{"format": 1, "inputs": sha256 hex, "closure": sha256 hex, "files": {path: sha256 hex},
  "result": any}``.
"""

from __future__ import annotations

import hashlib
import json
import os
import re

STAMP_FORMAT = 1

# Run as ``<venv python> -c READER <json args>``; args: {"requirements": [PEP 508 str], "names": [str]}.
# packaging comes from the venv itself (a venv made by pip has pip._vendor.packaging); without it nothing can be
# compared and the reader says so ("packaging": false), which makes every stamp a miss.
READER = r'''
import hashlib, json, platform, re, sys
from importlib import metadata
args = json.loads(sys.argv[1])
def norm(n):
    return re.sub(r"[-_.]+", "-", n).lower()
try:
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name
except ImportError:
    try:
        from pip._vendor.packaging.requirements import Requirement
    except ImportError:
        Requirement = None
dists = {}
for d in metadata.distributions():
    name = d.metadata.get("Name")
    if name and norm(name) not in dists:
        dists[norm(name)] = d
out = {"python": platform.python_version(), "executable": sys.executable, "packaging": Requirement is not None,
       "distributions": {k: v.version for k, v in sorted(dists.items())}, "closure": {}, "unsatisfied": [],
       "missing": []}
def record(d):
    try:
        text = d.read_text("RECORD")
    except Exception:
        text = None
    return hashlib.sha256(text.encode("utf-8")).hexdigest() if text is not None else None
# requirements are strict (what pip would resolve: the closure must be complete and satisfied); names and their
# dependencies are digested as they are (an absent dependency is digested as absent, so installing it later, or
# removing one, changes the digest; a partial install such as SGLang without optional dependencies is no miss)
queue = [(r, True) for r in args.get("requirements", [])] + [(n, False) for n in args.get("names", [])]
seen = set()
while queue and Requirement is not None:
    text, strict = queue.pop(0)
    try:
        req = Requirement(text)
    except Exception:
        if strict:
            out["unsatisfied"].append(text)
        continue
    name = norm(req.name)
    dist = dists.get(name)
    if dist is None:
        if strict:
            out["missing"].append(text)
        else:
            out["closure"].setdefault(name, {"version": None, "record": None})
        continue
    if strict and req.specifier and not req.specifier.contains(dist.version, prereleases=True):
        out["unsatisfied"].append("%s (installed %s)" % (text, dist.version))
    key = (name, tuple(sorted(req.extras)), strict)
    if key in seen:
        continue
    seen.add(key)
    out["closure"][name] = {"version": dist.version, "record": record(dist)}
    for sub in dist.requires or []:
        try:
            subreq = Requirement(sub)
        except Exception:
            continue
        if subreq.marker is not None:
            if not any(subreq.marker.evaluate({"extra": e}) for e in (list(req.extras) or [""])):
                continue
        queue.append((sub, strict))
json.dump(out, sys.stdout, sort_keys=True)
'''


def normalize(name):
    """PEP 503 name normalisation: ``Flashinfer_Python`` -> ``flashinfer-python``."""
    return re.sub(r"[-_.]+", "-", name).lower()


def inputs_digest(inputs, python=None):
    """sha256 hex of the canonical JSON of ``inputs`` (any JSON value) and the interpreter's real path.

    :param python: interpreter path or None; resolved with :func:`os.path.realpath` so that a venv re-created
        on a different base interpreter changes the digest.
    """
    payload = {"inputs": inputs, "python": os.path.realpath(python) if python else None}
    return hashlib.sha256(json.dumps(payload, sort_keys=True, separators=(",", ":")).encode("utf-8")).hexdigest()


def closure_digest(closure):
    """sha256 hex of a reader ``closure`` mapping ``{name: {"version", "record"}}`` (order-independent)."""
    items = sorted((name, item.get("version"), item.get("record")) for name, item in (closure or {}).items())
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
    """Run :data:`READER` with ``python``; returns the reader output (see the module docstring) or raises.

    :param run: ``run(argv) -> (rc, stdout, stderr)`` (AnsibleModule.run_command or a test double of it).
    :param requirements: PEP 508 strings that must be satisfied (their closure is digested).
    :param names: further distribution names whose installed dependency closure is digested as it is, without
        a version or completeness check (absent ones are digested as absent: installing one later is a miss).
    :raises RuntimeError: the interpreter failed or printed something that is not the reader's JSON.
    """
    args = json.dumps({"requirements": list(requirements), "names": list(names)})
    rc, out, err = run([python, "-c", READER, args])
    if rc != 0:
        raise RuntimeError("%s could not read its distributions (rc=%s): %s" % (python, rc, (err or out).strip()[-2000:]))
    try:
        return json.loads(out)
    except ValueError as exc:
        raise RuntimeError("%s printed no distribution JSON (%s): %s" % (python, exc, out[-2000:]))


def build_stamp(inputs_hex, state=None, files=None, result=None):
    """The stamp dict written after a step succeeded (``state`` is :func:`read_state`'s output or None)."""
    return {"format": STAMP_FORMAT, "inputs": inputs_hex, "closure": closure_digest(state["closure"]) if state else None,
            "files": dict(sorted((files or {}).items())), "result": result}


def load_stamp(path):
    """The stamp at ``path`` as a dict, or None when it is missing, unreadable or not a stamp of this format."""
    try:
        with open(path) as handle:
            stamp = json.load(handle)
    except (IOError, OSError, ValueError):
        return None
    return stamp if isinstance(stamp, dict) and stamp.get("format") == STAMP_FORMAT else None


def evaluate(stamp, inputs_hex, state=None, files=None):
    """Compare a loaded stamp with the live host; returns ``(matched: bool, reasons: [str])``.

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
        if stamp is not None and stamp.get("closure") != closure_digest(state.get("closure")):
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
        with open(path) as handle:
            if handle.read() == text:
                return False
    except (IOError, OSError):
        pass
    parent = os.path.dirname(path)
    if parent and not os.path.isdir(parent):
        os.makedirs(parent, 0o755)
    tmp = "%s.tmp.%d" % (path, os.getpid())
    with open(tmp, "w") as handle:
        handle.write(text)
    os.chmod(tmp, 0o644)
    os.rename(tmp, path)
    return True
