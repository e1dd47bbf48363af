# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang contributors
# Apache-2.0 (see LICENSE)
"""The one reader of a venv's installed distributions, and the one name normalisation.

Everything in the collection that needs to know what a venv holds (the stamps of ``venv_stamp``, the
``venv_facts`` module, the release manifest) reads it here and normalises names
with :func:`canonicalize_name`: PEP 503 (``packaging.utils.canonicalize_name`` where packaging is importable,
otherwise the exact same rule, ``re.sub(r"[-_.]+", "-", name).lower()``).

The file is both an importable module and the program that runs in the target venv: :func:`read_venv` starts the
venv's interpreter with ``-c <this file's source> <json args>`` (see docs/architecture.md, "Running code in the
target venv"). It therefore imports nothing but the standard library at the top (packaging is imported guarded,
from the venv itself or from pip's vendored copy), and nothing of the venv's packages is imported: only
``importlib.metadata`` is read, so it is fast and works without a GPU and before dependencies are installed.

Reader arguments (JSON object, every key optional):

* ``requirements``: PEP 508 strings that must be installed and satisfied; their dependency closure
  (``Requires-Dist``, markers evaluated, extras followed) must be complete;
* ``names``: distribution names whose installed closure is followed as it is (absent ones are listed as absent);
* ``versions``: names whose version is returned (``None`` when not installed);
* ``requires``: names whose ``Requires-Dist`` list is returned (``None`` when not installed);
* ``closure``: false skips the closure walk (then ``requirements``/``names`` are ignored);
* ``records``: true returns every installed distribution's version and ``RECORD`` digest (the release seal);
* ``torch_build``: true reads torch's ``torch/version.py`` (only when torch is installed; parsed, not imported:
  an import takes seconds) for ``{"version", "cuda"}`` of its build, the values ``torch.__version__`` and
  ``torch.version.cuda`` have, or ``{"error": str}`` when that file is missing or unreadable (for the release
  manifest).

Reader output: ``{"python": "3.12.3", "executable": "/opt/v/bin/python", "packaging": bool,
"distributions": {name: version}, "closure": {name: {"version": str or None, "record": sha256 hex or None,
"named": bool}}, "unsatisfied": [str], "missing": [str], "versions": {name: str or None},
"requires": {name: [str] or None}, "records": {name: {"version": str, "record": sha256 hex or None}} (with ``records``),
"torch": {...} (with ``torch_build``)}``; every name normalised by :func:`canonicalize_name` (``named``: the entry is
itself one of ``requirements``/``names``, not only a dependency of one).
"""

from __future__ import annotations

import ast
import hashlib
import json
import platform
import re
import sys

try:
    from importlib import metadata as _metadata
except ImportError:  # Python < 3.8: the reader is never run there (the stack needs >= 3.10)
    _metadata = None

try:
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name as _packaging_canonicalize
except ImportError:
    try:
        from pip._vendor.packaging.requirements import Requirement
        from pip._vendor.packaging.utils import canonicalize_name as _packaging_canonicalize
    except ImportError:
        Requirement = None
        _packaging_canonicalize = None

SEPARATORS_RE = re.compile(r"[-_.]+")


def canonicalize_name(name):
    """PEP 503 normalisation: ``Flashinfer_Python`` -> ``flashinfer-python``, ``zope.interface`` -> ``zope-interface``.

    ``packaging.utils.canonicalize_name`` where packaging is importable; otherwise the identical rule of PEP 503
    (runs of ``-``, ``_``, ``.`` become one ``-``, lower case). Surrounding white space is stripped first.
    """
    text = str(name).strip()
    if _packaging_canonicalize is not None:
        return str(_packaging_canonicalize(text))
    return SEPARATORS_RE.sub("-", text).lower()


def _record_digest(dist):
    try:
        text = dist.read_text("RECORD")
    # an unreadable RECORD is digested as absent
    except Exception:  # pylint: disable=broad-except
        text = None
    return hashlib.sha256(text.encode("utf-8")).hexdigest() if text is not None else None


def installed(dists=None):
    """``{canonical name: Distribution}`` of every distribution on ``sys.path`` (the first one of a name wins)."""
    found = {}
    for dist in (dists if dists is not None else _metadata.distributions()):
        name = dist.metadata.get("Name")
        if name and canonicalize_name(name) not in found:
            found[canonicalize_name(name)] = dist
    return found


def _closure(dists, requirements, names, out):
    # requirements are strict (what pip would resolve: the closure must be complete and satisfied); names and their
    # dependencies are taken as they are (an absent dependency is listed as absent, so installing it later, or
    # removing one, changes the digest; a partial install such as SGLang without optional dependencies is no miss)
    queue = [(r, True, True) for r in requirements] + [(n, False, True) for n in names]
    seen = set()
    while queue:
        text, strict, named = queue.pop(0)
        try:
            req = Requirement(text)
        # packaging's InvalidRequirement, by whichever import path packaging came
        except Exception:  # pylint: disable=broad-except
            if strict:
                out["unsatisfied"].append(text)
            continue
        name = canonicalize_name(req.name)
        dist = dists.get(name)
        if dist is None:
            if strict:
                out["missing"].append(text)
            else:
                entry = out["closure"].setdefault(name, {"version": None, "record": None, "named": named})
                entry["named"] = entry["named"] or named
            continue
        if strict and req.specifier and not req.specifier.contains(dist.version, prereleases=True):
            out["unsatisfied"].append("%s (installed %s)" % (text, dist.version))
        key = (name, tuple(sorted(req.extras)), strict)
        if key in seen:
            if named:
                out["closure"][name]["named"] = True
            continue
        seen.add(key)
        was_named = out["closure"].get(name, {}).get("named", False)
        out["closure"][name] = {"version": dist.version, "record": _record_digest(dist), "named": named or was_named}
        for sub in dist.requires or []:
            try:
                subreq = Requirement(sub)
            except Exception:  # pylint: disable=broad-except
                continue
            if subreq.marker is not None:
                if not any(subreq.marker.evaluate({"extra": e}) for e in (list(req.extras) or [""])):
                    continue
            queue.append((sub, strict, False))


def read(args=None, dists=None):
    """Run the reader in this interpreter; returns the reader output (see the module docstring).

    :param args: the reader arguments (dict, see the module docstring).
    :param dists: an iterable of ``importlib.metadata.Distribution`` (tests); default: this interpreter's.
    """
    args = args or {}
    by_name = installed(dists)
    out = {"python": platform.python_version(), "executable": sys.executable, "packaging": Requirement is not None,
           "distributions": dict((k, v.version) for k, v in sorted(by_name.items())), "closure": {},
           "unsatisfied": [], "missing": [], "versions": {}, "requires": {}}
    for name in args.get("versions") or ():
        dist = by_name.get(canonicalize_name(name))
        out["versions"][canonicalize_name(name)] = dist.version if dist is not None else None
    for name in args.get("requires") or ():
        dist = by_name.get(canonicalize_name(name))
        out["requires"][canonicalize_name(name)] = list(dist.requires or []) if dist is not None else None
    if args.get("closure", True) and Requirement is not None:
        _closure(by_name, list(args.get("requirements") or ()), list(args.get("names") or ()), out)
    if args.get("records"):
        out["records"] = dict((name, {"version": dist.version, "record": _record_digest(dist)})
                              for name, dist in sorted(by_name.items()))
    if args.get("torch_build"):
        out["torch"] = _torch_build(by_name["torch"]) if "torch" in by_name else {}
    return out


def _torch_build(dist):
    """``{"version", "cuda"}`` from the installed torch's ``torch/version.py``, the module ``torch.version`` is
    (``__version__ = '2.11.0+cu130'``, ``cuda: Optional[str] = '13.0'``, None on CPU builds). Parsed with
    :mod:`ast`, never executed or imported. A failure is reported as ``{"error": str}``, not raised (the manifest
    keeps going)."""
    path = dist.locate_file("torch/version.py")
    try:
        with open(str(path)) as handle:
            tree = ast.parse(handle.read(), filename=str(path))
    except (OSError, SyntaxError, ValueError) as exc:
        return {"error": "%s: %s" % (type(exc).__name__, exc)}
    values = {}
    for node in tree.body:
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets, value = [node.target], node.value
        else:
            continue
        for target in targets:
            if isinstance(target, ast.Name) and target.id in ("__version__", "cuda"):
                try:
                    values[target.id] = ast.literal_eval(value)
                except ValueError:
                    values[target.id] = None
    if "__version__" not in values:
        return {"error": "%s has no __version__" % path}
    return {"version": values["__version__"], "cuda": values.get("cuda")}


def source():
    """This file's source text: the program :func:`read_venv` hands to the venv's interpreter.

    Read through the module's loader (a file on disk, or the zip payload of an Ansible module), else from
    ``__file__``.
    """
    loader = globals().get("__loader__")
    text = None
    if loader is not None and hasattr(loader, "get_source"):
        try:
            text = loader.get_source(__name__)
        except (ImportError, OSError):
            text = None
    if not text:
        with open(__file__, encoding="utf-8") as handle:
            text = handle.read()
    return text


def read_venv(run, python, args=None):
    """Run the reader with the venv's interpreter ``python``; returns its output or raises.

    :param run: ``run(argv) -> (rc, stdout, stderr)`` (AnsibleModule.run_command or a test double of it).
    :param args: the reader arguments (dict, see the module docstring).
    :raises RuntimeError: the interpreter failed or printed something that is not the reader's JSON.
    """
    rc, out, err = run([python, "-c", source(), json.dumps(args or {}, sort_keys=True)])
    if rc != 0:
        raise RuntimeError("%s could not read its distributions (rc=%s): %s" % (python, rc, (err or out).strip()[-2000:]))
    try:
        return json.loads(out)
    except ValueError as exc:
        raise RuntimeError("%s printed no distribution JSON (%s): %s" % (python, exc, out[-2000:]))


def main(argv):
    """Entry point in the target venv: ``python -c <source> '<json args>'`` prints the reader output as JSON."""
    json.dump(read(json.loads(argv[1]) if len(argv) > 1 and argv[1] else {}), sys.stdout, sort_keys=True)


if __name__ == "__main__":
    main(sys.argv)
