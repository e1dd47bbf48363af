# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang contributors
# Apache-2.0 (see LICENSE)
"""Install SGLang's own dependencies without letting pip replace the stack under it (field report B19).

SGLang's ``python/pyproject.toml`` pins ``torch==2.9.1`` (0307) or ``torch==2.13.0`` (HEAD), ``torchaudio``,
``sgl-kernel``/``sglang-kernel`` and ``flashinfer_*`` exactly. A plain ``pip install ./python`` therefore replaces a
nightly ``2.12.0.dev…+cu130`` torch and the kernels built for it. The role installs the package with ``--no-deps`` and
then the requirements computed here:

* :func:`select_requirements` filters the package's ``Requires-Dist`` (from ``importlib.metadata.requires``): extras
  and protected distributions (torch, torchaudio, torchvision, sgl-kernel, sglang-kernel, flashinfer*) are dropped,
  the rest is kept with SGLang's own version pins and environment markers (pip evaluates the markers).
* :func:`constraint_lines` pins every protected distribution that is installed to the exact version it has now,
  so pip can only fail, never swap it.
* :func:`report_changes` reads ``pip install --dry-run --report`` JSON and names every protected distribution that
  the resolution would install or replace, and who asked for it, before anything changes.
* :func:`classify_pip_failure` turns pip/uv output into one stable verdict name.

Pure Python, standard library only (packaging where importable, for the name rule): it runs on the controller
(filters) and in unit tests.
"""

from __future__ import annotations

import fnmatch
import re

from ansible_collections.blackwell.sglang.plugins.module_utils._venv_metadata import canonicalize_name

# Distributions the other roles own. Names are PEP 503-normalised; shell-style patterns are allowed.
DEFAULT_PROTECTED = (
    "torch",
    "torchaudio",
    "torchvision",
    "pytorch-triton",
    "sgl-kernel",
    "sglang-kernel",
    "flashinfer-*",
    "sglang",
)

# A requirement's project name (PEP 508): letters/digits, with . _ - inside.
_NAME_RE = re.compile(r"^\s*([A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?)")
_EXTRA_MARKER_RE = re.compile(r"""\bextra\s*==\s*['"]""")

MODES = ("all", "none")


def normalize_name(name):
    """PEP 503 normalisation: ``Flashinfer_Python`` -> ``flashinfer-python`` (the collection's one rule,
    :func:`_venv_metadata.canonicalize_name`)."""
    return canonicalize_name(name)


def requirement_name(requirement):
    """The normalised project name of a PEP 508 requirement string.

    :raises ValueError: when the string does not start with a project name.
    """
    match = _NAME_RE.match(requirement or "")
    if not match:
        raise ValueError("not a PEP 508 requirement: %r" % (requirement,))
    return normalize_name(match.group(1))


def is_extra_requirement(requirement):
    """True for ``Requires-Dist`` entries that belong to an optional extra (``…; extra == "test"``)."""
    _requirement, _sep, marker = str(requirement).partition(";")
    return bool(_EXTRA_MARKER_RE.search(marker))


def matches_any(name, patterns):
    """True when the normalised ``name`` matches one of the (normalised) shell-style ``patterns``."""
    norm = normalize_name(name)
    return any(fnmatch.fnmatchcase(norm, normalize_name(p)) for p in patterns or ())


def select_requirements(requires, mode="all", excludes=(), extra=(), protected=DEFAULT_PROTECTED):
    """Choose which of SGLang's declared dependencies to install.

    :param requires: ``importlib.metadata.requires('sglang')`` (list of PEP 508 strings; None counts as empty).
    :param mode: ``"all"`` (every non-extra dependency), ``"none"``, or a list of project names to keep (each must
        be a declared dependency; SGLang's own pin and marker for it are kept).
    :param excludes: extra names/patterns to drop (on top of ``protected``).
    :param extra: additional requirement strings appended verbatim (e.g. ``"triton==3.5.1"``).
    :param protected: names/patterns that are never installed through this path.
    :returns: dict ``requirements`` (list of strings, in metadata order, then ``extra``), ``excluded`` (list of
        ``{requirement, name, reason}`` with reason ``protected`` / ``excluded`` / ``not_selected``), ``extras_skipped``
        (count of optional-extra entries).
    :raises ValueError: on an unknown mode, a malformed requirement, or a selected name SGLang does not declare.
    """
    if isinstance(mode, str):
        if mode not in MODES:
            raise ValueError("dependencies must be 'all', 'none' or a list of names, got %r" % (mode,))
        selected = None
    elif isinstance(mode, (list, tuple)):
        selected = {normalize_name(n) for n in mode}
    else:
        raise ValueError("dependencies must be 'all', 'none' or a list of names, got %r" % (mode,))

    keep, excluded, extras_skipped, declared = [], [], 0, set()
    for req in requires or ():
        req = str(req).strip()
        if not req:
            continue
        if is_extra_requirement(req):
            extras_skipped += 1
            continue
        name = requirement_name(req)
        declared.add(name)
        if matches_any(name, protected):
            excluded.append({"requirement": req, "name": name, "reason": "protected"})
        elif matches_any(name, excludes):
            excluded.append({"requirement": req, "name": name, "reason": "excluded"})
        elif mode == "none" or (selected is not None and name not in selected):
            excluded.append({"requirement": req, "name": name, "reason": "not_selected"})
        else:
            keep.append(req)

    if selected is not None:
        unknown = sorted(selected - declared)
        if unknown:
            raise ValueError("not dependencies of this SGLang (use the extra requirements list for them): %s"
                             % ", ".join(unknown))
        blocked = sorted(n for n in selected if matches_any(n, protected))
        if blocked:
            raise ValueError("protected distributions cannot be selected here (their roles install them): %s"
                             % ", ".join(blocked))

    for req in extra or ():
        req = str(req).strip()
        if req:
            name = requirement_name(req)
            if matches_any(name, protected):
                raise ValueError("extra requirement %r names a protected distribution" % (req,))
            keep.append(req)
    return {"requirements": keep, "excluded": excluded, "extras_skipped": extras_skipped}


def constraint_lines(installed, protected=DEFAULT_PROTECTED):
    """``name==version`` for every installed distribution matching ``protected``, sorted by name.

    The version is written exactly as installed, local tag included (``torch==2.12.0.dev20260307+cu130``): pip
    then accepts only that build. ``sglang`` itself is skipped (the role just installed it from the checkout).

    :param installed: mapping of distribution name -> version (e.g. every ``importlib.metadata`` distribution).
    """
    lines = {}
    for name, version in (installed or {}).items():
        norm = normalize_name(name)
        if norm == "sglang" or not version:
            continue
        if matches_any(norm, protected):
            lines[norm] = "%s==%s" % (norm, version)
    return [lines[k] for k in sorted(lines)]


def _requirers(report_items, target):
    who = []
    for item in report_items:
        meta = item.get("metadata") or {}
        for req in meta.get("requires_dist") or ():
            if is_extra_requirement(req):
                continue
            try:
                if requirement_name(req) == target:
                    who.append(normalize_name(meta.get("name", "?")))
                    break
            except ValueError:
                continue
    return sorted(set(who))


def report_changes(report, installed=None, protected=DEFAULT_PROTECTED):
    """Protected distributions that a ``pip install --dry-run --report`` would install or replace.

    :param report: the parsed report (dict with an ``install`` list; pip >= 22.2).
    :param installed: mapping name -> version installed now (to say "replace X with Y" rather than "install").
    :returns: dict ``ok`` (bool), ``verdict`` (``ok`` / ``torch_replaced`` / ``protected_package_changed``),
        ``changes`` (list of ``{name, from, to, required_by, text}``), ``install_count``.
    """
    items = list((report or {}).get("install") or ())
    have = {normalize_name(k): v for k, v in (installed or {}).items()}
    changes = []
    for item in items:
        meta = item.get("metadata") or {}
        name = normalize_name(meta.get("name", ""))
        if not name or not matches_any(name, protected):
            continue
        change = {"name": name, "from": have.get(name), "to": meta.get("version"),
                  "required_by": _requirers(items, name)}
        change["text"] = "%s %s%s (required by %s)" % (
            "replace" if change["from"] else "install", name,
            (" %s with %s" % (change["from"], change["to"])) if change["from"] else " %s" % change["to"],
            ", ".join(change["required_by"]) or "the requirements")
        changes.append(change)
    names = {c["name"] for c in changes}
    if "torch" in names:
        verdict = "torch_replaced"
    elif changes:
        verdict = "protected_package_changed"
    else:
        verdict = "ok"
    return {"ok": not changes, "verdict": verdict, "changes": changes, "install_count": len(items)}


# Ordered: the first rule that matches names the failure.
_FAILURE_RULES = (
    ("torch_replaced", re.compile(r"(Uninstalling|Found existing installation:)\s+torch[- ]\d", re.I)),
    ("resolver_cuda_major_conflict",
     re.compile(r"(cuda-bindings|cuda-python|nvidia-[a-z0-9-]+-cu1\d|\+cu1\d\d).*(conflict|depends on)|"
                r"conflict is caused by:[\s\S]*(cuda-bindings|\+cu1\d\d)", re.I)),
    ("resolver_conflict", re.compile(r"ResolutionImpossible|conflicting dependencies|No solution found when resolving",
                                     re.I)),
    ("no_matching_distribution", re.compile(r"No matching distribution found|Could not find a version that satisfies",
                                            re.I)),
    ("network_unreachable", re.compile(r"(Max retries exceeded|Temporary failure in name resolution|"
                                       r"Failed to establish a new connection|Network is unreachable|"
                                       r"Connection (timed out|refused))", re.I)),
    ("build_failed", re.compile(r"(Failed building wheel|subprocess-exited-with-error|"
                                r"metadata-generation-failed|Failed to build)", re.I)),
    ("disk_full", re.compile(r"No space left on device", re.I)),
)


# "Could not find a version that satisfies the requirement torch==2.12.0.dev20260307+cu130 (from versions: ...)"
_NO_VERSION_RE = re.compile(r"Could not find a version that satisfies the requirement\s+([A-Za-z0-9._-]+)\s*==\s*"
                            r"([^\s(;,]+)\s*\(from versions:\s*([^)]*)\)", re.I)
_NO_DIST_RE = re.compile(r"No matching distribution found for\s+([A-Za-z0-9._-]+)\s*==\s*([^\s;,]+)", re.I)
_DEV_DATE_RE = re.compile(r"\.dev(\d{8})(?:\b|\+|$)")

NIGHTLY_REMEDY = ("the nightly index keeps only about 60 days of builds (replicate/monobase#17): install from a "
                  "wheelhouse (torch_nightly_wheelhouse, or torch_nightly_wheelhouse_mirror to archive the pinned "
                  "wheels on the controller the first time), or re-pin sglang_stack_torch_version to a listed build and "
                  "re-qualify it (FP4 probe, smoke test)")


def explain_pip_failure(text):
    """Name a pip/uv failure and say what to do.

    A ``==<version>.devYYYYMMDD`` pin that the index no longer lists is ``nightly_pin_purged`` when every listed
    nightly of that project is newer than the pin (pruned) or every one is older (the variant stopped being
    published), and ``nightly_pin_missing`` when the pin's date falls between listed dates (field report N14).

    :returns: dict ``verdict``, ``requirement`` (``name==version`` or None), ``pin_date`` (``YYYYMMDD`` or None),
        ``listed_dates`` (sorted dev dates the index offered), ``remedy`` (text, "" when none is known).
    """
    text = text or ""
    verdict = "unknown"
    for name, rule in _FAILURE_RULES:
        if rule.search(text):
            verdict = name
            break
    result = {"verdict": verdict, "requirement": None, "pin_date": None, "listed_dates": [], "remedy": ""}
    if verdict != "no_matching_distribution":
        return result
    match = _NO_VERSION_RE.search(text)
    pin = match.group(2) if match else None
    name = match.group(1) if match else None
    if not match:
        other = _NO_DIST_RE.search(text)
        if other:
            name, pin = other.group(1), other.group(2)
    if not pin:
        return result
    result["requirement"] = "%s==%s" % (name, pin)
    pin_date = _DEV_DATE_RE.search(pin)
    if not pin_date:
        return result
    result["pin_date"] = pin_date.group(1)
    listed = match.group(3) if match else ""
    dates = sorted(set(m.group(1) for m in _DEV_DATE_RE.finditer(listed)))
    result["listed_dates"] = dates
    if dates and (all(d > result["pin_date"] for d in dates) or all(d < result["pin_date"] for d in dates)):
        result["verdict"] = "nightly_pin_purged"
    elif dates:
        result["verdict"] = "nightly_pin_missing"
    else:
        return result
    result["remedy"] = NIGHTLY_REMEDY
    return result


def classify_pip_failure(text):
    """Name a pip/uv failure from its output; ``unknown`` when nothing matches (see :func:`explain_pip_failure`)."""
    return explain_pip_failure(text)["verdict"]


def protected_drift(before, after, protected=DEFAULT_PROTECTED):
    """Compare protected distributions before and after an install (the post-install assertion of B19).

    :param before: mapping name -> version before the install.
    :param after: mapping name -> version after it.
    :returns: dict ``ok``, ``verdict`` (``ok`` / ``torch_replaced`` / ``protected_package_changed``),
        ``changes`` (list of ``{name, from, to, text}``; ``to`` is None when removed, ``from`` None when newly
        installed),
        ``torch`` (the version before).
    """
    old = {normalize_name(k): v for k, v in (before or {}).items() if matches_any(k, protected)}
    new = {normalize_name(k): v for k, v in (after or {}).items() if matches_any(k, protected)}
    old.pop("sglang", None)
    new.pop("sglang", None)
    changes = [{"name": n, "from": old.get(n), "to": new.get(n),
                "text": "%s %s -> %s" % (n, old.get(n) or "absent", new.get(n) or "removed")}
               for n in sorted(set(old) | set(new)) if old.get(n) != new.get(n)]
    names = {c["name"] for c in changes}
    verdict = "torch_replaced" if "torch" in names else ("protected_package_changed" if changes else "ok")
    return {"ok": not changes, "verdict": verdict, "changes": changes, "torch": old.get("torch")}
